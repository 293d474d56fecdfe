use ferrobot::testing::MockProvider;
use ferrobot::{Agent, tool};

/// Set the heating.
#[tool(confirm = "Heat to {celsius} °C?")]
async fn heat(degrees: f64) -> String {
    format!("{degrees}")
}

fn main() {
    // Only the placeholder is reported: `heat` is still a tool, and its
    // function is still there.
    let _agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(heat)
        .build();
    let _ = heat::run(20.0);
}
