use ferrobot::tool;

/// Echo.
#[tool(timeout = "soon")]
async fn echo(text: String) {}

fn main() {}
