//! Slash commands and button presses: `Inner::interaction` acknowledges
//! each at once, then runs the command's turn (a Stop press's `/stop`) or
//! answers the press.

use std::sync::Arc;

use ferrobot::bot::{Handler, Incoming, STOP_DATA, slash_text, stop_pressed};
use twilight_model::application::interaction::application_command::{
    CommandDataOption, CommandOptionValue,
};
use twilight_model::application::interaction::{Interaction, InteractionData};
use twilight_model::channel::message::MessageFlags;
use twilight_model::http::interaction::{
    InteractionResponse, InteractionResponseData, InteractionResponseType,
};
use twilight_model::id::Id;

use crate::rest::INTERACTION;
use crate::{Inner, REFUSAL};

impl Inner {
    /// A slash command or a button press.
    pub(crate) async fn interaction(self: Arc<Self>, interaction: Interaction, handler: Handler) {
        let Some(user) = interaction.author_id().map(Id::get) else {
            return;
        };
        let guild = interaction.guild_id.map(Id::get);
        let channel = channel_of(&interaction);
        // The turn a slash command or a Stop press starts, once Discord has
        // its acknowledgement.
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
            // The Stop button under a reply being written: `/stop` from the
            // presser, in the channel it was pressed in, so the agent answers
            // it as the built-in. The message it is on is left as it is: the
            // stopped reply's last edit takes the button away.
            Some(InteractionData::MessageComponent(component))
                if component.custom_id == STOP_DATA =>
            {
                let stop = stop_pressed(
                    channel.map(|c| c.to_string()).unwrap_or_default(),
                    user.to_string(),
                    self.admits(user, guild),
                );
                match stop {
                    Err(refused) => {
                        tracing::warn!(user_id = user, guild_id = ?guild, "refused a Stop press from a user or server not allowed");
                        ephemeral(&refused.to_string())
                    }
                    // A button sits on a message in a channel; without one
                    // there is no turn to name.
                    Ok(stop) if stop.conversation.is_empty() => {
                        ephemeral("This button works in channels and DMs.")
                    }
                    Ok(stop) => {
                        turn = Some(stop);
                        // Acknowledged without changing the message.
                        InteractionResponse {
                            kind: InteractionResponseType::DeferredUpdateMessage,
                            data: None,
                        }
                    }
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
                    handler.answer(turn).await;
                }
            }
            Err(error) => {
                tracing::warn!(error = %self.redact(&error), "could not answer an interaction");
            }
        }
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

/// A reply only the presser sees.
pub(crate) fn ephemeral(text: &str) -> InteractionResponse {
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
