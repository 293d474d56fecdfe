use ferrobot::tool;

/// Echo.
#[tool]
async fn echo(value: impl std::fmt::Display) {}

fn main() {}
