//! The OpenAI-compatible chat-completions client.

mod decode;
mod setup;
mod wire;

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value};

use self::decode::Decoder;
use super::http::{
    CONNECT_TIMEOUT, READ_TIMEOUT, build_client, check_status, encode, redact, retried,
    shared_setters, transport_error,
};
use super::sse::SseEvents;
use super::{ChatRequest, EventStream, Health, ProviderError, RetryPolicy, StreamEvent};

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
#[derive(Clone)]
pub struct OpenAiCompatible {
    base_url: String,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    extra: Map<String, Value>,
    streaming: bool,
    split_think_tags: bool,
    include_usage: bool,
    strict_tools: bool,
    retry: RetryPolicy,
    read_timeout: Duration,
    client: Result<reqwest::Client, String>,
    /// The prefix of the variables [`from_env`](Self::from_env) read, so
    /// that health messages can name them.
    env_prefix: Option<String>,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("base_url", &redact(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// Body fields ferrobot writes itself; extra fields may not replace them.
const OWN_FIELDS: [&str; 4] = ["model", "messages", "tools", "stream"];

impl OpenAiCompatible {
    /// A client for the server at `base_url` (the part before
    /// `/chat/completions`, e.g. `http://localhost:11434/v1`).
    pub fn new(base_url: impl Into<String>) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        Self {
            endpoint: format!("{base_url}/chat/completions"),
            base_url,
            model: String::new(),
            api_key: None,
            temperature: None,
            max_tokens: None,
            extra: Map::new(),
            streaming: true,
            split_think_tags: true,
            include_usage: true,
            strict_tools: false,
            retry: RetryPolicy::default(),
            read_timeout: READ_TIMEOUT,
            client: build_client(CONNECT_TIMEOUT),
            env_prefix: None,
        }
    }

    shared_setters!(model: "qwen3:8b", key: "`Authorization: Bearer …`");

    /// Sampling temperature, unless a request sets its own. By default, the server's.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Upper bound on generated tokens (`max_tokens`), unless a request sets
    /// its own. By default, the server's.
    #[must_use]
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Adds a field to every request body, e.g. `top_p`, `seed`,
    /// `max_completion_tokens` or Ollama's `options`. A field ferrobot sets
    /// itself (`model`, `messages`, `tools`, `stream`) is ignored with a
    /// warning; `temperature` and `max_tokens` set here win over the setters.
    #[must_use]
    pub fn extra_body(mut self, key: impl Into<String>, value: Value) -> Self {
        let key = key.into();
        if OWN_FIELDS.contains(&key.as_str()) {
            tracing::warn!(field = %key, "extra body field ignored: ferrobot sets it itself");
        } else {
            self.extra.insert(key, value);
        }
        self
    }

    /// Whether to stream answers. By default, `true`.
    #[must_use]
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Whether inline `<think>…</think>` text is routed to reasoning. By default, `true`.
    #[must_use]
    pub fn split_think_tags(mut self, split: bool) -> Self {
        self.split_think_tags = split;
        self
    }

    /// Whether to ask for a usage chunk (`stream_options.include_usage`).
    /// Turn off for servers that reject the field. By default, `true`.
    #[must_use]
    pub fn include_usage(mut self, include: bool) -> Self {
        self.include_usage = include;
        self
    }

    /// Whether to send tool schemas in `OpenAI`'s strict form, with
    /// `"strict": true`, so the model's arguments always match them. Tools
    /// whose schema strict mode can't express (maps, free-form values) are
    /// sent as usual. Only `OpenAI` itself understands it. By default, `false`.
    #[must_use]
    pub fn strict_tools(mut self, strict: bool) -> Self {
        self.strict_tools = strict;
        self
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Serialises the request body once; retries resend the same bytes.
    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ProviderError> {
        self.require_model()?;
        let unless_extra = |key: &str| !self.extra.contains_key(key);
        let body = wire::Body {
            model: &self.model,
            messages: wire::Messages {
                system: request.system,
                messages: request.messages,
            },
            tools: wire::Tools {
                specs: request.callable_tools(),
                strict: self.strict_tools,
            },
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
                .or(self.temperature)
                .filter(|_| unless_extra("temperature")),
            max_tokens: request
                .settings
                .max_tokens
                .or(self.max_tokens)
                .filter(|_| unless_extra("max_tokens")),
            extra: &self.extra,
        };
        encode(&body)
    }

    /// Sends the request and, once the server answered well, returns the
    /// stream of its events.
    async fn connect(&self, body: Bytes) -> Result<EventStream<'_>, ProviderError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ProviderError::Config(e.clone()))?;
        let mut builder = client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = self.within_read_timeout(builder.send()).await?;
        let response = check_status(response).await?;
        if self.streaming {
            let body = response.bytes_stream();
            let decoder = Decoder::new(self.split_think_tags);
            Ok(SseEvents::new(body, decoder, redact(&self.endpoint), self.read_timeout).boxed())
        } else {
            let bytes = self.within_read_timeout(response.bytes()).await?;
            Ok(stream::iter(self.decode_whole(&bytes)).boxed())
        }
    }

    /// Decodes a non-streamed response into the same events a stream gives.
    fn decode_whole(&self, bytes: &[u8]) -> Vec<Result<StreamEvent, ProviderError>> {
        let mut decoder = Decoder::new(self.split_think_tags);
        let mut events = decode::Events::new();
        let decoded = serde_json::from_slice(bytes)
            .map_err(|e| ProviderError::Decode {
                message: format!(
                    "{e} in response {}",
                    decode::preview(&String::from_utf8_lossy(bytes))
                ),
            })
            .and_then(|chunk| decoder.chunk(chunk, &mut events))
            .and_then(|()| decoder.end(&mut events));
        let mut out: Vec<_> = events.into_iter().map(Ok).collect();
        if let Err(e) = decoded {
            out.push(Err(e));
        }
        out
    }

    /// Awaits a request step that must show progress within the read time-out.
    async fn within_read_timeout<T>(
        &self,
        step: impl Future<Output = reqwest::Result<T>>,
    ) -> Result<T, ProviderError> {
        match tokio::time::timeout(self.read_timeout, step).await {
            Ok(result) => result.map_err(|e| self.transport_error(e)),
            Err(_) => Err(self.timeout_error()),
        }
    }

    fn timeout_error(&self) -> ProviderError {
        ProviderError::Timeout {
            endpoint: redact(&self.endpoint),
            after: self.read_timeout,
        }
    }

    fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        transport_error(&redact(&self.endpoint), self.read_timeout, e)
    }
}

impl super::Provider for OpenAiCompatible {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        retried(self.body(&request), &self.retry, request.cancel, |body| {
            self.connect(body)
        })
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async move {
            let started = Instant::now();
            let models = format!("{}/models", self.base_url);
            let shown = redact(&models);
            let probe = async {
                let client = self
                    .client
                    .as_ref()
                    .map_err(|e| Health::problem(Duration::ZERO, e.clone()))?;
                let mut builder = client.get(&models);
                if let Some(key) = &self.api_key {
                    builder = builder.bearer_auth(key);
                }
                let response = builder.send().await.map_err(|e| {
                    Health::unreachable(
                        started.elapsed(),
                        transport_error(&shown, self.read_timeout, e).chain(),
                    )
                })?;
                // An error status means the server is there but unhappy: a
                // bad key, a proxy, a server without `/models`.
                let response = check_status(response).await.map_err(|e| {
                    Health::problem(started.elapsed(), format!("{shown}: {}", e.chain()))
                })?;
                let body = response.bytes().await.unwrap_or_default();
                Ok::<_, Health>(serde_json::from_slice::<Value>(&body).ok())
            };
            let mut health = match tokio::time::timeout(Duration::from_secs(5), probe).await {
                Err(_) => Health::unreachable(
                    started.elapsed(),
                    format!("{shown} did not answer within 5s"),
                ),
                Ok(Err(health)) => health,
                Ok(Ok(listed)) => {
                    let mut health = Health::ok(started.elapsed());
                    health.model_present =
                        listed.as_ref().and_then(|m| model_listed(m, &self.model));
                    if health.model_present == Some(false) {
                        health.detail = Some(format!(
                            "model `{}` is not served at {}",
                            self.model,
                            redact(&self.base_url)
                        ));
                    }
                    health
                }
            };
            if self.model.is_empty() && health.reachable {
                health.model_present = None;
                health.detail = Some("no model set: call `.model(\"…\")`".to_owned());
            }
            health
        })
    }

    fn name(&self) -> &str {
        "openai"
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}

/// Whether `/models` lists the model; Ollama lists `llama3` as `llama3:latest`.
fn model_listed(models: &Value, model: &str) -> Option<bool> {
    let data = models.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id")?.as_str())
            .any(|id| id == model || id.strip_suffix(":latest") == Some(model)),
    )
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
