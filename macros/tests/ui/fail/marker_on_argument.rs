use ferrobot::tool;

/// Count.
#[tool]
async fn count(#[state] n: u32, #[ctx] c: String) -> u32 {
    let _ = c;
    n
}

fn main() {
    let _ = count;
}
