use ferrobot::tool;
use ferrobot::tool::State;

/// Walk.
#[tool]
async fn walk(walk: String) {}

struct Boiler;

/// Heat.
#[tool]
async fn heat(State(heat): State<Boiler>) {}

fn main() {}
