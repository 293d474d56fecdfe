//! Google's Gemini API (`streamGenerateContent?alt=sse`).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::http::{
    CONNECT_TIMEOUT, READ_TIMEOUT, build_client, encode, probe, redact, retried, secret,
    shared_setters,
};
use super::sse::{self, Events, SseDecoder};
use super::{
    ChatRequest, EventStream, FinishReason, Health, ProviderError, RetryPolicy, StreamEvent,
    ToolCallDelta, ToolChoice,
};
use crate::message::{Message, Part, Role, Usage};
use crate::tool::schema;

/// Marks a thought signature Gemini made.
const SIGNED: &str = "gemini";

/// A client for the Gemini API: `systemInstruction`, `functionCall` /
/// `functionResponse` parts matched by name (Gemini sends no call ids, so
/// stable ones are made), `thought` parts as reasoning, thought signatures
/// kept and sent back on the part that carried them, tool schemas in
/// Gemini's subset, and safety stops as [`FinishReason::ContentFilter`].
///
/// # Examples
/// ```
/// use ferrobot::provider::Gemini;
/// let gemini = Gemini::new().model("gemini-2.5-flash").api_key_env("GEMINI_API_KEY").thinking(1024);
/// # let _ = gemini;
/// ```
#[derive(Clone)]
pub struct Gemini {
    base_url: String,
    model: String,
    api_key: Option<String>,
    temperature: Option<f32>,
    thinking: Option<i64>,
    retry: RetryPolicy,
    read_timeout: Duration,
    client: Result<reqwest::Client, String>,
}

impl fmt::Debug for Gemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemini")
            .field("base_url", &redact(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl Default for Gemini {
    fn default() -> Self {
        Self::new()
    }
}

impl Gemini {
    /// A client for `https://generativelanguage.googleapis.com`.
    pub fn new() -> Self {
        Self::with_base_url("https://generativelanguage.googleapis.com")
    }

    /// A client for another server speaking the same API (a proxy, a
    /// gateway). A trailing `/v1beta` is accepted.
    pub fn with_base_url(base_url: impl Into<String>) -> Self {
        let base_url = base_url
            .into()
            .trim_end_matches('/')
            .trim_end_matches("/v1beta")
            .to_owned();
        Self {
            base_url,
            model: String::new(),
            api_key: None,
            temperature: None,
            thinking: None,
            retry: RetryPolicy::default(),
            read_timeout: READ_TIMEOUT,
            client: build_client(CONNECT_TIMEOUT),
        }
    }

    shared_setters!(model: "gemini-2.5-flash", key: "`x-goog-api-key`");

    /// Sampling temperature, unless a request sets its own. By default, the
    /// server's.
    #[must_use]
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Asks for thought summaries, with this thinking budget in tokens
    /// (`-1` lets the model choose). By default, the model's own setting,
    /// without summaries.
    #[must_use]
    pub fn thinking(mut self, budget_tokens: i64) -> Self {
        self.thinking = Some(budget_tokens);
        self
    }

    /// The key header, when a key is set.
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.api_key.as_deref().and_then(secret) {
            headers.insert("x-goog-api-key", key);
        }
        headers
    }

    fn endpoint(&self) -> String {
        format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            self.base_url, self.model
        )
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ProviderError> {
        self.require_model()?;
        let mut body = json!({ "contents": contents(request.messages) });
        if let Some(system) = request.system {
            body["systemInstruction"] = json!({"parts": [{"text": system}]});
        }
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": schema::gemini(&t.parameters)}))
                .collect();
            body["tools"] = json!([{ "functionDeclarations": declarations }]);
            if request.tool_choice == ToolChoice::None {
                body["toolConfig"] = json!({"functionCallingConfig": {"mode": "NONE"}});
            }
        }
        let mut config = serde_json::Map::new();
        if let Some(temperature) = request.settings.temperature.or(self.temperature) {
            config.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = request.settings.max_tokens {
            config.insert("maxOutputTokens".into(), json!(max_tokens));
        }
        if let Some(budget) = self.thinking {
            config.insert(
                "thinkingConfig".into(),
                json!({"includeThoughts": true, "thinkingBudget": budget}),
            );
        }
        if !config.is_empty() {
            body["generationConfig"] = Value::Object(config);
        }
        encode(&body)
    }

    async fn connect(&self, body: Bytes) -> Result<EventStream<'_>, ProviderError> {
        let headers = self.headers();
        let decoder = Decoder::default();
        sse::post(
            &self.client,
            &self.endpoint(),
            headers,
            body,
            self.read_timeout,
            decoder,
        )
        .await
    }
}

/// The conversation as Gemini `contents`. Tool results are matched to their
/// calls by id to recover the function name Gemini wants; reasoning goes
/// back only as the thought signature Gemini made, on the part that
/// followed it.
fn contents(messages: &[Message]) -> Vec<Value> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        let (role, parts): (&str, Vec<Value>) = match message.role {
            Role::User | Role::System => ("user", vec![json!({"text": message.text()})]),
            Role::Assistant => {
                let mut parts = Vec::new();
                let mut signature: Option<&str> = None;
                for part in &message.parts {
                    let mut value = match part {
                        Part::Text { text } | Part::Refusal { text } if !text.is_empty() => {
                            json!({"text": text})
                        }
                        Part::Reasoning(r) => {
                            if r.provider.as_deref() == Some(SIGNED) {
                                signature = r.signature.as_deref();
                            }
                            continue;
                        }
                        Part::ToolCall(call) => {
                            names.insert(&call.id, &call.name);
                            let args = if call.arguments.is_object() {
                                call.arguments.clone()
                            } else {
                                json!({})
                            };
                            json!({"functionCall": {"name": call.name, "args": args}})
                        }
                        _ => continue,
                    };
                    if let Some(signature) = signature.take() {
                        value["thoughtSignature"] = json!(signature);
                    }
                    parts.push(value);
                }
                ("model", parts)
            }
            Role::Tool => (
                "user",
                message
                    .tool_results_iter()
                    .map(|r| {
                        let name = names.get(r.call_id.as_str()).copied().unwrap_or_default();
                        let key = if r.is_error { "error" } else { "result" };
                        json!({"functionResponse": {"name": name, "response": {key: r.content}}})
                    })
                    .collect(),
            ),
        };
        if parts.is_empty() {
            continue;
        }
        // Turns alternate: consecutive parts of one role join one turn.
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["parts"].as_array_mut() {
                    existing.extend(parts);
                }
            }
            _ => out.push(json!({"role": role, "parts": parts})),
        }
    }
    out
}

/// Reads the stream of `GenerateContentResponse` chunks.
#[derive(Default)]
struct Decoder {
    usage: Option<Usage>,
    calls: usize,
    finish: Option<String>,
    blocked: Option<String>,
}

impl SseDecoder for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        let chunk: Value = sse::json(data)?;
        if let Some(error) = chunk.get("error") {
            return Err(ProviderError::Stream {
                message: error["message"]
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_owned),
            });
        }
        if let Some(reason) = chunk["promptFeedback"]["blockReason"].as_str() {
            self.blocked = Some(reason.to_owned());
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            let field = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            let thoughts = field("thoughtsTokenCount");
            self.usage = Some(Usage {
                input_tokens: field("promptTokenCount"),
                output_tokens: field("candidatesTokenCount") + thoughts,
                reasoning_tokens: thoughts,
                cached_tokens: field("cachedContentTokenCount"),
            });
        }
        let Some(candidate) = chunk["candidates"].get(0) else {
            return Ok(());
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let signature =
                part["thoughtSignature"]
                    .as_str()
                    .map(|s| StreamEvent::ReasoningSignature {
                        signature: s.to_owned(),
                        provider: SIGNED.to_owned(),
                    });
            if part["thought"].as_bool() == Some(true) {
                if let Some(text) = part["text"].as_str() {
                    out.push_back(StreamEvent::ReasoningDelta(text.to_owned()));
                }
                out.extend(signature);
                continue;
            }
            // A signature belongs to the part it arrived on, so it goes
            // before that part's content, which is where it is sent back.
            out.extend(signature);
            if let Some(text) = part["text"].as_str() {
                out.push_back(StreamEvent::TextDelta(text.to_owned()));
            } else if let Some(call) = part.get("functionCall") {
                let args = call.get("args").filter(|a| !a.is_null());
                out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index: self.calls,
                    id: call["id"].as_str().map(str::to_owned),
                    name: call["name"].as_str().map(str::to_owned),
                    arguments: args.map_or_else(|| "{}".to_owned(), Value::to_string),
                }));
                self.calls += 1;
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Events) -> Result<(), ProviderError> {
        if let Some(reason) = self.blocked.take() {
            return Err(ProviderError::Stream {
                message: format!(
                    "Gemini blocked the prompt ({reason}); rephrase the request or adjust the safety settings"
                ),
            });
        }
        let Some(raw) = self.finish.take() else {
            return Err(ProviderError::Stream {
                message: "the connection closed before the reply finished (no finishReason)".into(),
            });
        };
        if let Some(usage) = self.usage {
            out.push_back(StreamEvent::Usage(usage));
        }
        let finish = match raw.as_str() {
            // Gemini says STOP after function calls too.
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => FinishReason::ContentFilter,
            other => FinishReason::from_raw(other),
        };
        out.push_back(StreamEvent::Finish(finish));
        Ok(())
    }
}

impl super::Provider for Gemini {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        retried(self.body(&request), &self.retry, request.cancel, |body| {
            self.connect(body)
        })
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async move {
            let url = format!("{}/v1beta/models/{}", self.base_url, self.model);
            probe(&self.client, &url, self.headers(), Some(&self.model)).await
        })
    }

    fn name(&self) -> &str {
        "gemini"
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}
