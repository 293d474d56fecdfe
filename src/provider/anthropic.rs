//! Anthropic's Messages API (`/v1/messages`, SSE with event names).

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::dialect::{Decode, Dialect, Endpoint, Events, Http, KeyHeader, encode, json};
use super::images;
use super::{
    ChatRequest, ContextWindow, FinishReason, Health, ProviderError, StreamEvent, ToolCallDelta,
    ToolChoice,
};
use crate::message::{Image, Message, Opaque, Part, Role, Usage};

/// Marks reasoning signed by Anthropic.
const SIGNED: &str = "anthropic";
/// Marks Anthropic's redacted thinking, whose data rides in the signature.
const REDACTED: &str = "anthropic:redacted";

/// A client for Anthropic's Messages API: the system prompt in its own
/// field, `tool_use`/`tool_result` blocks, tool arguments assembled from
/// `input_json_delta`s, extended thinking kept with its signature (and
/// redacted thinking kept whole) and sent back unchanged with the tool
/// results that follow, `max_tokens` always set (4,096 unless
/// [`max_tokens`](Http::max_tokens) says otherwise), usage from
/// `message_start` and `message_delta`, and `overloaded_error` retried like
/// a 529. The setters every dialect shares are [`Http`]'s.
///
/// The Messages API has no native structured output here
/// ([`Provider::native_output`](super::Provider::native_output) is false):
/// typed answers use an output tool, and a request asking for
/// [`ChatRequest::output`] anyway fails with
/// [`ProviderError::InvalidRequest`], before anything is sent.
///
/// # Examples
/// ```
/// use ferrobot::provider::Anthropic;
/// let claude = Anthropic::new().model("claude-sonnet-4-20250514").api_key_env("ANTHROPIC_API_KEY").thinking(2048);
/// # let _ = claude;
/// ```
pub type Anthropic = Http<Messages>;

/// The Messages dialect (`/v1/messages`) and its settings; see [`Anthropic`].
#[derive(Debug, Clone, Default)]
pub struct Messages {
    thinking: Option<u32>,
}

impl Default for Http<Messages> {
    fn default() -> Self {
        Self::new()
    }
}

impl Http<Messages> {
    /// A client for `https://api.anthropic.com`.
    pub fn new() -> Self {
        Self::with_base_url("https://api.anthropic.com")
    }

    /// A client for another server speaking the same API (a proxy, a gateway).
    pub fn with_base_url(base_url: impl Into<String>) -> Self {
        let base_url: String = base_url.into();
        let base_url = base_url.trim_end_matches('/').trim_end_matches("/v1");
        Self::with_dialect(base_url, Messages::default())
    }

    /// Turns on extended thinking with this token budget. The API then
    /// refuses forced tool use, so [`ToolChoice::Required`] and
    /// [`ToolChoice::Tool`] are sent as `auto`: the model may answer in
    /// text. By default, off.
    #[must_use]
    pub fn thinking(self, budget_tokens: u32) -> Self {
        self.with(|d| d.thinking = Some(budget_tokens))
    }
}

impl Dialect for Messages {
    type Decoder = Decoder;
    const NAME: &'static str = "anthropic";
    const EXAMPLE_MODEL: &'static str = "claude-sonnet-4-20250514";
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-api-key");
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", "2023-06-01")];

    fn chat_url(&self, endpoint: &Endpoint) -> String {
        format!("{}/v1/messages", endpoint.base_url())
    }

    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        images::check(Self::NAME, &images::ANTHROPIC, request.messages)?;
        let mut max_tokens = request
            .settings
            .max_tokens
            .or(endpoint.max_tokens())
            .unwrap_or(4096);
        let mut body = json!({
            "model": endpoint.model(),
            "messages": messages(request.messages),
            "stream": true,
        });
        if let Some(budget) = self.thinking {
            // The budget counts inside `max_tokens`.
            max_tokens = max_tokens.max(budget + 1024);
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        body["max_tokens"] = json!(max_tokens);
        if let Some(system) = request.system {
            body["system"] = json!(system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            // Described even when withdrawn: Anthropic refuses a
            // conversation holding tool calls without them.
            if let Some(choice) = tool_choice(request.tool_choice, self.thinking.is_some()) {
                body["tool_choice"] = choice;
            }
        }
        if let Some(temperature) = request
            .settings
            .temperature
            .or(endpoint.temperature())
            .filter(|_| self.thinking.is_none())
        {
            body["temperature"] = json!(temperature);
        }
        encode(&body)
    }

    fn decoder(&self) -> Decoder {
        Decoder::default()
    }

    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
        Box::pin(async move {
            let models = format!("{}/v1/models", endpoint.base_url());
            endpoint.probe(&models, None).await
        })
    }

    /// The model's card, `/v1/models/{model}`, where it gives
    /// `max_input_tokens`; Anthropic's did not say when this was written.
    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(async move {
            let url = format!("{}/v1/models/{}", endpoint.base_url(), endpoint.model());
            let card = match endpoint.get_json(&url).await {
                Ok(card) => card,
                Err(ProviderError::Status { status: 404, .. }) => return Ok(None),
                Err(error) => return Err(error),
            };
            let tokens = |key: &str| card[key].as_u64().and_then(|n| u32::try_from(n).ok());
            Ok(tokens("max_input_tokens")
                .or_else(|| tokens("context_window"))
                .map(|window| ContextWindow {
                    tokens: window,
                    max_output: tokens("max_tokens"),
                }))
        })
    }
}

/// `tool_choice` as the Messages API says it, every tool being described:
/// `none`, `any` (some tool), or `tool` with its name; nothing for `auto`,
/// the default.
///
/// With extended thinking on, a forced choice (`any`, `tool`) is sent as
/// `auto`: the API refuses forced tool use with the manual thinking this
/// dialect sends, `{"type": "enabled"}` (an error, "Thinking may not be
/// enabled when `tool_choice` forces tool use"; see
/// <https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#extended-thinking-with-tool-use>),
/// so the model is offered the tools and may answer in text instead. Two
/// alternatives were rejected. Turning thinking off for the request: a
/// tool-use loop is one assistant turn, which must keep one thinking
/// configuration, and a forced choice may come in the middle of one (an
/// output tool asked for after tool rounds), so the API would refuse that
/// too, and `thinking(…)` would quietly not hold. Failing the request:
/// typed answers use an output tool on this dialect, so thinking and typed
/// answers could never go together.
fn tool_choice(choice: &ToolChoice, thinking: bool) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::None => Some(json!({"type": "none"})),
        ToolChoice::Required | ToolChoice::Tool(_) if thinking => {
            tracing::debug!("a forced tool choice is sent as `auto`: thinking is on");
            Some(json!({"type": "auto"}))
        }
        ToolChoice::Required => Some(json!({"type": "any"})),
        ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
    }
}

/// The conversation as Messages API turns. Reasoning goes back only when
/// Anthropic signed it; other dialects' reasoning is dropped, never sent
/// malformed. A user's images follow their text as `image` blocks, and a
/// tool's follow its text inside its `tool_result`, whose `content` may be a
/// list of `text` and `image` blocks (the tool use guide, "Handling tool use
/// and tool results"); without images, both stay plain text.
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        let (role, blocks): (&str, Vec<Value>) = match message.role {
            Role::User if message.images().next().is_some() => (
                "user",
                text_and_images(&message.text(), message.images()),
            ),
            Role::User | Role::System => ("user", vec![json!({"type": "text", "text": message.text()})]),
            Role::Assistant => ("assistant", message.parts.iter().filter_map(assistant_block).collect()),
            Role::Tool => (
                "user",
                message
                    .tool_results_iter()
                    .map(|r| {
                        let content = if r.images.is_empty() {
                            json!(r.content)
                        } else {
                            Value::Array(text_and_images(&r.content, r.images.iter()))
                        };
                        json!({"type": "tool_result", "tool_use_id": r.call_id, "content": content, "is_error": r.is_error})
                    })
                    .collect(),
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        // Turns alternate: consecutive blocks of one role join one turn.
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => out.push(json!({"role": role, "content": blocks})),
        }
    }
    out
}

/// A `text` block, unless the text is empty (the API refuses empty ones),
/// then an `image` block per image.
fn text_and_images<'a>(text: &str, images: impl Iterator<Item = &'a Image>) -> Vec<Value> {
    (!text.is_empty())
        .then(|| json!({"type": "text", "text": text}))
        .into_iter()
        .chain(images.filter_map(image_block))
        .collect()
}

/// An `image` block: its bytes as a `base64` source, or a `url` source the
/// API fetches (the vision guide). `None` for a stored image, which
/// `images::check` refused.
fn image_block(image: &Image) -> Option<Value> {
    let source = match image {
        Image::Bytes { media_type, .. } => {
            json!({"type": "base64", "media_type": media_type, "data": image.base64()?})
        }
        Image::Url { url } => json!({"type": "url", "url": url}),
        Image::Stored { .. } => return None,
    };
    Some(json!({"type": "image", "source": source}))
}

fn assistant_block(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text { text } | Part::Refusal { text } if !text.is_empty() => {
            json!({"type": "text", "text": text})
        }
        Part::Reasoning(r) => match (r.provider.as_deref(), &r.signature) {
            (Some(SIGNED), Some(signature)) => {
                json!({"type": "thinking", "thinking": r.text, "signature": signature})
            }
            (Some(REDACTED), Some(data)) => json!({"type": "redacted_thinking", "data": data}),
            _ => return None,
        },
        Part::Opaque(opaque) if opaque.provider == SIGNED => opaque.value.clone(),
        Part::ToolCall(call) => {
            let input = if call.arguments.is_object() {
                call.arguments.clone()
            } else {
                json!({})
            };
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
        }
        _ => return None,
    })
}

/// Reads the Messages event stream.
#[derive(Debug, Default)]
pub struct Decoder {
    usage: Usage,
    /// Per content block index: its tool call position, for client `tool_use` blocks.
    blocks: std::collections::HashMap<u64, Block>,
    calls: usize,
    stop: Option<String>,
    stopped: bool,
}

#[derive(Debug)]
enum Block {
    Call(usize),
    /// A server tool block: the block so far, and its input's JSON text.
    Server(Value, String),
    Content,
}

impl Decoder {
    fn usage_from(&mut self, usage: &Value) {
        let field = |key: &str| usage.get(key).and_then(Value::as_u64);
        let cache_read = field("cache_read_input_tokens");
        let cache_write = field("cache_creation_input_tokens");
        if let Some(input) = field("input_tokens") {
            self.usage.input_tokens = input + cache_read.unwrap_or(0) + cache_write.unwrap_or(0);
        }
        if let Some(cached) = cache_read {
            self.usage.cached_tokens = cached;
        }
        if let Some(output) = field("output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

impl Decode for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        let event: Value = json(data)?;
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => self.usage_from(&event["message"]["usage"]),
            "content_block_start" => {
                let block = &event["content_block"];
                match block["type"].as_str().unwrap_or_default() {
                    "text" => {
                        self.blocks.insert(index, Block::Content);
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            out.push_back(StreamEvent::TextDelta(text.to_owned()));
                        }
                    }
                    "thinking" => {
                        self.blocks.insert(index, Block::Content);
                        if let Some(text) = block["thinking"].as_str().filter(|t| !t.is_empty()) {
                            out.push_back(StreamEvent::ReasoningDelta(text.to_owned()));
                        }
                    }
                    "redacted_thinking" => {
                        self.blocks.insert(index, Block::Content);
                        let data = block["data"].as_str().unwrap_or_default().to_owned();
                        out.push_back(StreamEvent::ReasoningSignature {
                            signature: data,
                            provider: REDACTED.into(),
                        });
                    }
                    "tool_use" => {
                        let position = self.calls;
                        self.calls += 1;
                        self.blocks.insert(index, Block::Call(position));
                        let input = &block["input"];
                        let arguments = match input.as_object() {
                            Some(map) if !map.is_empty() => input.to_string(),
                            _ => String::new(),
                        };
                        out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                            index: position,
                            id: block["id"].as_str().map(str::to_owned),
                            name: block["name"].as_str().map(str::to_owned),
                            arguments,
                        }));
                    }
                    // Server tools (web search, tool search, MCP) ran on
                    // Anthropic's side; they are not the agent's to run,
                    // but they are kept and sent back as they came.
                    _ => {
                        self.blocks
                            .insert(index, Block::Server(block.clone(), String::new()));
                    }
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                let text = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
                match (
                    delta["type"].as_str().unwrap_or_default(),
                    self.blocks.get(&index),
                ) {
                    ("input_json_delta", Some(Block::Server(..))) => {
                        if let Some(Block::Server(_, input)) = self.blocks.get_mut(&index) {
                            input.push_str(delta["partial_json"].as_str().unwrap_or_default());
                        }
                    }
                    (_, Some(Block::Server(..))) => {}
                    ("text_delta", _) => out.push_back(StreamEvent::TextDelta(text("text"))),
                    ("thinking_delta", _) => {
                        out.push_back(StreamEvent::ReasoningDelta(text("thinking")))
                    }
                    ("signature_delta", _) => {
                        out.push_back(StreamEvent::ReasoningSignature {
                            signature: text("signature"),
                            provider: SIGNED.into(),
                        });
                    }
                    ("input_json_delta", Some(Block::Call(position))) => {
                        out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                            index: *position,
                            arguments: text("partial_json"),
                            ..ToolCallDelta::default()
                        }));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::Server(mut value, input)) = self.blocks.remove(&index) {
                    if let Ok(input) = serde_json::from_str::<Value>(&input) {
                        value["input"] = input;
                    }
                    out.push_back(StreamEvent::Opaque(Opaque {
                        provider: SIGNED.into(),
                        value,
                    }));
                }
            }
            "message_delta" => {
                if let Some(stop) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop.to_owned());
                }
                self.usage_from(&event["usage"]);
            }
            "message_stop" => self.finish(out),
            "error" => {
                let error = &event["error"];
                let message = error["message"]
                    .as_str()
                    .unwrap_or("unknown error")
                    .to_owned();
                // Overloaded is a 529 in all but name: retryable while
                // nothing has streamed.
                return Err(match error["type"].as_str() {
                    Some("overloaded_error") => ProviderError::Status {
                        status: 529,
                        message,
                        retry_after: None,
                    },
                    _ => ProviderError::Stream { message },
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Events) -> Result<(), ProviderError> {
        if self.stopped {
            return Ok(());
        }
        if self.stop.is_some() {
            self.finish(out);
            return Ok(());
        }
        Err(ProviderError::Stream {
            message: "the connection closed before the reply finished (no message_stop)".into(),
        })
    }
}

impl Decoder {
    fn finish(&mut self, out: &mut Events) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        out.push_back(StreamEvent::Usage(self.usage));
        let finish = self
            .stop
            .as_deref()
            .map_or(FinishReason::Stop, FinishReason::from_raw);
        out.push_back(StreamEvent::Finish(finish));
    }
}
