//! Secrets stay secret: a whole bot session — a tool round, a failed model
//! call, a recorded session, traces, the panel — run with a distinctive API
//! key and bot token, then every place a secret could leak searched: the
//! log on stderr and in files, the traces, the history file, the session
//! and its cassette, the runtime file, the panel's config view. Neither
//! appears anywhere.

use std::path::Path;

use ferrobot::testing::OpenAiStream;
use ferrobot_testkit::{Home, text_answer};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{ANN, BIN, FakeBotApi, runtime};

const API_KEY: &str = "sk-LEAK-CANARY-7f3a9c";
const BOT_TOKEN: &str = "424242:LEAK-CANARY-bot-9d1e";

/// Every file under `dir`, as bytes.
fn files(dir: &Path, into: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, into);
        } else if let Ok(bytes) = std::fs::read(&path) {
            into.push((path.display().to_string(), bytes));
        }
    }
}

/// `GET path` on the panel with its token; the body.
async fn panel_get(port: u16, token: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn neither_the_api_key_nor_the_bot_token_appears_anywhere() {
    let (api, server) = FakeBotApi::start().await;
    // A tool round, then a refusal that quotes the key back, as some
    // servers' "invalid API key" answers do.
    let model = wiremock::MockServer::start().await;
    let answers = std::sync::Mutex::new(std::collections::VecDeque::from([
        wiremock::ResponseTemplate::new(200).set_body_raw(
            OpenAiStream::new()
                .tool_call("call_1", "uptime", &json!({}))
                .into_sse(),
            "text/event-stream",
        ),
        wiremock::ResponseTemplate::new(200)
            .set_body_raw(text_answer("Up a while."), "text/event-stream"),
    ]));
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(move |_: &wiremock::Request| {
            answers.lock().unwrap().pop_front().unwrap_or_else(|| {
                wiremock::ResponseTemplate::new(401).set_body_json(json!({"error": {
                    "message": format!("Incorrect API key provided: {API_KEY}.")
                }}))
            })
        })
        .mount(&model)
        .await;
    let home = Home::new("telegram-secrets");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", BOT_TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
                ("FERROBOT_LLM__API_KEY", API_KEY.into()),
                ("FERROBOT_LOGGING__TRACES", "true".into()),
                (
                    "FERROBOT_SESSION",
                    home.path().join("session.json").display().to_string(),
                ),
                ("FERROBOT_LOG", "debug".into()),
            ],
        )
        .spawn()
        .unwrap();
    api.text(ANN, ANN as i64, "how long have you been up?");
    api.wait_for_reply(0, |c| c["text"] == r"Up a while\.")
        .await;
    // The next turn is refused, and the chat told.
    api.text(ANN, ANN as i64, "and now?");
    api.wait_for_reply(0, |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("LLM unavailable"))
    })
    .await;
    // The panel's config view, with the process's token.
    let runtime = runtime(&home).await;
    let config = panel_get(
        runtime.port.unwrap(),
        runtime.token.as_deref().unwrap(),
        "/api/config",
    )
    .await;
    assert!(
        config.contains("200 OK") && config.contains("api_key"),
        "{config}"
    );
    let status = panel_get(
        runtime.port.unwrap(),
        runtime.token.as_deref().unwrap(),
        "/api/status",
    )
    .await;
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();

    let mut places = vec![
        ("stderr".to_owned(), output.stderr),
        ("stdout".to_owned(), output.stdout),
        ("panel /api/config".to_owned(), config.into_bytes()),
        ("panel /api/status".to_owned(), status.into_bytes()),
    ];
    files(home.path(), &mut places);
    let names: Vec<&str> = places.iter().map(|(n, _)| n.as_str()).collect();
    // The places worth searching are there.
    for wanted in [
        "traces.jsonl",
        "history.db",
        "session.json",
        "session.model.json",
        "logs",
    ] {
        assert!(
            names.iter().any(|n| n.contains(wanted)),
            "no {wanted} among {names:?}"
        );
    }
    for (place, bytes) in &places {
        for secret in [API_KEY, BOT_TOKEN, "LEAK-CANARY"] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} leaked into {place}"
            );
        }
    }
}
