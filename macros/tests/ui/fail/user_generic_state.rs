use ferrobot::tool;

/// A generic type of the user's own, named like ferrobot's `State`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct State<T>(T);

/// Set the level.
#[tool]
async fn set_level(level: State<u8>) -> u8 {
    level.0
}

fn main() {
    let _ = set_level;
}
