//! `ferrobot-app`: the application behind ferrobot's three binaries (the
//! `ferrobot` CLI, `ferrobot-telegram`, `ferrobot-discord`), and nothing
//! else. Programs embedding ferrobot use the `ferrobot` library, which knows
//! nothing of this crate.
//!
//! - [`config`]: the layered config (defaults, file, `FERROBOT_…`
//!   environment, flags), its checks, and the provider `[llm]` describes.
//! - [`agent`](mod@agent): the [`Agent`](ferrobot::Agent) a config describes
//!   and a bot served from it ([`LoadedConfig::serve`]).
//! - [`context`](mod@context): how much of a long conversation each turn
//!   sends, from the model's context window.
//! - [`history`]: the store `[history]` names, a SQLite file or a
//!   PostgreSQL database.
//! - [`prompt`]: the system prompt's order, the instruction files, and the
//!   facts it ends with.
//! - [`mcp`](mod@mcp): the MCP servers of `[mcp.servers]`, started in the
//!   background for an agent.
//! - [`images`]: the images the bots download for the model, their size
//!   limit, and how everything else people send is named for them.
//! - [`tool_state`]: which tools are switched off, in a file every process
//!   shares, and following the tools file.
//! - [`trace`]: one JSON line per turn in `traces.jsonl`.
//! - [`activity`]: the turns counted and the latest warnings and errors,
//!   for the [`panel`]: the control panel on loopback, and the runtime
//!   files `ferrobot status` reads.
//! - [`logging`]: the terminal, the rotating log file and the traces
//!   (`[logging]`), and spans exported over OTLP/HTTP (feature `otel`).
//! - [`single`]: one bot per history file, by a lock beside it.
//! - [`run`]: a bot binary's `main` (arguments, logging, exit codes), and
//!   [`retry`](mod@retry): the rule for retrying a chat platform's API.

pub mod activity;
pub mod agent;
pub mod config;
pub mod context;
pub mod history;
pub mod images;
pub mod logging;
pub mod mcp;
pub mod panel;
pub mod prompt;
pub mod retry;
pub mod run;
pub mod session;
pub mod single;
#[cfg(feature = "otel")]
mod telemetry;
pub mod tool_state;
pub mod trace;

pub use config::{
    AgentConfig, Config, ConfigError, ConfigSource, ContextConfig, DatabaseUrl, Dialect,
    DiscordConfig, HistoryConfig, LlmConfig, LoadedConfig, LoggingConfig, McpConfig,
    McpServerConfig, PanelConfig, PermissionsConfig, ScheduleConfig, Secret, TelegramConfig,
    ToolsConfig, WhileBusyMode, user_config_file, user_data_dir,
};
pub use mcp::McpServers;
pub use retry::{Retry, retry};
pub use run::{Bin, Error, lock, main};
pub use tool_state::{ToolState, watch_tools_file};
pub use trace::{Traces, TurnTrace, append_trace};
