//! Photos and files: an image (a photo, or a PNG, JPEG, GIF or WebP sent as
//! a file) within the size limit reaches the model with its caption;
//! anything else, too big, or not downloaded is named in the answer.

use std::time::Duration;

use ferrobot::Image;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, start};

/// The first bytes of a JPEG file.
pub(crate) const JPEG: &[u8] = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01";
/// The first bytes of a PNG file.
pub(crate) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
const MB: u64 = 1024 * 1024;

/// A photo's sizes as Telegram sends them: (file id, width, bytes).
pub(crate) fn photo(sizes: &[(&str, u32, u64)]) -> Value {
    sizes
        .iter()
        .map(|&(id, width, size)| {
            json!({"file_id": id, "file_unique_id": format!("u-{id}"),
                   "width": width, "height": width * 3 / 4, "file_size": size})
        })
        .collect()
}

fn document(id: &str, name: &str, mime: &str, size: u64) -> Value {
    json!({"file_id": id, "file_unique_id": format!("u-{id}"),
           "file_name": name, "mime_type": mime, "file_size": size})
}

/// The user's message of each request the model got: its text and images.
pub(crate) fn asked(model: &MockProvider) -> Vec<(String, Vec<Image>)> {
    model
        .requests()
        .iter()
        .map(|request| {
            let message = request.messages.last().unwrap();
            (message.text(), message.images().cloned().collect())
        })
        .collect()
}

#[tokio::test]
async fn a_photo_with_a_caption_reaches_the_model_as_its_text_and_image() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("A cat."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.file("medium", Some(JPEG));
    // A thumbnail, the size within the limit, and one over it.
    let sizes = photo(&[
        ("thumb", 90, 1_500),
        ("medium", 1280, JPEG.len() as u64),
        ("huge", 4000, 12 * MB),
    ]);
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": sizes, "caption": "what is on it?"}),
    );
    api.wait_for_reply(0, |c| c["text"] == r"A cat\.").await;
    assert_eq!(
        asked(&recorded),
        [(
            "what is on it?".to_owned(),
            vec![Image::jpeg(JPEG.to_vec())]
        )]
    );
    let looked_up: Vec<Value> = api
        .calls("GetFile")
        .iter()
        .map(|c| c["file_id"].clone())
        .collect();
    assert_eq!(looked_up, [json!("medium")], "the largest within the limit");
    assert_eq!(api.0.lock().unwrap().downloads, ["photos/medium.jpg"]);
    // No note: everything reached the model.
    assert!(
        api.calls("SendMessage")
            .iter()
            .all(|c| !c["text"].as_str().unwrap().contains("didn't reach me")),
        "{:?}",
        api.calls("SendMessage")
    );
}

#[tokio::test]
async fn an_image_sent_as_a_file_reaches_the_model_and_a_photo_alone_too() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Seen."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.file("doc", Some(PNG));
    api.media(
        ANN,
        ANN as i64,
        json!({"document": document("doc", "screenshot.png", "image/png", PNG.len() as u64),
               "caption": "why is this red?"}),
    );
    api.wait_for_reply(0, |c| c["text"] == r"Seen\.").await;
    // A photo without a caption, in a private chat: the image alone.
    api.file("p", Some(JPEG));
    let before = api.mark();
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("p", 800, JPEG.len() as u64)])}),
    );
    api.wait_for_reply(before, |c| c["text"] == r"Seen\.").await;
    assert_eq!(
        asked(&recorded),
        [
            (
                "why is this red?".to_owned(),
                vec![Image::png(PNG.to_vec())]
            ),
            (String::new(), vec![Image::jpeg(JPEG.to_vec())]),
        ]
    );
}

#[tokio::test]
async fn other_files_are_named_in_the_answer_and_the_caption_still_answered() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.media(
        ANN,
        ANN as i64,
        json!({"document": document("pdf", "report.pdf", "application/pdf", 40_000),
               "caption": "summarise this"}),
    );
    let note = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.contains("didn't reach me"))
        })
        .await;
    assert_eq!(
        note["text"],
        "This didn't reach me: report\\.pdf \\(application/pdf\\)\\. I read text and images \\(PNG, JPEG, GIF or WebP\\)\\."
    );
    api.wait_for_reply(0, |c| c["text"] == r"Noted\.").await;
    assert_eq!(asked(&recorded), [("summarise this".to_owned(), vec![])]);
    // A voice note alone: only the note, the model isn't asked.
    let before = api.mark();
    api.media(
        ANN,
        ANN as i64,
        json!({"voice": {"file_id": "v", "file_unique_id": "u-v", "duration": 4, "mime_type": "audio/ogg"}}),
    );
    let note = unread_note(&api, before).await;
    assert!(
        note.starts_with("This didn't reach me: voice note\\."),
        "{note}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(recorded.requests().len(), 1, "the model saw nothing new");
    assert!(api.calls("GetFile").is_empty(), "nothing was downloaded");
}

#[tokio::test]
async fn an_oversize_photo_or_file_is_named_with_its_size_and_not_downloaded() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("big", 5000, 14 * MB)]), "caption": "look"}),
    );
    let note = unread_note(&api, 0).await;
    assert!(
        note.starts_with("This didn't reach me: photo \\(14 MB, over the 10 MB limit\\)\\."),
        "{note}"
    );
    api.wait_for_reply(0, |c| c["text"] == r"Noted\.").await;
    let before = api.mark();
    api.media(
        ANN,
        ANN as i64,
        json!({"document": document("raw", "raw.png", "image/png", 11 * MB + MB / 2)}),
    );
    let note = unread_note(&api, before).await;
    assert!(
        note.starts_with(
            "This didn't reach me: raw\\.png \\(11\\.5 MB, over the 10 MB limit\\)\\."
        ),
        "{note}"
    );
    assert!(api.calls("GetFile").is_empty(), "nothing was downloaded");
    assert_eq!(asked(&recorded), [("look".to_owned(), vec![])]);
}

#[tokio::test]
async fn a_failed_download_or_bytes_that_are_no_image_are_named_and_the_turn_still_runs() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.file("gone", None);
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("gone", 800, 40_000)]), "caption": "and this?"}),
    );
    let note = unread_note(&api, 0).await;
    assert!(
        note.starts_with("This didn't reach me: photo \\(could not be downloaded\\)\\."),
        "{note}"
    );
    api.wait_for_reply(0, |c| c["text"] == r"Noted\.").await;
    let before = api.mark();
    api.file("fake", Some(b"%PDF-1.7 not a png"));
    api.media(
        ANN,
        ANN as i64,
        json!({"document": document("fake", "shot.png", "image/png", 18), "caption": "and that?"}),
    );
    let note = unread_note(&api, before).await;
    assert!(
        note.starts_with(
            "This didn't reach me: shot\\.png \\(not a PNG, JPEG, GIF or WebP image\\)\\."
        ),
        "{note}"
    );
    api.wait_until("the second answer", || {
        (recorded.requests().len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        asked(&recorded),
        [
            ("and this?".to_owned(), vec![]),
            ("and that?".to_owned(), vec![])
        ]
    );
}

#[tokio::test]
async fn in_a_group_a_photo_is_answered_only_with_a_caption() {
    const GROUP: i64 = -100_555;
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("A chart."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.file("p", Some(JPEG));
    let sizes = photo(&[("p", 800, JPEG.len() as u64)]);
    // Without a caption it is the group's, not the bot's: left alone.
    api.media(ANN, GROUP, json!({"photo": sizes.clone()}));
    api.media(
        ANN,
        GROUP,
        json!({"voice": {"file_id": "v", "file_unique_id": "u-v", "duration": 4}}),
    );
    api.media(
        ANN,
        GROUP,
        json!({"photo": sizes, "caption": "@ferrobot_test_bot what is this?"}),
    );
    let answer = api.wait_for_reply(0, |c| c["text"] == r"A chart\.").await;
    assert_eq!(answer["chat_id"], json!(GROUP));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        asked(&recorded),
        [(
            "@ferrobot_test_bot what is this?".to_owned(),
            vec![Image::jpeg(JPEG.to_vec())]
        )]
    );
    // Answered as a reply to the photo, and nothing said about the others.
    let sent = api.calls("SendMessage");
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["reply_parameters"]["message_id"], json!(1000));
}

#[tokio::test]
async fn an_album_reaches_the_model_as_one_message() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Two cats."));
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.file("a", Some(JPEG));
    api.file("b", Some(PNG));
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("a", 800, 16)]), "caption": "compare", "media_group_id": "album-1"}),
    );
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("b", 800, 16)]), "media_group_id": "album-1"}),
    );
    api.wait_for_reply(0, |c| c["text"] == r"Two cats\.").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        asked(&recorded),
        [(
            "compare".to_owned(),
            vec![Image::jpeg(JPEG.to_vec()), Image::png(PNG.to_vec())]
        )]
    );
}

/// The text of the first finished reply after `after` calls that names what
/// didn't reach the bot.
async fn unread_note(api: &FakeBotApi, after: usize) -> String {
    let note = api
        .wait_for_reply(after, |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.contains("didn't reach me"))
        })
        .await;
    note["text"].as_str().unwrap_or_default().to_owned()
}
