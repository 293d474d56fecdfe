//! `OpenAiCompatible` over real loopback HTTP.

use std::time::Duration;

use ferrobot::provider::{
    ChatRequest, FinishReason, OpenAiCompatible, OutputFormat, Provider, ProviderError,
    RetryPolicy, StreamEvent, ToolChoice,
};
use ferrobot::testing::{OpenAiStream, text_sse, tool_call_sse};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Message, Part};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{
    assemble, bodies, body_for, events, forecast_format, image_conversation, last_round_bodies,
    refused, request_body, weather_tools,
};

fn sse(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream")
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn client(server: &MockServer) -> OpenAiCompatible {
    OpenAiCompatible::new(format!("{}/v1", server.uri()))
        .model("test-model")
        .retry(
            RetryPolicy::builder()
                .initial_backoff(Duration::from_millis(10))
                .build(),
        )
}

/// Serves the raw SSE text and returns the assembled reply.
async fn assemble_raw(raw: &str) -> ferrobot::provider::Assembled {
    let server = server_answering(sse(raw)).await;
    assemble(&client(&server), &[Message::user("hi")])
        .await
        .unwrap()
}

#[tokio::test]
async fn a_tool_round_sends_the_expected_request_bodies() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let body = String::from_utf8_lossy(&request.body);
            if body.contains(r#""role":"tool""#) {
                sse(text_sse("2 + 3 = 5"))
            } else {
                sse(tool_call_sse("call_1", "add", &json!({"a": 2, "b": 3})))
            }
        })
        .mount(&server)
        .await;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Add {
        /// The first operand.
        a: i64,
        /// The second operand.
        b: i64,
    }
    let agent = Agent::builder()
        .provider(
            client(&server)
                .temperature(0.2)
                .max_tokens(256)
                .extra_body("seed", json!(7)),
        )
        .system_prompt("You add numbers.")
        .tool(from_fn(
            "add",
            "Add two integers.",
            |x: Add, _| async move { x.a + x.b },
        ))
        .build();
    let reply = agent.handle("alice", "what is 2 + 3?").await.unwrap();
    assert_eq!(reply.text, "2 + 3 = 5");
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    insta::assert_json_snapshot!("tool_round_first_request", bodies[0]);
    insta::assert_json_snapshot!("tool_round_second_request", bodies[1]);
}

/// Past the round cap the model gets no tools at all: a conversation
/// holding tool calls is fine without them here, and a server that ignores
/// `tool_choice` can't call what it wasn't shown.
#[tokio::test]
async fn past_the_round_cap_no_tools_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            if body.get("tools").is_some() {
                sse(tool_call_sse("call_1", "count", &json!({})))
            } else {
                sse(text_sse("Still zero."))
            }
        })
        .mount(&server)
        .await;
    let bodies = last_round_bodies(client(&server), &server).await;
    assert!(bodies[1].get("tools").is_none() && bodies[1].get("tool_choice").is_none());
    assert!(bodies[1]["messages"].to_string().contains("tool_calls"));
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_shown() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer sk-secret-123"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_string(r#"{"error":{"message":"Incorrect API key provided"}}"#),
        )
        .mount(&server)
        .await;
    let provider = client(&server).api_key("sk-secret-123");
    assert!(!format!("{provider:?}").contains("sk-secret"));
    let error = assemble(&provider, &[Message::user("hi")])
        .await
        .unwrap_err();
    let shown = format!("{} {error:?}", error.chain());
    assert!(
        shown.contains("server answered 401: Incorrect API key provided"),
        "{shown}"
    );
    assert!(!shown.contains("sk-secret"), "{shown}");
}

#[tokio::test]
async fn non_streaming_mode_yields_the_same_message() {
    let answer = OpenAiStream::new()
        .text("Sure.")
        .tool_call("c9", "ping", &json!({"host": "::1"}))
        .finish("tool_calls")
        .usage(7, 3);
    let server =
        server_answering(ResponseTemplate::new(200).set_body_json(answer.into_completion())).await;
    let assembled = assemble(&client(&server).streaming(false), &[Message::user("ping")])
        .await
        .unwrap();
    assert_eq!(assembled.message.text(), "Sure.");
    assert_eq!(
        assembled.message.tool_calls().next().unwrap().arguments,
        json!({"host": "::1"})
    );
    assert_eq!(assembled.finish, Some(FinishReason::ToolCalls));
    assert_eq!(assembled.usage.unwrap().input_tokens, 7);
    assert_eq!(bodies(&server).await[0]["stream"], json!(false));
}

#[tokio::test]
async fn fragments_without_index_and_with_empty_names_assemble() {
    let raw = [
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"first","arguments":""}}]}}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"","arguments":"{\"x\":"}}]}}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"second","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
        "data: [DONE]",
    ]
    .join("\n\n");
    let message = assemble_raw(&raw).await.message;
    let calls: Vec<_> = message
        .tool_calls()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [("a", "first", json!({"x": 1})), ("b", "second", json!({}))]
    );
}

#[tokio::test]
async fn interleaved_calls_and_calls_in_the_finish_chunk_assemble() {
    let stream = OpenAiStream::new()
        .tool_call_fragment(json!({"index": 0, "id": "c0", "function": {"name": "f", "arguments": "{\"a\""}}))
        .tool_call_fragment(json!({"index": 1, "id": "c1", "function": {"name": "g", "arguments": "{\"b\""}}))
        .tool_call_fragment(json!({"index": 0, "function": {"arguments": ":1}"}}))
        .chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ":2}"}}]}, "finish_reason": "tool_calls"}]}));
    let message = assemble_raw(&stream.into_sse()).await.message;
    let args: Vec<_> = message.tool_calls().map(|c| c.arguments.clone()).collect();
    assert_eq!(args, [json!({"a": 1}), json!({"b": 2})]);
}

#[tokio::test]
async fn empty_finish_reason_reasoning_fields_and_usage_are_understood() {
    let stream = OpenAiStream::new()
        .chunk(json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me "}, "finish_reason": ""}]}))
        .chunk(json!({"choices": [{"index": 0, "delta": {"reasoning": "think."}, "finish_reason": ""}]}))
        .text("Answer")
        .finish("stop")
        .chunk(json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9,
            "completion_tokens_details": {"reasoning_tokens": 4}, "prompt_tokens_details": {"cached_tokens": 2}}}));
    let got = assemble_raw(&stream.into_sse()).await;
    assert_eq!(got.message.reasoning().as_deref(), Some("Let me think."));
    assert_eq!(got.message.text(), "Answer");
    let usage = got.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
            usage.cached_tokens
        ),
        (5, 9, 4, 2)
    );
}

#[tokio::test]
async fn think_tags_become_reasoning_unless_turned_off() {
    let body = OpenAiStream::new()
        .text("<thi")
        .text("nk>plan</think>\n\nDone")
        .finish("stop")
        .into_sse();
    let server = server_answering(sse(body)).await;
    let split = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap()
        .message;
    assert_eq!(
        (split.text().as_str(), split.reasoning().as_deref()),
        ("Done", Some("plan"))
    );
    let kept = assemble(
        &client(&server).split_think_tags(false),
        &[Message::user("x")],
    )
    .await
    .unwrap()
    .message;
    assert_eq!(kept.text(), "<think>plan</think>\n\nDone");
}

#[tokio::test]
async fn comments_keep_alives_and_crlf_line_ends_are_accepted() {
    let raw = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\n: ping\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n";
    assert_eq!(assemble_raw(raw).await.message.text(), "ab");
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_surfaced_after_what_streamed() {
    let body = OpenAiStream::new()
        .text("Hal")
        .chunk(json!({"error": {"message": "upstream overloaded", "code": 502}}))
        .into_sse();
    let server = server_answering(sse(body)).await;
    let provider = client(&server);
    let messages = [Message::user("x")];
    let mut stream = provider.stream(ferrobot::provider::ChatRequest::new(&messages));
    use futures_util::StreamExt;
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        StreamEvent::TextDelta("Hal".into())
    );
    let error = stream.next().await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "server reported an error mid-stream: upstream overloaded"
    );
    // Something had streamed, so the call was not retried.
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn error_statuses_surface_the_servers_own_message() {
    let cases = [
        (
            404,
            r#"{"error":"model \"qwen9\" not found, try pulling it first"}"#,
            "server answered 404: model \"qwen9\" not found, try pulling it first",
        ),
        (
            400,
            r#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError"}"#,
            "server answered 400: max_tokens is too large",
        ),
        (400, "plain words", "server answered 400: plain words"),
    ];
    for (status, body, shown) in cases {
        let server = server_answering(ResponseTemplate::new(status).set_body_string(body)).await;
        let error = assemble(&client(&server), &[Message::user("x")])
            .await
            .unwrap_err();
        assert_eq!(error.chain(), shown);
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "a {status} is not retried"
        );
    }
}

#[tokio::test]
async fn refusals_and_extra_choices_follow_the_first_choice() {
    let raw = [
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}},{"index":1,"delta":{"content":"other"}}]}"#,
        r#"data: {"choices":[{"index":1,"delta":{"content":" choice"}},{"index":0,"delta":{"refusal":"I can't help with that."}}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "data: [DONE]",
    ]
    .join("\n\n");
    let message = assemble_raw(&raw).await.message;
    assert_eq!(message.text(), "");
    assert_eq!(
        message.refusal().as_deref(),
        Some("I can't help with that.")
    );
}

#[tokio::test]
async fn missing_tool_call_ids_are_generated_and_sent_back_unchanged() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            if String::from_utf8_lossy(&request.body).contains(r#""role":"tool""#) {
                sse(text_sse("ok"))
            } else {
                sse(OpenAiStream::new()
                    .tool_call_fragment(json!({"index": 0, "id": "", "function": {"name": "ping", "arguments": "{}"}}))
                    .tool_call_fragment(json!({"index": 1, "function": {"name": "ping", "arguments": ""}}))
                    .finish("tool_calls")
                    .into_sse())
            }
        })
        .mount(&server)
        .await;
    let agent = Agent::builder()
        .provider(client(&server))
        .tool(from_fn("ping", "Ping.", |_: Value, _| async { "pong" }))
        .build();
    agent.handle("bob", "ping twice").await.unwrap();
    let second = &bodies(&server).await[1];
    let messages = second["messages"].as_array().unwrap();
    let call_ids: Vec<&str> = messages[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let result_ids: Vec<&str> = messages[2..]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(call_ids.len(), 2);
    assert!(call_ids.iter().all(|id| id.starts_with("call_")));
    assert_ne!(call_ids[0], call_ids[1]);
    assert_eq!(call_ids, result_ids);
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_honouring_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "150")
                .set_body_string("slow down"),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(text_sse("finally")))
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let got = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap();
    assert_eq!(got.message.text(), "finally");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "Retry-After was not honoured"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn giving_up_says_what_was_tried() {
    let server = server_answering(ResponseTemplate::new(502).set_body_string("bad gateway")).await;
    let error = assemble(&client(&server), &[Message::user("x")])
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::GaveUp { attempts: 3, .. }));
    assert!(
        error.chain().starts_with("gave up after 3 attempts over"),
        "{}",
        error.chain()
    );
    assert!(
        error.chain().ends_with("server answered 502: bad gateway"),
        "{}",
        error.chain()
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_naming_the_endpoint() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"))
        .model("m")
        .retry(RetryPolicy::none());
    let error = events(&provider, &[Message::user("x")]).await.unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "could not reach http://127.0.0.1:{port}/v1/chat/completions"
        )),
        "{error}"
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_missing_model_is_a_configuration_error() {
    let provider = OpenAiCompatible::new("http://127.0.0.1:9/v1");
    let error = events(&provider, &[Message::user("x")]).await.unwrap_err();
    assert!(error.to_string().contains("no model set"), "{error}");
}

#[tokio::test]
async fn health_reports_reachability_and_the_model() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"object": "list", "data": [{"id": "qwen3:latest"}, {"id": "test-model"}]}),
        ))
        .mount(&server)
        .await;
    let health = client(&server).health().await;
    assert!(
        health.is_ok() && health.model_present == Some(true),
        "{health:?}"
    );
    let qwen = client(&server).model("qwen3").health().await;
    assert_eq!(
        qwen.model_present,
        Some(true),
        "`qwen3` is served as `qwen3:latest`"
    );
    let missing = client(&server).model("llama9").health().await;
    assert_eq!(missing.model_present, Some(false));
    assert!(!missing.is_ok());
    assert!(missing.detail.unwrap().contains("llama9"));
    let unset = OpenAiCompatible::new(format!("{}/v1", server.uri()))
        .health()
        .await;
    assert!(unset.detail.unwrap().contains("no model set"));

    let locked = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_string(r#"{"error":{"message":"Invalid API key"}}"#),
        )
        .mount(&locked)
        .await;
    let denied = client(&locked).health().await;
    assert!(denied.reachable && !denied.is_ok());
    assert!(
        denied
            .detail
            .unwrap()
            .ends_with("/v1/models: server answered 401: Invalid API key")
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"))
        .model("m")
        .health()
        .await;
    assert!(!down.reachable);
    assert!(down.latency < Duration::from_secs(6));
}

#[tokio::test]
async fn check_health_says_what_to_fix() {
    use ferrobot::provider::HealthError;

    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"object": "list", "data": [{"id": "test-model"}]})),
        )
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let health = client(&server).check_health().await.unwrap();
    assert!(health.is_ok(), "{health:?}");

    let missing = client(&server)
        .model("llama9")
        .check_health()
        .await
        .unwrap_err();
    assert_eq!(
        missing,
        HealthError::ModelMissing {
            base_url: url.clone(),
            model: "llama9".into(),
            env_prefix: None,
        }
    );
    assert_eq!(
        missing.to_string(),
        format!(
            "the model server at {url} does not serve the model `llama9` — choose a model it serves"
        )
    );

    let unset = OpenAiCompatible::new(&url)
        .check_health()
        .await
        .unwrap_err();
    assert_eq!(
        unset.to_string(),
        format!("no model set for {url}: call `.model(\"…\")`, e.g. `.model(\"qwen3:8b\")`")
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = OpenAiCompatible::new(format!("http://127.0.0.1:{port}/v1"))
        .model("m")
        .check_health()
        .await
        .unwrap_err();
    let message = down.to_string();
    assert!(
        message.starts_with(&format!(
            "can't reach the model server at http://127.0.0.1:{port}/v1: could not reach"
        )),
        "{message}"
    );
    assert!(
        message.ends_with("— start it, or point the client at a running OpenAI-compatible server"),
        "{message}"
    );
}

#[tokio::test]
async fn history_with_every_part_converts_to_the_wire_format() {
    let server = server_answering(sse(text_sse("ok"))).await;
    let messages = [
        Message::user("hi"),
        Message::new(
            ferrobot::Role::Assistant,
            vec![
                Part::Reasoning(ferrobot::Reasoning {
                    text: "hmm".into(),
                    ..Default::default()
                }),
                Part::text("Checking."),
                Part::ToolCall(ferrobot::ToolCall::new("c1", "disk", json!({"path": "/"}))),
                Part::ToolCall(ferrobot::ToolCall::new("c2", "disk", json!("{not json"))),
            ],
        ),
        Message::tool_results([
            ferrobot::ToolResult::ok("c1", "42 GB free"),
            ferrobot::ToolResult::error("c2", "bad arguments"),
        ]),
        Message::new(
            ferrobot::Role::Assistant,
            vec![Part::Refusal { text: "No.".into() }],
        ),
    ];
    assemble(&client(&server), &messages).await.unwrap();
    insta::assert_json_snapshot!("history_wire_format", bodies(&server).await[0]["messages"]);
}

#[tokio::test]
async fn a_server_that_stops_sending_times_out_after_what_it_sent() {
    let server = crate::support::serve_then_stall(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    )
    .await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.url()))
        .model("m")
        .timeouts(Duration::from_secs(1), Duration::from_millis(300));
    let messages = [Message::user("x")];
    let mut stream = provider.stream(ferrobot::provider::ChatRequest::new(&messages));
    use futures_util::StreamExt;
    let started = std::time::Instant::now();
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
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn multi_line_data_and_a_last_event_without_a_blank_line_are_read() {
    let raw = "data: {\"choices\":[{\"index\":0,\n\
               data: \"delta\":{\"content\":\"two lines\"}}]}\n\n\
               data:{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
               data: [DONE]";
    let got = assemble_raw(raw).await;
    assert_eq!(got.message.text(), "two lines");
    assert_eq!(got.finish, Some(FinishReason::Stop));
}

#[tokio::test]
async fn strict_tools_send_the_strict_schema_where_it_can_be_expressed() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Find {
        /// What to look for.
        #[allow(dead_code)]
        pattern: String,
        /// How deep.
        #[allow(dead_code)]
        depth: Option<u32>,
    }
    let server = server_answering(sse(text_sse("ok"))).await;
    let find = from_fn("find", "Find files.", |_: Find, _| async {});
    let free = from_fn("free", "Anything goes.", |_: Value, _| async {});
    let agent = Agent::builder()
        .provider(client(&server).strict_tools(true))
        .tool(find)
        .tool(free)
        .build();
    agent.handle("a", "find").await.unwrap();
    insta::assert_json_snapshot!(
        "strict_tools_request_tools",
        bodies(&server).await[0]["tools"]
    );
    let tools = bodies(&server).await[0]["tools"].clone();
    assert_eq!(tools[0]["function"]["strict"], json!(true));
    assert_eq!(
        tools[0]["function"]["parameters"]["required"],
        json!(["depth", "pattern"])
    );
    assert!(tools[1]["function"].get("strict").is_none());
}

/// `"required"`, and the one function to call, as chat completions says
/// them (the corpus's recordings of `OpenAI` and Groq send `"required"` the
/// same way); under `Tool(name)` only that tool is offered, so a server
/// that ignores the object (llama.cpp reads it as `auto`) can call nothing
/// else. `Auto` says nothing.
#[tokio::test]
async fn forced_tool_choices_are_sent_as_chat_completions_says_them() {
    let server = server_answering(sse(text_sse("ok"))).await;
    let provider = client(&server);
    let required = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Required,
        None,
    )
    .await;
    insta::assert_json_snapshot!("openai_tool_choice_required", required);
    let named = ToolChoice::Tool("get_time".into());
    let named = request_body(&provider, &server, &weather_tools(), &named, None).await;
    insta::assert_json_snapshot!("openai_tool_choice_tool", named);
    let auto = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Auto,
        None,
    )
    .await;
    assert!(auto.get("tool_choice").is_none(), "{auto}");
    assert_eq!(auto["tools"].as_array().unwrap().len(), 2);
}

/// `response_format` with the strict form of the schema, which `OpenAI`
/// keeps to and llama.cpp's server makes a grammar of.
#[tokio::test]
async fn a_structured_answer_is_asked_for_as_a_strict_json_schema() {
    let server = server_answering(sse(text_sse(r#"{"city": "Paris"}"#))).await;
    let provider = client(&server);
    assert!(provider.native_output());
    let format = forecast_format();
    let body = request_body(&provider, &server, &[], &ToolChoice::Auto, Some(&format)).await;
    insta::assert_json_snapshot!("openai_native_output", body);
}

/// A schema strict mode can't express (a map) goes as it is, with
/// `strict: false`, rather than not at all.
#[tokio::test]
async fn a_schema_strict_mode_cant_express_is_sent_plain() {
    let server = server_answering(sse(text_sse("{}"))).await;
    let schema = json!({
        "type": "object",
        "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "required": ["counts"],
    });
    let format = OutputFormat::new("counts", schema.clone());
    let body = request_body(
        &client(&server),
        &server,
        &[],
        &ToolChoice::Auto,
        Some(&format),
    )
    .await;
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "counts", "schema": schema, "strict": false}})
    );
}

/// A request's own `tool_choice` and `response_format` replace those of
/// `extra_body`, which go with the other requests.
#[tokio::test]
async fn the_requests_own_fields_replace_extra_body_ones() {
    let server = server_answering(sse(text_sse("{}"))).await;
    let provider = client(&server)
        .extra_body("tool_choice", json!("auto"))
        .extra_body("response_format", json!({"type": "json_object"}));
    let plain = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Auto,
        None,
    )
    .await;
    assert_eq!(plain["tool_choice"], "auto");
    assert_eq!(plain["response_format"], json!({"type": "json_object"}));
    let format = forecast_format();
    let own = request_body(
        &provider,
        &server,
        &weather_tools(),
        &ToolChoice::Required,
        Some(&format),
    )
    .await;
    assert_eq!(own["tool_choice"], "required");
    assert_eq!(own["response_format"]["type"], "json_schema");
    // One key each: the raw body holds no second copy.
    let raw = server
        .received_requests()
        .await
        .unwrap()
        .pop()
        .unwrap()
        .body;
    let raw = String::from_utf8(raw).unwrap();
    assert_eq!(raw.matches("\"tool_choice\"").count(), 1, "{raw}");
    assert_eq!(raw.matches("\"response_format\"").count(), 1, "{raw}");
}

/// A forced call of a tool the request doesn't describe, or with no tools
/// at all, fails before anything is sent, saying what to change; servers
/// would answer 400, or answer in text.
#[tokio::test]
async fn a_forced_call_with_nothing_to_call_is_refused_before_sending() {
    use futures_util::StreamExt;
    let server = server_answering(sse(text_sse("ok"))).await;
    let provider = client(&server);
    let messages = [Message::user("hi")];
    let tools = weather_tools();
    let missing = ToolChoice::Tool("get_tide".into());
    let request = ChatRequest::new(&messages)
        .tools(&tools)
        .tool_choice(&missing);
    let error = provider.stream(request).next().await.unwrap().unwrap_err();
    assert!(
        matches!(&error, ProviderError::InvalidRequest { provider, .. } if provider == "openai"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "openai can't send this request: the tool choice names `get_tide`, which isn't among \
         the request's tools: describe it in `ChatRequest::tools`, or name another"
    );
    assert!(!error.is_retryable());
    let request = ChatRequest::new(&messages).tool_choice(&ToolChoice::Required);
    let error = provider.stream(request).next().await.unwrap().unwrap_err();
    assert!(
        error.to_string().contains("the request describes no tools"),
        "{error}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// A user's images go as content parts after the text (`image_url`: a
/// `data:` URI, or the URL); tool messages hold only text, so the image a
/// tool showed follows the round's tool messages in a user message naming
/// its call. Written from `OpenAI`'s documented format (see
/// `image_conversation`).
#[tokio::test]
async fn images_are_sent_as_image_url_parts() {
    let server = server_answering(sse(text_sse("A cat."))).await;
    let body = body_for(&client(&server), &server, &image_conversation(true)).await;
    insta::assert_json_snapshot!("openai_images", body["messages"]);
}

/// A request whose images are over `OpenAI`'s documented 50 MB is refused
/// before anything is sent, saying what to do.
#[tokio::test]
async fn images_over_the_request_limit_are_refused_before_sending() {
    let server = server_answering(sse(text_sse("A cat."))).await;
    let big = || ferrobot::Image::png(vec![0; 18 << 20]);
    let mut messages = image_conversation(false);
    messages[0]
        .parts
        .extend([big(), big(), big()].map(Part::image));
    let error = refused(&client(&server), &server, &messages).await;
    assert_eq!(
        error.to_string(),
        "openai can't send this request: the request's images come to 56.6 MB, over the \
         50 MB of images in one request OpenAI's API takes: send fewer or smaller images \
         (resize or compress them, or leave older ones out of the conversation)"
    );
}
