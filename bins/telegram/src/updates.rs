//! Long polling: `Telegram::receive` checks the token, sets the menu and
//! (unless a webhook is configured, see `webhook`) fetches updates, acknowledging each batch (the next `getUpdates`'
//! offset) only once its messages are journaled; `Inner::take` turns each
//! update into a turn, a button press or nothing, reading a message
//! teloxide's types refuse from its JSON (`Said`), and joins the photos of
//! an album; `Inner::admit` downloads a message's images and hands it to
//! the handler.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::bot::{ChannelError, Handler, Incoming, STOP_DATA, stop_pressed};
use futures_util::future::join_all;
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::{
    AllowedUpdate, CallbackQuery, MaybeInaccessibleMessage, Message, MessageKind, Update,
    UpdateKind,
};
use teloxide::{ApiError, RequestError};

use crate::files::Files;
use crate::place::Place;
use crate::{Inner, REFUSAL, Telegram};

/// The Bot API's long-poll wait; teloxide's HTTP client gives up after 17 s.
const POLL_WAIT: Duration = Duration::from_secs(10);

/// How long a batch ending in a photo of an album waits for the album's
/// other photos; Telegram sends them together, one update each.
pub(crate) const ALBUM_WAIT: Duration = Duration::from_secs(1);

/// How many times in a row Telegram may say another program polls with
/// the token before the bot stops: once can be the previous process's
/// last request, just after a restart.
const CONFLICTS: u32 = 3;

/// Why the bot stops when another program polls with its token.
const CONFLICT: &str = "another program is polling Telegram with this bot's token (Telegram answers 409 Conflict): stop the other bot, or run several replicas with a webhook ([telegram] webhook_url) and a shared PostgreSQL history";

impl Telegram {
    /// Checks the token, sets the menu, then serves updates until polling
    /// ends.
    pub(crate) async fn receive(&self, handler: Handler) -> Result<(), ChannelError> {
        let inner = &self.inner;
        let name = inner.connect().await?;
        if inner.allowed.is_empty() {
            tracing::warn!(
                "telegram.allowed_user_ids is empty, so everyone is refused: add your Telegram user id (the bot logs yours when you write to it)"
            );
        }
        inner.can_set_menu.store(true, Ordering::SeqCst);
        inner.set_menu().await;
        tracing::info!(bot = %name, "connected to Telegram");
        if let Some(webhook) = &inner.webhook {
            return self.serve_webhook(webhook, handler).await;
        }
        // Polling and a webhook exclude each other.
        if let Err(error) = inner.bot.delete_webhook().send().await {
            tracing::warn!(error = %inner.redact(&error), "could not remove the bot's webhook");
        }
        inner.connected.send_replace(true);
        let mut offset = 0;
        let mut conflicts = 0;
        let mut wait = Duration::from_secs(1);
        loop {
            let updates = match inner.poll(offset, POLL_WAIT).await {
                Ok(updates) => updates,
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(ChannelError::Unauthorized);
                }
                Err(RequestError::Api(ApiError::TerminatedByOtherGetUpdates)) => {
                    conflicts += 1;
                    if conflicts >= CONFLICTS {
                        return Err(ChannelError::Other {
                            message: CONFLICT.into(),
                            source: None,
                        });
                    }
                    tracing::warn!(
                        "another program polled Telegram with this bot's token; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(error = %inner.redact(&error), retry_in_s = wait.as_secs(), "could not fetch updates; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            conflicts = 0;
            wait = Duration::from_secs(1);
            let Some(last) = updates.iter().map(|u| u.id.0).max() else {
                continue;
            };
            let updates = inner.with_whole_albums(offset, updates).await;
            // Journaled before the next request's offset acknowledges them:
            // a crash before then, and Telegram sends them again.
            inner.take(updates, &handler).await;
            offset = i32::try_from(last).map_or(i32::MAX, |last| last.saturating_add(1));
        }
    }
}

impl Inner {
    /// Checks the token, retrying while Telegram can't be reached.
    async fn connect(&self) -> Result<String, ChannelError> {
        let mut wait = Duration::from_secs(1);
        loop {
            match self.bot.get_me().await {
                Ok(me) => return Ok(me.user.username.clone().unwrap_or_default()),
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(ChannelError::Unauthorized);
                }
                Err(error) => {
                    tracing::warn!(error = %self.redact(&error), retry_in_s = wait.as_secs(), "cannot reach Telegram; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(60));
                }
            }
        }
    }

    /// The updates from `offset` on, waiting up to `wait` for one.
    async fn poll(&self, offset: i32, wait: Duration) -> Result<Vec<Update>, RequestError> {
        self.bot
            .get_updates()
            .offset(offset)
            .timeout(u32::try_from(wait.as_secs()).unwrap_or(u32::MAX))
            .allowed_updates([AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
            .send()
            .await
    }

    /// The batch again, a moment later, when it ends in a photo of an
    /// album: the album's other photos may follow in the next updates.
    /// Nothing is acknowledged meanwhile (same offset).
    async fn with_whole_albums(&self, offset: i32, updates: Vec<Update>) -> Vec<Update> {
        if updates.last().and_then(album_of).is_none() {
            return updates;
        }
        tokio::time::sleep(ALBUM_WAIT).await;
        match self.poll(offset, Duration::ZERO).await {
            Ok(again) if again.len() >= updates.len() => again,
            _ => updates,
        }
    }

    /// Turns a batch of updates into turns, button presses or nothing;
    /// returns once every message in it is journaled. The photos of an
    /// album (one update each) are one message.
    pub(crate) async fn take(self: &Arc<Self>, updates: Vec<Update>, handler: &Handler) {
        let mut said: Vec<Said> = Vec::new();
        for update in updates {
            let one = match update.kind {
                UpdateKind::Message(message) => Said::of(&message),
                UpdateKind::CallbackQuery(query) if query.data.as_deref() == Some(STOP_DATA) => {
                    self.stop_pressed(query, handler);
                    None
                }
                UpdateKind::CallbackQuery(query) => {
                    let inner = Arc::clone(self);
                    tokio::spawn(async move { inner.pressed(query).await });
                    None
                }
                // An update teloxide's types don't accept (an old payload
                // without `is_bot`, a field Telegram changed): a message in
                // it is still read.
                UpdateKind::Error(raw) => Said::of_raw(&raw),
                _ => None,
            };
            let Some(mut one) = one else { continue };
            one.update = update.id.0;
            let album = one.album.as_ref();
            match said
                .iter_mut()
                .find(|s| album.is_some() && s.album.as_ref() == album)
            {
                Some(first) => first.join(one),
                None => said.push(one),
            }
        }
        // A chat's messages in the order they came; chats side by side.
        let mut chats: Vec<Vec<Said>> = Vec::new();
        for one in said {
            match chats.iter_mut().find(|chat| chat[0].place == one.place) {
                Some(chat) => chat.push(one),
                None => chats.push(vec![one]),
            }
        }
        join_all(chats.into_iter().map(|chat| async move {
            for said in chat {
                self.admit(said, handler).await;
            }
        }))
        .await;
    }

    /// A press of the Stop button under a reply being written: `/stop` from
    /// the presser, in the chat it was pressed in, so the agent answers it
    /// as the built-in. Only the allowed users may stop a turn.
    fn stop_pressed(self: &Arc<Self>, query: CallbackQuery, handler: &Handler) {
        let presser = query.from.id.0;
        let stop = stop_pressed(
            pressed_in(&query).unwrap_or_default(),
            presser.to_string(),
            self.is_allowed(presser),
        );
        let (inner, handler) = (Arc::clone(self), handler.clone());
        tokio::spawn(async move {
            let acknowledged = inner
                .call("answerCallbackQuery", || {
                    let request = inner.bot.answer_callback_query(query.id.clone());
                    match &stop {
                        Err(refused) => request.text(refused.to_string()).send(),
                        Ok(_) => request.send(),
                    }
                })
                .await;
            if let Err(error) = acknowledged {
                tracing::debug!(error = %inner.redact(&error), "could not acknowledge a button press");
            }
            // Without its message, the press can't say which chat to stop.
            if let Ok(stop) = stop
                && !stop.conversation.is_empty()
            {
                handler.answer(stop).await;
            }
        });
    }

    /// A message for the bot becomes a turn, journaled under its update's
    /// id: its images downloaded, the rest named for the user. In a group,
    /// only a message with text (or a caption) is taken; a stranger is
    /// refused, once.
    async fn admit(self: &Arc<Self>, said: Said, handler: &Handler) {
        // Answers in a group are replies, so `answering` tells a group.
        let in_group = said.answering.is_some();
        if said.text.is_empty() && in_group {
            return;
        }
        let user = said.user;
        if !self.is_allowed(user) {
            tracing::warn!(
                user_id = user,
                "refused a message from a user not in telegram.allowed_user_ids"
            );
            if ferrobot_app::lock(&self.refused).insert(user) {
                let inner = Arc::clone(self);
                tokio::spawn(async move {
                    let _ = inner.send_plain(said.place, REFUSAL).await;
                });
            }
            return;
        }
        self.show_menu_to(said.place.chat, user);
        // `/start` is what Telegram sends when someone opens the bot.
        let first = said.text.split_whitespace().next().unwrap_or_default();
        let text = if first == "/start" || first.starts_with("/start@") {
            "/help".to_owned()
        } else {
            said.text
        };
        let mut incoming = Incoming::new(said.place.to_string(), user.to_string(), text)
            .id(format!("telegram:{}", said.update));
        if let Some(name) = said.name {
            incoming = incoming.name(name);
        }
        if let Some(answering) = said.answering {
            incoming = incoming.reply_to(answering.to_string());
        }
        let fetched = join_all(said.files.images.iter().map(|w| self.fetch(w))).await;
        for image in fetched {
            incoming = match image {
                Ok(image) => incoming.image(image),
                Err(unread) => incoming.unread(unread),
            };
        }
        for unread in said.files.unread {
            incoming = incoming.unread(unread);
        }
        handler.accept(incoming).await;
    }
}

/// A message from a person: where it was written, where the answer goes
/// (in a group, as a reply to it), who sent it, its text or caption, its
/// files, and the album it is part of.
#[derive(Debug)]
pub(crate) struct Said {
    /// The update it came in (an album's first).
    update: u32,
    place: Place,
    answering: Option<Place>,
    user: u64,
    /// The sender's name as Telegram shows it.
    name: Option<String>,
    text: String,
    files: Files,
    album: Option<String>,
}

impl Said {
    /// A message someone wrote, not a service message or a bot's.
    fn of(message: &Message) -> Option<Self> {
        let from = message.from.as_ref().filter(|from| !from.is_bot)?;
        if !matches!(message.kind, MessageKind::Common(_)) {
            return None;
        }
        Some(Self {
            update: 0,
            place: Place::of(message),
            answering: Place::answering(message),
            user: from.id.0,
            name: Some(from.full_name()).filter(|name| !name.trim().is_empty()),
            text: message
                .text()
                .or_else(|| message.caption())
                .unwrap_or_default()
                .to_owned(),
            files: Files::of(message),
            album: message.media_group_id().map(|id| id.0.clone()),
        })
    }

    /// The same from a message in raw JSON: one with text, a caption or a
    /// file.
    fn of_raw(raw: &serde_json::Value) -> Option<Self> {
        let message = raw.get("message")?;
        let from = message.get("from")?;
        if from.get("is_bot").and_then(serde_json::Value::as_bool) == Some(true) {
            return None;
        }
        let text = ["text", "caption"]
            .iter()
            .find_map(|key| message.get(key)?.as_str())
            .unwrap_or_default()
            .to_owned();
        let files = Files::of_raw(message);
        if text.is_empty() && files.images.is_empty() && files.unread.is_empty() {
            return None;
        }
        Some(Self {
            update: 0,
            place: Place::of_raw(message)?,
            answering: Place::answering_raw(message),
            user: from.get("id")?.as_u64()?,
            // As teloxide's `full_name`: the first name, then the last.
            name: Some(
                ["first_name", "last_name"]
                    .iter()
                    .filter_map(|key| from.get(key)?.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
            .filter(|name| !name.is_empty()),
            text,
            files,
            album: message
                .get("media_group_id")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        })
    }

    /// Takes in the next message of the same album: its files, and its
    /// caption if this one has none.
    fn join(&mut self, next: Said) {
        if self.text.is_empty() {
            self.text = next.text;
        }
        self.files.images.extend(next.files.images);
        self.files.unread.extend(next.files.unread);
    }
}

/// Where a button was pressed, as the conversation there is named; `None`
/// when Telegram left the message out (too old).
pub(crate) fn pressed_in(query: &CallbackQuery) -> Option<String> {
    match &query.message {
        Some(MaybeInaccessibleMessage::Regular(message)) => Some(Place::of(message).to_string()),
        Some(other) => Some(other.chat().id.to_string()),
        None => None,
    }
}

/// What the bot makes of an update's JSON as the webhook endpoint receives
/// it (polling reads the same): a message it would take, as where it was
/// written, who wrote it and its text; a button press, as where it was
/// pressed; `None` for a body that is no update or an update it ignores.
/// For the fuzz target (`fuzz/fuzz_targets/telegram_updates.rs`), not an
/// API.
#[doc(hidden)]
pub fn read_update(body: &[u8]) -> Option<String> {
    let update: Update = serde_json::from_slice(body).ok()?;
    let album = album_of(&update);
    let said = match &update.kind {
        UpdateKind::Message(message) => Said::of(message),
        UpdateKind::Error(raw) => Said::of_raw(raw),
        UpdateKind::CallbackQuery(query) => return pressed_in(query),
        _ => None,
    }?;
    let files = said.files.images.len() + said.files.unread.len();
    Some(format!(
        "{} (answering {:?}) from {} {:?}: {} [{files} files, album {album:?}]",
        said.place, said.answering, said.user, said.name, said.text
    ))
}

/// The album (media group) a message update's photo belongs to, if any.
pub(crate) fn album_of(update: &Update) -> Option<String> {
    match &update.kind {
        UpdateKind::Message(message) => message.media_group_id().map(|id| id.0.clone()),
        UpdateKind::Error(raw) => raw
            .pointer("/message/media_group_id")
            .and_then(|id| id.as_str())
            .map(str::to_owned),
        _ => None,
    }
}
