//! Replies: streamed by editing a draft, then formatted; split within
//! Telegram's limit; sent again as plain text when the MarkdownV2 is refused;
//! and what is said to a sticker.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, start};

#[tokio::test]
async fn a_message_is_answered_in_its_chat_streamed_by_edits_then_formatted() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Disk / has **42.5 GB** free.")
            .chunked(6)
            .delay(Duration::from_millis(80)),
    );
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.text(ANN, ANN as i64, "how much disk is left?");
    let done = api
        .wait_for("EditMessageText", |c| c["parse_mode"] == "MarkdownV2")
        .await;
    assert_eq!(done["chat_id"], json!(ANN));
    assert_eq!(done["text"], r"Disk / has *42\.5 GB* free\.");
    // The first words were posted as a plain draft, then edited in place.
    let first = &api.calls("SendMessage")[0];
    assert_eq!(first["chat_id"], json!(ANN));
    assert!(first.get("parse_mode").is_none(), "{first}");
    assert!(
        first.get("reply_parameters").is_none(),
        "no reply threading in a private chat"
    );
    assert!("Disk / has **42.5 GB** free.".starts_with(first["text"].as_str().unwrap()));
    let drafts = api.calls("EditMessageText").len() - 1;
    assert!(drafts >= 1, "edited while streaming");
    assert_eq!(api.calls("SendMessage").len(), 1, "one message, edited");
    assert_eq!(done["message_id"], json!(1));
    let typing = api.calls("SendChatAction");
    assert!(
        typing
            .iter()
            .any(|c| c["action"] == "typing" && c["chat_id"] == json!(ANN))
    );
    assert_eq!(
        recorded.requests()[0].messages[0].text(),
        "how much disk is left?"
    );
}

#[tokio::test]
async fn a_sticker_is_told_what_reaches_the_model_in_a_private_chat_only() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    let sticker = json!({"sticker": {"file_id": "s", "file_unique_id": "u", "type": "regular",
        "width": 512, "height": 512, "is_animated": false, "is_video": false, "emoji": "👍"}});
    api.media(ANN, -100_555, sticker.clone());
    api.media(ANN, ANN as i64, sticker);
    let note = api.wait_for("SendMessage", |_| true).await;
    assert_eq!(note["chat_id"], json!(ANN));
    assert_eq!(
        note["text"],
        "This didn't reach me: sticker\\. I read text and images \\(PNG, JPEG, GIF or WebP\\)\\."
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        api.calls("SendMessage").len(),
        1,
        "nothing said in the group"
    );
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}

/// Telegram's length of a MarkdownV2 text: what shows, escapes and entity
/// markers left out (enough for the text these tests send).
fn shown_len(markdown_v2: &str) -> usize {
    let mut shown = String::new();
    let mut chars = markdown_v2.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => shown.extend(chars.next()),
            '`' | '*' | '_' => {}
            c => shown.push(c),
        }
    }
    shown.encode_utf16().count()
}

#[tokio::test]
async fn a_long_reply_is_split_within_the_limit_without_breaking_code_blocks() {
    let (api, server) = FakeBotApi::start().await;
    let code = "let size = disk.available(); // 🚀\n".repeat(120);
    let prose = "Everything looks fine on this machine, nothing to worry about. ".repeat(60);
    let reply = format!("{prose}\n\n```rust\n{code}```\n\n{prose}That is all.");
    let _bot = start(&server, &[ANN], |channel| {
        agent(MockProvider::replying(reply.clone()), &channel, vec![])
    });
    api.text(ANN, ANN as i64, "report");
    // Wait for the last words, then check every finished piece.
    api.wait_for_reply(0, |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.ends_with(r"That is all\."))
    })
    .await;
    let pieces: Vec<String> = api
        .replies(0)
        .iter()
        .map(|(c, _)| c["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(pieces.len() >= 3, "{} pieces", pieces.len());
    for piece in &pieces {
        assert!(
            shown_len(piece) <= 4096,
            "a piece of {} units",
            shown_len(piece)
        );
        assert_eq!(
            piece.matches("```").count() % 2,
            0,
            "code fences balanced in {piece:.80}…"
        );
    }
    let code_pieces = pieces.iter().filter(|p| p.contains("```rust\n")).count();
    assert!(
        code_pieces >= 2,
        "the code block is reopened in the next message"
    );
    assert!(
        pieces.iter().all(|p| !p.contains('\u{FFFD}')),
        "no emoji cut in half"
    );
}

#[tokio::test]
async fn markdown_telegram_rejects_is_sent_again_as_plain_text() {
    let (api, server) = FakeBotApi::start().await;
    let ping = from_fn("ping", "Ping.", |_: Value, _| async { "pong *unbalanced" });
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Streamed *answer")
            .chunked(4)
            .delay(Duration::from_millis(60)),
    );
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![ping.into_tool()])
    });
    let refusal = json!({"ok": false, "error_code": 400,
        "description": "Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 5"});
    // A whole reply (a slash command's) is sent…
    api.fail("SendMessage", true, 400, refusal.clone());
    api.text(ANN, ANN as i64, "/ping");
    let plain = api
        .wait_for("SendMessage", |c| c["text"] == "```\npong *unbalanced\n```")
        .await;
    assert!(plain.get("parse_mode").is_none());
    // …and a streamed one is edited, in plain text. (Were it finished before
    // a draft was shown, it would be sent whole: that is refused too.)
    api.fail("EditMessageText", true, 400, refusal.clone());
    api.fail("SendMessage", true, 400, refusal);
    let before = api.mark();
    api.text(ANN, ANN as i64, "hi");
    api.wait_until("plain text after the refused Markdown", || {
        let calls = api.0.lock().unwrap().calls[before..].to_vec();
        let refused = calls
            .iter()
            .position(|(_, c, ok)| !ok && c["parse_mode"] == "MarkdownV2")?;
        calls[refused + 1..]
            .iter()
            .any(|(_, c, ok)| {
                *ok && c["text"] == "Streamed *answer"
                    && c.get("parse_mode").is_none()
                    && c["chat_id"] == json!(ANN)
            })
            .then_some(())
    })
    .await;
}
