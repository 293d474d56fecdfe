//! `ferrobot-telegram`: your machine's assistant on Telegram.
//!
//! [`Telegram`] is the Telegram Bot API as a [`Channel`] (long polling with
//! teloxide); [`run`] builds the agent the config describes and serves it.
//! The binary is `main.rs`; the guide is `docs/telegram.md`.

#[doc(hidden)]
pub mod markdown;
mod place;

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::bot::{
    Channel, ChannelError, CommandSpec, Handler, Incoming, LatestMenu, Length, Questions,
    Unanswered, clip, decided,
};
use ferrobot::confirm::{ConfirmRequest, Decision};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use teloxide::payloads::SendMessage;
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::requests::{HasPayload as _, JsonRequest};
use teloxide::types::{
    AllowedUpdate, BotCommand, CallbackQuery, ChatAction, ChatId, InlineKeyboardButton,
    InlineKeyboardMarkup, MaybeInaccessibleMessage, MessageId, MessageKind, ParseMode,
    ReplyParameters, Update, UpdateKind,
};
use teloxide::update_listeners::{AsUpdateStream, Polling};
use teloxide::{ApiError, Bot, RequestError};
use tokio::sync::watch;

use crate::place::Place;

/// What to do when Telegram refuses the token.
const UNAUTHORIZED: &str = "Telegram refused the bot token: check telegram.token (or FERROBOT_TELEGRAM__TOKEN) against @BotFather's /mybots, then restart";

/// Telegram's limit on a message, in UTF-16 code units.
const MESSAGE_LIMIT: usize = 4096;

/// The Bot API's long-poll wait; teloxide's HTTP client gives up after 17 s.
const POLL_WAIT: Duration = Duration::from_secs(10);

const REFUSAL: &str = "Sorry, this is a private bot: it only answers the people its owner allows.";

/// Telegram as a [`Channel`]: long polling, replies streamed by editing a
/// message, ✅ / ❌ buttons for confirmations, MarkdownV2 with a plain-text
/// fallback, and an allow-list of user ids.
#[derive(Clone)]
pub struct Telegram {
    inner: Arc<Inner>,
}

struct Inner {
    bot: Bot,
    /// Kept only to take it out of error messages (request URLs hold it).
    token: String,
    allowed: HashSet<u64>,
    confirm_timeout: Duration,
    edit_interval: Duration,
    /// Confirmations waiting for a button press.
    questions: Questions,
    /// Strangers already refused once; they get no second answer.
    refused: Mutex<HashSet<u64>>,
    /// The latest command menu, and whether the token was checked so that
    /// it can be set.
    menu: LatestMenu,
    can_set_menu: AtomicBool,
    connected: watch::Sender<bool>,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telegram")
            .field("api_url", &self.inner.bot.api_url().as_str())
            .field("allowed", &self.inner.allowed)
            .finish_non_exhaustive()
    }
}

pub use ferrobot_app::Error;
use ferrobot_app::{LoadedConfig, Retry, TelegramConfig, lock};

impl Telegram {
    /// A channel for the bot with `token`, as `settings` describe.
    ///
    /// # Errors
    /// When `telegram.api_url` isn't a URL.
    pub fn new(settings: &TelegramConfig, token: &str) -> Result<Self, Error> {
        let api_url = url::Url::parse(&settings.api_url).map_err(|e| {
            Error::Config(format!(
                "telegram.api_url `{}` is not a URL ({e}); by default it is https://api.telegram.org",
                settings.api_url
            ))
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                bot: Bot::new(token).set_api_url(api_url),
                token: token.to_owned(),
                allowed: settings.allowed_user_ids.iter().copied().collect(),
                confirm_timeout: Duration::from_secs(settings.confirm_timeout_secs),
                edit_interval: Duration::from_millis(settings.edit_interval_ms),
                questions: Questions::default(),
                refused: Mutex::default(),
                menu: LatestMenu::default(),
                can_set_menu: AtomicBool::new(false),
                connected: watch::Sender::new(false),
            }),
        })
    }

    /// Waits until the bot has checked its token and is polling.
    pub async fn connected(&self) {
        let mut connected = self.inner.connected.subscribe();
        let _ = connected.wait_for(|up| *up).await;
    }
}

impl Inner {
    /// `error` as text, the token taken out.
    fn redact(&self, error: &dyn std::fmt::Display) -> String {
        error.to_string().replace(&self.token, "[token]")
    }

    fn channel_error(&self, error: &RequestError) -> ChannelError {
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
    async fn call<T, F, Fut>(&self, what: &str, request: F) -> Result<T, RequestError>
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

    fn is_allowed(&self, user: u64) -> bool {
        self.allowed.contains(&user)
    }

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

    /// Sets the `/` menu to the latest one.
    async fn set_menu(&self) {
        self.menu.send(|commands| self.send_menu(commands)).await;
    }

    /// Sets the `/` menu: `/new`, `/undo`, `/help`, then the tools Telegram can name.
    async fn send_menu(&self, commands: Vec<CommandSpec>) {
        let mut menu = vec![
            BotCommand::new("new", "Start a fresh conversation"),
            BotCommand::new("undo", "Take back your last message and its answer"),
            BotCommand::new("help", "List the commands"),
        ];
        for spec in commands {
            let valid = (1..=32).contains(&spec.name.len())
                && spec
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid || menu.iter().any(|c| c.command == spec.name) {
                tracing::info!(tool = %spec.name, "tool left out of the Telegram menu: names there are 1-32 lowercase letters, digits and _");
                continue;
            }
            let mut description: String = spec.description.chars().take(256).collect();
            if description.chars().count() < 3 {
                description = format!("Run {}", spec.name);
            }
            menu.push(BotCommand::new(&spec.name, description));
        }
        menu.truncate(100);
        if let Err(error) = self
            .call("setMyCommands", || {
                self.bot.set_my_commands(menu.clone()).send()
            })
            .await
        {
            tracing::warn!(error = %self.redact(&error), "could not publish the command menu");
        }
    }

    /// A `sendMessage` of `text` to `place` (its topic, in a forum), as a
    /// reply to the message it names, if any (sent anyway if that is gone).
    fn message(&self, place: Place, text: &str) -> JsonRequest<SendMessage> {
        let mut request = self.bot.send_message(place.chat, text);
        let payload = request.payload_mut();
        payload.message_thread_id = place.topic;
        payload.reply_parameters = place
            .reply_to
            .map(|message| ReplyParameters::new(message).allow_sending_without_reply());
        request
    }

    async fn send_plain(&self, place: Place, text: &str) -> Result<MessageId, RequestError> {
        self.call("sendMessage", || self.message(place, text).send())
            .await
            .map(|m| m.id)
    }

    /// Sends `text` as MarkdownV2, or as plain text if Telegram refuses the
    /// Markdown.
    async fn send_formatted(&self, place: Place, text: &str) -> Result<MessageId, RequestError> {
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

    async fn edit_text(
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

    /// A ✅ / ❌ press: answers the waiting confirmation if it is the asker's.
    async fn pressed(&self, query: CallbackQuery) {
        let answer = self.decide(&query);
        let acknowledged = self
            .call("answerCallbackQuery", || {
                let request = self.bot.answer_callback_query(query.id.clone());
                match &answer {
                    Some(text) => request.text(text).send(),
                    None => request.send(),
                }
            })
            .await;
        if let Err(error) = acknowledged {
            tracing::debug!(error = %self.redact(&error), "could not acknowledge a button press");
        }
    }

    /// Hands the decision to the waiting turn; returns what to tell the
    /// presser when it wasn't theirs to make.
    fn decide(&self, query: &CallbackQuery) -> Option<String> {
        let presser = query.from.id.0;
        let answered = if self.is_allowed(presser) {
            let data = query.data.as_deref().unwrap_or_default();
            // Where the question was asked, as its conversation names it.
            let chat = match &query.message {
                Some(MaybeInaccessibleMessage::Regular(message)) => Place::of(message).to_string(),
                Some(other) => other.chat().id.to_string(),
                None => String::new(),
            };
            self.questions
                .press(data, &presser.to_string(), &chat)
                .map(drop)
        } else {
            Err(Unanswered::NotTheAsker)
        };
        answered.err().map(|why| why.to_string())
    }

    async fn ask(&self, request: ConfirmRequest) -> Decision {
        let Ok(place) = Place::parse(&request.conversation) else {
            return Decision::Decline;
        };
        let question = self.questions.ask(&request);
        // Short enough to post, with room for the decision.
        let prompt = clip(&request.prompt, MESSAGE_LIMIT - 64, Length::Utf16);
        let buttons = InlineKeyboardMarkup::new([[
            InlineKeyboardButton::callback("✅ Yes", &question.yes),
            InlineKeyboardButton::callback("❌ No", &question.no),
        ]]);
        let sent = self
            .call("sendMessage", || {
                self.message(place, &prompt)
                    .reply_markup(buttons.clone())
                    .send()
            })
            .await;
        let message = match sent {
            Ok(message) => message.id,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(error = %self.redact(&error), "could not ask for confirmation; declined");
                return Decision::Decline;
            }
        };
        let decision = self.questions.wait(question, self.confirm_timeout).await;
        // The buttons go: the message now shows the decision.
        let shown = decided(&prompt, decision, self.confirm_timeout);
        if let Err(error) = self.edit_text(place.chat, message, &shown, false).await {
            tracing::debug!(error = %self.redact(&error), "could not show the decision");
        }
        decision.unwrap_or(Decision::Decline)
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

impl Channel for Telegram {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
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
        })
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
                self.inner.message(place, text).await.map(|m| m.id)
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
                match self.inner.bot.edit_message_text(chat, message, text).await {
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

/// Runs the bot the config describes until it stops: the agent (model,
/// tools, history) from `[llm]`, `[agent]`, `[history]`, `[tools]`, and
/// Telegram from `[telegram]`.
///
/// # Errors
/// [`Error::Config`] for a missing token or a bad setting,
/// [`Error::Unauthorized`] when Telegram refuses the token, [`Error::Other`]
/// when the history or tools can't be opened.
pub async fn run(loaded: &LoadedConfig) -> Result<(), Error> {
    let settings = &loaded.config.telegram;
    let token = settings.token.as_ref().ok_or_else(|| {
        Error::Config(
            "no Telegram bot token: set FERROBOT_TELEGRAM__TOKEN (or telegram.token in the config file) to the token @BotFather gave you".into(),
        )
    })?;
    let telegram = Telegram::new(settings, token.expose())?;
    // The start-up report goes to the configured chat, else to the first
    // allowed user (a private chat's id is the user's).
    let notice_to = settings
        .notify_chat_id
        .or_else(|| settings.allowed_user_ids.first().map(|&user| user as i64));
    let notice = (settings.startup_notice)
        .then_some(notice_to)
        .flatten()
        .map(|chat| {
            let telegram = telegram.clone();
            async move {
                telegram.connected().await;
                Some(chat.to_string())
            }
        });
    loaded
        .serve(Arc::new(telegram), notice)
        .await
        .map_err(|error| match error {
            ChannelError::Unauthorized => Error::Unauthorized(UNAUTHORIZED.into()),
            other => Error::Other(other.to_string()),
        })
}
