//! `ferrobot-telegram`: your machine's assistant on Telegram.
//!
//! [`Telegram`] is the Telegram Bot API as a [`Channel`] (long polling with
//! teloxide); [`run`] builds the agent the config describes and serves it.
//! The binary is `main.rs`; the guide is `docs/telegram.md`.
//!
//! The crate root holds `Telegram`, its settings and [`run`]; the rest is
//! one module per job:
//! - `channel`: the `Channel` impl, handing each call to the modules below;
//! - `updates`: long polling: the token checked, each update turned into a
//!   turn, a button press or nothing;
//! - `webhook`: webhook mode: the endpoint Telegram posts updates to, for
//!   several replicas behind a load balancer;
//! - `files`: a message's photos and files: images downloaded for the model,
//!   the rest named for the user;
//! - `confirm`: ✅ / ❌ questions, asked and answered;
//! - `menu`: the `/` command menu set from the tools, shown to the allowed users only;
//! - `api`: Bot API calls with their retries, and sending and editing
//!   messages (MarkdownV2, with a plain-text fallback);
//! - `place`: where a message goes (a chat, a forum topic, a reply);
//! - `markdown`: the model's Markdown as MarkdownV2.
//!
//! [`Channel`]: ferrobot::bot::Channel

mod api;
mod channel;
mod confirm;
mod files;
#[doc(hidden)]
pub mod markdown;
mod menu;
mod place;
mod updates;

#[doc(hidden)]
pub use updates::read_update;
mod webhook;

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::bot::{ChannelError, LatestMenu, Questions};
use teloxide::Bot;
use tokio::sync::watch;
use url::Url;

/// What to do when Telegram refuses the token.
const UNAUTHORIZED: &str = "Telegram refused the bot token: check telegram.token (or FERROBOT_TELEGRAM__TOKEN) against @BotFather's /mybots, then restart";

/// Telegram's limit on a message, in UTF-16 code units.
const MESSAGE_LIMIT: usize = 4096;

const REFUSAL: &str = "Sorry, this is a private bot: it only answers the people its owner allows.";

/// Telegram as a [`Channel`]: long polling or a webhook, replies streamed by editing a
/// message, ✅ / ❌ buttons for confirmations, MarkdownV2 with a plain-text
/// fallback, and an allow-list of user ids.
///
/// [`Channel`]: ferrobot::bot::Channel
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
    /// Where the menu is shown (`menu.rs`).
    menu_scopes: Mutex<HashSet<menu::MenuScope>>,
    /// Whether the menu an older version showed everyone is taken down.
    default_menu_cleared: AtomicBool,
    connected: watch::Sender<bool>,
    /// Webhook mode's endpoint; `None` polls.
    webhook: Option<webhook::Webhook>,
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
use ferrobot_app::{LoadedConfig, TelegramConfig};

impl Telegram {
    /// A channel for the bot with `token`, as `settings` describe.
    ///
    /// # Errors
    /// When `telegram.api_url` isn't a URL.
    pub fn new(settings: &TelegramConfig, token: &str) -> Result<Self, Error> {
        let api_url = Url::parse(&settings.api_url).map_err(|e| {
            Error::Config(format!(
                "telegram.api_url `{}` is not a URL ({e}); by default it is https://api.telegram.org",
                settings.api_url
            ))
        })?;
        let webhook = match &settings.webhook_url {
            None => None,
            Some(url) => Some(webhook::Webhook {
                url: Url::parse(url).map_err(|e| {
                    Error::Config(format!("telegram.webhook_url `{url}` is not a URL ({e})"))
                })?,
                listen: settings.webhook_listen.parse().map_err(|e| {
                    Error::Config(format!(
                        "telegram.webhook_listen `{}` is not an address and port ({e})",
                        settings.webhook_listen
                    ))
                })?,
                secret: settings.webhook_secret.clone().ok_or_else(|| {
                    Error::Config("telegram.webhook_url needs telegram.webhook_secret".into())
                })?,
            }),
        };
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
                menu_scopes: Mutex::new(
                    settings
                        .allowed_user_ids
                        .iter()
                        .map(|&user| (teloxide::types::ChatId(user as i64), user))
                        .collect(),
                ),
                default_menu_cleared: AtomicBool::new(false),
                connected: watch::Sender::new(false),
                webhook,
            }),
        })
    }

    /// Waits until the bot has checked its token and is polling (or its
    /// webhook is set).
    pub async fn connected(&self) {
        let mut connected = self.inner.connected.subscribe();
        let _ = connected.wait_for(|up| *up).await;
    }
}

impl Inner {
    fn is_allowed(&self, user: u64) -> bool {
        self.allowed.contains(&user)
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
