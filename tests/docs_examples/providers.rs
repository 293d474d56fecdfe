//! The examples of `docs/providers.md`.

#[cfg(feature = "responses")]
#[test]
fn responses() {
    use ferrobot::provider::OpenAiResponses;

    let gpt = OpenAiResponses::new("https://api.openai.com/v1")
        .model("gpt-5-mini")
        .api_key_env("OPENAI_API_KEY")
        .reasoning_effort("low");
    assert!(format!("{gpt:?}").contains("gpt-5-mini"));
}

#[cfg(feature = "gemini")]
#[test]
fn gemini() {
    use ferrobot::provider::Gemini;

    let gemini = Gemini::new()
        .model("gemini-2.5-flash")
        .api_key_env("GEMINI_API_KEY")
        .thinking(1024);
    assert!(format!("{gemini:?}").contains("gemini-2.5-flash"));
}

#[cfg(feature = "anthropic")]
#[test]
fn anthropic() {
    use ferrobot::provider::Anthropic;

    let claude = Anthropic::new()
        .model("claude-sonnet-4-20250514")
        .api_key_env("ANTHROPIC_API_KEY")
        .thinking(2048);
    assert!(format!("{claude:?}").contains("claude-sonnet-4-20250514"));
}

#[test]
fn ollama() {
    use ferrobot::provider::OpenAiCompatible;

    let ollama = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
    assert_eq!(ollama.base_url(), "http://localhost:11434/v1");
}

#[test]
fn servers() {
    use ferrobot::provider::OpenAiCompatible;

    let openai = OpenAiCompatible::new("https://api.openai.com/v1")
        .model("gpt-4o-mini")
        .api_key_env("OPENAI_API_KEY");
    let openrouter = OpenAiCompatible::new("https://openrouter.ai/api/v1")
        .model("qwen/qwen3-32b")
        .api_key_env("OPENROUTER_API_KEY");
    let vllm = OpenAiCompatible::new("http://gpu-box:8000/v1").model("Qwen/Qwen3-8B");
    use ferrobot::provider::Provider;
    assert_eq!(openai.model_name(), "gpt-4o-mini");
    assert_eq!(openrouter.model_name(), "qwen/qwen3-32b");
    assert_eq!(vllm.base_url(), "http://gpu-box:8000/v1");
}

/// Only shows the setters, so compiled, not run; the body they send is
/// tested in tests/integration/openai.rs.
#[allow(dead_code)]
fn extra_body() {
    use ferrobot::provider::OpenAiCompatible;
    use serde_json::json;

    let ollama = OpenAiCompatible::new("http://localhost:11434/v1")
        .model("qwen3:8b")
        .extra_body("seed", json!(7))
        // Ollama: a longer context window than its default.
        .extra_body("options", json!({"num_ctx": 16384}));
    let vllm = OpenAiCompatible::new("http://localhost:8000/v1")
        .model("Qwen/Qwen3-8B")
        // vLLM: turn Qwen3's thinking off.
        .extra_body("chat_template_kwargs", json!({"enable_thinking": false}));
    let openai = OpenAiCompatible::new("https://api.openai.com/v1")
        .model("o4-mini")
        .api_key_env("OPENAI_API_KEY")
        // Reasoning models want this instead of `max_tokens`.
        .extra_body("max_completion_tokens", json!(4096));
    let _ = (ollama, vllm, openai);
}

/// Only shows the settings, so compiled, not run; retrying is tested in
/// tests/integration/openai.rs.
#[allow(dead_code)]
fn retries() {
    use std::time::Duration;
    use ferrobot::provider::{OpenAiCompatible, RetryPolicy};

    let patient = OpenAiCompatible::new("https://openrouter.ai/api/v1")
        .model("qwen/qwen3-32b")
        .api_key_env("OPENROUTER_API_KEY")
        .retry(
            RetryPolicy::builder()
                .max_attempts(5) // by default, 3
                .initial_backoff(Duration::from_secs(1)) // by default, 500 ms, doubling
                .max_backoff(Duration::from_secs(20)) // by default, 10 s
                .max_retry_after(Duration::from_secs(120)) // by default, 60 s
                .build(),
        )
        .timeouts(Duration::from_secs(5), Duration::from_secs(120));
    let impatient = OpenAiCompatible::new("http://localhost:11434/v1")
        .model("qwen3:8b")
        .retry(RetryPolicy::none());
    let _ = (patient, impatient);
}

/// Reads this process's environment and needs a model server: compiled,
/// not run.
#[allow(dead_code)]
async fn from_the_environment() -> std::process::ExitCode {
    use std::process::ExitCode;
    use ferrobot::provider::OpenAiCompatible;

    let provider = match OpenAiCompatible::from_env("FERROBOT") {
        Ok(provider) => provider,
        Err(problem) => {
            eprintln!("{problem}"); // names the variable to set
            return ExitCode::from(2);
        }
    };
    if let Err(problem) = provider.check_health().await {
        // e.g. can't reach the model server at http://localhost:11434/v1: … —
        // start Ollama (`ollama serve`), or set FERROBOT_BASE_URL to a running
        // OpenAI-compatible server
        eprintln!("{problem}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

/// Needs a model server: compiled, not run.
#[allow(dead_code)]
async fn health() {
    use ferrobot::provider::{OpenAiCompatible, Provider};

    let provider = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
    let health = provider.health().await;
    if !health.reachable {
        eprintln!("No model server at {}: {}", provider.base_url(), health.detail.unwrap_or_default());
    } else if health.model_present == Some(false) {
        eprintln!("The server does not have qwen3:8b; run `ollama pull qwen3:8b`.");
    }
}

#[cfg(feature = "anthropic")]
#[test]
fn headers() {
    use ferrobot::provider::Anthropic;

    let claude = Anthropic::with_base_url("https://gateway.example.com/anthropic")
        .model("claude-sonnet-4-20250514")
        .api_key_env("ANTHROPIC_API_KEY")
        .header("cf-aig-authorization", "Bearer gateway-token")
        .header("anthropic-beta", "token-efficient-tools-2025-02-19");
    assert!(!format!("{claude:?}").contains("gateway-token"));
}

/// Needs a model server: compiled, not run.
#[allow(dead_code)]
async fn context_window() {
    use ferrobot::provider::{OpenAiCompatible, Provider};

    let provider = OpenAiCompatible::new("http://localhost:8080/v1").model("qwen3-8b");
    match provider.context_window().await {
        Ok(Some(window)) => println!("{} tokens", window.tokens),
        Ok(None) => println!("the server doesn't say; assume a small window"),
        Err(error) => eprintln!("could not ask: {}", error.chain()),
    }
}

#[test]
fn watching_the_wire() {
    use std::sync::Arc;
    use ferrobot::provider::{Observe, OpenAiCompatible, Outcome, WireRequest, WireResponse};

    struct Trace;

    impl Observe for Trace {
        fn request(&self, exchange: u64, request: &WireRequest<'_>) {
            eprintln!("#{exchange} {} {} ({} bytes)", request.method, request.url, request.body.len());
        }
        fn response(&self, exchange: u64, response: &WireResponse<'_>) {
            eprintln!("#{exchange} answered {}", response.status);
        }
        fn chunk(&self, exchange: u64, bytes: &[u8]) {
            eprintln!("#{exchange} {}", String::from_utf8_lossy(bytes));
        }
        fn end(&self, exchange: u64, outcome: Outcome<'_>) {
            eprintln!("#{exchange} ended: {outcome:?}");
        }
    }

    let provider = OpenAiCompatible::new("http://localhost:11434/v1")
        .model("qwen3:8b")
        .observe(Arc::new(Trace));
    assert!(format!("{provider:?}").contains("observed: true"));
}

/// The sketch of a dialect, run against a loopback server answering as
/// Cohere's v2 chat does.
#[tokio::test]
async fn a_dialect_of_your_own() {
    use ferrobot::Role;
    use ferrobot::provider::dialect::{Decode, Dialect, Endpoint, Events, Http, encode, json};
    use ferrobot::provider::{ChatRequest, FinishReason, Health, ProviderError, StreamEvent};
    use futures_util::future::BoxFuture;

    /// Cohere's v2 chat: `POST /v2/chat`, server-sent events.
    #[derive(Debug, Clone, Default)]
    pub struct CohereChat;

    impl Dialect for CohereChat {
        type Decoder = CohereDecoder;
        const NAME: &'static str = "cohere";
        const EXAMPLE_MODEL: &'static str = "command-a-03-2025";

        fn chat_url(&self, endpoint: &Endpoint) -> String {
            format!("{}/v2/chat", endpoint.base_url())
        }

        fn body(&self, endpoint: &Endpoint, request: &ChatRequest<'_>) -> Result<Vec<u8>, ProviderError> {
            let mut messages = Vec::new();
            if let Some(system) = request.system {
                messages.push(serde_json::json!({"role": "system", "content": system}));
            }
            for message in request.messages {
                let role = if message.role == Role::Assistant { "assistant" } else { "user" };
                messages.push(serde_json::json!({"role": role, "content": message.text()}));
            }
            encode(&serde_json::json!({
                "model": endpoint.model(),
                "messages": messages,
                "stream": true,
                "temperature": request.settings.temperature.or(endpoint.temperature()),
            }))
        }

        fn decoder(&self) -> CohereDecoder {
            CohereDecoder::default()
        }

        fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
            Box::pin(async move {
                let url = format!("{}/v1/models/{}", endpoint.base_url(), endpoint.model());
                endpoint.probe(&url, Some(endpoint.model())).await
            })
        }
    }

    /// Reads one answer's events.
    #[derive(Debug, Default)]
    pub struct CohereDecoder {
        finished: bool,
    }

    impl Decode for CohereDecoder {
        fn event(&mut self, _name: Option<&str>, data: &str, out: &mut Events) -> Result<(), ProviderError> {
            let event = json(data)?;
            match event["type"].as_str() {
                Some("content-delta") => {
                    let text = event["delta"]["message"]["content"]["text"].as_str().unwrap_or_default();
                    out.push_back(StreamEvent::TextDelta(text.to_owned()));
                }
                Some("message-end") => {
                    self.finished = true;
                    out.push_back(StreamEvent::Finish(match event["delta"]["finish_reason"].as_str() {
                        Some("MAX_TOKENS") => FinishReason::Length,
                        _ => FinishReason::Stop,
                    }));
                }
                _ => {}
            }
            Ok(())
        }

        fn end(&mut self, _out: &mut Events) -> Result<(), ProviderError> {
            if self.finished {
                Ok(())
            } else {
                Err(ProviderError::Stream { message: "the stream ended before message-end".into() })
            }
        }
    }

    pub type Cohere = Http<CohereChat>;

    let cohere = Cohere::with_dialect("https://api.cohere.com", CohereChat)
        .model("command-a-03-2025")
        .api_key_env("COHERE_API_KEY");

    // Run it against a loopback server speaking the same events.
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let events = concat!(
        "event: message-start\ndata: {\"id\":\"c1\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n",
        "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"Hello\"}}}}\n\n",
        "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\" there\"}}}}\n\n",
        "event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"COMPLETE\"}}\n\n",
    );
    Mock::given(method("POST"))
        .and(path("/v2/chat"))
        .and(header("authorization", "Bearer co-key"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(events, "text/event-stream"))
        .mount(&server)
        .await;
    let local = Cohere::with_dialect(server.uri(), cohere.dialect().clone())
        .model("command-a-03-2025")
        .api_key("co-key");
    let agent = ferrobot::Agent::builder().provider(local).build();
    assert_eq!(agent.handle("me", "hi").await.unwrap().text, "Hello there");
}

#[test]
fn own_crypto_provider() {
    rustls::crypto::ring::default_provider().install_default().ok();
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
}
