//! `ferrobot-discord`: your machine's assistant on Discord.
//!
//! Exit codes: 0 stopped; 1 the bot failed while running; 2 bad
//! configuration or a token Discord refuses.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ferrobot::bot::{Config, ConfigSource};
use ferrobot_discord::Error;

/// Your machine's assistant on Discord.
#[derive(Debug, Parser)]
#[command(
    name = "ferrobot-discord",
    version,
    about,
    after_help = "Every setting can also come from the environment (`__` nests): \
                  FERROBOT_DISCORD__TOKEN, FERROBOT_DISCORD__ALLOWED_USER_IDS=[111], \
                  FERROBOT_LLM__BASE_URL, FERROBOT_LLM__MODEL… See docs/discord.md."
)]
struct Cli {
    /// Read this config file instead of ./ferrobot.toml or the per-user one.
    #[arg(short = 'c', long = "config")]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FERROBOT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    // The gateway's and the REST client's TLS need a crypto provider; ring
    // is the one the rest of ferrobot uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut source = ConfigSource::new();
    source.file = cli.config;
    let loaded = match Config::load(&source) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("ferrobot-discord: {error}");
            return ExitCode::from(2);
        }
    };
    let stopped = tokio::select! {
        stopped = ferrobot_discord::run(&loaded) => stopped,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    match stopped {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ (Error::Config(_) | Error::Unauthorized)) => {
            eprintln!("ferrobot-discord: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("ferrobot-discord: {error}");
            ExitCode::from(1)
        }
    }
}
