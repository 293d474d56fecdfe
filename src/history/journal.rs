//! The turn journal: each message from outside recorded before its turn
//! runs, and how far its answer got, so a crash loses no message and
//! answers none twice.
//!
//! A front end (a chat bot, the CLI) [`receive`](super::HistoryStore::receive)s
//! a message under its platform's id before running its turn; a message
//! already journaled is not run again, so a platform's redelivery is
//! harmless. The turn marks the entry as it goes, in the same transaction
//! as the messages it stores ([`TurnRequest::journal`](crate::agent::TurnRequest::journal)):
//! [`Stage::Started`] with the user's message, the calls running before
//! they run, [`Stage::Answered`] with the answer. The front end notes the
//! id of the answer's first posted message, then [`Stage::Delivered`].
//! After a crash, [`unfinished`](super::HistoryStore::unfinished) says what
//! to recover, and from where.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::message::Message;

/// How far the answer to a journaled message got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stage {
    /// Journaled; its turn has not stored anything yet. Recovery runs it.
    Received,
    /// Its turn stored the user's message (and perhaps some steps), not
    /// the answer. Recovery continues the turn from the history, without
    /// storing the message again.
    Started,
    /// Its answer is stored in the history, perhaps not yet shown.
    /// Recovery shows it.
    Answered,
    /// Its answer was shown: nothing to recover.
    Delivered,
}

impl Stage {
    /// The stage's name, as stores keep it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Started => "started",
            Self::Answered => "answered",
            Self::Delivered => "delivered",
        }
    }

    /// The stage named `name` by [`as_str`](Self::as_str).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "received" => Self::Received,
            "started" => Self::Started,
            "answered" => Self::Answered,
            "delivered" => Self::Delivered,
            _ => return None,
        })
    }
}

/// A message from outside, as the journal keeps it.
///
/// # Examples
/// ```
/// use ferrobot::history::{Intake, Stage};
/// let intake = Intake::new("telegram:42:7", "42", r#"{"text":"hi"}"#);
/// assert_eq!(intake.stage, Stage::Received);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Intake {
    /// The platform's id of the message, unique in the store: e.g.
    /// `telegram:CHAT:MESSAGE`, `discord:MESSAGE`, `cli:CONVERSATION:N`.
    pub id: String,
    /// Where it came from, as the front end names it (a chat, a channel).
    pub chat: String,
    /// What the front end needs to run it again (its own serde form of the
    /// message, image bytes included); the store keeps it as it is.
    pub payload: String,
    /// How far its answer got.
    pub stage: Stage,
    /// The conversation its turn runs in, once [`Stage::Started`].
    pub conversation: Option<String>,
    /// The assistant message whose tool calls were running, if any: after
    /// a crash, they may or may not have taken effect.
    pub calling: Option<Message>,
    /// The id of the answer's first posted message, once posted: recovery
    /// edits it instead of posting another.
    pub reply: Option<String>,
    /// The answer's text, once [`Stage::Answered`]: what recovery shows.
    pub answer: Option<String>,
    /// When it was journaled.
    pub received: SystemTime,
}

impl Intake {
    /// A message just received, not yet run.
    pub fn new(id: impl Into<String>, chat: impl Into<String>, payload: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            chat: chat.into(),
            payload: payload.into(),
            stage: Stage::Received,
            conversation: None,
            calling: None,
            reply: None,
            answer: None,
            received: SystemTime::now(),
        }
    }

    /// Applies `mark` to the entry, as a store does. A delivered entry
    /// stays delivered.
    pub fn apply(&mut self, mark: &Mark) {
        if self.stage == Stage::Delivered && !matches!(mark, Mark::Reply(_)) {
            return;
        }
        match mark {
            Mark::Started { conversation } => {
                self.stage = Stage::Started;
                self.conversation = Some(conversation.clone());
                self.calling = None;
            }
            Mark::Calling(message) => self.calling = Some(message.clone()),
            Mark::Answered { text } => {
                self.stage = Stage::Answered;
                self.answer = Some(text.clone());
                self.calling = None;
            }
            Mark::Reply(id) => self.reply = Some(id.clone()),
            Mark::Delivered => {
                self.stage = Stage::Delivered;
                self.calling = None;
            }
        }
    }
}

/// What happened to a journaled message's turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Mark {
    /// Its turn runs in `conversation` and stored the user's message, or
    /// a step: no call is running.
    Started {
        /// The conversation.
        conversation: String,
    },
    /// The tool calls of this assistant message are about to run.
    Calling(Message),
    /// The answer is stored; its text is kept with the entry.
    Answered {
        /// The answer's text.
        text: String,
    },
    /// The answer's first message was posted with this id.
    Reply(String),
    /// The answer was shown.
    Delivered,
}

impl Mark {
    /// The stage an entry is in after this mark, when it sets one.
    pub fn stage(&self) -> Option<Stage> {
        match self {
            Self::Started { .. } => Some(Stage::Started),
            Self::Answered { .. } => Some(Stage::Answered),
            Self::Delivered => Some(Stage::Delivered),
            Self::Calling(_) | Self::Reply(_) => None,
        }
    }
}

/// A new name for the process (the store instance) that receives messages:
/// an entry it journals is its own until [`claim_unfinished`](super::HistoryStore::claim_unfinished)
/// gives it to another. The process id (for people reading the table) and
/// a random part (process ids are reused, and repeat across machines).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn new_owner() -> String {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{}-{random:016x}", std::process::id())
}
