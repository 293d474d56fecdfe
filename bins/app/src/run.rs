//! A bot binary's `main` (`ferrobot-telegram`, `ferrobot-discord`): the
//! `-c FILE` argument, loading the layered config, logging (stderr and the
//! `[logging]` file, see [`logging`](crate::logging)),
//! Ctrl-C, and exit codes: 0 stopped; 1 the bot failed while running; 2 bad
//! configuration or a token the platform refuses.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::{Config, ConfigSource, LoadedConfig};

/// Why a bot stopped.
#[derive(Debug)]
pub enum Error {
    /// The configuration is incomplete or wrong; the message says what to set.
    Config(String),
    /// The platform refused the token; the message says where to check it.
    Unauthorized(String),
    /// Anything else.
    Other(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(message) | Error::Unauthorized(message) | Error::Other(message) => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for Error {}

/// A bot binary's name and help.
#[derive(Debug, Clone, Copy)]
pub struct Bin {
    /// The binary's name, e.g. `ferrobot-telegram`.
    pub name: &'static str,
    /// Its version.
    pub version: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// The environment variables worth naming in `--help`.
    pub env: &'static str,
}

/// Runs a bot binary: parses `-c FILE`, loads the config, logs to stderr
/// (`FERROBOT_LOG`, `info` by default) and to the `[logging]` file, and
/// runs `bot` until it stops or Ctrl-C.
pub async fn main<F, Fut>(bin: Bin, bot: F) -> ExitCode
where
    F: FnOnce(LoadedConfig) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let arguments = clap::Command::new(bin.name)
        .version(bin.version)
        .about(bin.about)
        .after_help(format!(
            "Every setting can also come from the environment (`__` nests): {}",
            bin.env
        ))
        .arg(
            clap::Arg::new("config")
                .short('c')
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Read this config file instead of ./ferrobot.toml or the per-user one"),
        )
        .get_matches();
    let mut source = ConfigSource::new();
    source.file = arguments.get_one::<PathBuf>("config").cloned();
    let stopped = match Config::load(&source) {
        Ok(loaded) => {
            let _flushed_at_exit = crate::logging::init(Some(&loaded), "info");
            // Stopped by Ctrl-C or by a service manager's SIGTERM, the bot
            // is dropped, which removes its runtime file.
            tokio::select! {
                stopped = bot(loaded) => stopped,
                _ = tokio::signal::ctrl_c() => Ok(()),
                () = terminated() => Ok(()),
            }
        }
        Err(error) => Err(Error::Config(error.to_string())),
    };
    match stopped {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}: {error}", bin.name);
            ExitCode::from(match error {
                Error::Config(_) | Error::Unauthorized(_) => 2,
                Error::Other(_) => 1,
            })
        }
    }
}

/// This process's binary, e.g. `ferrobot-telegram`.
pub(crate) fn process_name() -> String {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|path| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "ferrobot".to_owned())
}

/// When the process is asked to stop (SIGTERM); never elsewhere.
async fn terminated() {
    #[cfg(unix)]
    if let Ok(mut signals) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        signals.recv().await;
        return;
    }
    std::future::pending::<()>().await;
}

/// A mutex's contents, even after a panic while it was held: the bots keep
/// only sets and maps there, which a panic can't leave half-written.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
