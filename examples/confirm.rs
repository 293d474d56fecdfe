//! Run with: cargo run --example confirm
//!
//! A tool that asks before it runs. The model wants to delete a file; you are
//! asked `Delete /tmp/ferrobot-demo.txt? [y/N]` on the terminal, and a "no"
//! reaches the model as "Cancelled by user.". Nothing is really deleted.
//!
//! Slash commands run a tool without the model, and still ask:
//! `cargo run --example confirm -- /delete_file path=/tmp/x.txt` works even
//! with no model server. `/help` lists the commands.
//!
//! Same environment as `quickstart`: `FERROBOT_BASE_URL` (by default
//! `http://localhost:11434/v1`), `FERROBOT_MODEL` (by default `qwen3:8b`,
//! required with another server) and `FERROBOT_API_KEY`.

use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

use ferrobot::Agent;
use ferrobot::agent::ToolOutcome;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::provider::OpenAiCompatible;
use ferrobot::tool::from_fn;
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `delete_file`.
#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// Path of the file to delete.
    path: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let provider = match OpenAiCompatible::from_env("FERROBOT") {
        Ok(provider) => provider,
        Err(problem) => {
            eprintln!("{problem}");
            return ExitCode::from(2);
        }
    };

    let args: Vec<String> = std::env::args().skip(1).collect();
    let prompt = if args.is_empty() {
        "Please delete /tmp/ferrobot-demo.txt.".to_owned()
    } else {
        args.join(" ")
    };
    // Slash commands never call the model, so they don't need the server.
    if !prompt.starts_with('/')
        && let Err(problem) = provider.check_health().await
    {
        eprintln!("{problem}");
        eprintln!("Slash commands work without a server: try `/help`.");
        return ExitCode::from(2);
    }

    // `{path}` is filled from the call's arguments.
    let delete_file = from_fn(
        "delete_file",
        "Delete a file on this machine.",
        |args: DeleteArgs, _ctx| async move {
            format!("Deleted {} (demo: nothing was touched).", args.path)
        },
    )
    .confirm("Delete {path}?");

    let agent = Agent::builder()
        .provider(provider)
        .system_prompt("You manage files. Use delete_file when asked to delete one.")
        .tool(delete_file)
        .confirm(ask_on_terminal)
        .build();

    match agent.handle("confirm-demo", &prompt).await {
        Ok(reply) => {
            for record in &reply.tool_calls {
                let verdict = match record.outcome {
                    ToolOutcome::Ok => "ran",
                    ToolOutcome::Declined => "declined",
                    _ => "did not run",
                };
                eprintln!("[tool] {} {verdict}: {}", record.call.name, record.content);
            }
            println!("{}", reply.text);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{}", err.user_message());
            ExitCode::FAILURE
        }
    }
}

/// Asks on the terminal; anything but "y" or "yes" declines. Reading stdin
/// blocks, so it runs on the blocking pool.
async fn ask_on_terminal(request: ConfirmRequest) -> Decision {
    let answer = tokio::task::spawn_blocking(move || {
        eprint!("{} [y/N] ", request.prompt);
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await;
    match answer {
        Ok(Ok(line)) => matches!(line.trim().to_lowercase().as_str(), "y" | "yes").into(),
        // No terminal, or the read failed: fail closed.
        _ => Decision::Deny(None),
    }
}
