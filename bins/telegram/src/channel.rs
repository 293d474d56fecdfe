//! `Telegram` as a [`Channel`]: each call handed to the module that does it
//! (`updates`, `menu`, `api`, `confirm`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::bot::{Channel, ChannelError, CommandSpec, Handler, Length, STOP_DATA, STOP_LABEL};
use ferrobot::confirm::{ConfirmRequest, Decision};
use futures_util::future::BoxFuture;
use teloxide::payloads::setters::*;
use teloxide::prelude::Requester;
use teloxide::requests::HasPayload as _;
use teloxide::types::{ChatAction, InlineKeyboardButton, InlineKeyboardMarkup, MessageId};
use teloxide::{ApiError, RequestError};

use crate::place::Place;
use crate::{MESSAGE_LIMIT, Telegram};

/// The Stop button under a reply being written (`Inner::dispatch` reads its
/// press). The finished reply is an edit without it, and Telegram drops a
/// keyboard an edit doesn't repeat.
fn stop_button() -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new([[InlineKeyboardButton::callback(STOP_LABEL, STOP_DATA)]])
}

impl Channel for Telegram {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.receive(handler))
    }

    fn publish(&self, commands: Vec<CommandSpec>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.menu.set(commands);
            // Before the token is checked, `start` sets it once it is.
            if self.inner.can_set_menu.load(Ordering::SeqCst) {
                self.inner.set_menu().await;
            }
        })
    }

    fn limit(&self) -> (usize, Length) {
        (MESSAGE_LIMIT, Length::Utf16)
    }

    fn post<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move {
            let place = Place::parse(conversation)?;
            // A draft is tried once: the next one follows soon, and waiting
            // out flood control here would stall the reply.
            let sent = if done {
                self.inner.send_formatted(place, text).await
            } else {
                self.inner
                    .message(place, text)
                    .reply_markup(stop_button())
                    .await
                    .map(|m| m.id)
            };
            sent.map(|id| id.0.to_string())
                .map_err(|e| self.inner.channel_error(&e))
        })
    }

    fn edit<'a>(
        &'a self,
        conversation: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let chat = Place::parse(conversation)?.chat;
            let message = message
                .parse()
                .map(MessageId)
                .map_err(|_| ChannelError::Other {
                    message: format!("`{message}` is not a Telegram message id"),
                    source: None,
                })?;
            let edited = if done {
                self.inner.edit_text(chat, message, text, true).await
            } else {
                // A draft is tried once (see `post`).
                let draft = self.inner.bot.edit_message_text(chat, message, text);
                match draft.reply_markup(stop_button()).await {
                    Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
                    Err(error) => Err(error),
                }
            };
            edited.map_err(|e| self.inner.channel_error(&e))
        })
    }

    fn edit_interval(&self) -> Option<Duration> {
        Some(self.inner.edit_interval)
    }

    fn typing<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Ok(place) = Place::parse(conversation) else {
                return;
            };
            let mut request = self
                .inner
                .bot
                .send_chat_action(place.chat, ChatAction::Typing);
            request.payload_mut().message_thread_id = place.topic;
            if let Err(error) = request.await {
                tracing::debug!(error = %self.inner.redact(&error), "could not show typing");
            }
        })
    }

    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.ask(request).await })
    }
}
