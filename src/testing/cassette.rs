//! Record a provider's answers once, replay them offline: [`Cassette`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::redact::Secrets;
use super::request::canonical;
use crate::message::{Opaque, Usage};
use crate::provider::{
    ChatRequest, ContextWindow, EventStream, FinishReason, Health, Provider, ProviderError,
    StreamEvent, ToolCallDelta,
};

/// The version of the file format; a file of another is refused.
pub(super) const VERSION: u32 = 1;

/// The environment variable that makes cassettes record.
pub const RECORD_VAR: &str = "FERROBOT_RECORD";

/// Parts of a request that differ between runs without meaning anything:
/// tool calls' ids, which ferrobot mints when a server sends none (and
/// which the recorded answers fix otherwise).
const IGNORED_ALWAYS: [&str; 2] = ["messages.*.parts.*.id", "messages.*.parts.*.call_id"];

/// Whether a [`Cassette`] replays or records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Only replay; a call the file doesn't hold fails. The default, and
    /// always under `CI`.
    Replay,
    /// Replay what the file holds, and record the calls after it through
    /// the real provider (all of them when there is no file yet).
    RecordMissing,
    /// Record every call afresh, replacing the file.
    RecordAll,
}

impl Mode {
    /// The mode `FERROBOT_RECORD` asks for: `missing` or `all`, else
    /// [`Replay`](Self::Replay). Under `CI` always `Replay`: a CI run
    /// never reaches a real server by accident.
    pub fn from_env() -> Self {
        if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty() && ci != "false") {
            return Mode::Replay;
        }
        match std::env::var(RECORD_VAR).as_deref() {
            Ok("missing") => Mode::RecordMissing,
            Ok("all") => Mode::RecordAll,
            _ => Mode::Replay,
        }
    }
}

/// A [`Provider`] that records another provider's answers into a file and
/// replays them later with no network: a test written against a real model
/// server once runs offline for ever, and fails with a readable diff when
/// the agent starts asking something else.
///
/// The mode comes from `FERROBOT_RECORD` ([`Mode::from_env`]): by default
/// only replay; `FERROBOT_RECORD=missing` records what the file lacks,
/// `=all` records everything again. Under `CI` it only replays.
///
/// Each model call is one interaction in the file: the request as the
/// agent made it (system prompt, messages, tools, tool choice, output
/// format, settings; images by size and digest, not their bytes) and what
/// the model answered (text, reasoning, tool calls, usage, finish, or the
/// error). Calls are matched in order, or by request
/// ([`match_by_request`](Self::match_by_request)); a request that differs
/// from the recording fails with each differing field named. The ids of
/// tool calls ferrobot mints are ignored; [`ignore`](Self::ignore) adds
/// more (a system prompt holding the date, say), or fix the date with the
/// agent's [`clock`](crate::agent::AgentBuilder::clock). API keys never
/// reach the file: requests hold no credentials at this layer; other
/// secrets (a token in a tool's result, a name) are masked by
/// [`redact`](Self::redact).
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, provider::OpenAiCompatible, testing::Cassette};
///
/// let server = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
/// // FERROBOT_RECORD=missing cargo test: recorded against the server once;
/// // afterwards, `cargo test` replays the file, server or not.
/// let provider = Cassette::new("tests/cassettes/disk.json", server);
/// let agent = Agent::builder().provider(provider).build();
/// let reply = agent.handle("alice", "How much disk is free?").await?;
/// println!("{}", reply.text);
/// # Ok(()) }
/// ```
pub struct Cassette {
    path: PathBuf,
    inner: Option<Arc<dyn Provider>>,
    mode: Mode,
    by_request: bool,
    ignored: Vec<String>,
    secrets: Secrets,
    state: Arc<Mutex<State>>,
}

/// What the file holds, and what of it was played.
struct State {
    file: Loaded<File>,
    /// Which recordings were played, by index; as long as the file's
    /// interactions once [`find`](Cassette::find) ran.
    played: Vec<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct File {
    ferrobot_cassette: u32,
    provider: String,
    model: String,
    /// What the provider said of itself, answered again on replay: the
    /// agent shapes its requests by them.
    #[serde(default)]
    native_output: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context_window: Option<Window>,
    interactions: Vec<Interaction>,
}

/// A [`ContextWindow`] as the file keeps it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Window {
    tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_output: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Interaction {
    request: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    events: Vec<Event>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<RecordedError>,
}

/// A [`StreamEvent`] as the file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Event {
    Text(String),
    Reasoning(String),
    ReasoningSignature {
        signature: String,
        provider: String,
    },
    Refusal(String),
    Opaque(Opaque),
    ToolCall {
        index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        arguments: String,
    },
    Usage(Usage),
    Finish(FinishReason),
}

/// A failed call as the file keeps it, replayed as the same
/// [`ProviderError`] (a source error as its text).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum RecordedError {
    Connect {
        endpoint: String,
        cause: String,
    },
    Timeout {
        endpoint: String,
        after_ms: u64,
    },
    Status {
        status: u16,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    Stream {
        message: String,
    },
    Decode {
        message: String,
    },
    GaveUp {
        attempts: u32,
        /// Nanoseconds: replayed, the error reads as it did.
        elapsed_ns: u64,
        last: Box<RecordedError>,
    },
    Config {
        message: String,
    },
    InvalidRequest {
        provider: String,
        message: String,
    },
    Other {
        message: String,
    },
}

impl fmt::Debug for Cassette {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cassette")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Cassette {
    /// A cassette at `path` in front of `provider`, in the mode
    /// `FERROBOT_RECORD` asks for ([`Mode::from_env`]). The file is read at
    /// the first call.
    pub fn new(path: impl Into<PathBuf>, provider: impl Provider + 'static) -> Self {
        Self::with(path.into(), Some(Arc::new(provider)))
    }

    /// A cassette that only replays `path`: no provider to record with.
    pub fn replay(path: impl Into<PathBuf>) -> Self {
        Self::with(path.into(), None).mode(Mode::Replay)
    }

    fn with(path: PathBuf, inner: Option<Arc<dyn Provider>>) -> Self {
        Self {
            path,
            inner,
            mode: Mode::from_env(),
            by_request: false,
            ignored: IGNORED_ALWAYS.iter().map(|p| (*p).to_owned()).collect(),
            secrets: Secrets::default(),
            state: Arc::new(Mutex::new(State {
                file: Loaded::default(),
                played: Vec::new(),
            })),
        }
    }

    /// Replays, records missing calls or records all, whatever the
    /// environment says (`CI` included: a test that sets a recording mode
    /// in code records under CI too).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Matches each call to the first unplayed recording of the same
    /// request, not to the next one in order: for agents whose calls run
    /// concurrently.
    #[must_use]
    pub fn match_by_request(mut self) -> Self {
        self.by_request = true;
        self
    }

    /// Leaves a part of the request out of the comparison: a dotted path
    /// into its JSON form, `*` for any key or index — `system`,
    /// `messages.*.parts.*.text`, `settings.temperature`.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::testing::Cassette;
    /// // The system prompt ends with today's date.
    /// let cassette = Cassette::replay("tests/cassettes/today.json").ignore("system");
    /// # let _ = cassette;
    /// ```
    #[must_use]
    pub fn ignore(mut self, path: impl Into<String>) -> Self {
        self.ignored.push(path.into());
        self
    }

    /// Masks `secret` wherever it appears — in requests and answers alike
    /// — as `[redacted]` before anything is written, and in each request
    /// before it is compared, so a recording holding none replays. Replayed
    /// answers read `[redacted]` where the secret was.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::testing::Cassette;
    /// let token = std::env::var("NAS_TOKEN").unwrap_or_default();
    /// let cassette = Cassette::replay("tests/cassettes/nas.json").redact(token);
    /// # let _ = cassette;
    /// ```
    #[must_use]
    pub fn redact(mut self, secret: impl Into<String>) -> Self {
        self.secrets.add(secret.into());
        self
    }

    /// The cassette's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, message: impl Into<String>) -> ProviderError {
        ProviderError::InvalidRequest {
            provider: format!("the cassette {}", self.path.display()),
            message: message.into(),
        }
    }

    /// The file, read at the first call; in a recording mode a missing
    /// file starts empty.
    fn load<'s>(&self, file: &'s mut Loaded<File>) -> Result<&'s mut File, ProviderError> {
        let empty = || {
            let inner = self.recorder()?;
            Ok(File {
                ferrobot_cassette: VERSION,
                provider: inner.name().to_owned(),
                model: inner.model_name().to_owned(),
                native_output: inner.native_output(),
                context_window: None,
                interactions: Vec::new(),
            })
        };
        file.get(&self.path, self.mode, empty, |message| self.error(message))
    }

    fn recorder(&self) -> Result<&Arc<dyn Provider>, ProviderError> {
        self.inner.as_ref().ok_or_else(|| {
            self.error("it was made to replay only (`Cassette::replay`): give it a provider to record with (`Cassette::new`)")
        })
    }

    /// The recorded answer to `request`, marked played; `Ok(None)` when
    /// the call is to be recorded.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, request: &Value) -> Result<Option<Interaction>, ProviderError> {
        let mut state = self.state();
        let State { file, played } = &mut *state;
        let file = self.load(file)?;
        played.resize(file.interactions.len(), false);
        let unplayed = played.iter().position(|p| !p);
        if self.by_request
            && let Some(index) = (0..file.interactions.len()).find(|&i| {
                !played[i]
                    && differences(&file.interactions[i].request, request, &self.ignored).is_empty()
            })
        {
            played[index] = true;
            return Ok(Some(file.interactions[index].clone()));
        }
        match unplayed {
            // Recording: what the file doesn't hold is asked of the server.
            _ if self.mode != Mode::Replay && (self.by_request || unplayed.is_none()) => Ok(None),
            Some(index) if !self.by_request => {
                let recorded = &file.interactions[index];
                let differ = differences(&recorded.request, request, &self.ignored);
                if !differ.is_empty() {
                    return Err(self.error(mismatch(index, &differ)));
                }
                played[index] = true;
                Ok(Some(recorded.clone()))
            }
            Some(index) => {
                let differ = differences(&file.interactions[index].request, request, &self.ignored);
                Err(self.error(format!(
                    "no unplayed recording is this request; against the first unplayed one, {}",
                    mismatch(index, &differ)
                )))
            }
            None => Err(self.error(format!(
                "it holds {} call(s) and this is one more: record it with {RECORD_VAR}=missing",
                file.interactions.len()
            ))),
        }
    }

    /// Adds an interaction, its secrets masked, and writes the file,
    /// atomically.
    fn keep(&self, mut interaction: Interaction) -> Result<(), String> {
        if !self.secrets.is_empty() {
            let mut value = serde_json::to_value(&interaction).map_err(|e| e.to_string())?;
            self.secrets.value(&mut value);
            interaction = serde_json::from_value(value).map_err(|e| e.to_string())?;
        }
        let mut state = self.state();
        let State { file, played } = &mut *state;
        let file = self.load(file).map_err(|error| error.chain())?;
        file.interactions.push(interaction);
        played.push(true);
        write_file(&self.path, file)
    }
}

impl Cassette {
    /// The call passed to the real provider, each event forwarded as it
    /// comes and kept; the interaction is written when the answer ends (a
    /// call given up before is not kept).
    fn record<'a>(
        &'a self,
        inner: &'a dyn Provider,
        request: ChatRequest<'a>,
        canonical: Value,
    ) -> EventStream<'a> {
        let upstream = inner.stream(request);
        futures_util::stream::unfold(
            Some((upstream, Vec::new(), canonical)),
            move |state| async move {
                let (mut upstream, mut events, canonical) = state?;
                match upstream.next().await {
                    Some(Ok(event)) => {
                        events.push(Event::from(&event));
                        Some((Ok(event), Some((upstream, events, canonical))))
                    }
                    Some(Err(error)) => {
                        let kept = self.keep(interaction(canonical, events, Some(&error)));
                        Some((
                            kept.map_or_else(|e| Err(self.error(e)), |()| Err(error)),
                            None,
                        ))
                    }
                    None => match self.keep(interaction(canonical, events, None)) {
                        Ok(()) => None,
                        Err(error) => Some((Err(self.error(error)), None)),
                    },
                }
            },
        )
        .boxed()
    }
}

impl Provider for Cassette {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        let mut canonical = canonical(&request);
        self.secrets.value(&mut canonical);
        let found = match self.find(&canonical) {
            Ok(found) => found,
            Err(error) => return futures_util::stream::once(async { Err(error) }).boxed(),
        };
        if let Some(recorded) = found {
            let events = recorded.events.into_iter().map(|e| Ok(e.into()));
            let error = recorded.error.map(|e| Err(e.into()));
            return futures_util::stream::iter(events.chain(error)).boxed();
        }
        match self.recorder() {
            Ok(inner) => self.record(inner.as_ref(), request, canonical),
            Err(error) => futures_util::stream::once(async { Err(error) }).boxed(),
        }
    }

    fn health(&self) -> futures_util::future::BoxFuture<'_, Health> {
        match (&self.inner, self.mode) {
            (Some(inner), Mode::RecordMissing | Mode::RecordAll) => inner.health(),
            _ => Box::pin(async { Health::ok(std::time::Duration::ZERO) }),
        }
    }

    fn name(&self) -> &str {
        self.inner.as_ref().map_or("cassette", |inner| inner.name())
    }

    fn model_name(&self) -> &str {
        self.inner
            .as_ref()
            .map_or("cassette", |inner| inner.model_name())
    }

    fn context_window(
        &self,
    ) -> futures_util::future::BoxFuture<'_, Result<Option<ContextWindow>, ProviderError>> {
        Box::pin(async move {
            let recording = matches!(self.mode, Mode::RecordMissing | Mode::RecordAll);
            match &self.inner {
                Some(inner) if recording => {
                    let window = inner.context_window().await?;
                    // Kept in the file's header with the next call.
                    let mut state = self.state();
                    if let Ok(file) = self.load(&mut state.file) {
                        file.context_window = window.map(|w| Window {
                            tokens: w.tokens,
                            max_output: w.max_output,
                        });
                    }
                    Ok(window)
                }
                _ => {
                    let mut state = self.state();
                    Ok(self.load(&mut state.file)?.context_window.map(|w| {
                        let window = ContextWindow::new(w.tokens);
                        match w.max_output {
                            Some(max) => window.with_max_output(max),
                            None => window,
                        }
                    }))
                }
            }
        })
    }

    fn native_output(&self) -> bool {
        match (&self.inner, self.mode) {
            (Some(inner), Mode::RecordMissing | Mode::RecordAll) => inner.native_output(),
            _ => {
                let mut state = self.state();
                self.load(&mut state.file)
                    .is_ok_and(|file| file.native_output)
            }
        }
    }
}

/// A cassette file's format version, wherever it keeps it.
pub(super) trait CassetteFile: serde::de::DeserializeOwned {
    fn version(&self) -> u32;
}

impl CassetteFile for File {
    fn version(&self) -> u32 {
        self.ferrobot_cassette
    }
}

/// A cassette's file as the cassette holds it: read at the first call, or
/// why it can't be, told at every call after.
pub(super) struct Loaded<F> {
    file: Option<F>,
    broken: Option<String>,
}

impl<F> Default for Loaded<F> {
    fn default() -> Self {
        Self {
            file: None,
            broken: None,
        }
    }
}

impl<F: CassetteFile> Loaded<F> {
    /// The file, read from `path` now if it wasn't; in a recording mode
    /// a missing one starts as `empty` gives it. Every failure goes
    /// through `error`.
    pub(super) fn get(
        &mut self,
        path: &Path,
        mode: Mode,
        empty: impl FnOnce() -> Result<F, ProviderError>,
        error: impl Fn(String) -> ProviderError,
    ) -> Result<&mut F, ProviderError> {
        if let Some(broken) = &self.broken {
            return Err(error(broken.clone()));
        }
        if self.file.is_none() {
            let file = match read_file(path, mode, F::version) {
                Ok(Some(file)) => file,
                Ok(None) => empty()?,
                Err(Unread::Missing(message)) => return Err(error(message)),
                Err(Unread::Broken(message)) => {
                    self.broken = Some(message.clone());
                    return Err(error(message));
                }
            };
            self.file = Some(file);
        }
        self.file
            .as_mut()
            .ok_or_else(|| error("the cassette was not loaded".into()))
    }
}

/// Why a cassette file gave nothing to replay.
enum Unread {
    /// There is none, and the mode only replays: the message says how to
    /// record one.
    Missing(String),
    /// It is there but unusable (another format version, not a cassette,
    /// unreadable): the message says what to do; every call fails with it.
    Broken(String),
}

/// Reads the cassette file at `path` of format [`VERSION`] as `F`
/// (`version` reads its format version): `Ok(None)` when a recording
/// `mode` starts without one (none there, or `RecordAll`).
fn read_file<F: serde::de::DeserializeOwned>(
    path: &Path,
    mode: Mode,
    version: impl Fn(&F) -> u32,
) -> Result<Option<F>, Unread> {
    if mode == Mode::RecordAll {
        return Ok(None);
    }
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<F>(&bytes) {
            Ok(file) if version(&file) == VERSION => Ok(Some(file)),
            Ok(file) => Err(Unread::Broken(format!(
                "it is of format version {}, this ferrobot reads {VERSION}: record it again with {RECORD_VAR}=all",
                version(&file)
            ))),
            Err(error) => Err(Unread::Broken(format!(
                "it is no cassette ({error}): fix it, or record it again with {RECORD_VAR}=all"
            ))),
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => match mode {
            Mode::Replay => Err(Unread::Missing(format!(
                "there is no such file: record it against a real server with {RECORD_VAR}=missing"
            ))),
            _ => Ok(None),
        },
        Err(error) => Err(Unread::Broken(format!("could not read it: {error}"))),
    }
}

/// Writes a cassette file as pretty JSON through a temporary file of its
/// own (never another cassette's nor another process's), renamed over it.
pub(super) fn write_file(path: &Path, file: &impl Serialize) -> Result<(), String> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let mut text = serde_json::to_string_pretty(file).map_err(|e| e.to_string())?;
    text.push('\n');
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let name = path
        .file_name()
        .map_or_else(|| "cassette".into(), |n| n.to_string_lossy().into_owned());
    let temporary = path.with_file_name(format!(
        ".{name}.{}-{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| format!("could not write {}: {e}", path.display()))
}

/// An answer as the file keeps it: consecutive pieces of text, reasoning
/// and one call's arguments joined, so it reads well in review.
fn interaction(request: Value, events: Vec<Event>, error: Option<&ProviderError>) -> Interaction {
    let mut joined: Vec<Event> = Vec::with_capacity(events.len());
    for event in events {
        match (joined.last_mut(), event) {
            (Some(Event::Text(kept)), Event::Text(more))
            | (Some(Event::Reasoning(kept)), Event::Reasoning(more))
            | (Some(Event::Refusal(kept)), Event::Refusal(more)) => kept.push_str(&more),
            (
                Some(Event::ToolCall {
                    index, arguments, ..
                }),
                Event::ToolCall {
                    index: next,
                    id: None,
                    name: None,
                    arguments: more,
                },
            ) if *index == next => arguments.push_str(&more),
            (_, event) => joined.push(event),
        }
    }
    Interaction {
        request,
        events: joined,
        error: error.map(RecordedError::from),
    }
}

impl From<&StreamEvent> for Event {
    fn from(event: &StreamEvent) -> Self {
        match event.clone() {
            StreamEvent::TextDelta(text) => Event::Text(text),
            StreamEvent::ReasoningDelta(text) => Event::Reasoning(text),
            StreamEvent::ReasoningSignature {
                signature,
                provider,
            } => Event::ReasoningSignature {
                signature,
                provider,
            },
            StreamEvent::RefusalDelta(text) => Event::Refusal(text),
            StreamEvent::Opaque(opaque) => Event::Opaque(opaque),
            StreamEvent::ToolCallDelta(ToolCallDelta {
                index,
                id,
                name,
                arguments,
            }) => Event::ToolCall {
                index,
                id,
                name,
                arguments,
            },
            StreamEvent::Usage(usage) => Event::Usage(usage),
            StreamEvent::Finish(reason) => Event::Finish(reason),
        }
    }
}

impl From<Event> for StreamEvent {
    fn from(event: Event) -> Self {
        match event {
            Event::Text(text) => StreamEvent::TextDelta(text),
            Event::Reasoning(text) => StreamEvent::ReasoningDelta(text),
            Event::ReasoningSignature {
                signature,
                provider,
            } => StreamEvent::ReasoningSignature {
                signature,
                provider,
            },
            Event::Refusal(text) => StreamEvent::RefusalDelta(text),
            Event::Opaque(opaque) => StreamEvent::Opaque(opaque),
            Event::ToolCall {
                index,
                id,
                name,
                arguments,
            } => StreamEvent::ToolCallDelta(ToolCallDelta {
                index,
                id,
                name,
                arguments,
            }),
            Event::Usage(usage) => StreamEvent::Usage(usage),
            Event::Finish(reason) => StreamEvent::Finish(reason),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl From<&ProviderError> for RecordedError {
    fn from(error: &ProviderError) -> Self {
        match error {
            ProviderError::Connect { endpoint, source } => RecordedError::Connect {
                endpoint: endpoint.clone(),
                cause: crate::error::chain(source.as_ref()),
            },
            ProviderError::Timeout { endpoint, after } => RecordedError::Timeout {
                endpoint: endpoint.clone(),
                after_ms: millis(*after),
            },
            ProviderError::Status {
                status,
                message,
                retry_after,
            } => RecordedError::Status {
                status: *status,
                message: message.clone(),
                retry_after_ms: retry_after.map(millis),
            },
            ProviderError::Stream { message } => RecordedError::Stream {
                message: message.clone(),
            },
            ProviderError::Decode { message } => RecordedError::Decode {
                message: message.clone(),
            },
            ProviderError::GaveUp {
                attempts,
                elapsed,
                last,
            } => RecordedError::GaveUp {
                attempts: *attempts,
                elapsed_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
                last: Box::new(RecordedError::from(last.as_ref())),
            },
            ProviderError::Config(message) => RecordedError::Config {
                message: message.clone(),
            },
            ProviderError::InvalidRequest { provider, message } => RecordedError::InvalidRequest {
                provider: provider.clone(),
                message: message.clone(),
            },
            other => RecordedError::Other {
                message: other.chain(),
            },
        }
    }
}

impl From<RecordedError> for ProviderError {
    fn from(error: RecordedError) -> Self {
        match error {
            RecordedError::Connect { endpoint, cause } => ProviderError::Connect {
                endpoint,
                source: cause.into(),
            },
            RecordedError::Timeout { endpoint, after_ms } => ProviderError::Timeout {
                endpoint,
                after: Duration::from_millis(after_ms),
            },
            RecordedError::Status {
                status,
                message,
                retry_after_ms,
            } => ProviderError::Status {
                status,
                message,
                retry_after: retry_after_ms.map(Duration::from_millis),
            },
            RecordedError::Stream { message } => ProviderError::Stream { message },
            RecordedError::Decode { message } => ProviderError::Decode { message },
            RecordedError::GaveUp {
                attempts,
                elapsed_ns,
                last,
            } => ProviderError::GaveUp {
                attempts,
                elapsed: Duration::from_nanos(elapsed_ns),
                last: Box::new((*last).into()),
            },
            RecordedError::Config { message } => ProviderError::Config(message),
            RecordedError::InvalidRequest { provider, message } => {
                ProviderError::InvalidRequest { provider, message }
            }
            RecordedError::Other { message } => ProviderError::Other(message.into()),
        }
    }
}

/// Each place where `now` differs from `recorded`, outside the ignored
/// paths: `(path, recorded, now)`.
pub(super) fn differences(
    recorded: &Value,
    now: &Value,
    ignored: &[String],
) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    compare(
        Some(recorded),
        Some(now),
        &mut Vec::new(),
        ignored,
        &mut found,
    );
    found
}

/// Compares the values at `path`, either of which may be missing (a key or
/// an element only one side has).
fn compare(
    recorded: Option<&Value>,
    now: Option<&Value>,
    path: &mut Vec<String>,
    ignored: &[String],
    found: &mut Vec<(String, String, String)>,
) {
    if ignored.iter().any(|pattern| matches(pattern, path)) {
        return;
    }
    match (recorded, now) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                path.push(key.clone());
                compare(a.get(key), b.get(key), path, ignored, found);
                path.pop();
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for index in 0..a.len().max(b.len()) {
                path.push(index.to_string());
                compare(a.get(index), b.get(index), path, ignored, found);
                path.pop();
            }
        }
        (Some(Value::String(a)), Some(Value::String(b))) if a != b => {
            let (a, b) = around_difference(a, b);
            found.push((path.join("."), a, b));
        }
        (a, b) if a != b => {
            let or_nothing = |value: Option<&Value>| value.map_or("nothing".into(), shown);
            found.push((path.join("."), or_nothing(a), or_nothing(b)));
        }
        _ => {}
    }
}

/// Whether `path` is `pattern` (dotted, `*` for any one step).
fn matches(pattern: &str, path: &[String]) -> bool {
    let steps: Vec<&str> = pattern.split('.').collect();
    steps.len() == path.len() && steps.iter().zip(path).all(|(s, p)| *s == "*" || s == p)
}

/// A value in a line, cut at 120 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Two strings as JSON, each cut to a window around where they first
/// differ: a long prompt that changed at its end shows its end.
fn around_difference(a: &str, b: &str) -> (String, String) {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or_else(|| a.len().min(b.len()), |((at, _), _)| at);
    let window = |text: &str| {
        let start = text[..at.min(text.len())]
            .char_indices()
            .rev()
            .nth(40)
            .map_or(0, |(i, _)| i);
        let shown = shown(&Value::String(text[start..].to_owned()));
        if start > 0 {
            format!("…{shown}")
        } else {
            shown
        }
    };
    (window(a), window(b))
}

/// The readable mismatch: which call, and each field that differs.
pub(super) fn mismatch(index: usize, differ: &[(String, String, String)]) -> String {
    let mut message = format!(
        "call {} differs from its recording ({} field{}):",
        index + 1,
        differ.len(),
        if differ.len() == 1 { "" } else { "s" }
    );
    for (path, recorded, now) in differ.iter().take(20) {
        message.push_str(&format!("\n  {path}: recorded {recorded}, now {now}"));
    }
    if differ.len() > 20 {
        message.push_str(&format!("\n  … and {} more", differ.len() - 20));
    }
    message.push_str(&format!(
        "\nIf the change is meant, record again with {RECORD_VAR}=all; if the part changes on every run, leave it out with `.ignore(\"PATH\")`."
    ));
    message
}
