//! Cancelled turns: while waiting for a lock, mid-answer, mid-tool.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::agent::Status;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, AgentEvent, Error, Role};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{counted, echo_tool};

#[tokio::test(start_paused = true)]
async fn a_turn_cancelled_as_the_tools_lock_comes_free_does_not_start_its_tool() {
    // Ten times: without the check after the lock, the tool would start
    // about every other time.
    for _ in 0..10 {
        let release = Arc::new(tokio::sync::Notify::new());
        let hold = Arc::clone(&release);
        let solo = from_fn("solo", "Solo.", move |_: Value, _| {
            let hold = Arc::clone(&hold);
            async move { hold.notified().await }
        })
        .exclusive(true);
        let (count, ran) = counted("count");
        let mock = MockProvider::from_fn(|request| {
            let first = &request.messages[0];
            match (request.messages.len(), first.text().as_str()) {
                (1, "hold") => MockTurn::new().tool_call("solo", json!({})),
                (1, _) => MockTurn::new().tool_call("count", json!({})),
                _ => MockTurn::new().text("done"),
            }
        });
        let agent = Agent::builder()
            .provider(mock)
            .tool(solo)
            .tool(count)
            .build();
        let holding = tokio::spawn(agent.stream("a", "hold").into_reply());
        tokio::time::sleep(Duration::from_millis(30)).await;
        let waiting = agent.stream("b", "count");
        let stop = waiting.cancellation();
        let waiting = tokio::spawn(waiting.into_reply());
        tokio::time::sleep(Duration::from_millis(30)).await;
        // The lock comes free first, then the turn is cancelled, before
        // either task runs again.
        release.notify_one();
        stop.cancel();
        assert!(matches!(waiting.await.unwrap(), Err(Error::Cancelled)));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "the cancelled turn's tool never ran"
        );
        holding.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_turn_waiting_for_another_conversations_exclusive_tool_can_be_cancelled() {
    let release = Arc::new(tokio::sync::Notify::new());
    let hold = Arc::clone(&release);
    let solo = from_fn("solo", "Solo.", move |_: Value, _| {
        let hold = Arc::clone(&hold);
        async move { hold.notified().await }
    })
    .exclusive(true);
    let mock = MockProvider::from_fn(|request| {
        if request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::User)
        {
            let tool = if request.messages[0].text() == "hold" {
                "solo"
            } else {
                "echo"
            };
            MockTurn::new().tool_call(tool, json!({}))
        } else {
            MockTurn::new().text("done")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(solo)
        .tool(echo_tool("echo"))
        .build();
    let holding = agent.stream("a", "hold");
    let holding = tokio::spawn(holding.into_reply());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiting = agent.stream("b", "wait");
    let stop = waiting.cancellation();
    let waiting = tokio::spawn(waiting.into_reply());
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the cancelled turn ends without waiting for `solo`")
        .unwrap();
    assert!(matches!(ended, Err(Error::Cancelled)), "{ended:?}");
    release.notify_one();
    assert_eq!(holding.await.unwrap().unwrap().text, "done");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_turn_keeps_what_streamed_marked_interrupted() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text("one two three four five")
            .chunked(4)
            .delay(Duration::from_millis(20)),
    );
    let agent = Agent::builder().provider(mock).build();
    let mut stream = agent.stream("a", "count");
    let cancel = stream.cancellation();
    let mut seen = String::new();
    let end = loop {
        match stream.next().await.unwrap() {
            Ok(AgentEvent::TextDelta(t)) => {
                seen.push_str(&t);
                cancel.cancel();
            }
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(matches!(end, Error::Cancelled));
    let stored = agent.history().load("a").await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored[1].interrupted);
    assert_eq!(stored[1].text(), seen);
}

#[tokio::test]
async fn cancelling_during_a_tool_keeps_call_and_result_paired() {
    let mock = MockProvider::new().then(MockTurn::new().tool_call("slow", json!({})));
    let slow = from_fn("slow", "Sleeps.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await
    });
    let agent = Agent::builder().provider(mock).tool(slow).build();
    let mut stream = agent.stream("a", "go");
    let cancel = stream.cancellation();
    while let Some(event) = stream.next().await {
        match event {
            Ok(AgentEvent::Status(Status::RunningTool { .. })) => cancel.cancel(),
            Ok(_) => {}
            Err(e) => {
                assert!(matches!(e, Error::Cancelled));
                break;
            }
        }
    }
    let stored = agent.history().load("a").await.unwrap();
    let result = stored
        .last()
        .unwrap()
        .tool_results_iter()
        .next()
        .unwrap()
        .clone();
    assert_eq!(result.call_id, stored[1].tool_calls().next().unwrap().id);
    assert!(result.is_error && result.content.starts_with("Interrupted"));
}

/// A turn whose model has gone quiet is stopped at once, also when another
/// task polls it than the one that started it: the turn looks at its
/// cancellation only while the stream waits, and must be woken by a stop.
#[tokio::test(start_paused = true)]
async fn a_turn_waiting_on_a_silent_model_stops_at_once_whichever_task_polls_it() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text("one two")
            .chunked(4)
            .delay(Duration::from_secs(60)),
    );
    let agent = Arc::new(Agent::builder().provider(mock).build());
    let mut turn = Box::pin({
        let agent = Arc::clone(&agent);
        async move { agent.handle("a", "count").await }
    });
    // Started here, waiting for the model's first words...
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut turn)
            .await
            .is_err()
    );
    // ...then polled by a task of its own.
    let started = tokio::time::Instant::now();
    let turn = tokio::spawn(turn);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(agent.stop("a"));
    let ended = turn.await.unwrap();
    assert!(matches!(ended, Err(Error::Cancelled)), "{ended:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "stopped after {:?}, not when asked",
        started.elapsed()
    );
}
