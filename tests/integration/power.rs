//! The power tools: asked before, planned through an injected control,
//! announced just before through a later message (stored and withdrawn,
//! after a restart too, or waiting in memory), `/cancel_shutdown` while the
//! chat's turn waits, and the system's `shutdown` command line.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrobot::Agent;
use ferrobot::agent::ToolOutcome;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::history::{HistoryStore, SqliteHistory};
use ferrobot::schedule::{ManualClock, Scheduler};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tools::{PowerAction, PowerControl, power};
use futures_util::future::BoxFuture;
use serde_json::json;

use crate::sqlite::TempDir;

/// What the control was asked, in order.
#[derive(Default)]
struct Recorded(Mutex<Vec<String>>);

impl Recorded {
    fn asked(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl PowerControl for Recorded {
    fn schedule(&self, action: PowerAction, delay: Duration) -> BoxFuture<'_, Result<(), String>> {
        self.0
            .lock()
            .unwrap()
            .push(format!("{action:?} in {}s", delay.as_secs()));
        Box::pin(async { Ok(()) })
    }

    fn cancel(&self) -> BoxFuture<'_, Result<(), String>> {
        self.0.lock().unwrap().push("cancel".into());
        Box::pin(async { Ok(()) })
    }
}

fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_796_277_600)
}

type Posted = Arc<Mutex<Vec<(String, String)>>>;

/// An agent with the power tools over `control`, approving every question,
/// on a scheduler (clock at `start()`) over the SQLite file in `dir`.
async fn bot(
    model: MockProvider,
    control: &Arc<Recorded>,
    dir: &TempDir,
    clock: &ManualClock,
) -> (Agent, Scheduler, Posted, tokio::task::JoinHandle<()>) {
    let scheduler = Scheduler::new().clock(clock.clone());
    let agent = Agent::builder()
        .provider(model)
        .history(SqliteHistory::open(dir.file("history.db")).await.unwrap())
        .tools(power(Arc::clone(control)))
        .state(scheduler.clone())
        .confirm(|_: ConfirmRequest| async { Decision::Approve })
        .build();
    let posted = Posted::default();
    let sink = Arc::clone(&posted);
    let running = tokio::spawn(
        scheduler.run(agent.clone(), move |to: String, text: String| {
            sink.lock().unwrap().push((to, text));
            async {}
        }),
    );
    (agent, scheduler, posted, running)
}

fn planning(tool: &str, minutes: u32) -> MockProvider {
    MockProvider::new()
        .then(MockTurn::new().tool_call(tool, json!({"minutes": minutes})))
        .then(MockTurn::new().text("Planned."))
}

async fn pending(dir: &TempDir) -> Vec<(String, String, SystemTime)> {
    let store = SqliteHistory::open(dir.file("history.db")).await.unwrap();
    let far = UNIX_EPOCH + Duration::from_secs(u32::MAX.into());
    store
        .due_later_messages(far)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.conversation, m.text, m.due))
        .collect()
}

async fn eventually_posted(posted: &Posted, n: usize) -> Vec<(String, String)> {
    for _ in 0..500 {
        if posted.lock().unwrap().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    posted.lock().unwrap().clone()
}

#[tokio::test]
async fn a_confirmed_shutdown_is_planned_and_announced_just_before() {
    let dir = TempDir::new("power-planned");
    let clock = ManualClock::new(start());
    let control = Arc::new(Recorded::default());
    let (agent, _scheduler, posted, running) =
        bot(planning("shutdown", 5), &control, &dir, &clock).await;
    let reply = agent.handle("ann", "power off in 5 minutes").await.unwrap();
    assert_eq!(reply.text, "Planned.");
    assert_eq!(control.asked(), ["PowerOff in 300s"]);
    let result = &reply.tool_calls[0];
    assert_eq!(result.outcome, ToolOutcome::Ok);
    assert!(
        result
            .content
            .starts_with("The machine will power off in 5 minutes"),
        "{}",
        result.content
    );
    // Kept in the history file, due 20 s before the system acts.
    let due = start() + Duration::from_secs(280);
    assert_eq!(
        pending(&dir).await,
        [("ann".into(), "Powering off now.".into(), due)]
    );
    clock.advance(Duration::from_secs(279));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(posted.lock().unwrap().is_empty(), "not before its time");
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        eventually_posted(&posted, 1).await,
        [("ann".into(), "Powering off now.".into())]
    );
    running.abort();
}

#[tokio::test]
async fn cancel_shutdown_calls_the_plan_off_and_withdraws_the_announcement_after_a_restart() {
    let dir = TempDir::new("power-cancel");
    let clock = ManualClock::new(start());
    let control = Arc::new(Recorded::default());
    let (agent, _scheduler, _, running) = bot(planning("reboot", 10), &control, &dir, &clock).await;
    agent.handle("ann", "reboot in 10").await.unwrap();
    assert_eq!(pending(&dir).await.len(), 1);
    // The bot restarts: a new process on the same file.
    running.abort();
    drop(agent);
    let (agent, _scheduler, posted, running) =
        bot(MockProvider::new(), &control, &dir, &clock).await;
    let reply = agent.handle("ann", "/cancel_shutdown").await.unwrap();
    assert_eq!(reply.text, "Cancelled: the machine stays on.");
    assert_eq!(control.asked(), ["Reboot in 600s", "cancel"]);
    assert!(pending(&dir).await.is_empty());
    clock.advance(Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(posted.lock().unwrap().is_empty());
    // Nothing left to cancel: the reply says so, and asks the system anyway.
    let reply = agent.handle("ann", "/cancel_shutdown").await.unwrap();
    assert!(
        reply
            .text
            .starts_with("No shutdown or reboot was announced")
    );
    assert_eq!(control.asked().len(), 3);
    running.abort();
}

#[tokio::test]
async fn a_cancel_from_another_chat_withdraws_the_announcement_too() {
    let dir = TempDir::new("power-elsewhere");
    let clock = ManualClock::new(start());
    let control = Arc::new(Recorded::default());
    let (agent, _scheduler, _, running) =
        bot(planning("shutdown", 10), &control, &dir, &clock).await;
    agent.handle("ann", "power off in 10").await.unwrap();
    assert_eq!(pending(&dir).await.len(), 1);
    let reply = agent.handle("bob", "/cancel_shutdown").await.unwrap();
    assert_eq!(reply.text, "Cancelled: the machine stays on.");
    assert!(pending(&dir).await.is_empty());
    running.abort();
}

#[tokio::test]
async fn a_new_plan_replaces_the_earlier_announcement() {
    let dir = TempDir::new("power-replace");
    let clock = ManualClock::new(start());
    let control = Arc::new(Recorded::default());
    let model = planning("shutdown", 30)
        .then(MockTurn::new().tool_call("reboot", json!({"minutes": 2})))
        .then(MockTurn::new().text("Rebooting instead."));
    let (agent, _scheduler, _, running) = bot(model, &control, &dir, &clock).await;
    agent.handle("ann", "off in half an hour").await.unwrap();
    agent.handle("ann", "no, reboot in 2").await.unwrap();
    assert_eq!(
        pending(&dir).await,
        [(
            "ann".into(),
            "Rebooting now.".into(),
            start() + Duration::from_secs(100)
        )]
    );
    running.abort();
}

#[tokio::test]
async fn nothing_is_planned_without_a_yes_or_with_a_delay_out_of_range() {
    let control = Arc::new(Recorded::default());
    let asked = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&asked);
    let agent = Agent::builder()
        .provider(
            MockProvider::new()
                .then(MockTurn::new().tool_call("shutdown", json!({"minutes": 1})))
                .then(MockTurn::new().text("Declined."))
                .then(MockTurn::new().tool_call("shutdown", json!({"minutes": 0})))
                .then(MockTurn::new().text("Bad delay.")),
        )
        .tools(power(Arc::clone(&control)))
        .confirm(move |request: ConfirmRequest| {
            *counter.lock().unwrap() += 1;
            assert_eq!(request.prompt, "Power this machine off in 1 minute(s)?");
            async { Decision::Deny(None) }
        })
        .build();
    let reply = agent.handle("ann", "shut down").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    let reply = agent.handle("ann", "shut down now").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert!(
        reply.tool_calls[0]
            .content
            .contains("`minutes`: 0 is less than the minimum of 1"),
        "{}",
        reply.tool_calls[0].content
    );
    assert_eq!(*asked.lock().unwrap(), 1);
    assert!(control.asked().is_empty());
}

#[tokio::test(start_paused = true)]
async fn without_a_scheduler_the_announcement_waits_in_memory_and_can_be_withdrawn() {
    let control = Arc::new(Recorded::default());
    let posted = Posted::default();
    let sink = Arc::clone(&posted);
    let agent = Agent::builder()
        .provider(
            planning("shutdown", 1)
                .then(MockTurn::new().tool_call("shutdown", json!({"minutes": 1})))
                .then(MockTurn::new().text("Again.")),
        )
        .tools(power(Arc::clone(&control)))
        .confirm(|_: ConfirmRequest| async { Decision::Approve })
        .notifier(move |to: String, text: String| {
            sink.lock().unwrap().push((to, text));
            async {}
        })
        .build();
    agent.handle("ann", "off in a minute").await.unwrap();
    agent.handle("ann", "/cancel_shutdown").await.unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(posted.lock().unwrap().is_empty(), "withdrawn");
    agent.handle("ann", "off in a minute").await.unwrap();
    tokio::time::sleep(Duration::from_secs(39)).await;
    assert!(posted.lock().unwrap().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        *posted.lock().unwrap(),
        [("ann".to_owned(), "Powering off now.".to_owned())]
    );
}

#[tokio::test]
async fn cancel_shutdown_answers_while_the_chats_turn_waits_for_a_yes() {
    let control = Arc::new(Recorded::default());
    let (confirm, mut questions) = ferrobot::confirm::channel(4);
    let agent = Agent::builder()
        .provider(planning("reboot", 5))
        .tools(power(Arc::clone(&control)))
        .confirm(confirm)
        .build();
    let turn = tokio::spawn({
        let agent = agent.clone();
        async move { agent.handle("ann", "reboot in 5").await.unwrap() }
    });
    let question = questions.recv().await.unwrap();
    assert_eq!(
        question.request().prompt,
        "Reboot this machine in 5 minute(s)?"
    );
    // The turn holds the chat; the command doesn't wait for it.
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        agent.handle("ann", "/cancel_shutdown"),
    )
    .await
    .expect("answered at once")
    .unwrap();
    assert!(
        reply
            .text
            .starts_with("No shutdown or reboot was announced")
    );
    question.decline();
    assert_eq!(turn.await.unwrap().text, "Planned.");
    assert_eq!(control.asked(), ["cancel"]);
}

#[cfg(target_os = "linux")]
mod system {
    use std::time::Duration;

    use ferrobot::tools::{PowerAction, PowerControl, SystemPower};

    use crate::sqlite::TempDir;

    /// A `shutdown` that writes its arguments to `calls` and fails when the
    /// first is `-r` (as a reboot refused to an unprivileged user); run
    /// through `sh`, as a file just written can't be executed while another
    /// test's fork still holds it open.
    fn fake(dir: &TempDir) -> (SystemPower, std::path::PathBuf) {
        let calls = dir.file("calls");
        let script = dir.file("shutdown");
        std::fs::write(
            &script,
            format!(
                "echo \"$@\" >> '{}'\n[ \"$1\" = -r ] && {{ echo 'Failed to set wall message: Access denied' >&2; exit 1; }}\nexit 0\n",
                calls.display()
            ),
        )
        .unwrap();
        (
            SystemPower::command(["/bin/sh", script.to_str().unwrap()]).unwrap(),
            calls,
        )
    }

    /// A `shutdown` that waits in the foreground for its time, as
    /// sysvinit's and the BSDs' do, is left running as the plan.
    #[tokio::test]
    async fn a_command_that_waits_for_its_time_is_left_to_wait() {
        let dir = TempDir::new("power-foreground");
        let script = dir.file("shutdown");
        std::fs::write(&script, "exec sleep 8\n").unwrap();
        let power = SystemPower::command(["/bin/sh", script.to_str().unwrap()]).unwrap();
        let started = std::time::Instant::now();
        power
            .schedule(PowerAction::PowerOff, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(8));
    }

    #[tokio::test]
    async fn the_system_command_is_run_with_the_delay_in_minutes_and_its_refusal_is_told() {
        let dir = TempDir::new("power-system");
        let (power, calls) = fake(&dir);
        power
            .schedule(PowerAction::PowerOff, Duration::from_secs(90))
            .await
            .unwrap();
        power.cancel().await.unwrap();
        let refused = power
            .schedule(PowerAction::Reboot, Duration::from_secs(60))
            .await
            .unwrap_err();
        assert_eq!(
            std::fs::read_to_string(&calls).unwrap(),
            "-P +2\n-c\n-r +1\n"
        );
        assert!(
            refused.contains(
                "-r +1` failed (exit status: 1): Failed to set wall message: Access denied"
            ),
            "{refused}"
        );
        let missing = SystemPower::command(["/nonexistent/shutdown"]).unwrap();
        let error = missing.cancel().await.unwrap_err();
        assert!(
            error.starts_with("could not run `/nonexistent/shutdown -c`: "),
            "{error}"
        );
        assert!(SystemPower::command(Vec::<String>::new()).is_err());
    }
}
