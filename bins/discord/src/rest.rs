//! REST calls and where a reply goes: `Target` reads a conversation's
//! address (a channel, a reply in it, or a slash command's interaction);
//! `Inner::call` runs a request with its retries; `post` and `edit` send a
//! reply's text there, with a Stop button while it is being written.

use std::future::Future;
use std::time::{Duration, Instant};

use ferrobot::bot::{ChannelError, STOP_DATA, STOP_LABEL, chat_of};
use ferrobot_app::{Retry, lock};
use serde_json::Value;
use twilight_http::Response;
use twilight_http::api_error::ApiError;
use twilight_http::error::ErrorType;
use twilight_model::channel::message::Component;
use twilight_model::channel::message::component::{ActionRow, Button, ButtonStyle};
use twilight_model::id::Id;
use twilight_model::id::marker::{ApplicationMarker, ChannelMarker, MessageMarker};

use crate::Inner;

/// Interaction tokens are good for 15 minutes.
const INTERACTION_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Where a reply goes: a channel (or DM), as a reply to a message there
/// (`CHANNEL#MESSAGE`) or not, or a slash command's interaction.
pub(crate) enum Target {
    Channel(Id<ChannelMarker>, Option<Id<MessageMarker>>),
    /// The application the interaction was for, and its token.
    Interaction(Id<ApplicationMarker>, String),
}

pub(crate) const INTERACTION: &str = "interaction:";

pub(crate) fn target(of: &str) -> Result<Target, ChannelError> {
    fn id<T>(text: &str) -> Option<Id<T>> {
        text.parse::<u64>().ok().and_then(Id::new_checked)
    }
    if let Some((application, token)) = of.strip_prefix(INTERACTION).and_then(|t| t.split_once(':'))
    {
        let application = id(application)
            .ok_or_else(|| other("an interaction target without an application id".into()))?;
        return Ok(Target::Interaction(application, token.to_owned()));
    }
    let chat = chat_of(of);
    let (channel, message) = chat
        .split_once('#')
        .map_or((chat, None), |(channel, message)| (channel, Some(message)));
    let message = message
        .map(|message| id(message).ok_or_else(|| other(format!("`{of}` names no Discord message"))))
        .transpose()?;
    id(channel)
        .map(|channel| Target::Channel(channel, message))
        .ok_or_else(|| other(format!("`{of}` is not a Discord channel id")))
}

/// The buttons on a reply: a Stop button while it is being written
/// (`Inner::interaction` reads its press), none once it is done. An edit
/// always says which, so the finished reply loses the button.
fn buttons(done: bool) -> Vec<Component> {
    if done {
        return Vec::new();
    }
    vec![Component::ActionRow(ActionRow {
        components: vec![Component::Button(Button {
            custom_id: Some(STOP_DATA.to_owned()),
            disabled: false,
            emoji: None,
            id: None,
            label: Some(STOP_LABEL.to_owned()),
            sku_id: None,
            style: ButtonStyle::Secondary,
            url: None,
        })],
        id: None,
    })]
}

pub(crate) fn other(message: String) -> ChannelError {
    ChannelError::Other {
        message,
        source: None,
    }
}

impl Inner {
    pub(crate) fn redact(&self, error: &dyn std::fmt::Display) -> String {
        error.to_string().replace(&self.token, "[token]")
    }

    pub(crate) fn channel_error(&self, error: &twilight_http::Error) -> ChannelError {
        if matches!(error.kind(), ErrorType::Unauthorized) {
            return ChannelError::Unauthorized;
        }
        other(format!("Discord: {}", self.redact(error)))
    }

    /// Runs a request, waiting out rate limits (429 `retry_after`) and
    /// retrying network failures and server errors a few times.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        what: &str,
        request: F,
    ) -> Result<Response<T>, twilight_http::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Response<T>, twilight_http::Error>>,
    {
        let classify = |error: &twilight_http::Error| match error.kind() {
            ErrorType::Response {
                error: ApiError::Ratelimited(limited),
                ..
            } => Retry::After(Duration::from_secs_f64(
                limited.retry_after.clamp(0.0, 60.0),
            )),
            ErrorType::Response { status, .. } if status.is_server_error() => Retry::Backoff,
            ErrorType::RequestError | ErrorType::RequestTimedOut => Retry::Backoff,
            _ => Retry::No,
        };
        ferrobot_app::retry("Discord", what, request, classify, |e| self.redact(e)).await
    }

    /// The `id` of the object a response carries (read loosely, so a
    /// message Discord adds fields to still gives its id).
    pub(crate) async fn id_of<T>(&self, response: Response<T>) -> Result<String, ChannelError> {
        let body = response
            .bytes()
            .await
            .map_err(|e| other(format!("Discord: reading a response: {e}")))?;
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
            .ok_or_else(|| other("Discord answered without an id".into()))
    }

    /// Posts `text` to `to`; `done` is false for a reply being written.
    pub(crate) async fn post(
        &self,
        to: &str,
        text: &str,
        done: bool,
    ) -> Result<String, ChannelError> {
        let buttons = buttons(done);
        match target(to)? {
            Target::Channel(channel, answering) => {
                let response = self
                    .call("create message", || {
                        let mut message = self.http.create_message(channel).content(text);
                        if !done {
                            message = message.components(&buttons);
                        }
                        match answering {
                            // Sent anyway if the question was deleted.
                            Some(question) => message
                                .reply(question)
                                .fail_if_not_exists(false)
                                .into_future(),
                            None => message.into_future(),
                        }
                    })
                    .await
                    .map_err(|e| self.channel_error(&e))?;
                self.id_of(response).await
            }
            Target::Interaction(application, token) => {
                let interaction = self.http.interaction(application);
                // The deferred response is filled in first, then follow-ups.
                if self.first_answer(&token) {
                    self.edit(to, "@original", text, done).await?;
                    Ok("@original".into())
                } else {
                    let response = self
                        .call("create followup", || {
                            let followup = interaction.create_followup(&token).content(text);
                            if done {
                                followup.into_future()
                            } else {
                                followup.components(&buttons).into_future()
                            }
                        })
                        .await
                        .map_err(|e| self.channel_error(&e))?;
                    self.id_of(response).await
                }
            }
        }
    }

    /// Whether the interaction's deferred response is still to be filled in
    /// (and, from now on, isn't); forgets interactions past their lifetime.
    fn first_answer(&self, token: &str) -> bool {
        let mut answered = lock(&self.answered);
        answered.retain(|_, at| at.elapsed() < INTERACTION_LIFETIME);
        answered.insert(token.to_owned(), Instant::now()).is_none()
    }

    /// Replaces the text of `message` in `to`; `done` is false for a reply
    /// being written.
    pub(crate) async fn edit(
        &self,
        to: &str,
        message: &str,
        text: &str,
        done: bool,
    ) -> Result<(), ChannelError> {
        let buttons = buttons(done);
        let message_id = || {
            message
                .parse::<u64>()
                .ok()
                .and_then(Id::<MessageMarker>::new_checked)
                .ok_or_else(|| other(format!("`{message}` is not a Discord message id")))
        };
        let done = match target(to)? {
            Target::Channel(channel, _) => {
                let id = message_id()?;
                self.call("update message", || {
                    self.http
                        .update_message(channel, id)
                        .content(Some(text))
                        .components(Some(&buttons))
                        .into_future()
                })
                .await
                .map(drop)
            }
            Target::Interaction(application, token) => {
                let interaction = self.http.interaction(application);
                if message == "@original" {
                    self.call("update response", || {
                        interaction
                            .update_response(&token)
                            .content(Some(text))
                            .components(Some(&buttons))
                            .into_future()
                    })
                    .await
                    .map(drop)
                } else {
                    let id = message_id()?;
                    self.call("update followup", || {
                        interaction
                            .update_followup(&token, id)
                            .content(Some(text))
                            .components(Some(&buttons))
                            .into_future()
                    })
                    .await
                    .map(drop)
                }
            }
        };
        done.map_err(|e| self.channel_error(&e))
    }
}
