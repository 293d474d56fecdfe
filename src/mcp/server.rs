//! One MCP server, as the program describes it: how to reach it, how far
//! to trust its annotations, its time-outs.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use serde::{Deserialize, Serialize};

/// An MCP server to take tools from: a program spoken to over its stdin
/// and stdout ([`stdio`](Self::stdio)), or a URL speaking streamable HTTP
/// ([`http`](Self::http)).
///
/// Its tools are registered as `NAME__TOOL` (see [`Mcp`](super::Mcp)).
/// Values of the environment and headers are never logged.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::mcp::{McpServer, Trust};
///
/// let files = McpServer::stdio("files", "npx")
///     .args(["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"])
///     .env("NODE_OPTIONS", "--max-old-space-size=256")
///     .trust(Trust::All)
///     .timeout(Duration::from_secs(20));
/// let search = McpServer::http("search", "https://mcp.example.com/mcp")
///     .header("X-Team", "ops")
///     .bearer_token(std::env::var("SEARCH_TOKEN").unwrap_or_default());
/// assert_eq!(files.name(), "files");
/// # let _ = search;
/// ```
#[derive(Clone)]
pub struct McpServer {
    pub(crate) name: String,
    pub(crate) transport: Transport,
    pub(crate) trust: Trust,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) reconnect: (Duration, Duration),
}

#[derive(Clone)]
pub(crate) enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        bearer_token: Option<String>,
    },
    Stream(Arc<Connector>),
}

/// Opens a byte stream to a server, once per connection attempt.
pub(crate) type Connector = dyn Fn() -> Box<dyn Io> + Send + Sync;

/// A byte stream both ways, as [`McpServer::stream`] takes it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

impl McpServer {
    /// A server started as `command`, spoken to over its stdin and stdout.
    ///
    /// It runs in its own process group (stopped whole, with `SIGTERM`, when
    /// the [`Mcp`](super::Mcp) handle is dropped) with a minimal
    /// environment: `PATH` and `HOME` from this process, and the variables
    /// given with [`env`](Self::env). What it writes on stderr goes to the
    /// log (tracing target `ferrobot::mcp`, level `info`).
    pub fn stdio(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self::new(
            name.into(),
            Transport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            },
        )
    }

    /// A server at `url`, spoken to over streamable HTTP (MCP's HTTP
    /// transport since 2025-03-26). The older HTTP+SSE transport is not
    /// offered: `rmcp`, the SDK ferrobot uses, has no client for it.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(
            name.into(),
            Transport::Http {
                url: url.into(),
                headers: Vec::new(),
                bearer_token: None,
            },
        )
    }

    /// A server reached over a byte stream the program opens, speaking
    /// MCP's stdio framing (one JSON-RPC message a line): a server in this
    /// process over a [`tokio::io::duplex`] pair, a Unix socket. `connect`
    /// is called for each connection attempt.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::mcp::McpServer;
    /// let local = McpServer::stream("local", || {
    ///     let (client, _server) = tokio::io::duplex(64 * 1024);
    ///     // …serve MCP on `_server`, e.g. with rmcp's `ServiceExt::serve`.
    ///     client
    /// });
    /// assert_eq!(local.describe(), "(a stream)");
    /// ```
    pub fn stream<S, F>(name: impl Into<String>, connect: F) -> Self
    where
        F: Fn() -> S + Send + Sync + 'static,
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let connect: Arc<Connector> = Arc::new(move || Box::new(connect()) as Box<dyn Io>);
        Self::new(name.into(), Transport::Stream(connect))
    }

    fn new(name: String, transport: Transport) -> Self {
        Self {
            name,
            transport,
            trust: Trust::default(),
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            reconnect: (Duration::from_secs(1), Duration::from_secs(60)),
        }
    }

    /// Arguments of a stdio server's command. Ignored for HTTP.
    #[must_use]
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        if let Transport::Stdio { args: all, .. } = &mut self.transport {
            all.extend(args.into_iter().map(Into::into));
        }
        self
    }

    /// A variable of a stdio server's environment, beside `PATH` and
    /// `HOME`; never logged. Ignored for HTTP.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Transport::Stdio { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio server. By default, this
    /// process's. Ignored for HTTP.
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Transport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// A header sent with every request to an HTTP server; its value is
    /// never logged. Ignored for stdio.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Transport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// A bearer token sent with every request to an HTTP server
    /// (`Authorization: Bearer …`); never logged. Ignored for stdio.
    #[must_use]
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Transport::Http { bearer_token, .. } = &mut self.transport {
            *bearer_token = Some(token.into());
        }
        self
    }

    /// How far the server's tool annotations are trusted. By default,
    /// [`Trust::ReadOnlyHints`].
    #[must_use]
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// How long one tool call may take; past it the call is cancelled
    /// (`notifications/cancelled`) and the model told. By default, 60 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long connecting (starting, the handshake, the list of tools) may
    /// take before the attempt counts as failed. By default, 30 s.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The wait before reconnecting after a failure, doubled after each
    /// failure up to `max`, and back to `first` once a connection held for
    /// `max`. By default, 1 s to 60 s.
    #[must_use]
    pub fn reconnect_delay(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect = (first, max.max(first));
        self
    }

    /// The server's name, the prefix of its tools' names.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool-call time-out ([`timeout`](Self::timeout)).
    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }

    /// What the server is, without secrets: the command and its arguments,
    /// or the URL.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut line = command.clone();
                for arg in args {
                    line.push(' ');
                    line.push_str(arg);
                }
                line
            }
            Transport::Http { url, .. } => url.clone(),
            Transport::Stream(_) => "(a stream)".to_owned(),
        }
    }
}

impl fmt::Debug for McpServer {
    // Environment values, headers and tokens are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("McpServer");
        s.field("name", &self.name);
        match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                s.field("command", command).field("args", args).field(
                    "env",
                    &env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                );
            }
            Transport::Http { url, headers, .. } => {
                s.field("url", url).field(
                    "headers",
                    &headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                );
            }
            Transport::Stream(_) => {
                s.field("stream", &"…");
            }
        }
        s.field("trust", &self.trust)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// How far a server's tool annotations are trusted, which decides what its
/// tools' calls do without a rule ([`Effects`](crate::tool::Effects) and
/// the [`Policy`](crate::policy::Policy)'s defaults).
///
/// MCP's hints default to the careful side: a tool without annotations may
/// be destructive (`destructiveHint` defaults to true) and reaches the open
/// world.
///
/// # Examples
/// ```
/// use ferrobot::mcp::Trust;
/// let trust: Trust = serde_json::from_str(r#""read_only_hints""#).unwrap();
/// assert_eq!(trust, Trust::default());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Trust {
    /// Hints are ignored: every call asks first (unless a rule allows it).
    Ask,
    /// Tools the server marks `readOnlyHint` run without asking; the rest
    /// follow MCP's defaults, so a tool without annotations is destructive
    /// and asks. The default.
    #[default]
    ReadOnlyHints,
    /// The server is trusted: a missing hint declares nothing, so its tools
    /// run as native ones do, unless marked `destructiveHint`.
    All,
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Trust::Ask => "ask",
            Trust::ReadOnlyHints => "read_only_hints",
            Trust::All => "all",
        })
    }
}
