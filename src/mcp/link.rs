//! What the background task of one server shares with its tools and the
//! [`Mcp`](super::Mcp) handle: the live connection, its state, its tools.

use std::sync::{Arc, Mutex, RwLock};

use rmcp::RoleClient;
use rmcp::service::{Peer, ServiceError};
use tokio::sync::{Notify, watch};

use super::{McpServer, ServerState, ServerStatus};

pub(crate) struct Link {
    pub(crate) server: McpServer,
    peer: RwLock<Option<Peer<RoleClient>>>,
    status: Mutex<Status>,
    /// Marked on every change of any server's status, for the handle's waits.
    changes: Arc<watch::Sender<()>>,
    /// `notifications/tools/list_changed` came: list the tools again.
    pub(crate) relist: Arc<Notify>,
    /// A call found the connection gone before the connection's task did.
    pub(crate) lost: Notify,
}

#[derive(Default)]
struct Status {
    state: ServerState,
    tools: Vec<String>,
    refused: Vec<String>,
    pid: Option<u32>,
}

impl Link {
    pub(crate) fn new(server: McpServer, changes: Arc<watch::Sender<()>>) -> Self {
        Self {
            server,
            peer: RwLock::new(None),
            status: Mutex::new(Status::default()),
            changes,
            relist: Arc::new(Notify::new()),
            lost: Notify::new(),
        }
    }

    /// The live connection, or why there is none, in words for the model
    /// and `availability`.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let peer = self.peer.read().unwrap_or_else(|e| e.into_inner());
        if let Some(peer) = peer.as_ref().filter(|p| !p.is_transport_closed()) {
            return Ok(peer.clone());
        }
        let name = &self.server.name;
        Err(match self.state() {
            ServerState::Connecting | ServerState::Connected => {
                format!("the MCP server `{name}` is not connected yet; try again shortly")
            }
            ServerState::Failed(reason) => {
                format!("the MCP server `{name}` could not be reached ({reason}); retrying")
            }
            ServerState::Reconnecting(reason) => {
                format!("the MCP server `{name}` is reconnecting ({reason})")
            }
        })
    }

    /// The live connection, before its tools are registered, so that none
    /// of them is ever registered without it.
    pub(crate) fn set_peer(&self, peer: Peer<RoleClient>) {
        *self.peer.write().unwrap_or_else(|e| e.into_inner()) = Some(peer);
    }

    /// Connected, its tools registered: what [`Mcp::wait_connected`](super::Mcp::wait_connected) waits for.
    pub(crate) fn connected(&self, pid: Option<u32>) {
        self.update(|s| {
            s.state = ServerState::Connected;
            s.pid = pid;
        });
    }

    /// The connection ended or an attempt failed: `state` says which.
    pub(crate) fn down(&self, state: ServerState) {
        *self.peer.write().unwrap_or_else(|e| e.into_inner()) = None;
        self.update(|s| {
            s.state = state;
            s.pid = None;
        });
    }

    pub(crate) fn set_tools(&self, tools: Vec<String>, refused: Vec<String>) {
        self.update(|s| {
            s.tools = tools;
            s.refused = refused;
        });
    }

    /// A call failed: when the transport is gone, the connection's task is
    /// told to reconnect.
    pub(crate) fn call_failed(&self, error: &ServiceError) {
        if matches!(
            error,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) {
            self.lost.notify_one();
        }
    }

    pub(crate) fn state(&self) -> ServerState {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .state
            .clone()
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).pid
    }

    pub(crate) fn status(&self) -> ServerStatus {
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        ServerStatus {
            name: self.server.name.clone(),
            target: self.server.describe(),
            state: status.state.clone(),
            tools: status.tools.clone(),
            refused: status.refused.clone(),
            pid: status.pid,
        }
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        change(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
        self.changes.send_replace(());
    }
}
