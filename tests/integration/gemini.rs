//! `Gemini`, `streamGenerateContent?alt=sse`, over loopback HTTP; and one
//! conversation that moves between dialects.

use ferrobot::provider::{FinishReason, Gemini, Provider, RetryPolicy, ToolChoice};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Message, Part};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{
    Recording, assemble, bodies, body_for, forecast_format, image_conversation, last_round_bodies,
    recordings, refused, request_body, steered_conversation, weather_tools,
};

const STREAM: &str = "/v1beta/models/gemini-test:streamGenerateContent";

fn client(server: &MockServer) -> Gemini {
    Gemini::with_base_url(server.uri())
        .model("gemini-test")
        .api_key("g-key")
        .retry(RetryPolicy::none())
}

fn sse(chunks: &[Value]) -> ResponseTemplate {
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// Replays every recording of corpus/04 and compares with `expected.json`.
#[tokio::test]
async fn gemini_recordings_assemble_as_recorded() {
    for recording in recordings("04_gemini_stream_sse") {
        let Recording { name, expected, .. } = &recording;
        let server = recording.serve_stream(STREAM).await;
        let got = assemble(&client(&server), &[Message::user("replay")])
            .await
            .unwrap_or_else(|e| panic!("{name}: {}", e.chain()));
        recording.assert_text(&got.message);
        let calls: Vec<_> = got.message.tool_calls().collect();
        let wanted = expected["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), wanted.len(), "{name}: tool calls");
        for (call, wanted) in calls.iter().zip(wanted) {
            assert_eq!(call.name, wanted["name"], "{name}");
            assert_eq!(call.arguments, wanted["arguments"], "{name}");
            assert!(!call.id.is_empty(), "{name}: a call id is made up");
        }
        let finish = if calls.is_empty() {
            FinishReason::from_raw(expected["finish_reason"].as_str().unwrap())
        } else {
            FinishReason::ToolCalls
        };
        assert_eq!(got.finish, Some(finish), "{name}: finish");
        let usage = got.usage.unwrap();
        let raw = |key: &str| expected["usage"][key].as_u64().unwrap_or(0);
        assert_eq!(usage.input_tokens, raw("promptTokenCount"), "{name}");
        assert_eq!(
            usage.output_tokens,
            raw("candidatesTokenCount") + raw("thoughtsTokenCount"),
            "{name}"
        );
        assert_eq!(usage.reasoning_tokens, raw("thoughtsTokenCount"), "{name}");
        let signed = got.message.parts.iter().any(|p| {
            matches!(p, Part::Reasoning(r) if r.signature.is_some() && r.provider.as_deref() == Some("gemini"))
        });
        let wants_signature = expected["tool_call_has_thought_signature"]
            .as_array()
            .is_some_and(|s| s.contains(&json!(true)));
        if wants_signature {
            assert!(signed, "{name}: the thought signature is kept");
        }
    }
}

#[tokio::test]
async fn a_tool_round_sends_the_call_and_its_thought_signature_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(|request: &Request| {
            if String::from_utf8_lossy(&request.body).contains("functionResponse") {
                sse(&[
                    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "2 + 3 = "}]}}]}),
                    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "5"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 6}}),
                ])
            } else {
                sse(&[
                    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Adding.", "thought": true}]}}]}),
                    json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "g-sig"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "thoughtsTokenCount": 7}}),
                ])
            }
        })
        .mount(&server)
        .await;
    let add = from_fn("add", "Add two integers.", |v: Value, _| async move {
        v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
    });
    let agent = Agent::builder()
        .provider(client(&server).thinking(512))
        .system_prompt("You add.")
        .tool(add)
        .build();
    let reply = agent.handle("a", "2 + 3?").await.unwrap();
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.usage.input_tokens, 50);
    assert_eq!(reply.usage.reasoning_tokens, 7);
    let bodies = bodies(&server).await;
    insta::assert_json_snapshot!("gemini_tool_round_first_request", bodies[0]);
    insta::assert_json_snapshot!("gemini_tool_round_second_request", bodies[1]);
}

/// Past the round cap the tools stay described, with calling them off.
#[tokio::test]
async fn past_the_round_cap_the_tools_stay_described_but_may_not_be_called() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            let part = if body["toolConfig"]["functionCallingConfig"]["mode"] == "NONE" {
                json!({"text": "Still zero."})
            } else {
                json!({"functionCall": {"name": "count", "args": {}}})
            };
            sse(&[json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]})])
        })
        .mount(&server)
        .await;
    let bodies = last_round_bodies(client(&server), &server).await;
    assert!(bodies[0].get("toolConfig").is_none(), "{}", bodies[0]);
    assert_eq!(
        bodies[1]["tools"][0]["functionDeclarations"][0]["name"],
        "count"
    );
}

#[tokio::test]
async fn a_blocked_prompt_and_an_unfinished_stream_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}),
        ]))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Half"}]}}]}),
        ]))
        .mount(&server)
        .await;
    let error = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap_err()
        .chain();
    assert!(error.contains("blocked the prompt (SAFETY)"), "{error}");
    let error = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap_err()
        .chain();
    assert!(error.contains("no finishReason"), "{error}");
}

/// One conversation, three dialects: OpenAI-compatible (with a tool round),
/// then Anthropic with thinking, then Gemini. Each request carries the whole
/// conversation in its own form, and no dialect gets another's signatures.
#[cfg(all(feature = "anthropic", feature = "sqlite"))]
#[tokio::test]
async fn a_conversation_moves_between_dialects() {
    use ferrobot::history::SqliteHistory;
    use ferrobot::provider::{Anthropic, OpenAiCompatible};
    use ferrobot::testing::{text_sse, tool_call_sse};

    let dir = crate::sqlite::TempDir::new("dialects");
    let history = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    let add = || {
        from_fn("add", "Add two integers.", |v: Value, _| async move {
            v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
        })
    };

    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let body = if String::from_utf8_lossy(&request.body).contains("\"role\":\"tool\"") {
                text_sse("It is 5.")
            } else {
                tool_call_sse("call_1", "add", &json!({"a": 2, "b": 3}))
            };
            ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
        })
        .mount(&openai)
        .await;
    let agent = |provider: std::sync::Arc<dyn ferrobot::provider::Provider>| {
        Agent::builder()
            .provider(provider)
            .history(history.clone())
            .tool(add())
            .build()
    };
    let first = agent(std::sync::Arc::new(
        OpenAiCompatible::new(format!("{}/v1", openai.uri())).model("local"),
    ));
    assert_eq!(first.handle("c", "2 + 3?").await.unwrap().text, "It is 5.");

    let anthropic = MockServer::start().await;
    let events = [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Double it."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "ant-sig"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "10."}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&anthropic)
        .await;
    let second = agent(std::sync::Arc::new(
        Anthropic::with_base_url(anthropic.uri())
            .model("claude-test")
            .thinking(1024),
    ));
    assert_eq!(second.handle("c", "Doubled?").await.unwrap().text, "10.");
    let sent = &bodies(&anthropic).await[0];
    assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(sent["messages"][1]["content"][0]["id"], "call_1");
    assert_eq!(sent["messages"][2]["content"][0]["tool_use_id"], "call_1");

    let gemini = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .respond_with(sse(&[
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "20."}]}, "finishReason": "STOP"}]}),
        ]))
        .mount(&gemini)
        .await;
    let third = agent(std::sync::Arc::new(client(&gemini)));
    assert_eq!(
        third.handle("c", "Doubled again?").await.unwrap().text,
        "20."
    );
    let sent = &bodies(&gemini).await[0];
    let text = sent.to_string();
    assert!(!text.contains("ant-sig"), "{text}");
    let contents = sent["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "model", "user", "model", "user", "model", "user"]
    );
    assert_eq!(contents[1]["parts"][0]["functionCall"]["name"], "add");
    assert_eq!(contents[2]["parts"][0]["functionResponse"]["name"], "add");
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"]["response"]["result"],
        "5"
    );
    assert_eq!(contents[5]["parts"], json!([{"text": "10."}]));
}

#[tokio::test]
async fn health_checks_the_model_with_the_key() {
    use ferrobot::provider::Provider;

    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models/gemini-test"))
        .and(header("x-goog-api-key", "g-key"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": "models/gemini-test"})),
        )
        .mount(&server)
        .await;
    let health = client(&server).health().await;
    assert!(health.is_ok(), "{health:?}");
    assert_eq!(health.model_present, Some(true));

    let health = client(&server).model("gemini-missing").health().await;
    assert_eq!(health.model_present, Some(false));
    let detail = health.detail.unwrap();
    assert!(detail.contains("no model `gemini-missing`"), "{detail}");
}

/// A loopback server answering every request with the text `text`.
async fn answering(text: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM))
        .respond_with(sse(&[
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}),
        ]))
        .mount(&server)
        .await;
    server
}

/// `functionCallingConfig` mode `ANY`, with `allowedFunctionNames` for the
/// one to call, every function still declared. The shared corpus has no
/// forced-tool recordings of Gemini, so these bodies are written from its
/// documented wire format.
#[tokio::test]
async fn forced_tool_choices_are_sent_as_function_calling_modes() {
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
    insta::assert_json_snapshot!("gemini_tool_choice_required", required);
    let named = ToolChoice::Tool("get_time".into());
    let named = request_body(&provider, &server, &weather_tools(), &named, None).await;
    insta::assert_json_snapshot!("gemini_tool_choice_tool", named);
}

/// `responseMimeType` and `responseSchema` in `generationConfig`, the
/// schema in Gemini's subset (`nullable: true` for the optional field).
/// The corpus has no structured-output recordings of Gemini either: written
/// from the documented format.
#[tokio::test]
async fn a_structured_answer_is_asked_for_as_a_response_schema() {
    let server = answering(r#"{"city": "Paris"}"#).await;
    let provider = client(&server);
    assert!(provider.native_output());
    let format = forecast_format();
    let body = request_body(&provider, &server, &[], &ToolChoice::Auto, Some(&format)).await;
    insta::assert_json_snapshot!("gemini_native_output", body);
    // The agent's typed answer after its tool rounds: no tool to call, so
    // none declared (Gemini 2.x refuses them beside a response schema).
    let answering = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::None,
        Some(&format),
    )
    .await;
    assert!(answering.get("tools").is_none(), "{answering}");
    assert!(answering.get("toolConfig").is_none(), "{answering}");
    assert_eq!(
        answering["generationConfig"]["responseMimeType"],
        "application/json"
    );
}

/// A loopback server answering every request, whatever the model, with
/// the text `text`.
async fn answering_any_model(text: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}),
        ]))
        .mount(&server)
        .await;
    server
}

/// A user's images go as `inlineData` parts after the text; a tool's inside
/// its `functionResponse`, as `parts` (Gemini 3's multimodal function
/// responses). Written from Gemini's documented format (see
/// `image_conversation`).
#[tokio::test]
async fn images_are_sent_as_inline_data() {
    let server = answering_any_model("A cat.").await;
    let provider = client(&server).model("gemini-3-flash-preview");
    let body = body_for(&provider, &server, &image_conversation(false)).await;
    insta::assert_json_snapshot!("gemini_images", body["contents"]);
}

/// Gemini 2.x refuses `functionResponse.parts`, so there a tool's images
/// follow the turn's function responses, introduced by their call.
#[tokio::test]
async fn gemini_2_gets_a_tools_images_after_the_function_responses() {
    let server = answering_any_model("A cat.").await;
    let provider = client(&server).model("gemini-2.5-flash");
    let body = body_for(&provider, &server, &image_conversation(false)).await;
    insta::assert_json_snapshot!("gemini_2_tool_images", body["contents"][2]);
}

/// Gemini needs an image's bytes, and ferrobot never fetches one: a URL is
/// refused before sending, saying what to do.
#[tokio::test]
async fn an_image_url_is_refused_before_sending() {
    let server = answering_any_model("A cat.").await;
    let error = refused(&client(&server), &server, &image_conversation(true)).await;
    assert_eq!(
        error.to_string(),
        "gemini can't send this request: image 2 of message 1 (the user's) is a URL \
         (https://example.com/cat.png): Gemini's API needs the image's bytes, and ferrobot \
         never fetches an image: download it and send `Image::from_bytes(…)`"
    );
}

/// A steering message after a tool's results joins their user turn: the
/// API refuses two user turns in a row, and the results must come first.
#[tokio::test]
async fn a_steering_message_joins_the_tool_results_turn() {
    let server = answering_any_model("Staging next.").await;
    let body = body_for(&client(&server), &server, &steered_conversation()).await;
    let roles: Vec<&str> = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    insta::assert_json_snapshot!("gemini_steering", body["contents"]);
}
