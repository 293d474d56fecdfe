use ferrobot::tool;

/// `&String` arrives as `&str`, `&Vec<T>` as `&[T]`.
fn known_room(celsius: &f64, room: &str, _tags: &[String]) -> Result<(), String> {
    if room.is_empty() || celsius.is_nan() {
        return Err("name a room".into());
    }
    Ok(())
}

/// Set the heating of a room.
#[tool(check = known_room, confirm = "Heat {room} to {celsius} °C?")]
async fn heat(
    /// Degrees Celsius.
    #[schemars(range(min = 5, max = 30))]
    celsius: f64,
    /// The room.
    #[schemars(length(min = 1, max = 40), regex(pattern = r"^[a-z ]+$"))]
    room: String,
    /// Labels.
    tags: Vec<String>,
) -> String {
    format!("{room}: {celsius} {tags:?}")
}

fn main() {
    let _ = heat;
}
