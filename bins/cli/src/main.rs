//! `ferrobot`: chat with your machine's assistant in the terminal, or script it.
//!
//! Exit codes: 0 success; 1 the turn failed (the model endpoint is down or
//! refused); 2 bad configuration or usage; 3 `doctor` found a problem.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ferrobot::agent::{Status, ToolOutcome};
use ferrobot::confirm::ConfirmRequest;
use ferrobot::history::{HistoryStore, SqliteHistory};
use ferrobot::provider::Provider;
use ferrobot::{Agent, AgentEvent};
use ferrobot_app::{Config, ConfigSource, LoadedConfig, ToolState, TurnTrace, append_trace};
use futures_util::StreamExt;
use serde_json::json;

/// `println!` that ignores a closed stdout (`ferrobot history list | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod render;

const EXIT_TURN_FAILED: u8 = 1;
const EXIT_CONFIG: u8 = 2;
const EXIT_DOCTOR: u8 = 3;

/// Your machine's assistant, over any OpenAI-compatible server.
#[derive(Debug, Parser)]
#[command(name = "ferrobot", version, about)]
struct Cli {
    /// Read this config file instead of ./ferrobot.toml or the per-user one.
    #[arg(short = 'c', long = "config", global = true)]
    config: Option<PathBuf>,
    /// The provider dialect (`llm.provider`).
    #[arg(long, global = true)]
    provider: Option<String>,
    /// The model (`llm.model`).
    #[arg(long, global = true)]
    model: Option<String>,
    /// The server (`llm.base_url`), e.g. `http://localhost:11434/v1`.
    #[arg(long, global = true)]
    base_url: Option<String>,
    /// The environment variable holding the API key (`llm.api_key_env`).
    #[arg(long, global = true)]
    api_key_env: Option<String>,
    /// For the chat: which conversation to continue, or a fresh one.
    #[command(flatten)]
    conversation: ConversationArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Answer one prompt and exit: the answer on stdout, tool calls on stderr.
    Run {
        /// What to ask.
        prompt: String,
        /// One JSON object per event per line on stdout, for scripts.
        #[arg(long)]
        json: bool,
        /// Approve tools that ask for confirmation (declined otherwise).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        conversation: ConversationArgs,
    },
    /// List the tools: enabled or not, available here or why not.
    Tools,
    /// Switch a tool on (a running bot applies it within a second).
    Enable {
        /// The tool's name.
        name: String,
    },
    /// Switch a tool off (a running bot applies it within a second).
    Disable {
        /// The tool's name.
        name: String,
    },
    /// Probe the model server: reachable, model present, latency.
    Doctor,
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Read the conversation store.
    History {
        #[command(subcommand)]
        action: HistoryAction,
    },
}

#[derive(Debug, clap::Args)]
struct ConversationArgs {
    /// Continue this conversation. By default, `cli`.
    #[arg(long, default_value = "cli")]
    conversation: String,
    /// Start a fresh conversation.
    #[arg(long)]
    new: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Validate the config and print each effective value with its source.
    Check,
}

#[derive(Debug, Subcommand)]
enum HistoryAction {
    /// The stored conversations, most recent first.
    List,
    /// One conversation, message by message (what `list` and `search`
    /// name it).
    Show {
        /// The conversation, e.g. `cli`.
        conversation: String,
    },
    /// Messages matching a query.
    Search {
        /// Words to look for.
        query: String,
        /// At most this many results.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

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
    let _log = logging(&loaded);
    let result = match cli.command {
        Some(Command::Run {
            prompt,
            json,
            yes,
            conversation,
        }) => run(&loaded, &prompt, json, yes, &conversation).await,
        Some(Command::Doctor) => doctor(&loaded).await,
        Some(Command::Tools) => tools(&loaded),
        Some(Command::Enable { name }) => switch(&loaded, &name, true),
        Some(Command::Disable { name }) => switch(&loaded, &name, false),
        Some(Command::Config {
            action: ConfigAction::Check,
        }) => Ok(config_check(&loaded)),
        Some(Command::History { action }) => history(&loaded, action).await,
        None => chat(&loaded, &conversation_id(&cli.conversation)).await,
    };
    result.unwrap_or_else(|error| {
        eprintln!("ferrobot: {error:#}");
        ExitCode::from(EXIT_CONFIG)
    })
}

/// Logs: warnings on the terminal (`FERROBOT_LOG` to change), and everything
/// at info and above in a daily file under `logs/` beside the history.
fn logging(loaded: &LoadedConfig) -> Option<tracing_appender::non_blocking::WorkerGuard> {
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

fn tools(loaded: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let state = ToolState::load(&loaded.tool_state_path())?;
    for tool in loaded.tools().map_err(|e| anyhow::anyhow!(e))? {
        let enabled = if state.is_disabled(tool.name()) {
            "disabled"
        } else {
            "enabled"
        };
        let available = match tool.availability() {
            Ok(()) => "available".to_owned(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        let summary = tool
            .spec()
            .description
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        out!("{:<20} {enabled:<9} {available:<12} {summary}", tool.name());
    }
    Ok(ExitCode::SUCCESS)
}

fn switch(loaded: &LoadedConfig, name: &str, enabled: bool) -> anyhow::Result<ExitCode> {
    // The system tools and those of the tools file, as `ferrobot tools` lists.
    let known: Vec<String> = loaded
        .tools()
        .map_err(|e| anyhow::anyhow!(e))?
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    if !known.iter().any(|k| k == name) {
        anyhow::bail!(
            "no tool named `{name}`; the tools are: {}",
            known.join(", ")
        );
    }
    let path = loaded.tool_state_path();
    let mut state = ToolState::load(&path)?;
    state.set_enabled(name, enabled);
    state
        .save(&path)
        .with_context(|| format!("saving {}", path.display()))?;
    out!("{name} {}", if enabled { "enabled" } else { "disabled" });
    Ok(ExitCode::SUCCESS)
}

fn conversation_id(args: &ConversationArgs) -> String {
    if args.new {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{}-{now}", args.conversation)
    } else {
        args.conversation.clone()
    }
}

/// One turn, printed as it streams.
async fn run(
    loaded: &LoadedConfig,
    prompt: &str,
    json: bool,
    yes: bool,
    args: &ConversationArgs,
) -> anyhow::Result<ExitCode> {
    let agent = agent(loaded, yes).await?;
    Ok(turn(loaded, &agent, &conversation_id(args), prompt, json).await)
}

async fn turn(
    loaded: &LoadedConfig,
    agent: &Agent,
    conversation: &str,
    prompt: &str,
    json: bool,
) -> ExitCode {
    let mut events = agent.stream(conversation, prompt);
    print_events(
        loaded,
        &mut events,
        TurnTrace::new(conversation, prompt),
        json,
        true,
    )
    .await
}

/// Prints a turn's events as they come: text on stdout, tool calls on stderr.
/// Each turn is also appended to `traces.jsonl` beside the history.
async fn print_events(
    loaded: &LoadedConfig,
    events: &mut ferrobot::TurnStream,
    mut trace: TurnTrace,
    json: bool,
    show_reasoning: bool,
) -> ExitCode {
    use std::io::IsTerminal as _;
    // Markdown and the spinner only for a person at a terminal; scripts and
    // pipes get plain text.
    let terminal = !json && std::io::stdout().is_terminal();
    let spinner = terminal.then(render::Spinner::start);
    let clear = || {
        if let Some(spinner) = &spinner {
            spinner.clear();
        }
    };
    let mut blocks = render::Blocks::default();
    let mut stdout = std::io::stdout();
    let mut outcome: Result<String, String> = Err("the turn ended without a reply".into());
    let mut code = ExitCode::SUCCESS;
    let mut streamed = false;
    while let Some(event) = events.next().await {
        match &event {
            Ok(AgentEvent::Done(reply)) => outcome = Ok(reply.text.clone()),
            Ok(event) => trace.record(event),
            Err(error) => outcome = Err(error.user_message()),
        }
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
    let record = trace.finish(outcome.as_deref().map_err(String::as_str));
    if let Err(error) = append_trace(&traces_path(loaded), &record) {
        tracing::warn!(%error, "could not write the trace");
    }
    code
}

/// `traces.jsonl` and `logs/` live beside the history file.
fn traces_path(loaded: &LoadedConfig) -> PathBuf {
    data_dir(loaded).join("traces.jsonl")
}

fn data_dir(loaded: &LoadedConfig) -> PathBuf {
    loaded
        .history_path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
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
        AgentEvent::Done(reply) => {
            json!({"type": "done", "text": reply.text, "is_refusal": reply.is_refusal})
        }
        _ => return None,
    })
}

/// Reads lines for the chat on its own thread (the line editor blocks), for
/// the prompt and for confirmation questions alike.
#[derive(Clone)]
struct Input(std::sync::mpsc::Sender<(String, tokio::sync::oneshot::Sender<Option<String>>)>);

impl Input {
    /// Starts the editor, with input history kept in `history`.
    fn start(history: PathBuf) -> anyhow::Result<Self> {
        let (tx, rx) =
            std::sync::mpsc::channel::<(String, tokio::sync::oneshot::Sender<Option<String>>)>();
        let mut editor = rustyline::DefaultEditor::new()?;
        let _ = editor.load_history(&history);
        std::thread::spawn(move || {
            while let Ok((prompt, answer)) = rx.recv() {
                let line = loop {
                    match editor.readline(&prompt) {
                        Ok(line) => break Some(line),
                        // Ctrl-C at the prompt clears the line.
                        Err(rustyline::error::ReadlineError::Interrupted) => {}
                        Err(_) => break None,
                    }
                };
                if let Some(line) = line.as_deref().filter(|l| !l.trim().is_empty()) {
                    let _ = editor.add_history_entry(line);
                    if let Some(dir) = history.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    let _ = editor.save_history(&history);
                }
                let _ = answer.send(line);
            }
        });
        Ok(Self(tx))
    }

    /// One line; `None` at the end of input (Ctrl-D, or the end of a pipe).
    async fn line(&self, prompt: &str) -> Option<String> {
        let (answer, line) = tokio::sync::oneshot::channel();
        self.0.send((prompt.to_owned(), answer)).ok()?;
        line.await.ok().flatten()
    }
}

/// The chat: a line editor with persistent input history (it also reads
/// piped stdin); Ctrl-C cancels the turn in progress, `exit` or Ctrl-D quits;
/// tools that ask get a y/N question.
async fn chat(loaded: &LoadedConfig, conversation: &str) -> anyhow::Result<ExitCode> {
    let data = loaded
        .history_path()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let input = Input::start(data.join("input_history.txt"))?;
    let asker = input.clone();
    let agent = agent_with(loaded, move |request: ConfirmRequest| {
        let asker = asker.clone();
        async move {
            let answer = asker
                .line(&format!("{} [y/N] ", request.prompt))
                .await
                .unwrap_or_default();
            matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
        }
    })
    .await?;
    let _state = ToolState::watch(loaded.tool_state_path(), &agent);
    // Say up front when the model is out of reach; slash commands still work.
    let health = agent.provider().health().await;
    if !health.is_ok() {
        eprintln!(
            "LLM unavailable: {} — slash commands still work (type /help)",
            health.detail.unwrap_or_else(|| "no answer".into())
        );
    }
    let _tools = ferrobot_app::watch_tools_file(loaded.tools_file_path(), &agent);
    let mut show_reasoning = true;
    while let Some(line) = input.line("› ").await {
        let line = line.trim();
        if line == "exit" || line == "quit" {
            break;
        }
        if line == ":reasoning" {
            show_reasoning = !show_reasoning;
            eprintln!(
                "reasoning {}",
                if show_reasoning { "shown" } else { "hidden" }
            );
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let mut events = agent.stream(conversation, line);
        let cancel = events.cancellation();
        let interrupt = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
        print_events(
            loaded,
            &mut events,
            TurnTrace::new(conversation, line),
            false,
            show_reasoning,
        )
        .await;
        interrupt.abort();
    }
    Ok(ExitCode::SUCCESS)
}

async fn doctor(loaded: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let provider = loaded.provider()?;
    let llm = &loaded.config.llm;
    let health = provider.health().await;
    out!(
        "server:  {} ({} ms)",
        llm.base_url,
        health.latency.as_millis()
    );
    out!("model:   {}", llm.model);
    if health.is_ok() {
        out!("status:  ok");
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "status:  {}",
        if health.reachable {
            "answered, with a problem"
        } else {
            "unreachable"
        }
    );
    if let Some(detail) = health.detail {
        out!("problem: {detail}");
    }
    Ok(ExitCode::from(EXIT_DOCTOR))
}

fn config_check(loaded: &LoadedConfig) -> ExitCode {
    match &loaded.file {
        Some(file) => out!("config file: {}", file.display()),
        None => out!("config file: none (built-in defaults)"),
    }
    for (key, value, source) in loaded.explain() {
        out!("{key} = {value}    # {source}");
    }
    out!("history file: {}", loaded.history_path().display());
    ExitCode::SUCCESS
}

/// A stored message as `history show` prints it: who, then what, tool
/// calls and results on lines of their own (results cut at 200 characters).
fn shown(message: &ferrobot::Message) -> Vec<String> {
    use ferrobot::Role;
    let one_line = |text: &str| text.replace('\n', " ");
    let who = match message.role {
        Role::User if message.summary => "summary",
        Role::User => "you",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    };
    let mut lines = Vec::new();
    let text = message.text();
    if !text.is_empty() {
        lines.push(format!("{who}: {}", one_line(&text)));
    }
    for call in message.tool_calls() {
        lines.push(format!("{who}: → {}({})", call.name, call.arguments));
    }
    for result in message.tool_results_iter() {
        let mut content: String = one_line(&result.content).chars().take(200).collect();
        if content.len() < result.content.len() {
            content.push('…');
        }
        let mark = if result.is_error { "✗" } else { "←" };
        lines.push(format!("{who}: {mark} {content}"));
    }
    lines
}

async fn history(loaded: &LoadedConfig, action: HistoryAction) -> anyhow::Result<ExitCode> {
    let store = SqliteHistory::open(loaded.history_path()).await?;
    match action {
        HistoryAction::List => {
            for info in store.list().await? {
                out!(
                    "{}\t{} messages\t{}",
                    info.id,
                    info.messages,
                    info.title.unwrap_or_default()
                );
            }
        }
        HistoryAction::Show { conversation } => {
            let messages = store.load(&conversation).await?;
            if messages.is_empty() {
                anyhow::bail!(
                    "no conversation `{conversation}`; `ferrobot history list` shows them"
                );
            }
            for (index, message) in messages.iter().enumerate() {
                for line in shown(message) {
                    out!("#{index}\t{line}");
                }
            }
        }
        HistoryAction::Search { query, limit } => {
            for hit in store.search(&query, limit).await? {
                out!(
                    "{}#{}\t{}",
                    hit.conversation,
                    hit.index,
                    hit.snippet.replace('\n', " ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
