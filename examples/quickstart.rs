//! Run with: cargo run --example quickstart
//!
//! An agent with two tools, talking to an OpenAI-compatible server and
//! streaming its answer. Pass your own prompt as arguments:
//! `cargo run --example quickstart -- "what is 40 + 2?"`.
//!
//! - `FERROBOT_BASE_URL`: the server. By default, Ollama at `http://localhost:11434/v1`.
//! - `FERROBOT_MODEL`: the model. By default, `qwen3:8b`; required when
//!   `FERROBOT_BASE_URL` is set.
//! - `FERROBOT_API_KEY`: sent as a bearer token, if set.
//!
//! Exits with 2 when the server or the model is missing, 1 when the turn fails.
//! The file needs nothing else from this repository: copied into a project of
//! your own (with `ferrobot`, `futures-util` and `tokio` as dependencies), it
//! runs as is.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use ferrobot::provider::OpenAiCompatible;
use ferrobot::{Agent, AgentEvent, tool};
use futures_util::StreamExt;

/// The current date and time, in UTC.
#[tool]
async fn current_time() -> String {
    utc_now()
}

/// Add two integers.
#[tool]
async fn add(
    /// The first operand.
    a: i64,
    /// The second operand.
    b: i64,
) -> i64 {
    a + b
}

#[tokio::main]
async fn main() -> ExitCode {
    // The server, the model and the key, from FERROBOT_BASE_URL,
    // FERROBOT_MODEL and FERROBOT_API_KEY.
    let provider = match OpenAiCompatible::from_env("FERROBOT") {
        Ok(provider) => provider,
        Err(problem) => {
            eprintln!("{problem}");
            return ExitCode::from(2);
        }
    };
    // A missing server or model gets a message saying what to do, instead of
    // a failed turn.
    if let Err(problem) = provider.check_health().await {
        eprintln!("{problem}");
        return ExitCode::from(2);
    }

    let agent = Agent::builder()
        .provider(provider)
        .system_prompt(
            "You are a concise assistant. Use the tools for the time and for arithmetic; \
             never guess either.",
        )
        .tool(current_time)
        .tool(add)
        .build();

    let prompt = prompt_from_args("What time is it, and what is 2+3?");
    let mut events = agent.stream("quickstart", &prompt);
    while let Some(event) = events.next().await {
        match event {
            Ok(AgentEvent::TextDelta(text)) => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            Ok(AgentEvent::ToolCallFinished(record)) => {
                let call = &record.call;
                eprintln!(
                    "[tool] {}({}) -> {} ({:?})",
                    call.name, call.arguments, record.content, record.outcome
                );
            }
            Ok(AgentEvent::Done(_)) => println!(),
            Ok(_) => {}
            Err(err) => {
                eprintln!("\n{}", err.user_message());
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn prompt_from_args(default: &str) -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        default.to_owned()
    } else {
        args.join(" ")
    }
}

/// Now, as `YYYY-MM-DD HH:MM:SS UTC`, without a date crate.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days.cast_signed() + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
