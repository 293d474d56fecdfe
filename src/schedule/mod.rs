//! Scheduled prompts and durable later messages (feature `schedule`).
//!
//! A [`Schedule`] is a prompt the agent runs as a turn of the conversation
//! that made it, at the times of its [`Recurrence`]: a cron expression in a
//! time zone, an interval, or once. The [`Scheduler`] keeps schedules in the
//! agent's history store ([`HistoryStore`](crate::history::HistoryStore);
//! `SqliteHistory` keeps them across restarts), wakes when one is due,
//! claims the due time, runs the turn and posts the answer through a
//! [`Notifier`](crate::tool::Notifier) (a chat's `send`). It also sends the
//! messages tools leave with
//! [`ToolContext::notify_later`](crate::ToolContext::notify_later), stored
//! the same way. The [`tools`] let the model (or the user, as slash
//! commands) make, list and cancel schedules; a [`Clock`] gives the time,
//! [`ManualClock`] in tests.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use ferrobot::schedule::{self, Scheduler};
//! use ferrobot::{Agent, testing::MockProvider};
//!
//! let scheduler = Scheduler::new().time_zone("Europe/Paris").unwrap();
//! let agent = Agent::builder()
//!     .provider(MockProvider::replying("ok"))
//!     .tools(schedule::tools())          // schedule_prompt, list_schedules, cancel_schedule
//!     .state(scheduler.clone())          // how the tools and notify_later reach it
//!     .build();
//! let notifier = |chat: String, text: String| async move {
//!     tracing::info!(%chat, %text, "posting"); // a bot posts `text` to `chat`
//! };
//! let running = tokio::spawn(scheduler.run(agent, notifier));
//! # running.abort();
//! # }
//! ```
//!
//! # What is guaranteed
//!
//! - **At most once per due time.** Before it runs a due time, the
//!   scheduler claims it in the store
//!   ([`claim_schedule`](crate::history::HistoryStore::claim_schedule): the
//!   schedule's next due time moves from this one to the next, if it still
//!   is this one). Two schedulers on one store never both run it, and a
//!   restart never runs it again.
//! - **Missed times run once.** Due times that passed while no scheduler ran
//!   are run once, when one starts, not once each.
//! - **A run cut short is not run again.** A due time claimed whose turn
//!   hadn't finished when the process stopped is lost, not repeated: a
//!   prompt may do things (a tool that restarts a service) that must not
//!   happen twice. The turn journal (issue 17) will let such turns be
//!   recovered.
//! - **Retries.** A run that fails because the model is out of reach (a
//!   retryable [`ProviderError`](crate::provider::ProviderError)) is tried
//!   again after each of the [`Retries`] delays (by default 1, 5 and 15
//!   minutes) while that is before the next due time; then a note saying
//!   why is posted to the chat, and the schedule waits for its next time.
//!   Other failures are noted at once.
//! - **Later messages** are kept in the store until sent, and sent at most
//!   once. Without a running scheduler, or with a store that doesn't keep
//!   them, `notify_later` waits in memory as before.
//!
//! # Time zones
//!
//! Cron expressions and wall-clock times are read in a time zone: the
//! scheduler's ([`Scheduler::time_zone`], by default the system's), kept
//! with each cron schedule so that changing it later doesn't move existing
//! schedules. Zones come from the system's time zone database
//! (`/usr/share/zoneinfo`; install `tzdata` in slim containers). ferrobot
//! doesn't bundle one: it would add about 200 KiB to every program for
//! machines that nearly all have it; a program that wants it can enable
//! `jiff`'s `tzdb-bundle-always` feature in its own `Cargo.toml`.

mod clock;
mod recurrence;
mod scheduler;
// The tools' doc comments are what the model reads; rustdoc sections such
// as `# Errors` would be sent to it too.
#[allow(clippy::missing_errors_doc)]
mod tools;

use std::sync::Arc;
use std::time::Duration;

pub use clock::{Clock, ManualClock, SystemClock};
pub use recurrence::{parse_interval, parse_time};
pub use scheduler::Scheduler;
pub use tools::{cancel_schedule, list_schedules, schedule_prompt};

use crate::history::HistoryError;
pub use crate::history::{LaterMessage, Recurrence, Schedule};
use crate::tool::{IntoTool, Tool};

/// The schedule tools, for `Agent::builder().tools(…)`: `schedule_prompt`,
/// `list_schedules` and `cancel_schedule`. They need a [`Scheduler`] as the
/// agent's state.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, schedule::{self, Scheduler}, testing::MockProvider};
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .tools(schedule::tools())
///     .state(Scheduler::new())
///     .build();
/// assert!(agent.tools().get("schedule_prompt").is_some());
/// ```
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        schedule_prompt.into_tool(),
        list_schedules.into_tool(),
        cancel_schedule.into_tool(),
    ]
}

/// How a scheduled run that failed for a reason that may pass is tried
/// again: after each delay in turn, while the retry comes before the
/// schedule's next due time.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::schedule::Retries;
/// assert_eq!(Retries::default().delays.len(), 3);
/// let quick = Retries::new([Duration::from_secs(10)]);
/// assert_eq!(quick.delays, [Duration::from_secs(10)]);
/// assert!(Retries::none().delays.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retries {
    /// The wait before each retry: the first after the first failure, and
    /// so on. As many retries as delays.
    pub delays: Vec<Duration>,
}

impl Retries {
    /// Retries after each of `delays`.
    pub fn new(delays: impl IntoIterator<Item = Duration>) -> Self {
        Self {
            delays: delays.into_iter().collect(),
        }
    }

    /// No retries: a failed run is noted at once.
    pub fn none() -> Self {
        Self::new([])
    }
}

impl Default for Retries {
    /// After 1, 5 and 15 minutes.
    fn default() -> Self {
        Self::new([60, 300, 900].map(Duration::from_secs))
    }
}

/// Why a schedule could not be made, read or kept. Messages say what to
/// write instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// Not a five-field cron expression.
    #[error("`{expr}` is not a cron expression: {why}")]
    Cron {
        /// What was given.
        expr: String,
        /// What is wrong, and what to write.
        why: String,
    },
    /// A time zone the time zone database doesn't know.
    #[error(
        "unknown time zone `{zone}`: use an IANA name such as `Europe/Paris`, `America/New_York` or `UTC` \
         (names come from the system's time zone database, /usr/share/zoneinfo: install `tzdata` if it is missing)"
    )]
    TimeZone {
        /// What was given.
        zone: String,
    },
    /// Not an interval.
    #[error(
        "`{text}` is not an interval: write a number and a unit, e.g. `30m`, `1h`, `1d` or `1h30m` (units: s, m, h, d, w)"
    )]
    Interval {
        /// What was given.
        text: String,
    },
    /// Not a time.
    #[error(
        "`{text}` is not a time: write `2026-12-03 08:00` (read in {zone}) or RFC 3339 with an offset, e.g. `2026-12-03T08:00:00+01:00`"
    )]
    Time {
        /// What was given.
        text: String,
        /// The zone a wall-clock time is read in.
        zone: String,
    },
    /// Anything else wrong with what was asked, said in full.
    #[error("{0}")]
    Invalid(String),
    /// The scheduler was never [`run`](Scheduler::run): there is no store
    /// to keep schedules in, nor anything to run them.
    #[error(
        "no scheduler runs for this agent (developer: spawn `Scheduler::run(agent, notifier)` with the scheduler given to the agent as state)"
    )]
    NotRunning,
    /// The history store failed, or keeps no schedules
    /// ([`HistoryError::Unsupported`]: use `SqliteHistory` or
    /// `MemoryHistory`).
    #[error("the history store failed")]
    Store(#[from] HistoryError),
}

impl ScheduleError {
    /// The error with every source, joined by ": ".
    pub fn chain(&self) -> String {
        crate::error::chain(self)
    }
}
