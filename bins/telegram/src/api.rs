//! Bot API calls: `Inner::call` runs a request with its retries and
//! `channel_error` says what a failure means for the bot; the rest sends and
//! edits messages, finished replies in MarkdownV2 with a plain-text fallback.

use std::future::Future;

use ferrobot::bot::ChannelError;
use ferrobot_app::Retry;
use teloxide::payloads::SendMessage;
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::requests::{HasPayload as _, JsonRequest};
use teloxide::types::{ChatId, MessageId, ParseMode, ReplyParameters};
use teloxide::{ApiError, RequestError};

use crate::place::Place;
use crate::{Inner, markdown};

impl Inner {
    /// `error` as text, the token taken out.
    pub(crate) fn redact(&self, error: &dyn std::fmt::Display) -> String {
        error.to_string().replace(&self.token, "[token]")
    }

    pub(crate) fn channel_error(&self, error: &RequestError) -> ChannelError {
        if matches!(error, RequestError::Api(ApiError::InvalidToken)) {
            return ChannelError::Unauthorized;
        }
        ChannelError::Other {
            message: format!("Telegram: {}", self.redact(error)),
            source: None,
        }
    }

    /// Runs a request, waiting out flood control (`retry_after`) and
    /// retrying network failures and server errors a few times.
    pub(crate) async fn call<T, F, Fut>(&self, what: &str, request: F) -> Result<T, RequestError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, RequestError>>,
    {
        let classify = |error: &RequestError| match error {
            RequestError::RetryAfter(seconds) => Retry::After(seconds.duration()),
            // Server errors arrive as unknown API errors or as a body that
            // isn't the Bot API's JSON (a proxy's error page).
            RequestError::Network(_)
            | RequestError::InvalidJson { .. }
            | RequestError::Api(ApiError::Unknown(_)) => Retry::Backoff,
            _ => Retry::No,
        };
        ferrobot_app::retry("Telegram", what, request, classify, |e| self.redact(e)).await
    }

    /// A `sendMessage` of `text` to `place` (its topic, in a forum), as a
    /// reply to the message it names, if any (sent anyway if that is gone).
    pub(crate) fn message(&self, place: Place, text: &str) -> JsonRequest<SendMessage> {
        let mut request = self.bot.send_message(place.chat, text);
        let payload = request.payload_mut();
        payload.message_thread_id = place.topic;
        payload.reply_parameters = place
            .reply_to
            .map(|message| ReplyParameters::new(message).allow_sending_without_reply());
        request
    }

    pub(crate) async fn send_plain(
        &self,
        place: Place,
        text: &str,
    ) -> Result<MessageId, RequestError> {
        self.call("sendMessage", || self.message(place, text).send())
            .await
            .map(|m| m.id)
    }

    /// Sends `text` as MarkdownV2, or as plain text if Telegram refuses the
    /// Markdown.
    pub(crate) async fn send_formatted(
        &self,
        place: Place,
        text: &str,
    ) -> Result<MessageId, RequestError> {
        let formatted = markdown::to_markdown_v2(text);
        let sent = self
            .call("sendMessage", || {
                self.message(place, &formatted)
                    .parse_mode(ParseMode::MarkdownV2)
                    .send()
            })
            .await;
        match sent {
            Ok(message) => Ok(message.id),
            Err(RequestError::Api(error)) if error != ApiError::InvalidToken => {
                tracing::info!(error = %self.redact(&error), "Telegram refused the Markdown; sending plain text");
                self.send_plain(place, text).await
            }
            Err(error) => Err(error),
        }
    }

    pub(crate) async fn edit_text(
        &self,
        chat: ChatId,
        message: MessageId,
        text: &str,
        done: bool,
    ) -> Result<(), RequestError> {
        let edited = if done {
            let formatted = markdown::to_markdown_v2(text);
            let edited = self
                .call("editMessageText", || {
                    self.bot
                        .edit_message_text(chat, message, &formatted)
                        .parse_mode(ParseMode::MarkdownV2)
                        .send()
                })
                .await;
            match edited {
                Err(RequestError::Api(error))
                    if !matches!(error, ApiError::InvalidToken | ApiError::MessageNotModified) =>
                {
                    tracing::info!(error = %self.redact(&error), "Telegram refused the Markdown; editing in plain text");
                    self.call("editMessageText", || {
                        self.bot.edit_message_text(chat, message, text).send()
                    })
                    .await
                }
                other => other,
            }
        } else {
            self.call("editMessageText", || {
                self.bot.edit_message_text(chat, message, text).send()
            })
            .await
        };
        match edited {
            Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
