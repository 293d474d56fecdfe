//! `ferrobot-discord`: your machine's assistant on Discord.
//!
//! [`Discord`] is Discord as a [`Channel`] (twilight's gateway and REST
//! client); [`run`] builds the agent the config describes and serves it.
//! The binary is `main.rs`; the guide is `docs/discord.md`.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrobot::bot::{
    Channel, ChannelError, CommandSpec, Handler, Incoming, LatestMenu, Length, OptionKind,
    Questions, Unanswered, chat_of, decided, slash_text,
};
use ferrobot::confirm::{ConfirmRequest, Decision};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::watch;
use twilight_gateway::error::ReceiveMessageErrorType;
use twilight_gateway::{
    CloseFrame, Event, EventTypeFlags, Intents, Shard, ShardId, ShardState, StreamExt as _,
};
use twilight_http::api_error::ApiError;
use twilight_http::error::ErrorType;
use twilight_http::request::Request;
use twilight_http::routing::Route;
use twilight_http::{Client, Response};
use twilight_model::application::interaction::application_command::{
    CommandDataOption, CommandOptionValue,
};
use twilight_model::application::interaction::{Interaction, InteractionData};
use twilight_model::channel::message::{AllowedMentions, Component, MessageFlags, MessageType};
use twilight_model::http::interaction::{
    InteractionResponse, InteractionResponseData, InteractionResponseType,
};
use twilight_model::id::Id;
use twilight_model::id::marker::{ApplicationMarker, ChannelMarker, MessageMarker, UserMarker};

/// What to do when Discord refuses the token.
const UNAUTHORIZED: &str = "Discord refused the bot token: check discord.token (or FERROBOT_DISCORD__TOKEN) against the Developer Portal's Bot page, then restart";

/// Discord's limit on a message, in characters.
const MESSAGE_LIMIT: usize = 2000;

/// Interaction tokens are good for 15 minutes.
const INTERACTION_LIFETIME: Duration = Duration::from_secs(15 * 60);

const DEFAULT_API: &str = "https://discord.com";
const DEFAULT_GATEWAY: &str = "wss://gateway.discord.gg";

const REFUSAL: &str = "Sorry, this is a private bot: it only answers the people its owner allows.";

/// Discord as a [`Channel`]: direct messages and @-mentions, replies
/// streamed by editing a message, ✅ / ❌ buttons for confirmations, slash
/// commands from the tools, and allow-lists of users and servers.
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
use ferrobot_app::{DiscordConfig, LoadedConfig, Retry, lock};

/// Where a reply goes: a channel (or DM), as a reply to a message there
/// (`CHANNEL#MESSAGE`) or not, or a slash command's interaction.
enum Target {
    Channel(Id<ChannelMarker>, Option<Id<MessageMarker>>),
    /// The application the interaction was for, and its token.
    Interaction(Id<ApplicationMarker>, String),
}

const INTERACTION: &str = "interaction:";

fn target(of: &str) -> Result<Target, ChannelError> {
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

fn other(message: String) -> ChannelError {
    ChannelError::Other {
        message,
        source: None,
    }
}

/// A message addressed to the bot, from a typed event or raw JSON.
struct Said {
    /// The message's own id.
    id: u64,
    channel: u64,
    guild: Option<u64>,
    author: u64,
    from_bot: bool,
    /// Whether someone wrote it (a message or a reply), rather than Discord
    /// announcing something (a pin, a call, a member joining).
    written: bool,
    mentions_me: bool,
    content: String,
}

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
    fn redact(&self, error: &dyn std::fmt::Display) -> String {
        error.to_string().replace(&self.token, "[token]")
    }

    fn channel_error(&self, error: &twilight_http::Error) -> ChannelError {
        if matches!(error.kind(), ErrorType::Unauthorized) {
            return ChannelError::Unauthorized;
        }
        other(format!("Discord: {}", self.redact(error)))
    }

    /// Runs a request, waiting out rate limits (429 `retry_after`) and
    /// retrying network failures and server errors a few times.
    async fn call<T, F, Fut>(
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
    async fn id_of<T>(&self, response: Response<T>) -> Result<String, ChannelError> {
        let body = response
            .bytes()
            .await
            .map_err(|e| other(format!("Discord: reading a response: {e}")))?;
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
            .ok_or_else(|| other("Discord answered without an id".into()))
    }

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

    /// Registers the latest slash-command menu.
    async fn set_menu(&self, application: Id<ApplicationMarker>) {
        self.menu
            .send(|commands| self.send_menu(application, commands))
            .await;
    }

    /// Registers the slash commands: `/new`, `/undo`, `/help`, then the tools
    /// Discord can name, with typed options.
    async fn send_menu(&self, application: Id<ApplicationMarker>, specs: Vec<CommandSpec>) {
        let mut names = vec!["new".to_owned(), "undo".to_owned(), "help".to_owned()];
        let mut menu = vec![
            json!({"type": 1, "name": "new", "description": "Start a fresh conversation"}),
            json!({"type": 1, "name": "undo", "description": "Take back your last message and its answer"}),
            json!({"type": 1, "name": "help", "description": "List the commands"}),
        ];
        for spec in &specs {
            // A tool takes its arguments by their own names, so a name
            // Discord can't carry leaves the tool out of the picker (it
            // still works typed as `/name key=value`).
            let unusable = std::iter::once(&spec.name)
                .chain(spec.options.iter().map(|o| &o.name))
                .find(|name| !discord_name(name));
            if let Some(name) = unusable.or(names.contains(&spec.name).then_some(&spec.name)) {
                tracing::info!(tool = %spec.name, %name, "tool left out of the Discord commands: names there are 1-32 lowercase letters, digits, - and _, and unique");
                continue;
            }
            names.push(spec.name.clone());
            let options: Vec<Value> = spec
                .options
                .iter()
                .take(25)
                .map(|option| {
                    let kind = match option.kind {
                        OptionKind::Integer => 4,
                        OptionKind::Boolean => 5,
                        OptionKind::Number => 10,
                        _ => 3,
                    };
                    json!({
                        "type": kind,
                        "name": option.name,
                        "description": describe(&option.description, &option.name),
                        "required": option.required,
                    })
                })
                .collect();
            menu.push(json!({
                "type": 1,
                "name": spec.name,
                "description": describe(&spec.description, &spec.name),
                "options": options,
            }));
        }
        menu.truncate(100);
        let request = Request::builder(&Route::SetGlobalCommands {
            application_id: application.get(),
        })
        .json(&menu)
        .build();
        let published = match request {
            Ok(request) => self
                .call("set commands", || {
                    self.http.request::<Value>(request.clone())
                })
                .await
                .map(drop),
            Err(error) => Err(error),
        };
        if let Err(error) = published {
            tracing::warn!(error = %self.redact(&error), "could not register the slash commands");
        }
    }

    async fn post(&self, to: &str, text: &str) -> Result<String, ChannelError> {
        match target(to)? {
            Target::Channel(channel, answering) => {
                let response = self
                    .call("create message", || {
                        let message = self.http.create_message(channel).content(text);
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
                    self.edit(to, "@original", text).await?;
                    Ok("@original".into())
                } else {
                    let response = self
                        .call("create followup", || {
                            interaction
                                .create_followup(&token)
                                .content(text)
                                .into_future()
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

    async fn edit(&self, to: &str, message: &str, text: &str) -> Result<(), ChannelError> {
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
                            .into_future()
                    })
                    .await
                    .map(drop)
                }
            }
        };
        done.map_err(|e| self.channel_error(&e))
    }

    /// A message event: DMs, and channel messages that mention the bot.
    fn said(self: &Arc<Self>, said: Said, handler: &Handler) {
        let Ok(me) = self.me() else { return };
        if said.from_bot || !said.written || said.author == me.user.get() {
            return;
        }
        if said.guild.is_some() && !said.mentions_me {
            return;
        }
        if !self.admits(said.author, said.guild) {
            tracing::warn!(user_id = said.author, guild_id = ?said.guild, "refused a message from a user or server not allowed");
            if lock(&self.refused).insert(said.author) {
                let (inner, channel) = (Arc::clone(self), said.channel.to_string());
                tokio::spawn(async move {
                    let _ = inner.post(&channel, REFUSAL).await;
                });
            }
            return;
        }
        let me = me.user.get();
        let mut text = said.content;
        for mention in [format!("<@{me}>"), format!("<@!{me}>")] {
            text = text.replace(&mention, "");
        }
        let text = match text.trim() {
            // A bare mention: show what the bot can do.
            "" if said.mentions_me => "/help".to_owned(),
            // An attachment or a sticker alone, in a DM: the runtime says
            // that only text is read. (In a server it never gets here.)
            "" => String::new(),
            text => text.to_owned(),
        };
        let mut incoming = Incoming::new(said.channel.to_string(), said.author.to_string(), text);
        if said.guild.is_some() {
            // In a server the answer is a reply to the message that asked.
            incoming = incoming.reply_to(format!("{}#{}", said.channel, said.id));
        }
        tokio::spawn(handler(incoming));
    }

    /// A slash command or a button press.
    async fn interaction(self: Arc<Self>, interaction: Interaction, handler: Handler) {
        let Some(user) = interaction.author_id().map(Id::get) else {
            return;
        };
        let guild = interaction.guild_id.map(Id::get);
        let channel = channel_of(&interaction);
        // The turn a slash command starts, once Discord has its acknowledgement.
        let mut turn = None;
        let response = match &interaction.data {
            Some(InteractionData::ApplicationCommand(command)) => {
                if !self.admits(user, guild) {
                    tracing::warn!(user_id = user, guild_id = ?guild, "refused a slash command from a user or server not allowed");
                    ephemeral(REFUSAL)
                } else if let Some(channel) = channel {
                    let mut values = Vec::new();
                    flatten(&command.options, &mut values);
                    let text = slash_text(
                        &command.name,
                        values.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                    );
                    turn = Some(
                        Incoming::new(channel.to_string(), user.to_string(), text).reply_to(
                            format!(
                                "{INTERACTION}{}:{}",
                                interaction.application_id, interaction.token
                            ),
                        ),
                    );
                    // "Thinking…" until the answer fills it in.
                    InteractionResponse {
                        kind: InteractionResponseType::DeferredChannelMessageWithSource,
                        data: None,
                    }
                } else {
                    ephemeral("This command works in channels and DMs.")
                }
            }
            Some(InteractionData::MessageComponent(component)) => {
                self.pressed(&component.custom_id, user, channel)
            }
            _ => return,
        };
        // Acknowledged at once (Discord allows three seconds), and before the
        // answer, which edits this response.
        let interactions = self.http.interaction(interaction.application_id);
        let acknowledged = self
            .call("interaction response", || {
                interactions
                    .create_response(interaction.id, &interaction.token, &response)
                    .into_future()
            })
            .await;
        match acknowledged {
            Ok(_) => {
                if let Some(turn) = turn {
                    handler(turn).await;
                }
            }
            Err(error) => {
                tracing::warn!(error = %self.redact(&error), "could not answer an interaction");
            }
        }
    }

    /// A ✅ / ❌ press: answers the waiting confirmation if it is the
    /// asker's, and edits the question to show the decision.
    fn pressed(&self, custom_id: &str, presser: u64, channel: Option<u64>) -> InteractionResponse {
        let answered = if self.allowed_users.contains(&presser) {
            let channel = channel.map(|c| c.to_string()).unwrap_or_default();
            self.questions
                .press(custom_id, &presser.to_string(), &channel)
        } else {
            Err(Unanswered::NotTheAsker)
        };
        match answered {
            Ok(answered) => InteractionResponse {
                kind: InteractionResponseType::UpdateMessage,
                data: Some(InteractionResponseData {
                    content: Some(decided(
                        &clip(&answered.prompt),
                        Some(answered.decision),
                        self.confirm_timeout,
                    )),
                    components: Some(Vec::new()),
                    ..InteractionResponseData::default()
                }),
            },
            Err(why) => ephemeral(&why.to_string()),
        }
    }

    async fn ask(&self, request: ConfirmRequest) -> Decision {
        let Ok(Target::Channel(channel, _)) = target(chat_of(&request.conversation)) else {
            return Decision::Decline;
        };
        let question = self.questions.ask(&request);
        let buttons: Vec<Component> = match serde_json::from_value(json!([{
            "type": 1,
            "components": [
                {"type": 2, "style": 3, "label": "✅ Yes", "custom_id": question.yes},
                {"type": 2, "style": 4, "label": "❌ No", "custom_id": question.no},
            ],
        }])) {
            Ok(buttons) => buttons,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(%error, "could not build the confirmation buttons; declined");
                return Decision::Decline;
            }
        };
        let sent = self
            .call("create message", || {
                self.http
                    .create_message(channel)
                    .content(&clip(&request.prompt))
                    .components(&buttons)
                    .into_future()
            })
            .await;
        let message = match sent {
            Ok(response) => self.id_of(response).await,
            Err(error) => Err(self.channel_error(&error)),
        };
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(%error, "could not ask for confirmation; declined");
                return Decision::Decline;
            }
        };
        let decision = self.questions.wait(question, self.confirm_timeout).await;
        if decision.is_none() {
            // A press already showed its decision on the question; a
            // time-out is shown here, and the buttons go.
            let shown = decided(&clip(&request.prompt), None, self.confirm_timeout);
            let edited = match message.parse::<u64>().ok().and_then(Id::new_checked) {
                Some(id) => self
                    .call("update message", || {
                        self.http
                            .update_message(channel, id)
                            .content(Some(&shown))
                            .components(Some(&[]))
                            .into_future()
                    })
                    .await
                    .map(drop)
                    .map_err(|e| self.redact(&e)),
                None => Err(format!("`{message}` is not a message id")),
            };
            if let Err(error) = edited {
                tracing::debug!(%error, "could not show the time-out");
            }
        }
        decision.unwrap_or(Decision::Decline)
    }

    /// A gateway close: fatal ones end the bot with what to do.
    fn closed(&self, shard: &Shard, frame: Option<&CloseFrame<'_>>) -> Option<ChannelError> {
        let code = frame.map(|f| f.code);
        if !matches!(shard.state(), ShardState::FatallyClosed) {
            tracing::warn!(?code, "the gateway connection closed; reconnecting");
            return None;
        }
        Some(match code {
            Some(4004) => ChannelError::Unauthorized,
            Some(4014) => other(
                "Discord refused the gateway intents: this bot needs none of the privileged ones, so check the application's settings".into(),
            ),
            _ => other(format!(
                "Discord closed the gateway for good ({})",
                frame.map_or_else(|| "no reason given".into(), |f| format!("{} {}", f.code, f.reason))
            )),
        })
    }
}

/// The channel an interaction came from: the channel object newer payloads
/// carry, else the older `channel_id`.
#[allow(deprecated)]
fn channel_of(interaction: &Interaction) -> Option<u64> {
    interaction
        .channel
        .as_ref()
        .map(|c| c.id)
        .or(interaction.channel_id)
        .map(Id::get)
}

/// Whether Discord accepts `name` for a command or option.
fn discord_name(name: &str) -> bool {
    (1..=32).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_lowercase() || c.is_numeric() || c == '_' || c == '-')
}

/// A short description Discord accepts: 1-100 characters.
fn describe(description: &str, fallback: &str) -> String {
    let text = if description.trim().is_empty() {
        fallback
    } else {
        description
    };
    text.chars().take(100).collect()
}

/// A confirmation prompt short enough to post, with room for the decision.
fn clip(prompt: &str) -> String {
    ferrobot::bot::clip(prompt, MESSAGE_LIMIT - 64, Length::Chars)
}

/// A reply only the presser sees.
fn ephemeral(text: &str) -> InteractionResponse {
    InteractionResponse {
        kind: InteractionResponseType::ChannelMessageWithSource,
        data: Some(InteractionResponseData {
            content: Some(text.to_owned()),
            flags: Some(MessageFlags::EPHEMERAL),
            ..InteractionResponseData::default()
        }),
    }
}

/// A slash command's option values as text, subcommands flattened.
fn flatten(options: &[CommandDataOption], out: &mut Vec<(String, String)>) {
    for option in options {
        let value = match &option.value {
            CommandOptionValue::String(text) => text.clone(),
            CommandOptionValue::Integer(n) => n.to_string(),
            CommandOptionValue::Number(n) => n.to_string(),
            CommandOptionValue::Boolean(b) => b.to_string(),
            CommandOptionValue::SubCommand(inner) | CommandOptionValue::SubCommandGroup(inner) => {
                flatten(inner, out);
                continue;
            }
            CommandOptionValue::User(id) => id.to_string(),
            CommandOptionValue::Channel(id) => id.to_string(),
            CommandOptionValue::Role(id) => id.to_string(),
            CommandOptionValue::Mentionable(id) => id.to_string(),
            CommandOptionValue::Attachment(id) => id.to_string(),
            CommandOptionValue::Focused(text, _) => text.clone(),
        };
        out.push((option.name.clone(), value));
    }
}

/// A `MESSAGE_CREATE` twilight's types don't accept (an old payload, a
/// field Discord changed), read from its JSON.
fn lenient_said(event: &str, me: Option<Id<UserMarker>>) -> Option<Said> {
    let event: Value = serde_json::from_str(event).ok()?;
    if event.get("t")?.as_str()? != "MESSAGE_CREATE" {
        return None;
    }
    let message = event.get("d")?;
    let id = |v: &Value| v.as_str().and_then(|s| s.parse::<u64>().ok());
    let author = message.get("author")?;
    let me = me.map(Id::get);
    Some(Said {
        id: id(message.get("id")?)?,
        channel: id(message.get("channel_id")?)?,
        guild: message.get("guild_id").and_then(id),
        author: id(author.get("id")?)?,
        from_bot: author.get("bot").and_then(Value::as_bool).unwrap_or(false),
        written: message
            .get("type")
            .and_then(Value::as_u64)
            .is_none_or(|kind| kind == 0 || kind == 19),
        mentions_me: message
            .get("mentions")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|u| u.get("id").and_then(id) == me)),
        content: message.get("content")?.as_str()?.to_owned(),
    })
}

/// An `INTERACTION_CREATE` from before fields twilight requires existed
/// (`entitlements`, `authorizing_integration_owners`,
/// `attachment_size_limit`, a command's `type`, a member's `flags`): read
/// again with those filled in, and without the message a button sits on,
/// which the bot doesn't need.
fn lenient_interaction(event: &str) -> Option<Interaction> {
    let mut event: Value = serde_json::from_str(event).ok()?;
    if event.get("t")?.as_str()? != "INTERACTION_CREATE" {
        return None;
    }
    let data = event.get_mut("d")?.as_object_mut()?;
    data.entry("entitlements").or_insert_with(|| json!([]));
    data.entry("authorizing_integration_owners")
        .or_insert_with(|| json!({}));
    data.entry("attachment_size_limit")
        .or_insert_with(|| json!(0));
    data.remove("message");
    if let Some(command) = data.get_mut("data").and_then(Value::as_object_mut) {
        // Slash commands were the only kind.
        command.entry("type").or_insert_with(|| json!(1));
    }
    if let Some(member) = data.get_mut("member").and_then(Value::as_object_mut) {
        member.entry("flags").or_insert_with(|| json!(0));
    }
    serde_json::from_value(Value::Object(std::mem::take(data))).ok()
}

impl Channel for Discord {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let inner = &self.inner;
            if inner.allowed_users.is_empty() {
                tracing::warn!(
                    "discord.allowed_user_ids is empty, so everyone is refused: add your Discord user id (the bot logs yours when you write to it)"
                );
            }
            let intents = Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES;
            let mut config = twilight_gateway::ConfigBuilder::new(inner.token.clone(), intents);
            if let Some(url) = &inner.gateway_url {
                config = config.proxy_url(url.clone());
            }
            let mut shard = Shard::with_config(ShardId::ONE, config.build());
            let wanted = EventTypeFlags::READY
                | EventTypeFlags::RESUMED
                | EventTypeFlags::MESSAGE_CREATE
                | EventTypeFlags::INTERACTION_CREATE;
            while let Some(event) = shard.next_event(wanted).await {
                match event {
                    Ok(Event::Ready(ready)) => {
                        let me = Me {
                            user: ready.user.id,
                            application: ready.application.id,
                        };
                        let first = inner.me.set(me).is_ok();
                        tracing::info!(bot = %ready.user.name, "connected to Discord");
                        if first {
                            // Off the gateway loop: heartbeats and other
                            // events don't wait for the REST call.
                            let inner = Arc::clone(&self.inner);
                            tokio::spawn(async move { inner.set_menu(me.application).await });
                        }
                        inner.connected.send_replace(true);
                    }
                    Ok(Event::Resumed) => tracing::info!("resumed the Discord session"),
                    Ok(Event::MessageCreate(message)) => {
                        let me = inner.me.get().map(|m| m.user);
                        let message = message.message;
                        let said = Said {
                            id: message.id.get(),
                            channel: message.channel_id.get(),
                            guild: message.guild_id.map(Id::get),
                            author: message.author.id.get(),
                            from_bot: message.author.bot,
                            written: matches!(
                                message.kind,
                                MessageType::Regular | MessageType::Reply
                            ),
                            mentions_me: message.mentions.iter().any(|m| Some(m.id) == me),
                            content: message.content,
                        };
                        self.inner.said(said, &handler);
                    }
                    Ok(Event::InteractionCreate(interaction)) => {
                        let inner = Arc::clone(&self.inner);
                        tokio::spawn(inner.interaction((*interaction).0, Arc::clone(&handler)));
                    }
                    Ok(Event::GatewayClose(frame)) => {
                        if let Some(error) = inner.closed(&shard, frame.as_ref()) {
                            return Err(error);
                        }
                    }
                    Ok(_) => {}
                    Err(error) => match error.kind() {
                        ReceiveMessageErrorType::Deserializing { event } => {
                            let me = inner.me.get().map(|m| m.user);
                            if let Some(said) = lenient_said(event, me) {
                                self.inner.said(said, &handler);
                            } else if let Some(interaction) = lenient_interaction(event) {
                                let inner = Arc::clone(&self.inner);
                                tokio::spawn(inner.interaction(interaction, Arc::clone(&handler)));
                            } else {
                                tracing::debug!(error = %inner.redact(&error), "an event the bot doesn't read");
                            }
                        }
                        _ => {
                            tracing::warn!(error = %inner.redact(&error), "gateway error; reconnecting")
                        }
                    },
                }
            }
            Ok(())
        })
    }

    fn publish(&self, commands: Vec<CommandSpec>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.menu.set(commands);
            // Before READY names the application, the first READY registers it.
            if let Some(me) = self.inner.me.get() {
                self.inner.set_menu(me.application).await;
            }
        })
    }

    fn limit(&self) -> (usize, Length) {
        (MESSAGE_LIMIT, Length::Chars)
    }

    fn post<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        let _ = done;
        Box::pin(self.inner.post(conversation, text))
    }

    fn edit<'a>(
        &'a self,
        conversation: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = done;
        Box::pin(self.inner.edit(conversation, message, text))
    }

    fn edit_interval(&self) -> Option<Duration> {
        Some(self.inner.edit_interval)
    }

    fn typing<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // A slash command's "thinking…" shows by itself.
            let Ok(Target::Channel(channel, _)) = target(conversation) else {
                return;
            };
            if let Err(error) = self.inner.http.create_typing_trigger(channel).await {
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
