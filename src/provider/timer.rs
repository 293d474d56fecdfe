//! Time-outs for requests, on timers kept from one request to the next.
//!
//! Registering a tokio timer that is due before every other timer the
//! runtime holds wakes the runtime's timer driver: on a multi-thread
//! runtime, usually another worker parked in `epoll_wait`, which wakes,
//! looks for work, and may take the request's task over to its own core.
//! A request that registered new timers for its head and for its body's
//! silences did that about twice (`../shared/perf`: 4.7 driver wake-ups a
//! streamed tool turn where plain reqwest makes 2.1, and some 8 % of the
//! turn's CPU time). Moving a still-registered timer to a later deadline
//! is one atomic store (tokio files it anew when its old deadline comes),
//! and a timer due after others never wakes the driver; so an endpoint's
//! requests take their [`Timer`] from the endpoint's [`Timers`], which
//! keeps the ones finished requests leave, still registered.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::runtime::Id;
use tokio::time::{Instant, Sleep};

/// The timers an endpoint's finished requests left, still registered with
/// their runtimes, for its next requests.
#[derive(Default)]
pub(crate) struct Timers {
    kept: Mutex<Vec<Kept>>,
}

/// Timers kept at most, per endpoint: more than most programs have
/// requests under way at once; past it, the oldest is dropped.
const KEEP: usize = 64;

/// A deadline from now that is never reached: where `now + wait`
/// overflows the clock (tokio's `timeout` does the same).
const NEVER: Duration = Duration::from_secs(86_400 * 365 * 30);

impl Timers {
    /// A timer for one request; it comes back here when dropped.
    pub(crate) fn timer(self: &Arc<Self>) -> Timer {
        Timer {
            kept: None,
            waiting: None,
            home: Some(Arc::clone(self)),
        }
    }

    /// A kept timer of `runtime`, if there is one.
    fn take(&self, runtime: Id) -> Option<Kept> {
        let mut kept = lock(&self.kept);
        let at = kept.iter().rposition(|timer| timer.runtime == runtime)?;
        Some(kept.swap_remove(at))
    }

    fn keep(&self, timer: Kept) {
        let dropped = {
            let mut kept = lock(&self.kept);
            // The oldest goes, so timers of a runtime that is gone don't
            // stay for ever.
            let dropped = (kept.len() >= KEEP).then(|| kept.remove(0));
            kept.push(timer);
            dropped
        };
        // Dropped outside the lock: it takes the runtime's timer lock.
        drop(dropped);
    }
}

/// A registered timer and what it wakes.
struct Kept {
    /// The runtime whose driver it is registered with: it can't serve
    /// another.
    runtime: Id,
    sleep: Pin<Box<Sleep>>,
    /// The waker the timer holds: the relay's, never a task's.
    relay: Arc<Relay>,
    waker: Waker,
}

impl Kept {
    fn new(deadline: Instant) -> Self {
        let relay = Arc::new(Relay::default());
        Self {
            runtime: tokio::runtime::Handle::current().id(),
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            waker: Waker::from(Arc::clone(&relay)),
            relay,
        }
    }
}

/// Passes a kept timer's wake-up on to the task waiting on it. The timer
/// itself only ever holds the relay's waker, so a request that is done
/// leaves no task's waker (nor, through it, the task's memory) in a timer
/// it handed back.
#[derive(Default)]
struct Relay(Mutex<Option<Waker>>);

impl Relay {
    fn set(&self, waker: Option<Waker>) {
        let old = std::mem::replace(&mut *lock(&self.0), waker);
        drop(old);
    }
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waiting = lock(&self.0).clone();
        if let Some(waker) = waiting {
            waker.wake();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here can be left half-done by a panic.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One request's timer: one deadline at a time (the head's, then the
/// body's silences). It is registered when first set and, dropped, goes
/// back to its [`Timers`] still registered.
pub(crate) struct Timer {
    kept: Option<Kept>,
    /// The waker last given to the relay: while the same task waits, the
    /// timer is looked at, not polled.
    waiting: Option<Waker>,
    home: Option<Arc<Timers>>,
}

impl Timer {
    /// A timer that goes back nowhere.
    #[cfg(test)]
    pub(crate) fn alone() -> Self {
        Self {
            kept: None,
            waiting: None,
            home: None,
        }
    }

    /// Due `wait` from now.
    pub(crate) fn set_after(&mut self, wait: Duration) {
        let now = Instant::now();
        self.set(now.checked_add(wait).unwrap_or(now + NEVER));
    }

    /// Due at `deadline`.
    ///
    /// # Panics
    /// Outside a tokio runtime with time enabled, as tokio's timers do.
    pub(crate) fn set(&mut self, deadline: Instant) {
        // A moved deadline is looked at again.
        self.waiting = None;
        if let Some(kept) = &mut self.kept {
            kept.sleep.as_mut().reset(deadline);
            return;
        }
        let runtime = tokio::runtime::Handle::current().id();
        let taken = self.home.as_ref().and_then(|home| home.take(runtime));
        self.kept = Some(match taken {
            Some(mut kept) => {
                kept.sleep.as_mut().reset(deadline);
                kept
            }
            None => Kept::new(deadline),
        });
    }

    /// Ready once the deadline has passed; until then the task is woken
    /// when it does. Never ready if it was never set.
    ///
    /// Looked at for every piece of a streamed body that keeps the task
    /// waiting: the usual case (the same task, not yet due) is a few loads,
    /// inlined; the rest is out of line.
    #[inline]
    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let (Some(kept), Some(waiting)) = (&self.kept, &self.waiting)
            && waiting.will_wake(cx.waker())
            && !kept.sleep.is_elapsed()
        {
            return Poll::Pending;
        }
        self.poll_timer(cx)
    }

    #[inline(never)]
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(kept) = &mut self.kept else {
            return Poll::Pending;
        };
        if !self
            .waiting
            .as_ref()
            .is_some_and(|waiting| waiting.will_wake(cx.waker()))
        {
            kept.relay.set(Some(cx.waker().clone()));
            self.waiting = Some(cx.waker().clone());
        }
        kept.sleep
            .as_mut()
            .poll(&mut Context::from_waker(&kept.waker))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let (Some(kept), Some(home)) = (self.kept.take(), &self.home) else {
            return;
        };
        kept.relay.set(None);
        // One that fired is no longer registered: nothing is saved by
        // keeping it.
        if !kept.sleep.is_elapsed() {
            home.keep(kept);
        }
    }
}

/// Tells when a response body has been silent for a whole read time-out.
/// Reading the clock, or polling a timer, for every chunk cost more than
/// parsing the chunk; so a read only marks progress, and the request's
/// timer looks at the marks every quarter of the time-out. A body is cut
/// off after four quarters in a row without a byte: a stream that falls
/// silent is ended between one and one and a quarter time-outs after its
/// last byte, and a body that never marks progress (a whole answer) after
/// one time-out.
pub(crate) struct IdleTimer {
    timeout: Duration,
    /// Whether bytes came in the quarter under way.
    progressed: bool,
    /// Quarters in a row that passed without a byte.
    quiet: u8,
    /// Ends the quarter under way, once `armed`: when the body first keeps
    /// us waiting.
    timer: Timer,
    armed: bool,
}

impl IdleTimer {
    /// Quarters of silence that make a time-out.
    const QUARTERS: u8 = 4;

    /// Watches for `timeout`, on `timer` (the one the request waited for
    /// its head with).
    pub(crate) fn new(timeout: Duration, timer: Timer) -> Self {
        Self {
            timeout,
            progressed: false,
            quiet: 0,
            timer,
            armed: false,
        }
    }

    /// The time-out it watches for.
    pub(crate) fn limit(&self) -> Duration {
        self.timeout
    }

    /// Bytes came in.
    pub(crate) fn read(&mut self) {
        self.progressed = true;
    }

    /// The end of a quarter of `timeout` that starts now; `None` for a
    /// time-out too long to add to a clock reading, which never fires.
    fn quarter_from_now(timeout: Duration) -> Option<Instant> {
        Instant::now().checked_add(timeout / u32::from(Self::QUARTERS))
    }

    /// Whether the body has been silent for the whole time-out; if not, the
    /// task is woken when it could be.
    pub(crate) fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            let Some(end) = Self::quarter_from_now(self.timeout) else {
                return false;
            };
            self.timer.set(end);
            self.armed = true;
        }
        while self.timer.poll_elapsed(cx).is_ready() {
            if std::mem::take(&mut self.progressed) {
                self.quiet = 0;
            } else {
                self.quiet += 1;
            }
            if self.quiet >= Self::QUARTERS {
                return true;
            }
            let Some(end) = Self::quarter_from_now(self.timeout) else {
                return false;
            };
            self.timer.set(end);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `timer` is due, failing if it isn't within an hour.
    async fn due(timer: &mut Timer) {
        let waited = tokio::time::timeout(
            Duration::from_secs(3600),
            std::future::poll_fn(|cx| timer.poll_elapsed(cx)),
        )
        .await;
        assert!(waited.is_ok(), "the timer never woke its task");
    }

    fn kept(timers: &Timers) -> usize {
        lock(&timers.kept).len()
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_requests_timer_serves_the_next_one_at_its_own_deadline() {
        let timers = Arc::new(Timers::default());
        let mut first = timers.timer();
        first.set_after(Duration::from_secs(1));
        drop(first);
        assert_eq!(kept(&timers), 1);

        // Moved later while registered: due at the new deadline, not the old.
        let mut later = timers.timer();
        later.set_after(Duration::from_secs(5));
        assert_eq!(kept(&timers), 0, "the kept timer was not taken");
        let started = Instant::now();
        due(&mut later).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // One that fired is dropped, not kept.
        drop(later);
        assert_eq!(kept(&timers), 0);

        // Moved earlier: due then.
        let mut head = timers.timer();
        head.set_after(Duration::from_secs(300));
        drop(head);
        let mut sooner = timers.timer();
        sooner.set_after(Duration::from_secs(2));
        let started = Instant::now();
        due(&mut sooner).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_timer_holds_no_task() {
        struct Task;
        impl Wake for Task {
            fn wake(self: Arc<Self>) {}
        }
        let task = Arc::new(Task);
        let waker = Waker::from(Arc::clone(&task));
        let timers = Arc::new(Timers::default());
        let mut timer = timers.timer();
        timer.set_after(Duration::from_secs(60));
        assert!(
            timer
                .poll_elapsed(&mut Context::from_waker(&waker))
                .is_pending()
        );
        drop(waker);
        assert!(
            Arc::strong_count(&task) > 1,
            "the waiting task is woken through it"
        );
        drop(timer);
        assert_eq!(kept(&timers), 1);
        assert_eq!(
            Arc::strong_count(&task),
            1,
            "a kept timer still holds the task's waker"
        );
    }

    #[test]
    fn a_kept_timer_serves_only_its_own_runtime() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let timers = Arc::new(Timers::default());
        runtime().block_on(async {
            timers.timer().set_after(Duration::from_secs(60));
        });
        assert_eq!(kept(&timers), 1);
        // The first runtime is gone: its timer would never fire.
        runtime().block_on(async {
            let mut timer = timers.timer();
            timer.set_after(Duration::from_millis(20));
            assert_eq!(kept(&timers), 1, "another runtime's timer was taken");
            due(&mut timer).await;
        });
        // Dropping it, from no runtime, is fine.
        drop(timers);
    }

    #[tokio::test]
    async fn at_most_so_many_timers_are_kept() {
        let timers = Arc::new(Timers::default());
        let all: Vec<Timer> = (0..KEEP + 3)
            .map(|_| {
                let mut timer = timers.timer();
                timer.set_after(Duration::from_secs(60));
                timer
            })
            .collect();
        drop(all);
        assert_eq!(kept(&timers), KEEP);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_never_set_is_never_due() {
        let timers = Arc::new(Timers::default());
        let mut timer = timers.timer();
        let waited = tokio::time::timeout(
            Duration::from_secs(3600),
            std::future::poll_fn(|cx| timer.poll_elapsed(cx)),
        )
        .await;
        assert!(waited.is_err());
        drop(timer);
        assert_eq!(kept(&timers), 0);
    }

    /// Waits until `idle` says the body timed out.
    async fn cut_off(idle: &mut IdleTimer) {
        std::future::poll_fn(|cx| {
            if idle.timed_out(cx) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_is_cut_off_between_one_and_a_quarter_time_outs_after_its_last_byte() {
        let timeout = Duration::from_secs(100);
        let mut idle = IdleTimer::new(timeout, Timer::alone());
        // A byte every 90 s, for longer than a time-out: never cut off.
        for _ in 0..6 {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(90)) => idle.read(),
                () = cut_off(&mut idle) => panic!("cut off while bytes came"),
            }
        }
        let last_byte = tokio::time::Instant::now();
        cut_off(&mut idle).await;
        let silent = last_byte.elapsed();
        assert!(
            silent >= timeout && silent <= timeout + timeout / 4,
            "cut off after {silent:?} of silence"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_marks_progress_is_cut_off_after_one_time_out() {
        let started = tokio::time::Instant::now();
        let mut idle = IdleTimer::new(Duration::from_secs(8), Timer::alone());
        cut_off(&mut idle).await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(8) && waited < Duration::from_millis(8_100),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_time_out_too_long_for_the_clock_never_fires() {
        let mut idle = IdleTimer::new(Duration::MAX, Timer::alone());
        let waited = tokio::time::timeout(Duration::from_secs(3600), cut_off(&mut idle)).await;
        assert!(waited.is_err());
    }
}
