//! Forum supergroups: each topic is its own conversation, answered (and
//! asked for confirmation) in the topic, as replies to the question.

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, start};

#[tokio::test]
async fn in_a_forum_each_topic_is_its_own_conversation_answered_in_the_topic() {
    const FORUM: i64 = -100_777;
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().text("Deploys look fine."))
        .then(MockTurn::new().text("The alerts are quiet."))
        .then(MockTurn::new().tool_call("restart", json!({})))
        .then(MockTurn::new().text("Restarted."));
    let recorded = model.clone();
    let restart = from_fn("restart", "Restart.", |_: Value, _| async { "done" })
        .confirm("Restart the service?");
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![restart.into_tool()])
    });
    api.topic_text(ANN, FORUM, 7, "deploys?");
    let first = api
        .wait_for_reply(0, |c| c["text"] == r"Deploys look fine\.")
        .await;
    api.topic_text(ANN, FORUM, 8, "alerts?");
    api.wait_for_reply(0, |c| c["text"] == r"The alerts are quiet\.")
        .await;
    // Every message of a reply goes to its topic, typing shows there too.
    for call in api
        .calls("SendMessage")
        .iter()
        .chain(&api.calls("SendChatAction"))
    {
        assert_eq!(call["chat_id"], json!(FORUM), "{call}");
        assert!(
            [json!(7), json!(8)].contains(&call["message_thread_id"]),
            "{call}"
        );
    }
    assert_eq!(first["chat_id"], json!(FORUM));
    // In a group the answer is a reply to its question (sent anyway if the
    // question is gone).
    // (The first message of the reply; a finished reply may be an edit of it.)
    assert_eq!(
        api.calls("SendMessage")[0]["reply_parameters"],
        json!({"message_id": 1000, "allow_sending_without_reply": true})
    );
    // Topic 8 is a conversation of its own: it didn't see topic 7's.
    let seen = format!("{:?}", recorded.requests()[1].messages);
    assert!(
        seen.contains("alerts?") && !seen.contains("deploys?"),
        "{seen}"
    );
    // A confirmation is asked in the topic, and a press there answers it.
    api.topic_text(ANN, FORUM, 7, "restart it");
    let question = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Restart the service?"))
        })
        .await;
    assert_eq!(question["message_thread_id"], json!(7));
    let yes = question["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    api.press_on(
        ANN,
        &json!({"id": FORUM, "type": "supergroup", "title": "Ops", "is_forum": true}),
        Some(7),
        &yes,
    );
    api.wait_for_reply(0, |c| {
        c["text"] == r"Restarted\." && c["chat_id"] == json!(FORUM)
    })
    .await;
    let seen = format!("{:?}", recorded.requests()[2].messages);
    assert!(
        seen.contains("deploys?") && !seen.contains("alerts?"),
        "{seen}"
    );
}
