//! The turns running now: what `/stop` cancels and where steering goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::message::{Message, Part};

/// What the agent does with a message that arrives while a turn of its
/// conversation runs.
///
/// Set it for the agent with
/// [`AgentBuilder::while_busy`](super::AgentBuilder::while_busy), or for one
/// message with [`TurnRequest::while_busy`](super::TurnRequest::while_busy).
/// Only a turn running in this process is seen: two processes sharing a
/// history store don't see each other's turns.
///
/// # Examples
/// ```
/// use ferrobot::agent::{TurnRequest, WhileBusy};
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .while_busy(WhileBusy::Steer)
///     .build();
/// // This one message waits its turn instead.
/// let request = TurnRequest::new("and then?").while_busy(WhileBusy::Queue);
/// # let _ = (agent, request);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhileBusy {
    /// It waits for the running turn to end, then runs as a turn of its own.
    #[default]
    Queue,
    /// It is entered into the running turn, which reads it after the tool
    /// results of its current step (or after its answer, and answers
    /// again): the model sees it before its next step. The message's own
    /// [`Reply`](super::Reply) comes at once, [`steered`](super::Reply::steered).
    /// With no turn running, it runs as a turn of its own.
    Steer,
    /// It stops the running turn (what streamed is kept, marked
    /// interrupted; that turn ends with [`Error::Cancelled`](crate::Error::Cancelled)),
    /// then runs as a turn of its own.
    Interrupt,
}

/// The running turn of each conversation: its cancellation token and its
/// steering inbox. An entry lives only while a turn runs, so idle
/// conversations cost nothing.
#[derive(Debug, Default)]
pub(crate) struct RunningTurns {
    turns: Mutex<HashMap<Arc<str>, Entry>>,
    /// Tells a turn's entry from a later turn's of the same conversation.
    next: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    cancel: CancellationToken,
    inbox: Vec<Message>,
}

/// A turn's place in [`RunningTurns`], from when it holds the conversation's
/// lock until it ends.
#[derive(Debug)]
pub(crate) struct RunningTurn<'a> {
    owner: &'a RunningTurns,
    conversation: Arc<str>,
    id: u64,
    cancel: CancellationToken,
}

impl RunningTurns {
    /// Registers the turn of `conversation` now holding its lock. Its token
    /// is a child of `caller`: stopping the turn leaves the caller's token
    /// alone, and the caller cancelling stops the turn.
    pub(crate) fn start(
        &self,
        conversation: &Arc<str>,
        caller: &CancellationToken,
    ) -> RunningTurn<'_> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = caller.child_token();
        self.lock().insert(
            Arc::clone(conversation),
            Entry {
                id,
                cancel: cancel.clone(),
                inbox: Vec::new(),
            },
        );
        RunningTurn {
            owner: self,
            conversation: Arc::clone(conversation),
            id,
            cancel,
        }
    }

    /// Cancels the conversation's running turn; false when none runs.
    pub(crate) fn stop(&self, conversation: &str) -> bool {
        match self.lock().get(conversation) {
            Some(entry) => {
                entry.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Puts `message` in the running turn's inbox, or gives it back when
    /// no turn runs (or it is ending): then it must run as a turn of its
    /// own. The turn reads its inbox under the same lock, so a message
    /// handed over here is always read.
    pub(crate) fn steer(&self, conversation: &str, message: Message) -> Result<(), Message> {
        match self.lock().get_mut(conversation) {
            Some(entry) if !entry.cancel.is_cancelled() => {
                entry.inbox.push(message);
                Ok(())
            }
            _ => Err(message),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Entry>> {
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

impl RunningTurn<'_> {
    /// The turn's own cancellation token.
    pub(crate) fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// What was said while the turn ran, as one steering message; `None`
    /// when nothing was. The inbox stays open.
    pub(crate) fn take(&self) -> Option<Message> {
        let mut turns = self.owner.lock();
        let entry = turns
            .get_mut(&self.conversation)
            .filter(|e| e.id == self.id)?;
        join(std::mem::take(&mut entry.inbox))
    }

    /// As [`take`](Self::take), but when nothing was said the inbox closes
    /// in the same step: a message arriving after runs as a turn of its own
    /// instead of waiting in an inbox nobody reads.
    pub(crate) fn take_or_close(&self) -> Option<Message> {
        let mut turns = self.owner.lock();
        let entry = turns
            .get_mut(&self.conversation)
            .filter(|e| e.id == self.id)?;
        if entry.inbox.is_empty() {
            turns.remove(&self.conversation);
            return None;
        }
        join(std::mem::take(&mut entry.inbox))
    }

    /// Closes the inbox and returns what it still held, each as the user
    /// wrote it (not marked steering): the turn ended before reading them.
    pub(crate) fn close(&self) -> Vec<Message> {
        let mut turns = self.owner.lock();
        if turns
            .get(&self.conversation)
            .is_some_and(|e| e.id == self.id)
        {
            let entry = turns.remove(&self.conversation);
            return entry.map(|e| e.inbox).unwrap_or_default();
        }
        Vec::new()
    }
}

impl Drop for RunningTurn<'_> {
    fn drop(&mut self) {
        // A turn whose future was dropped mid-way never closed its inbox.
        self.close();
    }
}

/// Several messages as one steering message: their texts joined by blank
/// lines, then their images. Dialects that refuse two user messages in a
/// row would reject them one by one.
fn join(messages: Vec<Message>) -> Option<Message> {
    if messages.is_empty() {
        return None;
    }
    let text = messages
        .iter()
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut joined = Message::steering(text);
    joined.parts.extend(
        messages
            .into_iter()
            .flat_map(|m| m.parts)
            .filter(|p| matches!(p, Part::Image(_))),
    );
    Some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_only_while_a_turn_runs() {
        let running = RunningTurns::default();
        let alice: Arc<str> = "alice".into();
        assert!(!running.stop("alice"));
        {
            let turn = running.start(&alice, &CancellationToken::new());
            assert_eq!(running.len(), 1);
            assert!(!turn.cancellation().is_cancelled());
        }
        assert_eq!(running.len(), 0);
        assert!(!running.stop("alice"));
    }

    #[test]
    fn stopping_cancels_the_turn_not_the_caller() {
        let running = RunningTurns::default();
        let caller = CancellationToken::new();
        let turn = running.start(&"alice".into(), &caller);
        assert!(!running.stop("bob"));
        assert!(running.stop("alice"));
        assert!(turn.cancellation().is_cancelled());
        assert!(!caller.is_cancelled());
        // And the caller cancelling stops the turn.
        let caller = CancellationToken::new();
        let turn = running.start(&"bob".into(), &caller);
        caller.cancel();
        assert!(turn.cancellation().is_cancelled());
    }

    #[test]
    fn steering_messages_are_joined_into_one() {
        let running = RunningTurns::default();
        assert!(running.steer("alice", Message::user("lost?")).is_err());
        let turn = running.start(&"alice".into(), &CancellationToken::new());
        assert_eq!(turn.take(), None);
        running.steer("alice", Message::user("first")).unwrap();
        running.steer("alice", Message::user("second")).unwrap();
        let joined = turn.take().unwrap();
        assert!(joined.steering);
        assert_eq!(joined.text(), "first\n\nsecond");
        assert_eq!(turn.take(), None);
    }

    #[test]
    fn an_inbox_closed_empty_gives_messages_back() {
        let running = RunningTurns::default();
        let turn = running.start(&"alice".into(), &CancellationToken::new());
        running.steer("alice", Message::user("read")).unwrap();
        assert_eq!(turn.take_or_close().unwrap().text(), "read");
        assert_eq!(turn.take_or_close(), None);
        // Closed: the next message must run as a turn of its own.
        assert_eq!(
            running
                .steer("alice", Message::user("later"))
                .unwrap_err()
                .text(),
            "later"
        );
        assert_eq!(running.len(), 0);
    }

    #[test]
    fn what_a_turn_did_not_read_is_returned_on_close() {
        let running = RunningTurns::default();
        let turn = running.start(&"alice".into(), &CancellationToken::new());
        running.steer("alice", Message::user("unread")).unwrap();
        let left = turn.close();
        assert_eq!(left.len(), 1);
        assert!(!left[0].steering);
        // A stopped turn takes no more.
        let turn = running.start(&"alice".into(), &CancellationToken::new());
        running.stop("alice");
        assert!(running.steer("alice", Message::user("x")).is_err());
        drop(turn);
    }
}
