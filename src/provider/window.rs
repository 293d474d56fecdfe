//! Reading a model's context window from what servers say about their
//! models: `/v1/models` metadata (vLLM, `OpenRouter`, Groq, LM Studio,
//! llama.cpp), llama.cpp's `/props`, Ollama's `/api/show`.

// Ollama alone reads only its own `/api/show`.
#![cfg_attr(not(any(feature = "openai", feature = "responses")), allow(dead_code))]

use serde_json::Value;

use super::endpoint::Endpoint;
use super::{ContextWindow, ProviderError};

/// A number of tokens at `value`, if it is a positive one that fits.
fn tokens(value: &Value) -> Option<u32> {
    let n = value
        .as_u64()
        .or_else(|| value.as_f64().map(|f| f as u64))?;
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// Whether a status says the server has no such path or model.
fn is_absent(error: &ProviderError) -> bool {
    matches!(error, ProviderError::Status { status, .. } if matches!(status, 400 | 404 | 405 | 501))
}

/// `Ok(None)` for a path the server lacks; the error otherwise.
fn absent_is_none(result: Result<Value, ProviderError>) -> Result<Option<Value>, ProviderError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if is_absent(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The window an OpenAI-style model card gives: vLLM's `max_model_len`,
/// `OpenRouter`'s `context_length` (with `top_provider`'s output bound),
/// Groq's `context_window`, LM Studio's `loaded_context_length` or
/// `max_context_length`, llama.cpp's `meta.n_ctx_train`.
pub(crate) fn from_model_card(card: &Value) -> Option<ContextWindow> {
    let window = [
        &card["loaded_context_length"],
        &card["max_model_len"],
        &card["context_length"],
        &card["context_window"],
        &card["max_context_length"],
        &card["top_provider"]["context_length"],
        &card["meta"]["n_ctx_train"],
    ]
    .into_iter()
    .find_map(tokens)?;
    let max_output = [
        &card["top_provider"]["max_completion_tokens"],
        &card["max_completion_tokens"],
    ]
    .into_iter()
    .find_map(tokens);
    Some(ContextWindow {
        tokens: window,
        max_output,
    })
}

/// The card of `model` in a `/models` list; Ollama lists `llama3` as
/// `llama3:latest`.
pub(crate) fn listed<'a>(list: &'a Value, model: &str) -> Option<&'a Value> {
    list["data"].as_array()?.iter().find(|card| {
        card["id"]
            .as_str()
            .is_some_and(|id| id == model || id.strip_suffix(":latest") == Some(model))
    })
}

/// The window a llama.cpp server runs with, from `/props`.
pub(crate) fn from_llama_props(props: &Value) -> Option<ContextWindow> {
    [
        &props["default_generation_settings"]["n_ctx"],
        &props["n_ctx"],
    ]
    .into_iter()
    .find_map(tokens)
    .map(ContextWindow::new)
}

/// The window of an Ollama model from `/api/show`: the `num_ctx` it is run
/// with (the client's `option`, else the model's parameters), else the
/// length it was trained for (`model_info["<arch>.context_length"]`).
pub(crate) fn from_ollama_show(show: &Value, num_ctx: Option<u32>) -> Option<ContextWindow> {
    let parameter = show["parameters"].as_str().and_then(|parameters| {
        parameters.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u32>().ok())?
        })
    });
    let info = &show["model_info"];
    let trained = info["general.architecture"]
        .as_str()
        .and_then(|arch| tokens(&info[format!("{arch}.context_length")]))
        .or_else(|| {
            // An architecture not named: any `*.context_length`.
            info.as_object()?
                .iter()
                .find(|(key, _)| key.ends_with(".context_length"))
                .and_then(|(_, value)| tokens(value))
        });
    num_ctx.or(parameter).or(trained).map(ContextWindow::new)
}

/// Asks Ollama at `root` about `model`.
pub(crate) async fn ollama(
    endpoint: &Endpoint,
    root: &str,
    num_ctx: Option<u32>,
) -> Result<Option<ContextWindow>, ProviderError> {
    let show = endpoint
        .post_json(
            &format!("{root}/api/show"),
            &serde_json::json!({"model": endpoint.model()}),
        )
        .await;
    Ok(absent_is_none(show)?.and_then(|show| from_ollama_show(&show, num_ctx)))
}

/// The window an OpenAI-compatible server says `model` has: its card in
/// `/models` (or `/models/{model}`), llama.cpp's `/props` for the window it
/// runs with, Ollama's `/api/show` behind its `/v1`.
pub(crate) async fn openai_compatible(
    endpoint: &Endpoint,
) -> Result<Option<ContextWindow>, ProviderError> {
    let base = endpoint.base_url();
    let model = endpoint.model();
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let list = absent_is_none(endpoint.get_json(&format!("{base}/models")).await)?;
    let card = match list.as_ref().and_then(|list| listed(list, model)) {
        Some(card) => Some(card.clone()),
        None => absent_is_none(endpoint.get_json(&format!("{base}/models/{model}")).await)?,
    };
    let Some(card) = card else {
        return Ok(None);
    };
    match card["owned_by"].as_str() {
        // llama.cpp: `/props` has the window the server was started with;
        // `n_ctx_train` is only what the model could take.
        Some("llamacpp") => {
            let props = absent_is_none(endpoint.get_json(&format!("{root}/props")).await)?;
            if let Some(window) = props.as_ref().and_then(from_llama_props) {
                return Ok(Some(window));
            }
        }
        // Ollama's `/v1` lists models as owned by "library" and says no more.
        Some("library" | "ollama") => {
            if let Some(window) = ollama(endpoint, root, None).await? {
                return Ok(Some(window));
            }
        }
        _ => {}
    }
    Ok(from_model_card(&card))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn cards_of_every_server_give_their_window() {
        let vllm = json!({"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "max_model_len": 32768});
        assert_eq!(from_model_card(&vllm), Some(ContextWindow::new(32768)));
        let openrouter = json!({"id": "qwen/qwen3-32b", "context_length": 40960,
            "top_provider": {"context_length": 40960, "max_completion_tokens": 8192}});
        assert_eq!(
            from_model_card(&openrouter),
            Some(ContextWindow {
                tokens: 40960,
                max_output: Some(8192)
            })
        );
        let openai = json!({"id": "gpt-4o", "object": "model", "owned_by": "system"});
        assert_eq!(from_model_card(&openai), None);
    }

    #[test]
    fn ollama_prefers_the_window_it_runs_with() {
        let show = json!({
            "parameters": "num_ctx                        8192\nstop                           \"<|im_end|>\"",
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}
        });
        assert_eq!(
            from_ollama_show(&show, None),
            Some(ContextWindow::new(8192))
        );
        assert_eq!(
            from_ollama_show(&show, Some(4096)),
            Some(ContextWindow::new(4096))
        );
        let plain = json!({"model_info": {"general.architecture": "llama", "llama.context_length": 131072}});
        assert_eq!(
            from_ollama_show(&plain, None),
            Some(ContextWindow::new(131072))
        );
    }
}
