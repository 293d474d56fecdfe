use ferrobot::tool;

/// Echo.
#[tool(retry = 3)]
async fn echo(text: String) {}

fn main() {}
