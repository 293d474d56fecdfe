use ferrobot::tool;

#[tool(timeout = "later")]
async fn everything_wrong(text: &str, value: impl Clone) {}

fn main() {}
