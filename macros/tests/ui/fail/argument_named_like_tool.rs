use ferrobot::tool;

/// Walk.
#[tool]
async fn walk(walk: String) {}

fn main() {}
