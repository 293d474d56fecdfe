//! Ollama's native chat API (`/api/chat`, NDJSON).

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::dialect::{Decode, Dialect, Endpoint, Events, Framing, Http, encode};
use super::images;
use super::{
    ChatRequest, ContextWindow, FinishReason, Health, ProviderError, StreamEvent, ToolCallDelta,
};
use crate::message::{Image, Message, Part, Role, Usage};

/// A client for Ollama's native API (`/api/chat`): reasoning from
/// `message.thinking`, tool calls with object arguments, `done_reason`, and
/// the counters of the last line as usage. Error bodies such as "model does
/// not support tools" are passed on verbatim, with a hint. The setters every
/// dialect shares are [`Http`]'s; `temperature` and `max_tokens` go into
/// `options` (as `temperature` and `num_predict`), and a key, for an Ollama
/// behind a proxy, as `Authorization: Bearer`.
///
/// The API has no tool choice: under
/// [`ToolChoice::Required`](super::ToolChoice::Required) the model is only
/// offered the tools, and under [`ToolChoice::Tool`](super::ToolChoice::Tool)
/// only that one; it may answer in text either way. A structured answer
/// ([`ChatRequest::output`]) goes as `format`, the answer's JSON Schema.
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
pub type Ollama = Http<OllamaChat>;

/// Ollama's `/api/chat` dialect and its settings; see [`Ollama`].
#[derive(Debug, Clone, Default)]
pub struct OllamaChat {
    think: Option<bool>,
    options: Map<String, Value>,
}

impl Http<OllamaChat> {
    /// A client for the Ollama server at `base_url`, e.g. `http://localhost:11434`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self::with_dialect(base_url, OllamaChat::default())
    }

    /// Whether thinking models should think (`think`). By default, the model's.
    #[must_use]
    pub fn think(self, think: bool) -> Self {
        self.with(|d| d.think = Some(think))
    }

    /// Sets a model option (`options`), e.g. `num_ctx` or `seed`. A
    /// `num_ctx` set here is the [context window](crate::provider::Provider::context_window).
    #[must_use]
    pub fn option(self, key: impl Into<String>, value: Value) -> Self {
        let key = key.into();
        self.with(|d| {
            d.options.insert(key, value);
        })
    }
}

impl Dialect for OllamaChat {
    type Decoder = Decoder;
    const NAME: &'static str = "ollama";
    const EXAMPLE_MODEL: &'static str = "qwen3:8b";
    /// `format` with the answer's JSON Schema.
    const NATIVE_OUTPUT: bool = true;

    fn chat_url(&self, endpoint: &Endpoint) -> String {
        format!("{}/api/chat", endpoint.base_url())
    }

    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        images::check(Self::NAME, &images::OLLAMA, request.messages)?;
        let mut options = self.options.clone();
        if let Some(t) = request.settings.temperature.or(endpoint.temperature()) {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(n) = request.settings.max_tokens.or(endpoint.max_tokens()) {
            options.insert("num_predict".into(), json!(n));
        }
        encode(&RequestBody {
            model: endpoint.model(),
            messages: messages(request.system, request.messages),
            // No `tool_choice` in this API: a forced choice is only the
            // tools on offer (see `Ollama`).
            tools: request
                .callable_tools()
                .iter()
                .map(|spec| json!({"type": "function", "function": spec}))
                .collect(),
            format: request.output.map(|output| &output.schema),
            stream: true,
            think: self.think,
            options: (!options.is_empty()).then_some(options),
        })
    }

    fn framing(&self) -> Framing {
        Framing::Lines
    }

    fn decoder(&self) -> Decoder {
        Decoder::default()
    }

    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
        Box::pin(async move {
            let model = endpoint.model();
            let tags = format!("{}/api/tags", endpoint.base_url());
            let mut health = endpoint
                .probe_list(&tags, |listed| {
                    let models = listed.get("models")?.as_array()?;
                    Some(
                        models
                            .iter()
                            .filter_map(|m| m.get("name")?.as_str())
                            .any(|name| {
                                name == model || name.strip_suffix(":latest") == Some(model)
                            }),
                    )
                })
                .await;
            if health.model_present == Some(false) {
                health.detail = Some(format!(
                    "model `{model}` is not pulled: run `ollama pull {model}`"
                ));
            }
            health
        })
    }

    /// From `/api/show`: a `num_ctx` set with [`option`](Http::option), else
    /// the model's own `num_ctx` parameter, else the length it was trained
    /// for.
    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        let num_ctx = self
            .options
            .get("num_ctx")
            .and_then(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()));
        Box::pin(super::window::ollama(
            endpoint,
            endpoint.base_url(),
            num_ctx,
        ))
    }

    fn explain(&self, error: ProviderError) -> ProviderError {
        with_hint(error)
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
    /// A JSON Schema the answer must match: structured outputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'a Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Map<String, Value>>,
}

/// The conversation in Ollama's shape: tool calls with object arguments and
/// no ids; tool results as `tool` messages naming the tool. Images, the
/// user's and a tool's, go in the message's `images`, base64 without a
/// `data:` prefix (docs/api.md, "Chat request (with images)").
fn messages(system: Option<&str>, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system {
        out.push(json!({"role": "system", "content": system}));
    }
    let mut names = std::collections::HashMap::new();
    for message in messages {
        match message.role {
            Role::System => out.push(json!({"role": "system", "content": message.text()})),
            Role::User => {
                let mut wire = json!({"role": "user", "content": message.text()});
                with_images(&mut wire, message.images());
                out.push(wire);
            }
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
                        with_images(&mut wire, result.images.iter());
                        out.push(wire);
                    }
                }
            }
        }
    }
    out
}

/// Sets `images` on a wire message, if there are any. Only bytes are sent:
/// `images::check` refused URLs and stored images.
fn with_images<'a>(wire: &mut Value, images: impl Iterator<Item = &'a Image>) {
    let images: Vec<String> = images.filter_map(Image::base64).collect();
    if !images.is_empty() {
        wire["images"] = json!(images);
    }
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

/// Reads the lines of `/api/chat`.
#[derive(Debug, Default)]
pub struct Decoder {
    calls: usize,
    finished: bool,
}

impl Decode for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        line: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        if self.finished {
            return Ok(());
        }
        let parsed: Line = serde_json::from_str(line).map_err(|e| ProviderError::Decode {
            message: format!("{e} in line `{line}`"),
        })?;
        if let Some(error) = parsed.error {
            return Err(ProviderError::Stream { message: error });
        }
        if let Some(message) = parsed.message {
            if let Some(thinking) = message.thinking.filter(|t| !t.is_empty()) {
                out.push_back(StreamEvent::ReasoningDelta(thinking));
            }
            if !message.content.is_empty() {
                out.push_back(StreamEvent::TextDelta(message.content));
            }
            for call in message.tool_calls {
                out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index: self.calls,
                    id: None,
                    name: Some(call.function.name),
                    arguments: if call.function.arguments.is_null() {
                        String::new()
                    } else {
                        call.function.arguments.to_string()
                    },
                }));
                self.calls += 1;
            }
        }
        if parsed.done {
            self.finished = true;
            out.push_back(StreamEvent::Usage(Usage {
                input_tokens: parsed.prompt_eval_count.unwrap_or(0),
                output_tokens: parsed.eval_count.unwrap_or(0),
                ..Usage::default()
            }));
            let finish = match parsed.done_reason.as_deref() {
                // Ollama says "stop" after tool calls too.
                Some("stop") | None if self.calls > 0 => FinishReason::ToolCalls,
                Some(reason) => FinishReason::from_raw(reason),
                None => FinishReason::Stop,
            };
            out.push_back(StreamEvent::Finish(finish));
        }
        Ok(())
    }

    /// A stream that ends without its `done` line ends without a finish.
    fn end(&mut self, _out: &mut Events) -> Result<(), ProviderError> {
        Ok(())
    }
}
