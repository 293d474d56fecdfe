//! Tools of MCP servers beside native ones (feature `mcp`).
//!
//! Describe each server with [`McpServer`] (a program over stdio, or a
//! streamable HTTP URL), then [`Mcp::start`] them for an [`Agent`]: each
//! connects in the background, never holding up start-up or a turn, and
//! its tools join the agent's [`ToolRegistry`](crate::tool::ToolRegistry)
//! as `server__tool` once it answers — usable from the next turn. A server
//! that goes away is reconnected with back-off; its tools stay listed but
//! unavailable meanwhile. Its instructions join the system prompt
//! ([`Agent::instructions`]); a change of its tool list
//! (`notifications/tools/list_changed`) is followed.
//!
//! MCP tools are ordinary [`Tool`](crate::Tool)s: their arguments are
//! checked against the server's schema before anyone is asked, the
//! [`Policy`](crate::policy::Policy) and confirmations apply, and they can
//! be disabled. Their annotations become [`Effects`](crate::tool::Effects)
//! as the server's [`Trust`] says. A call has the server's
//! [`timeout`](McpServer::timeout); a call cut short (time-out, cancelled
//! turn) is cancelled on the server (`notifications/cancelled`). Results'
//! text is joined, their images are shown to the model, an `isError`
//! result is an error the model reads, other content is named in a line.
//!
//! Built on `rmcp`, MCP's official Rust SDK. Not offered: the older
//! HTTP+SSE transport (`rmcp` has no client for it), OAuth (give a token
//! with [`McpServer::bearer_token`]), sampling, elicitation, resources and
//! prompts.
//!
//! # Examples
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ferrobot::mcp::{Mcp, McpServer};
//! use ferrobot::{Agent, testing::MockProvider};
//!
//! let agent = Agent::builder().provider(MockProvider::replying("ok")).build();
//! let mcp = Mcp::start(&agent, [
//!     McpServer::stdio("files", "npx").args(["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]),
//! ])?;
//! mcp.wait_connected(Duration::from_secs(30)).await;
//! for server in mcp.status() {
//!     println!("{}: {} ({})", server.name, server.state, server.tools.join(", "));
//! }
//! # Ok(()) }
//! ```

mod connection;
mod effects;
mod link;
mod names;
mod server;
mod tool;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::connection::{Registrar, connect_in_time, supervise, terminate_group};
use self::link::Link;
use crate::Agent;

pub use server::{McpServer, Trust};

/// The MCP servers of one agent, connected and kept connected in the
/// background for as long as this handle lives. Dropping it stops every
/// server (stdio ones with their process group), unregisters their tools
/// and removes their instructions.
pub struct Mcp {
    links: Vec<Arc<Link>>,
    registrar: Arc<Registrar>,
    tasks: Vec<JoinHandle<()>>,
    changes: watch::Receiver<()>,
}

impl fmt::Debug for Mcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mcp")
            .field("servers", &self.status())
            .finish_non_exhaustive()
    }
}

impl Mcp {
    /// Starts connecting to `servers` in the background and returns at
    /// once; each server's tools are registered in `agent` as it connects.
    ///
    /// # Errors
    /// [`McpError::Name`] when a server's name can't prefix tool names, or
    /// two servers share one. Nothing is started then.
    ///
    /// # Panics
    /// When called outside a Tokio runtime.
    pub fn start(
        agent: &Agent,
        servers: impl IntoIterator<Item = McpServer>,
    ) -> Result<Self, McpError> {
        let servers: Vec<McpServer> = servers.into_iter().collect();
        for (i, server) in servers.iter().enumerate() {
            names::check_server_name(&server.name).map_err(McpError::Name)?;
            if servers[..i].iter().any(|s| s.name == server.name) {
                return Err(McpError::Name(format!(
                    "two MCP servers are named {:?}; give each its own name",
                    server.name
                )));
            }
        }
        let (changes, receiver) = watch::channel(());
        let changes = Arc::new(changes);
        let registrar = Arc::new(Registrar {
            agent: agent.clone(),
            owned: std::sync::Mutex::default(),
        });
        let links: Vec<Arc<Link>> = servers
            .into_iter()
            .map(|server| Arc::new(Link::new(server, Arc::clone(&changes))))
            .collect();
        let tasks = links
            .iter()
            .map(|link| tokio::spawn(supervise(Arc::clone(link), Arc::clone(&registrar))))
            .collect();
        Ok(Self {
            links,
            registrar,
            tasks,
            changes: receiver,
        })
    }

    /// Each server's state and tools, in the order given to
    /// [`start`](Self::start).
    pub fn status(&self) -> Vec<ServerStatus> {
        self.links.iter().map(|link| link.status()).collect()
    }

    /// Waits until every server is connected, or `timeout` passed. Returns
    /// whether all are.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |state| matches!(state, ServerState::Connected))
            .await
    }

    /// Waits until every server connected or failed its first attempt, or
    /// `timeout` passed (for a CLI's listing). Returns whether all did.
    pub async fn wait_settled(&self, timeout: Duration) -> bool {
        self.wait_until(timeout, |state| !matches!(state, ServerState::Connecting))
            .await
    }

    async fn wait_until(&self, timeout: Duration, done: impl Fn(&ServerState) -> bool) -> bool {
        let mut changes = self.changes.clone();
        let all = |links: &[Arc<Link>]| links.iter().all(|l| done(&l.state()));
        let wait = async {
            loop {
                if all(&self.links) {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        all(&self.links)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        for link in &self.links {
            // At once, not when the aborted task is next polled: the runtime
            // may be shutting down.
            if let Some(pid) = link.pid() {
                terminate_group(pid);
            }
            self.registrar.uninstall(&link.server.name);
            self.registrar
                .agent
                .instructions()
                .remove(&format!("mcp:{}", link.server.name));
        }
    }
}

/// Checks that `name` can name a server: a letter, then letters, digits,
/// `_` or `-`, at most 32 characters, no `__` (which separates it from its
/// tools' names). [`Mcp::start`] checks it too.
///
/// # Errors
/// [`McpError::Name`] saying what a name may hold.
///
/// # Examples
/// ```
/// assert!(ferrobot::mcp::check_name("files").is_ok());
/// assert!(ferrobot::mcp::check_name("my files").is_err());
/// ```
pub fn check_name(name: &str) -> Result<(), McpError> {
    names::check_server_name(name).map_err(McpError::Name)
}

impl McpServer {
    /// Connects once, lists the tools, and disconnects (stopping a stdio
    /// server): a health check (`ferrobot doctor`). Takes at most the
    /// [`connect_timeout`](Self::connect_timeout).
    ///
    /// # Errors
    /// [`McpError::Connect`] saying why the server could not be reached or
    /// listed.
    pub async fn probe(&self) -> Result<Probe, McpError> {
        let relist = Arc::new(tokio::sync::Notify::new());
        let connection =
            connect_in_time(self, relist)
                .await
                .map_err(|reason| McpError::Connect {
                    server: self.name.clone(),
                    reason,
                })?;
        let info = connection.running.peer().peer_info();
        let probe = Probe {
            server: info
                .as_ref()
                .and_then(|i| i.server_info.as_ref())
                .map(|i| format!("{} {}", i.name, i.version))
                .unwrap_or_default(),
            tools: connection
                .tools
                .iter()
                .map(|t| names::prefixed(&self.name, &t.name))
                .collect(),
            instructions: info.as_ref().and_then(|i| i.instructions.clone()),
        };
        let mut running = connection.running;
        let _ = tokio::time::timeout(Duration::from_secs(5), running.close()).await;
        drop(connection.group);
        Ok(probe)
    }
}

/// What [`McpServer::probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Probe {
    /// The server's name and version as it gives them; empty when it
    /// doesn't.
    pub server: String,
    /// Its tools, by the names the agent would give them.
    pub tools: Vec<String>,
    /// Its instructions, if any.
    pub instructions: Option<String>,
}

/// Where a server stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// The first attempt is under way.
    #[default]
    Connecting,
    /// Its tools are usable.
    Connected,
    /// It was never reached, for this reason; tried again with back-off.
    Failed(String),
    /// It was connected and went away, for this reason; tried again with
    /// back-off. Its tools are unavailable meanwhile.
    Reconnecting(String),
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerState::Connecting => f.write_str("connecting"),
            ServerState::Connected => f.write_str("connected"),
            ServerState::Failed(reason) => write!(f, "failed: {reason}"),
            ServerState::Reconnecting(reason) => write!(f, "reconnecting: {reason}"),
        }
    }
}

/// One server as [`Mcp::status`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// Its name, the prefix of its tools.
    pub name: String,
    /// Its command line or URL, without secrets.
    pub target: String,
    /// Where it stands.
    pub state: ServerState,
    /// Its tools registered in the agent, by their names there.
    pub tools: Vec<String>,
    /// Its tools left out, each with why ("`name`: its input schema …").
    pub refused: Vec<String>,
    /// The process (and process group) id of a connected stdio server.
    pub pid: Option<u32>,
}

/// Why MCP servers could not be started or reached.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server's name can't prefix tool names, or is used twice.
    #[error("{0}")]
    Name(String),
    /// The server could not be reached or listed.
    #[error("could not connect to the MCP server `{server}`: {reason}")]
    Connect {
        /// The server's name.
        server: String,
        /// Why, in words.
        reason: String,
    },
}
