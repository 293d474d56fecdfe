//! What `ferrobot status` sees: the runtime files of a config's bots, and
//! each running bot's own word through its panel.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

use super::Runtime;
use crate::activity::unix_secs;

/// One bot process a runtime file names.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Seen {
    /// The binary, e.g. `ferrobot-telegram`.
    pub bot: String,
    /// Its process id.
    pub pid: u32,
    /// Whether it still runs.
    pub running: bool,
    /// When it started (seconds since the Unix epoch).
    pub started_at: u64,
    /// When its file was last touched (every 30 s while it runs), which
    /// says roughly when a stopped one stopped.
    pub last_seen: u64,
    /// The config file it read, if any.
    pub config: Option<std::path::PathBuf>,
    /// Its panel's address with the token, when it serves one.
    pub panel: Option<String>,
    /// What its panel says (`GET /api/status`: uptime, model server
    /// health, turns, latest problems), when it answered.
    pub status: Option<Value>,
    /// Why the panel didn't answer, when it didn't.
    pub panel_error: Option<String>,
}

/// Every bot process with a runtime file in `dir`, oldest first, each
/// running one's panel asked (at most 5 s each).
pub async fn survey(dir: &Path) -> Vec<Seen> {
    let mut seen = Vec::new();
    for (runtime, touched) in Runtime::list(dir) {
        let running = runtime.alive(touched);
        let panel = match (runtime.port, &runtime.token) {
            (Some(port), Some(token)) => Some((port, token.clone())),
            _ => None,
        };
        let (status, panel_error) = match &panel {
            Some((port, token)) if running => match ask(*port, token, &runtime).await {
                Ok(status) => (Some(status), None),
                Err(error) => (None, Some(error)),
            },
            _ => (None, None),
        };
        seen.push(Seen {
            bot: runtime.bot.clone(),
            pid: runtime.pid,
            running,
            started_at: runtime.started_at,
            last_seen: unix_secs(touched),
            config: runtime.config.clone(),
            panel: panel
                .filter(|_| running)
                .map(|(port, token)| format!("http://127.0.0.1:{port}/#token={token}")),
            status,
            panel_error,
        });
    }
    seen
}

/// The panel's `/api/status`, once its `/api/ping` says it is this
/// process's (the port may have gone to another process since; the token
/// it was sent is worthless then, its panel gone).
async fn ask(port: u16, token: &str, runtime: &Runtime) -> Result<Value, String> {
    // The builder wants a TLS provider even for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .map_err(|error| error.to_string())?;
    let get = |path: &str| {
        client
            .get(format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(token)
            .send()
    };
    let read = |response: Result<reqwest::Response, reqwest::Error>| async move {
        let response = response.map_err(|error| format!("no answer on port {port}: {error}"))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|error| error.to_string())?;
        if !status.is_success() {
            return Err(format!("the panel on port {port} answered {status}"));
        }
        serde_json::from_slice::<Value>(&body).map_err(|error| error.to_string())
    };
    let ping = read(get("/api/ping").await).await?;
    if ping["pid"] != runtime.pid {
        return Err(format!("port {port} is another process's now"));
    }
    read(get("/api/status").await).await
}

impl Seen {
    /// Seconds it has run, for a running one.
    pub fn uptime(&self) -> Option<u64> {
        self.running
            .then(|| unix_secs(SystemTime::now()).saturating_sub(self.started_at))
    }
}

/// `secs` since the Unix epoch as the system's local time, to the minute:
/// `2026-12-02 10:16`.
pub fn local_time(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|secs| jiff::Timestamp::from_second(secs).ok())
        .map_or_else(
            || secs.to_string(),
            |at| {
                at.to_zoned(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%d %H:%M")
                    .to_string()
            },
        )
}
