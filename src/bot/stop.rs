//! The Stop button a channel puts under a reply being written: its label,
//! its data, and what a press of it becomes ([`stop_pressed`]).

use crate::agent::Builtin;

use super::channel::Incoming;

/// The Stop button's label.
pub const STOP_LABEL: &str = "⏹ Stop";

/// The data a Stop button carries (Telegram's callback data, Discord's
/// custom id): never a confirmation button's (`confirm:…`, see
/// [`Questions`](super::Questions)), so a channel tells the two apart by it.
pub const STOP_DATA: &str = "stop";

/// Why a press of the Stop button stops nothing; the text is for the presser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StopRefused {
    /// The presser is not one of the users the bot answers.
    #[error("Only the people this bot answers can stop it.")]
    NotAllowed,
}

/// A press of the Stop button by `presser` in `conversation`: `/stop` from
/// them, to hand to the channel's [`Handler`](super::Handler), which answers
/// it as the built-in (the running turn stops, keeping what streamed; the
/// finished reply is shown without the button). Only the users the bot
/// answers (`allowed`) may stop a turn; anyone else gets the refusal to show
/// them alone.
///
/// # Errors
/// [`StopRefused::NotAllowed`] when `allowed` is false.
///
/// # Examples
/// ```
/// use ferrobot::bot::{StopRefused, stop_pressed};
/// let stop = stop_pressed("chat-1", "ann", true).unwrap();
/// assert_eq!((stop.conversation.as_str(), stop.user.as_str(), stop.text.as_str()), ("chat-1", "ann", "/stop"));
/// assert_eq!(stop_pressed("chat-1", "eve", false), Err(StopRefused::NotAllowed));
/// ```
pub fn stop_pressed(
    conversation: impl Into<String>,
    presser: impl Into<String>,
    allowed: bool,
) -> Result<Incoming, StopRefused> {
    if !allowed {
        return Err(StopRefused::NotAllowed);
    }
    let stop = format!("/{}", Builtin::Stop.name());
    Ok(Incoming::new(conversation, presser, stop))
}
