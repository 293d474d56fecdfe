//! `ferrobot`: chat with your machine's assistant in the terminal, or script it.
//!
//! Exit codes: 0 success; 1 the turn failed (the model endpoint is down or
//! refused); 2 bad configuration or usage; 3 `doctor` found a problem; 4
//! and 5 `permissions test`'s call would be asked about, or denied.
//!
//! `main.rs` parses the arguments, loads the config, builds the agent and
//! runs the command; the rest is one module per job:
//! - `args`: the command line (clap);
//! - `chat`: the chat, a line editor over the agent;
//! - `turn`: one turn printed as it streams (`run`, and each chat line);
//! - `commands`: `tools`, `enable`, `disable`, `doctor`, `status`,
//!   `replay`, `config check`;
//! - `mcp`: `mcp list`, and the MCP servers' part of `doctor`;
//! - `history`: `history list`, `show`, `search`, `export` and `import`;
//! - `transfer`: the JSON Lines `export` writes and `import` reads;
//! - `permissions`: `permissions` and `permissions test`;
//! - `logs`: the chat's input history, beside the history;
//! - `render`: Markdown, the spinner and reasoning in a terminal.

use std::process::ExitCode;

use clap::Parser as _;
use ferrobot::Agent;
use ferrobot::confirm::ConfirmRequest;
use ferrobot_app::{Config, ConfigSource, LoadedConfig};

/// `println!` that ignores a closed stdout (`ferrobot history list | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod args;
mod chat;
mod commands;
mod history;
mod logs;
mod mcp;
mod permissions;
mod render;
mod transfer;
mod turn;

use crate::args::{Cli, Command, ConfigAction, McpAction};
use crate::chat::chat;
use crate::commands::{config_check, conformance, doctor, replay, status, switch, tools};
use crate::history::history;
use crate::permissions::permissions;
use crate::turn::{Print, run};

const EXIT_TURN_FAILED: u8 = 1;
const EXIT_CONFIG: u8 = 2;
const EXIT_DOCTOR: u8 = 3;
const EXIT_ASK: u8 = 4;
const EXIT_DENY: u8 = 5;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let loaded = match load(&cli) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("ferrobot: {error:#}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let _log = ferrobot_app::logging::init(Some(&loaded), "warn");
    let result = match cli.command {
        Some(Command::Run {
            prompt,
            json,
            images,
            output_schema,
            yes,
            conversation,
        }) => {
            run(
                &loaded,
                &prompt,
                &images,
                Print {
                    json,
                    output_schema,
                },
                yes,
                &conversation,
            )
            .await
        }
        Some(Command::Doctor {
            conformance: false, ..
        }) => doctor(&loaded).await,
        Some(Command::Doctor {
            conformance: true,
            json,
        }) => conformance(&loaded, json).await,
        Some(Command::Status { json }) => status(&loaded, json).await,
        Some(Command::Tools) => tools(&loaded),
        Some(Command::Replay { file, ignore }) => replay(&loaded, &file, &ignore).await,
        Some(Command::Mcp {
            action: McpAction::List { wait },
        }) => mcp::list(&loaded, std::time::Duration::from_secs(wait)).await,
        Some(Command::Enable { name }) => switch(&loaded, &name, true),
        Some(Command::Disable { name }) => switch(&loaded, &name, false),
        Some(Command::Config {
            action: ConfigAction::Check,
        }) => Ok(config_check(&loaded)),
        Some(Command::History { action }) => history(&loaded, action).await,
        Some(Command::Permissions { action }) => permissions(&loaded, action).await,
        None => chat(&loaded, &cli.conversation).await,
    };
    result.unwrap_or_else(|error| {
        eprintln!("ferrobot: {error:#}");
        ExitCode::from(EXIT_CONFIG)
    })
}

fn load(cli: &Cli) -> anyhow::Result<LoadedConfig> {
    let mut source = ConfigSource::new();
    source.file.clone_from(&cli.config);
    source.provider.clone_from(&cli.provider);
    source.model.clone_from(&cli.model);
    source.base_url.clone_from(&cli.base_url);
    let mut loaded = Config::load(&source)?;
    if let Some(variable) = &cli.api_key_env {
        loaded.config.llm.api_key_env = Some(variable.clone());
    }
    Ok(loaded)
}

async fn agent(loaded: &LoadedConfig, approve: bool) -> anyhow::Result<Agent> {
    agent_with(loaded, move |request: ConfirmRequest| async move {
        if !approve {
            eprintln!(
                "[declined] {} (pass --yes to approve tools that ask)",
                request.prompt
            );
        }
        approve
    })
    .await
}

async fn agent_with(
    loaded: &LoadedConfig,
    confirm: impl ferrobot::confirm::ConfirmHandler,
) -> anyhow::Result<Agent> {
    // A tool's later message (`notify_later`) is printed as it comes.
    let later = |_conversation: String, text: String| async move { eprintln!("[later] {text}") };
    loaded
        .agent(confirm, later)
        .await
        .map_err(|e| anyhow::anyhow!(e))
}
