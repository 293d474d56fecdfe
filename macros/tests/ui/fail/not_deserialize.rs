use ferrobot::tool;

struct Opaque;

/// Use it.
#[tool]
async fn use_it(value: Opaque) {}

fn main() {}
