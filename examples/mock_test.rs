//! Run with: cargo run --example mock_test
//!
//! Tests an agent fully offline: `MockProvider` plays the model from a
//! script, and records what the agent sent it. Each check prints what it
//! asserted; the same code works in a `#[tokio::test]`.
#![allow(
    clippy::doc_markdown,
    reason = "the first line is a command to copy, written like every example's"
)]

use ferrobot::agent::ToolOutcome;
use ferrobot::provider::ProviderError;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, AgentEvent, Error};
use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Arguments of `add`.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first operand.
    a: i64,
    /// The second operand.
    b: i64,
}

/// Arguments of `delete_file`.
#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// Path of the file.
    path: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ferrobot::Result<()> {
    tool_call_round_trip().await?;
    streamed_text_arrives_in_pieces().await?;
    confirmation_fails_closed().await?;
    bad_arguments_go_back_to_the_model().await?;
    provider_failure_is_a_typed_error().await;
    slash_commands_skip_the_model().await?;
    println!("all checks passed");
    Ok(())
}

fn add() -> ferrobot::tool::FnTool {
    from_fn(
        "add",
        "Add two integers.",
        |args: AddArgs, _ctx| async move { args.a + args.b },
    )
}

/// The model calls `add`, reads its result, and answers.
async fn tool_call_round_trip() -> ferrobot::Result<()> {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
        .then(MockTurn::new().text("2 + 3 = 5"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Use tools for arithmetic.")
        .tool(add())
        .build();

    let reply = agent.handle("alice", "what is 2 + 3?").await?;
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(reply.tool_calls[0].content, "5");
    println!(
        "ok: the reply is {:?} after one `add` call that returned 5",
        reply.text
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].system.as_deref(),
        Some("Use tools for arithmetic.")
    );
    assert_eq!(requests[0].tool_names(), ["add"]);
    let sent_back = requests[1]
        .messages
        .last()
        .and_then(|m| m.tool_results_iter().next())
        .map(|r| r.content.clone());
    assert_eq!(sent_back.as_deref(), Some("5"));
    println!("ok: the model got the system prompt, the `add` schema, and the result \"5\"");
    assert_eq!(mock.remaining(), 0);
    println!("ok: the whole script was used");
    Ok(())
}

/// `chunked` splits the text into deltas, as a real server streams it.
async fn streamed_text_arrives_in_pieces() -> ferrobot::Result<()> {
    let mock = MockProvider::new().then(MockTurn::new().text("Hello, world").chunked(4));
    let agent = Agent::builder().provider(mock).build();
    let mut events = agent.stream("bob", "hi");
    let mut deltas = Vec::new();
    while let Some(event) = events.next().await {
        if let AgentEvent::TextDelta(text) = event? {
            deltas.push(text);
        }
    }
    assert_eq!(deltas, ["Hell", "o, w", "orld"]);
    println!("ok: the text streamed as {deltas:?}");
    Ok(())
}

/// A tool that needs confirmation, on an agent that cannot ask, does not run.
async fn confirmation_fails_closed() -> ferrobot::Result<()> {
    let delete = from_fn(
        "delete_file",
        "Delete a file.",
        |args: DeleteArgs, _ctx| async move { format!("deleted {}", args.path) },
    )
    .confirm("Delete {path}?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("delete_file", json!({"path": "/etc/passwd"})))
        .then(MockTurn::new().text("I could not delete it."));
    let agent = Agent::builder().provider(mock).tool(delete).build();

    let reply = agent.handle("carol", "delete /etc/passwd").await?;
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    println!(
        "ok: without a confirm handler the call was declined: {:?}",
        reply.tool_calls[0].content
    );

    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("delete_file", json!({"path": "/etc/passwd"})))
        .then(MockTurn::new().text("Okay, I left it alone."));
    let delete = from_fn(
        "delete_file",
        "Delete a file.",
        |_: DeleteArgs, _ctx| async { "deleted" },
    )
    .confirm("Delete {path}?");
    let agent = Agent::builder()
        .provider(mock)
        .tool(delete)
        .confirm(|request: ferrobot::confirm::ConfirmRequest| async move {
            assert_eq!(request.prompt, "Delete /etc/passwd?");
            false
        })
        .build();
    let reply = agent.handle("carol", "delete /etc/passwd").await?;
    assert_eq!(reply.tool_calls[0].content, "Cancelled by user.");
    println!("ok: the handler was asked \"Delete /etc/passwd?\" and its \"no\" reached the model");
    Ok(())
}

/// Arguments that don't match the schema become an error result, and the
/// tool is not called.
async fn bad_arguments_go_back_to_the_model() -> ferrobot::Result<()> {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("add", json!({"a": "two", "b": 3})))
        .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
        .then(MockTurn::new().text("5"));
    let agent = Agent::builder().provider(mock).tool(add()).build();
    let reply = agent.handle("dave", "2 + 3").await?;
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert!(
        reply.tool_calls[0]
            .content
            .starts_with("Invalid arguments for `add`:")
    );
    assert_eq!(reply.tool_calls[1].outcome, ToolOutcome::Ok);
    println!(
        "ok: bad arguments were reported to the model ({:?}) and its retry succeeded",
        reply.tool_calls[0].content
    );
    Ok(())
}

/// A failing model ends the turn with `Error::Provider` and a message a bot
/// can show.
async fn provider_failure_is_a_typed_error() {
    let mock = MockProvider::new().then(MockTurn::failing(ProviderError::Status {
        status: 503,
        message: "model is loading".into(),
        retry_after: None,
    }));
    let agent = Agent::builder().provider(mock).build();
    let err = agent
        .handle("erin", "hi")
        .await
        .expect_err("the scripted turn fails");
    assert!(matches!(err, Error::Provider(_)));
    println!("ok: the turn failed with {:?}", err.user_message());
}

/// `/add a=1 b=2` runs the tool directly; the model is never called.
async fn slash_commands_skip_the_model() -> ferrobot::Result<()> {
    let mock = MockProvider::new();
    let agent = Agent::builder().provider(mock.clone()).tool(add()).build();
    let reply = agent.handle("frank", "/add a=1 b=2").await?;
    assert_eq!(reply.text, "3");
    assert!(mock.requests().is_empty());
    println!("ok: `/add a=1 b=2` answered \"3\" without a model call");
    Ok(())
}
