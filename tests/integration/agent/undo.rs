//! `/undo` and `Agent::undo`.

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, Message};
use serde_json::json;

use super::echo_tool;

#[tokio::test]
async fn undo_takes_back_the_last_turn_and_says_what_it_took() {
    let mock = MockProvider::new()
        .then(MockTurn::new().text("Noted."))
        .then(MockTurn::new().tool_call("echo", json!({"n": 1})))
        .then(MockTurn::new().text("Echoed."));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    agent.handle("a", "remember the backup host").await.unwrap();
    agent.handle("a", "echo one").await.unwrap();
    assert_eq!(agent.history().load("a").await.unwrap().len(), 6);
    // `/undo` takes back the turn with its tool call and result.
    let reply = agent.handle("a", "/undo").await.unwrap();
    assert_eq!(
        reply.text,
        "Took back the last message (\u{201c}echo one\u{201d}) and its answer. What its tools did is not undone."
    );
    let left = agent.history().load("a").await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(left[0].text(), "remember the backup host");
    assert_eq!(
        agent.undo("a").await.unwrap().as_deref(),
        Some("remember the backup host")
    );
    assert_eq!(
        agent.handle("a", "/undo").await.unwrap().text,
        "Nothing to undo."
    );
    assert!(
        agent
            .handle("a", "/help")
            .await
            .unwrap()
            .text
            .contains("/undo")
    );
}

#[tokio::test]
async fn undo_after_a_compacted_turn_takes_back_the_original_and_the_summary() {
    use ferrobot::history::{Compaction, ContextPolicy};
    let compaction = Compaction::builder().context_window(600).build();
    let instructions = compaction.instructions.clone();
    let mock = MockProvider::from_fn(move |request| {
        if request.system.as_deref() == Some(instructions.as_str()) {
            MockTurn::new().text("They talked at length.")
        } else {
            MockTurn::new().text("ok")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .context(ContextPolicy::builder().compaction(compaction).build())
        .build();
    for topic in ["alpha", "beta"] {
        agent
            .handle("a", &format!("{topic} {}", "w ".repeat(500)))
            .await
            .unwrap();
    }
    let before = agent.history().load("a").await.unwrap();
    agent
        .handle("a", &format!("gamma {}", "w ".repeat(500)))
        .await
        .unwrap();
    let stored = agent.history().load("a").await.unwrap();
    let summaries = |messages: &[Message]| messages.iter().filter(|m| m.summary).count();
    assert!(
        summaries(&stored) > summaries(&before),
        "the last turn compacted"
    );
    let taken = agent.undo("a").await.unwrap().unwrap();
    assert!(taken.starts_with("gamma"), "{taken}");
    let left = agent.history().load("a").await.unwrap();
    assert_eq!(left, before, "back to just before the turn");
}

/// A store that can't truncate.
#[derive(Debug, Default)]
struct AppendOnly(ferrobot::history::MemoryHistory);

impl ferrobot::history::HistoryStore for AppendOnly {
    fn load<'a>(
        &'a self,
        c: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<Message>, ferrobot::history::HistoryError>>
    {
        self.0.load(c)
    }
    fn append<'a>(
        &'a self,
        c: &'a str,
        m: &'a [Message],
    ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.0.append(c, m)
    }
    fn clear<'a>(
        &'a self,
        c: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.0.clear(c)
    }
    fn list(
        &self,
    ) -> futures_util::future::BoxFuture<
        '_,
        Result<Vec<ferrobot::history::ConversationInfo>, ferrobot::history::HistoryError>,
    > {
        self.0.list()
    }
}

#[tokio::test]
async fn undo_on_a_store_that_cannot_truncate_says_so() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .history(AppendOnly::default())
        .build();
    agent.handle("a", "hi").await.unwrap();
    assert_eq!(
        agent.handle("a", "/undo").await.unwrap().text,
        "This conversation's history can't take messages back."
    );
    assert_eq!(
        agent.history().load("a").await.unwrap().len(),
        2,
        "nothing lost"
    );
}
