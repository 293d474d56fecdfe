//! The allow-list: a stranger is refused once and reaches nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::testing::MockProvider;
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, STRANGER, start};

#[tokio::test]
async fn a_stranger_is_refused_once_and_reaches_nothing() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let ping = from_fn("ping", "Ping.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "pong" }
    });
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
    assert_eq!(to_stranger.len(), 1, "one refusal: {to_stranger:?}");
    assert!(
        to_stranger[0]["text"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only Ann's /ping ran");
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}
