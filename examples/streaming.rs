//! Run with: cargo run --example streaming
//!
//! Every event of a streamed turn, as it happens: status changes, reasoning
//! (to stderr), answer text, tool calls and token usage. Press Ctrl-C to cancel
//! the turn; what streamed so far is kept in history, marked interrupted.
//!
//! Same environment as `quickstart`: `FERROBOT_BASE_URL` (by default
//! `http://localhost:11434/v1`), `FERROBOT_MODEL` (by default `qwen3:8b`,
//! required with another server) and `FERROBOT_API_KEY`.

use std::io::Write as _;
use std::process::ExitCode;

use ferrobot::agent::Status;
use ferrobot::provider::OpenAiCompatible;
use ferrobot::tool::from_fn;
use ferrobot::{Agent, AgentEvent, Error};
use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `word_count`.
#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// The text whose words to count.
    text: String,
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
    if let Err(problem) = provider.check_health().await {
        eprintln!("{problem}");
        return ExitCode::from(2);
    }

    let word_count = from_fn(
        "word_count",
        "Count the words in a text.",
        |args: CountArgs, _ctx| async move { args.text.split_whitespace().count() },
    );
    let agent = Agent::builder()
        .provider(provider)
        .system_prompt("Answer briefly. Use word_count to count words.")
        .tool(word_count)
        .build();

    let args: Vec<String> = std::env::args().skip(1).collect();
    let prompt = if args.is_empty() {
        "Write a haiku about Rust, then count its words with the tool.".to_owned()
    } else {
        args.join(" ")
    };

    let mut events = agent.stream("streaming", &prompt);
    // Ctrl-C cancels the turn; the stream then ends with `Error::Cancelled`.
    let cancel = events.cancellation();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });

    let mut in_reasoning = false;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(Error::Cancelled) => {
                eprintln!("\n[cancelled; the partial answer stays in history]");
                return ExitCode::from(130);
            }
            Err(err) => {
                eprintln!("\n{}", err.user_message());
                return ExitCode::FAILURE;
            }
        };
        match event {
            AgentEvent::Status(Status::Thinking) => eprintln!("[thinking]"),
            AgentEvent::Status(Status::RunningTool { tool }) => eprintln!("[running {tool}]"),
            AgentEvent::ReasoningDelta(text) => {
                in_reasoning = true;
                eprint!("{text}");
            }
            AgentEvent::TextDelta(text) => {
                if in_reasoning {
                    in_reasoning = false;
                    eprintln!();
                }
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            AgentEvent::ToolCallStarted(call) => {
                in_reasoning = false;
                eprintln!("\n[tool call] {}({})", call.name, call.arguments);
            }
            AgentEvent::ToolCallFinished(record) => {
                eprintln!(
                    "[tool result] {:?} in {:?}: {}",
                    record.outcome, record.duration, record.content
                );
            }
            AgentEvent::Usage(usage) => eprintln!(
                "\n[usage] {} tokens in, {} out",
                usage.input_tokens, usage.output_tokens
            ),
            AgentEvent::Done(reply) => {
                println!();
                eprintln!(
                    "[done] finish reason {:?}, {} tool call(s), {} tokens in total",
                    reply.finish_reason,
                    reply.tool_calls.len(),
                    reply.usage.input_tokens + reply.usage.output_tokens
                );
            }
            // Tool-call deltas, refusals, confirmation status, and events
            // added in later versions.
            _ => {}
        }
    }
    ExitCode::SUCCESS
}
