//! What the app's agent tests share: a model server, a config pointing at
//! it, a turn, and the requests the server got.

use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::text_sse;
use ferrobot_app::{Config, ConfigSource, LoadedConfig};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A model server saying its model's window is `window` (vLLM's
/// `max_model_len`), answering every chat with `Fine.`.
pub(crate) async fn server(window: Option<u32>) -> MockServer {
    let server = MockServer::start().await;
    if let Some(window) = window {
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(ResponseTemplate::new(200).set_body_json(
                json!({"object": "list", "data": [{"id": "m", "max_model_len": window}]}),
            ))
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(text_sse("Fine."), "text/event-stream"),
        )
        .mount(&server)
        .await;
    server
}

/// The config: the model at `server`, the history in `dir`, and `extra`
/// TOML.
pub(crate) fn loaded(server: &MockServer, dir: &std::path::Path, extra: &str) -> LoadedConfig {
    let file = dir.join("ferrobot.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{}/v1\"\nmodel = \"m\"\n[history]\npath = \"history.db\"\n{extra}",
            server.uri()
        ),
    )
    .unwrap();
    Config::load(&ConfigSource::new().file(&file)).unwrap()
}

/// Builds the agent `loaded` describes and runs one turn of chat `c`.
pub(crate) async fn ask(loaded: &LoadedConfig, request: impl Into<ferrobot::agent::TurnRequest>) {
    let decline = |_: ConfirmRequest| async { false };
    let notify = |_: String, _: String| async {};
    let agent = loaded.agent(decline, notify).await.unwrap();
    let reply = agent.handle("c", request).await.unwrap();
    assert_eq!(reply.text, "Fine.");
}

/// The bodies of the chat requests the server got, in order.
pub(crate) async fn chats(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/v1/chat/completions")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// A fresh scratch directory named for the test.
pub(crate) fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrobot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
