//! Webhook mode: the bot registers `[telegram] webhook_url` with its secret,
//! takes updates posted to its endpoint only with that secret, answers a
//! request once the message is journaled (a message posted again is
//! answered once), and gathers an album's photos into one message.

use std::time::Duration;

use ferrobot::Image;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_app::Secret;
use ferrobot_testkit::agent;
use serde_json::json;

use crate::images::{JPEG, PNG, asked, photo};
use crate::support::{ANN, FakeBotApi, free_port, post, start_with};

const SECRET: &str = "s3cret_-token";

/// Starts the bot in webhook mode on a free port; that port.
async fn webhook_bot(
    server: &wiremock::MockServer,
    api: &FakeBotApi,
    model: MockProvider,
) -> (u16, tokio::task::JoinHandle<()>) {
    let port = free_port();
    let bot = start_with(
        server,
        &[ANN],
        |settings| {
            settings.webhook_url = Some("https://bot.example.com/hook".into());
            settings.webhook_listen = format!("127.0.0.1:{port}");
            settings.webhook_secret = Some(Secret::new(SECRET));
        },
        |channel| agent(model, &channel, vec![]),
    );
    api.wait_for("setwebhook", |_| true).await;
    // Listening before the webhook is set: ready now.
    (port, bot)
}

fn text_update(id: u64, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"update_id": id, "message": {
        "message_id": id, "date": 1700000000, "text": text,
        "from": {"id": ANN, "is_bot": false, "first_name": "Ann"},
        "chat": {"id": ANN, "type": "private", "first_name": "Ann"},
    }}))
    .unwrap()
}

#[tokio::test]
async fn updates_come_by_webhook_with_the_secret_and_are_answered_once() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Hello."));
    let (port, _bot) = webhook_bot(&server, &api, model.clone()).await;
    // Sent as a form: its fields are in the text.
    let set = api.calls("setwebhook")[0].to_string();
    assert!(set.contains("https://bot.example.com/hook"), "{set}");
    assert!(set.contains(SECRET), "{set}");
    assert!(api.calls("deletewebhook").is_empty(), "polling's reset");

    // Not Telegram's: refused, and nothing reaches the model.
    let update = text_update(1, "hi");
    assert_eq!(post(port, "/hook", None, &update).await, Some(401));
    assert_eq!(post(port, "/hook", Some("guess"), &update).await, Some(401));
    assert_eq!(post(port, "/other", Some(SECRET), &update).await, Some(404));
    assert_eq!(
        post(port, "/hook", Some(SECRET), b"not json").await,
        Some(400)
    );

    assert_eq!(post(port, "/hook", Some(SECRET), &update).await, Some(200));
    api.wait_for_reply(0, |c| c["text"] == r"Hello\.").await;
    // Telegram posting it again (its request timed out): answered once.
    let mark = api.mark();
    assert_eq!(post(port, "/hook", Some(SECRET), &update).await, Some(200));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(api.replies(mark).is_empty(), "{:?}", api.replies(mark));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn an_albums_photos_posted_one_by_one_are_one_message() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Two cats."));
    let (port, _bot) = webhook_bot(&server, &api, model.clone()).await;
    api.file("a", Some(JPEG));
    api.file("b", Some(PNG));
    let photo_update = |id: u64, file: &str, caption: Option<&str>| {
        let mut message = json!({
            "message_id": id, "date": 1700000000, "media_group_id": "album-1",
            "photo": photo(&[(file, 800, 16)]),
            "from": {"id": ANN, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": ANN, "type": "private", "first_name": "Ann"},
        });
        if let Some(caption) = caption {
            message["caption"] = json!(caption);
        }
        serde_json::to_vec(&json!({"update_id": id, "message": message})).unwrap()
    };
    let (first, second) = (
        photo_update(10, "a", Some("compare")),
        photo_update(11, "b", None),
    );
    let (one, two) = tokio::join!(
        post(port, "/hook", Some(SECRET), &first),
        post(port, "/hook", Some(SECRET), &second)
    );
    assert_eq!((one, two), (Some(200), Some(200)));
    api.wait_for_reply(0, |c| c["text"] == r"Two cats\.").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        asked(&model),
        [(
            "compare".to_owned(),
            vec![Image::jpeg(JPEG.to_vec()), Image::png(PNG.to_vec())]
        )]
    );
}
