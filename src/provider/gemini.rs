//! Google's Gemini API (`streamGenerateContent?alt=sse`).

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use std::collections::HashMap;

use super::dialect::{Decode, Dialect, Endpoint, Events, Http, KeyHeader, encode, json};
use super::images;
use super::{
    ChatRequest, ContextWindow, FinishReason, Health, ProviderError, StreamEvent, ToolCallDelta,
    ToolChoice,
};
use crate::message::{Image, Message, Part, Role, Usage};
use crate::tool::schema;

/// Marks a thought signature Gemini made.
const SIGNED: &str = "gemini";

/// A client for the Gemini API: `systemInstruction`, `functionCall` /
/// `functionResponse` parts matched by name (Gemini sends no call ids, so
/// stable ones are made), `thought` parts as reasoning, thought signatures
/// kept and sent back on the part that carried them, tool schemas in
/// Gemini's subset, and safety stops as [`FinishReason::ContentFilter`].
/// The setters every dialect shares are [`Http`]'s.
///
/// # Examples
/// ```
/// use ferrobot::provider::Gemini;
/// let gemini = Gemini::new().model("gemini-2.5-flash").api_key_env("GEMINI_API_KEY").thinking(1024);
/// # let _ = gemini;
/// ```
pub type Gemini = Http<GenerateContent>;

/// The `streamGenerateContent` dialect and its settings; see [`Gemini`].
#[derive(Debug, Clone, Default)]
pub struct GenerateContent {
    thinking: Option<i64>,
}

impl Default for Http<GenerateContent> {
    fn default() -> Self {
        Self::new()
    }
}

impl Http<GenerateContent> {
    /// A client for `https://generativelanguage.googleapis.com`.
    pub fn new() -> Self {
        Self::with_base_url("https://generativelanguage.googleapis.com")
    }

    /// A client for another server speaking the same API (a proxy, a
    /// gateway). A trailing `/v1beta` is accepted.
    pub fn with_base_url(base_url: impl Into<String>) -> Self {
        let base_url: String = base_url.into();
        let base_url = base_url.trim_end_matches('/').trim_end_matches("/v1beta");
        Self::with_dialect(base_url, GenerateContent::default())
    }

    /// Asks for thought summaries, with this thinking budget in tokens
    /// (`-1` lets the model choose). By default, the model's own setting,
    /// without summaries.
    #[must_use]
    pub fn thinking(self, budget_tokens: i64) -> Self {
        self.with(|d| d.thinking = Some(budget_tokens))
    }
}

/// `toolConfig.functionCallingConfig`, every tool being declared: mode
/// `NONE`, or `ANY` (some function), with `allowedFunctionNames` for the
/// one to call; nothing for `AUTO`, the default.
fn function_calling(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::None => Some(json!({"mode": "NONE"})),
        ToolChoice::Required => Some(json!({"mode": "ANY"})),
        ToolChoice::Tool(name) => Some(json!({"mode": "ANY", "allowedFunctionNames": [name]})),
    }
}

/// The model's own URL, `{base}/v1beta/models/{model}`.
fn model_url(endpoint: &Endpoint) -> String {
    format!("{}/v1beta/models/{}", endpoint.base_url(), endpoint.model())
}

impl Dialect for GenerateContent {
    type Decoder = Decoder;
    const NAME: &'static str = "gemini";
    const EXAMPLE_MODEL: &'static str = "gemini-2.5-flash";
    /// `responseMimeType` with a `responseSchema` in Gemini's subset.
    const NATIVE_OUTPUT: bool = true;
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-goog-api-key");

    fn chat_url(&self, endpoint: &Endpoint) -> String {
        format!("{}:streamGenerateContent?alt=sse", model_url(endpoint))
    }

    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        images::check(Self::NAME, &images::GEMINI, request.messages)?;
        let nested = images_in_function_responses(endpoint.model());
        let mut body = json!({ "contents": contents(request.messages, nested) });
        if let Some(system) = request.system {
            body["systemInstruction"] = json!({"parts": [{"text": system}]});
        }
        // Gemini 2.x refuses a structured answer beside function
        // declarations ("Function calling with a response mime type:
        // 'application/json' is unsupported"). A typed answer is asked for
        // with no tool to call, so the tools are left out there: the
        // conversation's earlier calls and responses are content, which
        // Gemini reads without the declarations.
        let answering = request.output.is_some() && *request.tool_choice == ToolChoice::None;
        if !request.tools.is_empty() && !answering {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": schema::gemini(&t.parameters)}))
                .collect();
            body["tools"] = json!([{ "functionDeclarations": declarations }]);
            if let Some(config) = function_calling(request.tool_choice) {
                body["toolConfig"] = json!({ "functionCallingConfig": config });
            }
        }
        let mut config = serde_json::Map::new();
        if let Some(temperature) = request.settings.temperature.or(endpoint.temperature()) {
            config.insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = request.settings.max_tokens.or(endpoint.max_tokens()) {
            config.insert("maxOutputTokens".into(), json!(max_tokens));
        }
        if let Some(budget) = self.thinking {
            config.insert(
                "thinkingConfig".into(),
                json!({"includeThoughts": true, "thinkingBudget": budget}),
            );
        }
        if let Some(output) = request.output {
            // Beside declared tools (a forced choice) only Gemini 3 takes it.
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseSchema".into(), schema::gemini(&output.schema));
        }
        if !config.is_empty() {
            body["generationConfig"] = Value::Object(config);
        }
        encode(&body)
    }

    fn decoder(&self) -> Decoder {
        Decoder::default()
    }

    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health> {
        Box::pin(async move {
            endpoint
                .probe(&model_url(endpoint), Some(endpoint.model()))
                .await
        })
    }

    /// `inputTokenLimit` and `outputTokenLimit` of the model's card.
    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(async move {
            let card = match endpoint.get_json(&model_url(endpoint)).await {
                Ok(card) => card,
                Err(ProviderError::Status { status: 404, .. }) => return Ok(None),
                Err(error) => return Err(error),
            };
            let tokens = |key: &str| card[key].as_u64().and_then(|n| u32::try_from(n).ok());
            Ok(tokens("inputTokenLimit").map(|window| ContextWindow {
                tokens: window,
                max_output: tokens("outputTokenLimit"),
            }))
        })
    }
}

/// Whether the model takes a tool's images inside its `functionResponse`,
/// as `parts` of `inlineData` (the Gemini 3 guide, "Multimodal function
/// responses"; the API reference's `FunctionResponse.parts`). Gemini 1.x
/// and 2.x refuse them ("`function_response.parts` is not supported for
/// this model", <https://github.com/google-gemini/gemini-cli/issues/19436>):
/// for those, the images go as `inlineData` parts after the turn's function
/// responses, each result's introduced by a `text` part naming its call.
/// Other names (Gemini 3 and later, aliases, a proxy's own) get the
/// documented form.
fn images_in_function_responses(model: &str) -> bool {
    let model = model.strip_prefix("models/").unwrap_or(model);
    !(model.starts_with("gemini-1") || model.starts_with("gemini-2"))
}

/// `{"inlineData": {"mimeType": …, "data": …}}`, the image's bytes in
/// base64. `None` for a URL or a stored image, which `images::check`
/// refused.
fn inline_data(image: &Image) -> Option<Value> {
    Some(json!({"inlineData": {"mimeType": image.media_type()?, "data": image.base64()?}}))
}

/// The conversation as Gemini `contents`. Tool results are matched to their
/// calls by id to recover the function name Gemini wants; reasoning goes
/// back only as the thought signature Gemini made, on the part that
/// followed it. A user's images follow their text as `inlineData` parts; a
/// tool's go inside its `functionResponse` where `nested` (see
/// [`images_in_function_responses`]), else after the turn's responses.
fn contents(messages: &[Message], nested: bool) -> Vec<Value> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        let (role, parts): (&str, Vec<Value>) = match message.role {
            Role::User if message.images().next().is_some() => {
                let text = message.text();
                let parts = (!text.is_empty())
                    .then(|| json!({"text": text}))
                    .into_iter()
                    .chain(message.images().filter_map(inline_data))
                    .collect();
                ("user", parts)
            }
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
            Role::Tool => {
                let mut parts = Vec::new();
                let mut after = Vec::new();
                for (i, r) in message.tool_results_iter().enumerate() {
                    let name = names.get(r.call_id.as_str()).copied();
                    let key = if r.is_error { "error" } else { "result" };
                    let mut part = json!({"functionResponse": {"name": name.unwrap_or_default(), "response": {key: r.content}}});
                    if !r.images.is_empty() {
                        let images = r.images.iter().filter_map(inline_data);
                        if nested {
                            part["functionResponse"]["parts"] = images.collect();
                        } else {
                            // Gemini sends no call ids: the model knows a
                            // response by its place and name.
                            let call = format!(
                                "function response {} (`{}`)",
                                i + 1,
                                name.unwrap_or_default()
                            );
                            let intro = images::from_tool(r.images.len(), &call);
                            after.push(json!({ "text": intro }));
                            after.extend(images);
                        }
                    }
                    parts.push(part);
                }
                parts.extend(after);
                ("user", parts)
            }
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
#[derive(Debug, Default)]
pub struct Decoder {
    usage: Option<Usage>,
    calls: usize,
    finish: Option<String>,
    blocked: Option<String>,
}

impl Decode for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        let chunk: Value = json(data)?;
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
