//! Connecting to a server (spawning it, or over HTTP), and the loop that
//! keeps it connected: reconnecting with back-off, following its tool list.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::link::Link;
use super::names::prefixed;
use super::server::Transport;
use super::tool::McpTool;
use super::{McpServer, ServerState};
use crate::Agent;

const TARGET: &str = "ferrobot::mcp";

/// The client side of one connection: it hears the server's notifications.
#[derive(Clone)]
pub(crate) struct Handler {
    relist: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.relist.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("ferrobot", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live connection: the service, the tools listed when it opened, and
/// the process group of a stdio server.
pub(crate) struct Connection {
    pub(crate) running: RunningService<RoleClient, Handler>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
    pub(crate) group: Option<Group>,
}

/// Starts or reaches the server, shakes hands and lists its tools.
pub(crate) async fn connect(server: &McpServer, relist: Arc<Notify>) -> Result<Connection, String> {
    let handler = Handler { relist };
    let (running, group) = match &server.transport {
        Transport::Stdio { .. } => {
            let (child, group) = spawn(server)?;
            let running = handler
                .serve(child)
                .await
                .map_err(|e| format!("the handshake failed: {e}"))?;
            (running, group)
        }
        Transport::Http {
            url,
            headers,
            bearer_token,
        } => {
            let transport = http(url, headers, bearer_token.as_deref())?;
            let running = handler
                .serve(transport)
                .await
                .map_err(|e| format!("the handshake failed: {e}"))?;
            (running, None)
        }
        Transport::Stream(connect) => {
            let running = handler
                .serve(connect())
                .await
                .map_err(|e| format!("the handshake failed: {e}"))?;
            (running, None)
        }
    };
    let tools = running
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("listing its tools failed: {e}"))?;
    Ok(Connection {
        running,
        tools,
        group,
    })
}

/// [`connect`] within the server's connect time-out.
pub(crate) async fn connect_in_time(
    server: &McpServer,
    relist: Arc<Notify>,
) -> Result<Connection, String> {
    let limit = server.connect_timeout;
    tokio::time::timeout(limit, connect(server, relist))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", limit.as_secs_f32())))
}

/// Spawns a stdio server in its own process group, with `PATH`, `HOME` and
/// its configured variables only, its stderr forwarded to the log.
fn spawn(server: &McpServer) -> Result<(TokioChildProcess, Option<Group>), String> {
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &server.transport
    else {
        return Err("not a stdio server".to_owned());
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
    #[cfg(unix)]
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    let (child, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start `{command}`: {e}"))?;
    let group = child.id().map(Group);
    if let Some(stderr) = stderr {
        let name = server.name.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: TARGET, server = %name, "{line}");
            }
        });
    }
    Ok((child, group))
}

type HttpTransport = rmcp::transport::StreamableHttpClientTransport<reqwest::Client>;

fn http(
    url: &str,
    headers: &[(String, String)],
    bearer_token: Option<&str>,
) -> Result<HttpTransport, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        // The value is a secret: the message names the header only.
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of the header `{name}` is not valid in a header"))?;
        custom.insert(header, value);
    }
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(crate::tls::client_config()?)
        .user_agent(concat!("ferrobot/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("could not build the HTTP client: {e}"))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(token) = bearer_token {
        config = config.auth_header(token);
    }
    Ok(HttpTransport::with_client(client, config))
}

/// A stdio server's process group, sent `SIGTERM` whole when dropped, so
/// that what it started stops with it.
#[derive(Debug)]
pub(crate) struct Group(pub(crate) u32);

impl Drop for Group {
    fn drop(&mut self) {
        terminate_group(self.0);
    }
}

/// Sends `SIGTERM` to the process group `pgid`; one already gone is fine.
pub(crate) fn terminate_group(pgid: u32) {
    #[cfg(unix)]
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    #[cfg(not(unix))]
    let _ = pgid;
}

/// Who owns which tool names in the agent, across the servers of one
/// [`Mcp`](super::Mcp).
pub(crate) struct Registrar {
    pub(crate) agent: Agent,
    /// Name in the agent → the server whose tool it is, and the tool.
    pub(crate) owned: std::sync::Mutex<HashMap<String, (String, Arc<McpTool>)>>,
}

impl Registrar {
    /// Registers the server's tools as listed now, unregisters those it no
    /// longer lists, and refuses (with a warning) tools whose schema
    /// ferrobot can't use or whose name is taken.
    pub(crate) fn install(&self, link: &Arc<Link>, listed: &[rmcp::model::Tool]) {
        let server = link.server.name.as_str();
        let mut refused = Vec::new();
        let mut next: Vec<McpTool> = Vec::new();
        for remote in listed {
            let name = prefixed(server, &remote.name);
            let refuse = |why: String| {
                tracing::warn!(target: TARGET, server, tool = %remote.name, "tool refused: {why}");
                format!("{}: {why}", remote.name)
            };
            if next.iter().any(|t| crate::Tool::name(t) == name) {
                refused.push(refuse(format!(
                    "its name `{name}` is taken by another tool of this server"
                )));
                continue;
            }
            match McpTool::new(name, remote, link) {
                Ok(tool) => next.push(tool),
                Err(why) => refused.push(refuse(why)),
            }
        }
        let registry = self.agent.tools();
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<String> = owned
            .iter()
            .filter(|(name, (s, _))| {
                s == server && !next.iter().any(|t| crate::Tool::name(t) == name.as_str())
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            owned.remove(&name);
            registry.unregister(&name);
        }
        let mut names = Vec::new();
        for tool in next {
            let name = crate::Tool::name(&tool).to_owned();
            match owned.get(&name) {
                Some((s, old)) if s == server => {
                    if !old.same_as(&tool) {
                        let tool = Arc::new(tool);
                        registry.unregister(&name);
                        registry.register(Arc::clone(&tool) as Arc<dyn crate::Tool>);
                        owned.insert(name.clone(), (server.to_owned(), tool));
                    }
                }
                Some((other, _)) => {
                    let why =
                        format!("its name `{name}` is taken by a tool of the MCP server `{other}`");
                    tracing::warn!(target: TARGET, server, tool = %name, "tool refused: {why}");
                    refused.push(format!("{name}: {why}"));
                    continue;
                }
                None if registry.get(&name).is_some() => {
                    let why = format!("the agent already has a tool named `{name}`");
                    tracing::warn!(target: TARGET, server, tool = %name, "tool refused: {why}");
                    refused.push(format!("{name}: {why}"));
                    continue;
                }
                None => {
                    let tool = Arc::new(tool);
                    registry.register(Arc::clone(&tool) as Arc<dyn crate::Tool>);
                    owned.insert(name.clone(), (server.to_owned(), tool));
                }
            }
            names.push(name);
        }
        drop(owned);
        link.set_tools(names, refused);
    }

    /// Unregisters every tool of `server`.
    pub(crate) fn uninstall(&self, server: &str) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<String> = owned
            .iter()
            .filter(|(_, (s, _))| s == server)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            owned.remove(&name);
            self.agent.tools().unregister(&name);
        }
    }

    /// The instructions of `server`'s section of the system prompt.
    fn instruct(&self, server: &str, text: Option<&str>) {
        let source = format!("mcp:{server}");
        match text {
            Some(text) => self.agent.instructions().set(source, text),
            None => {
                self.agent.instructions().remove(&source);
            }
        }
    }
}

/// Keeps one server connected for as long as the task runs: connects,
/// registers its tools, follows their changes, and after a failure or a
/// lost connection tries again after a delay that doubles up to the cap
/// (back to the first once a connection held for the cap).
pub(crate) async fn supervise(link: Arc<Link>, registrar: Arc<Registrar>) {
    let server = &link.server;
    let (first, max) = server.reconnect;
    let mut delay = first;
    let mut ever_connected = false;
    loop {
        match connect_in_time(server, Arc::clone(&link.relist)).await {
            Ok(connection) => {
                ever_connected = true;
                let since = Instant::now();
                let why = connected(&link, &registrar, connection).await;
                if since.elapsed() >= max {
                    delay = first;
                }
                tracing::warn!(target: TARGET, server = %server.name, "disconnected: {why}; reconnecting in {} s", delay.as_secs_f32());
                link.down(ServerState::Reconnecting(why));
            }
            Err(why) => {
                tracing::warn!(target: TARGET, server = %server.name, "could not connect: {why}; retrying in {} s", delay.as_secs_f32());
                link.down(if ever_connected {
                    ServerState::Reconnecting(why)
                } else {
                    ServerState::Failed(why)
                });
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max);
    }
}

/// Runs a live connection until it ends; returns why it ended.
async fn connected(link: &Arc<Link>, registrar: &Registrar, connection: Connection) -> String {
    let Connection {
        running,
        tools,
        group,
    } = connection;
    let peer = running.peer().clone();
    let name = link.server.name.as_str();
    let info = peer.peer_info();
    link.set_peer(peer.clone());
    registrar.instruct(name, info.as_ref().and_then(|i| i.instructions.as_deref()));
    registrar.install(link, &tools);
    link.connected(group.as_ref().map(|g| g.0));
    tracing::info!(target: TARGET, server = %name, tools = tools.len(), "connected");
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let why = loop {
        tokio::select! {
            quit = &mut waiting => break match quit {
                Ok(reason) => format!("the connection closed ({reason:?})"),
                Err(error) => format!("the connection's task failed: {error}"),
            },
            () = link.relist.notified() => match peer.list_all_tools().await {
                Ok(tools) => registrar.install(link, &tools),
                Err(error) => tracing::warn!(target: TARGET, server = %name, "listing the changed tools failed: {error}"),
            },
            () = link.lost.notified() => break "a call found the connection closed".to_owned(),
        }
    };
    drop(group);
    why
}
