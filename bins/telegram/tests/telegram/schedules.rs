//! Scheduled prompts end to end: asked for in a chat (by the model's
//! `schedule_prompt` call, or a slash command), run when the injected clock
//! reaches their time, the answer posted to that chat; kept in a SQLite
//! file across a restart of the bot.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrobot::Agent;
use ferrobot::bot::{Channel, ChannelConfirm, ChannelNotifier};
use ferrobot::history::SqliteHistory;
use ferrobot::provider::Provider;
use ferrobot::schedule::{self, ManualClock, Scheduler};
use ferrobot::testing::OpenAiStream;
use ferrobot_testkit::{llm, openai, text_answer};
use serde_json::json;

use crate::support::{ANN, FakeBotApi, start};

/// 2026-12-03 06:00 UTC.
fn six_am() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_796_277_600)
}

const HOUR: Duration = Duration::from_secs(3600);

/// The scheduler tasks a test started, stopped when it ends (or earlier,
/// to stop a bot).
#[derive(Clone, Default)]
struct Schedulers(Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl Schedulers {
    fn stop(&self) {
        for task in self.0.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Schedulers {
    fn drop(&mut self) {
        if Arc::strong_count(&self.0) == 1 {
            self.stop();
        }
    }
}

/// The bots' agent with the schedule tools, its scheduler on `clock` (in
/// UTC) running with the channel's notifier (kept in `schedulers`), as
/// `LoadedConfig::serve` runs it, and its history in `history`.
async fn scheduling_agent(
    provider: impl Provider + 'static,
    channel: &Arc<dyn Channel>,
    clock: &ManualClock,
    history: &Path,
    schedulers: &Schedulers,
) -> Agent {
    let scheduler = Scheduler::new()
        .clock(clock.clone())
        .time_zone("UTC")
        .unwrap();
    let agent = Agent::builder()
        .provider(provider)
        .history(SqliteHistory::open(history).await.unwrap())
        .tools(schedule::tools())
        .state(scheduler.clone())
        .confirm(ChannelConfirm(Arc::clone(channel)))
        .notifier(ChannelNotifier(Arc::clone(channel)))
        .build();
    let task = tokio::spawn(scheduler.run(agent.clone(), ChannelNotifier(Arc::clone(channel))));
    schedulers.0.lock().unwrap().push(task);
    agent
}

/// A scratch history file, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ferrobot-tg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn history(&self) -> std::path::PathBuf {
        self.0.join("history.db")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the bot with `build` on a runtime of its own thread, so that the
/// async agent (the SQLite file opens asynchronously) can be built inside
/// `start`'s synchronous closure.
fn build_blocking<F: std::future::Future<Output = Agent> + Send + 'static>(
    build: impl FnOnce() -> F,
) -> Agent {
    let future = build();
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_the_model_schedules_is_answered_in_that_chat_when_due() {
    let (api, server) = FakeBotApi::start().await;
    let scratch = Scratch::new("schedule-model");
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call(
                "call_1",
                "schedule_prompt",
                &json!({"cron": "0 8 * * *", "prompt": "report the disk usage"}),
            )
            .into_sse(),
        text_answer("Done: every day at 8:00."),
        text_answer("Disk / is 41% full."),
    ])
    .await;
    let clock = ManualClock::new(six_am());
    let schedulers = Schedulers::default();
    let history = scratch.history();
    let _bot = start(&server, &[ANN], |channel| {
        let (clock, model, schedulers) = (clock.clone(), openai(&model), schedulers.clone());
        build_blocking(move || async move {
            scheduling_agent(model, &channel, &clock, &history, &schedulers).await
        })
    });
    api.text(ANN, ANN as i64, "every morning at 8 tell me the disk usage");
    api.wait_for_reply(0, |c| c["text"] == r"Done: every day at 8:00\.")
        .await;
    let mark = api.mark();
    clock.advance(2 * HOUR - Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(api.replies(mark).is_empty(), "not before 8:00");
    clock.advance(Duration::from_secs(60));
    let answer = api
        .wait_for_reply(mark, |c| c["text"] == r"Disk / is 41% full\.")
        .await;
    assert_eq!(answer["chat_id"], json!(ANN));
    // The scheduled turn is in the chat's conversation, after the request.
    let store = SqliteHistory::open(scratch.history()).await.unwrap();
    use ferrobot::history::HistoryStore as _;
    let conversations = store.list().await.unwrap();
    let messages = store.load(&conversations[0].id).await.unwrap();
    let texts: Vec<String> = messages.iter().map(ferrobot::Message::text).collect();
    assert_eq!(texts[texts.len() - 2], "report the disk usage");
    assert_eq!(texts[texts.len() - 1], "Disk / is 41% full.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_schedule_survives_a_restart_of_the_bot() {
    let scratch = Scratch::new("schedule-restart");
    let clock = ManualClock::new(six_am());
    let schedulers = Schedulers::default();
    {
        let (api, server) = FakeBotApi::start().await;
        let model = llm(vec![]).await;
        let history = scratch.history();
        let bot = start(&server, &[ANN], |channel| {
            let (clock, model, schedulers) = (clock.clone(), openai(&model), schedulers.clone());
            build_blocking(move || async move {
                scheduling_agent(model, &channel, &clock, &history, &schedulers).await
            })
        });
        api.text(
            ANN,
            ANN as i64,
            r#"/schedule_prompt every=1h prompt="check the backups""#,
        );
        let made = api
            .wait_for("SendMessage", |c| {
                c["text"].as_str().is_some_and(|t| {
                    t.contains(
                        "Scheduled 1: “check the backups”, every 1h; next 2026-12-03 07:00 (UTC)",
                    )
                })
            })
            .await;
        assert_eq!(made["chat_id"], json!(ANN));
        bot.abort();
        schedulers.stop();
    }
    // The bot was down past two due times; started again, it runs once.
    clock.advance(2 * HOUR + Duration::from_secs(600));
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("Backups are current.")]).await;
    let history = scratch.history();
    let _bot = start(&server, &[ANN], |channel| {
        let (clock, model, schedulers) = (clock.clone(), openai(&model), schedulers.clone());
        build_blocking(move || async move {
            scheduling_agent(model, &channel, &clock, &history, &schedulers).await
        })
    });
    let answer = api
        .wait_for_reply(0, |c| c["text"] == r"Backups are current\.")
        .await;
    assert_eq!(answer["chat_id"], json!(ANN));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requests = ferrobot_testkit::chat_requests(&model).await;
    assert_eq!(requests.len(), 1, "the missed times ran once");
}
