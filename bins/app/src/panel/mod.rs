//! The control panel every bot process serves on 127.0.0.1 (`[panel]`): a
//! small web page over a JSON API — the bot's status, its tools switched
//! on and off live, its effective config (secrets redacted) and edits of
//! the config file — and the runtime file that lets `ferrobot status` find
//! the process.
//!
//! Loopback is not a boundary: any web page the user opens may send
//! requests to a local port, and other users of the machine may connect.
//! So every API call needs the process's token, which only the runtime
//! file holds (mode 0600, the owner's only); the `Host` must be loopback
//! (no DNS rebinding); a request another site's page sends (`Origin`,
//! `Sec-Fetch-Site`) is refused; bodies must be JSON, which a form on
//! another site can't send without the browser asking first.

mod api;
pub mod edit;
mod runtime;
mod survey;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::SystemTime;

use ferrobot::Agent;
use tokio_util::task::AbortOnDropHandle;

pub use runtime::Runtime;
pub use survey::{Seen, local_time, survey};

use crate::LoadedConfig;
use crate::activity::unix_secs;

/// A running panel and the process's runtime file; dropping it stops the
/// panel and removes the file.
#[derive(Debug)]
pub struct Panel {
    file: PathBuf,
    /// Where the panel listens, when it does.
    pub port: Option<u16>,
    _tasks: Vec<AbortOnDropHandle<()>>,
}

impl Drop for Panel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

impl Panel {
    /// Writes this process's runtime file in the config's
    /// [runtime folder](LoadedConfig::runtime_dir) and, when `[panel]` is
    /// enabled, serves the panel for `agent` on 127.0.0.1. A busy port is
    /// logged and the panel skipped; so is a runtime file that can't be
    /// written (nobody could find the token). Files of processes that
    /// stopped without removing theirs are removed first.
    pub async fn start(loaded: &LoadedConfig, agent: &Agent) -> Option<Panel> {
        let dir = loaded.runtime_dir();
        runtime::forget_stopped(&dir);
        let settings = &loaded.config.panel;
        let listener = if settings.enabled {
            match tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, settings.port)).await {
                Ok(listener) => Some(listener),
                Err(error) => {
                    tracing::warn!(port = settings.port, %error, "the control panel is skipped: its port is taken (set [panel] port, 0 for any free one)");
                    None
                }
            }
        } else {
            None
        };
        let port = listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok())
            .map(|address| address.port());
        let runtime = Runtime {
            bot: crate::run::process_name(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: unix_secs(SystemTime::now()),
            config: loaded.file.clone(),
            port,
            token: port.map(|_| token()),
        };
        let file = match runtime.write(&dir) {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "could not write the runtime file: `ferrobot status` won't see this bot, and the control panel is skipped");
                return None;
            }
        };
        let mut tasks = vec![AbortOnDropHandle::new(tokio::spawn(heartbeat(
            file.clone(),
        )))];
        if let Some(listener) = listener {
            let app = api::router(loaded, agent, &runtime);
            tracing::info!(
                address = %format!("http://127.0.0.1:{}/", port.unwrap_or_default()),
                "control panel listening (`ferrobot status` gives its address with the token)"
            );
            tasks.push(AbortOnDropHandle::new(tokio::spawn(async move {
                if let Err(error) = axum::serve(listener, app).await {
                    tracing::warn!(%error, "the control panel stopped");
                }
            })));
        }
        Some(Panel {
            file,
            port,
            _tasks: tasks,
        })
    }
}

/// 32 random bytes from the system, as hex.
fn token() -> String {
    let mut bytes = [0u8; 32];
    // Without the system's randomness nothing is safe to hand out; it is
    // there on every platform the bots run on.
    getrandom::fill(&mut bytes).expect("the system's random number generator");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Touches the runtime file every [`runtime::HEARTBEAT`], so one left by a
/// process that died says roughly when.
async fn heartbeat(file: PathBuf) {
    loop {
        tokio::time::sleep(runtime::HEARTBEAT).await;
        if let Ok(opened) = std::fs::File::options().append(true).open(&file) {
            let _ = opened.set_modified(SystemTime::now());
        }
    }
}
