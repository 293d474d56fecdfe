//! Bot conversations recorded at the [`Channel`] trait and replayed as
//! regression tests: [`SessionRecorder`] and [`Session`].

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::cassette::{VERSION, write_file};
use super::redact::{MASK, Secrets};
use crate::agent::Agent;
use crate::bot::{
    Channel, ChannelConfirm, ChannelError, ChannelNotifier, CommandSpec, Handler, Incoming, Length,
    chat_of, serve,
};
use crate::confirm::{ConfirmRequest, Decision};
use crate::policy::Scope;

/// How long a replay waits for a bot that shows nothing more (a turn
/// stuck on a question the recording never answered) before it stops the
/// turns left and compares what was shown.
const IDLE: Duration = Duration::from_secs(30);

/// A session file: what came in and what the bot showed, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct File {
    ferrobot_session: u32,
    /// When the recording started, in seconds since the Unix epoch: the
    /// replay's clock ([`Session::recorded_at`]).
    recorded_at: u64,
    /// The platform's longest message, which splits long replies.
    limit: usize,
    length: Counted,
    events: Vec<Event>,
}

/// [`Length`] as the file names it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Counted {
    Chars,
    Utf16,
}

impl From<Length> for Counted {
    fn from(length: Length) -> Self {
        match length {
            Length::Chars => Counted::Chars,
            Length::Utf16 => Counted::Utf16,
        }
    }
}

impl From<Counted> for Length {
    fn from(counted: Counted) -> Self {
        match counted {
            Counted::Chars => Length::Chars,
            Counted::Utf16 => Length::Utf16,
        }
    }
}

/// What happened in a chat. Every event names the chat (the
/// [`Incoming::conversation`]), never the platform's reply target, which
/// may hold a credential (a Discord interaction's token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Event {
    /// A message reached the bot; its `reply_to`, if any, is a stand-in.
    Message(Incoming),
    /// A finished message the bot showed. Drafts are left out: how many a
    /// reply takes depends on timing.
    Reply { chat: String, text: String },
    /// The bot asked whether a tool may run, and what the user answered
    /// (nothing, when the question was dropped: the turn was stopped).
    Question {
        chat: String,
        tool: String,
        prompt: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<Answer>,
    },
}

/// A [`Decision`] as the file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Approve,
    Edit(Value),
    Deny(Option<String>),
    Always(Scope),
    Defer,
}

impl From<&Decision> for Answer {
    fn from(decision: &Decision) -> Self {
        match decision {
            Decision::Approve => Answer::Approve,
            Decision::Edit(arguments) => Answer::Edit(arguments.clone()),
            Decision::Deny(reason) => Answer::Deny(reason.clone()),
            Decision::Always(scope) => Answer::Always(scope.clone()),
            Decision::Defer => Answer::Defer,
        }
    }
}

impl From<Answer> for Decision {
    fn from(answer: Answer) -> Self {
        match answer {
            Answer::Approve => Decision::Approve,
            Answer::Edit(arguments) => Decision::Edit(arguments),
            Answer::Deny(reason) => Decision::Deny(reason),
            Answer::Always(scope) => Decision::Always(scope),
            Answer::Defer => Decision::Defer,
        }
    }
}

impl Event {
    /// The chat it happened in.
    fn place(&self) -> &str {
        match self {
            Event::Message(incoming) => &incoming.conversation,
            Event::Reply { chat, .. } | Event::Question { chat, .. } => chat,
        }
    }

    /// Whether `now`, replayed, is what `self` recorded: equal, a masked
    /// secret in a recorded text standing for any text.
    fn fits(&self, now: &Event) -> bool {
        match (self, now) {
            (
                Event::Reply { chat, text },
                Event::Reply {
                    chat: chat_now,
                    text: now,
                },
            ) => chat == chat_now && fits(text, now),
            (
                Event::Question { answer, .. },
                Event::Question {
                    answer: answer_now, ..
                },
            ) => self.asks(now) && answer == answer_now,
            (recorded, now) => recorded == now,
        }
    }

    /// Whether `now` is the question `self` recorded, whatever the answers.
    fn asks(&self, now: &Event) -> bool {
        match (self, now) {
            (
                Event::Question {
                    chat,
                    tool,
                    prompt,
                    arguments,
                    ..
                },
                Event::Question {
                    chat: chat_now,
                    tool: tool_now,
                    prompt: prompt_now,
                    arguments: arguments_now,
                    ..
                },
            ) => {
                chat == chat_now
                    && tool == tool_now
                    && fits(prompt, prompt_now)
                    && fits_value(arguments, arguments_now)
            }
            _ => false,
        }
    }

    /// It in a few words, for a report.
    fn described(&self) -> String {
        match self {
            Event::Message(incoming) => format!("the message {}", quoted(&incoming.text)),
            Event::Reply { text, .. } => format!("the reply {}", quoted(text)),
            Event::Question {
                tool,
                prompt,
                arguments,
                answer,
                ..
            } => {
                let answer = answer.as_ref().map_or_else(
                    || "unanswered".to_owned(),
                    |a| serde_json::to_string(a).unwrap_or_default(),
                );
                format!(
                    "the question {} ({tool} {arguments}), answered {answer}",
                    quoted(prompt)
                )
            }
        }
    }

    /// It with every secret masked (an image's bytes aside: a short secret
    /// may occur in any base64).
    fn masked(mut self, secrets: &Secrets) -> Self {
        match &mut self {
            Event::Message(incoming) => {
                secrets.string(&mut incoming.text);
                secrets.string(&mut incoming.user);
                if let Some(name) = &mut incoming.name {
                    secrets.string(name);
                }
                incoming
                    .unread
                    .iter_mut()
                    .for_each(|what| secrets.string(what));
            }
            Event::Reply { text, .. } => secrets.string(text),
            Event::Question {
                prompt,
                arguments,
                answer,
                ..
            } => {
                secrets.string(prompt);
                secrets.value(arguments);
                if let Some(Answer::Edit(edited)) = answer {
                    secrets.value(edited);
                }
            }
        }
        self
    }
}

/// Whether `now` is `recorded`, where each `[redacted]` in `recorded`
/// stands for any text.
fn fits(recorded: &str, now: &str) -> bool {
    if !recorded.contains(MASK) {
        return recorded == now;
    }
    let mut parts = recorded.split(MASK);
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = now.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// [`fits`] for JSON: the same shape, strings fitting.
fn fits_value(recorded: &Value, now: &Value) -> bool {
    match (recorded, now) {
        (Value::String(a), Value::String(b)) => fits(a, b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| fits_value(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, a)| b.get(key).is_some_and(|b| fits_value(a, b)))
        }
        (a, b) => a == b,
    }
}

/// A text in quotes, cut at 120 characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// A [`Channel`] in front of another, recording the conversation into a
/// session file as it happens: each message that reaches the bot, each
/// finished message it shows (drafts left out), each confirmation question
/// and its answer. Replayed with [`Session`], the file pins a real
/// conversation — on Telegram, Discord or a platform of your own — as a
/// regression test.
///
/// Pair it with a [`Cassette`](super::Cassette) in front of the model (at
/// [`model_path`](Self::model_path)), so the replay needs no server
/// either, and keep the agent's conversations in memory while recording
/// (the default history), so each chat starts afresh as the replay's will.
/// Give the agent's confirmations to the recorder, and its later
/// messages and schedules to the platform's own channel: a replay runs no
/// schedule. The file is rewritten after each event (a recording is a
/// test's length, not a bot's life). A platform's reply targets (a Discord
/// interaction's token) are kept as stand-ins; other secrets are masked
/// with [`redact`](Self::redact). The recorder's `send` posts piece by
/// piece through the inner channel's `post`.
///
/// # Examples
/// ```no_run
/// # use std::sync::Arc;
/// use ferrobot::bot::{Channel, ChannelConfirm, serve};
/// use ferrobot::testing::{Cassette, Mode, SessionRecorder};
/// use ferrobot::{Agent, provider::OpenAiCompatible};
///
/// # async fn run(telegram: Arc<dyn Channel>) -> Result<(), Box<dyn std::error::Error>> {
/// let recorder = SessionRecorder::new("tests/sessions/disk.json", telegram);
/// let model = OpenAiCompatible::new("http://localhost:8080/v1").model("qwen3:8b");
/// // tests/sessions/disk.model.json
/// let model = Cassette::new(recorder.model_path(), model).mode(Mode::RecordAll);
/// let channel: Arc<dyn Channel> = Arc::new(recorder);
/// let agent = Agent::builder()
///     .provider(model)
///     .confirm(ChannelConfirm(channel.clone()))
///     .build();
/// serve(agent, channel).await?; // chat with the bot, then stop it
/// # Ok(()) }
/// # let _ = run;
/// ```
pub struct SessionRecorder {
    inner: Arc<dyn Channel>,
    log: Arc<Log>,
}

/// A recording as it grows.
struct Log {
    path: PathBuf,
    state: Mutex<Recording>,
}

struct Recording {
    file: File,
    secrets: Secrets,
    /// Each reply target the platform gave, with its chat.
    targets: HashMap<String, String>,
}

impl fmt::Debug for SessionRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionRecorder")
            .field("path", &self.log.path)
            .finish_non_exhaustive()
    }
}

impl SessionRecorder {
    /// Records what passes through `channel` into a new session file at
    /// `path` (replacing one there), written from the first event on.
    pub fn new(path: impl Into<PathBuf>, channel: Arc<dyn Channel>) -> Self {
        let (limit, length) = channel.limit();
        let recorded_at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let file = File {
            ferrobot_session: VERSION,
            recorded_at,
            limit,
            length: length.into(),
            events: Vec::new(),
        };
        Self {
            inner: channel,
            log: Arc::new(Log {
                path: path.into(),
                state: Mutex::new(Recording {
                    file,
                    secrets: Secrets::default(),
                    targets: HashMap::new(),
                }),
            }),
        }
    }

    /// Masks `secret` as `[redacted]` wherever it appears in what is
    /// recorded (a token a user pasted, a name); mask it in the model's
    /// [`Cassette`](super::Cassette) too. On replay, a masked part of a
    /// reply or a question matches any text.
    #[must_use]
    pub fn redact(self, secret: impl Into<String>) -> Self {
        self.log.lock().secrets.add(secret.into());
        self
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.log.path
    }

    /// Where the session's model cassette goes by convention: beside it,
    /// `NAME.model.json` for `NAME.json` ([`Session::model_path`] reads it).
    pub fn model_path(&self) -> PathBuf {
        model_path(&self.log.path)
    }
}

/// `NAME.model.json` beside the session file `NAME.json`.
fn model_path(session: &Path) -> PathBuf {
    let stem = session
        .file_stem()
        .map_or_else(|| "session".into(), |s| s.to_string_lossy().into_owned());
    session.with_file_name(format!("{stem}.model.json"))
}

impl Log {
    fn lock(&self) -> MutexGuard<'_, Recording> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `event`, its secrets masked, and writes the file; returns its
    /// place in the file.
    fn keep(&self, event: Event) -> usize {
        let mut recording = self.lock();
        let event = event.masked(&recording.secrets);
        recording.file.events.push(event);
        Self::write(&self.path, &recording.file);
        recording.file.events.len() - 1
    }

    /// A message that reached the bot: its reply target remembered, and
    /// kept as a stand-in.
    fn message(&self, incoming: &Incoming) {
        let mut kept = incoming.clone();
        if let Some(target) = &incoming.reply_to {
            let mut recording = self.lock();
            let stand_in = format!("reply-{}", recording.targets.len() + 1);
            recording
                .targets
                .insert(target.clone(), incoming.conversation.clone());
            kept.reply_to = Some(stand_in);
        }
        self.keep(Event::Message(kept));
    }

    /// The chat a reply to `target` goes to.
    fn chat(&self, target: &str) -> String {
        self.lock()
            .targets
            .get(target)
            .cloned()
            .unwrap_or_else(|| target.to_owned())
    }

    /// The answer to the question kept at `at`.
    fn answered(&self, at: usize, answer: Answer) {
        let mut recording = self.lock();
        let secrets = recording.secrets.clone();
        if let Some(Event::Question { answer: kept, .. }) = recording.file.events.get_mut(at) {
            let mut answer = answer;
            if let Answer::Edit(edited) = &mut answer {
                secrets.value(edited);
            }
            *kept = Some(answer);
        }
        Self::write(&self.path, &recording.file);
    }

    fn write(path: &Path, file: &File) {
        if let Err(error) = write_file(path, file) {
            tracing::warn!(%error, "the session recording could not be written");
        }
    }
}

impl Channel for SessionRecorder {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        let log = Arc::clone(&self.log);
        let handler = handler.tapped(Arc::new(move |incoming| log.message(incoming)));
        self.inner.start(handler)
    }

    fn publish(&self, commands: Vec<CommandSpec>) -> BoxFuture<'_, ()> {
        self.inner.publish(commands)
    }

    fn limit(&self) -> (usize, Length) {
        self.inner.limit()
    }

    fn post<'a>(
        &'a self,
        target: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move {
            let id = self.inner.post(target, text, done).await?;
            if done {
                self.log.keep(reply(self.log.chat(target), text));
            }
            Ok(id)
        })
    }

    fn edit<'a>(
        &'a self,
        target: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.inner.edit(target, message, text, done).await?;
            if done {
                self.log.keep(reply(self.log.chat(target), text));
            }
            Ok(())
        })
    }

    fn edit_interval(&self) -> Option<Duration> {
        self.inner.edit_interval()
    }

    fn typing<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, ()> {
        self.inner.typing(conversation)
    }

    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let (inner, log) = (Arc::clone(&self.inner), Arc::clone(&self.log));
        Box::pin(async move {
            // Kept when asked: a message typed while it waits comes after it.
            let at = log.keep(question(&request, None));
            let decision = inner.confirm(request).await;
            log.answered(at, Answer::from(&decision));
            decision
        })
    }
}

fn reply(chat: String, text: &str) -> Event {
    Event::Reply {
        chat,
        text: text.to_owned(),
    }
}

fn question(request: &ConfirmRequest, answer: Option<Answer>) -> Event {
    Event::Question {
        // The chat, not the conversation: `/new` names those by the time.
        chat: chat_of(&request.conversation).to_owned(),
        tool: request.tool.clone(),
        prompt: request.prompt.clone(),
        arguments: request.arguments.clone(),
        answer,
    }
}

/// Why a session could not be replayed, or how the replay differed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The file can't be read, or isn't a session of this version.
    #[error("the session {}: {message}", .path.display())]
    Unreadable {
        /// The session file.
        path: PathBuf,
        /// What is wrong, and what to do.
        message: String,
    },
    /// The bot answered otherwise than recorded: the report names each
    /// chat, the message before the first difference, and both sides.
    #[error("{report}")]
    Differs {
        /// The readable difference.
        report: String,
    },
    /// The bot stopped with an error while replaying.
    #[error("the bot stopped while replaying the session")]
    Serve(#[source] ChannelError),
}

/// A recorded bot session ([`SessionRecorder`]) replayed against an agent:
/// the messages reach the bot again in order, confirmation questions are
/// answered as they were, and what the bot shows is compared with the
/// recording, chat by chat. The bot's drafts and timing are not compared,
/// only the finished messages, each piece of a long reply on its own. The
/// agent's tools really run, with the recorded approvals.
///
/// Each message reaches the bot once its chat has shown what it had shown
/// by then in the recording (or its turns have ended), so a message sent
/// while a turn ran arrives while one runs; a message that raced a turn
/// (`/stop`) may land otherwise. A question is answered by the first
/// recorded one of its chat that asks the same (tool, prompt, arguments);
/// one the recording never answered is left waiting, and a bot that shows
/// nothing for 30 s has its turns stopped. Messages the bot sends on its
/// own (scheduled prompts, later messages) are compared too: leave their
/// schedules out of a replay's agent.
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use ferrobot::Agent;
/// use ferrobot::testing::{Cassette, Session};
///
/// let session = Session::open("tests/sessions/disk.json")?;
/// let recorded_at = session.recorded_at();
/// let agent = Agent::builder()
///     .provider(Cassette::replay(session.model_path()))
///     .confirm(session.confirm())
///     .clock(move || recorded_at)
///     .build();
/// session.replay(agent).await?; // fails naming the first difference
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Session {
    path: PathBuf,
    file: File,
    channel: Arc<Replaying>,
}

/// The channel a session replays through.
#[derive(Debug)]
struct Replaying {
    /// The recorded messages, each with how many of the bot's own events
    /// its chat had seen when it came.
    messages: Vec<(Incoming, usize)>,
    /// The recorded stand-ins for reply targets, with their chats.
    targets: HashMap<String, String>,
    limit: (usize, Length),
    /// What the bot showed, in order.
    shown: Mutex<Vec<Event>>,
    /// The recorded questions not yet asked again.
    questions: Mutex<Vec<Event>>,
    /// Wakes the replay when the bot showed something or a turn ended.
    changed: Arc<Notify>,
    next_id: AtomicU64,
}

impl Session {
    /// Reads the session file at `path`.
    ///
    /// # Errors
    /// When it is missing (the message says how to record one), unreadable
    /// or of another format version.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SessionError> {
        let path = path.into();
        let unreadable = |message: String| SessionError::Unreadable {
            path: path.clone(),
            message,
        };
        let bytes = std::fs::read(&path).map_err(|error| {
            unreadable(match error.kind() {
                std::io::ErrorKind::NotFound => "there is no such file: record one with `SessionRecorder` in front of the bot's channel (the bots: FERROBOT_SESSION=FILE)".to_owned(),
                _ => format!("could not read it: {error}"),
            })
        })?;
        let file: File = serde_json::from_slice(&bytes)
            .map_err(|error| unreadable(format!("it is no session file ({error})")))?;
        if file.ferrobot_session != VERSION {
            return Err(unreadable(format!(
                "it is of format version {}, this ferrobot reads {VERSION}: record it again",
                file.ferrobot_session
            )));
        }
        let channel = Arc::new(Replaying {
            messages: messages(&file.events),
            targets: file
                .events
                .iter()
                .filter_map(|event| match event {
                    Event::Message(incoming) => incoming
                        .reply_to
                        .clone()
                        .map(|target| (target, incoming.conversation.clone())),
                    _ => None,
                })
                .collect(),
            limit: (file.limit, file.length.into()),
            shown: Mutex::default(),
            questions: Mutex::default(),
            changed: Arc::default(),
            next_id: AtomicU64::new(1),
        });
        Ok(Self {
            path,
            file,
            channel,
        })
    }

    /// When it was recorded: give the agent this as its
    /// [`clock`](crate::agent::AgentBuilder::clock), so that a prompt
    /// holding the date reads as it did.
    pub fn recorded_at(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.file.recorded_at)
    }

    /// The session's model cassette by convention
    /// ([`SessionRecorder::model_path`]): `NAME.model.json` beside it.
    pub fn model_path(&self) -> PathBuf {
        model_path(&self.path)
    }

    /// The agent's confirmation handler for the replay: each question is
    /// answered as it was in the recording.
    pub fn confirm(&self) -> ChannelConfirm {
        ChannelConfirm(self.channel())
    }

    /// The agent's notifier for the replay: later messages are shown, and
    /// compared, as the bot's others.
    pub fn notifier(&self) -> ChannelNotifier {
        ChannelNotifier(self.channel())
    }

    fn channel(&self) -> Arc<dyn Channel> {
        Arc::clone(&self.channel) as Arc<dyn Channel>
    }

    /// Serves `agent` on the recorded messages and compares what it shows
    /// with the recording.
    ///
    /// # Errors
    /// [`SessionError::Differs`] naming, per chat, the first difference
    /// and the message it followed; [`SessionError::Serve`] when the bot
    /// stopped with an error.
    pub async fn replay(&self, agent: Agent) -> Result<(), SessionError> {
        self.channel.reset(&self.file.events);
        serve(agent, self.channel())
            .await
            .map_err(SessionError::Serve)?;
        let shown = std::mem::take(&mut *self.channel.shown());
        match differences(&self.file.events, &shown) {
            differences if differences.is_empty() => Ok(()),
            differences => Err(SessionError::Differs {
                report: format!(
                    "the session {} replayed differently ({} chat{}):\n{}\nIf the change is meant, record the session again.",
                    self.path.display(),
                    differences.len(),
                    if differences.len() == 1 { "" } else { "s" },
                    differences.join("\n")
                ),
            }),
        }
    }
}

impl Replaying {
    fn shown(&self) -> MutexGuard<'_, Vec<Event>> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn show(&self, event: Event) {
        self.shown().push(event);
        self.changed.notify_waiters();
    }

    /// Ready for a replay: nothing shown, the recorded questions to answer.
    fn reset(&self, events: &[Event]) {
        self.shown().clear();
        let mut questions = self.questions.lock().unwrap_or_else(|e| e.into_inner());
        *questions = events
            .iter()
            .filter(|event| matches!(event, Event::Question { .. }))
            .cloned()
            .collect();
    }

    /// How many of the bot's own events (not messages) `chat` has seen.
    fn shown_in(&self, chat: &str) -> usize {
        self.shown()
            .iter()
            .filter(|e| !matches!(e, Event::Message(_)) && e.place() == chat)
            .count()
    }

    /// The chat a reply to `target` goes to.
    fn chat<'a>(&'a self, target: &'a str) -> &'a str {
        self.targets.get(target).map_or(target, String::as_str)
    }

    /// Waits until `done` holds, re-checked whenever the bot shows
    /// something or a turn ends; false when nothing happened for [`IDLE`].
    async fn wait_until(&self, done: impl Fn() -> bool) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done() {
                return true;
            }
            if tokio::time::timeout(IDLE, changed).await.is_err() {
                return false;
            }
        }
    }
}

/// A chat's turns in a replay: how many were started, how many ended.
#[derive(Default)]
struct Turns {
    started: usize,
    ended: Arc<AtomicUsize>,
}

impl Channel for Replaying {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let mut running = JoinSet::new();
            let mut turns: HashMap<&str, Turns> = HashMap::new();
            for (incoming, shown_before) in &self.messages {
                let chat = incoming.conversation.as_str();
                // As in the recording: once the chat showed what it had by
                // then, or its turns ended.
                let chat_turns = turns.entry(chat).or_default();
                let (started, ended) = (chat_turns.started, Arc::clone(&chat_turns.ended));
                let ready = || {
                    ended.load(Ordering::Acquire) == started || self.shown_in(chat) >= *shown_before
                };
                if !self.wait_until(ready).await {
                    tracing::warn!(%chat, "the replayed bot showed nothing for {} s; sending the next message anyway", IDLE.as_secs());
                }
                self.show(Event::Message(incoming.clone()));
                // Admitted in order; answered concurrently, as they came.
                let turn = handler.admit(incoming.clone()).await;
                let changed = Arc::clone(&self.changed);
                running.spawn(async move {
                    turn.await;
                    ended.fetch_add(1, Ordering::AcqRel);
                    changed.notify_waiters();
                });
                chat_turns.started += 1;
            }
            let all_ended = || {
                turns
                    .values()
                    .all(|t| t.ended.load(Ordering::Acquire) == t.started)
            };
            if !self.wait_until(all_ended).await {
                tracing::warn!(
                    "the replayed bot showed nothing for {} s; stopping its turns",
                    IDLE.as_secs()
                );
                running.abort_all();
            }
            while running.join_next().await.is_some() {}
            Ok(())
        })
    }

    fn limit(&self) -> (usize, Length) {
        self.limit
    }

    fn post<'a>(
        &'a self,
        target: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        if done {
            self.show(reply(self.chat(target).to_owned(), text));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        Box::pin(async move { Ok(id) })
    }

    fn edit<'a>(
        &'a self,
        target: &'a str,
        _message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        if done {
            self.show(reply(self.chat(target).to_owned(), text));
        }
        Box::pin(async { Ok(()) })
    }

    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let asked = question(&request, None);
        let recorded = {
            let mut questions = self.questions.lock().unwrap_or_else(|e| e.into_inner());
            questions
                .iter()
                .position(|recorded| recorded.asks(&asked))
                .map(|at| questions.remove(at))
        };
        let answer = match recorded {
            Some(Event::Question { answer, .. }) => answer,
            // Not asked in the recording: declined, and the report says so.
            _ => Some(Answer::Deny(None)),
        };
        let Event::Question {
            chat,
            tool,
            prompt,
            arguments,
            ..
        } = asked
        else {
            unreachable!("`question` makes a question");
        };
        self.show(Event::Question {
            chat,
            tool,
            prompt,
            arguments,
            answer: answer.clone(),
        });
        Box::pin(async move {
            match answer {
                Some(answer) => Decision::from(answer),
                // Never answered in the recording: its turn was stopped.
                None => std::future::pending().await,
            }
        })
    }
}

/// The recorded messages, each with how many of the bot's own events its
/// chat had seen when it came.
fn messages(events: &[Event]) -> Vec<(Incoming, usize)> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut messages = Vec::new();
    for event in events {
        match event {
            Event::Message(incoming) => {
                let before = seen
                    .get(incoming.conversation.as_str())
                    .copied()
                    .unwrap_or(0);
                messages.push((incoming.clone(), before));
            }
            other => *seen.entry(other.place()).or_default() += 1,
        }
    }
    messages
}

/// The event at `at` in words, or "nothing"; a reply whole, joined with
/// the pieces after it (a model's error, told in the chat, holds the
/// cassette's readable difference).
fn side(events: &[&Event], at: usize) -> String {
    let Some(event) = events.get(at) else {
        return "nothing".to_owned();
    };
    if !matches!(event, Event::Reply { .. }) {
        return event.described();
    }
    let text: String = events[at..]
        .iter()
        .map_while(|event| match event {
            Event::Reply { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if text.contains('\n') {
        let lines: Vec<String> = text.lines().map(|line| format!("      | {line}")).collect();
        format!("the reply\n{}", lines.join("\n"))
    } else {
        format!("the reply {text:?}")
    }
}

/// Each chat's first difference between the recording and the replay, in
/// words, in the order the chats first appear.
fn differences(recorded: &[Event], now: &[Event]) -> Vec<String> {
    let mut places: Vec<&str> = Vec::new();
    for event in recorded.iter().chain(now) {
        if !places.contains(&event.place()) {
            places.push(event.place());
        }
    }
    let mut found = Vec::new();
    for place in places {
        let recorded: Vec<&Event> = recorded.iter().filter(|e| e.place() == place).collect();
        let now: Vec<&Event> = now.iter().filter(|e| e.place() == place).collect();
        let Some(at) =
            (0..recorded.len().max(now.len())).find(|&i| match (recorded.get(i), now.get(i)) {
                (Some(a), Some(b)) => !a.fits(b),
                _ => true,
            })
        else {
            continue;
        };
        // The message the difference followed, and which of the chat's it was.
        let after = recorded[..at.min(recorded.len())]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| matches!(e, Event::Message(_)).then_some((i, *e)));
        let context = match after {
            Some((i, message)) => {
                let nth = recorded[..=i]
                    .iter()
                    .filter(|e| matches!(e, Event::Message(_)))
                    .count();
                format!("after {} (its message {nth})", message.described())
            }
            None => "before any message".to_owned(),
        };
        found.push(format!(
            "  in {place}, {context}:\n    recorded {}\n    now      {}",
            side(&recorded, at),
            side(&now, at)
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_part_stands_for_any_text() {
        assert!(fits("plain", "plain"));
        assert!(!fits("plain", "plains"));
        assert!(fits("token [redacted] ok", "token abc ok"));
        assert!(fits("[redacted]", "anything"));
        assert!(fits("a [redacted] b [redacted] c", "a 1 b 2 c"));
        assert!(!fits("a [redacted] b [redacted] c", "a 1 c"));
        assert!(!fits("ab[redacted]ba", "aba"));
    }

    #[test]
    fn each_chat_reports_its_first_difference_after_its_message() {
        let message = |chat: &str, text: &str| Event::Message(Incoming::new(chat, "u", text));
        let recorded = vec![
            message("a", "hi"),
            reply("a".into(), "Hello!"),
            message("b", "disk?"),
            reply("b".into(), "12 GB free."),
            message("b", "and now?"),
            reply("b".into(), "11 GB free."),
        ];
        let mut now = recorded.clone();
        now[5] = reply("b".into(), "10 GB free.");
        now.push(reply("a".into(), "Bye."));
        let found = differences(&recorded, &now);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            found[0],
            "  in a, after the message \"hi\" (its message 1):\n    recorded nothing\n    now      the reply \"Bye.\""
        );
        assert!(
            found[1].contains("after the message \"and now?\" (its message 2)"),
            "{}",
            found[1]
        );
        assert!(
            found[1].contains("recorded the reply \"11 GB free.\""),
            "{}",
            found[1]
        );
        let counts: Vec<usize> = messages(&recorded).into_iter().map(|(_, n)| n).collect();
        assert_eq!(counts, [0, 0, 1]);
    }
}
