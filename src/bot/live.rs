//! One message's turn in a chat: the reply streamed into the chat as it is
//! written, "typing…" while the model thinks, `/new` for a fresh
//! conversation.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::channel::{Channel, Incoming};
use super::journal::Journal;
use super::split::split_message;
use crate::agent::{Agent, AgentEvent, Builtin, Status, TurnRequest};
use crate::history::{HistoryStore, Mark, Stage};

/// How often "typing…" is repeated: Telegram shows it for 5 s, Discord for 10.
const TYPING_EVERY: Duration = Duration::from_secs(4);

const FRESH: &str = "Started a fresh conversation. The earlier one is kept in the history.";
const NOTHING: &str = "(no output)";
const NOTHING_READ: &str =
    "I read text and images (photos, PNG, JPEG, GIF or WebP): please write your question.";
/// How long drafts wait after the platform refused one.
const DRAFT_PAUSE: Duration = Duration::from_secs(5);
const CUT_SHORT: &str = "The answer was cut short by an internal error; please ask again.";
const COMMAND_INTERRUPTED: &str = "A restart interrupted this command, and it was not run again: send it again if you still want it.";

/// The chat a conversation belongs to: `/new` gives a chat conversations
/// named `CHAT~N`, and a channel's confirmation prompts and later messages
/// go to `CHAT`.
///
/// # Examples
/// ```
/// assert_eq!(ferrobot::bot::chat_of("12345~1764510000000"), "12345");
/// assert_eq!(ferrobot::bot::chat_of("12345"), "12345");
/// ```
pub fn chat_of(conversation: &str) -> &str {
    conversation
        .split_once('~')
        .map_or(conversation, |(chat, _)| chat)
}

/// Which conversation each chat is in.
#[derive(Debug, Default)]
pub(super) struct Sessions(Mutex<HashMap<String, String>>);

impl Sessions {
    /// The chat's current conversation: after a restart, the one most
    /// recently updated in the history.
    async fn current(&self, agent: &Agent, chat: &str) -> String {
        if let Some(id) = self.lock().get(chat) {
            return id.clone();
        }
        let latest = match agent.history().list().await {
            Ok(conversations) => conversations
                .into_iter()
                .find(|c| chat_of(&c.id) == chat)
                .map(|c| c.id),
            Err(error) => {
                tracing::warn!(%chat, error = %crate::error::chain(&error), "could not look up the chat's conversation");
                None
            }
        };
        self.lock()
            .entry(chat.to_owned())
            .or_insert_with(|| latest.unwrap_or_else(|| chat.to_owned()))
            .clone()
    }

    fn renew(&self, chat: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        self.lock().insert(chat.to_owned(), format!("{chat}~{now}"));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Sends a whole answer, logging a failure.
async fn send(channel: &dyn Channel, chat: &str, target: &str, text: &str) {
    if let Err(error) = channel.send(target, text).await {
        tracing::warn!(%chat, error = %crate::error::chain(&error), "could not send a reply");
    }
}

/// Answers one incoming message; with a journal, marks its entry as the
/// answer is posted, and delivered at the end.
pub(super) async fn answer(
    agent: &Agent,
    channel: &dyn Channel,
    sessions: &Sessions,
    incoming: Incoming,
    journal: Journal<'_>,
    mut turn_began: Option<watch::Sender<bool>>,
) {
    let entry = Entry::new(agent.history().as_ref(), &journal);
    // A turn that had started goes on where it stood.
    let started = match journal {
        Journal::Recover(intake) if intake.stage != Stage::Received => Some(intake),
        _ => None,
    };
    let chat = incoming.conversation.as_str();
    let target = incoming.reply_to.as_deref().unwrap_or(chat);
    let command = incoming.text.trim_start().starts_with('/');
    let unread = (!incoming.unread.is_empty()).then(|| {
        format!(
            "This didn't reach me: {}. I read text and images (PNG, JPEG, GIF or WebP).",
            incoming.unread.join(", ")
        )
    });
    let answered_here = if started.is_some() {
        command.then_some(COMMAND_INTERRUPTED)
    } else if incoming.text.trim().is_empty() && incoming.images.is_empty() {
        // A sticker, a voice note, a file: nothing the model could read.
        Some(unread.as_deref().unwrap_or(NOTHING_READ))
    } else if Builtin::parse(&incoming.text) == Some(Builtin::New) {
        sessions.renew(chat);
        Some(FRESH)
    } else {
        None
    };
    if let Some(answer) = answered_here {
        send(channel, chat, target, answer).await;
        entry.mark(Mark::Delivered).await;
        return;
    }
    if let Some(unread) = unread.as_deref().filter(|_| started.is_none()) {
        // Said first, so the answer that follows is read knowing it.
        send(channel, chat, target, unread).await;
    }
    let conversation = match started.and_then(|intake| intake.conversation.clone()) {
        Some(conversation) => conversation,
        None => sessions.current(agent, chat).await,
    };
    let request = match (started, entry.id) {
        (Some(_), Some(id)) => TurnRequest::recover(id),
        (_, id) => {
            if command {
                // A command's turn stores nothing: the journal alone says
                // it ran, so that recovery doesn't run it again.
                entry
                    .mark(Mark::Started {
                        conversation: conversation.clone(),
                    })
                    .await;
            }
            let mut request = TurnRequest::new(incoming.text.as_str()).user(incoming.user);
            request.user_name = incoming.name;
            request.images = incoming.images;
            request.journal = id.map(str::to_owned);
            request
        }
    };
    let mut events = agent.stream(&conversation, request);
    let mut reply = LiveReply::new(channel, chat, target, entry);
    // A command is not run again after a crash: its answer needs no draft
    // to be recovered into.
    reply.draft_first = entry.id.is_some() && !command;
    if let Journal::Recover(intake) = journal
        && let Some(posted) = &intake.reply
    {
        // The draft posted before the crash becomes the answer.
        reply.sent.push((posted.clone(), String::new()));
        reply.posted_any = true;
    }
    let mut busy = false;
    let mut typing = tokio::time::interval(TYPING_EVERY);
    typing.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let flush_at = reply.flush_at();
        let event = tokio::select! {
            event = events.next() => event,
            _ = typing.tick(), if busy => {
                channel.typing(target).await;
                continue;
            }
            () = tokio::time::sleep_until(flush_at.unwrap_or_else(Instant::now)), if flush_at.is_some() => {
                reply.flush().await;
                continue;
            }
        };
        if let Some(began) = turn_began.take() {
            // The turn has its conversation: the chat's next message may go.
            began.send_replace(true);
        }
        match event {
            Some(Ok(AgentEvent::Status(Status::Thinking | Status::RunningTool { .. }))) => {
                if !busy {
                    busy = true;
                    typing.reset_immediately();
                }
            }
            // Waiting for a button press: nothing is being typed.
            Some(Ok(AgentEvent::Status(_))) => busy = false,
            Some(Ok(AgentEvent::TextDelta(delta) | AgentEvent::RefusalDelta(delta))) => {
                busy = false;
                reply.push(&delta);
            }
            // Text written before a tool call is finished where it stands; the
            // answer after the tool runs goes in a message of its own, below
            // any confirmation prompt.
            // The same for an answer the user steered (`WhileBusy::Steer`):
            // the answer to what they added follows in a message of its own.
            Some(Ok(AgentEvent::ToolCallStarted(_) | AgentEvent::Steered(_))) => {
                reply.finish(None).await;
            }
            Some(Ok(AgentEvent::Done(done))) => {
                // A slash command's tool output is shown as it came, not read
                // as Markdown (`__init__.py`, `# comment`, column layouts).
                let verbatim = incoming.text.trim_start().starts_with('/')
                    && !done.tool_calls.is_empty()
                    && !done.text.trim().is_empty()
                    && !done.text.contains("```");
                let text = if verbatim {
                    format!("```\n{}\n```", done.text.trim_end())
                } else {
                    done.text
                };
                reply.finish(Some(&text)).await;
                if !reply.posted_any {
                    // Always an answer: a Discord slash command would
                    // otherwise stay "thinking…".
                    reply.finish(Some(NOTHING)).await;
                }
                break;
            }
            // A sub-agent's turn: its text is for the model that called it,
            // not for the chat, which sees it work (typing) and wait for a
            // button press as the turn's own.
            Some(Ok(AgentEvent::SubAgent(sub))) => match sub.innermost() {
                AgentEvent::Status(Status::AwaitingConfirmation { .. }) => busy = false,
                AgentEvent::Status(_) if !busy => {
                    busy = true;
                    typing.reset_immediately();
                }
                _ => {}
            },
            Some(Ok(_)) => {}
            // Stopped (`/stop`, the Stop button, a message that interrupts):
            // what streamed stays, and whoever stopped it has their answer.
            Some(Err(crate::Error::Cancelled)) => {
                reply.finish(None).await;
                break;
            }
            Some(Err(error)) => {
                tracing::warn!(%conversation, error = %crate::error::chain(&error), "turn failed");
                reply.finish(None).await;
                send(channel, chat, target, &error.user_message()).await;
                break;
            }
            // The turn ended without its last event (its task failed).
            None => {
                reply.finish(None).await;
                send(channel, chat, target, CUT_SHORT).await;
                break;
            }
        }
    }
    reply.entry.mark(Mark::Delivered).await;
}

/// The journal entry of the message being answered, if it has one.
#[derive(Clone, Copy)]
struct Entry<'a> {
    history: &'a dyn HistoryStore,
    id: Option<&'a str>,
}

impl<'a> Entry<'a> {
    fn new(history: &'a dyn HistoryStore, journal: &Journal<'a>) -> Self {
        let id = match *journal {
            Journal::Off => None,
            Journal::Fresh(id) => Some(id),
            Journal::Recover(intake) => Some(intake.id.as_str()),
        };
        Self { history, id }
    }

    /// Marks the entry; a failure is logged: the answer matters more.
    async fn mark(&self, mark: Mark) {
        let Some(id) = self.id else { return };
        if let Err(error) = self.history.mark(id, &mark).await {
            tracing::warn!(intake = %id, error = %error.chain(), "could not mark a journaled message");
        }
    }
}

/// A message being written: posted with the first text, edited as more
/// arrives (at most once per the channel's interval), split into further
/// messages past the platform's limit, and edited a last time, formatted,
/// when done.
struct LiveReply<'a> {
    channel: &'a dyn Channel,
    /// Where the id of each message an answer starts with is journaled.
    entry: Entry<'a>,
    /// Whether a finished answer's first message goes out as a draft
    /// first, its id journaled before it is finished.
    draft_first: bool,
    /// The conversation's chat, for logs.
    chat: &'a str,
    /// Where the messages go: the chat, or the channel's reply target (which
    /// may hold a secret, such as a Discord interaction token: never logged).
    target: &'a str,
    interval: Option<Duration>,
    text: String,
    /// The posted messages: id and the text shown.
    sent: Vec<(String, String)>,
    last_shown: Option<Instant>,
    dirty: bool,
    /// The text of the last finished message, so a reply that was already
    /// shown before the turn ended isn't sent twice.
    finished: String,
    /// Whether anything was posted this turn.
    posted_any: bool,
}

impl<'a> LiveReply<'a> {
    fn new(channel: &'a dyn Channel, chat: &'a str, target: &'a str, entry: Entry<'a>) -> Self {
        Self {
            channel,
            entry,
            draft_first: false,
            chat,
            target,
            posted_any: false,
            interval: channel.edit_interval(),
            text: String::new(),
            sent: Vec::new(),
            last_shown: None,
            dirty: false,
            finished: String::new(),
        }
    }

    fn push(&mut self, delta: &str) {
        self.text.push_str(delta);
        self.dirty = !self.text.trim().is_empty();
    }

    /// When the draft should next be shown; `None` when it's up to date or
    /// the channel can't edit.
    fn flush_at(&self) -> Option<Instant> {
        let interval = self.interval?;
        self.dirty.then(|| {
            self.last_shown
                .map_or_else(Instant::now, |at| at + interval)
        })
    }

    async fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        let shown = self.show(&text, false).await;
        self.text = text;
        self.dirty = false;
        // A draft the platform refused (flood control, most likely) is
        // tried again later, not at once; the finished reply comes anyway.
        let pause = if shown { Duration::ZERO } else { DRAFT_PAUSE };
        self.last_shown = Some(Instant::now() + pause);
    }

    /// Shows the finished text: the turn's reply when given (what a slash
    /// command or a non-streaming model answered), else what streamed.
    async fn finish(&mut self, reply: Option<&str>) {
        let streamed = std::mem::take(&mut self.text);
        let text = match reply {
            Some(reply) if !reply.trim().is_empty() => {
                if streamed.trim().is_empty() && self.sent.is_empty() && reply == self.finished {
                    return;
                }
                reply.to_owned()
            }
            _ => streamed,
        };
        if !text.trim().is_empty() {
            self.show(&text, true).await;
            self.finished = text;
        }
        self.sent.clear();
        self.dirty = false;
        self.last_shown = None;
    }

    /// Posts or edits what changed; false when the platform refused any of it.
    async fn show(&mut self, text: &str, done: bool) -> bool {
        let (limit, length) = self.channel.limit();
        let entry = self.entry;
        for (i, piece) in split_message(text, limit, length).into_iter().enumerate() {
            if self.sent.len() == i {
                // A journaled answer's first message goes out as a draft,
                // and its id into the journal, before it is finished:
                // recovery edits it, and never posts the answer twice.
                let draft_first = done && i == 0 && self.draft_first && self.interval.is_some();
                match self
                    .channel
                    .post(self.target, &piece, done && !draft_first)
                    .await
                {
                    Ok(id) => {
                        self.posted_any = true;
                        if i == 0 {
                            entry.mark(Mark::Reply(id.clone())).await;
                        }
                        self.sent.push((id, piece.clone()));
                        if !draft_first {
                            continue;
                        }
                    }
                    Err(error) => {
                        // A draft is posted again at the next flush; a
                        // finished reply has been retried by the channel.
                        tracing::warn!(chat = %self.chat, error = %crate::error::chain(&error), "could not post a reply");
                        return false;
                    }
                }
            }
            let (id, shown) = &mut self.sent[i];
            // A finished message is edited once more even when its text is
            // unchanged: the draft was plain, the finished one formatted.
            if *shown == piece && !done {
                continue;
            }
            match self.channel.edit(self.target, id, &piece, done).await {
                Ok(()) => *shown = piece,
                Err(error) if done => {
                    // The draft can't be replaced (deleted, too old): post
                    // the finished text anew, so nothing is lost.
                    tracing::warn!(chat = %self.chat, error = %crate::error::chain(&error), "could not edit a reply; posting it again");
                    if let Ok(new) = self.channel.post(self.target, &piece, true).await {
                        if i == 0 {
                            entry.mark(Mark::Reply(new.clone())).await;
                        }
                        *id = new;
                        *shown = piece;
                    }
                }
                Err(error) => {
                    tracing::debug!(chat = %self.chat, error = %crate::error::chain(&error), "could not update a draft");
                    return false;
                }
            }
        }
        true
    }
}
