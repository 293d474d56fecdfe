//! One turn printed as it streams: text on stdout (Markdown rendered at a
//! terminal), tool calls on stderr, or one JSON object per event; each turn
//! is also traced (by the agent's watcher).

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use ferrobot::agent::{Output, Status, ToolOutcome, TurnRequest};
use ferrobot::history::{HistoryError, HistoryStore, Intake, Mark, Stage};
use ferrobot::{AgentEvent, Image};
use ferrobot_app::LoadedConfig;
use futures_util::StreamExt;
use serde_json::json;

use crate::args::{ConversationArgs, conversation_id};
use crate::{EXIT_TURN_FAILED, agent, render};

/// How `run` prints: `--json`, `--output-schema`.
#[derive(Debug)]
pub(crate) struct Print {
    pub(crate) json: bool,
    pub(crate) output_schema: Option<std::path::PathBuf>,
}

/// One turn, printed as it streams.
pub(crate) async fn run(
    loaded: &LoadedConfig,
    prompt: &str,
    images: &[std::path::PathBuf],
    print: Print,
    yes: bool,
    args: &ConversationArgs,
) -> anyhow::Result<ExitCode> {
    let mut request = TurnRequest::new(prompt);
    for path in images {
        request = request.image(Image::read(path)?);
    }
    if let Some(path) = &print.output_schema {
        request = request.output(output_schema(path)?);
    }
    let agent = agent(loaded, yes).await?;
    // One turn: it waits for the MCP servers to answer (or fail) first, so
    // their tools are offered.
    let mcp = loaded.start_mcp(&agent).map_err(|e| anyhow::anyhow!(e))?;
    mcp.wait_settled(std::time::Duration::from_secs(30)).await;
    // Their tools follow the tool state file from this turn on.
    ferrobot_app::ToolState::load(&loaded.tool_state_path())?.apply(&agent);
    let conversation = conversation_id(args);
    let shown = Shown {
        json: print.json,
        typed: request.output.is_some(),
        reasoning: true,
    };
    let history = agent.history();
    let interrupted = match history.unfinished().await {
        Ok(unfinished) => unfinished
            .into_iter()
            .filter(|intake| intake.chat == conversation)
            .collect(),
        Err(HistoryError::Unsupported { .. }) => Vec::new(),
        Err(error) => {
            eprintln!(
                "warning: could not read the turn journal ({}); an interrupted turn is not recovered",
                error.chain()
            );
            Vec::new()
        }
    };
    for intake in interrupted {
        recover(&agent, &conversation, &intake, shown).await;
    }
    let journaled = journal(history.as_ref(), &conversation, prompt, images).await;
    if let Some(id) = &journaled {
        request = request.journal(id);
    }
    let mut events = agent.stream(&conversation, request);
    let code = print_events(&mut events, shown).await;
    if let Some(id) = &journaled {
        delivered(history.as_ref(), id).await;
    }
    Ok(code)
}

/// What the journal keeps of a `run`, to run it again after a crash.
#[derive(serde::Serialize, serde::Deserialize)]
struct Journaled {
    prompt: String,
    #[serde(default)]
    images: Vec<std::path::PathBuf>,
}

/// Journals a `run` before its turn starts; `None` when the store keeps no
/// journal (or failed to: the turn runs anyway).
async fn journal(
    history: &dyn HistoryStore,
    conversation: &str,
    prompt: &str,
    images: &[std::path::PathBuf],
) -> Option<String> {
    let payload = serde_json::to_string(&Journaled {
        prompt: prompt.to_owned(),
        images: images.to_vec(),
    })
    .ok()?;
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("cli:{conversation}:{at}-{}", std::process::id());
    match history
        .receive(&Intake::new(&id, conversation, payload))
        .await
    {
        Ok(_) => Some(id),
        Err(HistoryError::Unsupported { .. }) => None,
        Err(error) => {
            eprintln!(
                "warning: could not journal this turn ({}); a crash would lose it",
                error.chain()
            );
            None
        }
    }
}

/// Marks a journaled turn's answer as shown.
async fn delivered(history: &dyn HistoryStore, id: &str) {
    if let Err(error) = history.mark(id, &Mark::Delivered).await {
        eprintln!(
            "warning: could not mark the turn done in the journal ({})",
            error.chain()
        );
    }
}

/// Finishes a turn of the conversation that a crash (or a kill) cut
/// short, saying so first: one that hadn't started runs; one that had goes
/// on from what it stored.
async fn recover(agent: &ferrobot::Agent, conversation: &str, intake: &Intake, shown: Shown) {
    let history = agent.history();
    let journaled: Journaled = match serde_json::from_str(&intake.payload) {
        Ok(journaled) => journaled,
        Err(_) => {
            delivered(history.as_ref(), &intake.id).await;
            return;
        }
    };
    let request = if intake.stage == Stage::Received {
        eprintln!(
            "The last turn in this conversation was interrupted before it started; running it first: {}",
            journaled.prompt
        );
        let mut request = TurnRequest::new(&journaled.prompt).journal(&intake.id);
        for path in &journaled.images {
            match Image::read(path) {
                Ok(image) => request = request.image(image),
                Err(error) => eprintln!("warning: {error}; the image is left out"),
            }
        }
        request
    } else {
        eprintln!(
            "The last turn in this conversation was interrupted; finishing it first: {}",
            journaled.prompt
        );
        TurnRequest::recover(&intake.id)
    };
    let mut events = agent.stream(conversation, request);
    let shown = Shown {
        typed: false,
        ..shown
    };
    print_events(&mut events, shown).await;
    delivered(history.as_ref(), &intake.id).await;
}

/// The typed answer `--output-schema FILE` asks for.
fn output_schema(path: &std::path::Path) -> anyhow::Result<Output> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read the output schema {shown}"))?;
    let schema = serde_json::from_str(&text)
        .with_context(|| format!("the output schema {shown} is not JSON"))?;
    Output::schema(schema).with_context(|| format!("in {shown}"))
}

/// What of a turn is printed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown {
    /// One JSON object per event.
    pub(crate) json: bool,
    /// A typed answer: only its value goes to stdout, once it is checked.
    pub(crate) typed: bool,
    /// The model's reasoning, at a terminal.
    pub(crate) reasoning: bool,
}

/// Prints a turn's events as they come: text on stdout, tool calls on stderr.
/// (The agent's watcher writes the turn to `traces.jsonl`.)
pub(crate) async fn print_events(events: &mut ferrobot::TurnStream, shown: Shown) -> ExitCode {
    let Shown {
        json,
        typed,
        reasoning: show_reasoning,
    } = shown;
    use std::io::IsTerminal as _;
    // Markdown and the spinner only for a person at a terminal; scripts and
    // pipes get plain text.
    let terminal = !json && !typed && std::io::stdout().is_terminal();
    let spinner = terminal.then(render::Spinner::start);
    let clear = || {
        if let Some(spinner) = &spinner {
            spinner.clear();
        }
    };
    let mut blocks = render::Blocks::default();
    let mut stdout = std::io::stdout();
    let mut code = ExitCode::SUCCESS;
    let mut streamed = false;
    while let Some(event) = events.next().await {
        let line = match event {
            Ok(event) if json => json_event(&event),
            Ok(AgentEvent::Status(status)) => {
                if let Some(spinner) = &spinner {
                    match status {
                        Status::Thinking => spinner.show("Thinking…"),
                        Status::RunningTool { tool } => spinner.show(&format!("Running {tool}…")),
                        _ => spinner.clear(),
                    }
                }
                None
            }
            // A typed answer is printed once it is checked, and only it.
            Ok(AgentEvent::TextDelta(_) | AgentEvent::RefusalDelta(_)) if typed => None,
            Ok(AgentEvent::Done(reply)) if typed => {
                clear();
                reply.output.map(|value| json!(value))
            }
            Ok(AgentEvent::TextDelta(text) | AgentEvent::RefusalDelta(text)) => {
                clear();
                streamed = true;
                if terminal {
                    blocks
                        .push(&text)
                        .iter()
                        .for_each(|block| render::print_block(block));
                } else {
                    let _ = write!(stdout, "{text}");
                    let _ = stdout.flush();
                }
                None
            }
            Ok(AgentEvent::ReasoningDelta(text)) => {
                if terminal && show_reasoning {
                    clear();
                    render::print_reasoning(&text);
                }
                None
            }
            Ok(AgentEvent::ToolCallStarted(call)) => {
                clear();
                eprintln!("→ {}({})", call.name, call.arguments);
                None
            }
            Ok(AgentEvent::ToolCallFinished(record)) => {
                clear();
                let mark = if record.outcome == ToolOutcome::Ok {
                    "←"
                } else {
                    "✗"
                };
                eprintln!(
                    "{mark} {} ({:?}, {} ms)",
                    record.call.name,
                    record.outcome,
                    record.duration.as_millis()
                );
                None
            }
            Ok(AgentEvent::Done(reply)) => {
                clear();
                if let Some(rest) = blocks.finish() {
                    render::print_block(&rest);
                } else if !streamed {
                    // A slash command's output comes whole and is printed
                    // verbatim, so column layouts survive.
                    let _ = write!(stdout, "{}", reply.text);
                }
                if !terminal && !reply.text.is_empty() && !reply.text.ends_with('\n') {
                    let _ = writeln!(stdout);
                }
                None
            }
            // A sub-agent's own calls, indented under the call that runs it;
            // its text is for the model that called it.
            Ok(AgentEvent::SubAgent(sub)) => {
                match sub.innermost() {
                    AgentEvent::ToolCallStarted(call) => {
                        clear();
                        eprintln!("  → {}: {}({})", sub.tool, call.name, call.arguments);
                    }
                    AgentEvent::Status(Status::RunningTool { tool }) => {
                        if let Some(spinner) = &spinner {
                            spinner.show(&format!("{}: running {tool}…", sub.tool));
                        }
                    }
                    _ => {}
                }
                None
            }
            Ok(_) => None,
            Err(error) => {
                clear();
                code = ExitCode::from(EXIT_TURN_FAILED);
                if json {
                    Some(json!({"type": "error", "message": error.user_message()}))
                } else {
                    eprintln!("{}", error.user_message());
                    None
                }
            }
        };
        if let Some(line) = line {
            let _ = writeln!(stdout, "{line}");
        }
    }
    clear();
    code
}

/// An event as one JSON object, for `run --json`.
fn json_event(event: &AgentEvent) -> Option<serde_json::Value> {
    Some(match event {
        AgentEvent::TextDelta(delta) | AgentEvent::RefusalDelta(delta) => {
            json!({"type": "text", "delta": delta})
        }
        AgentEvent::ReasoningDelta(delta) => json!({"type": "reasoning", "delta": delta}),
        AgentEvent::ToolCallStarted(call) => {
            json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
        }
        AgentEvent::ToolCallFinished(record) => json!({
            "type": "tool_result", "id": record.call.id, "content": record.content,
            "is_error": record.outcome != ToolOutcome::Ok, "outcome": format!("{:?}", record.outcome),
            "duration_ms": record.duration.as_millis() as u64,
        }),
        AgentEvent::Usage(usage) => json!({
            "type": "usage", "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "cached_tokens": usage.cached_tokens,
        }),
        AgentEvent::PartialOutput(value) => json!({"type": "partial_output", "value": value}),
        AgentEvent::Done(reply) => json!({
            "type": "done", "text": reply.text, "is_refusal": reply.is_refusal, "output": reply.output,
        }),
        AgentEvent::SubAgent(sub) => json!({
            "type": "sub_agent", "tool": sub.tool, "call_id": sub.call_id, "depth": sub.depth,
            "event": json_event(&sub.event)?,
        }),
        _ => return None,
    })
}
