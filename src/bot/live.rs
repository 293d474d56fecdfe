//! One message's turn in a chat: the reply streamed into the chat as it is
//! written, "typing…" while the model thinks, `/new` for a fresh
//! conversation.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::{Instant, MissedTickBehavior};

use super::channel::{Channel, Incoming};
use super::split::split_message;
use crate::agent::{Agent, AgentEvent, Builtin, Status};

/// How often "typing…" is repeated: Telegram shows it for 5 s, Discord for 10.
const TYPING_EVERY: Duration = Duration::from_secs(4);

const FRESH: &str = "Started a fresh conversation. The earlier one is kept in the history.";
const NOTHING: &str = "(no output)";
const NOTHING_READ: &str =
    "I read text and images (photos, PNG, JPEG, GIF or WebP): please write your question.";
/// How long drafts wait after the platform refused one.
const DRAFT_PAUSE: Duration = Duration::from_secs(5);
const CUT_SHORT: &str = "The answer was cut short by an internal error; please ask again.";

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

/// Answers one incoming message.
pub(super) async fn answer(
    agent: &Agent,
    channel: &dyn Channel,
    sessions: &Sessions,
    incoming: Incoming,
) {
    let chat = incoming.conversation.as_str();
    let target = incoming.reply_to.as_deref().unwrap_or(chat);
    let unread = (!incoming.unread.is_empty()).then(|| {
        format!(
            "This didn't reach me: {}. I read text and images (PNG, JPEG, GIF or WebP).",
            incoming.unread.join(", ")
        )
    });
    let answered_here = if incoming.text.trim().is_empty() && incoming.images.is_empty() {
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
        return;
    }
    if let Some(unread) = &unread {
        // Said first, so the answer that follows is read knowing it.
        send(channel, chat, target, unread).await;
    }
    let conversation = sessions.current(agent, chat).await;
    let mut request = crate::agent::TurnRequest::new(incoming.text.as_str()).user(incoming.user);
    request.images = incoming.images;
    let mut events = agent.stream(&conversation, request);
    let mut reply = LiveReply::new(channel, chat, target);
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
}

/// A message being written: posted with the first text, edited as more
/// arrives (at most once per the channel's interval), split into further
/// messages past the platform's limit, and edited a last time, formatted,
/// when done.
struct LiveReply<'a> {
    channel: &'a dyn Channel,
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
    fn new(channel: &'a dyn Channel, chat: &'a str, target: &'a str) -> Self {
        Self {
            channel,
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
        for (i, piece) in split_message(text, limit, length).into_iter().enumerate() {
            let Some((id, shown)) = self.sent.get_mut(i) else {
                match self.channel.post(self.target, &piece, done).await {
                    Ok(id) => {
                        self.posted_any = true;
                        self.sent.push((id, piece));
                    }
                    Err(error) => {
                        // A draft is posted again at the next flush; a
                        // finished reply has been retried by the channel.
                        tracing::warn!(chat = %self.chat, error = %crate::error::chain(&error), "could not post a reply");
                        return false;
                    }
                }
                continue;
            };
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
