//! Scheduled prompts and later messages: the stores' records and claims,
//! the scheduler on an injected clock, restarts on a real SQLite file, two
//! schedulers racing for one due time, retries, and the tools as slash
//! commands.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrobot::history::{
    HistoryStore, LaterMessage, MemoryHistory, Recurrence, Schedule, SqliteHistory,
};
use ferrobot::provider::ProviderError;
use ferrobot::schedule::{self, ManualClock, Retries, Scheduler};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Role};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::sqlite::TempDir;

/// 2026-12-03 06:00 UTC, a Thursday.
fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_796_277_600)
}

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);

/// What the notifier was given: (conversation, text).
type Posted = Arc<Mutex<Vec<(String, String)>>>;

/// A running scheduler, stopped when dropped.
struct Running {
    scheduler: Scheduler,
    posted: Posted,
    agent: Agent,
    task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    /// Waits (on real time, up to 10 s) until `n` messages were posted.
    async fn posted(&self, n: usize) -> Vec<(String, String)> {
        for _ in 0..1000 {
            let posted = self.posted.lock().unwrap().clone();
            if posted.len() >= n {
                return posted;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "expected {n} messages, got {:?}",
            self.posted.lock().unwrap()
        );
    }

    /// Waits (on real time, up to 10 s) until the only schedule satisfies
    /// `wanted`.
    async fn schedule_where(&self, wanted: impl Fn(&Schedule) -> bool) -> Schedule {
        for _ in 0..1000 {
            let listed = self.scheduler.schedules(None).await.unwrap();
            if wanted(&listed[0]) {
                return listed[0].clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{:?}", self.scheduler.schedules(None).await.unwrap());
    }

    /// What was posted, after giving the scheduler a moment to post more.
    async fn settled(&self) -> Vec<(String, String)> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.posted.lock().unwrap().clone()
    }
}

/// A scheduler on `clock` running `model` over `store`, its tools and a
/// `remind` tool (which leaves a later message) registered.
fn run(model: MockProvider, store: impl HistoryStore, clock: &ManualClock) -> Running {
    run_with(model, store, clock, Retries::default())
}

fn run_with(
    model: MockProvider,
    store: impl HistoryStore,
    clock: &ManualClock,
    retries: Retries,
) -> Running {
    let scheduler = Scheduler::new()
        .clock(clock.clone())
        .time_zone("Europe/Paris")
        .unwrap()
        .retries(retries);
    let remind = from_fn("remind", "Remind later.", |_: Value, ctx| async move {
        ctx.notify_later("Time to stretch.", 10 * MINUTE)
            .await
            .map(|()| "reminder set")
    });
    let agent = Agent::builder()
        .provider(model)
        .history(store)
        .tools(schedule::tools())
        .tool(remind)
        .tool(from_fn("disk", "Disk usage.", |_: Value, _| async {
            "/ is 41% full"
        }))
        .state(scheduler.clone())
        // `cancel_schedule` is destructive: asked about, and allowed here.
        .confirm(|_: ferrobot::confirm::ConfirmRequest| async {
            ferrobot::confirm::Decision::Approve
        })
        .build();
    let posted = Posted::default();
    let sink = Arc::clone(&posted);
    let notifier = move |conversation: String, text: String| {
        sink.lock().unwrap().push((conversation, text));
        async {}
    };
    let task = tokio::spawn(scheduler.run(agent.clone(), notifier));
    Running {
        scheduler,
        posted,
        agent,
        task,
    }
}

/// The store contract, for any store that keeps schedules.
async fn keeps_schedules_and_claims_each_due_time_once(store: &dyn HistoryStore) {
    let daily = Recurrence::Every(Duration::from_secs(86_400));
    let first = start() + HOUR;
    let schedule = Schedule::new(
        "ann",
        "report the disk usage",
        daily.clone(),
        first,
        start(),
    );
    let id = store.add_schedule(&schedule).await.unwrap();
    let other = store
        .add_schedule(&Schedule::new("bob", "hi", daily, first + HOUR, start()))
        .await
        .unwrap();
    assert_ne!(id, other);
    let listed = store.schedules(Some("ann")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].prompt, "report the disk usage");
    assert_eq!(listed[0].next_due, Some(first));
    assert_eq!(store.schedules(None).await.unwrap().len(), 2);
    assert_eq!(store.next_due().await.unwrap(), Some(first));

    assert!(store.due_schedules(start()).await.unwrap().is_empty());
    let due = store.due_schedules(first).await.unwrap();
    assert_eq!(due.iter().map(|s| s.id).collect::<Vec<_>>(), [id]);
    let next = first + Duration::from_secs(86_400);
    // The first claim wins; the same claim again (another scheduler, or
    // this one after a restart) finds the due time moved.
    assert!(
        store
            .claim_schedule(id, Some(first), Some(next))
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_schedule(id, Some(first), Some(next))
            .await
            .unwrap()
    );
    assert!(store.due_schedules(first).await.unwrap().is_empty());
    // A claimed run with no next, and a retry claimed back from it.
    assert!(store.claim_schedule(id, Some(next), None).await.unwrap());
    assert!(store.claim_schedule(id, None, Some(next)).await.unwrap());

    store
        .record_schedule_run(id, first, Some("LLM unavailable"), 1)
        .await
        .unwrap();
    let recorded = &store.schedules(Some("ann")).await.unwrap()[0];
    assert_eq!(recorded.last_run, Some(first));
    assert_eq!(recorded.last_error.as_deref(), Some("LLM unavailable"));
    assert_eq!(recorded.attempts, 1);

    assert!(store.remove_schedule(id).await.unwrap());
    assert!(!store.remove_schedule(id).await.unwrap());
    // Ids are never given twice.
    let again = store
        .add_schedule(&Schedule::new(
            "ann",
            "x",
            Recurrence::Once(first),
            first,
            start(),
        ))
        .await
        .unwrap();
    assert!(again > other, "{again} after {other}");

    let message = LaterMessage::new("ann", "Rebooting now.", start() + MINUTE);
    let later = store.add_later_message(&message).await.unwrap();
    assert_eq!(store.next_due().await.unwrap(), Some(start() + MINUTE));
    assert!(store.due_later_messages(start()).await.unwrap().is_empty());
    let due = store.due_later_messages(start() + MINUTE).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].id, due[0].text.as_str()), (later, "Rebooting now."));
    assert!(store.take_later_message(later).await.unwrap());
    assert!(!store.take_later_message(later).await.unwrap());
}

#[tokio::test]
async fn memory_and_sqlite_stores_keep_schedules_and_claim_each_due_time_once() {
    keeps_schedules_and_claims_each_due_time_once(&MemoryHistory::new()).await;
    let dir = TempDir::new("schedule-store");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    keeps_schedules_and_claims_each_due_time_once(&store).await;
}

#[tokio::test]
async fn a_due_prompt_runs_as_a_turn_of_its_conversation_and_its_answer_is_posted() {
    let clock = ManualClock::new(start());
    let model = MockProvider::replying("Disks: / is 41% full.");
    let requests = model.clone();
    let bot = run(model, MemoryHistory::new(), &clock);
    let daily = Recurrence::cron("0 8 * * *", "Europe/Paris").unwrap();
    let schedule = bot
        .scheduler
        .add("ann", "report the disk usage", daily)
        .await
        .unwrap();
    // 8:00 in Paris is 7:00 UTC.
    assert_eq!(schedule.next_due, Some(start() + HOUR));
    clock.advance(HOUR - MINUTE);
    assert!(bot.settled().await.is_empty(), "not before its time");
    clock.advance(MINUTE);
    let posted = bot.posted(1).await;
    assert_eq!(
        posted,
        [("ann".to_owned(), "Disks: / is 41% full.".to_owned())]
    );
    // The prompt and its answer are a turn of the conversation.
    let history = bot.agent.history().load("ann").await.unwrap();
    assert_eq!(history[0].role, Role::User);
    assert_eq!(history[0].text(), "report the disk usage");
    assert_eq!(history[1].text(), "Disks: / is 41% full.");
    assert_eq!(requests.requests().len(), 1);
    let listed = bot.scheduler.schedules(Some("ann")).await.unwrap();
    assert_eq!(
        listed[0].next_due,
        Some(start() + HOUR + Duration::from_secs(86_400))
    );
    assert_eq!(listed[0].last_run, Some(start() + HOUR));
    assert_eq!(listed[0].last_error, None);
}

// The issue's restart survival: made, everything dropped, reopened later.
#[tokio::test]
async fn a_schedule_survives_a_restart_and_missed_times_run_once() {
    let dir = TempDir::new("schedule-restart");
    let path = dir.file("history.db");
    let clock = ManualClock::new(start());
    {
        let bot = run(
            MockProvider::replying("unused"),
            SqliteHistory::open(&path).await.unwrap(),
            &clock,
        );
        bot.scheduler
            .add(
                "ann",
                "report the disk usage",
                Recurrence::every(HOUR).unwrap(),
            )
            .await
            .unwrap();
    }
    // Down for three and a half hours: three due times missed.
    clock.advance(3 * HOUR + 30 * MINUTE);
    let model = MockProvider::replying("Disks are fine.");
    let requests = model.clone();
    let bot = run(model, SqliteHistory::open(&path).await.unwrap(), &clock);
    let posted = bot.posted(1).await;
    assert_eq!(posted, [("ann".to_owned(), "Disks are fine.".to_owned())]);
    assert_eq!(bot.settled().await.len(), 1, "missed times run once");
    assert_eq!(requests.requests().len(), 1);
    // The next run keeps the interval's beat.
    let schedule = &bot.scheduler.schedules(None).await.unwrap()[0];
    assert_eq!(schedule.next_due, Some(start() + 4 * HOUR));
    clock.advance(30 * MINUTE);
    assert_eq!(bot.posted(2).await.len(), 2);
}

#[tokio::test]
async fn two_schedulers_on_one_file_run_each_due_time_once() {
    let dir = TempDir::new("schedule-race");
    let path = dir.file("history.db");
    let clock = ManualClock::new(start());
    let first_model = MockProvider::replying("from the first");
    let second_model = MockProvider::replying("from the second");
    let (first_requests, second_requests) = (first_model.clone(), second_model.clone());
    let first = run(
        first_model,
        SqliteHistory::open(&path).await.unwrap(),
        &clock,
    );
    let second = run(
        second_model,
        SqliteHistory::open(&path).await.unwrap(),
        &clock,
    );
    for n in 0..5 {
        first
            .scheduler
            .add(
                &format!("chat{n}"),
                "ping",
                Recurrence::every(MINUTE).unwrap(),
            )
            .await
            .unwrap();
    }
    for round in 1..=3 {
        clock.advance(MINUTE);
        // Both wake for every due time; each runs once, by one of them.
        let total = || first.posted.lock().unwrap().len() + second.posted.lock().unwrap().len();
        for _ in 0..1000 {
            if total() >= 5 * round {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let total = total();
        assert_eq!(total, 5 * round, "round {round}");
    }
    assert_eq!(
        first_requests.requests().len() + second_requests.requests().len(),
        15
    );
}

fn unavailable() -> MockTurn {
    MockTurn::failing(ProviderError::Status {
        status: 503,
        message: "loading model".into(),
        retry_after: None,
    })
}

#[tokio::test]
async fn a_run_the_model_missed_is_retried_with_back_off_then_noted() {
    let clock = ManualClock::new(start());
    let model = MockProvider::new()
        .then(unavailable())
        .then(MockTurn::new().text("Disks are fine."))
        .then(unavailable())
        .then(unavailable())
        .then(unavailable());
    let bot = run_with(
        model,
        MemoryHistory::new(),
        &clock,
        Retries::new([MINUTE, 5 * MINUTE]),
    );
    bot.scheduler
        .add(
            "ann",
            "report the disk usage",
            Recurrence::every(HOUR).unwrap(),
        )
        .await
        .unwrap();
    clock.advance(HOUR);
    let retrying = bot.schedule_where(|s| s.attempts == 1).await;
    assert_eq!(retrying.next_due, Some(start() + HOUR + MINUTE));
    assert!(
        retrying.last_error.as_deref().unwrap().contains("503"),
        "{retrying:?}"
    );
    assert!(
        bot.settled().await.is_empty(),
        "nothing said while retrying"
    );
    clock.advance(MINUTE);
    assert_eq!(bot.posted(1).await[0].1, "Disks are fine.");
    bot.schedule_where(|s| s.attempts == 0 && s.next_due == Some(start() + 2 * HOUR))
        .await;
    // The next run fails three times: two retries, then a note.
    clock.set(start() + 2 * HOUR);
    bot.schedule_where(|s| s.attempts == 1).await;
    clock.advance(MINUTE);
    bot.schedule_where(|s| s.attempts == 2).await;
    clock.advance(5 * MINUTE);
    let posted = bot.posted(2).await;
    assert_eq!(
        posted[1].1,
        "Scheduled prompt 1 (“report the disk usage”) failed after 3 attempts: \
         LLM unavailable: server answered 503: loading model — slash commands still work. \
         Next run: 2026-12-03 10:00 (Europe/Paris)."
    );
    let listed = &bot.scheduler.schedules(None).await.unwrap()[0];
    assert_eq!(listed.attempts, 0);
    assert_eq!(listed.next_due, Some(start() + 3 * HOUR));
}

#[tokio::test]
async fn the_tools_make_list_and_cancel_schedules_as_slash_commands() {
    let clock = ManualClock::new(start());
    let bot = run(
        MockProvider::replying("unused"),
        MemoryHistory::new(),
        &clock,
    );
    let made = bot
        .agent
        .handle(
            "ann",
            r#"/schedule_prompt cron="0 8 * * MON-FRI" prompt="report the disk usage""#,
        )
        .await
        .unwrap();
    assert_eq!(
        made.text,
        "Scheduled 1: “report the disk usage”, cron `0 8 * * MON-FRI` (Europe/Paris); \
         next 2026-12-03 08:00 (Europe/Paris). Cancel it with /cancel_schedule id=1."
    );
    let wrong = bot
        .agent
        .handle("ann", r#"/schedule_prompt cron="0 8 * *" prompt="x""#)
        .await
        .unwrap();
    assert!(
        wrong
            .text
            .contains("`0 8 * *` is not a cron expression: expected 5 fields"),
        "{}",
        wrong.text
    );
    let both = bot
        .agent
        .handle(
            "ann",
            r#"/schedule_prompt every=1d at="2026-12-04 08:00" prompt=x"#,
        )
        .await
        .unwrap();
    assert!(
        both.text.contains("give exactly one of `cron`"),
        "{}",
        both.text
    );
    bot.agent
        .handle(
            "ann",
            r#"/schedule_prompt every=1d prompt="water the plants""#,
        )
        .await
        .unwrap();
    // Another chat's schedules are not this chat's to see or cancel.
    let bobs = bot.agent.handle("bob", "/list_schedules").await.unwrap();
    assert_eq!(bobs.text, "No prompts are scheduled in this chat.");
    let refused = bot
        .agent
        .handle("bob", "/cancel_schedule id=1")
        .await
        .unwrap();
    assert!(
        refused.text.contains("no schedule 1 in this chat"),
        "{}",
        refused.text
    );
    // A fresh conversation of Ann's chat (`/new`) still sees them.
    let listed = bot.agent.handle("ann~2", "/list_schedules").await.unwrap();
    assert_eq!(
        listed.text,
        "1: “report the disk usage”, cron `0 8 * * MON-FRI` (Europe/Paris); next 2026-12-03 08:00 (Europe/Paris)\n\
         2: “water the plants”, every 1d; next 2026-12-04 07:00 (Europe/Paris)"
    );
    let cancelled = bot
        .agent
        .handle("ann", "/cancel_schedule id=1")
        .await
        .unwrap();
    assert!(
        cancelled.text.starts_with("Cancelled 1: "),
        "{}",
        cancelled.text
    );
    assert_eq!(bot.scheduler.schedules(None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_later_message_is_stored_and_survives_a_restart() {
    let dir = TempDir::new("later-restart");
    let path = dir.file("history.db");
    let clock = ManualClock::new(start());
    {
        let bot = run(
            MockProvider::new()
                .then(MockTurn::new().tool_call("remind", json!({})))
                .then(MockTurn::new().text("I'll remind you in 10 minutes.")),
            SqliteHistory::open(&path).await.unwrap(),
            &clock,
        );
        bot.agent
            .handle("ann", "remind me to stretch")
            .await
            .unwrap();
        let store = SqliteHistory::open(&path).await.unwrap();
        let kept = store.due_later_messages(start() + HOUR).await.unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].text, "Time to stretch.");
        assert_eq!(kept[0].due, start() + 10 * MINUTE);
    }
    let bot = run(
        MockProvider::replying("unused"),
        SqliteHistory::open(&path).await.unwrap(),
        &clock,
    );
    clock.advance(9 * MINUTE);
    assert!(bot.settled().await.is_empty());
    clock.advance(MINUTE);
    assert_eq!(
        bot.posted(1).await,
        [("ann".to_owned(), "Time to stretch.".to_owned())]
    );
    assert_eq!(bot.settled().await.len(), 1, "sent once");
}

#[tokio::test]
async fn without_a_running_scheduler_tools_say_so_and_later_messages_wait_in_memory() {
    let scheduler = Scheduler::new();
    let agent = Agent::builder()
        .provider(MockProvider::replying("unused"))
        .tools(schedule::tools())
        .state(scheduler.clone())
        .build();
    let reply = agent
        .handle("ann", "/schedule_prompt every=1h prompt=x")
        .await
        .unwrap();
    assert!(
        reply.text.contains("no scheduler runs for this agent"),
        "{}",
        reply.text
    );
    let error = scheduler
        .add("ann", "x", Recurrence::every(HOUR).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(error, schedule::ScheduleError::NotRunning));
}

#[tokio::test]
async fn a_scheduled_slash_command_runs_its_tool_without_the_model() {
    let clock = ManualClock::new(start());
    let model = MockProvider::replying("unused");
    let requests = model.clone();
    let bot = run(model, MemoryHistory::new(), &clock);
    bot.scheduler
        .add("ann", "/disk", Recurrence::every(HOUR).unwrap())
        .await
        .unwrap();
    clock.advance(HOUR);
    assert_eq!(bot.posted(1).await[0].1, "/ is 41% full");
    assert!(requests.requests().is_empty());
}
