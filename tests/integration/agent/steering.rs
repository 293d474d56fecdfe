//! A running turn stopped (`/stop`, `Agent::stop`) and messages said while
//! it runs: steered into it, interrupting it, or queued after it.

use std::sync::Arc;
use std::time::Duration;

use ferrobot::agent::{TurnRequest, WhileBusy};
use ferrobot::testing::{MockProvider, MockTurn, RecordedRequest};
use ferrobot::tool::{FnTool, from_fn};
use ferrobot::{Agent, AgentEvent, Error, Message, Role, TurnStream};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A tool that runs until `release` is notified.
fn held(release: &Arc<tokio::sync::Notify>) -> FnTool {
    let release = Arc::clone(release);
    from_fn("deploy", "Deploy.", move |_: Value, _| {
        let release = Arc::clone(&release);
        async move {
            release.notified().await;
            "deployed to production"
        }
    })
}

/// Reads the stream until its first event matching `wanted`.
async fn until(events: &mut TurnStream, wanted: impl Fn(&AgentEvent) -> bool) {
    while let Some(event) = events.next().await {
        if wanted(&event.unwrap()) {
            return;
        }
    }
    panic!("the turn ended before the awaited event");
}

/// A slow answer: "Counting: one, two, three, four." in 4-character pieces,
/// 50 ms apart.
fn slow_answer() -> MockTurn {
    MockTurn::new()
        .text("Counting: one, two, three, four.")
        .chunked(4)
        .delay(Duration::from_millis(50))
}

fn last_user(request: &RecordedRequest) -> &Message {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn stop_ends_the_running_turn_and_keeps_what_streamed() {
    let mock = MockProvider::new().then(slow_answer());
    let agent = Agent::builder().provider(mock).build();
    assert_eq!(
        agent.handle("alice", "/stop").await.unwrap().text,
        "Nothing is running."
    );

    let mut events = agent.stream("alice", "count");
    until(&mut events, |e| matches!(e, AgentEvent::TextDelta(_))).await;
    let stop = agent.handle("alice", "/stop").await.unwrap();
    assert_eq!(stop.text, "Stopped.");
    assert!(stop.tool_calls.is_empty());
    let mut end = None;
    while let Some(event) = events.next().await {
        end = Some(event);
    }
    assert!(matches!(end, Some(Err(Error::Cancelled))), "{end:?}");

    let stored = agent.history().load("alice").await.unwrap();
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(stored[1].interrupted);
    assert!(
        stored[1].text().starts_with("Coun"),
        "{:?}",
        stored[1].text()
    );
    assert!(!agent.stop("alice"), "the stopped turn is gone");
    // Another conversation's turn is not touched.
    assert_eq!(
        agent.handle("bob", "/stop").await.unwrap().text,
        "Nothing is running."
    );
}

#[tokio::test(start_paused = true)]
async fn a_steering_message_is_read_after_the_tool_results() {
    let release = Arc::new(tokio::sync::Notify::new());
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("deploy", json!({})))
        .then(MockTurn::new().text("Deployed to production; staging next."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(held(&release))
        .while_busy(WhileBusy::Steer)
        .build();

    let mut events = agent.stream("alice", "deploy it");
    until(&mut events, |e| matches!(e, AgentEvent::ToolCallStarted(_))).await;
    let first = agent.handle("alice", "then staging too").await.unwrap();
    let second = agent
        .handle("alice", TurnRequest::new("and tell me when done"))
        .await
        .unwrap();
    assert!(first.steered && second.steered);
    assert_eq!(first.text, "Added to the running turn.");
    release.notify_one();

    let mut lines = Vec::new();
    while let Some(event) = events.next().await {
        lines.push(event.unwrap().to_string());
    }
    assert!(
        lines.contains(&r#"steered "then staging too\n\nand tell me when done""#.to_owned()),
        "{lines:#?}"
    );
    assert_eq!(
        lines.last().unwrap(),
        r#"done "Deployed to production; staging next.""#
    );

    // The model's second call saw the tool's result, then the one steering message.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = &requests[1].messages;
    let roles: Vec<Role> = sent.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::User]);
    assert!(sent[3].steering);
    assert_eq!(sent[3].text(), "then staging too\n\nand tell me when done");

    let stored = agent.history().load("alice").await.unwrap();
    assert_eq!(stored.len(), 5);
    assert!(stored[3].steering && !stored[3].starts_turn());
    // `/undo` takes back the whole turn, steering included.
    assert_eq!(
        agent.undo("alice").await.unwrap().as_deref(),
        Some("deploy it")
    );
    assert!(agent.history().load("alice").await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_steering_message_after_a_text_answer_is_answered_too() {
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Five, six."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .while_busy(WhileBusy::Steer)
        .build();

    let mut events = agent.stream("alice", "count");
    until(&mut events, |e| matches!(e, AgentEvent::TextDelta(_))).await;
    assert!(agent.handle("alice", "go on to six").await.unwrap().steered);
    let reply = events.into_reply().await.unwrap();
    assert_eq!(reply.text, "Five, six.");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = &requests[1].messages;
    assert_eq!(sent[1].text(), "Counting: one, two, three, four.");
    assert!(!sent[1].interrupted, "the first answer was kept whole");
    assert!(sent[2].steering);
    assert_eq!(last_user(&requests[1]).text(), "go on to six");
    assert_eq!(agent.history().load("alice").await.unwrap().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn with_no_turn_running_a_steering_message_runs_as_a_turn() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("Hello."))
        .while_busy(WhileBusy::Steer)
        .build();
    let reply = agent.handle("alice", "hi").await.unwrap();
    assert!(!reply.steered);
    assert_eq!(reply.text, "Hello.");
}

#[tokio::test(start_paused = true)]
async fn steering_messages_a_stopped_turn_did_not_read_are_kept() {
    let release = Arc::new(tokio::sync::Notify::new());
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("deploy", json!({})))
        .then(MockTurn::new().text("Not deploying."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(held(&release))
        .while_busy(WhileBusy::Steer)
        .build();
    let mut events = agent.stream("alice", "deploy it");
    until(&mut events, |e| matches!(e, AgentEvent::ToolCallStarted(_))).await;
    assert!(
        agent
            .handle("alice", "wait, not on Friday")
            .await
            .unwrap()
            .steered
    );
    assert!(agent.stop("alice"));
    assert!(matches!(events.into_reply().await, Err(Error::Cancelled)));

    let stored = agent.history().load("alice").await.unwrap();
    let kept = stored.last().unwrap();
    assert_eq!(kept.text(), "wait, not on Friday");
    assert!(
        kept.starts_turn() && !kept.steering,
        "kept as the user wrote it"
    );
    // The next turn's model reads it.
    agent.handle("alice", "well?").await.unwrap();
    let sent = &mock.requests()[1].messages;
    assert!(
        sent.iter().any(|m| m.text() == "wait, not on Friday"),
        "{sent:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_interrupting_message_stops_the_turn_and_runs_after_it() {
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Stopped counting."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .while_busy(WhileBusy::Interrupt)
        .build();
    let mut events = agent.stream("alice", "count");
    until(&mut events, |e| matches!(e, AgentEvent::TextDelta(_))).await;
    let reply = agent.handle("alice", "enough").await.unwrap();
    assert_eq!(reply.text, "Stopped counting.");
    assert!(!reply.steered);
    assert!(matches!(events.into_reply().await, Err(Error::Cancelled)));

    let sent = &mock.requests()[1].messages;
    assert_eq!(sent.len(), 3);
    assert!(sent[1].interrupted, "what streamed was kept, marked");
    assert_eq!(sent[2].text(), "enough");
}

#[tokio::test(start_paused = true)]
async fn a_queued_message_waits_for_the_running_turn() {
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Five."));
    // Queue is the default; a request can still ask for it over the agent's mode.
    let agent = Agent::builder()
        .provider(mock.clone())
        .while_busy(WhileBusy::Steer)
        .build();
    let mut events = agent.stream("alice", "count");
    until(&mut events, |e| matches!(e, AgentEvent::TextDelta(_))).await;
    let queued = agent.handle(
        "alice",
        TurnRequest::new("and then?").while_busy(WhileBusy::Queue),
    );
    let (first, queued) = tokio::join!(events.into_reply(), queued);
    assert_eq!(first.unwrap().text, "Counting: one, two, three, four.");
    let queued = queued.unwrap();
    assert_eq!(queued.text, "Five.");
    assert!(!queued.steered);
    let sent = &mock.requests()[1].messages;
    assert_eq!(sent.len(), 3);
    assert!(!sent[1].interrupted);
    assert!(!sent[2].steering);
}

#[tokio::test(start_paused = true)]
async fn queue_is_the_default() {
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Five."));
    let agent = Agent::builder().provider(mock.clone()).build();
    let mut events = agent.stream("alice", "count");
    until(&mut events, |e| matches!(e, AgentEvent::TextDelta(_))).await;
    let (first, second) = tokio::join!(events.into_reply(), agent.handle("alice", "and then?"));
    assert_eq!(first.unwrap().text, "Counting: one, two, three, four.");
    assert_eq!(second.unwrap().text, "Five.");
}
