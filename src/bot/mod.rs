//! What every bot binary shares (feature `bot`): the [`Channel`] trait a chat
//! platform implements and [`serve`], which joins one to an agent; command
//! menus built from the tools ([`command_specs`]), re-entering the agent's
//! slash-command path; and [`split_message`] for platform length limits.

mod channel;
mod commands;
mod split;

pub use channel::{
    Channel, ChannelConfirm, ChannelError, ChannelNotifier, Handler, Incoming, serve,
};
pub use commands::{CommandOption, CommandSpec, OptionKind, command_specs};
pub use split::{Length, split_message};
