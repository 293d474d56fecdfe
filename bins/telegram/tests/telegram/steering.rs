//! A running turn stopped with the Stop button or `/stop`, and a message
//! steered into it.

use std::time::Duration;

use ferrobot::Agent;
use ferrobot::agent::WhileBusy;
use ferrobot::testing::{MockProvider, MockTurn};

use crate::support::{ANN, FakeBotApi, STRANGER, start};

/// An answer that takes about a second to stream.
fn slow_answer() -> MockTurn {
    MockTurn::new()
        .text("Counting slowly: one, two, three, four, five, six, seven.")
        .chunked(4)
        .delay(Duration::from_millis(70))
}

#[tokio::test]
async fn the_stop_button_under_a_draft_stops_the_turn_keeping_what_streamed() {
    let (api, server) = FakeBotApi::start().await;
    let agent = Agent::builder()
        .provider(MockProvider::new().then(slow_answer()))
        .build();
    let history = agent.clone();
    let _bot = start(&server, &[ANN], move |_| agent);
    api.text(ANN, ANN as i64, "count");
    let draft = api
        .wait_for("SendMessage", |c| {
            c["parse_mode"].is_null() && c["text"] != ""
        })
        .await;
    let button = &draft["reply_markup"]["inline_keyboard"][0][0];
    assert_eq!(button["text"], "⏹ Stop");
    // A stranger can't stop it.
    api.press(STRANGER, ANN as i64, "stop");
    let refused = api
        .wait_for("AnswerCallbackQuery", |c| {
            c["callback_query_id"] == format!("press-{STRANGER}-stop")
        })
        .await;
    assert_eq!(
        refused["text"],
        "Only the people this bot answers can stop it."
    );
    api.press(ANN, ANN as i64, button["callback_data"].as_str().unwrap());
    api.wait_for("SendMessage", |c| c["text"] == "Stopped\\.")
        .await;
    // The draft is finished where it stood, without its button.
    let finished = api
        .wait_for("EditMessageText", |c| c["parse_mode"] == "MarkdownV2")
        .await;
    assert!(finished["reply_markup"].is_null(), "{finished}");
    let stored = api
        .wait_until("the interrupted answer stored", || {
            let stored = stored_of(&history);
            (stored.len() == 2).then_some(stored)
        })
        .await;
    assert!(stored[1].interrupted);
    assert!(
        "Counting slowly: one, two, three, four, five, six, seven.".starts_with(&stored[1].text())
    );
    // Nothing said "Cancelled.": the Stop press has its answer.
    assert!(api.calls("SendMessage").iter().all(|c| {
        !c["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Cancelled")
    }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    api.text(ANN, ANN as i64, "/stop");
    api.wait_for("SendMessage", |c| c["text"] == "Nothing is running\\.")
        .await;
}

#[tokio::test]
async fn a_message_sent_while_a_turn_runs_steers_it() {
    let (api, server) = FakeBotApi::start().await;
    let mock = MockProvider::new()
        .then(slow_answer())
        .then(MockTurn::new().text("Eight, nine."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .while_busy(WhileBusy::Steer)
        .build();
    let _bot = start(&server, &[ANN], move |_| agent);
    api.text(ANN, ANN as i64, "count");
    api.wait_for("SendMessage", |c| {
        c["parse_mode"].is_null() && c["text"] != ""
    })
    .await;
    api.text(ANN, ANN as i64, "go on to nine");
    api.wait_for_reply(0, |c| c["text"] == "Added to the running turn\\.")
        .await;
    api.wait_for_reply(0, |c| c["text"] == "Eight, nine\\.")
        .await;
    let requests = mock.requests();
    let steering = requests[1].messages.last().unwrap();
    assert!(steering.steering);
    assert_eq!(steering.text(), "go on to nine");
    // The first answer was finished in its own message, whole.
    api.wait_for_reply(0, |c| {
        c["text"] == "Counting slowly: one, two, three, four, five, six, seven\\."
    })
    .await;
}

/// The stored conversation of Ann's chat, read without awaiting inside a
/// `wait_until` check.
fn stored_of(agent: &Agent) -> Vec<ferrobot::Message> {
    let history = std::sync::Arc::clone(agent.history());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(history.load(&ANN.to_string()))
            .unwrap()
    })
    .join()
    .unwrap()
}
