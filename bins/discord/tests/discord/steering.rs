//! A running turn stopped with the Stop button or `/stop`, and a message
//! steered into it.

use std::sync::Arc;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::agent::WhileBusy;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::eventually;
use serde_json::json;

use crate::support::{ANN, DM, STRANGER, messages_to, start};

const ANSWER: &str = "Counting slowly: one, two, three, four, five, six, seven.";

/// An answer that takes about a second to stream.
fn slow_answer() -> MockTurn {
    MockTurn::new()
        .text(ANSWER)
        .chunked(4)
        .delay(Duration::from_millis(70))
}

fn callback(id: &str) -> String {
    format!("/interactions/{id}/token-{id}/callback")
}

#[tokio::test]
async fn the_stop_button_on_a_reply_being_written_stops_the_turn_keeping_what_streamed() {
    let agent = Agent::builder()
        .provider(MockProvider::new().then(slow_answer()))
        .build();
    let history = agent.clone();
    let (gateway, rest, _server) = start(&[ANN], move |_| agent).await;
    gateway.message(ANN, DM, None, "count", false);
    let draft = rest
        .wait_for(&messages_to(DM), |b| b["components"].is_array())
        .await;
    let button = &draft["components"][0]["components"][0];
    assert_eq!(button["label"], "⏹ Stop");
    let stop = button["custom_id"].as_str().unwrap().to_owned();
    // A stranger can't stop it, and only they see why.
    gateway.press(STRANGER, "900000000000000031", &stop);
    let refused = rest
        .wait_for(&callback("900000000000000031"), |_| true)
        .await;
    assert_eq!(
        refused["data"]["content"],
        "Only the people this bot answers can stop it."
    );
    assert_eq!(refused["data"]["flags"], 64);
    gateway.press(ANN, "900000000000000032", &stop);
    let acknowledged = rest
        .wait_for(&callback("900000000000000032"), |_| true)
        .await;
    assert_eq!(
        acknowledged["type"], 6,
        "acknowledged, the reply left as it is"
    );
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Stopped.")
        .await;
    // The reply is finished where it stood, without its button.
    let finished = rest
        .wait_for("PATCH", |b| b["components"] == json!([]))
        .await;
    let shown = finished["content"].as_str().unwrap();
    assert!(!shown.is_empty() && ANSWER.starts_with(shown), "{shown}");
    let stored = eventually(|| {
        let stored = stored_of(&history);
        (stored.len() == 2).then_some(stored)
    })
    .await
    .expect("the stopped answer is stored");
    assert!(stored[1].interrupted, "{:?}", stored[1]);
    assert!(ANSWER.starts_with(&stored[1].text()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let edits = rest.bodies("PATCH");
    assert_eq!(
        edits.last().unwrap()["components"],
        json!([]),
        "no draft brings the button back: {edits:#?}"
    );
    // Nothing more was said of the stopped turn than "Stopped.".
    let said: Vec<_> = rest
        .bodies(&messages_to(DM))
        .into_iter()
        .map(|b| b["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(said.len(), 2, "the draft and \"Stopped.\": {said:?}");
    gateway.message(ANN, DM, None, "/stop", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Nothing is running.")
        .await;
}

#[tokio::test]
async fn a_message_sent_while_a_turn_runs_steers_it() {
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Eight, nine."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .while_busy(WhileBusy::Steer)
        .build();
    let (gateway, rest, _server) = start(&[ANN], move |_| agent).await;
    gateway.message(ANN, DM, None, "count", false);
    rest.wait_for(&messages_to(DM), |b| b["components"].is_array())
        .await;
    gateway.message(ANN, DM, None, "go on to nine", false);
    rest.wait_for(&messages_to(DM), |b| {
        b["content"] == "Added to the running turn."
    })
    .await;
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Eight, nine.")
        .await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "one turn, two steps");
    let steering = requests[1].messages.last().unwrap();
    assert!(steering.steering, "{steering:?}");
    assert_eq!(steering.text(), "go on to nine");
    // The first answer was finished in its own message, whole, its button gone.
    rest.wait_for("PATCH", |b| {
        b["content"] == ANSWER && b["components"] == json!([])
    })
    .await;
}

/// The stored conversation of Ann's DM, read without awaiting inside an
/// `eventually` check.
fn stored_of(agent: &Agent) -> Vec<ferrobot::Message> {
    let history = Arc::clone(agent.history());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(history.load(DM))
            .unwrap()
    })
    .join()
    .unwrap()
}
