//! Time-outs for requests, on timers kept from one request to the next:
//! an endpoint's [`Timers`] hands each request a [`Timer`], which waits for
//! the answer's head and then, as an [`IdleTimer`], for each next piece of
//! its body.
//!
//! Why kept: registering a tokio timer due before every other timer the
//! runtime holds wakes the runtime's timer driver, on a multi-thread
//! runtime usually another worker parked in `epoll_wait`, which wakes,
//! looks for work, and may take the request's task over to its own core.
//! A request that registered new timers for its head and for its body's
//! silences did that about twice (4.7 driver wake-ups a streamed tool turn
//! where plain reqwest makes 2.1, and some 8 % of the turn's CPU time, in
//! `../shared/perf`). A timer that is still registered and moved to a
//! later deadline costs one atomic store (tokio files it anew, once, when
//! its old deadline comes), and one registered behind others wakes
//! nothing; so finished requests leave their timers registered, for the
//! next requests.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::runtime::Id;
use tokio::time::{Instant, Sleep};

use crate::relay::Relay;

/// The timers an endpoint's finished requests left, still registered with
/// their runtimes, for its next requests.
#[derive(Default)]
pub(crate) struct Timers {
    kept: Mutex<Vec<Kept>>,
}

/// Timers kept at most, per endpoint: more than most programs have
/// requests under way at once; past it, the ones handed back are dropped.
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

    /// A kept timer of `runtime`, if there is one: the one kept last, the
    /// likeliest to be in the cache still.
    fn take(&self, runtime: Id) -> Option<Kept> {
        let mut kept = lock(&self.kept);
        if let Some(at) = kept.iter().rposition(|timer| timer.runtime == runtime) {
            return Some(kept.swap_remove(at));
        }
        // None of this runtime's: the others' that fired go, as those of a
        // runtime that ended did (each would keep that runtime's driver, and
        // its files, open). Looked for only here, where a program with one
        // runtime never comes while timers are kept. (Dropping one takes
        // its runtime's timer lock, which is never held while this one is
        // taken.)
        kept.retain(|timer| !timer.sleep.is_elapsed());
        None
    }

    fn keep(&self, timer: Kept) {
        let mut kept = lock(&self.kept);
        if kept.len() < KEEP {
            kept.push(timer);
            return;
        }
        drop(kept);
        // Dropped outside the lock: it takes the runtime's timer lock.
        drop(timer);
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
    /// # Panics
    /// Outside a tokio runtime with time enabled, as tokio's timers do.
    fn new(deadline: Instant) -> Self {
        let runtime = tokio::runtime::Handle::current().id();
        let mut sleep = Box::pin(tokio::time::sleep_until(deadline));
        // Registered now rather than when first polled, so that every timer
        // kept is one its runtime knows, and fires when that runtime ends.
        sleep.as_mut().reset(deadline);
        let relay = Arc::new(Relay::default());
        Self {
            runtime,
            sleep,
            waker: Waker::from(Arc::clone(&relay)),
            relay,
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
        // Outside any runtime (a stream read on a plain thread), the timer
        // it has goes on serving, as a tokio `Sleep` does.
        let current = tokio::runtime::Handle::try_current()
            .ok()
            .map(|handle| handle.id());
        if let Some(kept) = &mut self.kept
            && current.is_none_or(|runtime| runtime == kept.runtime)
        {
            kept.sleep.as_mut().reset(deadline);
            return;
        }
        // Another runtime's (the request's stream was moved): it goes back,
        // for that runtime's requests.
        self.give_back();
        let taken = current.and_then(|runtime| self.home.as_ref()?.take(runtime));
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
        // Unconstrained: with the task's budget spent, the timer would not
        // register (only wake the task once), and the shortcut above would
        // then never poll it again. Tokio's `timeout` does the same.
        let mut sleep = tokio::task::coop::unconstrained(kept.sleep.as_mut());
        Pin::new(&mut sleep).poll(&mut Context::from_waker(&kept.waker))
    }

    /// Hands the timer back to its [`Timers`], still registered unless it
    /// fired (then keeping it saves nothing), and holding no task's waker.
    fn give_back(&mut self) {
        let (Some(kept), Some(home)) = (self.kept.take(), &self.home) else {
            return;
        };
        kept.relay.set(None);
        if !kept.sleep.is_elapsed() {
            home.keep(kept);
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.give_back();
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

    fn quarter(&self) -> Duration {
        self.timeout / u32::from(Self::QUARTERS)
    }

    /// Whether the body has been silent for the whole time-out; if not, the
    /// task is woken when it could be.
    pub(crate) fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            self.timer.set_after(self.quarter());
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
            self.timer.set_after(self.quarter());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::task::Wake;

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

    /// A timer of `timers` due `wait` from now, registered (looked at once).
    fn registered(timers: &Arc<Timers>, wait: Duration) -> Timer {
        let mut timer = timers.timer();
        timer.set_after(wait);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(timer.poll_elapsed(&mut cx).is_pending());
        timer
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_requests_timer_serves_the_next_one_at_its_own_deadline() {
        let timers = Arc::new(Timers::default());
        drop(registered(&timers, Duration::from_secs(1)));
        assert_eq!(kept(&timers), 1);

        // Moved later while registered: due at the new deadline, not the old.
        let mut later = timers.timer();
        later.set_after(Duration::from_secs(5));
        assert_eq!(kept(&timers), 0, "the kept timer was not taken");
        let started = Instant::now();
        due(&mut later).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // One that fired is dropped, not kept.
        let waiting = registered(&timers, Duration::from_secs(60));
        drop(later);
        assert_eq!(kept(&timers), 0);
        drop(waiting);
        assert_eq!(kept(&timers), 1);
        drop(timers.timer());

        // Moved earlier: due then.
        drop(registered(&timers, Duration::from_secs(300)));
        let mut sooner = timers.timer();
        sooner.set_after(Duration::from_secs(2));
        assert_eq!(kept(&timers), 0);
        let started = Instant::now();
        due(&mut sooner).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_looked_at_with_the_tasks_budget_spent_still_wakes_it() {
        let (sent, mut received) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..1000 {
            sent.send(()).unwrap();
        }
        let timers = Arc::new(Timers::default());
        let mut timer = timers.timer();
        timer.set_after(Duration::from_secs(1));
        let started = Instant::now();
        let mut spent = false;
        let waited = tokio::time::timeout(
            Duration::from_secs(3600),
            std::future::poll_fn(|cx| {
                if !spent {
                    // The task's budget spent first, in the same poll.
                    while received.poll_recv(cx).is_ready() {}
                    assert!(!tokio::task::coop::has_budget_remaining());
                    spent = true;
                }
                timer.poll_elapsed(cx)
            }),
        )
        .await;
        assert!(waited.is_ok(), "the timer never woke its task");
        assert_eq!(started.elapsed(), Duration::from_secs(1));
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
        let timers = Arc::new(Timers::default());
        let other = runtime();
        other.block_on(async { drop(registered(&timers, Duration::from_secs(60))) });
        assert_eq!(kept(&timers), 1);
        runtime().block_on(async {
            let mut timer = timers.timer();
            timer.set_after(Duration::from_millis(20));
            assert_eq!(kept(&timers), 1, "another runtime's timer was taken");
            due(&mut timer).await;
        });
    }

    #[test]
    fn a_runtime_that_ended_leaves_no_timer_kept() {
        let timers = Arc::new(Timers::default());
        runtime().block_on(async { drop(registered(&timers, Duration::from_secs(60))) });
        assert_eq!(kept(&timers), 1);
        runtime().block_on(async { drop(registered(&timers, Duration::from_secs(60))) });
        assert_eq!(kept(&timers), 1, "the ended runtime's timer is kept");
        // Dropping the rest, from no runtime, is fine.
        drop(timers);
    }

    #[test]
    fn timers_of_a_runtime_that_ended_go_even_behind_a_living_ones() {
        let timers = Arc::new(Timers::default());
        let living = runtime();
        living.block_on(async { drop(registered(&timers, Duration::from_secs(60))) });
        runtime().block_on(async { drop(registered(&timers, Duration::from_secs(60))) });
        assert_eq!(kept(&timers), 2);
        runtime().block_on(async {
            drop(registered(&timers, Duration::from_secs(60)));
            assert_eq!(kept(&timers), 2, "the ended runtime's timer is kept");
        });
        // The living runtime's is still there for it.
        living.block_on(async {
            let _timer = registered(&timers, Duration::from_secs(60));
            assert_eq!(kept(&timers), 1);
        });
    }

    #[test]
    fn a_timer_set_again_outside_any_runtime_goes_on() {
        let timers = Arc::new(Timers::default());
        let home = runtime();
        let mut timer = home.block_on(async { registered(&timers, Duration::from_secs(60)) });
        // A stream read on a plain thread for a while.
        timer.set_after(Duration::from_millis(20));
        home.block_on(due(&mut timer));
    }

    #[test]
    fn a_timer_moved_to_another_runtime_is_due_there() {
        let timers = Arc::new(Timers::default());
        let mut timer = runtime().block_on(async { registered(&timers, Duration::from_secs(60)) });
        // Its runtime ended; the request's stream is read on another one.
        runtime().block_on(async {
            timer.set_after(Duration::from_millis(20));
            due(&mut timer).await;
        });
    }

    #[tokio::test]
    async fn at_most_so_many_timers_are_kept() {
        let timers = Arc::new(Timers::default());
        let all: Vec<Timer> = (0..KEEP + 3)
            .map(|_| registered(&timers, Duration::from_secs(60)))
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

    /// Waits until `idle` says the body timed out, failing if it isn't
    /// within a day.
    async fn cut_off_within_a_day(idle: &mut IdleTimer) {
        let waited = tokio::time::timeout(Duration::from_secs(86_400), cut_off(idle)).await;
        assert!(waited.is_ok(), "never cut off");
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
        cut_off_within_a_day(&mut idle).await;
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
        cut_off_within_a_day(&mut idle).await;
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
