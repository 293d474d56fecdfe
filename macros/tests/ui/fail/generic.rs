use ferrobot::tool;

/// Echo.
#[tool]
async fn echo<T: serde::de::DeserializeOwned>(value: T) {}

fn main() {}
