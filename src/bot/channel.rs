//! The interface every chat platform implements.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::task::AbortOnDropHandle;

use crate::agent::Agent;
use crate::confirm::{ConfirmHandler, ConfirmRequest, Decision};
use crate::tool::Notifier;

use super::commands::{CommandSpec, menu};
use super::journal::Handler;
use super::live::chat_of;
use super::split::{Length, split_message};

/// A message that arrived from a chat platform.
///
/// Its serde form is what the turn journal keeps to run it again after a
/// crash (see [`Incoming::id`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Incoming {
    /// The platform's id of the message, unique across the bot's chats
    /// (e.g. `telegram:CHAT:MESSAGE`): when set, the message is journaled
    /// before its turn runs, is answered once even if the platform delivers
    /// it again, and is recovered after a crash. `None` for what needs no
    /// journal (a button press).
    #[serde(default)]
    pub id: Option<String>,
    /// The conversation it belongs to: a chat, a channel or a DM.
    pub conversation: String,
    /// Who sent it, as the platform names users.
    pub user: String,
    /// What the sender is called (a display name), when the platform
    /// says: for the prompt ([`TurnInfo::user_name`](crate::agent::TurnInfo::user_name)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What they wrote (a photo's caption); may be empty when images came.
    pub text: String,
    /// Images that came with it (photos, image attachments), within the
    /// platform's and the channel's size limits; the model sees them after
    /// the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::message::Image>,
    /// What came with it that the model can't be given (a voice note, a
    /// PDF, an image over the size limit), each named for the user, e.g.
    /// `report.pdf (application/pdf)`; [`serve`] says so in its answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
    /// Where the reply goes when not to `conversation` itself, in the
    /// channel's own terms (a Discord slash command's interaction); passed to
    /// [`Channel::post`] and [`Channel::edit`] in place of the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

impl Incoming {
    /// A message in `conversation` from `user`.
    pub fn new(
        conversation: impl Into<String>,
        user: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            id: None,
            conversation: conversation.into(),
            user: user.into(),
            name: None,
            text: text.into(),
            images: Vec::new(),
            unread: Vec::new(),
            reply_to: None,
        }
    }

    /// With an image the user sent.
    #[must_use]
    pub fn image(mut self, image: crate::message::Image) -> Self {
        self.images.push(image);
        self
    }

    /// With something the user sent that the model can't be given, named
    /// for them.
    #[must_use]
    pub fn unread(mut self, what: impl Into<String>) -> Self {
        self.unread.push(what.into());
        self
    }

    /// With what the sender is called (see [`Incoming::name`]).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// With the platform's id of the message (see [`Incoming::id`]).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The reply goes to `target` instead of the conversation.
    #[must_use]
    pub fn reply_to(mut self, target: impl Into<String>) -> Self {
        self.reply_to = Some(target.into());
        self
    }
}

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

impl ChannelError {
    /// The error and its sources joined with ": ", for a log line.
    pub fn chain(&self) -> String {
        crate::error::chain(self)
    }
}

/// A chat platform: where messages come from and replies go.
///
/// The Telegram and Discord binaries implement it; [`serve`] joins one to an
/// [`Agent`]. A channel posts messages and, if the platform can, edits them:
/// then [`serve`] streams each reply into the chat as the model writes it.
/// Only [`start`](Self::start) and [`post`](Self::post) are required; the
/// rest have defaults for a platform that can do less.
///
/// # Examples
///
/// A platform of your own (here in memory, as a Slack or Matrix client would
/// be over its API): deliver each message to the handler, post what it
/// answers.
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use ferrobot::bot::{Channel, ChannelError, Handler, Incoming, serve};
/// use ferrobot::{Agent, testing::MockProvider};
/// use futures_util::future::BoxFuture;
///
/// #[derive(Default)]
/// struct Room {
///     said: Vec<Incoming>,
///     posted: Mutex<Vec<String>>,
/// }
///
/// impl Channel for Room {
///     fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
///         Box::pin(async move {
///             for message in &self.said {
///                 handler.answer(message.clone()).await;
///             }
///             Ok(()) // the connection ended: serve returns
///         })
///     }
///
///     fn post<'a>(
///         &'a self,
///         _room: &'a str,
///         text: &'a str,
///         _done: bool,
///     ) -> BoxFuture<'a, Result<String, ChannelError>> {
///         let mut posted = self.posted.lock().unwrap();
///         posted.push(text.to_owned());
///         let id = posted.len().to_string();
///         Box::pin(async move { Ok(id) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let room = Arc::new(Room {
///     said: vec![Incoming::new("general", "ann", "hello"), Incoming::new("general", "ann", "/new")],
///     ..Room::default()
/// });
/// let agent = Agent::builder().provider(MockProvider::replying("Hi Ann!")).build();
/// serve(agent, room.clone()).await.unwrap();
/// let posted = room.posted.lock().unwrap();
/// assert_eq!(posted[0], "Hi Ann!");
/// assert!(posted[1].starts_with("Started a fresh conversation"));
/// # }
/// ```
pub trait Channel: Send + Sync + 'static {
    /// Connects and calls `handler` for each incoming message, concurrently
    /// (a confirmation button must be answerable while its turn waits),
    /// until the connection ends for good.
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>>;

    /// Sets the platform's command menu: the built-ins, then the tools
    /// ([`menu`](super::menu)). [`serve`] calls it (and waits for
    /// it) before [`start`](Self::start), and again whenever the agent's
    /// tools change (a tools file reloaded, a tool switched on or off): keep
    /// the latest ([`LatestMenu`](super::LatestMenu)) and publish it once
    /// connected, and at once when already connected. Don't wait for the
    /// connection here: the bot would never start. By default, the platform
    /// has no menu.
    fn publish(&self, commands: Vec<CommandSpec>) -> BoxFuture<'_, ()> {
        let _ = commands;
        Box::pin(async {})
    }

    /// The longest message the platform takes, and how it counts length.
    /// By default, Discord's 2,000 characters.
    fn limit(&self) -> (usize, Length) {
        (2000, Length::Chars)
    }

    /// Posts one message (within [`limit`](Self::limit)) to `conversation`
    /// (or to the [`reply_to`](Incoming::reply_to) target of the message
    /// being answered) and returns its id. `done` is false for a draft of a reply still being
    /// written, which will be edited (send it as plain text: its Markdown may
    /// be cut in half); true for a finished one.
    fn post<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>>;

    /// Replaces the text of the message `message` that [`post`](Self::post)
    /// returned. Only called when [`edit_interval`](Self::edit_interval) is
    /// set; by default, an error.
    fn edit<'a>(
        &'a self,
        conversation: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (conversation, message, text, done);
        Box::pin(async {
            Err(ChannelError::Other {
                message: "this channel cannot edit messages".into(),
                source: None,
            })
        })
    }

    /// How often a reply being written may be edited, within the platform's
    /// rate limits. `None` (the default): replies are posted whole when the
    /// turn ends.
    fn edit_interval(&self) -> Option<Duration> {
        None
    }

    /// Shows that the bot is busy ("typing…") for a few seconds; [`serve`]
    /// repeats it while the model thinks or a tool runs. By default, nothing.
    fn typing<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, ()> {
        let _ = conversation;
        Box::pin(async {})
    }

    /// Sends `text` to `conversation`, split to the platform's
    /// [`limit`](Self::limit), each piece [`post`](Self::post)ed as done.
    fn send<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let (limit, length) = self.limit();
            for piece in split_message(text, limit, length) {
                self.post(conversation, &piece, true).await?;
            }
            Ok(())
        })
    }

    /// Asks the user who triggered the call; declines when it can't ask.
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let _ = request;
        Box::pin(async { Decision::Deny(None) })
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
            if let Err(error) = channel.send(chat_of(&conversation), &text).await {
                tracing::warn!(%conversation, error = %crate::error::chain(&error), "could not deliver a later message");
            }
        })
    }
}

/// Runs `channel` with `agent` answering: each message is a turn of its
/// conversation (slash commands included), streamed into the chat as it is
/// written when the channel can edit messages, with "typing…" shown while
/// the model thinks or a tool runs. A failed turn is answered with the
/// error's [`user_message`](crate::Error::user_message). `/new` starts a
/// fresh conversation in that chat; the earlier one stays in the history.
/// The command menu ([`Channel::publish`]) is kept in step with the tools.
///
/// A message with an [`id`](Incoming::id) is journaled in the agent's
/// history store before its turn runs ([`Handler`]), so it is answered once
/// however often the platform delivers it; at start, `serve` first recovers
/// the answers a crash interrupted, each chat's before its new messages.
///
/// # Errors
/// When the channel stops with an error.
pub async fn serve(agent: Agent, channel: Arc<dyn Channel>) -> Result<(), ChannelError> {
    let handler = Handler::new(agent.clone(), Arc::clone(&channel));
    // Subscribed before the menu is read: no change in between is missed.
    let changes = agent.tools().changes();
    let commands = menu(agent.tools());
    channel.publish(commands.clone()).await;
    let _menu = AbortOnDropHandle::new(tokio::spawn(follow_menu(
        agent,
        changes,
        Arc::clone(&channel),
        commands,
    )));
    // Before new messages: they wait for their chat's recovery.
    let _recovery = handler.recover().await;
    channel.start(handler).await
}

/// Publishes the command menu again whenever it changes: a moment after
/// the tools change, so that a tools file reloaded tool by tool is
/// published once, whole.
async fn follow_menu(
    agent: Agent,
    mut changes: tokio::sync::watch::Receiver<()>,
    channel: Arc<dyn Channel>,
    mut published: Vec<CommandSpec>,
) {
    const SETTLE: Duration = Duration::from_millis(300);
    while changes.changed().await.is_ok() {
        tokio::time::sleep(SETTLE).await;
        changes.mark_unchanged();
        let commands = menu(agent.tools());
        if commands != published {
            tracing::info!(
                commands = commands.len(),
                "the tools changed; publishing the command menu again"
            );
            channel.publish(commands.clone()).await;
            published = commands;
        }
    }
}
