use ferrobot::tool;

/// Echo.
#[tool(retries = 3)]
async fn echo(text: String) {}

fn main() {}
