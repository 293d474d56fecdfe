//! The examples of `docs/production.md` (feature `sqlite`).

use ferrobot::agent::TurnRequest;
use ferrobot::history::{HistoryStore, Intake, Mark, Stage};

async fn answer_queue(agent: ferrobot::Agent) -> Result<(), Box<dyn std::error::Error>> {
    let store = agent.history().clone();
    // At start: finish what a crash interrupted.
    for intake in store.unfinished().await? {
        let conversation = intake.conversation.clone().unwrap_or_else(|| intake.chat.clone());
        let request = match intake.stage {
            Stage::Received => TurnRequest::new(intake.payload.as_str()).journal(&intake.id),
            _ => TurnRequest::recover(&intake.id),
        };
        let reply = agent.handle(&conversation, request).await?;
        println!("{}", reply.text);
        store.mark(&intake.id, &Mark::Delivered).await?;
    }
    // Each new message: journaled first; one seen before is skipped.
    let intake = Intake::new("myqueue:42", "ann", "what is the disk usage?");
    if store.receive(&intake).await? {
        let request = TurnRequest::new(intake.payload.as_str()).journal(&intake.id);
        let reply = agent.handle("ann", request).await?;
        println!("{}", reply.text);
        store.mark(&intake.id, &Mark::Delivered).await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_queue_recovers_then_answers_each_message_once() -> Result<(), Box<dyn std::error::Error>> {
    use ferrobot::Agent;
    use ferrobot::history::SqliteHistory;
    use ferrobot::testing::{MockProvider, MockTurn};

    let dir = std::env::temp_dir().join(format!("ferrobot-docs-production-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = SqliteHistory::open(dir.join("history.db")).await?;
    // A crash left one message journaled, not run.
    store.receive(&Intake::new("myqueue:41", "bob", "hello")).await?;
    let mock = MockProvider::new()
        .then(MockTurn::new().text("Hello Bob."))
        .then(MockTurn::new().text("12% used."));
    let agent = Agent::builder().provider(mock.clone()).history(store.clone()).build();
    answer_queue(agent.clone()).await?;
    // Run again: both are delivered, nothing runs twice.
    answer_queue(agent).await?;
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(store.load("bob").await?.len(), 2);
    assert!(store.unfinished().await?.is_empty());
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
