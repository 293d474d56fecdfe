//! Where every binary writes down what happened (`[logging]`): the
//! terminal (`FERROBOT_LOG`, else the binary's level), a rotating log file in
//! `logs/`, and `traces.jsonl`, one line per turn ([`Traces`](crate::Traces)),
//! both beside the history file unless `logging.folder` says otherwise.

use std::path::PathBuf;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation as Every};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _, fmt};

use crate::LoadedConfig;
use crate::config::Rotation;

impl LoadedConfig {
    /// The folder of `logs/` and `traces.jsonl`: `logging.folder`, else the
    /// history file's.
    pub fn logging_folder(&self) -> PathBuf {
        match &self.config.logging.folder {
            Some(folder) => folder.relative(),
            None => self
                .history_path()
                .parent()
                .map(PathBuf::from)
                .unwrap_or_default(),
        }
    }

    /// `traces.jsonl` in the [logging folder](Self::logging_folder).
    pub fn traces_path(&self) -> PathBuf {
        self.logging_folder().join("traces.jsonl")
    }
}

/// What [`init`] started: keep it until the program ends. Dropping it
/// writes out what the log file and the span exporter still hold.
#[must_use = "dropping it stops the log file and the span export"]
pub struct Logging {
    _file: Option<WorkerGuard>,
    #[cfg(feature = "otel")]
    spans: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl std::fmt::Debug for Logging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logging").finish_non_exhaustive()
    }
}

impl Drop for Logging {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(spans) = self.spans.take()
            && let Err(error) = spans.shutdown()
        {
            eprintln!("could not send the last spans to the collector: {error}");
        }
    }
}

/// Logs to the terminal (`FERROBOT_LOG`, else `console`, e.g. `warn` for
/// the CLI, `info` for the bots) and, with a config, to a file in `logs/`
/// as `[logging]` says, and exports spans to `logging.otlp_endpoint` when
/// set (feature `otel`). A folder that can't be made leaves the terminal
/// only, and says so there; so does an exporter that can't be built.
pub fn init(loaded: Option<&LoadedConfig>, console: &str) -> Logging {
    let terminal = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(EnvFilter::try_from_env("FERROBOT_LOG").unwrap_or_else(|_| console.into()));
    let file = loaded.map(|loaded| {
        let settings = &loaded.config.logging;
        let folder = loaded.logging_folder().join("logs");
        // The appender prunes old files from the folder, so it must exist.
        let made = std::fs::create_dir_all(&folder).map_err(|e| e.to_string());
        let appender = made.and_then(|()| {
            Builder::new()
                .rotation(match settings.rotation {
                    Rotation::Hourly => Every::HOURLY,
                    Rotation::Daily => Every::DAILY,
                    Rotation::Never => Every::NEVER,
                })
                .filename_prefix("ferrobot")
                .filename_suffix("log")
                .max_log_files(settings.keep_files)
                .build(&folder)
                .map_err(|e| e.to_string())
        });
        (appender, folder, settings.level.clone())
    });
    let (file, guard, failed) = match file {
        Some((Ok(appender), _, level)) => {
            let (writer, guard) = tracing_appender::non_blocking(appender);
            // Checked when the config was loaded.
            let filter = EnvFilter::try_new(&level).unwrap_or_else(|_| EnvFilter::new("info"));
            let layer = fmt::layer()
                .with_ansi(false)
                .with_writer(writer)
                .with_filter(filter);
            (Some(layer), Some(guard), None)
        }
        Some((Err(error), folder, _)) => (None, None, Some((folder, error))),
        None => (None, None, None),
    };
    let registry = tracing_subscriber::registry()
        .with(terminal)
        .with(file)
        // Warnings and errors only: a layer without a filter would switch
        // on every debug and trace call site of every crate.
        .with(crate::activity::Problems.with_filter(LevelFilter::WARN));
    #[cfg(feature = "otel")]
    let (spans, export_failed) = match loaded
        .and_then(|l| l.config.logging.otlp_endpoint.as_deref())
    {
        Some(endpoint) => match crate::telemetry::exporter(endpoint, &crate::run::process_name()) {
            Ok(spans) => (Some(spans), None),
            Err(error) => (None, Some(error)),
        },
        None => (None, None),
    };
    #[cfg(feature = "otel")]
    let registry = registry.with(
        spans
            .as_ref()
            .map(|spans| crate::telemetry::layer(spans).with_filter(EnvFilter::new("info"))),
    );
    registry.init();
    if let Some((folder, error)) = failed {
        tracing::warn!(folder = %folder.display(), %error, "could not write logs there: logging to the terminal only (set [logging] folder)");
    }
    #[cfg(feature = "otel")]
    if let Some(error) = export_failed {
        tracing::warn!(%error, "spans are not exported (check [logging] otlp_endpoint)");
    }
    Logging {
        _file: guard,
        #[cfg(feature = "otel")]
        spans,
    }
}
