//! Where the CLI writes down what happened, beside the history: logs (the
//! terminal and a daily file) and one trace per turn.

use std::path::{Path, PathBuf};

use ferrobot_app::LoadedConfig;

/// Logs: warnings on the terminal (`FERROBOT_LOG` to change), and everything
/// at info and above in a daily file under `logs/` beside the history.
pub(crate) fn logging(
    loaded: &LoadedConfig,
) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _, fmt};
    let console = fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(EnvFilter::try_from_env("FERROBOT_LOG").unwrap_or_else(|_| "warn".into()));
    let logs = data_dir(loaded).join("logs");
    // The appender prunes old files from the directory, so it must exist first.
    let _ = std::fs::create_dir_all(&logs);
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("ferrobot")
        .filename_suffix("log")
        .max_log_files(14)
        .build(logs)
        .ok();
    let (file, guard) = match appender {
        Some(appender) => {
            let (writer, guard) = tracing_appender::non_blocking(appender);
            (
                Some(
                    fmt::layer()
                        .with_ansi(false)
                        .with_writer(writer)
                        .with_filter(EnvFilter::new("info")),
                ),
                Some(guard),
            )
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(console)
        .with(file)
        .init();
    guard
}

/// `traces.jsonl` and `logs/` live beside the history file.
pub(crate) fn traces_path(loaded: &LoadedConfig) -> PathBuf {
    data_dir(loaded).join("traces.jsonl")
}

/// The history file's directory, where the CLI keeps its other files:
/// logs, traces and the chat's input history.
pub(crate) fn data_dir(loaded: &LoadedConfig) -> PathBuf {
    loaded
        .history_path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
