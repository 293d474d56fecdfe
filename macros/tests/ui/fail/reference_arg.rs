use ferrobot::tool;

/// Echo.
#[tool]
async fn echo(text: &str) {}

fn main() {}
