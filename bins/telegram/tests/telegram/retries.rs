//! Errors and retries: flood control is waited out, and a Bot API out of
//! reach at start is tried again until it answers.

use std::sync::Arc;
use std::time::Duration;

use ferrobot::bot::{Channel, serve};
use ferrobot::testing::MockProvider;
use ferrobot_app::{Config, ConfigSource};
use ferrobot_telegram::Telegram;
use ferrobot_testkit::agent;
use serde_json::json;
use wiremock::MockServer;

use crate::support::{ANN, FakeBotApi, TOKEN, start};

#[tokio::test]
async fn flood_control_is_waited_out_and_the_reply_still_arrives() {
    let (api, server) = FakeBotApi::start().await;
    let _bot = start(&server, &[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    });
    // The finished reply is refused once, whether it is sent whole or is the
    // last edit of a draft.
    let flood = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
                       "parameters": {"retry_after": 1}});
    api.fail("SendMessage", true, 429, flood.clone());
    api.fail("EditMessageText", true, 429, flood);
    let asked = std::time::Instant::now();
    api.text(ANN, ANN as i64, "status?");
    api.wait_for_reply(0, |c| c["text"] == r"Fine\.").await;
    assert!(
        asked.elapsed() >= Duration::from_secs(1),
        "waited as told: {:#?}",
        api.0.lock().unwrap().calls
    );
    let attempts: Vec<bool> = api.replies(0).iter().map(|(_, ok)| *ok).collect();
    assert_eq!(attempts, [false, true], "the refused call, then the retry");
}

#[tokio::test]
async fn a_bot_api_out_of_reach_at_start_is_retried_until_it_answers() {
    // A port held but not listened on, yet: connections are refused, and no
    // other test can take it meanwhile.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap();
    let mut settings = Config::load(&ConfigSource::defaults_only())
        .unwrap()
        .config
        .telegram;
    settings.api_url = format!("http://{address}");
    settings.allowed_user_ids = vec![ANN];
    let channel: Arc<dyn Channel> = Arc::new(Telegram::new(&settings, TOKEN).unwrap());
    let bot = tokio::spawn(serve(
        agent(MockProvider::replying("Back."), &channel, vec![]),
        channel,
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!bot.is_finished(), "still trying");
    let listener = socket.listen(64).unwrap().into_std().unwrap();
    let server = MockServer::builder().listener(listener).start().await;
    let api = FakeBotApi::serve(&server).await;
    api.wait_for("SetMyCommands", |_| true).await;
    api.text(ANN, ANN as i64, "there?");
    api.wait_for_reply(0, |c| c["text"] == r"Back\.").await;
}

#[tokio::test]
async fn a_server_error_on_send_or_edit_is_retried_and_the_reply_still_arrives() {
    let (api, server) = FakeBotApi::start().await;
    let _bot = start(&server, &[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    });
    // The finished reply meets a 5xx once, whether it is sent whole or is
    // the last edit of a draft.
    let down = |code: u16| json!({"ok": false, "error_code": code, "description": "Bad Gateway"});
    api.fail("SendMessage", true, 502, down(502));
    api.fail("EditMessageText", true, 500, down(500));
    api.text(ANN, ANN as i64, "status?");
    api.wait_for_reply(0, |c| c["text"] == r"Fine\.").await;
    let attempts: Vec<bool> = api.replies(0).iter().map(|(_, ok)| *ok).collect();
    assert_eq!(attempts, [false, true], "the refused call, then the retry");
}
