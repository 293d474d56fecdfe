//! The command line: global options, the subcommands, and which
//! conversation the chat or `run` continues.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Your machine's assistant, over any OpenAI-compatible server.
#[derive(Debug, Parser)]
#[command(name = "ferrobot", version, about)]
pub(crate) struct Cli {
    /// Read this config file instead of ./ferrobot.toml or the per-user one.
    #[arg(short = 'c', long = "config", global = true)]
    pub(crate) config: Option<PathBuf>,
    /// The provider dialect (`llm.provider`).
    #[arg(long, global = true)]
    pub(crate) provider: Option<String>,
    /// The model (`llm.model`).
    #[arg(long, global = true)]
    pub(crate) model: Option<String>,
    /// The server (`llm.base_url`), e.g. `http://localhost:11434/v1`.
    #[arg(long, global = true)]
    pub(crate) base_url: Option<String>,
    /// The environment variable holding the API key (`llm.api_key_env`).
    #[arg(long, global = true)]
    pub(crate) api_key_env: Option<String>,
    /// For the chat: which conversation to continue, or a fresh one.
    #[command(flatten)]
    pub(crate) conversation: ConversationArgs,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Answer one prompt and exit: the answer on stdout, tool calls on stderr.
    Run {
        /// What to ask.
        prompt: String,
        /// One JSON object per event per line on stdout, for scripts.
        #[arg(long)]
        json: bool,
        /// Send this image (PNG, JPEG, GIF or WebP) with the prompt; repeat
        /// for several.
        #[arg(long = "image", value_name = "FILE")]
        images: Vec<std::path::PathBuf>,
        /// Answer with exactly one JSON value matching the JSON Schema in
        /// this file, printed on stdout (exit 0), or say why not on stderr
        /// (exit 1). Tools still run first.
        #[arg(long, value_name = "FILE.json")]
        output_schema: Option<std::path::PathBuf>,
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
    /// Probe the model server (reachable, model present, latency) and
    /// each MCP server of `[mcp.servers]` (connects, lists its tools).
    Doctor {
        /// Run the conformance check instead: fixed scenarios, each pass,
        /// degraded, fail or skipped; exit 0 when tool calling is usable,
        /// 3 when not.
        #[arg(long)]
        conformance: bool,
        /// With --conformance: one JSON array of objects (`name`,
        /// `verdict`, `detail`, and `exchange` for a failure).
        #[arg(long, requires = "conformance")]
        json: bool,
    },
    /// The bots of this config: running or not, since when, their model
    /// server's health, turns and latest problems, and each panel's address
    /// with its token. Exit 0 when one runs, 3 when none does.
    Status {
        /// One JSON array of objects, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Replay a bot session recorded with `FERROBOT_SESSION=FILE` against
    /// this config's agent, offline: the model answered from
    /// `NAME.model.json` beside it. Exit 0 when the bot answered as
    /// recorded, 1 with the differences when not.
    Replay {
        /// The session file.
        file: PathBuf,
        /// Leave this dotted path of the model's requests out of the
        /// comparison (`*` for any step), e.g. a tool's live output
        /// `messages.*.parts.*.output`; repeat for several.
        #[arg(long = "ignore", value_name = "PATH")]
        ignore: Vec<String>,
    },
    /// The MCP servers of `[mcp.servers]`.
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
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
    /// Show the permission rules and where each came from, what each tool
    /// does when no rule matches, and the "always" approvals given in
    /// conversations; or test a call.
    Permissions {
        #[command(subcommand)]
        action: Option<PermissionsAction>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum McpAction {
    /// Connect to each server and show its state (connected, or failed
    /// and why) and its tools as the model would see them.
    List {
        /// Wait at most this many seconds for the servers to answer.
        #[arg(long, default_value_t = 30)]
        wait: u64,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PermissionsAction {
    /// Say what would happen to a call and which rule or default decided:
    /// exit 0 when it would run, 4 when the user would be asked, 5 when it
    /// would be denied.
    Test {
        /// The tool's name.
        tool: String,
        /// Its arguments: a JSON object (`'{"path": "/etc"}'`), or
        /// `key=value` pairs as slash commands take them.
        arguments: Vec<String>,
        /// Count this conversation's "always" approvals too.
        #[arg(long)]
        conversation: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConversationArgs {
    /// Continue this conversation. By default, `cli`.
    #[arg(long, default_value = "cli")]
    pub(crate) conversation: String,
    /// Start a fresh conversation.
    #[arg(long)]
    new: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigAction {
    /// Validate the config and print each effective value with its source.
    Check,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HistoryAction {
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
    /// Write every conversation (images and "always" approvals included),
    /// schedule and later message as JSON Lines, to move them to another
    /// store with `import` (e.g. from the SQLite file to a PostgreSQL
    /// database). Stop the bots first: the journal is not carried.
    Export {
        /// The file to write; by default, standard output.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
    /// Read an `export` into the configured store. Conversations it already
    /// holds are left as they are (so importing twice adds nothing).
    Import {
        /// The file `export` wrote; `-` for standard input.
        file: std::path::PathBuf,
    },
}

pub(crate) fn conversation_id(args: &ConversationArgs) -> String {
    if args.new {
        fresh_conversation(&args.conversation)
    } else {
        args.conversation.clone()
    }
}

/// A new conversation named after `name`: `NAME-MILLISECONDS` (`--new`, or
/// `/new` in the chat).
pub(crate) fn fresh_conversation(name: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{name}-{now}")
}
