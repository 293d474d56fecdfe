//! What anyone writing a bot for a chat platform needs (feature `bot`): the
//! [`Channel`] trait a platform implements and [`serve`], which joins one to
//! an agent (replies streamed into the chat, "typing…", `/new`, each message
//! journaled and recovered after a crash through its [`Handler`]); command
//! menus built from the tools ([`command_specs`]), re-entering the agent's
//! slash-command path; confirmation questions answered by a button press
//! ([`Questions`]); the Stop button under a reply being written
//! ([`stop_pressed`]); and [`split_message`] for platform length limits.
//! ferrobot's own Telegram and Discord bots are built on these alone.

mod channel;
mod commands;
mod journal;
mod live;
mod questions;
mod split;
mod stop;

pub use channel::{Channel, ChannelConfirm, ChannelError, ChannelNotifier, Incoming, serve};
pub use commands::{
    CommandOption, CommandSpec, LatestMenu, OptionKind, command_specs, menu, slash_text,
};
pub use journal::Handler;
pub use live::chat_of;
pub use questions::{Answered, Question, Questions, Unanswered, always_covers, asked, decided};
pub use split::{Length, clip, split_message};
pub use stop::{STOP_DATA, STOP_LABEL, StopRefused, stop_pressed};
