//! The scheduler: a handle the tools and the program share, and the loop
//! that runs due schedules and sends due later messages.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use jiff::tz::TimeZone;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::clock::{Clock, SystemClock};
use super::recurrence::{local, time_zone};
use super::{Retries, ScheduleError};
use crate::agent::Agent;
use crate::error::Error;
use crate::history::{HistoryError, HistoryStore, LaterMessage, Recurrence, Schedule, whole_secs};
use crate::tool::Notifier;

/// Runs prompts on a schedule and sends later messages, kept in the
/// agent's history store so a restart loses neither.
///
/// A `Scheduler` is a handle: clones share one scheduler. Give one to the
/// agent as state (`.state(scheduler.clone())`) so the schedule tools
/// ([`tools`](super::tools)) and [`ToolContext::notify_later`](crate::ToolContext::notify_later)
/// reach it, then [`run`](Self::run) it with the agent and a notifier.
/// Set the clock, time zone and retries before cloning it.
///
/// Each due time is claimed in the store before it runs
/// ([`HistoryStore::claim_schedule`]), so it runs at most once, whatever
/// the number of schedulers on the store and however often the process
/// restarts. The prompt runs as a turn of the conversation that made the
/// schedule ([`Agent::handle`]), so its answer is in that conversation's
/// history, and the answer is posted there through the notifier.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ferrobot::schedule::ScheduleError> {
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, UNIX_EPOCH};
/// use ferrobot::history::Recurrence;
/// use ferrobot::schedule::{ManualClock, Scheduler};
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let clock = ManualClock::new(UNIX_EPOCH);
/// let scheduler = Scheduler::new().clock(clock.clone());
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("All disks are below 60%."))
///     .tools(ferrobot::schedule::tools())
///     .state(scheduler.clone())
///     .build();
/// let posted = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&posted);
/// let notifier = move |chat: String, text: String| {
///     sink.lock().unwrap().push((chat, text));
///     async {}
/// };
/// let running = tokio::spawn(scheduler.run(agent, notifier));
///
/// let every_hour = Recurrence::every(Duration::from_secs(3600))?;
/// scheduler.add("alice", "report the disk usage", every_hour).await?;
/// clock.advance(Duration::from_secs(3600));
/// while posted.lock().unwrap().is_empty() {
///     tokio::task::yield_now().await;
/// }
/// assert_eq!(posted.lock().unwrap()[0], ("alice".into(), "All disks are below 60%.".into()));
/// running.abort();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Scheduler {
    settings: Arc<Settings>,
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Settings {
    clock: Arc<dyn Clock>,
    zone: TimeZone,
    zone_name: String,
    retries: Retries,
}

#[derive(Default)]
struct Shared {
    /// The store of the agent it runs with, once [`Scheduler::run`] is called.
    store: Mutex<Option<Arc<dyn HistoryStore>>>,
    /// Wakes the loop when a schedule or later message is added or removed,
    /// or a run's retry is due at a new time.
    wake: Notify,
    /// How many loops run: later messages are stored only while one does.
    running: AtomicUsize,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("clock", &self.settings.clock)
            .field("time_zone", &self.settings.zone_name)
            .field("retries", &self.settings.retries)
            .finish_non_exhaustive()
    }
}

impl Default for Scheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler {
    /// A scheduler on the system clock, in the system's time zone (UTC when
    /// the system's has no IANA name), retrying as [`Retries::default`].
    pub fn new() -> Self {
        let system = TimeZone::system();
        let (zone, zone_name) = match system.iana_name() {
            Some(name) => (system.clone(), name.to_owned()),
            None => (TimeZone::UTC, "UTC".to_owned()),
        };
        Self {
            settings: Arc::new(Settings {
                clock: Arc::new(SystemClock),
                zone,
                zone_name,
                retries: Retries::default(),
            }),
            shared: Arc::new(Shared::default()),
        }
    }

    /// Reads and waits on `clock`. By default, [`SystemClock`].
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        Arc::make_mut(&mut self.settings).clock = Arc::new(clock);
        self
    }

    /// Reads cron expressions and wall-clock times made through the tools
    /// in the IANA time zone `name`, e.g. `Europe/Paris`. By default, the
    /// system's.
    ///
    /// # Errors
    /// [`ScheduleError::TimeZone`] for a zone the time zone database
    /// doesn't know.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::schedule::Scheduler;
    /// let scheduler = Scheduler::new().time_zone("Europe/Paris").unwrap();
    /// assert_eq!(scheduler.time_zone_name(), "Europe/Paris");
    /// assert!(Scheduler::new().time_zone("Europe/Pariss").is_err());
    /// ```
    pub fn time_zone(mut self, name: &str) -> Result<Self, ScheduleError> {
        let zone = time_zone(name)?;
        let settings = Arc::make_mut(&mut self.settings);
        settings.zone = zone;
        settings.zone_name = name.to_owned();
        Ok(self)
    }

    /// How a run that failed for a reason that may pass (the model out of
    /// reach) is tried again. By default, [`Retries::default`].
    #[must_use]
    pub fn retries(mut self, retries: Retries) -> Self {
        Arc::make_mut(&mut self.settings).retries = retries;
        self
    }

    /// The IANA name of the time zone it reads times in.
    pub fn time_zone_name(&self) -> &str {
        &self.settings.zone_name
    }

    /// The current time on its clock.
    pub fn now(&self) -> SystemTime {
        self.settings.clock.now()
    }

    /// `time` on the wall clock of its time zone: `2026-12-03 08:00
    /// (Europe/Paris)`.
    pub fn local_time(&self, time: SystemTime) -> String {
        local(time, &self.settings.zone)
    }

    /// The loop that runs due schedules and sends due later messages with
    /// `agent` (whose history store keeps them) and `notifier` (where
    /// answers and messages go), until the future is dropped. Spawn it.
    ///
    /// It wakes at the earliest due time, or when a schedule is added or
    /// cancelled. Due times missed while no loop ran are run once, at
    /// start, not once per missed time. Dropping the future stops it: turns
    /// running then stop too, and their due times are not run again (see
    /// the [module docs](super)).
    pub fn run(
        &self,
        agent: Agent,
        notifier: impl Notifier,
    ) -> impl Future<Output = ()> + Send + 'static {
        let store = Arc::clone(agent.history());
        *self
            .shared
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&store));
        let running = Running::new(Arc::clone(&self.shared));
        let run = Run {
            scheduler: self.clone(),
            agent,
            store,
            notifier: Arc::new(notifier),
        };
        async move {
            let _running = running;
            run.main().await;
        }
    }

    fn store(&self) -> Result<Arc<dyn HistoryStore>, ScheduleError> {
        self.shared
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or(ScheduleError::NotRunning)
    }

    /// Schedules `prompt` as a turn of `conversation`, first due at the
    /// recurrence's first time after now, and returns it as stored.
    ///
    /// # Errors
    /// [`ScheduleError::NotRunning`] before [`run`](Self::run) is called,
    /// [`ScheduleError::Invalid`] for a time already past,
    /// [`ScheduleError::Store`] when the store fails or keeps no schedules.
    pub async fn add(
        &self,
        conversation: &str,
        prompt: &str,
        recurrence: Recurrence,
    ) -> Result<Schedule, ScheduleError> {
        let store = self.store()?;
        let now = whole_secs(self.now());
        let Some(first) = recurrence.next_after(now, now)? else {
            return Err(ScheduleError::Invalid(format!(
                "{} has passed (it is {} now): give a time in the future",
                self.local_time(match recurrence {
                    Recurrence::Once(at) => at,
                    _ => now,
                }),
                self.local_time(now)
            )));
        };
        let mut schedule = Schedule::new(conversation, prompt, recurrence, first, now);
        schedule.id = store.add_schedule(&schedule).await?;
        self.shared.wake.notify_one();
        Ok(schedule)
    }

    /// The schedules of `conversation`, or of every conversation.
    ///
    /// # Errors
    /// [`ScheduleError::NotRunning`] before [`run`](Self::run) is called,
    /// [`ScheduleError::Store`] when the store fails.
    pub async fn schedules(
        &self,
        conversation: Option<&str>,
    ) -> Result<Vec<Schedule>, ScheduleError> {
        Ok(self.store()?.schedules(conversation).await?)
    }

    /// Cancels schedule `id`; returns whether there was one. A run already
    /// going finishes.
    ///
    /// # Errors
    /// [`ScheduleError::NotRunning`] before [`run`](Self::run) is called,
    /// [`ScheduleError::Store`] when the store fails.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ferrobot::schedule::ScheduleError> {
    /// use std::time::Duration;
    /// use ferrobot::history::Recurrence;
    /// use ferrobot::schedule::Scheduler;
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// let scheduler = Scheduler::new();
    /// let agent = Agent::builder().provider(MockProvider::replying("ok")).build();
    /// let running = tokio::spawn(scheduler.run(agent, |_: String, _: String| async {}));
    /// let made = scheduler.add("alice", "water the plants", Recurrence::every(Duration::from_secs(86_400))?).await?;
    /// assert_eq!(scheduler.schedules(Some("alice")).await?.len(), 1);
    /// assert!(scheduler.describe(&made).starts_with("1: “water the plants”, every 1d; next "));
    /// assert!(scheduler.cancel(made.id).await?);
    /// assert!(scheduler.schedules(None).await?.is_empty());
    /// running.abort();
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: u64) -> Result<bool, ScheduleError> {
        let removed = self.store()?.remove_schedule(id).await?;
        self.shared.wake.notify_one();
        Ok(removed)
    }

    /// Keeps `text` to send to `conversation` after `delay`, durably: a
    /// restart before then doesn't lose it. What
    /// [`ToolContext::notify_later`](crate::ToolContext::notify_later) does
    /// when the agent has a running scheduler.
    ///
    /// # Errors
    /// [`ScheduleError::NotRunning`] when no loop runs (nothing would send
    /// it), [`ScheduleError::Store`] when the store fails or keeps no later
    /// messages.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ferrobot::schedule::ScheduleError> {
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use ferrobot::schedule::{ManualClock, Scheduler};
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// let clock = ManualClock::new(UNIX_EPOCH);
    /// let scheduler = Scheduler::new().clock(clock.clone());
    /// let agent = Agent::builder().provider(MockProvider::replying("ok")).build();
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// let running = tokio::spawn(scheduler.run(agent, move |chat: String, text: String| {
    ///     let _ = tx.send(format!("{chat}: {text}"));
    ///     async {}
    /// }));
    /// scheduler.send_later("alice", "Rebooting now.", Duration::from_secs(60)).await?;
    /// clock.advance(Duration::from_secs(60));
    /// assert_eq!(rx.recv().await.as_deref(), Some("alice: Rebooting now."));
    /// running.abort();
    /// # Ok(()) }
    /// ```
    pub async fn send_later(
        &self,
        conversation: &str,
        text: &str,
        delay: Duration,
    ) -> Result<(), ScheduleError> {
        if self.shared.running.load(Ordering::SeqCst) == 0 {
            return Err(ScheduleError::NotRunning);
        }
        let store = self.store()?;
        // Rounded up: a message is never sent before its delay.
        let due = whole_secs(self.now() + delay + Duration::from_millis(999));
        store
            .add_later_message(&LaterMessage::new(conversation, text, due))
            .await?;
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Takes back the later messages that say exactly `text` and are not
    /// sent yet, of `conversation` or of every conversation (`None`);
    /// returns how many there were. What
    /// [`ToolContext::withdraw_later`](crate::ToolContext::withdraw_later)
    /// does when the agent has a scheduler.
    ///
    /// # Errors
    /// [`ScheduleError::NotRunning`] before the scheduler ever ran (it has
    /// no store yet), [`ScheduleError::Store`] when the store fails or keeps
    /// no later messages.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), ferrobot::schedule::ScheduleError> {
    /// use std::time::Duration;
    /// use ferrobot::schedule::Scheduler;
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// let scheduler = Scheduler::new();
    /// let agent = Agent::builder().provider(MockProvider::replying("ok")).build();
    /// let running = tokio::spawn(scheduler.run(agent, |_: String, _: String| async {}));
    /// scheduler.send_later("alice", "Rebooting now.", Duration::from_secs(60)).await?;
    /// assert_eq!(scheduler.withdraw_later(Some("bob"), "Rebooting now.").await?, 0);
    /// assert_eq!(scheduler.withdraw_later(Some("alice"), "Rebooting now.").await?, 1);
    /// assert_eq!(scheduler.withdraw_later(None, "Rebooting now.").await?, 0);
    /// running.abort();
    /// # Ok(()) }
    /// ```
    pub async fn withdraw_later(
        &self,
        conversation: Option<&str>,
        text: &str,
    ) -> Result<usize, ScheduleError> {
        let store = self.store()?;
        // Every message not sent yet, however far off.
        let end_of_time = SystemTime::UNIX_EPOCH + Duration::from_secs(u32::MAX.into());
        let mut withdrawn = 0;
        for message in store.due_later_messages(end_of_time).await? {
            if conversation.is_none_or(|c| message.conversation == c)
                && message.text == text
                && store.take_later_message(message.id).await?
            {
                withdrawn += 1;
            }
        }
        if withdrawn > 0 {
            self.shared.wake.notify_one();
        }
        Ok(withdrawn)
    }

    /// A schedule in a line, for people and models: `3: “report the disk
    /// usage”, every 1d; next 2026-12-03 08:00 (Europe/Paris); last run
    /// failed: …`.
    pub fn describe(&self, schedule: &Schedule) -> String {
        let mut line = format!(
            "{}: “{}”, {}",
            schedule.id,
            schedule.prompt,
            schedule.recurrence.describe(&self.settings.zone)
        );
        match schedule.next_due {
            Some(next) if schedule.attempts > 0 => line.push_str(&format!(
                "; retry {} at {}",
                schedule.attempts,
                self.local_time(next)
            )),
            Some(next) => line.push_str(&format!("; next {}", self.local_time(next))),
            None => line.push_str("; running now, no next run"),
        }
        if let Some(last) = schedule.last_run {
            match &schedule.last_error {
                Some(error) => line.push_str(&format!(
                    "; last run {} failed: {error}",
                    self.local_time(last)
                )),
                None => line.push_str(&format!("; last run {} ok", self.local_time(last))),
            }
        }
        line
    }
}

/// Counts a running loop while alive.
struct Running(Arc<Shared>);

impl Running {
    fn new(shared: Arc<Shared>) -> Self {
        shared.running.fetch_add(1, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What one loop works with.
#[derive(Clone)]
struct Run {
    scheduler: Scheduler,
    agent: Agent,
    store: Arc<dyn HistoryStore>,
    notifier: Arc<dyn Notifier>,
}

impl Run {
    async fn main(self) {
        // Runs in flight: dropping the loop drops (aborts) them.
        let mut runs = JoinSet::new();
        let clock = Arc::clone(&self.scheduler.settings.clock);
        loop {
            while runs.try_join_next().is_some() {}
            let now = clock.now();
            let mut failed = false;
            match self.store.due_later_messages(now).await {
                Ok(due) => {
                    for message in due {
                        failed |= !self.send_later_message(message).await;
                    }
                }
                Err(HistoryError::Unsupported { .. }) => {}
                Err(error) => failed |= store_failed("read the due later messages", &error),
            }
            match self.store.due_schedules(now).await {
                Ok(due) => {
                    for schedule in due {
                        failed |= !self.start(schedule, now, &mut runs).await;
                    }
                }
                Err(HistoryError::Unsupported { .. }) => {}
                Err(error) => failed |= store_failed("read the due schedules", &error),
            }
            let next = match self.store.next_due().await {
                Ok(next) => next,
                Err(HistoryError::Unsupported { .. }) => None,
                Err(error) => {
                    failed |= store_failed("read the next due time", &error);
                    None
                }
            };
            let sleep = async {
                if failed {
                    // The store failed: look again in a while, on real time.
                    tokio::time::sleep(Duration::from_secs(5)).await;
                } else if let Some(next) = next {
                    clock.sleep_until(next).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = sleep => {}
                () = self.scheduler.shared.wake.notified() => {}
            }
        }
    }

    /// Takes a due later message from the store and sends it; false when
    /// the store failed.
    async fn send_later_message(&self, message: LaterMessage) -> bool {
        match self.store.take_later_message(message.id).await {
            Ok(true) => {
                self.notifier
                    .notify(message.conversation, message.text)
                    .await;
                true
            }
            // Another scheduler took it.
            Ok(false) => true,
            Err(error) => !store_failed("take a later message", &error),
        }
    }

    /// Claims the schedule's due time and starts its run; false when the
    /// store failed.
    async fn start(&self, schedule: Schedule, now: SystemTime, runs: &mut JoinSet<()>) -> bool {
        let next = match schedule.recurrence.next_after(now, schedule.created) {
            Ok(next) => next,
            Err(error) => {
                // Its recurrence can't be read any more (a time zone gone
                // from the database): it goes, and the chat is told why.
                tracing::warn!(schedule = schedule.id, error = %error, "a schedule's recurrence can't be read; removing it");
                return match self.store.remove_schedule(schedule.id).await {
                    Ok(true) => {
                        self.notifier
                            .notify(
                                schedule.conversation.clone(),
                                format!(
                                    "Scheduled prompt {} (“{}”) stopped: {error}",
                                    schedule.id, schedule.prompt
                                ),
                            )
                            .await;
                        true
                    }
                    Ok(false) => true,
                    Err(error) => !store_failed("remove an unreadable schedule", &error),
                };
            }
        };
        match self
            .store
            .claim_schedule(schedule.id, schedule.next_due, next)
            .await
        {
            Ok(true) => {
                tracing::info!(schedule = schedule.id, conversation = %schedule.conversation, "running a scheduled prompt");
                let run = self.clone();
                runs.spawn(async move { run.run(schedule, next).await });
                true
            }
            // Claimed by another scheduler, or cancelled meanwhile.
            Ok(false) => true,
            Err(error) => !store_failed("claim a due schedule", &error),
        }
    }

    /// Runs a claimed due time: the turn, its answer posted, then the
    /// outcome recorded (a retry claimed, or the run given up with a note).
    async fn run(self, schedule: Schedule, next: Option<SystemTime>) {
        let outcome = self
            .agent
            .handle(&schedule.conversation, schedule.prompt.as_str())
            .await;
        let settings = &self.scheduler.settings;
        let at = settings.clock.now();
        let id = schedule.id;
        let error = match outcome {
            Ok(reply) => {
                if !reply.text.trim().is_empty() {
                    self.notifier
                        .notify(schedule.conversation.clone(), reply.text)
                        .await;
                }
                self.finish(&schedule, at, None, next).await;
                return;
            }
            Err(error) => error,
        };
        let message = error.user_message();
        let retry = match &error {
            Error::Provider(e) if e.is_retryable() => settings
                .retries
                .delays
                .get(schedule.attempts as usize)
                .map(|delay| whole_secs(at + *delay))
                .filter(|retry| next.is_none_or(|next| *retry < next)),
            _ => None,
        };
        if let Some(retry) = retry {
            tracing::warn!(schedule = id, attempt = schedule.attempts + 1, error = %message, "a scheduled prompt failed; retrying");
            let attempts = schedule.attempts + 1;
            let recorded = self
                .store
                .record_schedule_run(id, at, Some(&message), attempts)
                .await;
            let claimed = self.store.claim_schedule(id, next, Some(retry)).await;
            match (recorded, claimed) {
                (Ok(()), Ok(_)) => self.scheduler.shared.wake.notify_one(),
                (Err(e), _) | (_, Err(e)) => {
                    store_failed("record a scheduled prompt's retry", &e);
                }
            }
            return;
        }
        tracing::warn!(schedule = id, error = %message, "a scheduled prompt failed");
        let tries = match schedule.attempts {
            0 => String::new(),
            n => format!(" after {} attempts", n + 1),
        };
        let then = match next {
            Some(next) => format!(" Next run: {}.", self.scheduler.local_time(next)),
            None => String::new(),
        };
        self.notifier
            .notify(
                schedule.conversation.clone(),
                format!(
                    "Scheduled prompt {id} (“{}”) failed{tries}: {message}.{then}",
                    schedule.prompt
                ),
            )
            .await;
        self.finish(&schedule, at, Some(&message), next).await;
    }

    /// Records a finished run; a schedule with no next run goes.
    async fn finish(
        &self,
        schedule: &Schedule,
        at: SystemTime,
        error: Option<&str>,
        next: Option<SystemTime>,
    ) {
        let done = if next.is_none() {
            self.store.remove_schedule(schedule.id).await.map(|_| ())
        } else {
            self.store
                .record_schedule_run(schedule.id, at, error, 0)
                .await
        };
        if let Err(error) = done {
            store_failed("record a scheduled prompt's run", &error);
        }
    }
}

/// Logs a store failure; always true (it failed).
fn store_failed(what: &str, error: &HistoryError) -> bool {
    tracing::warn!(error = %error.chain(), "the scheduler could not {what}; trying again shortly");
    true
}
