//! Running things at once: calls of one round, exclusive tools, one
//! conversation's turns in order, many conversations side by side.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Role};
use serde_json::{Value, json};
use tokio::sync::Barrier;

use super::{counting_tool, echo_tool, results_of};

#[tokio::test(start_paused = true)]
async fn calls_of_one_round_run_concurrently_up_to_the_limit() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut turn = MockTurn::new();
    for _ in 0..6 {
        turn = turn.tool_call("count", json!({}));
    }
    let mock = MockProvider::new()
        .then(turn)
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool(
            "count",
            Arc::clone(&running),
            Arc::clone(&peak),
        ))
        .max_concurrent_tools(4)
        .build();
    agent.handle("a", "count").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn two_calls_wait_for_each_other_without_deadlock() {
    // Each call waits until the other has started: only concurrent calls finish.
    let barrier = Arc::new(Barrier::new(2));
    let tool = from_fn("meet", "Meet.", move |_: Value, _| {
        let barrier = Arc::clone(&barrier);
        async move {
            tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                .await
                .map(|_| "met")
                .map_err(|_| "alone")
        }
    });
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("meet", json!({}))
                .tool_call("meet", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder().provider(mock.clone()).tool(tool).build();
    agent.handle("a", "meet").await.unwrap();
    assert_eq!(
        results_of(&mock.requests()[1]),
        [("met".to_owned(), false), ("met".to_owned(), false)]
    );
}

#[tokio::test(start_paused = true)]
async fn exclusive_tools_run_alone() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("solo", json!({}))
                .tool_call("solo", json!({}))
                .tool_call("solo", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool("solo", Arc::clone(&running), Arc::clone(&peak)).exclusive(true))
        .build();
    agent.handle("a", "go").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn calls_run_one_at_a_time_when_one_needs_confirmation() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("count", json!({}))
                .tool_call("ask", json!({}))
                .tool_call("count", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool(
            "count",
            Arc::clone(&running),
            Arc::clone(&peak),
        ))
        .tool(counting_tool("ask", Arc::clone(&running), Arc::clone(&peak)).confirm("Sure?"))
        .confirm(|_: ConfirmRequest| async { true })
        .build();
    agent.handle("a", "go").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn turns_of_one_conversation_never_interleave() {
    let mock = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        if last.role == Role::User {
            MockTurn::new()
                .tool_call("echo", json!({}))
                .delay(Duration::from_millis(5))
        } else {
            MockTurn::new().text("ok")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    let (a, b) = tokio::join!(agent.handle("same", "one"), agent.handle("same", "two"));
    a.unwrap();
    b.unwrap();
    let roles: Vec<Role> = agent
        .history()
        .load("same")
        .await
        .unwrap()
        .iter()
        .map(|m| m.role)
        .collect();
    let turn = [Role::User, Role::Assistant, Role::Tool, Role::Assistant];
    assert_eq!(roles, [turn, turn].concat());
}

#[tokio::test]
async fn different_conversations_do_not_wait_for_each_other() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let wait = Arc::clone(&gate);
    let mock = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        match (last.role, last.text().as_str()) {
            (Role::User, "block") => MockTurn::new().tool_call("wait", json!({})),
            _ => MockTurn::new().text("ok"),
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(from_fn("wait", "Wait.", move |_: Value, _| {
            let wait = Arc::clone(&wait);
            async move { wait.notified().await }
        }))
        .build();
    let blocked = agent.stream("alice", "block");
    let other = tokio::time::timeout(Duration::from_secs(5), agent.handle("bob", "hi")).await;
    assert_eq!(other.expect("bob waited for alice").unwrap().text, "ok");
    gate.notify_one();
    blocked.into_reply().await.unwrap();
}

#[tokio::test]
async fn ten_thousand_conversations_run_side_by_side() {
    let mock = MockProvider::from_fn(|request| match request.messages.last().unwrap().role {
        Role::User => MockTurn::new().tool_call("echo", json!({"n": 1})),
        _ => MockTurn::new().text("done"),
    });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .build();
    let turns = (0..10_000).map(|i| {
        let agent = agent.clone();
        tokio::spawn(async move { agent.handle(&format!("user-{i}"), "go").await })
    });
    for turn in futures_util::future::join_all(turns).await {
        assert_eq!(turn.unwrap().unwrap().text, "done");
    }
    assert_eq!(mock.requests().len(), 20_000);
}
