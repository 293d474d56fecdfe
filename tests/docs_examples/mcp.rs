//! The examples of `docs/mcp.md` (feature `mcp`).

use ferrobot::testing::MockProvider;

/// Needs npm and a reachable HTTP server: compiled, not run.
#[allow(dead_code)]
async fn starting_servers(provider: MockProvider) -> Result<(), Box<dyn std::error::Error>> {
    use std::time::Duration;
    use ferrobot::Agent;
    use ferrobot::mcp::{Mcp, McpServer, Trust};

    let agent = Agent::builder().provider(provider).build();
    let mcp = Mcp::start(&agent, [
        // A program, over stdio.
        McpServer::stdio("files", "npx")
            .args(["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"])
            .trust(Trust::All),
        // A URL, over streamable HTTP; the token from the environment.
        McpServer::http("search", "https://mcp.example.com/mcp")
            .bearer_token(std::env::var("SEARCH_TOKEN").unwrap_or_default())
            .timeout(Duration::from_secs(20)),
    ])?;

    // Nothing waits for them; a CLI doing a single turn may.
    mcp.wait_connected(Duration::from_secs(30)).await;
    for server in mcp.status() {
        println!("{}: {} — {}", server.name, server.state, server.tools.join(", "));
    }
    Ok(())
}

#[tokio::test]
async fn instructions() -> ferrobot::Result<()> {
    let mock = MockProvider::replying("It's 21 °C.");
    let agent = ferrobot::Agent::builder().provider(mock.clone()).build();
    agent.instructions().set("weather", "Temperatures are in Celsius.");
    let reply = agent.handle("alice", "how warm is it?").await?;
    assert!(agent.instructions().remove("weather"));
    assert_eq!(reply.text, "It's 21 °C.");
    assert_eq!(mock.requests()[0].system.as_deref(), Some("Temperatures are in Celsius."));
    Ok(())
}
