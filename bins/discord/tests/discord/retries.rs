//! Errors and retries: a dropped gateway connection is resumed with nothing
//! lost, even mid-turn; rate limits and server errors are waited out; and a
//! platform that keeps failing is given up on without losing the next
//! message.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::{agent, eventually};
use serde_json::{Value, json};

use crate::support::{ANN, DM, messages_to, start};

fn edits_in(channel: &str) -> String {
    format!("PATCH /api/v10/channels/{channel}/messages/")
}

#[tokio::test]
async fn a_dropped_connection_is_resumed_with_nothing_lost_or_answered_twice() {
    let model = MockProvider::from_fn(|request| {
        MockTurn::new().text(format!(
            "Answer to {}",
            request.messages.last().unwrap().text()
        ))
    });
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, DM, None, "one", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Answer to one")
        .await;
    gateway.drop_connection();
    // Sent while the bot is away: delivered on resume.
    gateway.message(ANN, DM, None, "two", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Answer to two")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers: Vec<String> = rest
        .bodies(&messages_to(DM))
        .iter()
        .map(|b| b["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        answers,
        ["Answer to one", "Answer to two"],
        "each answered once"
    );
    let state = gateway.state.lock().unwrap();
    assert_eq!(state.identifies, 1, "resumed, not identified again");
    assert_eq!(state.resumes.len(), 1);
    assert_eq!(state.resumes[0]["session_id"], "session-1");
}

#[tokio::test]
async fn rate_limits_are_waited_out_and_the_reply_still_arrives() {
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    })
    .await;
    rest.fail(
        &messages_to(DM),
        429,
        json!({"message": "You are being rate limited.", "retry_after": 0.5, "global": false}),
    );
    let asked = std::time::Instant::now();
    gateway.message(ANN, DM, None, "status?", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Fine.")
        .await;
    assert!(
        asked.elapsed() >= Duration::from_millis(500),
        "waited as told: {:?} {:?}",
        asked.elapsed(),
        rest.0.lock().unwrap().calls
    );
    assert_eq!(rest.attempts(&messages_to(DM)), [false, true]);
}

#[tokio::test]
async fn a_server_error_on_send_is_retried_and_the_reply_still_arrives() {
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    })
    .await;
    rest.fail(
        &messages_to(DM),
        502,
        json!({"message": "Bad Gateway", "code": 0}),
    );
    gateway.message(ANN, DM, None, "status?", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Fine.")
        .await;
    assert_eq!(rest.attempts(&messages_to(DM)), [false, true]);
}

#[tokio::test]
async fn a_server_error_on_an_edit_is_retried_and_the_reply_still_arrives_whole() {
    const ANSWER: &str = "Disk / has 42.5 GB free, and /home has 3 GB.";
    let model = MockProvider::new().then(
        MockTurn::new()
            .text(ANSWER)
            .chunked(6)
            .delay(Duration::from_millis(60)),
    );
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    rest.fail(
        &edits_in(DM),
        503,
        json!({"message": "Service Unavailable", "code": 0}),
    );
    gateway.message(ANN, DM, None, "disk?", false);
    rest.wait_for(&edits_in(DM), |b| b["content"] == ANSWER)
        .await;
    let edits: Vec<(Value, bool)> = rest
        .0
        .lock()
        .unwrap()
        .calls
        .iter()
        .filter(|(m, p, ..)| format!("{m} {p}").contains(&edits_in(DM)))
        .map(|(.., body, ok)| (body.clone(), *ok))
        .collect();
    assert!(!edits[0].1, "the first edit was refused: {edits:?}");
    assert_eq!(
        edits[1],
        (edits[0].0.clone(), true),
        "and sent again as it was"
    );
    assert!(edits[1..].iter().all(|(_, ok)| *ok), "{edits:?}");
    assert_eq!(
        rest.bodies(&messages_to(DM)).len(),
        1,
        "one message, edited: nothing posted twice"
    );
}

#[tokio::test]
async fn a_platform_that_keeps_failing_is_given_up_on_and_the_next_message_is_answered() {
    let model = MockProvider::from_fn(|request| {
        MockTurn::new().text(format!(
            "Answer to {}",
            request.messages.last().unwrap().text()
        ))
    });
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    // Every try of the first reply meets a 502: its draft and then its
    // finished text, each tried once and retried three times.
    for _ in 0..8 {
        rest.fail(
            &messages_to(DM),
            502,
            json!({"message": "Bad Gateway", "code": 0}),
        );
    }
    gateway.message(ANN, DM, None, "one", false);
    let given_up = eventually(|| (rest.attempts(&messages_to(DM)).len() == 8).then_some(())).await;
    assert!(given_up.is_some(), "{:?}", rest.attempts(&messages_to(DM)));
    gateway.message(ANN, DM, None, "two", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Answer to two")
        .await;
    assert_eq!(
        rest.attempts(&messages_to(DM)),
        [[false; 8].as_slice(), &[true]].concat(),
        "given up after four tries of each; the next reply went out once"
    );
    // The unsent answer was kept: the model saw it before the next message.
    let second = &recorded.requests()[1];
    let texts: Vec<String> = second.messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["one", "Answer to one", "two"]);
}

#[tokio::test]
async fn a_gateway_drop_while_a_turn_runs_loses_nothing() {
    let model = MockProvider::from_fn(|request| {
        MockTurn::new()
            .text(format!(
                "Answer to {}, written slowly.",
                request.messages.last().unwrap().text()
            ))
            .chunked(5)
            .delay(Duration::from_millis(60))
    });
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, DM, None, "one", false);
    // The draft is out: the turn is running.
    rest.wait_for(&messages_to(DM), |_| true).await;
    gateway.drop_connection();
    gateway.message(ANN, DM, None, "two", false);
    for said in ["one", "two"] {
        let answer = format!("Answer to {said}, written slowly.");
        rest.wait_for("PATCH", |b| b["content"] == answer.as_str())
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rest.bodies(&messages_to(DM)).len(),
        2,
        "one message per answer, each finished by edits"
    );
    let state = gateway.state.lock().unwrap();
    assert_eq!(state.identifies, 1, "resumed, not identified again");
    assert_eq!(state.resumes.len(), 1);
}
