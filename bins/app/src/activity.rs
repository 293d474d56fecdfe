//! What a running bot has done, for its control panel and `ferrobot
//! status`: turns counted by an [`Activity`] watcher, and the latest
//! warnings and errors of the log ([`recent_problems`]).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ferrobot::agent::{TurnRequest, TurnWatch, TurnWatcher};
use ferrobot::{AgentEvent, Reply};
use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use crate::run::lock;

/// How many warnings and errors the log keeps for the panel.
const KEPT_PROBLEMS: usize = 20;

/// Counts an agent's turns, passing each on to an inner watcher (the
/// traces) if any. Kept in the agent's state, where the panel finds it.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, testing::MockProvider};
/// use ferrobot_app::activity::Activity;
/// let activity = Activity::new(None);
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("Hello."))
///     .watcher(activity.clone())
///     .build();
/// agent.handle("alice", "hi").await?;
/// assert_eq!(activity.counts().turns, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Activity {
    counts: Arc<Counts>,
    inner: Option<Arc<dyn TurnWatcher>>,
}

#[derive(Default)]
struct Counts {
    started: AtomicU64,
    /// Turns done: answered, failed, or dropped unfinished (cancelled).
    ended: AtomicU64,
    failed: AtomicU64,
    /// Seconds since the Unix epoch of the last turn's end; 0 before any.
    last_end: AtomicU64,
}

/// The turns of an [`Activity`] so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TurnCounts {
    /// Turns that ended, answered or failed.
    pub turns: u64,
    /// Turns that ended with an error.
    pub failed: u64,
    /// Turns running now.
    pub running: u64,
    /// When the last turn ended (seconds since the Unix epoch), if one did.
    pub last_at: Option<u64>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl Activity {
    /// Counts turns, then lets `inner` watch them too.
    pub fn new(inner: Option<Arc<dyn TurnWatcher>>) -> Self {
        Self {
            counts: Arc::default(),
            inner,
        }
    }

    /// The turns so far.
    pub fn counts(&self) -> TurnCounts {
        let counts = &self.counts;
        let turns = counts.ended.load(Ordering::Relaxed);
        let last = counts.last_end.load(Ordering::Relaxed);
        TurnCounts {
            turns,
            failed: counts.failed.load(Ordering::Relaxed),
            running: counts.started.load(Ordering::Relaxed).saturating_sub(turns),
            last_at: (last > 0).then_some(last),
        }
    }
}

impl TurnWatcher for Activity {
    fn start(&self, conversation: &str, request: &TurnRequest) -> Box<dyn TurnWatch> {
        self.counts.started.fetch_add(1, Ordering::Relaxed);
        Box::new(Counted {
            counts: Arc::clone(&self.counts),
            inner: self
                .inner
                .as_ref()
                .map(|inner| inner.start(conversation, request)),
        })
    }
}

struct Counted {
    counts: Arc<Counts>,
    inner: Option<Box<dyn TurnWatch>>,
}

impl TurnWatch for Counted {
    fn event(&mut self, event: &AgentEvent) {
        if let Some(inner) = &mut self.inner {
            inner.event(event);
        }
    }

    fn end(mut self: Box<Self>, result: Result<&Reply, &ferrobot::Error>) {
        if result.is_err() {
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(inner) = self.inner.take() {
            inner.end(result);
        }
    }
}

/// A turn is done when its watch goes, whether `end` was called or the
/// turn was dropped unfinished, so none stays "running" for ever.
impl Drop for Counted {
    fn drop(&mut self) {
        let counts = &self.counts;
        counts
            .last_end
            .store(unix_secs(SystemTime::now()), Ordering::Relaxed);
        counts.ended.fetch_add(1, Ordering::Relaxed);
    }
}

/// Seconds since the Unix epoch (0 before it).
pub(crate) fn unix_secs(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A warning or error the process logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// When (seconds since the Unix epoch).
    pub at: u64,
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The message and its fields, as the log shows them.
    pub message: String,
}

static PROBLEMS: Mutex<VecDeque<Problem>> = Mutex::new(VecDeque::new());

/// The latest warnings and errors this process logged (at most 20), the
/// newest last. Filled once [`logging::init`](crate::logging::init) ran.
pub fn recent_problems() -> Vec<Problem> {
    lock(&PROBLEMS).iter().cloned().collect()
}

/// The tracing layer that keeps the latest warnings and errors for
/// [`recent_problems`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Problems;

impl<S: tracing::Subscriber> Layer<S> for Problems {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > tracing::Level::WARN {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let mut problems = lock(&PROBLEMS);
        if problems.len() == KEPT_PROBLEMS {
            problems.pop_front();
        }
        problems.push_back(Problem {
            at: unix_secs(SystemTime::now()),
            level: level.to_string(),
            message: line.0,
        });
    }
}

/// An event as one line: its message, then `field=value` for the rest.
#[derive(Default)]
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let fields = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}{fields}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let fields = std::mem::take(&mut self.0);
            self.0 = format!("{value}{fields}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}
