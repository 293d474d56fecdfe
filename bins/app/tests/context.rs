//! `[context]`: the agent a config describes sends a bounded part of a long
//! conversation: the window asked of the model server (or configured),
//! compaction before cutting, `max_messages`.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ferrobot::confirm::ConfirmRequest;
use ferrobot::history::{HistoryStore, SqliteHistory};
use ferrobot::message::Message;
use ferrobot::testing::text_sse;
use ferrobot_app::{Config, ConfigSource, LoadedConfig};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A model server saying its model's window is `window` (vLLM's
/// `max_model_len`), answering every chat with `Fine.`.
async fn server(window: Option<u32>) -> MockServer {
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
fn loaded(server: &MockServer, dir: &std::path::Path, extra: &str) -> LoadedConfig {
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

/// `turns` questions and answers of about 10 tokens each, stored in chat `c`.
async fn long_chat(dir: &std::path::Path, turns: usize) {
    let store = SqliteHistory::open(dir.join("history.db")).await.unwrap();
    let mut messages = Vec::new();
    for i in 0..turns {
        messages.push(Message::user(format!(
            "question number {i} about the disks"
        )));
        messages.push(Message::assistant(format!(
            "answer number {i}: they are fine"
        )));
    }
    store.append("c", &messages).await.unwrap();
}

async fn ask(loaded: &LoadedConfig, text: &str) {
    let decline = |_: ConfirmRequest| async { false };
    let notify = |_: String, _: String| async {};
    let agent = loaded.agent(decline, notify).await.unwrap();
    let reply = agent.handle("c", text).await.unwrap();
    assert_eq!(reply.text, "Fine.");
}

/// The bodies of the chat requests the server got, in order.
async fn chats(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/v1/chat/completions")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_chat_is_summarised_to_fit_the_window_the_server_gives() {
    let dir = tempdir("context-window");
    let server = server(Some(2048)).await;
    long_chat(&dir, 150).await;
    let loaded = loaded(&server, &dir, "");
    ask(&loaded, "and now?").await;

    let sent = chats(&server).await;
    assert_eq!(sent.len(), 2, "a summary, then the answer");
    assert!(
        texts(&sent[0])
            .iter()
            .any(|t| t.contains("summarising a conversation")),
        "{:?}",
        texts(&sent[0])
    );
    let answered = texts(&sent[1]);
    assert!(answered.len() < 10, "{answered:?}");
    assert_eq!(answered.last().unwrap(), "and now?");
    // The history keeps every message, and the summary after them.
    let store = SqliteHistory::open(dir.join("history.db")).await.unwrap();
    let kept = store.load("c").await.unwrap();
    assert!(kept.len() > 300);
    assert!(kept.iter().any(|m| m.summary));
    // The next start reads the window from `context_window.json`.
    ask(&loaded, "and then?").await;
    let asked = server.received_requests().await.unwrap();
    let asked = asked.iter().filter(|r| r.url.path() == "/v1/models");
    assert_eq!(asked.count(), 1, "asked once a day");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn without_compaction_only_the_latest_messages_are_sent() {
    let dir = tempdir("context-cut");
    // The server says nothing: the configured window is used.
    let server = server(None).await;
    long_chat(&dir, 150).await;
    let loaded = loaded(
        &server,
        &dir,
        "[context]\nwindow = 100000\nmax_messages = 20\ncompaction = false\n",
    );
    ask(&loaded, "and now?").await;

    let sent = chats(&server).await;
    assert_eq!(sent.len(), 1, "no summary");
    let messages = texts(&sent[0]);
    // The system prompt, then at most 20 messages, ending with the question.
    assert!(messages.len() <= 21, "{}", messages.len());
    assert_eq!(messages.last().unwrap(), "and now?");
    assert!(messages.iter().any(|t| t.starts_with("answer number 149")));
    assert!(!messages.iter().any(|t| t.starts_with("answer number 100:")));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_server_that_says_nothing_leaves_the_fallback_window() {
    let dir = tempdir("context-fallback");
    let server = server(None).await;
    let loaded = loaded(&server, &dir, "");
    let provider = loaded.provider().unwrap();
    let policy = tokio::time::timeout(
        Duration::from_secs(10),
        loaded.context_policy(provider.as_ref()),
    )
    .await
    .unwrap();
    let compaction = policy.compaction.unwrap();
    assert_eq!(
        compaction.context_window,
        ferrobot_app::context::FALLBACK_WINDOW as usize
    );
    assert_eq!(policy.max_messages, Some(200));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_context_section_names_the_key() {
    let dir = tempdir("context-bad");
    let file = dir.join("ferrobot.toml");
    std::fs::write(&file, "[context]\nwindow = 100\n").unwrap();
    let error = Config::load(&ConfigSource::new().file(&file))
        .unwrap_err()
        .to_string();
    assert!(error.contains("`context.window` is 100"), "{error}");
    std::fs::write(&file, "[context]\nmax_messages = 1\n").unwrap();
    let error = Config::load(&ConfigSource::new().file(&file))
        .unwrap_err()
        .to_string();
    assert!(error.contains("`context.max_messages` is 1"), "{error}");
    std::fs::remove_dir_all(&dir).ok();
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrobot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
