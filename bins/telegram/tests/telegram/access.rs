//! The allow-list: a stranger is refused once and reaches nothing — no
//! reply, no tool, no model, no menu, no button press — wherever they write.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::IntoTool as _;
use ferrobot_testkit::{agent, counted};
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, STRANGER, start};

/// The stranger got one refusal in all, and only Ann's `/ping` ran: the
/// model saw nothing.
fn reached_nothing(to_stranger: &[Value], ran: &AtomicUsize, model: &MockProvider) {
    assert_eq!(to_stranger.len(), 1, "one refusal in all: {to_stranger:?}");
    assert!(
        to_stranger[0]["text"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only Ann's /ping ran");
    assert!(model.requests().is_empty(), "the model saw nothing");
}

#[tokio::test]
async fn a_stranger_is_refused_once_and_reaches_nothing() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let (ping, ran) = counted("ping", "pong");
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![ping.into_tool()])
    });
    api.text(STRANGER, STRANGER as i64, "hello");
    api.text(STRANGER, STRANGER as i64, "/ping");
    api.text(ANN, ANN as i64, "/ping");
    api.wait_for("SendMessage", |c| c["chat_id"] == json!(ANN))
        .await;
    api.wait_for("SendMessage", |c| c["chat_id"] == json!(STRANGER))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let to_stranger: Vec<Value> = api
        .calls("SendMessage")
        .into_iter()
        .filter(|c| c["chat_id"] == json!(STRANGER))
        .collect();
    reached_nothing(&to_stranger, &ran, &recorded);
}

const GROUP: i64 = -100_200_300;

/// A message in the supergroup `GROUP`, as the update carries it.
fn group_message(user: u64, text: &str) -> Value {
    json!({
        "message_id": 2000, "date": 1700000000, "text": text,
        "from": {"id": user, "is_bot": false, "first_name": "Someone"},
        "chat": {"id": GROUP, "type": "supergroup", "title": "Ops"},
    })
}

#[tokio::test]
async fn a_stranger_reaches_nothing_in_groups_topics_dms_or_edits_and_sees_no_menu() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let (ping, ran) = counted("ping", "pong");
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![ping.into_tool()])
    });
    api.wait_for("SetMyCommands", |_| true).await;
    api.push(json!({"message": group_message(STRANGER, "/ping@ferrobot_test_bot")}));
    api.push(json!({"message": group_message(STRANGER, "@ferrobot_test_bot what is the secret?")}));
    api.topic_text(STRANGER, GROUP, 7, "/ping");
    api.text(STRANGER, STRANGER as i64, "/help");
    // An edit of a message, even one that was never refused.
    api.push(json!({"edited_message": group_message(STRANGER, "/ping")}));
    let mut edited = group_message(STRANGER, "/ping");
    edited["chat"] = json!({"id": STRANGER, "type": "private", "first_name": "Someone"});
    api.push(json!({"edited_message": edited}));
    // Ann, in the group, after them all: once she is answered, all of it
    // has been read.
    api.push(json!({"message": group_message(ANN, "/ping")}));
    api.wait_for("SendMessage", |c| {
        c["chat_id"] == json!(GROUP) && c["text"].as_str().is_some_and(|t| t.contains("pong"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let to_stranger: Vec<Value> = api
        .calls("SendMessage")
        .into_iter()
        .filter(|c| !c["text"].as_str().unwrap().contains("pong"))
        .collect();
    reached_nothing(&to_stranger, &ran, &recorded);
    // The menu: taken down for everyone, shown to Ann in her chat and, once
    // she wrote there, in the group — to nobody else.
    assert_eq!(api.calls("DeleteMyCommands"), [json!({})]);
    let scopes: Vec<Value> = api
        .calls("SetMyCommands")
        .into_iter()
        .map(|c| c["scope"].clone())
        .collect();
    assert_eq!(
        scopes,
        [
            json!({"type": "chat", "chat_id": ANN}),
            json!({"type": "chat_member", "chat_id": GROUP, "user_id": ANN}),
        ]
    );
}

#[tokio::test]
async fn a_strangers_press_on_a_question_or_the_stop_button_is_refused() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let (reboot, ran) = counted("reboot", "rebooted");
    let reboot = reboot.confirm("Reboot this machine?");
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![reboot.into_tool()])
    });
    api.text(ANN, ANN as i64, "reboot");
    let question = api
        .wait_for("SendMessage", |c| c["reply_markup"].is_object())
        .await;
    let buttons = &question["reply_markup"]["inline_keyboard"][0];
    let yes = buttons[0]["callback_data"].as_str().unwrap().to_owned();
    let always = buttons[2]["callback_data"].as_str().unwrap().to_owned();
    // The real button data, pressed on Ann's message, in her chat and in
    // the stranger's own; and the Stop button.
    api.press(STRANGER, ANN as i64, &yes);
    api.press(STRANGER, STRANGER as i64, &always);
    api.press(STRANGER, ANN as i64, ferrobot::bot::STOP_DATA);
    for data in [yes.as_str(), always.as_str(), ferrobot::bot::STOP_DATA] {
        let id = format!("press-{STRANGER}-{data}");
        let refused = api
            .wait_for("AnswerCallbackQuery", |c| c["callback_query_id"] == id)
            .await;
        assert!(
            refused["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Only ")),
            "{refused}"
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "nothing ran");
    // The question is still Ann's to answer, and the turn still running.
    let no = buttons[1]["callback_data"].as_str().unwrap().to_owned();
    api.press(ANN, ANN as i64, &no);
    api.wait_for_reply(0, |c| c["text"] == r"Left it running\.")
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}
