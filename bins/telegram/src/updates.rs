//! Long polling: `Telegram::receive` checks the token, sets the menu and
//! fetches updates; `Inner::dispatch` turns each into a turn, a button press
//! or nothing, reading a message teloxide's types refuse from its JSON.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::bot::{ChannelError, Handler, Incoming};
use ferrobot_app::lock;
use futures_util::StreamExt;
use teloxide::prelude::Requester;
use teloxide::types::{AllowedUpdate, MessageKind, Update, UpdateKind};
use teloxide::update_listeners::{AsUpdateStream, Polling};
use teloxide::{ApiError, RequestError};

use crate::place::Place;
use crate::{Inner, REFUSAL, Telegram};

/// The Bot API's long-poll wait; teloxide's HTTP client gives up after 17 s.
const POLL_WAIT: Duration = Duration::from_secs(10);

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
        let message = match update.kind {
            UpdateKind::Message(message) => match (message.from.as_ref(), message.text()) {
                (Some(from), Some(text)) if !from.is_bot => Some((
                    Place::of(&message),
                    Place::answering(&message),
                    from.id.0,
                    text.to_owned(),
                )),
                // A photo, a voice note or a file in a private chat is told
                // that only text is read; in a group it is left alone.
                (Some(from), None)
                    if !from.is_bot
                        && message.chat.is_private()
                        && matches!(message.kind, MessageKind::Common(_)) =>
                {
                    Some((Place::of(&message), None, from.id.0, String::new()))
                }
                _ => None,
            },
            UpdateKind::CallbackQuery(query) => {
                let inner = Arc::clone(self);
                tokio::spawn(async move { inner.pressed(query).await });
                None
            }
            // An update teloxide's types don't accept (an old payload without
            // `is_bot`, a field Telegram changed): a text message in it is
            // still read.
            UpdateKind::Error(raw) => lenient_text(&raw),
            _ => None,
        };
        let Some((place, answering, user, text)) = message else {
            return;
        };
        if !self.is_allowed(user) {
            tracing::warn!(
                user_id = user,
                "refused a message from a user not in telegram.allowed_user_ids"
            );
            if lock(&self.refused).insert(user) {
                let inner = Arc::clone(self);
                tokio::spawn(async move {
                    let _ = inner.send_plain(place, REFUSAL).await;
                });
            }
            return;
        }
        // `/start` is what Telegram sends when someone opens the bot.
        let first = text.split_whitespace().next().unwrap_or_default();
        let text = if first == "/start" || first.starts_with("/start@") {
            "/help".to_owned()
        } else {
            text
        };
        let mut incoming = Incoming::new(place.to_string(), user.to_string(), text);
        if let Some(answering) = answering {
            incoming = incoming.reply_to(answering.to_string());
        }
        tokio::spawn(handler(incoming));
    }
}

/// The place, where the answer goes, sender and text of a message update
/// in raw JSON.
fn lenient_text(raw: &serde_json::Value) -> Option<(Place, Option<Place>, u64, String)> {
    let message = raw.get("message")?;
    let from = message.get("from")?;
    if from.get("is_bot").and_then(serde_json::Value::as_bool) == Some(true) {
        return None;
    }
    Some((
        Place::of_raw(message)?,
        Place::answering_raw(message),
        from.get("id")?.as_u64()?,
        message.get("text")?.as_str()?.to_owned(),
    ))
}
