//! Watching every turn an agent runs: a [`TurnWatcher`] is told when a turn
//! starts and returns the [`TurnWatch`] that sees its events and its end,
//! e.g. to write one trace line per turn (ferrobot's bots do).

use super::{AgentEvent, Reply, TurnRequest};
use crate::Error;

/// Told of every turn the agent runs ([`Agent::handle`](super::Agent::handle),
/// [`stream`](super::Agent::stream) and what builds on them; not the turns
/// of sub-agents, whose events reach the calling turn's watch as
/// [`AgentEvent::SubAgent`] when the turn is streamed).
///
/// A closure `Fn(&str, &TurnRequest) -> W` is one, for any [`TurnWatch`] `W`.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use std::sync::{Arc, Mutex};
/// use ferrobot::agent::{TurnRequest, TurnWatch};
/// use ferrobot::{Agent, AgentEvent, Error, Reply, testing::MockProvider};
///
/// /// Keeps a line per turn: what streamed, and how it ended.
/// struct Line(String, Arc<Mutex<Vec<String>>>);
///
/// impl TurnWatch for Line {
///     fn event(&mut self, event: &AgentEvent) {
///         if let AgentEvent::TextDelta(delta) = event {
///             self.0.push_str(delta);
///         }
///     }
///     fn end(self: Box<Self>, result: Result<&Reply, &Error>) {
///         let end = if result.is_ok() { "answered" } else { "failed" };
///         self.1.lock().unwrap().push(format!("{end}: {}", self.0));
///     }
/// }
///
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let kept = Arc::clone(&lines);
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("Hello."))
///     .watcher(move |_: &str, _: &TurnRequest| Line(String::new(), Arc::clone(&kept)))
///     .build();
/// agent.handle("alice", "hi").await?;
/// assert_eq!(lines.lock().unwrap()[0], "answered: Hello.");
/// # Ok(())
/// # }
/// ```
pub trait TurnWatcher: Send + Sync + 'static {
    /// A turn of `conversation` starts, asked `request`: what watches it.
    fn start(&self, conversation: &str, request: &TurnRequest) -> Box<dyn TurnWatch>;
}

impl<F, W> TurnWatcher for F
where
    F: Fn(&str, &TurnRequest) -> W + Send + Sync + 'static,
    W: TurnWatch + 'static,
{
    fn start(&self, conversation: &str, request: &TurnRequest) -> Box<dyn TurnWatch> {
        Box::new(self(conversation, request))
    }
}

/// Watches one turn: each event as it happens, then how the turn ended.
/// Called on the turn's task: keep each call short (write a file at the
/// end, not per event).
pub trait TurnWatch: Send {
    /// One of the turn's events, in order ([`AgentEvent::Done`] aside:
    /// [`end`](Self::end) has the reply).
    fn event(&mut self, event: &AgentEvent);

    /// The turn ended with its reply, or failed.
    fn end(self: Box<Self>, result: Result<&Reply, &Error>);
}
