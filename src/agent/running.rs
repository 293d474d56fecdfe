//! One turn at a time per conversation, and the turns running now: what
//! `/stop` cancels and where steering goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;
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

/// The conversations with a turn running or waiting: one turn at a time
/// per conversation, and the running turn's cancellation token and
/// steering inbox. A conversation's entry lives only while a turn holds or
/// awaits it, so idle conversations cost nothing; a turn finds its own
/// entry without looking it up again.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    slots: Mutex<HashMap<Arc<str>, Arc<Slot>>>,
}

/// One conversation's place in [`Turns`].
#[derive(Debug)]
struct Slot {
    /// One permit: the turn holding it runs, later ones wait in order.
    gate: Semaphore,
    /// The running turn, from its start until it ends.
    running: Mutex<Option<Running>>,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            gate: Semaphore::new(1),
            running: Mutex::default(),
        }
    }
}

#[derive(Debug)]
struct Running {
    cancel: CancellationToken,
    inbox: Vec<Message>,
}

/// A conversation's turn lock, from [`Turns::lock`]; the conversation's
/// next turn starts when it drops.
#[derive(Debug)]
pub(crate) struct TurnGuard<'a> {
    owner: &'a Turns,
    conversation: Arc<str>,
    /// `None` only in `drop`, which lets go of it under the map's lock.
    slot: Option<Arc<Slot>>,
    /// Whether the permit is held: false while the turn waits for it.
    held: bool,
}

/// A turn's place in [`Turns`], from when it holds the conversation's
/// lock until it ends.
#[derive(Debug)]
pub(crate) struct RunningTurn<'a> {
    slot: &'a Slot,
    cancel: CancellationToken,
}

impl Turns {
    /// Waits until no other turn of `conversation` runs or waits before
    /// this one, and holds the conversation until the guard drops.
    pub(crate) async fn lock(&self, conversation: &Arc<str>) -> TurnGuard<'_> {
        let slot = Arc::clone(self.slots().entry(Arc::clone(conversation)).or_default());
        // A guard already while waiting: a turn dropped as it waits takes
        // its conversation's entry away if nobody else needs it.
        let mut guard = TurnGuard {
            owner: self,
            conversation: Arc::clone(conversation),
            slot: Some(slot),
            held: false,
        };
        // The permit is given back by the guard's drop, which holds the
        // slot the permit belongs to.
        guard
            .slot()
            .gate
            .acquire()
            .await
            .expect("a conversation's gate is never closed")
            .forget();
        guard.held = true;
        guard
    }

    /// Cancels the conversation's running turn; false when none runs.
    pub(crate) fn stop(&self, conversation: &str) -> bool {
        // Under the map's lock, as every look at a slot from outside its
        // turn: a turn ending meanwhile sees nobody else holding its slot.
        let slots = self.slots();
        let Some(slot) = slots.get(conversation) else {
            return false;
        };
        let running = lock(&slot.running);
        match &*running {
            Some(turn) => {
                turn.cancel.cancel();
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
        let slots = self.slots();
        let Some(slot) = slots.get(conversation) else {
            return Err(message);
        };
        let mut running = lock(&slot.running);
        match &mut *running {
            Some(turn) if !turn.cancel.is_cancelled() => {
                turn.inbox.push(message);
                Ok(())
            }
            _ => Err(message),
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Slot>>> {
        lock(&self.slots)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots().len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TurnGuard<'_> {
    fn slot(&self) -> &Slot {
        self.slot
            .as_ref()
            .expect("a guard holds its slot until dropped")
    }

    /// Registers the turn holding this lock as the running one (once: it
    /// takes the guard). Its token is a child of `caller`: stopping the
    /// turn leaves the caller's token alone, and the caller cancelling
    /// stops the turn. A caller whose token is the turn's alone (`owned`)
    /// has it used as it is.
    pub(crate) fn start(&mut self, caller: &CancellationToken, owned: bool) -> RunningTurn<'_> {
        let cancel = if owned {
            caller.clone()
        } else {
            caller.child_token()
        };
        let slot = self.slot();
        *lock(&slot.running) = Some(Running {
            cancel: cancel.clone(),
            inbox: Vec::new(),
        });
        RunningTurn { slot, cancel }
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        if self.held {
            slot.gate.add_permits(1);
        }
        let mut slots = self.owner.slots();
        // Only the map and this guard hold it: nobody waits, so the entry
        // can go. Waiters clone the Arc, and guards let go of theirs, under
        // this same map lock, so this check can't race.
        if Arc::strong_count(&slot) == 2 {
            slots.remove(&self.conversation);
        }
        drop(slot);
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
        let mut running = lock(&self.slot.running);
        join(std::mem::take(&mut running.as_mut()?.inbox))
    }

    /// As [`take`](Self::take), but when nothing was said the inbox closes
    /// in the same step: a message arriving after runs as a turn of its own
    /// instead of waiting in an inbox nobody reads.
    pub(crate) fn take_or_close(&self) -> Option<Message> {
        let mut running = lock(&self.slot.running);
        let turn = running.as_mut()?;
        if turn.inbox.is_empty() {
            *running = None;
            return None;
        }
        join(std::mem::take(&mut turn.inbox))
    }

    /// Closes the inbox and returns what it still held, each as the user
    /// wrote it (not marked steering): the turn ended before reading them.
    pub(crate) fn close(&self) -> Vec<Message> {
        lock(&self.slot.running)
            .take()
            .map(|turn| turn.inbox)
            .unwrap_or_default()
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

    #[tokio::test]
    async fn entries_live_only_while_a_turn_holds_or_awaits_them() {
        let turns = Turns::default();
        let alice: Arc<str> = "alice".into();
        assert!(!turns.stop("alice"));
        {
            let mut guard = turns.lock(&alice).await;
            let turn = guard.start(&CancellationToken::new(), false);
            assert_eq!(turns.len(), 1);
            assert!(!turn.cancellation().is_cancelled());
        }
        assert_eq!(turns.len(), 0);
        assert!(!turns.stop("alice"));
    }

    #[tokio::test]
    async fn a_second_turn_waits_for_the_first() {
        let turns = Arc::new(Turns::default());
        let alice: Arc<str> = "alice".into();
        let first = turns.lock(&alice).await;
        let waiting = {
            let (turns, alice) = (Arc::clone(&turns), Arc::clone(&alice));
            tokio::spawn(async move {
                let _g = turns.lock(&alice).await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        waiting.await.unwrap();
        assert_eq!(turns.len(), 0);
    }

    /// The next turn may wait for ever if a permit is lost: each lock
    /// here must come at once.
    async fn at_once<'a>(turns: &'a Turns, conversation: &Arc<str>) -> TurnGuard<'a> {
        tokio::time::timeout(std::time::Duration::from_secs(5), turns.lock(conversation))
            .await
            .expect("the conversation's lock was free")
    }

    #[tokio::test]
    async fn a_turn_dropped_while_it_waits_leaves_no_entry() {
        let turns = Turns::default();
        let alice: Arc<str> = "alice".into();
        let first = turns.lock(&alice).await;
        {
            let mut waiting = std::pin::pin!(turns.lock(&alice));
            assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        }
        assert_eq!(turns.len(), 1);
        drop(first);
        assert_eq!(turns.len(), 0);
        // The permit came back: the next turn runs at once.
        let _again = at_once(&turns, &alice).await;
        assert_eq!(turns.len(), 1);
    }

    #[tokio::test]
    async fn a_waiter_dropped_once_handed_the_lock_gives_it_back() {
        let turns = Turns::default();
        let alice: Arc<str> = "alice".into();
        let first = turns.lock(&alice).await;
        {
            let mut waiting = std::pin::pin!(turns.lock(&alice));
            assert!(futures_util::poll!(waiting.as_mut()).is_pending());
            // The permit goes to the waiter, which is dropped before it
            // is polled again.
            drop(first);
        }
        assert_eq!(turns.len(), 0);
        let again = at_once(&turns, &alice).await;
        drop(again);
        let _third = at_once(&turns, &alice).await;
    }

    #[tokio::test]
    async fn stopping_cancels_the_turn_not_the_caller() {
        let turns = Turns::default();
        let caller = CancellationToken::new();
        let mut alice = turns.lock(&"alice".into()).await;
        let turn = alice.start(&caller, false);
        assert!(!turns.stop("bob"));
        assert!(turns.stop("alice"));
        assert!(turn.cancellation().is_cancelled());
        assert!(!caller.is_cancelled());
        // And the caller cancelling stops the turn.
        let caller = CancellationToken::new();
        let mut bob = turns.lock(&"bob".into()).await;
        let turn = bob.start(&caller, false);
        caller.cancel();
        assert!(turn.cancellation().is_cancelled());
        // A token that is the turn's alone is used as it is.
        let own = CancellationToken::new();
        let mut carol = turns.lock(&"carol".into()).await;
        let turn = carol.start(&own, true);
        assert!(turns.stop("carol"));
        assert!(own.is_cancelled() && turn.cancellation().is_cancelled());
    }

    #[tokio::test]
    async fn steering_messages_are_joined_into_one() {
        let turns = Turns::default();
        assert!(turns.steer("alice", Message::user("lost?")).is_err());
        let mut guard = turns.lock(&"alice".into()).await;
        // Locked but not started (a turn waiting for its store's lock):
        // nothing to steer yet.
        assert!(turns.steer("alice", Message::user("early")).is_err());
        let turn = guard.start(&CancellationToken::new(), false);
        assert_eq!(turn.take(), None);
        turns.steer("alice", Message::user("first")).unwrap();
        turns.steer("alice", Message::user("second")).unwrap();
        let joined = turn.take().unwrap();
        assert!(joined.steering);
        assert_eq!(joined.text(), "first\n\nsecond");
        assert_eq!(turn.take(), None);
    }

    #[tokio::test]
    async fn an_inbox_closed_empty_gives_messages_back() {
        let turns = Turns::default();
        let mut guard = turns.lock(&"alice".into()).await;
        let turn = guard.start(&CancellationToken::new(), false);
        turns.steer("alice", Message::user("read")).unwrap();
        assert_eq!(turn.take_or_close().unwrap().text(), "read");
        assert_eq!(turn.take_or_close(), None);
        // Closed: the next message must run as a turn of its own.
        assert_eq!(
            turns
                .steer("alice", Message::user("later"))
                .unwrap_err()
                .text(),
            "later"
        );
        assert!(!turns.stop("alice"));
        drop(turn);
        drop(guard);
        assert_eq!(turns.len(), 0);
    }

    #[tokio::test]
    async fn what_a_turn_did_not_read_is_returned_on_close() {
        let turns = Turns::default();
        let mut guard = turns.lock(&"alice".into()).await;
        let turn = guard.start(&CancellationToken::new(), false);
        turns.steer("alice", Message::user("unread")).unwrap();
        let left = turn.close();
        assert_eq!(left.len(), 1);
        assert!(!left[0].steering);
        drop(turn);
        // A stopped turn takes no more.
        let turn = guard.start(&CancellationToken::new(), false);
        turns.stop("alice");
        assert!(turns.steer("alice", Message::user("x")).is_err());
        drop(turn);
    }
}
