//! The time the scheduler reads and waits on: the system's, or one a test
//! moves by hand.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use tokio::sync::watch;

/// Where the [`Scheduler`](super::Scheduler) reads the time and waits for
/// a due time. [`SystemClock`] in programs; [`ManualClock`] in tests, which
/// moves only when told.
///
/// Tests use an injected clock rather than Tokio's paused time: paused time
/// jumps ahead whenever every task waits, and a scheduler's tasks wait on
/// SQLite and HTTP, whose waits it would skip.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;

    /// Ends once [`now`](Self::now) has reached `at` (at once if it has).
    fn sleep_until(&self, at: SystemTime) -> BoxFuture<'static, ()>;
}

/// The system's clock.
///
/// # Examples
/// ```
/// use ferrobot::schedule::{Clock, SystemClock};
/// assert!(SystemClock.now() > std::time::UNIX_EPOCH);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Sleeps a minute at most at a time and looks at the clock again, so
    /// that a clock set forward, or a machine waking from sleep, is noticed
    /// within a minute (Tokio's timers count time the machine was awake).
    fn sleep_until(&self, at: SystemTime) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            while let Ok(left) = at.duration_since(SystemTime::now()) {
                if left.is_zero() {
                    break;
                }
                tokio::time::sleep(left.min(Duration::from_secs(60))).await;
            }
        })
    }
}

/// A clock that moves only when told, for tests: [`advance`](Self::advance)
/// and [`set`](Self::set) wake whoever sleeps until a time now reached.
/// Clones share the time.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::{Duration, UNIX_EPOCH};
/// use ferrobot::schedule::{Clock, ManualClock};
///
/// let clock = ManualClock::new(UNIX_EPOCH);
/// let wake = clock.sleep_until(UNIX_EPOCH + Duration::from_secs(60));
/// clock.advance(Duration::from_secs(60));
/// wake.await;
/// assert_eq!(clock.now(), UNIX_EPOCH + Duration::from_secs(60));
/// # }
/// ```
#[derive(Clone)]
pub struct ManualClock {
    time: Arc<watch::Sender<SystemTime>>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock")
            .field(&*self.time.borrow())
            .finish()
    }
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: SystemTime) -> Self {
        Self {
            time: Arc::new(watch::Sender::new(start)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.time.send_modify(|time| *time += by);
    }

    /// Sets the clock to `to` (backwards too).
    pub fn set(&self, to: SystemTime) {
        self.time.send_replace(to);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.time.borrow()
    }

    fn sleep_until(&self, at: SystemTime) -> BoxFuture<'static, ()> {
        let mut time = self.time.subscribe();
        Box::pin(async move {
            loop {
                if *time.borrow_and_update() >= at {
                    return;
                }
                if time.changed().await.is_err() {
                    // The clock is gone: it will never get there.
                    std::future::pending::<()>().await;
                }
            }
        })
    }
}
