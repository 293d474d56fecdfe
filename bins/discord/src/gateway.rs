//! The gateway connection: `Discord::receive` reads its events and hands
//! messages addressed to the bot (`Said`) to the handler, their attachments
//! fetched or named by `files`, and interactions to `interaction`; payloads
//! twilight's types refuse are read leniently, and a close Discord means for
//! good ends the bot.

use std::sync::Arc;

use ferrobot::bot::{ChannelError, Handler, Incoming};
use ferrobot_app::lock;
use serde_json::{Value, json};
use twilight_gateway::error::ReceiveMessageErrorType;
use twilight_gateway::{
    CloseFrame, Event, EventTypeFlags, Intents, Shard, ShardId, ShardState, StreamExt as _,
};
use twilight_model::application::interaction::Interaction;
use twilight_model::channel::message::MessageType;
use twilight_model::id::Id;
use twilight_model::id::marker::UserMarker;

use crate::files::Attached;
use crate::rest::other;
use crate::{Discord, Inner, Me, REFUSAL};

impl Discord {
    /// Connects to the gateway and serves its events until it closes for
    /// good.
    pub(crate) async fn receive(&self, handler: Handler) -> Result<(), ChannelError> {
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
                        name: Some(
                            message
                                .author
                                .global_name
                                .clone()
                                .unwrap_or_else(|| message.author.name.clone()),
                        ),
                        from_bot: message.author.bot,
                        written: matches!(message.kind, MessageType::Regular | MessageType::Reply),
                        mentions_me: message.mentions.iter().any(|m| Some(m.id) == me),
                        content: message.content,
                        files: message
                            .attachments
                            .into_iter()
                            .map(Attached::from)
                            .collect(),
                        stickers: message.sticker_items.len(),
                    };
                    self.inner.said(said, &handler);
                }
                Ok(Event::InteractionCreate(interaction)) => {
                    let inner = Arc::clone(&self.inner);
                    tokio::spawn(inner.interaction((*interaction).0, handler.clone()));
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
                            tokio::spawn(inner.interaction(interaction, handler.clone()));
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
    }
}

/// A message addressed to the bot, from a typed event or raw JSON.
struct Said {
    /// The message's own id.
    id: u64,
    channel: u64,
    guild: Option<u64>,
    author: u64,
    /// The author's display name, else user name.
    name: Option<String>,
    from_bot: bool,
    /// Whether someone wrote it (a message or a reply), rather than Discord
    /// announcing something (a pin, a call, a member joining).
    written: bool,
    mentions_me: bool,
    content: String,
    files: Vec<Attached>,
    stickers: usize,
}

impl Inner {
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
                    let _ = inner.post(&channel, REFUSAL, true).await;
                });
            }
            return;
        }
        let me = me.user.get();
        let mut text = said.content;
        for mention in [format!("<@{me}>"), format!("<@!{me}>")] {
            text = text.replace(&mention, "");
        }
        let nothing_else = said.files.is_empty() && said.stickers == 0;
        let text = match text.trim() {
            // A bare mention: show what the bot can do.
            "" if said.mentions_me && nothing_else => "/help".to_owned(),
            // Attachments or a sticker alone: the images go to the model
            // and the runtime names the rest. (In a server they come only
            // with a mention.)
            "" => String::new(),
            text => text.to_owned(),
        };
        let mut incoming = Incoming::new(said.channel.to_string(), said.author.to_string(), text);
        if let Some(name) = said.name {
            incoming = incoming.name(name);
        }
        if said.guild.is_some() {
            // In a server the answer is a reply to the message that asked.
            incoming = incoming.reply_to(format!("{}#{}", said.channel, said.id));
        }
        // Journaled under the message's id (a snowflake, unique across
        // Discord): the gateway may deliver it again after a resume.
        let incoming = incoming.id(format!("discord:{}", said.id));
        let (inner, handler) = (Arc::clone(self), handler.clone());
        tokio::spawn(async move {
            let incoming = inner.files(incoming, said.files, said.stickers).await;
            handler.answer(incoming).await;
        });
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
        name: ["global_name", "username"]
            .iter()
            .find_map(|key| author.get(key)?.as_str())
            .map(str::to_owned),
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
        files: message
            .get("attachments")
            .and_then(Value::as_array)
            .map(|files| files.iter().filter_map(Attached::of_raw).collect())
            .unwrap_or_default(),
        stickers: message
            .get("sticker_items")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
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
