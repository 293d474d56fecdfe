//! `ferrobot mcp list`, and the MCP servers' part of `doctor`.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::testing::MockProvider;
use ferrobot_app::LoadedConfig;

/// Each server of `[mcp.servers]`: its state once it answered or failed
/// (or `wait` passed), its tools by the names the model sees, the tools it
/// offers that were refused and why; disabled servers and those that can't
/// start are named too.
pub(crate) async fn list(loaded: &LoadedConfig, wait: Duration) -> anyhow::Result<ExitCode> {
    let servers = &loaded.config.mcp.servers;
    if servers.is_empty() {
        out!("no MCP servers; add one as [mcp.servers.NAME] in the config (see docs/mcp.md)");
        return Ok(ExitCode::SUCCESS);
    }
    // An agent with the bot's own tools, so that a name an MCP tool would
    // take from one shows as refused. Its model is never called.
    let agent = Agent::builder()
        .provider(MockProvider::new())
        .tools(loaded.tools().map_err(|e| anyhow::anyhow!(e))?)
        .build();
    let mcp = loaded.start_mcp(&agent).map_err(|e| anyhow::anyhow!(e))?;
    mcp.wait_settled(wait).await;
    let running = mcp.status();
    let not_started = loaded.mcp_servers();
    for (name, server) in servers {
        if !server.enabled {
            out!("{name}: disabled");
            continue;
        }
        if let Some(status) = running.iter().find(|s| s.name == *name) {
            out!("{name}: {} ({})", status.state, status.target);
            for tool in &status.tools {
                let summary = agent
                    .tools()
                    .get(tool)
                    .map(|t| {
                        t.spec()
                            .description
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .unwrap_or_default();
                out!("  {tool:<40} {summary}");
            }
            for refused in &status.refused {
                out!("  refused: {refused}");
            }
        } else if let Some((_, Err(why))) = not_started.iter().find(|(n, _)| n == name) {
            out!("{name}: not started: {why}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Connects to each enabled server with a time-out and says how it went;
/// true when every one answered.
pub(crate) async fn doctor(loaded: &LoadedConfig) -> bool {
    let mut well = true;
    let probes = loaded
        .mcp_servers()
        .into_iter()
        .map(|(name, server)| async move {
            let found = match server {
                Ok(server) => server
                    .connect_timeout(Duration::from_secs(15))
                    .probe()
                    .await
                    .map_err(|e| e.to_string()),
                Err(why) => Err(why),
            };
            (name, found)
        });
    for (name, found) in futures_util::future::join_all(probes).await {
        match found {
            Ok(probe) => out!(
                "mcp {name}: ok, {} tools ({})",
                probe.tools.len(),
                probe.server
            ),
            Err(why) => {
                well = false;
                out!("mcp {name}: failed: {why}");
            }
        }
    }
    well
}
