//! Long polling: `Telegram::receive` checks the token, sets the menu and
//! fetches updates; `Inner::dispatch` turns each into a turn, a button press
//! or nothing, reading a message teloxide's types refuse from its JSON
//! (`Said`); `Inner::gather` waits for the rest of an album; `Inner::admit`
//! downloads a message's images and hands it to the handler.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::bot::{ChannelError, Handler, Incoming, STOP_DATA, stop_pressed};
use ferrobot_app::lock;
use futures_util::StreamExt;
use futures_util::future::join_all;
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::{
    AllowedUpdate, CallbackQuery, MaybeInaccessibleMessage, Message, MessageKind, Update,
    UpdateKind,
};
use teloxide::update_listeners::{AsUpdateStream, Polling};
use teloxide::{ApiError, RequestError};

use crate::files::Files;
use crate::place::Place;
use crate::{Inner, REFUSAL, Telegram};

/// The Bot API's long-poll wait; teloxide's HTTP client gives up after 17 s.
const POLL_WAIT: Duration = Duration::from_secs(10);

/// How long the first message of an album waits for the others; Telegram
/// sends them together, one update each.
const ALBUM_WAIT: Duration = Duration::from_secs(1);

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
        let mut polling = Polling::builder(inner.bot.clone())
            .timeout(POLL_WAIT)
            .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
            .delete_webhook()
            .await
            .build();
        inner.connected.send_replace(true);
        let updates = polling.as_stream();
        futures_util::pin_mut!(updates);
        while let Some(update) = updates.next().await {
            match update {
                Ok(update) => inner.dispatch(update, &handler),
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(ChannelError::Unauthorized);
                }
                // The poller backs off by itself.
                Err(error) => {
                    tracing::warn!(error = %inner.redact(&error), "could not fetch updates; retrying");
                }
            }
        }
        Ok(())
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

    /// Turns an update into a turn, a button press or nothing.
    fn dispatch(self: &Arc<Self>, update: Update, handler: &Handler) {
        let said = match update.kind {
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
            // An update teloxide's types don't accept (an old payload without
            // `is_bot`, a field Telegram changed): a message in it is still
            // read.
            UpdateKind::Error(raw) => Said::of_raw(&raw),
            _ => None,
        };
        let Some(mut said) = said else { return };
        match said.album.take() {
            Some(album) => self.gather(album, said, handler),
            None => self.admit(said, handler),
        }
    }

    /// A press of the Stop button under a reply being written: `/stop` from
    /// the presser, in the chat it was pressed in, so the agent answers it
    /// as the built-in. Only the allowed users may stop a turn.
    fn stop_pressed(self: &Arc<Self>, query: CallbackQuery, handler: &Handler) {
        let presser = query.from.id.0;
        let place = match &query.message {
            Some(MaybeInaccessibleMessage::Regular(message)) => {
                Some(Place::of(message).to_string())
            }
            Some(other) => Some(other.chat().id.to_string()),
            None => None,
        };
        let stop = stop_pressed(
            place.unwrap_or_default(),
            presser.to_string(),
            self.is_allowed(presser),
        );
        let (inner, handler) = (Arc::clone(self), Arc::clone(handler));
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
                handler(stop).await;
            }
        });
    }

    /// Holds a message of an album (photos sent together arrive as one
    /// message each) until the rest have come, so the model gets them in
    /// one turn with the album's caption.
    fn gather(self: &Arc<Self>, album: String, said: Said, handler: &Handler) {
        {
            let mut albums = lock(&self.albums);
            if let Some(first) = albums.get_mut(&album) {
                first.join(said);
                return;
            }
            albums.insert(album.clone(), said);
        }
        let (inner, handler) = (Arc::clone(self), Arc::clone(handler));
        tokio::spawn(async move {
            tokio::time::sleep(ALBUM_WAIT).await;
            let said = lock(&inner.albums).remove(&album);
            if let Some(said) = said {
                inner.admit(said, &handler);
            }
        });
    }

    /// A message for the bot becomes a turn: its images downloaded, the
    /// rest named for the user. In a group, only a message with text (or a
    /// caption) is taken; a stranger is refused, once.
    fn admit(self: &Arc<Self>, said: Said, handler: &Handler) {
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
            if lock(&self.refused).insert(user) {
                let inner = Arc::clone(self);
                tokio::spawn(async move {
                    let _ = inner.send_plain(said.place, REFUSAL).await;
                });
            }
            return;
        }
        // `/start` is what Telegram sends when someone opens the bot.
        let first = said.text.split_whitespace().next().unwrap_or_default();
        let text = if first == "/start" || first.starts_with("/start@") {
            "/help".to_owned()
        } else {
            said.text
        };
        let mut incoming = Incoming::new(said.place.to_string(), user.to_string(), text);
        if let Some(answering) = said.answering {
            incoming = incoming.reply_to(answering.to_string());
        }
        let (inner, handler) = (Arc::clone(self), Arc::clone(handler));
        tokio::spawn(async move {
            let fetched = join_all(said.files.images.iter().map(|w| inner.fetch(w))).await;
            for image in fetched {
                incoming = match image {
                    Ok(image) => incoming.image(image),
                    Err(unread) => incoming.unread(unread),
                };
            }
            for unread in said.files.unread {
                incoming = incoming.unread(unread);
            }
            handler(incoming).await;
        });
    }
}

/// A message from a person: where it was written, where the answer goes
/// (in a group, as a reply to it), who sent it, its text or caption, its
/// files, and the album it is part of.
#[derive(Debug)]
pub(crate) struct Said {
    place: Place,
    answering: Option<Place>,
    user: u64,
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
            place: Place::of(message),
            answering: Place::answering(message),
            user: from.id.0,
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
            place: Place::of_raw(message)?,
            answering: Place::answering_raw(message),
            user: from.get("id")?.as_u64()?,
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
