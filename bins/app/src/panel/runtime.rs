//! The runtime file each bot process keeps while it runs: which bot, its
//! pid, since when, and where its panel listens with which token. Only its
//! owner may read it (mode 0600): the token is the key to the panel.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::LoadedConfig;

/// How often a running process touches its file, so a file left by a
/// process that died says roughly when.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(30);

/// One running (or once running) bot process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Runtime {
    /// The binary, e.g. `ferrobot-telegram`.
    pub bot: String,
    /// Its process id.
    pub pid: u32,
    /// Its version.
    pub version: String,
    /// When it started (seconds since the Unix epoch).
    pub started_at: u64,
    /// The config file it read, if any.
    pub config: Option<PathBuf>,
    /// The panel's port on 127.0.0.1, when it serves one.
    pub port: Option<u16>,
    /// The token every panel call needs, when it serves one.
    pub token: Option<String>,
}

impl LoadedConfig {
    /// The folder of the runtime files: `run/` in the
    /// [logging folder](Self::logging_folder), where `ferrobot status`
    /// looks with the same config.
    pub fn runtime_dir(&self) -> PathBuf {
        self.logging_folder().join("run")
    }
}

impl Runtime {
    /// The file of this process in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}-{}.json", self.bot, self.pid))
    }

    /// Writes it into `dir` (made if needed), readable by its owner only
    /// from the start, atomically (a new temporary file renamed over it).
    ///
    /// # Errors
    /// When the folder can't be made or written.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = self.path_in(dir);
        let temporary = path.with_extension("json.tmp");
        // Never one left over (or planted) with looser permissions.
        let _ = std::fs::remove_file(&temporary);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temporary)?;
        file.write_all(&serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)?;
        Ok(path)
    }

    /// Every runtime file in `dir`, with when each was last touched, oldest
    /// process first; files that aren't runtime files are skipped, and a
    /// missing folder holds none.
    pub fn list(dir: &Path) -> Vec<(Runtime, SystemTime)> {
        entries(dir)
            .into_iter()
            .map(|(_, runtime, touched)| (runtime, touched))
            .collect()
    }

    /// Whether its process still runs (on Unix, a signal-0 probe; elsewhere
    /// a file touched within two heartbeats counts).
    pub fn alive(&self, touched: SystemTime) -> bool {
        #[cfg(unix)]
        {
            let _ = touched;
            let Ok(pid) = i32::try_from(self.pid) else {
                return false;
            };
            match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
                Ok(()) => true,
                // Another user's process by that id: alive, not ours to ask.
                Err(error) => error == nix::errno::Errno::EPERM,
            }
        }
        #[cfg(not(unix))]
        {
            touched.elapsed().is_ok_and(|age| age < 2 * HEARTBEAT)
        }
    }
}

/// The runtime files in `dir`: each one's path, contents and last touch.
fn entries(dir: &Path) -> Vec<(PathBuf, Runtime, SystemTime)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<_> = read
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .filter_map(|path| {
            let touched = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
            let runtime: Runtime = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            Some((path, runtime, touched))
        })
        .collect();
    found.sort_by_key(|(_, runtime, _)| (runtime.started_at, runtime.pid));
    found
}

/// Removes the files in `dir` of processes that stopped without removing
/// theirs (killed, or the machine lost power).
pub(crate) fn forget_stopped(dir: &Path) {
    for (path, runtime, touched) in entries(dir) {
        if !runtime.alive(touched) {
            let _ = std::fs::remove_file(path);
        }
    }
}
