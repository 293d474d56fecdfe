use ferrobot::tool::Tool;

/// Turn the lights on.
#[derive(Tool)]
struct LightsOn {
    /// The room.
    room: String,
}

fn main() {
    let _ = LightsOn::tool();
}
