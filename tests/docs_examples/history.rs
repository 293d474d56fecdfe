//! The examples of `docs/history.md` (feature `sqlite`).

#[tokio::test]
async fn sqlite_store_survives_a_restart_and_searches() -> Result<(), Box<dyn std::error::Error>> {
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join("ferrobot-docs-history"));
    use ferrobot::Agent;
    use ferrobot::history::{HistoryStore, SqliteHistory};
    use ferrobot::testing::MockProvider;

    let dir = std::env::temp_dir().join("ferrobot-docs-history");
    let store = SqliteHistory::open(dir.join("history.db")).await?;
    let agent = Agent::builder().provider(MockProvider::replying("Noted.")).history(store.clone()).build();
    agent.handle("alice", "The backup server is backup-02.").await?;

    // After a restart, the same file continues the conversation.
    let reopened = SqliteHistory::open(dir.join("history.db")).await?;
    assert_eq!(reopened.load("alice").await?.len(), 2);

    let hits = store.search("backup server", 5).await?;
    assert_eq!(hits[0].conversation, "alice");
    assert_eq!(hits[0].snippet, "The [backup] [server] is [backup]-02.");
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// Only shows the builder, so compiled, not run; compaction itself is tested
/// in tests/integration/context.rs.
#[allow(dead_code)]
fn a_context_policy_with_compaction() {
    use ferrobot::Agent;
    use ferrobot::history::{Compaction, ContextPolicy};
    use ferrobot::testing::MockProvider;

    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .context(
            ContextPolicy::builder()
                .max_tokens(24_000)
                .compaction(Compaction::builder().context_window(32_000).build())
                .build(),
        )
        .build();
    let _ = agent;
}

#[test]
fn an_estimator_from_a_closure() {
    use ferrobot::Message;
    use ferrobot::history::ContextPolicy;

    let policy = ContextPolicy::builder()
        .max_tokens(8_000)
        .estimator(|message: &Message| message.text().split_whitespace().count() * 4 / 3 + 4)
        .build();
    assert_eq!(policy.max_tokens, Some(8_000));
}
