use ferrobot::tool;

#[tool]
async fn undocumented(text: String) {}

fn main() {}
