//! The recorded dispatches in `../shared/corpus`, replayed through the fake
//! gateway.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::{agent, recordings};
use serde_json::{Value, json};

use crate::support::{BOT, messages_to, start};

/// Every recorded dispatch (guild messages with and without a mention, a
/// 2017 DM without a gateway envelope, slash commands with options and
/// subcommands, a button press for another bot) is answered or left alone
/// as Discord's rules and the allow-list require.
#[tokio::test]
async fn recorded_dispatches_are_answered_or_left_alone_as_their_kind_requires() {
    let Some(corpus) = recordings("08_discord_gateway") else {
        return;
    };
    let mut recordings: Vec<(String, String, Value, Value)> = Vec::new();
    for (name, response, expected) in corpus {
        let (kind, data) = match response.get("op") {
            Some(_) => (
                response["t"].as_str().unwrap().to_owned(),
                response["d"].clone(),
            ),
            None if expected.get("message").is_some() => ("MESSAGE_CREATE".to_owned(), response),
            None => ("INTERACTION_CREATE".to_owned(), response),
        };
        recordings.push((name, kind, data, expected));
    }
    assert!(recordings.len() >= 9, "{} recordings", recordings.len());
    let authors: Vec<u64> = recordings
        .iter()
        .filter_map(|(.., expected)| {
            let who = expected
                .get("message")
                .map_or(&expected["interaction"]["user"], |m| &m["author"]);
            who["id"].as_str()?.parse().ok()
        })
        .collect();
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&authors, |channel| agent(model, &channel, vec![])).await;
    for (name, kind, data, expected) in recordings {
        eprintln!("replaying {name}");
        match kind.as_str() {
            "READY" => {
                // The fake gateway sends its own READY; this one (API v6,
                // no resume URL) is what an old gateway sent.
                assert_eq!(expected["ready"]["user"]["bot"], true, "{name}");
            }
            "MESSAGE_CREATE" => {
                let message = &expected["message"];
                let channel = message["channel_id"].as_str().unwrap().to_owned();
                let content = message["content"].as_str().unwrap();
                let asked = recorded.requests().len();
                gateway.dispatch("MESSAGE_CREATE", data.clone());
                if message["is_dm"] == false {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    assert!(
                        rest.bodies(&messages_to(&channel)).is_empty(),
                        "{name}: not addressed to the bot"
                    );
                    // The same message, mentioning the bot.
                    let mut mentioned = data.clone();
                    mentioned["content"] = json!(format!("<@{BOT}> {content}"));
                    mentioned["mentions"] = json!([{"id": BOT, "username": "ferrobot", "discriminator": "0", "bot": true}]);
                    gateway.dispatch("MESSAGE_CREATE", mentioned);
                }
                let reply = rest.wait_for(&messages_to(&channel), |_| true).await;
                assert_eq!(reply["content"], "Noted.", "{name}");
                let requests = recorded.requests();
                assert_eq!(requests.len(), asked + 1, "{name}");
                assert_eq!(
                    requests.last().unwrap().messages.last().unwrap().text(),
                    content,
                    "{name}"
                );
            }
            "INTERACTION_CREATE" => {
                let interaction = &expected["interaction"];
                let (id, token) = (
                    interaction["interaction_id"].as_str().unwrap(),
                    data["token"].as_str().unwrap(),
                );
                gateway.dispatch("INTERACTION_CREATE", data.clone());
                let callback = rest
                    .wait_for(&format!("/interactions/{id}/{token}/callback"), |_| true)
                    .await;
                if interaction["type"] == 3 {
                    assert_eq!(callback["type"], 4, "{name}");
                    assert_eq!(
                        callback["data"]["content"], "This button isn't mine to answer.",
                        "{name}"
                    );
                    assert_eq!(callback["data"]["flags"], 64, "{name}");
                } else {
                    assert_eq!(callback["type"], 5, "{name}: deferred");
                    let command = interaction["command"]["name"].as_str().unwrap();
                    let answer = rest
                        .wait_for(
                            &format!(
                                "/webhooks/{}/{token}/messages/@original",
                                interaction["application_id"].as_str().unwrap()
                            ),
                            |_| true,
                        )
                        .await;
                    assert!(
                        answer["content"]
                            .as_str()
                            .unwrap()
                            .starts_with(&format!("Unknown command /{command}")),
                        "{name}: {answer}"
                    );
                }
            }
            other => panic!("{name}: unexpected {other}"),
        }
    }
}
