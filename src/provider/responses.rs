//! OpenAI's Responses API (`/responses`, SSE with typed events), stateless.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use super::http::{
    CONNECT_TIMEOUT, READ_TIMEOUT, build_client, encode, probe, redact, retried, secret,
    shared_setters,
};
use super::sse::{self, Events, SseDecoder};
use super::{
    ChatRequest, EventStream, FinishReason, Health, ProviderError, RetryPolicy, StreamEvent,
    ToolCallDelta,
};
use crate::message::{Message, Part, Role, Usage};

/// Marks a reasoning item of the Responses API; its signature is the item's
/// `id` and `encrypted_content`, as JSON.
const SIGNED: &str = "openai-responses";

/// A client for OpenAI's Responses API, used statelessly (`store: false`,
/// no `previous_response_id`): the whole conversation goes with every
/// request, reasoning items come back with their encrypted content and are
/// sent again with the tool results that follow, function calls are keyed
/// by their `call_id` (not the item id), and usage comes from
/// `response.completed`.
///
/// # Examples
/// ```
/// use ferrobot::provider::OpenAiResponses;
/// let gpt = OpenAiResponses::new("https://api.openai.com/v1").model("gpt-5-mini").api_key_env("OPENAI_API_KEY").reasoning_effort("low");
/// # let _ = gpt;
/// ```
#[derive(Clone)]
pub struct OpenAiResponses {
    base_url: String,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    temperature: Option<f32>,
    effort: Option<String>,
    retry: RetryPolicy,
    read_timeout: Duration,
    client: Result<reqwest::Client, String>,
}

impl fmt::Debug for OpenAiResponses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponses")
            .field("base_url", &redact(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl OpenAiResponses {
    /// A client for the server at `base_url`, the part before `/responses`,
    /// e.g. `https://api.openai.com/v1`.
    pub fn new(base_url: impl Into<String>) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        Self {
            endpoint: format!("{base_url}/responses"),
            base_url,
            model: String::new(),
            api_key: None,
            temperature: None,
            effort: None,
            retry: RetryPolicy::default(),
            read_timeout: READ_TIMEOUT,
            client: build_client(CONNECT_TIMEOUT),
        }
    }

    shared_setters!(model: "gpt-5-mini", key: "`Authorization: Bearer …`");

    /// Sampling temperature, unless a request sets its own. By default, the
    /// server's.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// For reasoning models: the effort (`"minimal"`, `"low"`, `"medium"`,
    /// `"high"`), with reasoning summaries asked for. By default, the
    /// model's own.
    #[must_use]
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.effort = Some(effort.into());
        self
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = self
            .api_key
            .as_deref()
            .and_then(|key| secret(&format!("Bearer {}", key.trim())))
        {
            headers.insert(AUTHORIZATION, value);
        }
        headers
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ProviderError> {
        self.require_model()?;
        let mut body = json!({
            "model": self.model,
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
        if let Some(temperature) = request.settings.temperature.or(self.temperature) {
            body["temperature"] = json!(temperature);
        }
        if let Some(max_tokens) = request.settings.max_tokens {
            body["max_output_tokens"] = json!(max_tokens);
        }
        if let Some(effort) = &self.effort {
            body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        }
        encode(&body)
    }

    async fn connect(&self, body: Bytes) -> Result<EventStream<'_>, ProviderError> {
        let headers = self.headers();
        let decoder = Decoder::default();
        sse::post(
            &self.client,
            &self.endpoint,
            headers,
            body,
            self.read_timeout,
            decoder,
        )
        .await
    }
}

/// The conversation as Responses input items. Reasoning goes back only as
/// the reasoning items this API made; other dialects' reasoning is dropped.
fn input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message.role {
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
                json!({"type": "function_call_output", "call_id": r.call_id, "output": r.content})
            })),
        }
    }
    items
}

/// Reads the typed event stream.
#[derive(Default)]
struct Decoder {
    /// Per output index: the function call's position, and whether its
    /// arguments came in deltas.
    calls: HashMap<u64, (usize, bool)>,
    done: bool,
}

impl SseDecoder for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        let event: Value = sse::json(data)?;
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

impl super::Provider for OpenAiResponses {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        retried(self.body(&request), &self.retry, request.cancel, |body| {
            self.connect(body)
        })
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async move {
            let models = format!("{}/models/{}", self.base_url, self.model);
            probe(&self.client, &models, self.headers(), Some(&self.model)).await
        })
    }

    fn name(&self) -> &str {
        "openai-responses"
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}
