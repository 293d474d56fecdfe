//! The interface every chat platform implements.

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::agent::Agent;
use crate::confirm::{ConfirmHandler, ConfirmRequest, Decision};
use crate::tool::Notifier;

/// A message that arrived from a chat platform.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Incoming {
    /// The conversation it belongs to: a chat, a channel or a DM.
    pub conversation: String,
    /// Who sent it, as the platform names users.
    pub user: String,
    /// What they wrote.
    pub text: String,
}

impl Incoming {
    /// A message in `conversation` from `user`.
    pub fn new(
        conversation: impl Into<String>,
        user: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            conversation: conversation.into(),
            user: user.into(),
            text: text.into(),
        }
    }
}

/// Called by a [`Channel`] for each incoming message; the future ends when
/// the message has been answered.
pub type Handler = Arc<dyn Fn(Incoming) -> BoxFuture<'static, ()> + Send + Sync>;

/// Why a channel failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelError {
    /// The platform refused the credentials; retrying won't help.
    #[error("the platform refused the bot's token: check it and restart")]
    Unauthorized,
    /// Anything else, with what to do about it.
    #[error("{message}")]
    Other {
        /// What went wrong.
        message: String,
        /// The cause.
        #[source]
        source: Option<crate::BoxError>,
    },
}

/// A chat platform: where messages come from and replies go.
///
/// The Telegram and Discord binaries implement it; [`serve`] joins one to an
/// [`Agent`].
pub trait Channel: Send + Sync + 'static {
    /// Connects and calls `handler` for each incoming message, concurrently
    /// (a confirmation button must be answerable while its turn waits),
    /// until the connection ends for good.
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>>;

    /// Sends `text` to `conversation`, split as the platform requires.
    fn send<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>>;

    /// Asks the user who triggered the call; declines when it can't ask.
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let _ = request;
        Box::pin(async { Decision::Decline })
    }
}

impl fmt::Debug for dyn Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Channel")
    }
}

/// A channel's confirmation prompts as the agent's confirm handler.
///
/// # Examples
/// ```
/// # use std::sync::Arc;
/// # use ferrobot::bot::{Channel, ChannelConfirm, ChannelNotifier};
/// fn build(channel: Arc<dyn Channel>) -> ferrobot::Agent {
///     ferrobot::Agent::builder()
///         .provider(ferrobot::testing::MockProvider::replying("ok"))
///         .confirm(ChannelConfirm(channel.clone()))
///         .notifier(ChannelNotifier(channel))
///         .build()
/// }
/// # let _ = build;
/// ```
#[derive(Debug, Clone)]
pub struct ChannelConfirm(pub Arc<dyn Channel>);

impl ConfirmHandler for ChannelConfirm {
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        self.0.confirm(request)
    }
}

/// A channel's `send` as the agent's notifier, for `notify_later`.
#[derive(Debug, Clone)]
pub struct ChannelNotifier(pub Arc<dyn Channel>);

impl Notifier for ChannelNotifier {
    fn notify(&self, conversation: String, text: String) -> BoxFuture<'static, ()> {
        let channel = Arc::clone(&self.0);
        Box::pin(async move {
            if let Err(error) = channel.send(&conversation, &text).await {
                tracing::warn!(%conversation, error = %crate::error::chain(&error), "could not deliver a later message");
            }
        })
    }
}

/// Runs `channel` with `agent` answering: each message is a turn of its
/// conversation (slash commands included), and the reply, or the error's
/// [`user_message`](crate::Error::user_message), is sent back.
///
/// # Errors
/// When the channel stops with an error.
pub async fn serve(agent: Agent, channel: Arc<dyn Channel>) -> Result<(), ChannelError> {
    let replies = Arc::clone(&channel);
    let handler: Handler = Arc::new(move |incoming: Incoming| {
        let (agent, channel) = (agent.clone(), Arc::clone(&replies));
        Box::pin(async move {
            let text = match agent.handle(&incoming.conversation, &incoming.text).await {
                Ok(reply) => reply.text,
                Err(error) => {
                    tracing::warn!(conversation = %incoming.conversation, error = %crate::error::chain(&error), "turn failed");
                    error.user_message()
                }
            };
            if let Err(error) = channel.send(&incoming.conversation, &text).await {
                tracing::warn!(conversation = %incoming.conversation, error = %crate::error::chain(&error), "could not send a reply");
            }
        })
    });
    channel.start(handler).await
}
