//! The recorded updates in `../shared/corpus`, replayed through the fake
//! Bot API.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::{agent, recordings};
use serde_json::Value;

use crate::support::{FakeBotApi, start};

/// Every recorded update (messages in private chats and supergroups, a
/// 2017 payload without `is_bot`, service messages, button presses for
/// other bots) is answered or left alone as its kind requires.
#[tokio::test]
async fn recorded_updates_are_answered_or_left_alone_as_their_kind_requires() {
    let Some(corpus) = recordings("07_telegram_updates") else {
        return;
    };
    let mut recordings: Vec<(String, Vec<Value>, Vec<Value>)> = Vec::new();
    for (name, response, expected) in corpus {
        let raw = match response.get("result") {
            Some(Value::Array(updates)) => updates.clone(),
            _ => vec![response],
        };
        let wanted = match expected.get("updates") {
            Some(Value::Array(updates)) => updates.clone(),
            _ => vec![expected["update"].clone()],
        };
        assert_eq!(raw.len(), wanted.len());
        recordings.push((name, raw, wanted));
    }
    assert!(recordings.len() >= 8, "{} recordings", recordings.len());
    let allowed: Vec<u64> = recordings
        .iter()
        .flat_map(|(_, _, wanted)| wanted.iter().filter_map(|u| u["from"]["id"].as_u64()))
        .collect();
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let _bot = start(&server, &allowed, |channel| agent(model, &channel, vec![]));
    for (name, raw, wanted) in recordings {
        for (update, wanted) in raw.into_iter().zip(wanted) {
            let before = (api.mark(), recorded.requests().len());
            eprintln!("replaying {name}");
            api.push(update);
            match (wanted["kind"].as_str(), wanted["text"].as_str()) {
                (Some("message"), Some(text)) => {
                    let chat = wanted["chat"]["id"].clone();
                    let reply = api.wait_for_reply(before.0, |c| c["chat_id"] == chat).await;
                    if text.starts_with('/') {
                        // A command this bot doesn't have: answered without the model.
                        assert!(
                            reply["text"].as_str().unwrap().contains("Unknown command"),
                            "{name}: {reply}"
                        );
                    } else {
                        assert_eq!(reply["text"], r"Noted\.", "{name}");
                        let asked = recorded.requests();
                        assert_eq!(asked.len(), before.1 + 1, "{name}");
                        assert_eq!(
                            asked.last().unwrap().messages.last().unwrap().text(),
                            text,
                            "{name}"
                        );
                    }
                }
                (Some("message"), None) => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    assert_eq!(
                        api.mark(),
                        before.0,
                        "{name}: a service message is left alone"
                    );
                }
                (Some("callback_query"), _) => {
                    let id = wanted["callback_query_id"].clone();
                    let answer = api
                        .wait_for("AnswerCallbackQuery", |c| c["callback_query_id"] == id)
                        .await;
                    assert_eq!(
                        answer["text"], "This button isn't mine to answer.",
                        "{name}"
                    );
                }
                other => panic!("{name}: unexpected kind {other:?}"),
            }
        }
    }
}
