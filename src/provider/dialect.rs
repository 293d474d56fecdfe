//! One provider type for every HTTP dialect.
//!
//! [`Http<D>`] is a model server reached over an [`Endpoint`], speaking the
//! [`Dialect`] `D`: ferrobot's five (`OpenAiCompatible` is
//! `Http<ChatCompletions>`, `Anthropic` is `Http<Messages>`, and so on) and
//! any you write. The endpoint sends, retries, times out, observes and
//! probes; the dialect writes the request body and decodes the answer's
//! frames ([`Framing`]) with its [`Decode`]r. See the providers guide,
//! "A dialect of your own", for one written from scratch.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::future::BoxFuture;

use super::endpoint::Target;
pub use super::endpoint::{Endpoint, KeyHeader};
use super::frames::Frames;
pub use super::frames::{Decode, Events, Framing, json};
use super::http::retried;
use super::observe::Observe;
use super::staged::Item;
use super::timer::IdleTimer;
use super::{
    ChatRequest, ContextWindow, EventStream, Health, Provider, ProviderError, RetryPolicy,
    ToolChoice,
};

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use super::anthropic::Messages;
#[cfg(feature = "gemini")]
#[cfg_attr(docsrs, doc(cfg(feature = "gemini")))]
pub use super::gemini::GenerateContent;
#[cfg(feature = "ollama")]
#[cfg_attr(docsrs, doc(cfg(feature = "ollama")))]
pub use super::ollama::OllamaChat;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use super::openai::ChatCompletions;
#[cfg(feature = "responses")]
#[cfg_attr(docsrs, doc(cfg(feature = "responses")))]
pub use super::responses::Responses;

/// What a wire format says beyond the [`Endpoint`]: where a chat request
/// goes, its body, and how to read the answer. [`Http<Self>`] does the rest.
///
/// The value holds the dialect's own settings (`OpenAI`'s `streaming`,
/// Anthropic's thinking budget); [`Http::dialect`] reads them and
/// [`Http::with`] changes them.
pub trait Dialect: Clone + fmt::Debug + Send + Sync + 'static {
    /// Reads one answer.
    type Decoder: Decode;

    /// The dialect's short name, e.g. `"openai"`: [`Provider::name`].
    const NAME: &'static str;

    /// A model this dialect's servers serve, named in the error for a
    /// missing model, e.g. `"qwen3:8b"`.
    const EXAMPLE_MODEL: &'static str;

    /// How the API key is sent. By default, `Authorization: Bearer`.
    const KEY_HEADER: KeyHeader = KeyHeader::Bearer;

    /// Whether [`body`](Self::body) asks the server for
    /// [`ChatRequest::output`]: [`Provider::native_output`]. While it's
    /// false, [`Http`] refuses a request asking for one with
    /// [`ProviderError::InvalidRequest`] before `body` is called. By
    /// default, false.
    const NATIVE_OUTPUT: bool = false;

    /// The URL a chat request is sent to (`POST`), e.g. `{base_url}/chat/completions`.
    fn chat_url(&self, endpoint: &Endpoint) -> String;

    /// Headers of the dialect's own, sent with every request (an API
    /// version). By default, none.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The JSON body of a chat request; [`encode`] writes a value. Sent again
    /// unchanged on retries. The endpoint's model is set, and [`Http`] has
    /// checked the request: [`ToolChoice::Required`] comes with tools,
    /// [`ToolChoice::Tool`] names one of them, and [`ChatRequest::output`]
    /// is set only where [`NATIVE_OUTPUT`](Self::NATIVE_OUTPUT) is true.
    ///
    /// # Errors
    /// When the request can't be written in this dialect.
    fn body(
        &self,
        endpoint: &Endpoint,
        request: &ChatRequest<'_>,
    ) -> Result<Vec<u8>, ProviderError>;

    /// How answers are cut into frames. By default, [`Framing::Sse`].
    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// A decoder for one answer.
    fn decoder(&self) -> Self::Decoder;

    /// Probes the server, in at most about five seconds; see
    /// [`Provider::health`]. [`Endpoint::probe`] and
    /// [`Endpoint::probe_list`] do the work.
    fn health<'a>(&'a self, endpoint: &'a Endpoint) -> BoxFuture<'a, Health>;

    /// What the server says of the model's context window; see
    /// [`Provider::context_window`]. Called once per provider value (the
    /// answer is kept). By default, `None`.
    fn context_window<'a>(
        &'a self,
        endpoint: &'a Endpoint,
    ) -> BoxFuture<'a, Result<Option<ContextWindow>, ProviderError>> {
        let _ = endpoint;
        Box::pin(async { Ok(None) })
    }

    /// Adds the dialect's advice to an error status, e.g. "pull it with
    /// `ollama pull`". By default, the error unchanged.
    fn explain(&self, error: ProviderError) -> ProviderError {
        error
    }
}

/// A request body as the bytes [`Dialect::body`] returns: JSON.
///
/// # Errors
/// [`ProviderError::Decode`] when `body` can't be written as JSON (a map
/// with keys that aren't strings).
pub fn encode(body: &impl serde::Serialize) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(body).map_err(|e| ProviderError::Decode {
        message: format!("could not encode the request: {e}"),
    })
}

/// A model server speaking dialect `D` over an [`Endpoint`]: the provider
/// type of every HTTP dialect. Its setters take and return it, nothing
/// connects until the first call, and cloning it is cheap.
///
/// The setters here are every dialect's; each dialect adds its own (see its
/// alias: [`OpenAiCompatible`](super::OpenAiCompatible),
/// [`Ollama`](super::Ollama), [`Anthropic`](super::Anthropic),
/// [`Gemini`](super::Gemini), [`OpenAiResponses`](super::OpenAiResponses)).
#[derive(Clone)]
pub struct Http<D> {
    endpoint: Endpoint,
    dialect: D,
    /// Where chat requests go, from the dialect and the endpoint; made
    /// again by the setters that could change it.
    chat: Target,
    /// The context window, once asked; shared by clones, replaced by
    /// setters that could change it.
    window: Arc<tokio::sync::OnceCell<Option<ContextWindow>>>,
}

impl<D: Dialect> fmt::Debug for Http<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("dialect", &self.dialect)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<D: Dialect> Http<D> {
    /// A provider for the server at `base_url` speaking `dialect`: how a
    /// dialect of your own is made. ferrobot's have their own constructors,
    /// such as [`OpenAiCompatible::new`](super::OpenAiCompatible::new).
    pub fn with_dialect(base_url: impl Into<String>, dialect: D) -> Self {
        let endpoint = Endpoint::new(base_url, D::KEY_HEADER, D::HEADERS);
        Self {
            chat: Target::new(&dialect.chat_url(&endpoint)),
            endpoint,
            dialect,
            window: Arc::default(),
        }
    }

    /// The dialect and its settings.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }

    /// The endpoint: base URL, model, time-outs and the rest.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Changes the dialect's settings; for the setters of a dialect of your
    /// own.
    #[must_use]
    pub fn with(mut self, change: impl FnOnce(&mut D)) -> Self {
        change(&mut self.dialect);
        self.changed()
    }

    /// Changes the endpoint; the setters below go through it.
    fn endpoint_with(mut self, change: impl FnOnce(&mut Endpoint)) -> Self {
        change(&mut self.endpoint);
        self.changed()
    }

    /// What is derived from the dialect and the endpoint, after a change.
    fn changed(mut self) -> Self {
        self.chat = Target::new(&self.dialect.chat_url(&self.endpoint));
        self.window = Arc::default();
        self
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.endpoint.base_url()
    }

    /// The model to ask for, e.g. `"qwen3:8b"`. Required: a call without
    /// one fails with a [`ProviderError::Config`] saying so.
    #[must_use]
    pub fn model(self, model: impl Into<String>) -> Self {
        let model = model.into();
        self.endpoint_with(|e| e.set_model(model))
    }

    /// The API key, sent as the dialect's servers expect it (for
    /// `OpenAiCompatible`, `Authorization: Bearer …`; Anthropic `x-api-key`;
    /// Gemini `x-goog-api-key`). It never appears in errors, logs, `Debug`
    /// output or what observers see. Surrounding whitespace is dropped; an
    /// empty key is none. By default, none.
    #[must_use]
    pub fn api_key(self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.endpoint_with(|e| e.set_key(&key))
    }

    /// Reads the API key from the environment variable `name`, if it is
    /// set. No variable is read implicitly, so a key only goes to the server
    /// you chose. By default, none.
    #[must_use]
    pub fn api_key_env(self, name: &str) -> Self {
        match std::env::var(name) {
            Ok(key) => self.api_key(key),
            Err(_) => self,
        }
    }

    /// Adds a header to every request, e.g. a gateway's `cf-aig-authorization`
    /// or an `anthropic-beta` flag; a later one of the same name replaces it.
    /// Values of headers named like credentials (holding `authorization`,
    /// `cookie`, `password` or `secret`, or ending in `-key` or `-token`) are
    /// kept out of `Debug` output and observers. A name or value HTTP can't carry makes every call fail with
    /// a [`ProviderError::Config`] saying so. By default, none.
    #[must_use]
    pub fn header(self, name: &str, value: &str) -> Self {
        self.endpoint_with(|e| e.add_header(name, value))
    }

    /// Sampling temperature, unless a request sets its own. By default, the
    /// server's.
    #[must_use]
    pub fn temperature(self, temperature: f32) -> Self {
        self.endpoint_with(|e| e.set_temperature(temperature))
    }

    /// Upper bound on generated tokens, unless a request sets its own. By
    /// default, the server's (Anthropic's API requires one: 4,096).
    #[must_use]
    pub fn max_tokens(self, max_tokens: u32) -> Self {
        self.endpoint_with(|e| e.set_max_tokens(max_tokens))
    }

    /// When to retry failed calls. By default,
    /// [`RetryPolicy::default()`](RetryPolicy::default).
    #[must_use]
    pub fn retry(self, policy: RetryPolicy) -> Self {
        self.endpoint_with(|e| e.set_retry(policy))
    }

    /// Connection and read time-outs: how long to wait for a connection,
    /// and for each next piece of the answer. By default, 10 s and 300 s
    /// (local models can take minutes to read a long prompt).
    #[must_use]
    pub fn timeouts(self, connect: Duration, read: Duration) -> Self {
        self.endpoint_with(|e| e.set_timeouts(connect, read))
    }

    /// Shows every request and answer, byte for byte, to `observer`: model
    /// calls, retries, health probes and metadata requests. Credentials are
    /// redacted. By default, none, and nothing is copied.
    #[must_use]
    pub fn observe(self, observer: Arc<dyn Observe>) -> Self {
        self.endpoint_with(|e| e.set_observer(observer))
    }

    /// Answers requests from `replay` instead of the network where it has
    /// an answer: a wire cassette's recording, read by this dialect's own
    /// decoder (feature `cassette`). By default, none.
    #[cfg(feature = "cassette")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cassette")))]
    #[must_use]
    pub fn replay(self, replay: Arc<dyn super::observe::Replay>) -> Self {
        self.endpoint_with(|e| e.set_replay(replay))
    }

    /// Sends the request and, once the server answered well, returns the
    /// stream of its events: the answer's frames, unboxed, as the retry
    /// stage polls them directly.
    async fn connect(
        &self,
        body: Bytes,
    ) -> Result<impl Stream<Item = Item> + Unpin + Send + use<'_, D>, ProviderError> {
        let endpoint = &self.endpoint;
        let read_timeout = endpoint.read_timeout();
        // One timer for the request: its head's wait, then its body's.
        let mut timer = endpoint.timer();
        let (response, tap) = endpoint
            .send(
                http::Method::POST,
                &self.chat,
                Some(body),
                read_timeout,
                &mut timer,
            )
            .await
            .map_err(|e| self.dialect.explain(e))?;
        Ok(Frames::new(
            http_body_util::BodyDataStream::new(response.into_body()),
            self.dialect.framing(),
            self.dialect.decoder(),
            Arc::clone(self.chat.shown()),
            IdleTimer::new(read_timeout, timer),
            tap,
        ))
    }
}

/// Refuses, before anything is sent, a request no body of `D` can say
/// right: a structured answer from a dialect without
/// [`NATIVE_OUTPUT`](Dialect::NATIVE_OUTPUT) (its body would leave it out,
/// and the answer would come back unconstrained), or a forced tool call
/// with nothing to call (servers answer 400, or, like Ollama's, quietly
/// answer in text).
fn sendable<D: Dialect>(request: &ChatRequest<'_>) -> Result<(), ProviderError> {
    let invalid = |message: String| {
        Err(ProviderError::InvalidRequest {
            provider: D::NAME.to_owned(),
            message,
        })
    };
    if request.output.is_some() && !D::NATIVE_OUTPUT {
        return invalid(
            "this dialect has no native structured output in ferrobot; typed answers \
             use an output tool (ask for `ChatRequest::output` only where \
             `Provider::native_output` is true)"
                .to_owned(),
        );
    }
    match request.tool_choice {
        ToolChoice::Required if request.tools.is_empty() => invalid(
            "the tool choice requires a tool call, but the request describes no tools: \
             give it tools, or choose `ToolChoice::Auto`"
                .to_owned(),
        ),
        ToolChoice::Tool(name) if request.callable_tools().is_empty() => invalid(format!(
            "the tool choice names `{name}`, which isn't among the request's tools: \
             describe it in `ChatRequest::tools`, or name another"
        )),
        _ => Ok(()),
    }
}

impl<D: Dialect> Provider for Http<D> {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        let body = self
            .endpoint
            .require_model(D::EXAMPLE_MODEL)
            .and_then(|()| sendable::<D>(&request))
            .and_then(|()| self.dialect.body(&self.endpoint, &request))
            .map(Bytes::from);
        retried(body, self.endpoint.retry(), request.cancel, |body| {
            self.connect(body)
        })
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        self.dialect.health(&self.endpoint)
    }

    fn name(&self) -> &str {
        D::NAME
    }

    fn model_name(&self) -> &str {
        self.endpoint.model()
    }

    fn native_output(&self) -> bool {
        D::NATIVE_OUTPUT
    }

    fn context_window(&self) -> BoxFuture<'_, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(async move {
            self.endpoint.require_model(D::EXAMPLE_MODEL)?;
            self.window
                .get_or_try_init(|| self.dialect.context_window(&self.endpoint))
                .await
                .copied()
        })
    }
}
