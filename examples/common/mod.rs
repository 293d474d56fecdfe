//! What the examples that talk to a real server share: reading the server
//! from the environment and checking it before the first turn.

use std::process::ExitCode;

use ferrobot::provider::{OpenAiCompatible, Provider};

/// The provider described by `FERROBOT_BASE_URL` (by default Ollama at
/// `http://localhost:11434/v1`), `FERROBOT_MODEL` (by default `qwen3:8b`) and
/// `FERROBOT_API_KEY`, with the base URL and model for messages.
pub(crate) fn provider_from_env() -> (OpenAiCompatible, String, String) {
    let base_url = env_or("FERROBOT_BASE_URL", "http://localhost:11434/v1");
    let model = env_or("FERROBOT_MODEL", "qwen3:8b");
    let provider = OpenAiCompatible::new(&base_url)
        .model(&model)
        .api_key_env("FERROBOT_API_KEY");
    (provider, base_url, model)
}

/// Probes the server before the first turn, so a missing server or model gets
/// a message saying what to do instead of a failed turn.
pub(crate) async fn check_server(
    provider: &impl Provider,
    base_url: &str,
    model: &str,
) -> Result<(), ExitCode> {
    let health = provider.health().await;
    if !health.reachable {
        let detail = health.detail.unwrap_or_default();
        eprintln!(
            "No model server at {base_url}: {detail}. Start Ollama (`ollama serve` and \
             `ollama pull {model}`) or set FERROBOT_BASE_URL to an OpenAI-compatible server \
             (and FERROBOT_API_KEY if it needs a key)."
        );
        return Err(ExitCode::from(2));
    }
    if health.model_present == Some(false) {
        eprintln!(
            "The server at {base_url} does not serve the model `{model}`. Pull it with \
             `ollama pull {model}`, or set FERROBOT_MODEL to a model the server has."
        );
        return Err(ExitCode::from(2));
    }
    if let Some(detail) = health.detail {
        eprintln!("The server at {base_url} answered, but: {detail}");
        return Err(ExitCode::from(2));
    }
    Ok(())
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}
