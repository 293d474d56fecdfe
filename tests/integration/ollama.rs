//! `Ollama`, the native `/api/chat` dialect, over loopback HTTP.

use ferrobot::provider::{FinishReason, Ollama, Provider, RetryPolicy, ToolChoice};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Message};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{
    Recording, assemble, bodies, body_for, forecast_format, image_conversation, last_round_bodies,
    recordings, refused, request_body, weather_tools,
};

/// Past the round cap no tools are sent.
#[tokio::test]
async fn past_the_round_cap_no_tools_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            let line = if body["tools"].as_array().is_some_and(|t| !t.is_empty()) {
                json!({"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "count", "arguments": {}}}]}, "done": true, "done_reason": "stop"})
            } else {
                json!({"message": {"role": "assistant", "content": "Still zero."}, "done": true, "done_reason": "stop"})
            };
            ResponseTemplate::new(200).set_body_raw(format!("{line}\n"), "application/x-ndjson")
        })
        .mount(&server)
        .await;
    let provider = Ollama::new(server.uri())
        .model("m")
        .retry(RetryPolicy::none());
    let bodies = last_round_bodies(provider, &server).await;
    assert!(
        bodies[1]["tools"].as_array().is_none_or(Vec::is_empty),
        "{}",
        bodies[1]
    );
}

#[tokio::test]
async fn a_server_that_stops_sending_times_out_after_what_it_sent() {
    use ferrobot::provider::{Provider, ProviderError, StreamEvent};
    use futures_util::StreamExt;
    let server = crate::support::serve_then_stall(
        "{\"message\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"done\":false}\n",
    )
    .await;
    let provider = Ollama::new(server.url())
        .model("m")
        .retry(RetryPolicy::none())
        .timeouts(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_millis(300),
        );
    let messages = [Message::user("x")];
    let mut stream = provider.stream(ferrobot::provider::ChatRequest::new(&messages));
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        StreamEvent::TextDelta("Hel".into())
    );
    let error = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(error, ProviderError::Timeout { .. }), "{error}");
    assert!(
        error.to_string().ends_with("did not answer within 300ms"),
        "{error}"
    );
    assert!(stream.next().await.is_none(), "nothing after the time-out");
}

/// Replays every recording of corpus/05 and compares with `expected.json`.
#[tokio::test]
async fn ollama_recordings_assemble_as_recorded() {
    for recording in recordings("05_ollama_chat_ndjson") {
        let Recording {
            name,
            dir: item,
            expected,
        } = &recording;
        let (body, status) = match std::fs::read(item.join("response.txt")) {
            Ok(body) => (body, 200),
            Err(_) => {
                // A whole (stream: false) answer is one NDJSON line too.
                let whole: Value =
                    serde_json::from_slice(&std::fs::read(item.join("response.json")).unwrap())
                        .unwrap();
                let status = expected["http_status"].as_u64().unwrap_or(200) as u16;
                (whole.to_string().into_bytes(), status)
            }
        };
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat"))
            .respond_with(ResponseTemplate::new(status).set_body_raw(body, "application/x-ndjson"))
            .mount(&server)
            .await;
        let provider = Ollama::new(server.uri())
            .model("recorded")
            .retry(RetryPolicy::none());
        let got = assemble(&provider, &[Message::user("replay")]).await;
        if let Some(error) = expected.get("error").and_then(Value::as_str) {
            let shown = got.unwrap_err().chain();
            assert!(shown.contains(error), "{name}: {shown}");
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{name}: {}", e.chain()));
        recording.assert_text(&got.message);
        let calls: Vec<(String, Value)> = got
            .message
            .tool_calls()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        let want: Vec<(String, Value)> = expected["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["arguments"].clone(),
                )
            })
            .collect();
        assert_eq!(calls, want, "{name}: tool calls");
        let finish = match expected["finish_reason"].as_str() {
            Some("stop") if !want.is_empty() => FinishReason::ToolCalls,
            Some(raw) => FinishReason::from_raw(raw),
            None => FinishReason::Stop,
        };
        assert_eq!(got.finish, Some(finish), "{name}: finish");
        let usage = got.usage.unwrap();
        assert_eq!(
            usage.input_tokens,
            expected["usage"]["prompt_eval_count"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            usage.output_tokens,
            expected["usage"]["eval_count"].as_u64().unwrap(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_tool_round_over_the_native_api() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(|request: &Request| {
            let body = String::from_utf8_lossy(&request.body);
            let lines = if body.contains(r#""role":"tool""#) {
                [
                    json!({"message": {"role": "assistant", "content": "", "thinking": "It said 5."}, "done": false}),
                    json!({"message": {"role": "assistant", "content": "2 + 3 = 5"}, "done": false}),
                    json!({"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 30, "eval_count": 7}),
                ]
            } else {
                [
                    json!({"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}, "done": false}),
                    json!({"message": {"role": "assistant", "content": ""}, "done": false}),
                    json!({"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 20, "eval_count": 9}),
                ]
            };
            let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
            ResponseTemplate::new(200).set_body_raw(body, "application/x-ndjson")
        })
        .mount(&server)
        .await;
    let add = from_fn("add", "Add.", |v: Value, _| async move {
        v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
    });
    let agent = Agent::builder()
        .provider(
            Ollama::new(server.uri())
                .model("qwen3:8b")
                .think(true)
                .option("num_ctx", json!(8192)),
        )
        .system_prompt("Add.")
        .tool(add)
        .build();
    let reply = agent.handle("a", "2 + 3?").await.unwrap();
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.reasoning.as_deref(), Some("It said 5."));
    assert_eq!(reply.usage.input_tokens, 50);
    let bodies = bodies(&server).await;
    insta::assert_json_snapshot!("ollama_tool_round_second_request", bodies[1]);
    assert_eq!(bodies[0]["think"], true);
    assert_eq!(bodies[0]["options"]["num_ctx"], 8192);
}

#[tokio::test]
async fn errors_are_passed_on_verbatim_with_a_hint() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string(
            r#"{"error":"registry.ollama.ai/library/gemma3:1b does not support tools"}"#,
        ))
        .mount(&server)
        .await;
    let provider = Ollama::new(server.uri())
        .model("gemma3:1b")
        .retry(RetryPolicy::none());
    let error = assemble(&provider, &[Message::user("x")])
        .await
        .unwrap_err();
    assert_eq!(
        error.chain(),
        "server answered 400: registry.ollama.ai/library/gemma3:1b does not support tools \
         (pick a model with tool support, such as qwen3 or llama3.1, or give the agent no tools)"
    );
}

#[tokio::test]
async fn health_lists_pulled_models() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/tags"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"models": [{"name": "qwen3:8b"}, {"name": "llama3.2:latest"}]}),
            ),
        )
        .mount(&server)
        .await;
    use ferrobot::provider::Provider;
    assert!(
        Ollama::new(server.uri())
            .model("llama3.2")
            .health()
            .await
            .is_ok()
    );
    let missing = Ollama::new(server.uri()).model("mistral").health().await;
    assert_eq!(missing.model_present, Some(false));
    assert!(missing.detail.unwrap().contains("ollama pull mistral"));
}

/// A loopback server answering every chat with the text `text`.
async fn answering(text: &str) -> MockServer {
    let server = MockServer::start().await;
    let line = json!({"message": {"role": "assistant", "content": text}, "done": true, "done_reason": "stop"});
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(format!("{line}\n"), "application/x-ndjson"),
        )
        .mount(&server)
        .await;
    server
}

/// The native API has no `tool_choice`: `Required` offers the tools as
/// `Auto` does, and `Tool(name)` offers only that tool. Neither makes the
/// model call one.
#[tokio::test]
async fn forced_tool_choices_offer_only_the_tools_that_may_be_called() {
    let server = answering("ok").await;
    let provider = Ollama::new(server.uri())
        .model("m")
        .retry(RetryPolicy::none());
    let required = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Required,
        None,
    )
    .await;
    let auto = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Auto,
        None,
    )
    .await;
    assert_eq!(required, auto);
    insta::assert_json_snapshot!("ollama_tool_choice_required", required);
    let named = ToolChoice::Tool("get_time".into());
    let named = request_body(&provider, &server, &weather_tools(), &named, None).await;
    insta::assert_json_snapshot!("ollama_tool_choice_tool", named);
}

/// `format`: the answer's JSON Schema as it is (Ollama takes plain JSON
/// Schema, optional fields and all).
#[tokio::test]
async fn a_structured_answer_is_asked_for_as_format() {
    let server = answering(r#"{"city": "Paris"}"#).await;
    let provider = Ollama::new(server.uri())
        .model("m")
        .retry(RetryPolicy::none());
    assert!(provider.native_output());
    let format = forecast_format();
    let body = request_body(&provider, &server, &[], &ToolChoice::Auto, Some(&format)).await;
    assert_eq!(body["format"], format.schema);
    insta::assert_json_snapshot!("ollama_native_output", body);
}

/// Images, the user's and a tool's, go in the message's `images`, as
/// base64. Written from Ollama's documented format (see
/// `image_conversation`).
#[tokio::test]
async fn images_are_sent_in_the_messages_images() {
    let server = answering("A cat.").await;
    let provider = Ollama::new(server.uri())
        .model("m")
        .retry(RetryPolicy::none());
    let body = body_for(&provider, &server, &image_conversation(false)).await;
    insta::assert_json_snapshot!("ollama_images", body["messages"]);
}

/// `images` holds base64 only, and ferrobot never fetches an image: a URL
/// is refused before sending.
#[tokio::test]
async fn an_image_url_is_refused_before_sending() {
    let server = answering("A cat.").await;
    let provider = Ollama::new(server.uri())
        .model("m")
        .retry(RetryPolicy::none());
    let error = refused(&provider, &server, &image_conversation(true)).await;
    assert!(
        error
            .to_string()
            .contains("is a URL (https://example.com/cat.png): Ollama's native API needs"),
        "{error}"
    );
}
