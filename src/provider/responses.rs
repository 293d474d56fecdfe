//! OpenAI's Responses API (`/responses`, SSE with typed events), stateless.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::dialect::{Decode, Dialect, Endpoint, Events, Http, encode, json};
use super::images;
use super::{
    ChatRequest, ContextWindow, FinishReason, Health, ProviderError, StreamEvent, ToolCallDelta,
    ToolChoice,
};
use crate::message::{Image, Message, Part, Role, Usage};

/// Marks a reasoning item of the Responses API; its signature is the item's
/// `id` and `encrypted_content`, as JSON.
const SIGNED: &str = "openai-responses";

/// A client for OpenAI's Responses API, used statelessly (`store: false`,
/// no `previous_response_id`): the whole conversation goes with every
/// request, reasoning items come back with their encrypted content and are
/// sent again with the tool results that follow, function calls are keyed
/// by their `call_id` (not the item id), and usage comes from
/// `response.completed`. The setters every dialect shares are [`Http`]'s.
///
/// # Examples
/// ```
/// use ferrobot::provider::OpenAiResponses;
/// let gpt = OpenAiResponses::new("https://api.openai.com/v1").model("gpt-5-mini").api_key_env("OPENAI_API_KEY").reasoning_effort("low");
/// # let _ = gpt;
/// ```
pub type OpenAiResponses = Http<Responses>;

/// The Responses dialect (`{base_url}/responses`) and its settings; see
/// [`OpenAiResponses`].
#[derive(Debug, Clone, Default)]
pub struct Responses {
    effort: Option<String>,
}

impl Http<Responses> {
    /// A client for the server at `base_url`, the part before `/responses`,
    /// e.g. `https://api.openai.com/v1`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self::with_dialect(base_url, Responses::default())
    }

    /// For reasoning models: the effort (`"minimal"`, `"low"`, `"medium"`,
    /// `"high"`), with reasoning summaries asked for. By default, the
    /// model's own.
    #[must_use]
    pub fn reasoning_effort(self, effort: impl Into<String>) -> Self {
        let effort = effort.into();
        self.with(|d| d.effort = Some(effort))
    }
}

impl Dialect for Responses {
    type Decoder = Decoder;
    const NAME: &'static str = "openai-responses";
    const EXAMPLE_MODEL: &'static str = "gpt-5-mini";
    /// `text.format` with a `json_schema`: structured outputs.
    const NATIVE_OUTPUT: bool = true;

    fn chat_url(&self, endpoint: &Endpoint) -> String {
        format!("{}/responses", endpoint.base_url())
    }

    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        images::check(Self::NAME, &images::OPENAI, request.messages)?;
        let mut body = json!({
            "model": endpoint.model(),
            "input": input(request.messages),
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
        });
        if let Some(system) = request.system {
            body["instructions"] = json!(system);
        }
        let tools = request.callable_tools();
        if !tools.is_empty() {
            body["tools"] = tools
                .iter()
                .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}))
                .collect();
        }
        if let Some(choice) = tool_choice(request.tool_choice) {
            body["tool_choice"] = choice;
        }
        if let Some(output) = request.output {
            let mut format = output.openai_json_schema();
            format.insert("type".into(), json!("json_schema"));
            body["text"] = json!({ "format": format });
        }
        if let Some(temperature) = request.settings.temperature.or(endpoint.temperature()) {
            body["temperature"] = json!(temperature);
        }
        if let Some(max_tokens) = request.settings.max_tokens.or(endpoint.max_tokens()) {
            body["max_output_tokens"] = json!(max_tokens);
        }
        if let Some(effort) = &self.effort {
            body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        }
        encode(&body)
    }

    fn decoder(&self) -> Decoder {
        Decoder::default()
    }

    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
        Box::pin(async move {
            let model = format!("{}/models/{}", endpoint.base_url(), endpoint.model());
            endpoint.probe(&model, Some(endpoint.model())).await
        })
    }

    /// As [`OpenAiCompatible`](super::OpenAiCompatible)'s: servers that
    /// speak this dialect (llama.cpp, vLLM) list models the same way.
    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(super::window::openai_compatible(endpoint))
    }
}

/// `tool_choice` as the Responses API says it, where it says more than the
/// tools sent: `"required"`, or the one function to call (flat, unlike chat
/// completions' `function.name`). Under [`ToolChoice::None`] no tools are
/// sent ([`ChatRequest::callable_tools`]).
fn tool_choice(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::Tool(name) => Some(json!({"type": "function", "name": name})),
        ToolChoice::Auto | ToolChoice::None => None,
    }
}

/// The conversation as Responses input items. Reasoning goes back only as
/// the reasoning items this API made; other dialects' reasoning is dropped.
fn input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message.role {
            Role::User if message.images().next().is_some() => {
                let content = text_and_images(&message.text(), message.images());
                items.push(json!({"role": "user", "content": content}));
            }
            Role::User | Role::System => {
                items.push(json!({"role": "user", "content": message.text()}));
            }
            Role::Assistant => {
                for part in &message.parts {
                    match part {
                        Part::Text { text } | Part::Refusal { text } if !text.is_empty() => {
                            items.push(json!({"role": "assistant", "content": text}));
                        }
                        Part::Reasoning(r) if r.provider.as_deref() == Some(SIGNED) => {
                            let Some(mut item) = r
                                .signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                            else {
                                continue;
                            };
                            item["type"] = json!("reasoning");
                            item["summary"] = if r.text.is_empty() {
                                json!([])
                            } else {
                                json!([{"type": "summary_text", "text": r.text}])
                            };
                            items.push(item);
                        }
                        Part::ToolCall(call) => items.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments.to_string(),
                        })),
                        _ => {}
                    }
                }
            }
            Role::Tool => items.extend(message.tool_results_iter().map(|r| {
                // A function's output is text, or a list of `input_text` and
                // `input_image` items where it showed images (the API
                // reference, `function_call_output.output`: "Text, image, or
                // file output of the function tool call").
                let output = if r.images.is_empty() {
                    json!(r.content)
                } else {
                    Value::Array(text_and_images(&r.content, r.images.iter()))
                };
                json!({"type": "function_call_output", "call_id": r.call_id, "output": output})
            })),
        }
    }
    items
}

/// An `input_text` item, unless the text is empty, then an `input_image`
/// per image.
fn text_and_images<'a>(text: &str, images: impl Iterator<Item = &'a Image>) -> Vec<Value> {
    (!text.is_empty())
        .then(|| json!({"type": "input_text", "text": text}))
        .into_iter()
        .chain(images.filter_map(input_image))
        .collect()
}

/// `{"type": "input_image", "image_url": …, "detail": "auto"}`: a `data:` URI
/// of the bytes or the URL to fetch. `detail` is required in input messages
/// (`auto` is the API's default). `None` for a stored image, which
/// `images::check` refused.
fn input_image(image: &Image) -> Option<Value> {
    Some(json!({"type": "input_image", "image_url": image.uri()?, "detail": "auto"}))
}

/// Reads the typed event stream.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Per output index: the function call's position, and whether its
    /// arguments came in deltas.
    calls: HashMap<u64, (usize, bool)>,
    done: bool,
}

impl Decode for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        let event: Value = json(data)?;
        let output = event["output_index"].as_u64().unwrap_or(0);
        let text = || event["delta"].as_str().unwrap_or_default().to_owned();
        match event["type"].as_str().unwrap_or_default() {
            "response.output_text.delta" => out.push_back(StreamEvent::TextDelta(text())),
            "response.refusal.delta" => out.push_back(StreamEvent::RefusalDelta(text())),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push_back(StreamEvent::ReasoningDelta(text()));
            }
            "response.output_item.added" if event["item"]["type"] == "function_call" => {
                let item = &event["item"];
                let index = self.calls.len();
                self.calls.insert(output, (index, false));
                out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: item["call_id"].as_str().map(str::to_owned),
                    name: item["name"].as_str().map(str::to_owned),
                    arguments: String::new(),
                }));
            }
            "response.function_call_arguments.delta" => {
                if let Some((index, streamed)) = self.calls.get_mut(&output) {
                    *streamed = true;
                    out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                        index: *index,
                        arguments: text(),
                        ..ToolCallDelta::default()
                    }));
                }
            }
            // Some servers send the arguments only whole.
            "response.function_call_arguments.done" => {
                if let Some((index, false)) = self.calls.get(&output).copied() {
                    out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                        index,
                        arguments: event["arguments"].as_str().unwrap_or_default().to_owned(),
                        ..ToolCallDelta::default()
                    }));
                }
            }
            "response.output_item.done" if event["item"]["type"] == "reasoning" => {
                let item = &event["item"];
                if let Some(encrypted) = item["encrypted_content"].as_str() {
                    let kept = json!({"id": item["id"], "encrypted_content": encrypted});
                    out.push_back(StreamEvent::ReasoningSignature {
                        signature: kept.to_string(),
                        provider: SIGNED.to_owned(),
                    });
                }
            }
            "response.completed" | "response.incomplete" => {
                self.finish(&event["response"], out);
            }
            "response.failed" | "error" => {
                let error = if event["type"] == "error" {
                    &event
                } else {
                    &event["response"]["error"]
                };
                let message = error["message"].as_str().unwrap_or("the response failed");
                let code = error["code"].as_str().unwrap_or_default();
                return Err(ProviderError::Stream {
                    message: if code.is_empty() {
                        message.to_owned()
                    } else {
                        format!("{message} ({code})")
                    },
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, _out: &mut Events) -> Result<(), ProviderError> {
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::Stream {
                message: "the connection closed before the reply finished (no response.completed)"
                    .into(),
            })
        }
    }
}

impl Decoder {
    fn finish(&mut self, response: &Value, out: &mut Events) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let usage = &response["usage"];
        let field = |value: &Value| value.as_u64().unwrap_or(0);
        out.push_back(StreamEvent::Usage(Usage {
            input_tokens: field(&usage["input_tokens"]),
            output_tokens: field(&usage["output_tokens"]),
            reasoning_tokens: field(&usage["output_tokens_details"]["reasoning_tokens"]),
            cached_tokens: field(&usage["input_tokens_details"]["cached_tokens"]),
        }));
        let finish = match response["incomplete_details"]["reason"].as_str() {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None if !self.calls.is_empty() => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        out.push_back(StreamEvent::Finish(finish));
    }
}
