//! Where conversations are kept between turns.
//!
//! The agent loads a conversation from its [`HistoryStore`] at the start of a
//! turn and appends each step as it completes: the user's message, then each
//! assistant message together with the results of its tool calls, so a store
//! never holds a tool call without its result. [`MemoryHistory`] is the
//! default store.

mod memory;

use futures_util::future::BoxFuture;

pub use memory::MemoryHistory;

use crate::message::Message;

/// A store of conversations, keyed by conversation id.
///
/// Implementations must be safe to share between tasks; the agent makes sure
/// only one turn of a conversation runs at a time.
pub trait HistoryStore: Send + Sync + std::fmt::Debug + 'static {
    /// The conversation's messages, oldest first; empty for a new conversation.
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>>;

    /// Appends messages atomically: all of them are stored, or none.
    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>>;

    /// Forgets a conversation.
    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>>;

    /// The ids of the stored conversations.
    fn list(&self) -> BoxFuture<'_, Result<Vec<String>, HistoryError>>;
}

/// Why a history store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The storage backend failed.
    #[error("storage failed: {message}")]
    Storage {
        /// What went wrong, and what to do about it.
        message: String,
        /// The backend's error.
        #[source]
        source: Option<crate::BoxError>,
    },
}

impl HistoryError {
    /// The error with every source, joined by ": ".
    pub fn chain(&self) -> String {
        crate::error::chain(self)
    }
}
