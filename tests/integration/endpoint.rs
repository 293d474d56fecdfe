//! What every dialect gets from the shared endpoint: observers of the wire,
//! extra headers, keys kept out of sight, and the context window read from
//! each kind of server's model metadata (realistic bodies, over loopback).

use std::sync::{Arc, Mutex};

use ferrobot::Message;
use ferrobot::provider::dialect::{Dialect, Http};
use ferrobot::provider::{
    Anthropic, ContextWindow, Gemini, Observe, Ollama, OpenAiCompatible, OpenAiResponses, Outcome,
    Provider, RetryPolicy, WireRequest, WireResponse,
};
use ferrobot::testing::text_sse;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::assemble;

/// Everything an observer was shown, as text.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Observe for Log {
    fn request(&self, exchange: u64, request: &WireRequest<'_>) {
        let headers: Vec<String> = request
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect();
        self.0.lock().unwrap().push(format!(
            "{exchange} {} {} [{}] {}",
            request.method,
            request.url,
            headers.join(", "),
            String::from_utf8_lossy(request.body)
        ));
    }
    fn response(&self, exchange: u64, response: &WireResponse<'_>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{exchange} status {}", response.status));
    }
    fn chunk(&self, exchange: u64, bytes: &[u8]) {
        self.0.lock().unwrap().push(format!(
            "{exchange} chunk {}",
            String::from_utf8_lossy(bytes)
        ));
    }
    fn end(&self, exchange: u64, outcome: Outcome<'_>) {
        let outcome = match outcome {
            Outcome::Complete => "complete".to_owned(),
            Outcome::Failed(error) => format!("failed: {}", error.chain()),
            Outcome::Abandoned => "abandoned".to_owned(),
            _ => "other".to_owned(),
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("{exchange} end {outcome}"));
    }
}

#[tokio::test]
async fn an_observer_sees_the_bytes_of_every_try_with_the_key_redacted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string(r#"{"error":"busy"}"#))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let answer = text_sse("Hello");
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer sk-secret"))
        .and(header("x-team", "blue"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(answer.clone(), "text/event-stream"))
        .mount(&server)
        .await;
    let log = Arc::new(Log::default());
    let provider = OpenAiCompatible::new(format!("{}/v1", server.uri()))
        .model("m")
        .api_key("sk-secret")
        .header("x-team", "blue")
        .header("x-gateway-token", "tok-secret")
        .retry(
            RetryPolicy::builder()
                .initial_backoff(std::time::Duration::from_millis(1))
                .build(),
        )
        .observe(log.clone());
    let reply = assemble(&provider, &[Message::user("hi")]).await.unwrap();
    assert_eq!(reply.message.text(), "Hello");

    let lines = log.lines();
    let all = lines.join("\n");
    assert!(
        !all.contains("sk-secret") && !all.contains("tok-secret"),
        "{all}"
    );
    // Two tries, each with its own number: a 503 with its body, then the
    // stream. (Numbers are unique in the process, so other tests' exchanges
    // may come between them.)
    let number = |line: &str| -> u64 { line.split(' ').next().unwrap().parse().unwrap() };
    let (first, second) = (number(&lines[0]), number(&lines[4]));
    assert!(second > first, "{all}");
    assert!(
        lines[0].starts_with(&format!(
            "{first} POST {}/v1/chat/completions [",
            server.uri()
        )),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("authorization: [redacted]"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("x-team: blue"), "{}", lines[0]);
    assert!(
        lines[0].contains("x-gateway-token: [redacted]"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(r#"] {"model":"m","messages":[{"role":"user","content":"hi"}]"#),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], format!("{first} status 503"));
    assert_eq!(lines[2], format!(r#"{first} chunk {{"error":"busy"}}"#));
    assert_eq!(lines[3], format!("{first} end complete"));
    assert!(
        lines[4].starts_with(&format!("{second} POST ")),
        "{}",
        lines[4]
    );
    assert_eq!(lines[5], format!("{second} status 200"));
    let streamed: String = lines[6..lines.len() - 1]
        .iter()
        .map(|line| line.strip_prefix(&format!("{second} chunk ")).unwrap())
        .collect();
    assert_eq!(streamed, answer);
    assert_eq!(lines.last().unwrap(), &format!("{second} end complete"));
}

#[tokio::test]
async fn an_unreachable_server_ends_the_exchange_as_failed() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = Arc::new(Log::default());
    let provider = Ollama::new(format!("http://127.0.0.1:{port}"))
        .model("m")
        .retry(RetryPolicy::none())
        .observe(log.clone());
    assert!(assemble(&provider, &[Message::user("hi")]).await.is_err());
    let lines = log.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].contains("end failed: could not reach"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn debug_output_shows_no_key_in_any_dialect() {
    fn shown<D: Dialect>(provider: Http<D>) -> String {
        format!(
            "{:?}",
            provider
                .api_key("sk-very-secret")
                .header("authorization-extra-token", "t0ken-secret")
        )
    }
    for debug in [
        shown(OpenAiCompatible::new("http://u:pw@h/v1")),
        shown(Ollama::new("http://h")),
        shown(Anthropic::new()),
        shown(Gemini::new()),
        shown(OpenAiResponses::new("http://h/v1")),
    ] {
        assert!(!debug.contains("very-secret"), "{debug}");
        assert!(!debug.contains("t0ken"), "{debug}");
        assert!(!debug.contains("pw"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
}

#[tokio::test]
async fn a_header_http_cannot_carry_fails_every_call_with_advice() {
    let provider = OpenAiCompatible::new("http://127.0.0.1:9/v1")
        .model("m")
        .header("x-bad", "line\nbreak");
    let error = assemble(&provider, &[Message::user("hi")])
        .await
        .unwrap_err();
    assert!(error.chain().contains("header value"), "{}", error.chain());
}

#[tokio::test]
async fn a_key_http_cannot_carry_fails_every_call_with_advice() {
    let provider = OpenAiCompatible::new("http://127.0.0.1:9/v1")
        .model("m")
        .api_key("sk-\"quoted\"\nkey");
    for _ in 0..2 {
        let error = assemble(&provider, &[Message::user("hi")])
            .await
            .unwrap_err();
        assert!(
            error
                .chain()
                .contains("the API key holds characters no HTTP header can carry"),
            "{}",
            error.chain()
        );
        assert!(!error.chain().contains("quoted"), "{}", error.chain());
    }
}

/// A base URL a request can't go to says so before anything is sent, and
/// how to write one; nothing is retried.
#[tokio::test]
async fn a_base_url_that_is_not_an_http_address_is_explained() {
    for (base, reason) in [
        (
            "localhost:11434/v1",
            "its scheme `localhost` is not http or https",
        ),
        ("127.0.0.1:11434/v1", "relative URL without a base"),
        (
            "ftp://models.example/v1",
            "its scheme `ftp` is not http or https",
        ),
        ("http://[::1/v1", "invalid IPv6 address"),
    ] {
        let provider = OpenAiCompatible::new(base)
            .model("m")
            .retry(RetryPolicy::default());
        let error = assemble(&provider, &[Message::user("hi")])
            .await
            .unwrap_err();
        assert!(
            matches!(error, ferrobot::provider::ProviderError::Config(_)),
            "{base}: {error:?}"
        );
        let chain = error.chain();
        assert!(chain.contains(reason), "{base}: {chain}");
        assert!(
            chain.contains(
                "the base URL must be an http(s) address such as `http://localhost:11434/v1`"
            ),
            "{base}: {chain}"
        );
    }
}

/// A base URL's `user:password@` is sent as `Authorization: Basic` (a
/// server behind a proxy with basic authentication), decoded, and never
/// shown; an API key's header takes its place.
#[tokio::test]
async fn a_base_url_s_credentials_are_sent_as_basic_authentication() {
    let server = MockServer::start().await;
    // "bot:p@ss word", base64.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Basic Ym90OnBAc3Mgd29yZA=="))
        .respond_with(ResponseTemplate::new(200).set_body_raw(text_sse("in"), "text/event-stream"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-key"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(text_sse("keyed"), "text/event-stream"),
        )
        .mount(&server)
        .await;
    let base = server.uri().replace("http://", "http://bot:p%40ss%20word@") + "/v1";
    let log = Arc::new(Log::default());
    let provider = OpenAiCompatible::new(&base).model("m").observe(log.clone());
    let reply = assemble(&provider, &[Message::user("hi")]).await.unwrap();
    assert_eq!(reply.message.text(), "in");
    let shown = log.lines().join("\n");
    assert!(
        !shown.contains("p%40ss") && !shown.contains("Ym90"),
        "{shown}"
    );
    let keyed = OpenAiCompatible::new(&base).model("m").api_key("sk-key");
    let reply = assemble(&keyed, &[Message::user("hi")]).await.unwrap();
    assert_eq!(reply.message.text(), "keyed");
}

#[tokio::test]
async fn dialect_keys_go_in_their_own_headers() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("x-api-key", "ak"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": []})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models/gemini-2.5-flash"))
        .and(header("x-goog-api-key", "gk"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": "models/gemini-2.5-flash"})),
        )
        .mount(&server)
        .await;
    let claude = Anthropic::with_base_url(server.uri())
        .model("c")
        .api_key("ak");
    assert!(claude.health().await.is_ok(), "{:?}", claude.health().await);
    let gemini = Gemini::with_base_url(server.uri())
        .model("gemini-2.5-flash")
        .api_key("gk");
    assert!(gemini.health().await.is_ok(), "{:?}", gemini.health().await);
}

// ---- context windows ----------------------------------------------------------

async fn get(server: &MockServer, route: &str, body: Value) {
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(server)
        .await;
}

#[tokio::test]
async fn vllm_says_max_model_len_and_the_answer_is_kept() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [{
                "id": "Qwen/Qwen3-8B", "object": "model", "created": 1_747_000_000,
                "owned_by": "vllm", "root": "Qwen/Qwen3-8B", "parent": null,
                "max_model_len": 32768,
                "permission": [{"id": "modelperm-0a1b", "object": "model_permission", "allow_sampling": true}]
            }]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("Qwen/Qwen3-8B");
    assert_eq!(
        provider.context_window().await.unwrap(),
        Some(ContextWindow::new(32768))
    );
    // Asked once: clones share the answer.
    let clone = provider.clone();
    assert_eq!(
        clone.context_window().await.unwrap(),
        Some(ContextWindow::new(32768))
    );
}

#[tokio::test]
async fn openrouter_says_context_length_and_the_output_bound() {
    let server = MockServer::start().await;
    get(&server, "/api/v1/models", json!({"data": [
        {"id": "openai/gpt-4o-mini", "name": "OpenAI: GPT-4o-mini", "context_length": 128000,
         "architecture": {"modality": "text+image->text", "tokenizer": "GPT"},
         "pricing": {"prompt": "0.00000015", "completion": "0.0000006"},
         "top_provider": {"context_length": 128000, "max_completion_tokens": 16384, "is_moderated": true}},
        {"id": "qwen/qwen3-32b", "name": "Qwen: Qwen3 32B", "context_length": 40960,
         "top_provider": {"context_length": 40960, "max_completion_tokens": null, "is_moderated": false}}
    ]})).await;
    let provider =
        OpenAiCompatible::new(format!("{}/api/v1", server.uri())).model("openai/gpt-4o-mini");
    assert_eq!(
        provider.context_window().await.unwrap(),
        Some(ContextWindow::new(128_000).with_max_output(16384))
    );
    let qwen = provider.model("qwen/qwen3-32b");
    assert_eq!(
        qwen.context_window().await.unwrap(),
        Some(ContextWindow::new(40960))
    );
}

#[tokio::test]
async fn llama_cpp_says_the_window_it_runs_with_in_props() {
    let server = MockServer::start().await;
    get(&server, "/v1/models", json!({
        "models": [{"name": "tiny", "model": "tiny", "type": "model", "capabilities": ["completion"]}],
        "object": "list",
        "data": [{"id": "tiny", "object": "model", "created": 1_760_000_000, "owned_by": "llamacpp",
                  "meta": {"vocab_type": 2, "n_vocab": 151_936, "n_ctx_train": 32768, "n_embd": 64,
                           "n_params": 19_546_176, "size": 45_000_000}}]
    })).await;
    get(&server, "/props", json!({
        "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": 4096, "speculative": false,
                                        "is_processing": false, "params": {"n_predict": -1, "temperature": 0.8}},
        "total_slots": 1, "model_path": "/models/tiny.gguf", "chat_template": "…", "build_info": "b6000-abc"
    })).await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("tiny");
    assert_eq!(
        provider.context_window().await.unwrap(),
        Some(ContextWindow::new(4096))
    );
    // Without `/props`, what the model was trained for.
    let bare = MockServer::start().await;
    get(&bare, "/v1/models", json!({"object": "list", "data": [
        {"id": "tiny", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx_train": 32768}}]})).await;
    let provider = OpenAiCompatible::new(format!("{}/v1", bare.uri())).model("tiny");
    assert_eq!(
        provider.context_window().await.unwrap(),
        Some(ContextWindow::new(32768))
    );
}

#[tokio::test]
async fn openai_says_nothing_and_a_model_outside_the_list_is_asked_by_name() {
    let server = MockServer::start().await;
    get(
        &server,
        "/v1/models",
        json!({"object": "list", "data": [
        {"id": "gpt-4o-mini", "object": "model", "created": 1_721_172_741, "owned_by": "system"}]}),
    )
    .await;
    get(&server, "/v1/models/ft:gpt-4o-mini:acme", json!(
        {"id": "ft:gpt-4o-mini:acme", "object": "model", "owned_by": "acme", "context_window": 65536})).await;
    let openai = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("gpt-4o-mini");
    assert_eq!(openai.context_window().await.unwrap(), None);
    let tuned = openai.model("ft:gpt-4o-mini:acme");
    assert_eq!(
        tuned.context_window().await.unwrap(),
        Some(ContextWindow::new(65536))
    );
    let unknown = tuned.model("nope");
    assert_eq!(unknown.context_window().await.unwrap(), None);
    // The Responses dialect reads the same lists.
    let responses =
        OpenAiResponses::new(format!("{}/v1", server.uri())).model("ft:gpt-4o-mini:acme");
    assert_eq!(
        responses.context_window().await.unwrap(),
        Some(ContextWindow::new(65536))
    );
}

/// `/api/show` as Ollama 0.9 answers it for qwen3 (trimmed of the template
/// and the license).
fn ollama_show(parameters: &str) -> Value {
    json!({
        "modelfile": "FROM /root/.ollama/models/blobs/sha256-a3de86cd…",
        "parameters": parameters,
        "template": "{{- if .Messages }}…",
        "details": {"parent_model": "", "format": "gguf", "family": "qwen3", "families": ["qwen3"],
                    "parameter_size": "8.2B", "quantization_level": "Q4_K_M"},
        "model_info": {
            "general.architecture": "qwen3", "general.basename": "Qwen3", "general.file_type": 15,
            "general.parameter_count": 8_190_735_360_u64, "general.quantization_version": 2,
            "qwen3.attention.head_count": 32, "qwen3.block_count": 36,
            "qwen3.context_length": 40960, "qwen3.embedding_length": 4096,
            "tokenizer.ggml.model": "gpt2"
        },
        "capabilities": ["completion", "tools", "thinking"],
        "modified_at": "2025-06-01T10:00:00.000000000Z"
    })
}

#[tokio::test]
async fn ollama_says_num_ctx_else_the_trained_length() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_json(json!({"model": "qwen3:8b"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(ollama_show(
            "repeat_penalty                 1\nstop                           \"<|im_start|>\"\ntemperature                    0.6\ntop_k                          20",
        )))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_json(json!({"model": "qwen3-long"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(ollama_show(
            "num_ctx                        16384\ntemperature                    0.6",
        )))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(
            ResponseTemplate::new(404).set_body_json(json!({"error": "model 'nope' not found"})),
        )
        .mount(&server)
        .await;
    let native = Ollama::new(server.uri()).model("qwen3:8b");
    assert_eq!(
        native.context_window().await.unwrap(),
        Some(ContextWindow::new(40960))
    );
    let set = native.clone().option("num_ctx", json!(8192));
    assert_eq!(
        set.context_window().await.unwrap(),
        Some(ContextWindow::new(8192))
    );
    let long = native.clone().model("qwen3-long");
    assert_eq!(
        long.context_window().await.unwrap(),
        Some(ContextWindow::new(16384))
    );
    let missing = native.model("nope");
    assert_eq!(missing.context_window().await.unwrap(), None);

    // Ollama's `/v1` names no window, so `/api/show` at its root is asked.
    get(
        &server,
        "/v1/models",
        json!({"object": "list", "data": [
        {"id": "qwen3:8b", "object": "model", "created": 1_748_000_000, "owned_by": "library"}]}),
    )
    .await;
    let compatible = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("qwen3:8b");
    assert_eq!(
        compatible.context_window().await.unwrap(),
        Some(ContextWindow::new(40960))
    );
}

#[tokio::test]
async fn gemini_says_input_and_output_token_limits() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models/gemini-2.5-flash"))
        .and(header("x-goog-api-key", "gk"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "models/gemini-2.5-flash", "version": "001", "displayName": "Gemini 2.5 Flash",
            "description": "Stable version of Gemini 2.5 Flash…",
            "inputTokenLimit": 1_048_576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"],
            "temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": true
        })))
        .mount(&server)
        .await;
    let gemini = Gemini::with_base_url(server.uri())
        .model("gemini-2.5-flash")
        .api_key("gk");
    assert_eq!(
        gemini.context_window().await.unwrap(),
        Some(ContextWindow::new(1_048_576).with_max_output(65536))
    );
}

#[tokio::test]
async fn anthropic_says_nothing_unless_its_card_does() {
    let server = MockServer::start().await;
    get(
        &server,
        "/v1/models/claude-sonnet-4-20250514",
        json!({
        "type": "model", "id": "claude-sonnet-4-20250514", "display_name": "Claude Sonnet 4",
        "created_at": "2025-05-22T00:00:00Z"}),
    )
    .await;
    let claude = Anthropic::with_base_url(server.uri()).model("claude-sonnet-4-20250514");
    assert_eq!(claude.context_window().await.unwrap(), None);
}

#[tokio::test]
async fn a_server_that_cannot_be_asked_is_an_error_and_is_asked_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(500).set_body_string("oops"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    get(
        &server,
        "/v1/models",
        json!({"data": [{"id": "m", "max_model_len": 2048}]}),
    )
    .await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("m");
    let error = provider.context_window().await.unwrap_err();
    assert!(
        error.chain().contains("server answered 500"),
        "{}",
        error.chain()
    );
    assert_eq!(
        provider.context_window().await.unwrap(),
        Some(ContextWindow::new(2048))
    );
    let unset = OpenAiCompatible::new(format!("{}/v1", server.uri()));
    assert!(
        unset
            .context_window()
            .await
            .unwrap_err()
            .chain()
            .contains("no model set")
    );
}
