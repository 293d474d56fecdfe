//! The MCP servers of `[mcp.servers]`, started in the background for an
//! agent, their tools following the tool state file.

use std::ops::Deref;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::mcp::{Mcp, McpServer};
use tokio_util::task::AbortOnDropHandle;

use crate::{LoadedConfig, ToolState};

/// The MCP servers a bot runs, for as long as it lives: dropping it stops
/// them. Derefs to the library's [`Mcp`] (`status`, `wait_settled`).
#[derive(Debug)]
pub struct McpServers {
    mcp: Mcp,
    _state: AbortOnDropHandle<()>,
}

impl Deref for McpServers {
    type Target = Mcp;

    fn deref(&self) -> &Mcp {
        &self.mcp
    }
}

impl LoadedConfig {
    /// The enabled servers of `[mcp.servers]`, by name, each ready to start
    /// or with why it can't be (a `bearer_token_env` that isn't set).
    /// Secrets are read from the environment here and never logged.
    pub fn mcp_servers(&self) -> Vec<(String, Result<McpServer, String>)> {
        let servers = &self.config.mcp.servers;
        servers
            .iter()
            .filter(|(_, server)| server.enabled)
            .map(|(name, server)| {
                let key = format!("mcp.servers.{name}");
                let built = match (&server.command, &server.url) {
                    (Some(command), _) => {
                        let mut built = McpServer::stdio(name, command).args(server.args.iter().cloned());
                        for (key, value) in &server.env {
                            built = built.env(key, value.expose());
                        }
                        for variable in &server.env_pass {
                            match std::env::var(variable) {
                                Ok(value) => built = built.env(variable, value),
                                Err(_) => tracing::warn!(
                                    server = %name,
                                    "`{key}.env_pass` names `{variable}`, which is not set; the server starts without it"
                                ),
                            }
                        }
                        if let Some(cwd) = &server.cwd {
                            built = built.cwd(cwd.relative());
                        }
                        Ok(built)
                    }
                    (None, Some(url)) => {
                        let mut built = McpServer::http(name, url);
                        for (header, value) in &server.headers {
                            built = built.header(header, value.expose());
                        }
                        match &server.bearer_token_env {
                            Some(variable) => match std::env::var(variable) {
                                Ok(token) => Ok(built.bearer_token(token)),
                                Err(_) => Err(format!(
                                    "`{key}.bearer_token_env` names `{variable}`, which is not set; set it or remove the key"
                                )),
                            },
                            None => Ok(built),
                        }
                    }
                    (None, None) => Err(format!("`{key}` needs `command` or `url`")),
                };
                let built = built.map(|s| {
                    s.trust(server.trust)
                        .timeout(Duration::from_secs(server.timeout_secs))
                });
                (name.clone(), built)
            })
            .collect()
    }

    /// Starts the [`mcp_servers`](Self::mcp_servers) for `agent` in the
    /// background (a server that can't be started is logged and left out)
    /// and applies the tool state file to their tools as they come.
    ///
    /// # Errors
    /// When the servers can't be started at all (a name the library
    /// refuses); config checks catch that first.
    ///
    /// # Panics
    /// When called outside a Tokio runtime.
    pub fn start_mcp(&self, agent: &Agent) -> Result<McpServers, ferrobot::BoxError> {
        let mut servers = Vec::new();
        for (name, server) in self.mcp_servers() {
            match server {
                Ok(server) => servers.push(server),
                Err(why) => tracing::warn!(server = %name, "MCP server not started: {why}"),
            }
        }
        let mcp = Mcp::start(agent, servers)?;
        let path = self.tool_state_path();
        let agent = agent.clone();
        // A server's tools come after the state was applied at start-up:
        // each change of the tools applies it again (a no-op when nothing
        // needs switching, so this settles at once). Subscribed here, so
        // that no change before the task runs is missed.
        let mut changes = agent.tools().changes();
        let state = tokio::spawn(async move {
            loop {
                match ToolState::load(&path) {
                    Ok(state) => state.apply(&agent),
                    Err(error) => tracing::warn!(%error, "tool state not applied to MCP tools"),
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(McpServers {
            mcp,
            _state: AbortOnDropHandle::new(state),
        })
    }
}
