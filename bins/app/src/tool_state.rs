//! Which tools are switched off, in a file every bot process shares.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use ferrobot::Agent;

/// The disabled tools, as stored in the tool state file
/// (`{"disabled": ["reboot"]}`). `ferrobot enable`/`disable` write it; a
/// running bot [`watch`](ToolState::watch)es it and applies a change within a
/// second.
///
/// # Examples
/// ```
/// use ferrobot_app::ToolState;
/// let path = std::env::temp_dir().join(format!("ferrobot-state-{}.json", std::process::id()));
/// let mut state = ToolState::load(&path)?;
/// state.set_enabled("reboot", false);
/// state.save(&path)?;
/// assert!(ToolState::load(&path)?.is_disabled("reboot"));
/// # std::fs::remove_file(path).ok();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolState {
    disabled: BTreeSet<String>,
}

impl ToolState {
    /// Reads the file; a missing file means every tool is enabled.
    ///
    /// # Errors
    /// When the file can't be read or isn't a tool state file.
    pub fn load(path: &Path) -> std::io::Result<Self> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} is not a tool state file ({e}); fix or delete it",
                        path.display()
                    ),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e),
        }
    }

    /// Writes the file atomically (a temporary file renamed over it), so a
    /// watching bot never reads half of it.
    ///
    /// # Errors
    /// When the directory can't be created or written.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let temporary: PathBuf = path.with_extension("json.tmp");
        std::fs::write(
            &temporary,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&temporary, path)
    }

    /// Whether `tool` is switched off.
    pub fn is_disabled(&self, tool: &str) -> bool {
        self.disabled.contains(tool)
    }

    /// Switches `tool` on or off.
    pub fn set_enabled(&mut self, tool: &str, enabled: bool) {
        if enabled {
            self.disabled.remove(tool);
        } else {
            self.disabled.insert(tool.to_owned());
        }
    }

    /// Applies the state to an agent's tools.
    pub fn apply(&self, agent: &Agent) {
        for tool in agent.tools().tools() {
            agent
                .tools()
                .set_enabled(tool.name(), !self.is_disabled(tool.name()));
        }
    }

    /// Applies the file now and whenever it changes (checked twice a
    /// second), until the returned task is aborted.
    pub fn watch(path: PathBuf, agent: &Agent) -> tokio::task::JoinHandle<()> {
        let agent = agent.clone();
        follow(path, true, move |path| match Self::load(path) {
            Ok(state) => state.apply(&agent),
            Err(error) => tracing::warn!(%error, "tool state not applied"),
        })
    }
}

/// Calls `changed` (at once, if `at_start`) and whenever the file's
/// modification time or length changes, checked twice a second: a change to
/// either counts, even on filesystems with coarse timestamps. Polling keeps
/// this dependency-free and works the same on every platform and filesystem.
fn follow(
    path: PathBuf,
    at_start: bool,
    mut changed: impl FnMut(&Path) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let stamp = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    };
    tokio::spawn(async move {
        let mut seen: Option<Option<(Option<SystemTime>, u64)>> = (!at_start).then(|| stamp(&path));
        loop {
            let now = stamp(&path);
            if seen.as_ref() != Some(&now) {
                seen = Some(now);
                changed(&path);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

/// Keeps an agent's command tools in step with a tools file (see
/// `CommandTool::load_file`): checked twice a second, tools added, changed
/// and removed as the file is; a file with mistakes is reported and the
/// tools stay as they were. Until the returned task is aborted.
pub fn watch_tools_file(path: PathBuf, agent: &Agent) -> tokio::task::JoinHandle<()> {
    let agent = agent.clone();
    let names = |tools: &[ferrobot::tools::CommandTool]| -> Vec<String> {
        tools
            .iter()
            .map(|t| ferrobot::Tool::name(t).to_owned())
            .collect()
    };
    let mut loaded = ferrobot::tools::CommandTool::load_file(&path)
        .map(|t| names(&t))
        .unwrap_or_default();
    follow(path, false, move |path| {
        let tools = if path.exists() {
            ferrobot::tools::CommandTool::load_file(path)
        } else {
            Ok(Vec::new())
        };
        match tools {
            Ok(tools) => {
                let now = names(&tools);
                for old in &loaded {
                    agent.tools().unregister(old);
                }
                for tool in tools {
                    agent.tools().register(tool);
                }
                tracing::info!(tools = ?now, "tools file reloaded");
                loaded = now;
            }
            Err(error) => {
                tracing::warn!(%error, "tools file not reloaded; keeping the tools as they were")
            }
        }
    })
}
