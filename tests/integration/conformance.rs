//! Recorded traffic from real servers, replayed through a loopback server.

use ferrobot::Message;
use ferrobot::provider::{FinishReason, OpenAiCompatible};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{Recording, assemble, recordings};

/// Replays every item of a corpus category and compares the assembled
/// message with its `expected.json`.
async fn replay(category: &str, streaming: bool) {
    for Recording {
        name,
        dir: item,
        expected,
    } in recordings(category)
    {
        let (body, content_type) = if streaming {
            (
                std::fs::read(item.join("response.txt")).unwrap(),
                "text/event-stream",
            )
        } else {
            (
                std::fs::read(item.join("response.json")).unwrap(),
                "application/json",
            )
        };
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, content_type))
            .mount(&server)
            .await;
        let provider = OpenAiCompatible::new(format!("{}/v1", server.uri()))
            .model("recorded")
            .streaming(streaming);
        let assembled = assemble(&provider, &[Message::user("replay")])
            .await
            .unwrap_or_else(|e| panic!("{name}: {}", e.chain()));
        check(&name, &expected, &assembled);
    }
}

fn check(name: &str, expected: &Value, got: &ferrobot::provider::Assembled) {
    let message = &got.message;
    let text = |key: &str| expected[key].as_str().unwrap_or_default().to_owned();
    assert_eq!(message.text(), text("content"), "{name}: content");
    assert_eq!(
        message.reasoning().unwrap_or_default(),
        text("reasoning"),
        "{name}: reasoning"
    );
    assert_eq!(
        message.refusal().unwrap_or_default(),
        text("refusal"),
        "{name}: refusal"
    );

    let mut want: Vec<Value> = expected["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(legacy) = expected.get("legacy_function_call") {
        want.push(serde_json::json!({"id": null, "name": legacy["name"], "arguments": legacy["arguments"]}));
    }
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), want.len(), "{name}: number of tool calls");
    for (call, want) in calls.iter().zip(&want) {
        match want["id"].as_str().filter(|id| !id.is_empty()) {
            Some(id) => assert_eq!(call.id, id, "{name}: tool call id"),
            None => assert!(
                call.id.starts_with("call_"),
                "{name}: a missing id is generated, got {:?}",
                call.id
            ),
        }
        assert_eq!(
            call.name,
            want["name"].as_str().unwrap(),
            "{name}: tool name"
        );
        assert_eq!(call.arguments, want["arguments"], "{name}: tool arguments");
    }

    let finish = expected["finish_reason"]
        .as_str()
        .map(FinishReason::from_raw);
    assert_eq!(got.finish, finish, "{name}: finish reason");

    let usage = &expected["usage"];
    if usage.is_null() {
        assert_eq!(got.usage, None, "{name}: usage");
    } else {
        let usage_field = |p: &str| usage.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        let got = got.usage.unwrap_or_else(|| panic!("{name}: usage missing"));
        assert_eq!(
            got.input_tokens,
            usage_field("/prompt_tokens"),
            "{name}: input tokens"
        );
        assert_eq!(
            got.output_tokens,
            usage_field("/completion_tokens"),
            "{name}: output tokens"
        );
        assert_eq!(
            got.reasoning_tokens,
            usage_field("/completion_tokens_details/reasoning_tokens"),
            "{name}: reasoning tokens"
        );
        assert_eq!(
            got.cached_tokens,
            usage_field("/prompt_tokens_details/cached_tokens"),
            "{name}: cached tokens"
        );
    }
}

#[tokio::test]
async fn openai_chat_streams_assemble_as_recorded() {
    replay("01_openai_chat_stream", true).await;
}

#[tokio::test]
async fn openai_chat_non_streamed_tool_calls_assemble_as_recorded() {
    replay("02_openai_chat_nonstream_tools", false).await;
}
