//! MCP servers' tools in an agent: a server written here for the faults
//! (`faults`), and npm's reference servers, stdio and HTTP (`npm`).

mod fake;
mod faults;
mod npm;

use std::time::Duration;

use ferrobot::testing::RecordedRequest;
use ferrobot::{Agent, ToolResult};

/// The tool results the model was sent last in `request`.
pub(crate) fn results(request: &RecordedRequest) -> Vec<ToolResult> {
    request
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .cloned()
        .collect()
}

/// Waits until `check` holds, for up to `limit`.
pub(crate) async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// The names of the agent's tools.
pub(crate) fn tool_names(agent: &Agent) -> Vec<String> {
    agent
        .tools()
        .tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect()
}
