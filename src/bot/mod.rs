//! What every bot binary shares (feature `bot`): the [`Channel`] trait a chat
//! platform implements and [`serve`], which joins one to an agent; command
//! menus built from the tools ([`command_specs`]), re-entering the agent's
//! slash-command path; [`split_message`] for platform length limits; and
//! the layered [`Config`] every bot binary reads.

#[cfg(all(feature = "openai", feature = "sqlite", feature = "tools"))]
mod agent;
mod channel;
mod commands;
mod config;
mod live;
mod questions;
mod split;
mod state;
mod trace;

pub use channel::{
    Channel, ChannelConfirm, ChannelError, ChannelNotifier, Handler, Incoming, serve,
};
pub use commands::{CommandOption, CommandSpec, LatestMenu, OptionKind, command_specs, slash_text};
pub use config::{
    AgentConfig, Config, ConfigError, ConfigSource, DiscordConfig, HistoryConfig, LlmConfig,
    LoadedConfig, PROVIDERS, Secret, TelegramConfig, ToolsConfig, user_config_file, user_data_dir,
};
pub use live::chat_of;
pub use questions::{Answered, Question, Questions, Unanswered, decided};
pub use split::{Length, clip, split_message};
pub use state::ToolState;
#[cfg(feature = "tools")]
pub use state::watch_tools_file;
pub use trace::{TurnTrace, append_trace};
