//! The OpenAI-compatible chat-completions dialect.

mod decode;
mod setup;
mod wire;

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::dialect::{Dialect, Endpoint, Framing, Http, encode};
use super::http::redact;
use super::{ChatRequest, ContextWindow, Health, ProviderError, ToolChoice};

use self::decode::Decoder;
pub use self::setup::{EnvError, HealthError};

/// A client for any server speaking `OpenAI`'s chat completions API: `OpenAI`,
/// Ollama (`http://localhost:11434/v1`), vLLM, llama.cpp's server, LM Studio,
/// `OpenRouter`, Groq and others, chosen by base URL.
///
/// [`from_env`](Self::from_env) reads the server, the model and the key from
/// environment variables, and [`check_health`](Self::check_health) tells the
/// user what to fix before a first turn would fail.
///
/// It streams by default; [`streaming(false)`](Self::streaming) sends one
/// request and decodes the whole answer into the same events, for servers that
/// cannot stream tool calls. The API key, when set, goes only into the
/// `Authorization` header and never into logs, errors or `Debug` output.
/// The setters every dialect shares are [`Http`]'s.
///
/// # Examples
/// ```
/// use ferrobot::provider::OpenAiCompatible;
/// let ollama = OpenAiCompatible::new("http://localhost:11434/v1")
///     .model("qwen3:8b")
///     .temperature(0.2);
/// let openai = OpenAiCompatible::new("https://api.openai.com/v1")
///     .model("gpt-4o-mini")
///     .api_key_env("OPENAI_API_KEY");
/// # let _ = (ollama, openai);
/// ```
pub type OpenAiCompatible = Http<ChatCompletions>;

/// The chat-completions dialect (`{base_url}/chat/completions`) and its
/// settings; see [`OpenAiCompatible`].
#[derive(Debug, Clone)]
pub struct ChatCompletions {
    extra: Map<String, Value>,
    streaming: bool,
    split_think_tags: bool,
    include_usage: bool,
    strict_tools: bool,
    /// The prefix of the variables [`from_env`](Http::from_env) read, so
    /// that health messages can name them.
    env_prefix: Option<String>,
}

impl Default for ChatCompletions {
    fn default() -> Self {
        Self {
            extra: Map::new(),
            streaming: true,
            split_think_tags: true,
            include_usage: true,
            strict_tools: false,
            env_prefix: None,
        }
    }
}

/// Body fields ferrobot writes itself; extra fields may not replace them.
const OWN_FIELDS: [&str; 4] = ["model", "messages", "tools", "stream"];

impl Http<ChatCompletions> {
    /// A client for the server at `base_url` (the part before
    /// `/chat/completions`, e.g. `http://localhost:11434/v1`).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self::with_dialect(base_url, ChatCompletions::default())
    }

    /// Adds a field to every request body, e.g. `top_p`, `seed`,
    /// `max_completion_tokens` or Ollama's `options`. A field ferrobot sets
    /// itself (`model`, `messages`, `tools`, `stream`) is ignored with a
    /// warning; `temperature` and `max_tokens` set here win over the setters.
    /// `tool_choice` and `response_format` set here go with requests that
    /// don't say their own (a [`ToolChoice::Required`] or
    /// [`ToolChoice::Tool`], a [structured answer](ChatRequest::output)).
    #[must_use]
    pub fn extra_body(self, key: impl Into<String>, value: Value) -> Self {
        let key = key.into();
        if OWN_FIELDS.contains(&key.as_str()) {
            tracing::warn!(field = %key, "extra body field ignored: ferrobot sets it itself");
            return self;
        }
        self.with(|d| {
            d.extra.insert(key, value);
        })
    }

    /// Whether to stream answers. By default, `true`.
    #[must_use]
    pub fn streaming(self, streaming: bool) -> Self {
        self.with(|d| d.streaming = streaming)
    }

    /// Whether inline `<think>…</think>` text is routed to reasoning. By default, `true`.
    #[must_use]
    pub fn split_think_tags(self, split: bool) -> Self {
        self.with(|d| d.split_think_tags = split)
    }

    /// Whether to ask for a usage chunk (`stream_options.include_usage`).
    /// Turn off for servers that reject the field. By default, `true`.
    #[must_use]
    pub fn include_usage(self, include: bool) -> Self {
        self.with(|d| d.include_usage = include)
    }

    /// Whether to send tool schemas in `OpenAI`'s strict form, with
    /// `"strict": true`, so the model's arguments always match them. Tools
    /// whose schema strict mode can't express (maps, free-form values) are
    /// sent as usual. Only `OpenAI` itself understands it. By default, `false`.
    #[must_use]
    pub fn strict_tools(self, strict: bool) -> Self {
        self.with(|d| d.strict_tools = strict)
    }
}

impl Dialect for ChatCompletions {
    type Decoder = Decoder;
    const NAME: &'static str = "openai";
    const EXAMPLE_MODEL: &'static str = "qwen3:8b";
    /// `response_format` with a `json_schema`: `OpenAI`'s structured
    /// outputs, and a grammar on llama.cpp's server; vLLM, LM Studio and
    /// Ollama's `/v1` take it too.
    const NATIVE_OUTPUT: bool = true;

    fn chat_url(&self, endpoint: &Endpoint) -> String {
        format!("{}/chat/completions", endpoint.base_url())
    }

    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        super::images::check(Self::NAME, &super::images::OPENAI, request.messages)?;
        let unless_extra = |key: &str| !self.extra.contains_key(key);
        let tool_choice = tool_choice(request.tool_choice);
        let response_format = request.output.map(
            |format| json!({"type": "json_schema", "json_schema": format.openai_json_schema()}),
        );
        // What this request says replaces what `extra_body` gave for every
        // request; both would make a body with the key twice.
        let mut extra = Cow::Borrowed(&self.extra);
        for (key, written) in [
            ("tool_choice", tool_choice.is_some()),
            ("response_format", response_format.is_some()),
        ] {
            if written && extra.contains_key(key) {
                extra.to_mut().remove(key);
            }
        }
        encode(&wire::Body {
            model: endpoint.model(),
            messages: wire::Messages {
                system: request.system,
                messages: request.messages,
            },
            tools: wire::Tools {
                specs: request.callable_tools(),
                strict: self.strict_tools,
            },
            tool_choice,
            response_format,
            stream: self.streaming,
            stream_options: (self.streaming
                && self.include_usage
                && unless_extra("stream_options"))
            .then_some(wire::StreamOptions {
                include_usage: true,
            }),
            temperature: request
                .settings
                .temperature
                .or(endpoint.temperature())
                .filter(|_| unless_extra("temperature")),
            max_tokens: request
                .settings
                .max_tokens
                .or(endpoint.max_tokens())
                .filter(|_| unless_extra("max_tokens")),
            extra,
        })
    }

    fn framing(&self) -> Framing {
        if self.streaming {
            Framing::Sse
        } else {
            Framing::Whole
        }
    }

    fn decoder(&self) -> Decoder {
        Decoder::new(self.split_think_tags, self.streaming)
    }

    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
        Box::pin(async move {
            let model = endpoint.model();
            let models = format!("{}/models", endpoint.base_url());
            let mut health = endpoint
                .probe_list(&models, |list| model_listed(list, model))
                .await;
            if health.model_present == Some(false) {
                health.detail = Some(format!(
                    "model `{model}` is not served at {}",
                    redact(endpoint.base_url())
                ));
            }
            if model.is_empty() && health.reachable {
                health.model_present = None;
                health.detail = Some("no model set: call `.model(\"…\")`".to_owned());
            }
            health
        })
    }

    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(super::window::openai_compatible(endpoint))
    }
}

/// `tool_choice` as chat completions says it, where it says more than the
/// tools sent: `"required"`. A named tool is sent alone
/// ([`ChatRequest::callable_tools`]) under `"required"`, which means the
/// same as naming it and which llama.cpp's server also understands (it
/// reads only the string forms). Under [`ToolChoice::None`] no tools are
/// sent at all, which every server understands, where not all take `"none"`.
fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Required | ToolChoice::Tool(_) => Some(json!("required")),
        ToolChoice::Auto | ToolChoice::None => None,
    }
}

/// Whether `/models` lists the model; Ollama lists `llama3` as `llama3:latest`.
fn model_listed(models: &Value, model: &str) -> Option<bool> {
    models.get("data")?.as_array()?;
    Some(super::window::listed(models, model).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact("https://user:pw@example.com/v1"),
            "https://example.com/v1"
        );
        assert_eq!(
            redact("http://localhost:11434/v1"),
            "http://localhost:11434/v1"
        );
        assert_eq!(redact("http://h/v1?next=a@b"), "http://h/v1?next=a@b");
    }
}
