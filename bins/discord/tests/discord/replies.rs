//! Replies: a DM answered by editing a draft, a mention in a server answered
//! as a reply, a long answer split at 2,000 characters, and what is said to
//! a sticker.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::agent;
use serde_json::json;

use crate::support::{ANN, BOT, DM, GUILD, GUILD_CHANNEL, messages_to, start};

#[tokio::test]
async fn a_dm_is_answered_streamed_by_edits_with_typing_first() {
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Disk / has **42.5 GB** free.")
            .chunked(6)
            .delay(Duration::from_millis(80)),
    );
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, DM, None, "how much disk is left?", false);
    let done = rest
        .wait_for("PATCH", |b| b["content"] == "Disk / has **42.5 GB** free.")
        .await;
    assert_eq!(
        done["content"], "Disk / has **42.5 GB** free.",
        "Discord reads Markdown as is"
    );
    let posted = rest.bodies(&messages_to(DM));
    assert_eq!(posted.len(), 1, "one message, edited: {posted:?}");
    assert!(
        posted[0].get("message_reference").is_none(),
        "no reply in a DM"
    );
    assert!("Disk / has **42.5 GB** free.".starts_with(posted[0]["content"].as_str().unwrap()));
    let edits = rest
        .calls()
        .into_iter()
        .filter(|(m, p, _)| {
            m == "PATCH" && p.starts_with(&format!("/api/v10/channels/{DM}/messages/"))
        })
        .count();
    assert!(edits >= 2, "edited while streaming, then finished");
    assert!(
        !rest
            .bodies(&format!("POST /api/v10/channels/{DM}/typing"))
            .is_empty()
    );
    assert_eq!(
        recorded.requests()[0].messages[0].text(),
        "how much disk is left?"
    );
}

#[tokio::test]
async fn in_a_server_only_mentions_are_answered_with_the_mention_stripped() {
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Pong."));
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, GUILD_CHANNEL, Some(GUILD), "just chatting", false);
    gateway.message(
        ANN,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> ping?"),
        true,
    );
    let answer = rest
        .wait_for(&messages_to(GUILD_CHANNEL), |b| b["content"] == "Pong.")
        .await;
    // A reply to the message that asked, sent anyway if it was deleted.
    let reference = &answer["message_reference"];
    assert_eq!(reference["channel_id"], GUILD_CHANNEL, "{answer}");
    assert!(reference["message_id"].as_str().is_some(), "{answer}");
    assert_eq!(reference["fail_if_not_exists"], false, "{answer}");
    assert_eq!(
        answer["allowed_mentions"],
        json!({"parse": []}),
        "nobody is pinged, the author included: {answer}"
    );
    let asked = recorded.requests();
    assert_eq!(asked.len(), 1, "the unmentioned message was left alone");
    assert_eq!(asked[0].messages.last().unwrap().text(), "ping?");
}

#[tokio::test]
async fn a_long_reply_is_split_at_2000_characters_without_breaking_code_blocks() {
    let code = "let size = disk.available(); // 🚀\n".repeat(80);
    let prose = "Everything looks fine on this machine, nothing to worry about. ".repeat(30);
    let reply = format!("{prose}\n\n```rust\n{code}```\n\n{prose}That is all.");
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        agent(MockProvider::replying(reply.clone()), &channel, vec![])
    })
    .await;
    gateway.message(ANN, DM, None, "report", false);
    rest.wait_for("", |b| {
        b["content"]
            .as_str()
            .is_some_and(|t| t.trim_end().ends_with("That is all."))
    })
    .await;
    let posted = rest.bodies(&messages_to(DM));
    assert!(posted.len() >= 3, "{} messages", posted.len());
    let finished: Vec<String> = rest
        .calls()
        .into_iter()
        .filter(|(m, ..)| m == "PATCH")
        .map(|(.., b)| b["content"].as_str().unwrap().to_owned())
        .collect();
    for piece in posted
        .iter()
        .map(|b| b["content"].as_str().unwrap().to_owned())
        .chain(finished)
    {
        assert!(
            piece.chars().count() <= 2000,
            "a piece of {}",
            piece.chars().count()
        );
        assert_eq!(
            piece.matches("```").count() % 2,
            0,
            "fences balanced in {piece:.60}…"
        );
    }
}

#[tokio::test]
async fn a_sticker_alone_in_a_dm_is_told_what_reaches_the_model() {
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    // A pin is Discord's announcement, not a message to answer.
    let mut pin = gateway.message_data(ANN, DM, None, "", false);
    pin["type"] = json!(6);
    gateway.dispatch("MESSAGE_CREATE", pin);
    let mut sticker = gateway.message_data(ANN, DM, None, "", false);
    sticker["sticker_items"] =
        json!([{"id": "749054660769218631", "name": "Wave", "format_type": 1}]);
    gateway.dispatch("MESSAGE_CREATE", sticker);
    let note = rest.wait_for(&messages_to(DM), |_| true).await;
    assert_eq!(
        note["content"],
        "This didn't reach me: sticker. I read text and images (PNG, JPEG, GIF or WebP)."
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        rest.bodies(&messages_to(DM)).len(),
        1,
        "the pin is left alone"
    );
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}
