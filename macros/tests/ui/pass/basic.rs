use ferrobot::tool::{State, ToolContext};
use ferrobot::{Agent, testing::MockProvider, tool};

struct Db;

/// Show disk usage for a mount point.
#[tool(confirm = "Inspect {path}?", timeout = "30s", exclusive, platforms = ["linux", "macos"], requires = ["df"])]
async fn disk_usage(
    ctx: ToolContext,
    State(_db): State<Db>,
    /// Mount point to inspect, e.g. "/".
    path: String,
    /// Report in human units.
    human: Option<bool>,
) -> Result<String, std::io::Error> {
    let _ = (ctx.conversation(), human);
    Ok(path)
}

/// Add two numbers.
#[tool(name = "plus")]
fn add(/** First. */ a: i64, /** Second. */ b: i64) -> i64 {
    a + b
}

fn main() {
    let _agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(disk_usage)
        .tool(add)
        .state(Db)
        .build();
    assert_eq!(add::run(2, 3), 5);
}
