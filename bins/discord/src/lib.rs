//! `ferrobot-discord`: your machine's assistant on Discord.
//!
//! [`Discord`] is Discord as a [`Channel`] (twilight's gateway and REST
//! client); [`run`] builds the agent the config describes and serves it.
//! The binary is `main.rs`; the guide is `docs/discord.md`.
//!
//! The crate root holds `Discord`, its settings and [`run`]; the rest is
//! one module per job:
//! - `channel`: the `Channel` impl, handing each call to the modules below;
//! - `gateway`: the gateway connection: events in, messages addressed to the
//!   bot, payloads twilight won't read, closes;
//! - `files`: a message's attachments: images downloaded for the model, the
//!   rest named for the user;
//! - `interaction`: slash commands and button presses as Discord delivers them;
//! - `confirm`: ✅ / ❌ questions, asked and answered;
//! - `menu`: the slash-command menu registered from the tools;
//! - `rest`: REST calls with their retries, and where a reply goes (posting
//!   and editing).

mod channel;
mod confirm;
mod files;
mod gateway;
mod interaction;
mod menu;
mod rest;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrobot::bot::{ChannelError, LatestMenu, Questions};
use tokio::sync::watch;
use twilight_http::Client;
use twilight_model::channel::message::AllowedMentions;
use twilight_model::id::Id;
use twilight_model::id::marker::{ApplicationMarker, UserMarker};

use crate::rest::other;

/// What to do when Discord refuses the token.
const UNAUTHORIZED: &str = "Discord refused the bot token: check discord.token (or FERROBOT_DISCORD__TOKEN) against the Developer Portal's Bot page, then restart";

/// Discord's limit on a message, in characters.
const MESSAGE_LIMIT: usize = 2000;

const DEFAULT_API: &str = "https://discord.com";
const DEFAULT_GATEWAY: &str = "wss://gateway.discord.gg";

const REFUSAL: &str = "Sorry, this is a private bot: it only answers the people its owner allows.";

/// Discord as a [`Channel`]: direct messages and @-mentions, replies
/// streamed by editing a message, ✅ / ❌ buttons for confirmations, slash
/// commands from the tools, and allow-lists of users and servers.
///
/// [`Channel`]: ferrobot::bot::Channel
#[derive(Clone)]
pub struct Discord {
    inner: Arc<Inner>,
}

struct Inner {
    http: Client,
    /// Kept only to take it out of error messages.
    token: String,
    gateway_url: Option<String>,
    allowed_users: HashSet<u64>,
    allowed_guilds: HashSet<u64>,
    confirm_timeout: Duration,
    edit_interval: Duration,
    /// Confirmations waiting for a button press.
    questions: Questions,
    /// Strangers already refused once; they get no second answer.
    refused: Mutex<HashSet<u64>>,
    /// Who the bot is, from READY.
    me: OnceLock<Me>,
    /// The latest slash-command menu, registered once READY names the
    /// application.
    menu: LatestMenu,
    /// Interactions whose deferred response was filled in, and when they came.
    answered: Mutex<HashMap<String, Instant>>,
    connected: watch::Sender<bool>,
}

#[derive(Clone, Copy)]
struct Me {
    user: Id<UserMarker>,
    application: Id<ApplicationMarker>,
}

impl std::fmt::Debug for Discord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discord")
            .field("gateway_url", &self.inner.gateway_url)
            .field("allowed_users", &self.inner.allowed_users)
            .finish_non_exhaustive()
    }
}

pub use ferrobot_app::Error;
use ferrobot_app::{DiscordConfig, LoadedConfig};

impl Discord {
    /// A channel for the bot with `token`, as `settings` describe.
    ///
    /// # Errors
    /// When `discord.api_url` or `discord.gateway_url` can't be used.
    pub fn new(settings: &DiscordConfig, token: &str) -> Result<Self, Error> {
        // Nothing the bot posts pings anyone: a model or a tool writing
        // `@everyone` or a role mention shows it as text.
        let mut http = Client::builder()
            .default_allowed_mentions(AllowedMentions::default())
            .token(token.to_owned())
            .timeout(Duration::from_secs(15));
        let api = settings.api_url.trim_end_matches('/');
        if api != DEFAULT_API {
            let (use_http, host) = match api.split_once("://") {
                Some(("http", host)) => (true, host),
                Some(("https", host)) => (false, host),
                _ => {
                    return Err(Error::Config(format!(
                        "discord.api_url `{api}` must be an http:// or https:// URL; by default it is {DEFAULT_API}"
                    )));
                }
            };
            http = http.proxy(host.to_owned(), use_http);
        }
        let gateway = settings.gateway_url.trim_end_matches('/');
        Ok(Self {
            inner: Arc::new(Inner {
                http: http.build(),
                token: token.to_owned(),
                gateway_url: (gateway != DEFAULT_GATEWAY).then(|| gateway.to_owned()),
                allowed_users: settings.allowed_user_ids.iter().copied().collect(),
                allowed_guilds: settings.allowed_guild_ids.iter().copied().collect(),
                confirm_timeout: Duration::from_secs(settings.confirm_timeout_secs),
                edit_interval: Duration::from_millis(settings.edit_interval_ms),
                questions: Questions::default(),
                refused: Mutex::default(),
                me: OnceLock::new(),
                menu: LatestMenu::default(),
                answered: Mutex::default(),
                connected: watch::Sender::new(false),
            }),
        })
    }

    /// Waits until the gateway session is ready.
    pub async fn connected(&self) {
        let mut connected = self.inner.connected.subscribe();
        let _ = connected.wait_for(|up| *up).await;
    }

    /// A DM channel with `user`, for the start-up notice.
    ///
    /// # Errors
    /// When Discord refuses to open it.
    pub async fn dm_channel(&self, user: u64) -> Result<String, ChannelError> {
        let user = Id::new_checked(user).ok_or_else(|| other("user id 0".into()))?;
        let inner = &self.inner;
        let response = inner
            .call("create DM", || {
                inner.http.create_private_channel(user).into_future()
            })
            .await
            .map_err(|e| inner.channel_error(&e))?;
        inner.id_of(response).await
    }
}

impl Inner {
    fn me(&self) -> Result<Me, ChannelError> {
        self.me
            .get()
            .copied()
            .ok_or_else(|| other("not connected to Discord yet".into()))
    }

    fn admits(&self, user: u64, guild: Option<u64>) -> bool {
        self.allowed_users.contains(&user)
            && guild
                .is_none_or(|g| self.allowed_guilds.is_empty() || self.allowed_guilds.contains(&g))
    }
}

/// Runs the bot the config describes until it stops: the agent (model,
/// tools, history) from `[llm]`, `[agent]`, `[history]`, `[tools]`, and
/// Discord from `[discord]`.
///
/// # Errors
/// [`Error::Config`] for a missing token or a bad setting,
/// [`Error::Unauthorized`] when Discord refuses the token, [`Error::Other`]
/// when the history or tools can't be opened or the gateway closes for good.
pub async fn run(loaded: &LoadedConfig) -> Result<(), Error> {
    // The gateway's and the REST client's TLS need a crypto provider; ring
    // is the one the rest of ferrobot uses. (Already installed is fine.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = &loaded.config.discord;
    let token = settings.token.as_ref().ok_or_else(|| {
        Error::Config(
            "no Discord bot token: set FERROBOT_DISCORD__TOKEN (or discord.token in the config file) to the token from the Developer Portal's Bot page".into(),
        )
    })?;
    let discord = Discord::new(settings, token.expose())?;
    // The start-up report goes to the configured channel, else to a DM with
    // the first allowed user.
    let (to_channel, to_user) = (
        settings.notify_channel_id,
        settings.allowed_user_ids.first().copied(),
    );
    let notice = settings.startup_notice.then(|| {
        let discord = discord.clone();
        async move {
            discord.connected().await;
            match (to_channel, to_user) {
                (Some(channel), _) => Some(channel.to_string()),
                (None, Some(user)) => match discord.dm_channel(user).await {
                    Ok(dm) => Some(dm),
                    Err(error) => {
                        tracing::warn!(%error, "could not open a DM for the start-up notice");
                        None
                    }
                },
                (None, None) => None,
            }
        }
    });
    loaded
        .serve(Arc::new(discord), notice)
        .await
        .map_err(|error| match error {
            ChannelError::Unauthorized => Error::Unauthorized(UNAUTHORIZED.into()),
            other => Error::Other(other.to_string()),
        })
}
