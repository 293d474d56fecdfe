//! `[context]`: the agent a config describes sends a bounded part of a long
//! conversation: the window asked of the model server (or configured),
//! compaction before cutting, `max_messages`.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use ferrobot::history::{HistoryStore, SqliteHistory};
use ferrobot::message::Message;
use ferrobot_app::{Config, ConfigSource};
use serde_json::Value;

use support::{ask, chats, loaded, server, tempdir};

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
