//! Background work (`Delegate`): a job handed to a specialist returns at
//! once with a task id; its result reaches the chat through the notifier
//! and the conversation's history; `/tasks` lists, `/cancel ID` stops; the
//! queue is bounded; bad arguments and failures are told.

use std::time::Duration;

use ferrobot::agent::Delegate;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::policy::{Policy, Rule};
use ferrobot::provider::ProviderError;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, Role};
use serde_json::json;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::results_of;

/// A lead agent with `delegate` (the researcher, `specialist`), built by
/// `build` from a builder that has the notifier; and what the notifier got.
fn lead(model: MockProvider, delegate: Delegate) -> (Agent, UnboundedReceiver<(String, String)>) {
    let (tx, rx) = unbounded_channel();
    let agent = Agent::builder()
        .provider(model)
        .tool(delegate)
        .notifier(move |chat: String, text: String| {
            let tx = tx.clone();
            async move {
                tx.send((chat, text)).unwrap();
            }
        })
        .build();
    (agent, rx)
}

fn researcher(model: MockProvider) -> Delegate {
    let agent = Agent::builder().provider(model).build();
    Delegate::new().agent("researcher", "Looks things up.", agent)
}

fn delegating(task: &str) -> MockTurn {
    MockTurn::new().tool_call("delegate", json!({"agent": "researcher", "task": task}))
}

/// Waits (on the paused clock) until `/tasks` says `what`.
async fn until_tasks_say(agent: &Agent, chat: &str, what: &str) -> String {
    for _ in 0..1000 {
        let listed = agent.handle(chat, "/tasks").await.unwrap().text;
        if listed.contains(what) {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("/tasks never said {what:?}");
}

#[tokio::test(start_paused = true)]
async fn delegate_returns_at_once_and_the_result_arrives_and_is_remembered() {
    let specialist = MockProvider::new().then(
        MockTurn::new()
            .text("Paris has 2.1 million inhabitants.")
            .delay(Duration::from_secs(60)),
    );
    let model = MockProvider::new()
        .then(delegating("Population of Paris?"))
        .then(MockTurn::new().text("On it."))
        .then(MockTurn::new().text("As the researcher said: 2.1 million."));
    let (agent, mut posted) = lead(model.clone(), researcher(specialist.clone()));

    let reply = agent
        .handle("alice", "How many people live in Paris?")
        .await
        .unwrap();
    assert_eq!(reply.text, "On it.");
    assert_eq!(
        reply.tool_calls[0].content,
        "Started task 1 (researcher). Its result will be posted in this chat when it is ready; \
         /tasks lists tasks, /cancel 1 stops it."
    );
    assert!(
        posted.try_recv().is_err(),
        "the turn did not wait for the task"
    );

    let (chat, text) = posted.recv().await.unwrap();
    assert_eq!(chat, "alice");
    assert_eq!(
        text,
        "Task 1 (researcher) finished:\n\nParis has 2.1 million inhabitants."
    );
    // The specialist saw only the task.
    let asked = &specialist.requests()[0];
    assert_eq!(asked.messages.len(), 1);
    assert_eq!(asked.messages[0].text(), "Population of Paris?");
    // The result is the conversation's last word, and the model reads it
    // next turn.
    let history = agent.history().load("alice").await.unwrap();
    let last = history.last().unwrap();
    assert_eq!((last.role, last.text()), (Role::Assistant, text.clone()));
    agent.handle("alice", "So?").await.unwrap();
    let next = model.requests().pop().unwrap();
    let n = next.messages.len();
    assert_eq!(next.messages[n - 2].text(), text);
    assert_eq!(next.messages[n - 1].text(), "So?");
    let listed = agent.handle("alice", "/tasks").await.unwrap().text;
    assert!(
        listed.starts_with("Background tasks:\n1 finished (researcher, ended "),
        "{listed}"
    );
    assert!(listed.ends_with("): Population of Paris?"), "{listed}");
}

#[tokio::test(start_paused = true)]
async fn tasks_lists_and_cancel_stops_a_running_task() {
    let specialist = MockProvider::new().then(
        MockTurn::new()
            .text("never")
            .delay(Duration::from_secs(3600)),
    );
    let model = MockProvider::new()
        .then(delegating("Read every book.\nAll of them."))
        .then(MockTurn::new().text("Started."));
    let (agent, mut posted) = lead(model, researcher(specialist));
    assert_eq!(
        agent.handle("alice", "/tasks").await.unwrap().text,
        "No background tasks in this conversation."
    );
    agent.handle("alice", "read everything").await.unwrap();

    let listed = until_tasks_say(&agent, "alice", "running").await;
    assert!(
        listed.starts_with("Background tasks:\n1 running (researcher, started "),
        "{listed}"
    );
    assert!(listed.ends_with("): Read every book."), "{listed}");
    // Another conversation neither sees nor stops it.
    assert_eq!(
        agent.handle("bob", "/tasks").await.unwrap().text,
        "No background tasks in this conversation."
    );
    assert_eq!(
        agent.handle("bob", "/cancel 1").await.unwrap().text,
        "There is no task 1 in this conversation; /tasks lists them."
    );
    assert_eq!(
        agent.handle("alice", "/cancel").await.unwrap().text,
        "Say which task: /cancel ID (/tasks lists them)."
    );

    let answer = agent.handle("alice", "/cancel 1").await.unwrap().text;
    assert_eq!(
        answer,
        "Cancelling task 1 (researcher); this chat will be told when it has stopped."
    );
    let (chat, text) = posted.recv().await.unwrap();
    assert_eq!(
        (chat.as_str(), text.as_str()),
        ("alice", "Task 1 (researcher) was cancelled.")
    );
    until_tasks_say(&agent, "alice", "1 cancelled").await;
    assert_eq!(
        agent.handle("alice", "/cancel 1").await.unwrap().text,
        "Task 1 (researcher) has already ended: cancelled."
    );
    let history = agent.history().load("alice").await.unwrap();
    assert_eq!(
        history.last().unwrap().text(),
        "Task 1 (researcher) was cancelled."
    );
    // The commands never entered history.
    assert!(history.iter().all(|m| !m.text().starts_with('/')));
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_refused_and_waiting_tasks_run_in_turn() {
    let specialist = MockProvider::from_fn(|request| {
        MockTurn::new()
            .text(format!("done: {}", request.messages[0].text()))
            .delay(Duration::from_secs(10))
    });
    let model = MockProvider::new()
        .then(
            delegating("one")
                .tool_call("delegate", json!({"agent": "researcher", "task": "two"}))
                .tool_call("delegate", json!({"agent": "researcher", "task": "three"})),
        )
        .then(MockTurn::new().text("Two started."));
    let delegate = researcher(specialist.clone()).max_running(1).max_waiting(1);
    let (agent, mut posted) = lead(model.clone(), delegate);
    agent.handle("alice", "do three things").await.unwrap();

    let results = results_of(&model.requests()[1]);
    assert_eq!(results.len(), 3);
    assert!(
        results[0].0.starts_with("Started task 1 (researcher)."),
        "{results:?}"
    );
    assert!(
        results[1].0.starts_with("Started task 2 (researcher)."),
        "{results:?}"
    );
    assert_eq!(
        results[2],
        (
            "Error: the background queue is full (1 waiting): do it now or try later".to_owned(),
            true
        )
    );
    // One at a time: the second waits for the first.
    let first = posted.recv().await.unwrap().1;
    let second = posted.recv().await.unwrap().1;
    let mut both = [first, second];
    both.sort();
    assert_eq!(
        both,
        [
            "Task 1 (researcher) finished:\n\ndone: one".to_owned(),
            "Task 2 (researcher) finished:\n\ndone: two".to_owned()
        ]
    );
    assert_eq!(specialist.requests().len(), 2);
}

#[tokio::test]
async fn an_unknown_specialist_is_refused_before_anything_starts() {
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("delegate", json!({"agent": "poet", "task": "a sonnet"})))
        .then(MockTurn::new().text("I can't."));
    let (agent, mut posted) = lead(model.clone(), researcher(MockProvider::replying("…")));
    agent.handle("alice", "write me a sonnet").await.unwrap();
    let results = results_of(&model.requests()[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].1);
    assert!(
        results[0]
            .0
            .contains("there is no specialist `poet`: choose one of `researcher`"),
        "{results:?}"
    );
    // The schema says so to the model first.
    let tool = &model.requests()[0].tools[0];
    assert_eq!(
        tool.parameters["properties"]["agent"]["enum"],
        json!(["researcher"])
    );
    assert!(tool.description.contains("- researcher: Looks things up."));
    assert_eq!(
        agent.handle("alice", "/tasks").await.unwrap().text,
        "No background tasks in this conversation."
    );
    assert!(posted.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn a_failed_task_is_posted_as_a_failure() {
    let specialist = MockProvider::new().then(MockTurn::failing(ProviderError::Status {
        status: 503,
        message: "overloaded".into(),
        retry_after: None,
    }));
    let model = MockProvider::new()
        .then(delegating("Population of Paris?"))
        .then(MockTurn::new().text("On it."));
    let (agent, mut posted) = lead(model, researcher(specialist));
    agent
        .handle("alice", "How many people live in Paris?")
        .await
        .unwrap();
    let (_, text) = posted.recv().await.unwrap();
    assert!(text.starts_with("Task 1 (researcher) failed: "), "{text}");
    assert!(text.contains("503"), "{text}");
    until_tasks_say(&agent, "alice", "1 failed (researcher").await;
}

#[tokio::test(start_paused = true)]
async fn a_task_past_its_time_limit_is_stopped_and_posted_as_a_failure() {
    let specialist = MockProvider::new().then(
        MockTurn::new()
            .text("never")
            .delay(Duration::from_secs(3600)),
    );
    let model = MockProvider::new()
        .then(delegating("Read every book."))
        .then(MockTurn::new().text("Started."));
    let delegate = researcher(specialist).timeout(Duration::from_secs(600));
    let (agent, mut posted) = lead(model, delegate);
    agent.handle("alice", "read everything").await.unwrap();
    let (chat, text) = posted.recv().await.unwrap();
    assert_eq!(
        (chat.as_str(), text.as_str()),
        (
            "alice",
            "Task 1 (researcher) failed: it ran past its time limit (10m) and was stopped"
        )
    );
    until_tasks_say(&agent, "alice", "1 failed (researcher").await;
}

#[tokio::test]
async fn an_agent_without_a_notifier_is_told_to_do_the_job_now() {
    let model = MockProvider::new()
        .then(delegating("Population of Paris?"))
        .then(MockTurn::new().text("I'll do it myself."));
    let agent = Agent::builder()
        .provider(model.clone())
        .tool(researcher(MockProvider::replying("…")))
        .build();
    agent
        .handle("alice", "How many people live in Paris?")
        .await
        .unwrap();
    let results = results_of(&model.requests()[1]);
    assert!(results[0].1);
    assert!(
        results[0].0.contains("built without a notifier"),
        "{results:?}"
    );
}

/// A specialist that calls `wipe` once, then answers with what it read.
fn wiping_specialist() -> (Agent, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (wipe, ran) = super::counted("wipe");
    let model = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        match last.tool_results_iter().next() {
            Some(result) => MockTurn::new().text(format!("read: {}", result.content)),
            None => MockTurn::new().tool_call("wipe", json!({})),
        }
    });
    let agent = Agent::builder()
        .provider(model)
        .tool(wipe)
        .policy(Policy::new().rule(Rule::allow("wipe")))
        .build();
    (agent, ran)
}

#[tokio::test]
async fn the_delegating_agents_rules_and_confirmations_hold_for_the_task() {
    use std::sync::atomic::Ordering;
    // The specialist allows `wipe`; the lead denies it: denied.
    let (cleaner, ran) = wiping_specialist();
    let model = MockProvider::new()
        .then(
            MockTurn::new().tool_call("delegate", json!({"agent": "cleaner", "task": "clean up"})),
        )
        .then(MockTurn::new().text("Started."));
    let (tx, mut posted) = unbounded_channel();
    let lead = Agent::builder()
        .provider(model)
        .tool(Delegate::new().agent("cleaner", "Cleans up.", cleaner))
        .policy(Policy::new().rule(Rule::deny("wipe")))
        .notifier(move |chat: String, text: String| {
            let tx = tx.clone();
            async move {
                tx.send((chat, text)).unwrap();
            }
        })
        .build();
    lead.handle("alice", "clean up").await.unwrap();
    let (_, text) = posted.recv().await.unwrap();
    assert_eq!(
        text,
        "Task 1 (cleaner) finished:\n\nread: Not run: denied by the permission rules \
         (rule 1: deny wipe (of an agent above this one))."
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    // The lead asks: its handler is asked, naming its conversation, after
    // its turn ended; approved, the call runs.
    let (cleaner, ran) = wiping_specialist();
    let model = MockProvider::new()
        .then(
            MockTurn::new().tool_call("delegate", json!({"agent": "cleaner", "task": "clean up"})),
        )
        .then(MockTurn::new().text("Started."));
    let (tx, mut posted) = unbounded_channel();
    let (asked_tx, mut asked) = unbounded_channel();
    let lead = Agent::builder()
        .provider(model)
        .tool(Delegate::new().agent("cleaner", "Cleans up.", cleaner))
        .policy(Policy::new().rule(Rule::ask("wipe")))
        .confirm(move |request: ConfirmRequest| {
            asked_tx.send(request).unwrap();
            async { Decision::Approve }
        })
        .notifier(move |chat: String, text: String| {
            let tx = tx.clone();
            async move {
                tx.send((chat, text)).unwrap();
            }
        })
        .build();
    lead.handle("alice", "clean up").await.unwrap();
    let (_, text) = posted.recv().await.unwrap();
    assert_eq!(text, "Task 1 (cleaner) finished:\n\nread: Done.");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let request = asked.recv().await.unwrap();
    assert_eq!(
        (request.tool.as_str(), request.conversation.as_str()),
        ("wipe", "alice")
    );
}

#[tokio::test(start_paused = true)]
async fn a_result_waits_for_the_running_turn_of_its_conversation() {
    let specialist = MockProvider::new().then(
        MockTurn::new()
            .text("found it")
            .delay(Duration::from_secs(60)),
    );
    let model = MockProvider::new()
        .then(delegating("Look it up."))
        .then(MockTurn::new().text("Started."))
        .then(
            MockTurn::new()
                .text("A slow answer.")
                .delay(Duration::from_secs(120)),
        );
    let (agent, mut posted) = lead(model, researcher(specialist));
    agent.handle("alice", "look it up").await.unwrap();
    let turn = tokio::spawn({
        let agent = agent.clone();
        async move { agent.handle("alice", "meanwhile, think hard").await }
    });
    let (_, text) = posted.recv().await.unwrap();
    // Done at 60 s, stored and posted once the turn ended at 120 s, after
    // its answer.
    assert_eq!(turn.await.unwrap().unwrap().text, "A slow answer.");
    let history = agent.history().load("alice").await.unwrap();
    let last: Vec<String> = history[history.len() - 3..]
        .iter()
        .map(ferrobot::Message::text)
        .collect();
    assert_eq!(
        last,
        ["meanwhile, think hard", "A slow answer.", text.as_str()]
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_task_cancelled_never_runs() {
    let specialist =
        MockProvider::from_fn(|_| MockTurn::new().text("done").delay(Duration::from_secs(60)));
    let model = MockProvider::new()
        .then(
            delegating("first")
                .tool_call("delegate", json!({"agent": "researcher", "task": "second"})),
        )
        .then(MockTurn::new().text("Started."));
    let delegate = researcher(specialist.clone()).max_running(1);
    let (agent, mut posted) = lead(model, delegate);
    agent.handle("alice", "two things").await.unwrap();
    let listed = until_tasks_say(&agent, "alice", "1 running").await;
    assert!(
        listed.contains("\n2 queued (researcher, started "),
        "{listed}"
    );
    agent.handle("alice", "/cancel 2").await.unwrap();
    assert_eq!(
        posted.recv().await.unwrap().1,
        "Task 2 (researcher) was cancelled."
    );
    assert_eq!(
        posted.recv().await.unwrap().1,
        "Task 1 (researcher) finished:\n\ndone"
    );
    assert_eq!(specialist.requests().len(), 1);
}
