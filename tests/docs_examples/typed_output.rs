//! The examples of `docs/typed-output.md`.

use ferrobot::Agent;
use ferrobot::testing::{MockProvider, MockTurn};

/// An invoice's essentials.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Invoice {
    /// The invoice number, as printed.
    number: String,
    /// The total, in cents.
    total_cents: u64,
    /// Whether it is paid.
    status: Status,
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Status {
    Paid,
    Due,
}

#[tokio::test]
async fn reads_an_invoice() {
    let mock = MockProvider::new().then(MockTurn::new().output(serde_json::json!({
        "number": "F-2026-17", "total_cents": 4200, "status": "due"
    })));
    let agent = Agent::builder().provider(mock).build();
    let invoice: Invoice = agent
        .extract("alice", "The invoice in this mail: …")
        .await
        .unwrap();
    assert_eq!(invoice.status, Status::Due);
}

/// "Per turn, or every turn".
mod per_turn {
#[tokio::test]
async fn rates_through_the_output_tool() {
    let mock = ferrobot::testing::MockProvider::new()
        .then(ferrobot::testing::MockTurn::new().output(serde_json::json!(4)));
    let agent = ferrobot::Agent::builder().provider(mock.clone()).build();
    rate(&agent).await.unwrap();
    assert_eq!(mock.requests()[0].tool_names(), ["final_uint8"]);
}

use ferrobot::agent::{Output, OutputMode, TurnRequest};

async fn rate(agent: &ferrobot::Agent) -> ferrobot::Result<()> {
    let request = TurnRequest::new("How good was the film, 1 to 5?")
        .user("alice")
        .output(Output::of::<u8>().mode(OutputMode::Tool).retries(1));
    let reply = agent.handle("alice", request).await?;
    println!("{} ({} tokens)", reply.output.unwrap(), reply.usage.output_tokens);
    Ok(())
}
}

/// "Watching it stream".
mod watching {
#[tokio::test]
async fn watches_a_typed_agent() {
    let mock = ferrobot::testing::MockProvider::new()
        .then(ferrobot::testing::MockTurn::new().text(r#"{"days": ["mon"]}"#).chunked(4));
    let agent = ferrobot::Agent::builder()
        .provider(mock.with_native_output(true))
        .output(ferrobot::agent::Output::schema(serde_json::json!({"type": "object", "properties": {"days": {"type": "array", "items": {"type": "string"}}}})).unwrap())
        .build();
    watch(&agent).await;
}

use ferrobot::AgentEvent;
use futures_util::StreamExt;

async fn watch(agent: &ferrobot::Agent) {
    let mut events = agent.stream("alice", "Plan my week.");
    while let Some(Ok(event)) = events.next().await {
        if let AgentEvent::PartialOutput(so_far) = event {
            println!("{so_far}");
        }
    }
}
}

/// "Testing".
mod testing {
use super::Invoice;

use ferrobot::testing::{MockProvider, MockTurn};
use serde_json::json;

#[tokio::test]
async fn a_bad_answer_is_sent_back() {
    let mock = MockProvider::new()
        .then(MockTurn::new().output(json!({"number": "F-1", "total_cents": -5, "status": "due"})))
        .then(MockTurn::new().output(json!({"number": "F-1", "total_cents": 5, "status": "due"})));
    let agent = ferrobot::Agent::builder().provider(mock.clone()).build();
    let invoice: Invoice = agent.extract("alice", "…").await.unwrap();
    assert_eq!(invoice.total_cents, 5);
    let told = mock.requests()[1].messages.last().unwrap().tool_results_iter().next().unwrap().content.clone();
    assert!(told.contains("`total_cents`"));
}
}
