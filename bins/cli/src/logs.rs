//! Where the CLI keeps its own files beside the history: the chat's input
//! history. (Logs and traces: `ferrobot_app::logging`.)

use std::path::{Path, PathBuf};

use ferrobot_app::LoadedConfig;

/// The history file's directory, where the CLI keeps the chat's input
/// history.
pub(crate) fn data_dir(loaded: &LoadedConfig) -> PathBuf {
    loaded
        .history_path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
