//! The OpenAI-compatible chat-completions client.

mod decode;
mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_core::Stream;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use serde_json::{Map, Value};

use self::decode::Decoder;
use super::{ChatRequest, EventStream, Health, ProviderError, RetryPolicy, StreamEvent};

/// A client for any server speaking `OpenAI`'s chat completions API: `OpenAI`,
/// Ollama (`http://localhost:11434/v1`), vLLM, llama.cpp's server, LM Studio,
/// `OpenRouter`, Groq and others, chosen by base URL.
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
    retry: RetryPolicy,
    read_timeout: Duration,
    client: Result<reqwest::Client, String>,
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

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

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
            retry: RetryPolicy::default(),
            read_timeout: DEFAULT_READ_TIMEOUT,
            client: build_client(DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT),
        }
    }

    /// The model to ask for, e.g. `"qwen3:8b"` or `"gpt-4o-mini"`. Required.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The API key, sent as `Authorization: Bearer …`. By default, none.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into()).filter(|k| !k.is_empty());
        self
    }

    /// Reads the API key from the environment variable `name`, if it is set.
    /// The key is never read implicitly, so it is only ever sent to the server
    /// you chose. By default, none.
    #[must_use]
    pub fn api_key_env(mut self, name: &str) -> Self {
        if let Ok(key) = std::env::var(name) {
            self = self.api_key(key);
        }
        self
    }

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

    /// When to retry failed calls. By default, [`RetryPolicy::default()`].
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Connection and read time-outs: how long to wait for a connection, and
    /// for each next piece of the answer. By default, 10 s and 300 s (local
    /// models can take minutes to read a long prompt).
    #[must_use]
    pub fn timeouts(mut self, connect: Duration, read: Duration) -> Self {
        self.read_timeout = read;
        self.client = build_client(connect, read);
        self
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Serialises the request body once; retries resend the same bytes.
    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ProviderError> {
        if self.model.is_empty() {
            return Err(ProviderError::Config(format!(
                "no model set for {}: call `.model(\"…\")`, e.g. `.model(\"qwen3:8b\")`",
                redact(&self.base_url)
            )));
        }
        let unless_extra = |key: &str| !self.extra.contains_key(key);
        let body = wire::Body {
            model: &self.model,
            messages: wire::Messages {
                system: request.system,
                messages: request.messages,
            },
            tools: wire::Tools(request.tools),
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
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| ProviderError::Decode {
                message: format!("could not encode the request: {e}"),
            })
    }

    /// Sends one request and streams its events.
    fn send(&self, body: Bytes) -> EventStream<'_> {
        let response = async move {
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
            let response = builder.send().await.map_err(|e| self.transport_error(e))?;
            let response = check_status(response).await?;
            if self.streaming {
                Ok(SseEvents::new(response, Decoder::new(self.split_think_tags), self).boxed())
            } else {
                let bytes = response
                    .bytes()
                    .await
                    .map_err(|e| self.transport_error(e))?;
                Ok(stream::iter(self.decode_whole(&bytes)).boxed())
            }
        };
        stream::once(response).try_flatten().boxed()
    }

    /// Decodes a non-streamed response into the same events a stream gives.
    fn decode_whole(&self, bytes: &[u8]) -> Vec<Result<StreamEvent, ProviderError>> {
        let mut decoder = Decoder::new(self.split_think_tags);
        let mut events = Vec::new();
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

    fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        transport_error(&redact(&self.endpoint), self.read_timeout, e)
    }
}

impl super::Provider for OpenAiCompatible {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        let body = match self.body(&request) {
            Ok(body) => body,
            Err(e) => return stream::iter([Err(e)]).boxed(),
        };
        self.retry
            .run(request.cancel, move || self.send(body.clone()))
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

fn transport_error(endpoint: &str, read_timeout: Duration, e: reqwest::Error) -> ProviderError {
    let e = e.without_url();
    if e.is_timeout() {
        ProviderError::Timeout {
            endpoint: endpoint.to_owned(),
            after: read_timeout,
        }
    } else {
        ProviderError::Connect {
            endpoint: endpoint.to_owned(),
            source: Box::new(e),
        }
    }
}

/// The URL without `user:password@`, for messages and logs.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
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

fn build_client(connect: Duration, read: Duration) -> Result<reqwest::Client, String> {
    // reqwest is built without a bundled crypto provider; ring is ours. If
    // the application installed another one first, that one is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(connect)
        .read_timeout(read)
        .user_agent(concat!("ferrobot/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("could not build the HTTP client: {e}"))
}

/// Passes a successful response through; turns any other into an error that
/// carries the server's own message and its `Retry-After`.
async fn check_status(response: reqwest::Response) -> Result<reqwest::Response, ProviderError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let body = response.text().await.unwrap_or_default();
    Err(ProviderError::Status {
        status: status.as_u16(),
        message: wire::error_message(&body),
        retry_after,
    })
}

/// `retry-after-ms` (`OpenAI`), else `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// The events of a streamed response: SSE parsing by `sseer` (zero-copy over
/// the response's bytes), then one typed decode per `data:` payload.
struct SseEvents<'a> {
    sse:
        BoxStream<'a, Result<sseer::event::Event, sseer::errors::EventStreamError<reqwest::Error>>>,
    decoder: Decoder,
    queue: VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    client: &'a OpenAiCompatible,
    done: bool,
    /// An error that ends the stream once the events decoded before it are out.
    error: Option<ProviderError>,
}

impl<'a> SseEvents<'a> {
    fn new(response: reqwest::Response, decoder: Decoder, client: &'a OpenAiCompatible) -> Self {
        Self {
            sse: sseer::EventStream::new(response.bytes_stream()).boxed(),
            decoder,
            queue: VecDeque::new(),
            scratch: Vec::new(),
            client,
            done: false,
            error: None,
        }
    }
}

impl Stream for SseEvents<'_> {
    type Item = Result<StreamEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let step = match std::task::ready!(this.sse.poll_next_unpin(cx)) {
                Some(Ok(event)) => this.decoder.data(&event.data, &mut this.scratch),
                Some(Err(sseer::errors::EventStreamError::Transport(e))) => {
                    Err(this.client.transport_error(e))
                }
                Some(Err(e)) => Err(ProviderError::Decode {
                    message: format!("invalid SSE stream: {e}"),
                }),
                None => {
                    this.done = true;
                    this.decoder.end(&mut this.scratch)
                }
            };
            this.queue.extend(this.scratch.drain(..));
            if let Err(e) = step {
                this.done = true;
                this.error = Some(e);
            }
        }
    }
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
