//! Ollama's native chat API (`/api/chat`, NDJSON).

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::http::{
    CONNECT_TIMEOUT, IdleTimer, READ_TIMEOUT, build_client, check_status, encode, redact, retried,
    send, shared_setters, transport_error,
};
use super::{
    ChatRequest, EventStream, FinishReason, Health, ProviderError, RetryPolicy, StreamEvent,
    ToolCallDelta,
};
use crate::message::{Message, Part, Role, Usage};

/// A client for Ollama's native API (`/api/chat`): reasoning from
/// `message.thinking`, tool calls with object arguments, `done_reason`, and
/// the counters of the last line as usage. Error bodies such as "model does
/// not support tools" are passed on verbatim, with a hint.
///
/// Ollama also serves the OpenAI-compatible API at `/v1`
/// ([`OpenAiCompatible`](super::OpenAiCompatible)); the native one reports
/// thinking and usage more fully.
///
/// # Examples
/// ```
/// use ferrobot::provider::Ollama;
/// let ollama = Ollama::new("http://localhost:11434").model("qwen3:8b").think(true);
/// # let _ = ollama;
/// ```
#[derive(Clone)]
pub struct Ollama {
    base_url: String,
    endpoint: String,
    model: String,
    think: Option<bool>,
    options: Map<String, Value>,
    retry: RetryPolicy,
    read_timeout: Duration,
    client: Result<reqwest::Client, String>,
}

impl fmt::Debug for Ollama {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ollama")
            .field("base_url", &redact(&self.base_url))
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Ollama {
    /// A client for the Ollama server at `base_url`, e.g. `http://localhost:11434`.
    pub fn new(base_url: impl Into<String>) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        Self {
            endpoint: format!("{base_url}/api/chat"),
            base_url,
            model: String::new(),
            think: None,
            options: Map::new(),
            retry: RetryPolicy::default(),
            read_timeout: READ_TIMEOUT,
            client: build_client(CONNECT_TIMEOUT),
        }
    }

    shared_setters!(model: "qwen3:8b");

    /// Whether thinking models should think (`think`). By default, the model's.
    #[must_use]
    pub fn think(mut self, think: bool) -> Self {
        self.think = Some(think);
        self
    }

    /// Sets a model option (`options`), e.g. `num_ctx` or `temperature`.
    #[must_use]
    pub fn option(mut self, key: impl Into<String>, value: Value) -> Self {
        self.options.insert(key.into(), value);
        self
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ProviderError> {
        self.require_model()?;
        let mut options = self.options.clone();
        if let Some(t) = request.settings.temperature {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(n) = request.settings.max_tokens {
            options.insert("num_predict".into(), json!(n));
        }
        let body = RequestBody {
            model: &self.model,
            messages: messages(request.system, request.messages),
            tools: request
                .callable_tools()
                .iter()
                .map(|spec| json!({"type": "function", "function": spec}))
                .collect(),
            stream: true,
            think: self.think,
            options: (!options.is_empty()).then_some(options),
        };
        encode(&body)
    }

    async fn connect(&self, body: Bytes) -> Result<EventStream<'_>, ProviderError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ProviderError::Config(e.clone()))?;
        let request = client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let response = send(request, &redact(&self.endpoint), self.read_timeout).await?;
        let response = check_status(response).await.map_err(with_hint)?;
        let lines = NdjsonLines::new(
            response.bytes_stream().boxed(),
            redact(&self.endpoint),
            self.read_timeout,
        );
        let mut decoder = Decoder::default();
        let events = lines
            .map(move |line| match line {
                Ok(line) => decoder.line(&line),
                Err(error) => vec![Err(error)],
            })
            .flat_map(stream::iter);
        Ok(events.boxed())
    }
}

/// Adds what to do to Ollama's own words where it helps.
fn with_hint(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::Status {
            status,
            message,
            retry_after,
        } => {
            let hint = if message.contains("does not support tools") {
                " (pick a model with tool support, such as qwen3 or llama3.1, or give the agent no tools)"
            } else if message.contains("not found") && message.contains("model") {
                " (pull it with `ollama pull <model>`)"
            } else {
                ""
            };
            ProviderError::Status {
                status,
                message: format!("{message}{hint}"),
                retry_after,
            }
        }
        other => other,
    }
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Map<String, Value>>,
}

/// The conversation in Ollama's shape: tool calls with object arguments and
/// no ids; tool results as `tool` messages naming the tool.
fn messages(system: Option<&str>, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system {
        out.push(json!({"role": "system", "content": system}));
    }
    let mut names = std::collections::HashMap::new();
    for message in messages {
        match message.role {
            Role::System => out.push(json!({"role": "system", "content": message.text()})),
            Role::User => out.push(json!({"role": "user", "content": message.text()})),
            Role::Assistant => {
                let mut wire = json!({"role": "assistant", "content": message.text() + &message.refusal().unwrap_or_default()});
                if let Some(thinking) = message.reasoning().filter(|t| !t.is_empty()) {
                    wire["thinking"] = json!(thinking);
                }
                let calls: Vec<Value> = message
                    .tool_calls()
                    .map(|call| {
                        names.insert(call.id.clone(), call.name.clone());
                        let arguments = match &call.arguments {
                            Value::Object(_) => call.arguments.clone(),
                            _ => json!({}),
                        };
                        json!({"function": {"name": call.name, "arguments": arguments}})
                    })
                    .collect();
                if !calls.is_empty() {
                    wire["tool_calls"] = Value::Array(calls);
                }
                out.push(wire);
            }
            Role::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult(result) = part {
                        let mut wire = json!({"role": "tool", "content": result.content});
                        if let Some(name) = names.get(&result.call_id) {
                            wire["tool_name"] = json!(name);
                        }
                        out.push(wire);
                    }
                }
            }
        }
    }
    out
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    message: Option<LineMessage>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct LineMessage {
    #[serde(default)]
    content: String,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireCall>,
}

#[derive(Deserialize)]
struct WireCall {
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Default)]
struct Decoder {
    calls: usize,
    finished: bool,
}

impl Decoder {
    fn line(&mut self, line: &str) -> Vec<Result<StreamEvent, ProviderError>> {
        let line = line.trim();
        if line.is_empty() || self.finished {
            return Vec::new();
        }
        let parsed: Line = match serde_json::from_str(line) {
            Ok(parsed) => parsed,
            Err(e) => {
                return vec![Err(ProviderError::Decode {
                    message: format!("{e} in line `{line}`"),
                })];
            }
        };
        if let Some(error) = parsed.error {
            return vec![Err(ProviderError::Stream { message: error })];
        }
        let mut out = Vec::new();
        if let Some(message) = parsed.message {
            if let Some(thinking) = message.thinking.filter(|t| !t.is_empty()) {
                out.push(Ok(StreamEvent::ReasoningDelta(thinking)));
            }
            if !message.content.is_empty() {
                out.push(Ok(StreamEvent::TextDelta(message.content)));
            }
            for call in message.tool_calls {
                out.push(Ok(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index: self.calls,
                    id: None,
                    name: Some(call.function.name),
                    arguments: if call.function.arguments.is_null() {
                        String::new()
                    } else {
                        call.function.arguments.to_string()
                    },
                })));
                self.calls += 1;
            }
        }
        if parsed.done {
            self.finished = true;
            out.push(Ok(StreamEvent::Usage(Usage {
                input_tokens: parsed.prompt_eval_count.unwrap_or(0),
                output_tokens: parsed.eval_count.unwrap_or(0),
                ..Usage::default()
            })));
            let finish = match parsed.done_reason.as_deref() {
                // Ollama says "stop" after tool calls too.
                Some("stop") | None if self.calls > 0 => FinishReason::ToolCalls,
                Some(reason) => FinishReason::from_raw(reason),
                None => FinishReason::Stop,
            };
            out.push(Ok(StreamEvent::Finish(finish)));
        }
        out
    }
}

/// Lines of an NDJSON body, however the network splits it, until the
/// server falls silent for the read time-out.
struct NdjsonLines<'a> {
    body: futures_util::stream::BoxStream<'a, reqwest::Result<Bytes>>,
    buffer: Vec<u8>,
    ready: VecDeque<String>,
    done: bool,
    endpoint: String,
    idle: IdleTimer,
}

impl<'a> NdjsonLines<'a> {
    fn new(
        body: futures_util::stream::BoxStream<'a, reqwest::Result<Bytes>>,
        endpoint: String,
        read_timeout: Duration,
    ) -> Self {
        Self {
            body,
            buffer: Vec::new(),
            ready: VecDeque::new(),
            done: false,
            endpoint,
            idle: IdleTimer::new(read_timeout),
        }
    }
}

impl futures_core::Stream for NdjsonLines<'_> {
    type Item = Result<String, ProviderError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            if let Some(line) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(line)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let next = match this.body.poll_next_unpin(cx) {
                Poll::Ready(next) => next,
                Poll::Pending if this.idle.timed_out(cx) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(ProviderError::Timeout {
                        endpoint: this.endpoint.clone(),
                        after: this.idle.limit(),
                    })));
                }
                Poll::Pending => return Poll::Pending,
            };
            match next {
                Some(Ok(bytes)) => {
                    this.idle.read();
                    this.buffer.extend_from_slice(&bytes);
                    while let Some(end) = this.buffer.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = this.buffer.drain(..=end).collect();
                        this.ready
                            .push_back(String::from_utf8_lossy(&line).into_owned());
                    }
                }
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(transport_error(
                        &this.endpoint,
                        this.idle.limit(),
                        e,
                    ))));
                }
                None => {
                    this.done = true;
                    if !this.buffer.is_empty() {
                        let rest = std::mem::take(&mut this.buffer);
                        this.ready
                            .push_back(String::from_utf8_lossy(&rest).into_owned());
                    }
                }
            }
        }
    }
}

impl super::Provider for Ollama {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        retried(self.body(&request), &self.retry, request.cancel, |body| {
            self.connect(body)
        })
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async move {
            let started = Instant::now();
            let tags = format!("{}/api/tags", self.base_url);
            let probe = async {
                let client = self
                    .client
                    .as_ref()
                    .map_err(|e| Health::problem(Duration::ZERO, e.clone()))?;
                let response = client.get(&tags).send().await.map_err(|e| {
                    Health::unreachable(
                        started.elapsed(),
                        transport_error(&redact(&tags), self.read_timeout, e).chain(),
                    )
                })?;
                let response = check_status(response)
                    .await
                    .map_err(|e| Health::problem(started.elapsed(), e.chain()))?;
                Ok::<_, Health>(response.json::<Value>().await.ok())
            };
            match tokio::time::timeout(Duration::from_secs(5), probe).await {
                Err(_) => Health::unreachable(
                    started.elapsed(),
                    format!("{} did not answer within 5s", redact(&tags)),
                ),
                Ok(Err(health)) => health,
                Ok(Ok(listed)) => {
                    let mut health = Health::ok(started.elapsed());
                    health.model_present = listed
                        .as_ref()
                        .and_then(|l| l.get("models")?.as_array().cloned())
                        .map(|models| {
                            models
                                .iter()
                                .filter_map(|m| m.get("name")?.as_str())
                                .any(|name| {
                                    name == self.model
                                        || name.strip_suffix(":latest") == Some(self.model.as_str())
                                })
                        });
                    if health.model_present == Some(false) {
                        health.detail = Some(format!(
                            "model `{}` is not pulled: run `ollama pull {}`",
                            self.model, self.model
                        ));
                    }
                    health
                }
            }
        })
    }

    fn name(&self) -> &str {
        "ollama"
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}
