//! Model endpoints.
//!
//! A [`Provider`] takes a [`ChatRequest`] (the conversation, the tools on offer,
//! the [`ModelSettings`]) and returns a stream of [`StreamEvent`]s: text,
//! reasoning and tool-call deltas, usage, and a [`FinishReason`]. An
//! [`Assembler`] folds those events back into a [`Message`]; the agent uses it
//! for every model call, and so can any test. Failures are
//! [`ProviderError`]s; [`RetryPolicy`] decides which are retried.
//!
//! Every HTTP dialect is one type, [`Http<D>`](dialect::Http): an
//! [`Endpoint`](dialect::Endpoint) (base URL, key, headers, time-outs,
//! retries, health probes, an [`Observe`]r of the wire) speaking one
//! [`Dialect`](dialect::Dialect), which holds only its request body, headers
//! and stream decoder. Each is behind its feature:
//!
//! | type | feature | speaks |
//! |------|---------|--------|
//! | `OpenAiCompatible` | `openai` (default) | chat completions, as `OpenAI`, Ollama's `/v1`, vLLM, llama.cpp and LM Studio serve it |
//! | `Ollama` | `ollama` | Ollama's native `/api/chat` (NDJSON) |
//! | `Anthropic` | `anthropic` | Anthropic's Messages API |
//! | `Gemini` | `gemini` | Google's Gemini API (`streamGenerateContent`) |
//! | `OpenAiResponses` | `responses` | `OpenAI`'s Responses API, stateless |
//!
//! Any other server is a [`Dialect`](dialect::Dialect) or a [`Provider`] of
//! your own.

#[cfg(feature = "anthropic")]
mod anthropic;
pub(crate) mod assemble;
#[cfg(feature = "__http")]
mod client;
#[cfg(feature = "__http")]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "openai",
        feature = "ollama",
        feature = "anthropic",
        feature = "gemini",
        feature = "responses"
    )))
)]
pub mod dialect;
#[cfg(feature = "__http")]
mod endpoint;
mod error;
#[cfg(feature = "__http")]
mod frames;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg(feature = "__http")]
pub(crate) mod http;
#[cfg(feature = "__http")]
mod images;
mod observe;
#[cfg(feature = "ollama")]
mod ollama;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "responses")]
mod responses;
mod retry;
mod staged;
mod think;
#[cfg(feature = "__http")]
mod timer;
#[cfg(any(feature = "openai", feature = "ollama", feature = "responses"))]
mod window;

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use anthropic::Anthropic;
pub use assemble::{Assembled, Assembler, MAX_TOOL_ARGUMENTS};
pub use error::ProviderError;
#[cfg(feature = "gemini")]
#[cfg_attr(docsrs, doc(cfg(feature = "gemini")))]
pub use gemini::Gemini;
pub use observe::{Observe, Outcome, WireRequest, WireResponse};
#[cfg(all(feature = "cassette", feature = "__http"))]
pub use observe::{Replay, Replayed};
#[cfg(feature = "ollama")]
#[cfg_attr(docsrs, doc(cfg(feature = "ollama")))]
pub use ollama::Ollama;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use openai::{EnvError, HealthError, OpenAiCompatible};
#[cfg(feature = "responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "responses")))]
pub use responses::OpenAiResponses;
pub use retry::RetryPolicy;
pub use think::ThinkSplitter;

use crate::message::{Message, ToolSpec, Usage};

/// The events of one model call, in the order the model produced them.
pub type EventStream<'a> = BoxStream<'a, Result<StreamEvent, ProviderError>>;

/// A model endpoint: one dialect, one model.
///
/// Implementations are shared as `Arc<dyn Provider>` between conversations.
/// The agent calls [`stream`](Provider::stream) once per model call and reads
/// the stream to its end; dropping the stream early abandons the call.
///
/// # Examples
/// ```
/// # use ferrobot::testing::MockProvider;
/// # use std::sync::Arc;
/// use ferrobot::provider::Provider;
/// let provider: Arc<dyn Provider> = Arc::new(MockProvider::replying("hi"));
/// assert_eq!(provider.name(), "mock");
/// ```
pub trait Provider: Send + Sync + fmt::Debug {
    /// Starts one model call. Errors that happen before anything streamed
    /// (unreachable endpoint, error status) come as the stream's first item.
    /// Respect [`ChatRequest::tool_choice`]: under [`ToolChoice::None`] the
    /// model must not be offered tools to call (send
    /// [`callable_tools`](ChatRequest::callable_tools), or tell the server
    /// not to call any); under [`ToolChoice::Required`] and
    /// [`ToolChoice::Tool`] tell the server the model must call one, where
    /// it can be told. Ask for [`ChatRequest::output`] where
    /// [`native_output`](Provider::native_output) is true.
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a>;

    /// Probes the endpoint: is it reachable, does it serve the configured model,
    /// how long did it take. Never takes longer than about five seconds.
    fn health(&self) -> BoxFuture<'_, Health>;

    /// The dialect's short name, e.g. `"openai"`; used in traces.
    fn name(&self) -> &str;

    /// The model requests go to, e.g. `"qwen3:8b"`; used in traces.
    fn model_name(&self) -> &str;

    /// How many tokens the model takes, as the server says: `/v1/models`
    /// metadata (vLLM's `max_model_len`, `OpenRouter`'s `context_length`),
    /// llama.cpp's `/props`, Ollama's `/api/show`, Gemini's model card.
    /// `Ok(None)` when the server doesn't say (`OpenAI`, Anthropic). The
    /// dialects ask once per provider value and keep the answer; a failure
    /// is not kept, so asking again retries. Bots use it to bound history.
    ///
    /// By default, `Ok(None)`.
    ///
    /// # Errors
    /// When the server could not be asked: unreachable, an error status
    /// other than "no such path", an answer that isn't JSON.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use ferrobot::provider::Provider;
    /// use ferrobot::testing::MockProvider;
    /// let window = MockProvider::replying("hi").context_window().await.unwrap();
    /// assert_eq!(window, None);
    /// # }
    /// ```
    fn context_window(&self) -> BoxFuture<'_, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(async { Ok(None) })
    }

    /// Whether the server can be asked for a structured answer
    /// ([`ChatRequest::output`]): true for the chat completions, Responses,
    /// Gemini and Ollama dialects. Typed answers use an output tool where
    /// it's false.
    ///
    /// By default, false.
    fn native_output(&self) -> bool {
        false
    }
}

/// A model's context window, from [`Provider::context_window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ContextWindow {
    /// Tokens the model attends to at most: the prompt and, on most servers,
    /// the answer too (Gemini counts the prompt alone).
    pub tokens: u32,
    /// The most tokens one answer may have, when the server says.
    pub max_output: Option<u32>,
}

impl ContextWindow {
    /// A window of `tokens`, with no bound on answers given.
    ///
    /// # Examples
    /// ```
    /// let window = ferrobot::provider::ContextWindow::new(8192);
    /// assert_eq!((window.tokens, window.max_output), (8192, None));
    /// ```
    pub fn new(tokens: u32) -> Self {
        Self {
            tokens,
            max_output: None,
        }
    }

    /// With a bound on one answer's tokens.
    #[must_use]
    pub fn with_max_output(mut self, tokens: u32) -> Self {
        self.max_output = Some(tokens);
        self
    }
}

/// A shared provider is a provider, so one endpoint can serve several agents.
impl<P: Provider + ?Sized> Provider for std::sync::Arc<P> {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        (**self).stream(request)
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        (**self).health()
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn context_window(&self) -> BoxFuture<'_, Result<Option<ContextWindow>, ProviderError>> {
        (**self).context_window()
    }

    fn native_output(&self) -> bool {
        (**self).native_output()
    }
}

/// Whether the model may call the tools a request describes.
///
/// Not `Copy` since 0.x: [`ToolChoice::Tool`] names a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides whether to call a tool.
    #[default]
    Auto,
    /// The model must answer in text: the agent's last round once
    /// `max_tool_rounds` is reached, and summaries. Anthropic refuses a
    /// conversation holding tool calls unless tools are described, so its
    /// dialect (and Gemini's) still sends them and says "none"; the others
    /// send no tools at all ([`ChatRequest::callable_tools`]).
    None,
    /// The model must call at least one of the tools. Ollama's native API
    /// can't say so: there the model is only offered the tools. Nor can
    /// Anthropic's with extended thinking on, which refuses forced tool use:
    /// there the model may call them (`auto`). The HTTP dialects refuse it
    /// for a request describing no tools ([`ProviderError::InvalidRequest`]).
    Required,
    /// The model must call this tool. A dialect whose server can't name one
    /// offers only that tool under [`Required`](Self::Required), and
    /// Anthropic's with extended thinking on offers the tools under
    /// [`Auto`](Self::Auto), as for `Required`. The HTTP dialects refuse a
    /// name the request doesn't describe ([`ProviderError::InvalidRequest`]).
    Tool(String),
}

/// A structured answer asked of the server itself: JSON text matching
/// `schema`, the server constraining what the model writes (`OpenAI`'s
/// `response_format`, Gemini's `responseSchema`, Ollama's `format`,
/// llama.cpp's grammar). Dialects that can't ask for it say so in
/// [`Provider::native_output`], and the agent uses an output tool instead.
///
/// # Examples
/// ```
/// use ferrobot::provider::OutputFormat;
/// let format = OutputFormat::new("invoice", serde_json::json!({
///     "type": "object",
///     "properties": {"total": {"type": "number"}},
///     "required": ["total"],
///     "additionalProperties": false,
/// }));
/// assert_eq!(format.name, "invoice");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutputFormat {
    /// A name for the answer's shape (`[a-zA-Z0-9_-]`, as `OpenAI` wants).
    pub name: String,
    /// What the answer is, for the model.
    pub description: Option<String>,
    /// The answer's JSON Schema: an object, in the plain portable form of
    /// [`tool::schema`](crate::tool::schema); dialects convert it (strict
    /// for `OpenAI`, the `OpenAPI` subset for Gemini).
    pub schema: serde_json::Value,
}

impl OutputFormat {
    /// A format named `name` for answers matching `schema`.
    pub fn new(name: impl Into<String>, schema: serde_json::Value) -> Self {
        Self {
            name: name.into(),
            description: None,
            schema,
        }
    }

    /// With a description of the answer.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The fields of `OpenAI`'s `json_schema` format: `name`, `description`
    /// (if any), `schema` in the strict form where it can be expressed (as
    /// for `strict_tools`), else as it is, and `strict` saying which. Chat
    /// completions nests them under `response_format.json_schema`; Responses
    /// puts them beside `type` in `text.format`.
    #[cfg(any(feature = "openai", feature = "responses"))]
    pub(crate) fn openai_json_schema(&self) -> serde_json::Map<String, serde_json::Value> {
        let (schema, strict) = crate::tool::schema::openai_strict_or_plain(&self.schema);
        let mut format = serde_json::Map::new();
        format.insert("name".into(), self.name.clone().into());
        if let Some(description) = &self.description {
            format.insert("description".into(), description.clone().into());
        }
        format.insert("schema".into(), schema.into_owned());
        format.insert("strict".into(), strict.into());
        format
    }
}

/// What one model call is given.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ChatRequest<'a> {
    /// Instructions sent before the conversation, if any.
    pub system: Option<&'a str>,
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// The tools of the conversation. The model may call them only when
    /// `tool_choice` is [`ToolChoice::Auto`].
    pub tools: &'a [ToolSpec],
    /// Whether the model may call `tools` now, must call one, or must
    /// answer in text.
    pub tool_choice: &'a ToolChoice,
    /// A structured answer to ask the server for, if any; only sent to
    /// providers whose [`Provider::native_output`] is true.
    pub output: Option<&'a OutputFormat>,
    /// Per-call settings; `None` fields fall back to the provider's own.
    pub settings: &'a ModelSettings,
    /// Fires when the caller gives up on the call.
    pub cancel: &'a CancellationToken,
}

impl<'a> ChatRequest<'a> {
    /// A request for the given conversation, with no system prompt, no tools
    /// and default settings.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Message, provider::ChatRequest};
    /// let messages = [Message::user("hi")];
    /// let request = ChatRequest::new(&messages);
    /// assert!(request.tools.is_empty());
    /// ```
    pub fn new(messages: &'a [Message]) -> Self {
        static SETTINGS: ModelSettings = ModelSettings::DEFAULT;
        static NEVER: std::sync::LazyLock<CancellationToken> =
            std::sync::LazyLock::new(CancellationToken::new);
        Self {
            system: None,
            messages,
            tools: &[],
            tool_choice: &ToolChoice::Auto,
            output: None,
            settings: &SETTINGS,
            cancel: &NEVER,
        }
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn system(mut self, system: Option<&'a str>) -> Self {
        self.system = system;
        self
    }

    /// Sets the tools of the conversation. By default, none.
    #[must_use]
    pub fn tools(mut self, tools: &'a [ToolSpec]) -> Self {
        self.tools = tools;
        self
    }

    /// Sets whether the model may call the tools. By default,
    /// [`ToolChoice::Auto`].
    #[must_use]
    pub fn tool_choice(mut self, choice: &'a ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Asks the server for a structured answer. By default, none.
    #[must_use]
    pub fn output(mut self, output: Option<&'a OutputFormat>) -> Self {
        self.output = output;
        self
    }

    /// The tools the model may call now: `tools` under [`ToolChoice::Auto`]
    /// and [`ToolChoice::Required`], the named one under
    /// [`ToolChoice::Tool`], none under [`ToolChoice::None`]. What a dialect
    /// whose server takes a conversation holding tool calls without tools
    /// sends: a server can't call what it wasn't shown.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Message, ToolSpec};
    /// use ferrobot::provider::{ChatRequest, ToolChoice};
    /// let messages = [Message::user("hi")];
    /// let tools = [
    ///     ToolSpec::new("ping", "Ping.", serde_json::json!({"type": "object"})),
    ///     ToolSpec::new("pong", "Pong.", serde_json::json!({"type": "object"})),
    /// ];
    /// let request = ChatRequest::new(&messages).tools(&tools);
    /// assert_eq!(request.callable_tools().len(), 2);
    /// assert_eq!(request.tool_choice(&ToolChoice::Required).callable_tools().len(), 2);
    /// assert!(request.tool_choice(&ToolChoice::None).callable_tools().is_empty());
    ///
    /// let pong = ToolChoice::Tool("pong".into());
    /// let named = request.tool_choice(&pong).callable_tools();
    /// assert_eq!(named.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["pong"]);
    /// // A name the request doesn't describe leaves nothing to call.
    /// let missing = ToolChoice::Tool("pang".into());
    /// assert!(request.tool_choice(&missing).callable_tools().is_empty());
    /// ```
    pub fn callable_tools(&self) -> &'a [ToolSpec] {
        match self.tool_choice {
            ToolChoice::Auto | ToolChoice::Required => self.tools,
            ToolChoice::Tool(name) => self
                .tools
                .iter()
                .position(|t| t.name == *name)
                .map_or(&[], |i| &self.tools[i..=i]),
            ToolChoice::None => &[],
        }
    }

    /// Sets the model settings.
    #[must_use]
    pub fn settings(mut self, settings: &'a ModelSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Sets the cancellation token.
    #[must_use]
    pub fn cancel(mut self, cancel: &'a CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// Sampling settings for a model call. Unset fields use the provider's.
///
/// # Examples
/// ```
/// use ferrobot::provider::ModelSettings;
/// let settings = ModelSettings::builder().temperature(0.2).max_tokens(512).build();
/// assert_eq!(settings.max_tokens, Some(512));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, bon::Builder)]
#[non_exhaustive]
pub struct ModelSettings {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Upper bound on generated tokens.
    pub max_tokens: Option<u32>,
}

impl ModelSettings {
    const DEFAULT: ModelSettings = ModelSettings {
        temperature: None,
        max_tokens: None,
    };
}

/// One thing a model call produced.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A piece of the model's reasoning.
    ReasoningDelta(String),
    /// The signature that closes the current reasoning, for dialects that
    /// sign it and want it back.
    ReasoningSignature {
        /// The opaque signature.
        signature: String,
        /// The dialect it belongs to, kept on the message so another dialect
        /// drops it instead of sending it malformed.
        provider: String,
    },
    /// A piece of a refusal.
    RefusalDelta(String),
    /// A whole block the provider ran on its own side, kept verbatim.
    Opaque(crate::message::Opaque),
    /// A piece of a tool call.
    ToolCallDelta(ToolCallDelta),
    /// Token counts for this call so far; a later event replaces an earlier one.
    Usage(Usage),
    /// Why the model stopped. The stream ends after it.
    Finish(FinishReason),
}

/// A fragment of a tool call, keyed by its position among the call's tool calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// Position of the call in this message; fragments of one call share it.
    pub index: usize,
    /// The call's id, when this fragment carries it.
    pub id: Option<String>,
    /// The tool's name, when this fragment carries it.
    pub name: Option<String>,
    /// The next piece of the arguments' JSON text.
    pub arguments: String,
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model asked for tools.
    ToolCalls,
    /// The token limit cut the answer short.
    Length,
    /// A content filter stopped the answer.
    ContentFilter,
    /// Anything else, as the provider named it.
    Other(String),
}

impl FinishReason {
    /// Maps a provider's raw value (`"stop"`, `"tool_calls"`, …) to a finish reason.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::provider::FinishReason;
    /// assert_eq!(FinishReason::from_raw("length"), FinishReason::Length);
    /// assert_eq!(FinishReason::from_raw("end_turn"), FinishReason::Stop);
    /// ```
    pub fn from_raw(raw: &str) -> Self {
        match raw {
            "stop" | "end_turn" | "stop_sequence" | "STOP" | "completed" => FinishReason::Stop,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "length" | "max_tokens" | "MAX_TOKENS" | "incomplete" => FinishReason::Length,
            "content_filter" | "SAFETY" | "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        })
    }
}

/// The result of [`Provider::health`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Whether the endpoint answered.
    pub reachable: bool,
    /// Whether the configured model is served; `None` when the endpoint
    /// cannot say.
    pub model_present: Option<bool>,
    /// How long the probe took.
    pub latency: Duration,
    /// What went wrong, when something did; `None` when all is well.
    pub detail: Option<String>,
}

impl Health {
    /// A healthy endpoint serving the model.
    pub fn ok(latency: Duration) -> Self {
        Self {
            reachable: true,
            model_present: Some(true),
            latency,
            detail: None,
        }
    }

    /// An endpoint that could not be reached.
    pub fn unreachable(latency: Duration, detail: impl Into<String>) -> Self {
        Self {
            reachable: false,
            model_present: None,
            latency,
            detail: Some(detail.into()),
        }
    }

    /// An endpoint that answered, but not as hoped (a 401, a missing model).
    pub fn problem(latency: Duration, detail: impl Into<String>) -> Self {
        Self {
            reachable: true,
            model_present: None,
            latency,
            detail: Some(detail.into()),
        }
    }

    /// Whether the endpoint answered and reported no problem.
    pub fn is_ok(&self) -> bool {
        self.reachable && self.detail.is_none()
    }
}
