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
