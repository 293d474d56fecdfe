//! What a turn answers and keeps: text, refusals, provider failures.

use ferrobot::provider::ProviderError;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, Error, Message, Part, Usage};
use serde_json::json;

use super::echo_tool;

#[tokio::test]
async fn a_text_reply_is_returned_and_stored() {
    let mock = MockProvider::new().then(MockTurn::new().text("Hello!").usage(Usage {
        input_tokens: 3,
        output_tokens: 2,
        ..Default::default()
    }));
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Be brief.")
        .build();
    let reply = agent.handle("alice", "hi").await.unwrap();
    assert_eq!(reply.text, "Hello!");
    assert_eq!(reply.usage.input_tokens, 3);
    assert_eq!(mock.requests()[0].system.as_deref(), Some("Be brief."));
    let stored = agent.history().load("alice").await.unwrap();
    assert_eq!(stored, [Message::user("hi"), Message::assistant("Hello!")]);
}

#[tokio::test]
async fn a_provider_failure_is_a_typed_error_with_a_message_to_show() {
    let mock = MockProvider::new().then(MockTurn::failing(ProviderError::Status {
        status: 503,
        message: "model is loading".into(),
        retry_after: None,
    }));
    let agent = Agent::builder().provider(mock).build();
    let error = agent.handle("a", "hi").await.unwrap_err();
    assert!(matches!(error, Error::Provider(_)));
    assert_eq!(
        error.user_message(),
        "LLM unavailable: server answered 503: model is loading — slash commands still work"
    );
    // The user's message is kept; the next turn will see it.
    assert_eq!(
        agent.history().load("a").await.unwrap(),
        [Message::user("hi")]
    );
}

#[tokio::test]
async fn a_failure_mid_answer_keeps_the_partial_text_and_drops_the_unrun_call() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text("Partial")
            .tool_call("echo", json!({}))
            .error(ProviderError::Stream {
                message: "reset".into(),
            }),
    );
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    assert!(agent.handle("a", "hi").await.is_err());
    let stored = agent.history().load("a").await.unwrap();
    assert_eq!(stored[1].parts, [Part::text("Partial")]);
    assert!(stored[1].interrupted);
}

#[tokio::test]
async fn a_refusal_is_the_reply_text() {
    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().refusal("I can't help with that.")))
        .build();
    let reply = agent.handle("a", "something bad").await.unwrap();
    assert!(reply.is_refusal);
    assert_eq!(reply.text, "I can't help with that.");
}
