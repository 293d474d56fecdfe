//! The `/` command menu: the built-ins and the tools Telegram can name, set
//! once the token is checked and again when the tools change.

use ferrobot::bot::CommandSpec;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::BotCommand;

use crate::Inner;

impl Inner {
    /// Sets the `/` menu to the latest one.
    pub(crate) async fn set_menu(&self) {
        self.menu.send(|commands| self.send_menu(commands)).await;
    }

    /// Sets the `/` menu: the built-ins (`/new`, `/undo`, `/help`, which
    /// `serve` puts first), then the tools Telegram can name.
    async fn send_menu(&self, commands: Vec<CommandSpec>) {
        let mut menu: Vec<BotCommand> = Vec::new();
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
}
