//! `Anthropic`, the Messages API, over loopback HTTP.

use ferrobot::provider::{
    Anthropic, ChatRequest, FinishReason, Provider, ProviderError, RetryPolicy, ToolChoice,
};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Message, Part};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{
    Recording, assemble, bodies, body_for, forecast_format, image_conversation, last_round_bodies,
    recordings, refused, request_body, steered_conversation, weather_tools,
};

fn client(server: &MockServer) -> Anthropic {
    Anthropic::with_base_url(server.uri())
        .model("claude-test")
        .api_key("sk-ant-test")
        .retry(RetryPolicy::none())
}

/// An Anthropic SSE answer of `events`.
pub(crate) fn sse(events: &[Value]) -> ResponseTemplate {
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// Replays every recording of corpus/03 and compares with `expected.json`.
#[tokio::test]
async fn anthropic_recordings_assemble_as_recorded() {
    for recording in recordings("03_anthropic_messages_stream") {
        let Recording { name, expected, .. } = &recording;
        let server = recording.serve_stream("/v1/messages").await;
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
            Value::Array(calls),
            expected["tool_calls"],
            "{name}: tool calls (server tools are not ours to run)"
        );
        assert_eq!(
            got.finish,
            expected["finish_reason"]
                .as_str()
                .map(FinishReason::from_raw),
            "{name}: finish"
        );
        let usage = got.usage.unwrap();
        let raw = |key: &str| expected["usage"][key].as_u64().unwrap_or(0);
        assert_eq!(
            usage.input_tokens,
            raw("input_tokens")
                + raw("cache_read_input_tokens")
                + raw("cache_creation_input_tokens"),
            "{name}"
        );
        assert_eq!(usage.output_tokens, raw("output_tokens"), "{name}");
        // Server tool blocks are kept as they came, inputs assembled.
        let kept: Vec<&Value> = got
            .message
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Opaque(o) if o.provider == "anthropic" => Some(&o.value),
                _ => None,
            })
            .collect();
        let wanted: Vec<&Value> = expected["content_blocks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| {
                !["text", "thinking", "redacted_thinking", "tool_use"]
                    .contains(&b["type"].as_str().unwrap_or_default())
            })
            .collect();
        assert_eq!(kept.len(), wanted.len(), "{name}: server blocks kept");
        for server in expected["server_tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            assert!(
                kept.iter()
                    .any(|k| k["id"] == server["id"] && k["input"] == server["arguments"]),
                "{name}: {server} kept with its input"
            );
        }
        // Thinking keeps its signature; redacted thinking is kept whole.
        for block in expected["content_blocks"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("thinking") => assert!(
                    got.message.parts.iter().any(|p| matches!(p, Part::Reasoning(r) if r.signature.is_some() && r.provider.as_deref() == Some("anthropic"))),
                    "{name}: signed thinking"
                ),
                Some("redacted_thinking") => assert!(
                    got.message.parts.iter().any(|p| matches!(p, Part::Reasoning(r) if r.provider.as_deref() == Some("anthropic:redacted"))),
                    "{name}: redacted thinking"
                ),
                _ => {}
            }
        }
    }
}

#[tokio::test]
async fn a_tool_round_sends_thinking_and_its_signature_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(|request: &Request| {
            let body = String::from_utf8_lossy(&request.body);
            if body.contains("tool_result") {
                sse(&[
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 50, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "2 + 3 = 5"}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}}),
                    json!({"type": "message_stop"}),
                ])
            } else {
                sse(&[
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 40, "cache_read_input_tokens": 8, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Use add."}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-abc"}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "ping"}),
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}}),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 2, "}}),
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"b\": 3}"}}),
                    json!({"type": "content_block_stop", "index": 1}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
                    json!({"type": "message_stop"}),
                ])
            }
        })
        .mount(&server)
        .await;
    let add = from_fn("add", "Add two integers.", |v: Value, _| async move {
        v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
    });
    let agent = Agent::builder()
        .provider(client(&server).thinking(1024))
        .system_prompt("You add.")
        .tool(add)
        .build();
    let reply = agent.handle("a", "2 + 3?").await.unwrap();
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.usage.input_tokens, 48 + 50);
    assert_eq!(reply.usage.cached_tokens, 8);
    let bodies = bodies(&server).await;
    insta::assert_json_snapshot!("anthropic_tool_round_first_request", bodies[0]);
    insta::assert_json_snapshot!("anthropic_tool_round_second_request", bodies[1]);
}

/// Anthropic refuses a conversation holding tool calls unless tools are
/// described, so past the round cap they stay, with `tool_choice: none`.
#[tokio::test]
async fn past_the_round_cap_the_tools_stay_described_but_may_not_be_called() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            let has_calls = body["messages"].to_string().contains("tool_use");
            if has_calls && body["tools"].as_array().is_none_or(Vec::is_empty) {
                return ResponseTemplate::new(400).set_body_json(json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "Requests which include `tool_use` or `tool_result` blocks must define tools."}}));
            }
            if body["tool_choice"]["type"] == "none" {
                return sse(&[
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Still zero."}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
                    json!({"type": "message_stop"}),
                ]);
            }
            sse(&[
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "count", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ])
        })
        .mount(&server)
        .await;
    let bodies = last_round_bodies(client(&server), &server).await;
    assert!(bodies[0].get("tool_choice").is_none(), "{}", bodies[0]);
    assert_eq!(bodies[1]["tools"][0]["name"], "count");
    assert_eq!(bodies[1]["tool_choice"], json!({"type": "none"}));
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out_as_configured() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[]).set_delay(std::time::Duration::from_secs(5)))
        .mount(&server)
        .await;
    let provider = client(&server).timeouts(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_millis(200),
    );
    let started = std::time::Instant::now();
    let error = assemble(&provider, &[Message::user("hi")])
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{error}"
    );
    assert!(error.chain().contains("200ms"), "{}", error.chain());
}

#[tokio::test]
async fn overloaded_is_retried_and_only_anthropics_own_blocks_go_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})]))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]))
        .mount(&server)
        .await;
    let provider = client(&server).retry(
        RetryPolicy::builder()
            .initial_backoff(std::time::Duration::from_millis(5))
            .build(),
    );
    let history = [
        Message::user("hello"),
        Message::new(
            ferrobot::Role::Assistant,
            vec![
                Part::Reasoning(ferrobot::Reasoning {
                    text: "from gemini".into(),
                    signature: Some("g-sig".into()),
                    provider: Some("gemini".into()),
                }),
                Part::Opaque(ferrobot::Opaque {
                    provider: "anthropic".into(),
                    value: json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "hi"}}),
                }),
                Part::Opaque(ferrobot::Opaque {
                    provider: "elsewhere".into(),
                    value: json!({"type": "mystery"}),
                }),
                Part::text("Hello."),
            ],
        ),
        Message::user("again"),
    ];
    let got = assemble(&provider, &history).await.unwrap();
    assert_eq!(got.message.text(), "Hi");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2, "the overloaded answer was retried");
    let body: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "hi"}},
            {"type": "text", "text": "Hello."}
        ]),
        "foreign reasoning and blocks are dropped; Anthropic's own server blocks go back"
    );
    assert_eq!(body["max_tokens"], 4096);
}

/// A loopback server answering every request with the text `text`.
async fn answering(text: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            json!({"type": "message_stop"}),
        ]))
        .mount(&server)
        .await;
    server
}

/// `{"type": "any"}`, and `{"type": "tool", "name": …}`, every tool still
/// described. The shared corpus has no forced-tool recordings of the
/// Messages API (its requests say `auto`), so these bodies are written from
/// Anthropic's documented wire format.
#[tokio::test]
async fn forced_tool_choices_are_sent_as_the_messages_api_says_them() {
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
    insta::assert_json_snapshot!("anthropic_tool_choice_required", required);
    let named = ToolChoice::Tool("get_time".into());
    let named = request_body(&provider, &server, &weather_tools(), &named, None).await;
    insta::assert_json_snapshot!("anthropic_tool_choice_tool", named);
}

/// The API refuses forced tool use with extended thinking ("Thinking may
/// not be enabled when `tool_choice` forces tool use"), so with thinking on a
/// forced choice goes as `auto`, with every tool, and thinking stays on.
#[tokio::test]
async fn with_thinking_on_a_forced_choice_is_sent_as_auto() {
    let server = answering("ok").await;
    let provider = client(&server).thinking(1024);
    for choice in [ToolChoice::Required, ToolChoice::Tool("get_time".into())] {
        let body = request_body(&provider, &server, &weather_tools(), &choice, None).await;
        assert_eq!(body["tool_choice"], json!({"type": "auto"}), "{choice:?}");
        assert_eq!(body["tools"].as_array().unwrap().len(), 2, "{choice:?}");
        assert_eq!(body["thinking"]["type"], "enabled", "{choice:?}");
    }
    let none = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::None,
        None,
    )
    .await;
    assert_eq!(none["tool_choice"], json!({"type": "none"}));
}

/// The Messages API has no native structured output in ferrobot: a
/// request asking for one fails before anything is sent, saying typed
/// answers use an output tool.
#[tokio::test]
async fn a_structured_answer_is_refused_before_sending() {
    use futures_util::StreamExt;
    let server = answering("{}").await;
    let provider = client(&server);
    assert!(!provider.native_output());
    let messages = [Message::user("Weather in Paris tomorrow?")];
    let format = forecast_format();
    let request = ChatRequest::new(&messages).output(Some(&format));
    let error = provider.stream(request).next().await.unwrap().unwrap_err();
    assert!(
        matches!(&error, ProviderError::InvalidRequest { provider, .. } if provider == "anthropic"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "anthropic can't send this request: this dialect has no native structured output in \
         ferrobot; typed answers use an output tool (ask for `ChatRequest::output` only where \
         `Provider::native_output` is true)"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// A user's images go as `image` blocks after the text (a `base64` source,
/// or a `url` one); a tool's inside its `tool_result`, whose `content`
/// becomes a list of `text` and `image` blocks. Written from Anthropic's
/// documented format (see `image_conversation`).
#[tokio::test]
async fn images_are_sent_as_image_blocks() {
    let server = answering("A cat.").await;
    let body = body_for(&client(&server), &server, &image_conversation(true)).await;
    insta::assert_json_snapshot!("anthropic_images", body["messages"]);
}

/// The API takes 5 MB of base64 per image: one byte more is refused before
/// sending, naming the image, its size and what to do.
#[tokio::test]
async fn an_image_over_five_megabytes_is_refused_before_sending() {
    let server = answering("A cat.").await;
    let mut messages = image_conversation(false);
    // 3,932,160 bytes are 5 MiB in base64.
    messages[2].parts[0] = Part::ToolResult(
        ferrobot::ToolResult::ok("call_1", "The screen, now.")
            .with_images(vec![ferrobot::Image::png(vec![0; 3_932_161])]),
    );
    let error = refused(&client(&server), &server, &messages).await;
    assert_eq!(
        error.to_string(),
        "anthropic can't send this request: image 1 of the result of `screenshot` (call \
         `call_1`, message 3) is 5.2 MB as base64, over the 5 MB per image Anthropic's API \
         takes: resize or compress it"
    );
}

/// A steering message after a tool's results joins their user turn: the
/// API refuses two user turns in a row, and the results must come first.
#[tokio::test]
async fn a_steering_message_joins_the_tool_results_turn() {
    let server = answering("Staging next.").await;
    let body = body_for(&client(&server), &server, &steered_conversation()).await;
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    insta::assert_json_snapshot!("anthropic_steering", body["messages"]);
}
