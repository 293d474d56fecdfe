//! The examples of `docs/history.md` (feature `sqlite`).

/// Compiled, not run: it needs a PostgreSQL server (tests/integration/postgres.rs
/// runs the store against one).
#[cfg(feature = "postgres")]
#[allow(dead_code)]
async fn postgres_store() -> Result<(), Box<dyn std::error::Error>> {
    use ferrobot::Agent;
    use ferrobot::history::PostgresHistory;
    use ferrobot::testing::MockProvider;

    let url = std::env::var("DATABASE_URL")?; // postgres://bot:secret@db.internal/ferrobot
    let store = PostgresHistory::connect_with(&url, 8).await?;
    let agent = Agent::builder().provider(MockProvider::replying("Noted.")).history(store).build();
    agent.handle("alice", "The backup server is backup-02.").await?;
    Ok(())
}

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

#[tokio::test]
async fn images_are_stored_apart_and_sent_as_the_policy_says() -> Result<(), Box<dyn std::error::Error>> {
    let photos = std::env::temp_dir().join("ferrobot-docs-images");
    let _ = std::fs::remove_dir_all(&photos);
    std::fs::create_dir_all(&photos)?;
    std::fs::write(photos.join("photo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")?;
    use ferrobot::agent::{ImagePolicy, TurnRequest};
    use ferrobot::history::{HistoryStore, SqliteHistory};
    use ferrobot::testing::MockProvider;
    use ferrobot::{Agent, Image};

    let dir = std::env::temp_dir().join("ferrobot-docs-images");
    let store = SqliteHistory::open(dir.join("images.db")).await?;
    let agent = Agent::builder()
        .provider(MockProvider::replying("A lighthouse."))
        .history(store.clone())
        .images(ImagePolicy::Recent(2))
        .build();
    let photo = Image::read(dir.join("photo.png"))?;
    agent.handle("alice", TurnRequest::new("What is this?").image(photo)).await?;

    // The store names the image; its bytes are read only when asked for.
    let messages = store.load("alice").await?;
    let Some(Image::Stored { id, .. }) = messages[0].images().next() else { panic!() };
    assert_eq!(store.load_image(id).await?.media_type(), Some("image/png"));
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
