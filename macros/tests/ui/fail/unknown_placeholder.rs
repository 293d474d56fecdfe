use ferrobot::tool;

/// Delete a file.
#[tool(confirm = "Delete {file}?")]
async fn delete(path: String) {}

fn main() {}
