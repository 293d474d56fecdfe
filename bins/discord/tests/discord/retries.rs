//! Errors and retries: a dropped gateway connection is resumed with nothing
//! lost, and rate limits are waited out.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::agent;
use serde_json::json;

use crate::support::{ANN, DM, messages_to, start};

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
