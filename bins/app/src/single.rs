//! One bot per history file: a second bot on the same file would recover
//! the same interrupted answers and answer the same chats twice.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Held while a bot serves from a history file: an exclusive lock on the
/// file beside it (`history.db.lock`), which the system releases when the
/// process ends, however it ends.
#[derive(Debug)]
pub struct HistoryLock {
    #[cfg(unix)]
    _held: nix::fcntl::Flock<File>,
    #[cfg(not(unix))]
    _held: File,
}

/// The lock file beside `history`.
fn lock_path(history: &Path) -> PathBuf {
    let mut name = history.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the lock of the history file at `history`, or says which file is
/// taken and what to do. (On systems without `flock`, nothing is locked.)
///
/// # Errors
/// When another process holds the lock, or the lock file can't be made.
pub fn lock_history(history: &Path) -> Result<HistoryLock, String> {
    let path = lock_path(history);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("could not open the lock file {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use nix::fcntl::{Flock, FlockArg};
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => Ok(HistoryLock { _held: held }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(format!(
                "another bot is serving from the history file {}: stop it, or give this \
                 bot a [history] path of its own (two bots on one file would answer the \
                 same messages twice)",
                history.display()
            )),
            Err((_, errno)) => Err(format!("could not lock {}: {errno}", path.display())),
        }
    }
    #[cfg(not(unix))]
    Ok(HistoryLock { _held: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_bot_on_the_same_history_is_refused_until_the_first_stops() {
        let dir = std::env::temp_dir().join(format!("ferrobot-single-{}", std::process::id()));
        let history = dir.join("history.db");
        let first = lock_history(&history).expect("the first bot takes the lock");
        let refused = lock_history(&history).expect_err("a second bot is refused");
        assert!(
            refused.contains("another bot is serving from the history file"),
            "{refused}"
        );
        assert!(refused.contains("history.db"), "{refused}");
        drop(first);
        lock_history(&history).expect("free again once the first stops");
        let _ = std::fs::remove_dir_all(dir);
    }
}
