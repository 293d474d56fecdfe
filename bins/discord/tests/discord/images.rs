//! Attachments: an image (PNG, JPEG, GIF or WebP) within the size limit is
//! downloaded from the CDN and reaches the model with the message's text;
//! other files, images too big, and failed downloads are named in the
//! answer.

use std::time::Duration;

use ferrobot::Image;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::{agent, eventually};
use serde_json::{Value, json};
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{ANN, BOT, DM, GUILD, GUILD_CHANNEL, messages_to, start};

/// The first bytes of a JPEG file.
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01";
/// The first bytes of a PNG file.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
const MB: u64 = 1024 * 1024;

/// An attachment as the gateway describes it, its file at
/// `/attachments/NAME` on `cdn`.
fn attachment(cdn: &MockServer, name: &str, content_type: Option<&str>, size: u64) -> Value {
    let url = format!("{}/attachments/{name}?ex=1&is=2&hm=3", cdn.uri());
    let mut attachment = json!({"id": "900000000000000001", "filename": name, "size": size,
                                "url": url, "proxy_url": url});
    if let Some(content_type) = content_type {
        attachment["content_type"] = json!(content_type);
    }
    attachment
}

/// Serves `bytes` at `/attachments/NAME` on `cdn`.
async fn serve(cdn: &MockServer, name: &str, bytes: &[u8]) {
    Mock::given(path(format!("/attachments/{name}")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(bytes.to_vec(), "image/jpeg"))
        .mount(cdn)
        .await;
}

/// The user's message of each request the model got: its text and images.
fn asked(model: &MockProvider) -> Vec<(String, Vec<Image>)> {
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
async fn an_image_attachment_reaches_the_model_with_the_text_and_alone() {
    let model = MockProvider::from_fn(|_| MockTurn::new().text("A cat."));
    let recorded = model.clone();
    let (gateway, rest, server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    serve(&server, "cat.jpg", JPEG).await;
    serve(&server, "chart.png", PNG).await;
    let mut message = gateway.message_data(ANN, DM, None, "what is this?", false);
    message["attachments"] = json!([attachment(
        &server,
        "cat.jpg",
        Some("image/jpeg"),
        JPEG.len() as u64
    )]);
    gateway.dispatch("MESSAGE_CREATE", message);
    rest.wait_for("", |b| b["content"] == "A cat.").await;
    // An image alone: in a DM, and with a bare mention in a server (not
    // taken for a request for help).
    let mut message = gateway.message_data(ANN, DM, None, "", false);
    message["attachments"] = json!([attachment(&server, "chart.png", Some("image/png"), 16)]);
    gateway.dispatch("MESSAGE_CREATE", message);
    let mut message =
        gateway.message_data(ANN, GUILD_CHANNEL, Some(GUILD), &format!("<@{BOT}>"), true);
    message["attachments"] = json!([attachment(&server, "cat.jpg", Some("image/jpeg"), 16)]);
    gateway.dispatch("MESSAGE_CREATE", message);
    rest.wait_for(&messages_to(GUILD_CHANNEL), |b| b["content"] == "A cat.")
        .await;
    eventually(|| (recorded.requests().len() == 3).then_some(()))
        .await
        .unwrap();
    let mut asked = asked(&recorded);
    asked[1..].sort_by_key(|(_, images)| images[0].media_type().map(str::to_owned));
    assert_eq!(
        asked,
        [
            ("what is this?".to_owned(), vec![Image::jpeg(JPEG.to_vec())]),
            (String::new(), vec![Image::jpeg(JPEG.to_vec())]),
            (String::new(), vec![Image::png(PNG.to_vec())]),
        ]
    );
    // The CDN is asked without the bot's token.
    let downloads = server.received_requests().await.unwrap();
    let downloads: Vec<_> = downloads
        .iter()
        .filter(|r| r.url.path().starts_with("/attachments/"))
        .collect();
    assert_eq!(downloads.len(), 3);
    for download in downloads {
        assert!(
            download.headers.get("authorization").is_none(),
            "{download:?}"
        );
    }
}

#[tokio::test]
async fn other_files_and_images_over_the_limit_are_named_and_the_text_still_answered() {
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let (gateway, rest, server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    let mut voice = attachment(&server, "voice-message.ogg", Some("audio/ogg"), 9_000);
    voice["duration_secs"] = json!(3.5);
    voice["waveform"] = json!("AAAA");
    let mut message = gateway.message_data(ANN, DM, None, "summarise these", false);
    message["attachments"] = json!([
        attachment(&server, "report.pdf", Some("application/pdf"), 40_000),
        attachment(&server, "big.png", Some("image/png"), 14 * MB),
        attachment(&server, "notes", None, 300),
        voice,
    ]);
    gateway.dispatch("MESSAGE_CREATE", message);
    let note = rest
        .wait_for(&messages_to(DM), |b| {
            b["content"]
                .as_str()
                .is_some_and(|t| t.contains("didn't reach me"))
        })
        .await;
    assert_eq!(
        note["content"],
        "This didn't reach me: report.pdf (application/pdf), big.png (14 MB, over the 10 MB limit), notes, voice message. I read text and images (PNG, JPEG, GIF or WebP)."
    );
    rest.wait_for("", |b| b["content"] == "Noted.").await;
    assert_eq!(asked(&recorded), [("summarise these".to_owned(), vec![])]);
    let downloads = server.received_requests().await.unwrap();
    assert!(
        downloads
            .iter()
            .all(|r| !r.url.path().starts_with("/attachments/")),
        "nothing was downloaded"
    );
}

#[tokio::test]
async fn a_failed_download_or_bytes_that_are_no_image_are_named_and_the_turn_still_runs() {
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let (gateway, rest, server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    Mock::given(path("/attachments/gone.jpg"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    serve(&server, "fake.png", b"%PDF-1.7 not a png").await;
    serve(&server, "cat.jpg", JPEG).await;
    let mut message = gateway.message_data(ANN, DM, None, "and these?", false);
    message["attachments"] = json!([
        attachment(&server, "gone.jpg", Some("image/jpeg"), 40_000),
        attachment(&server, "fake.png", Some("image/png"), 18),
        attachment(&server, "cat.jpg", Some("image/jpeg"), 16),
    ]);
    gateway.dispatch("MESSAGE_CREATE", message);
    let note = rest
        .wait_for(&messages_to(DM), |b| {
            b["content"]
                .as_str()
                .is_some_and(|t| t.contains("didn't reach me"))
        })
        .await;
    assert!(
        note["content"].as_str().unwrap().starts_with(
            "This didn't reach me: gone.jpg (could not be downloaded), fake.png (not a PNG, JPEG, GIF or WebP image)."
        ),
        "{note}"
    );
    rest.wait_for("", |b| b["content"] == "Noted.").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        asked(&recorded),
        [("and these?".to_owned(), vec![Image::jpeg(JPEG.to_vec())])]
    );
}
