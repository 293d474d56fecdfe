//! `OpenAiResponses`, the Responses API, over loopback HTTP.

use ferrobot::provider::{FinishReason, OpenAiResponses, Provider, RetryPolicy, ToolChoice};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Message, Part};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{
    Recording, assemble, bodies, body_for, forecast_format, image_conversation, last_round_bodies,
    recordings, request_body, weather_tools,
};

fn client(server: &MockServer) -> OpenAiResponses {
    OpenAiResponses::new(format!("{}/v1", server.uri()))
        .model("gpt-test")
        .api_key("sk-test")
        .retry(RetryPolicy::none())
}

fn sse(events: &[Value]) -> ResponseTemplate {
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn completed(input: u64, output: u64) -> Value {
    json!({"type": "response.completed", "response": {"status": "completed", "incomplete_details": null,
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 3}}}})
}

/// Replays every recording of corpus/06 and compares with `expected.json`.
#[tokio::test]
async fn responses_recordings_assemble_as_recorded() {
    for recording in recordings("06_openai_responses_stream") {
        let Recording {
            name,
            dir: item,
            expected,
        } = &recording;
        let server = recording.serve_stream("/v1/responses").await;
        let got = assemble(&client(&server), &[Message::user("replay")])
            .await
            .unwrap_or_else(|e| panic!("{name}: {}", e.chain()));
        recording.assert_text(&got.message);
        let calls: Vec<Value> = got
            .message
            .tool_calls()
            .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
            .collect();
        assert_eq!(
            Value::Array(calls.clone()),
            expected["tool_calls"],
            "{name}"
        );
        let finish = if calls.is_empty() {
            FinishReason::from_raw(expected["finish_reason"].as_str().unwrap())
        } else {
            FinishReason::ToolCalls
        };
        assert_eq!(got.finish, Some(finish), "{name}: finish");
        let usage = got.usage.unwrap();
        assert_eq!(
            usage.input_tokens, expected["usage"]["input_tokens"],
            "{name}"
        );
        assert_eq!(
            usage.output_tokens, expected["usage"]["output_tokens"],
            "{name}"
        );
        assert_eq!(
            usage.reasoning_tokens, expected["usage"]["output_tokens_details"]["reasoning_tokens"],
            "{name}"
        );
        // A reasoning item with encrypted content is kept for the next request.
        let types = expected["output_item_types"].as_array().unwrap();
        if types.contains(&json!("reasoning")) {
            let raw = std::fs::read_to_string(item.join("response.txt")).unwrap();
            if raw.contains("encrypted_content\":\"") {
                assert!(
                    got.message.parts.iter().any(|p| matches!(p, Part::Reasoning(r) if r.provider.as_deref() == Some("openai-responses") && r.signature.is_some())),
                    "{name}: the reasoning item is kept"
                );
            }
        }
    }
}

/// Past the round cap no tools are sent: the conversation's calls and
/// outputs are fine without them here.
#[tokio::test]
async fn past_the_round_cap_no_tools_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            if body.get("tools").is_some() {
                sse(&[
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "count", "arguments": ""}}),
                    json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_1", "arguments": "{}"}),
                    completed(5, 5),
                ])
            } else {
                sse(&[
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}}),
                    json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Still zero."}),
                    completed(5, 3),
                ])
            }
        })
        .mount(&server)
        .await;
    let bodies = last_round_bodies(client(&server), &server).await;
    assert!(bodies[1].get("tools").is_none() && bodies[1].get("tool_choice").is_none());
    assert!(
        bodies[1]["input"]
            .to_string()
            .contains("function_call_output")
    );
}

#[tokio::test]
async fn a_tool_round_sends_the_reasoning_item_and_call_id_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(|request: &Request| {
            if String::from_utf8_lossy(&request.body).contains("function_call_output") {
                sse(&[
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_2"}}),
                    json!({"type": "response.output_text.delta", "output_index": 0, "delta": "2 + 3 = "}),
                    json!({"type": "response.output_text.delta", "output_index": 0, "delta": "5"}),
                    completed(40, 6),
                ])
            } else {
                sse(&[
                    json!({"type": "response.created", "response": {"status": "in_progress"}}),
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}}),
                    json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Use add."}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-1", "summary": []}}),
                    json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": ""}}),
                    json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": "{\"a\":2,"}),
                    json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": "\"b\":3}"}),
                    json!({"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_1", "arguments": "{\"a\":2,\"b\":3}"}),
                    completed(30, 12),
                ])
            }
        })
        .mount(&server)
        .await;
    let add = from_fn("add", "Add two integers.", |v: Value, _| async move {
        v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
    });
    let agent = Agent::builder()
        .provider(client(&server).reasoning_effort("low"))
        .system_prompt("You add.")
        .tool(add)
        .build();
    let reply = agent.handle("a", "2 + 3?").await.unwrap();
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.usage.input_tokens, 70);
    let bodies = bodies(&server).await;
    insta::assert_json_snapshot!("responses_tool_round_first_request", bodies[0]);
    insta::assert_json_snapshot!("responses_tool_round_second_request", bodies[1]);
}

#[tokio::test]
async fn failures_and_truncation_are_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "The model failed."}}}),
        ]))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Long"}),
            json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ]))
        .mount(&server)
        .await;
    let error = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap_err()
        .chain();
    assert!(
        error.contains("The model failed. (server_error)"),
        "{error}"
    );
    let got = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap();
    assert_eq!(got.message.text(), "Long");
    assert_eq!(got.finish, Some(FinishReason::Length));
}

/// A loopback server answering every request with the text `text`.
async fn answering(text: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": text}),
            completed(5, 3),
        ]))
        .mount(&server)
        .await;
    server
}

/// `"required"`, and the one function to call, flat as the Responses API
/// says it (`{"type": "function", "name": …}`, not chat completions'
/// `function.name`); under `Tool(name)` only that tool is offered.
#[tokio::test]
async fn forced_tool_choices_are_sent_as_the_responses_api_says_them() {
    let server = answering("ok").await;
    let provider = client(&server);
    let required = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Required,
        None,
    )
    .await;
    insta::assert_json_snapshot!("responses_tool_choice_required", required);
    let named = ToolChoice::Tool("get_time".into());
    let named = request_body(&provider, &server, &weather_tools(), &named, None).await;
    insta::assert_json_snapshot!("responses_tool_choice_tool", named);
}

/// `text.format`: the `json_schema` format with the strict form of the
/// schema, beside `type` rather than nested as in chat completions.
#[tokio::test]
async fn a_structured_answer_is_asked_for_in_text_format() {
    let server = answering(r#"{"city": "Paris"}"#).await;
    let provider = client(&server);
    assert!(provider.native_output());
    let format = forecast_format();
    let body = request_body(&provider, &server, &[], &ToolChoice::Auto, Some(&format)).await;
    insta::assert_json_snapshot!("responses_native_output", body);
}

/// A user's images go as `input_image` items after `input_text`; a tool's
/// in its `function_call_output`, whose `output` becomes a list of
/// `input_text` and `input_image`. Written from the Responses API's
/// documented format (see `image_conversation`).
#[tokio::test]
async fn images_are_sent_as_input_image_items() {
    let server = answering("A cat.").await;
    let body = body_for(&client(&server), &server, &image_conversation(true)).await;
    insta::assert_json_snapshot!("responses_images", body["input"]);
}
