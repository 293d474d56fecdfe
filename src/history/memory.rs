//! The in-memory history store.

use std::collections::HashMap;
use std::sync::Mutex;

use futures_util::future::BoxFuture;

use super::{HistoryError, HistoryStore};
use crate::message::Message;

/// Keeps conversations in memory; they end with the process.
///
/// # Examples
/// ```
/// # tokio_test_block_on(async {
/// use ferrobot::{Message, history::{HistoryStore, MemoryHistory}};
/// let store = MemoryHistory::new();
/// store.append("alice", &[Message::user("hi")]).await?;
/// assert_eq!(store.load("alice").await?.len(), 1);
/// # Ok::<(), ferrobot::history::HistoryError>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Default)]
pub struct MemoryHistory {
    conversations: Mutex<HashMap<String, Vec<Message>>>,
}

impl MemoryHistory {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Vec<Message>>) -> T) -> T {
        // A panic elsewhere while holding the lock cannot leave a half-written
        // conversation (every write is a single push), so poisoning is ignored.
        f(&mut self.conversations.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl HistoryStore for MemoryHistory {
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        let messages = self.with(|c| c.get(conversation).cloned().unwrap_or_default());
        Box::pin(async move { Ok(messages) })
    }

    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.with(|c| {
            c.entry(conversation.to_owned())
                .or_default()
                .extend_from_slice(messages)
        });
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.with(|c| c.remove(conversation));
        Box::pin(async { Ok(()) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<String>, HistoryError>> {
        let mut ids: Vec<String> = self.with(|c| c.keys().cloned().collect());
        ids.sort();
        Box::pin(async move { Ok(ids) })
    }
}
