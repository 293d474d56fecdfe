//! The `/` command menu: the built-ins and the tools Telegram can name,
//! shown only to the allowed users — in their private chats, and in each
//! group where they have written to the bot — never in Telegram's default
//! scope, which would show every stranger the tools' names. Set once the
//! token is checked and again when the tools change.

use ferrobot::bot::CommandSpec;
use teloxide::payloads::SetMyCommandsSetters as _;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::{BotCommand, BotCommandScope, ChatId, Recipient, UserId};

use crate::Inner;

/// Where the menu is shown: an allowed user, in a chat (their private
/// chat's id is their own).
pub(crate) type MenuScope = (ChatId, u64);

impl Inner {
    /// Sets the latest menu for everyone allowed, where they have been
    /// seen; the first time, also takes down a menu an older version set
    /// for everybody.
    pub(crate) async fn set_menu(&self) {
        self.menu
            .send(|commands| async move {
                let menu = menu_of(commands);
                let cleared = &self.default_menu_cleared;
                if !cleared.swap(true, std::sync::atomic::Ordering::SeqCst)
                    && let Err(error) = self
                        .call("deleteMyCommands", || self.bot.delete_my_commands().send())
                        .await
                {
                    // Tried again with the next menu (the tools changing).
                    cleared.store(false, std::sync::atomic::Ordering::SeqCst);
                    tracing::warn!(error = %self.redact(&error), "could not take down the menu shown to everyone");
                }
                let scopes: Vec<MenuScope> =
                    ferrobot_app::lock(&self.menu_scopes).iter().copied().collect();
                for scope in scopes {
                    self.send_menu_to(scope, &menu).await;
                }
            })
            .await;
    }

    /// Shows the menu to an allowed `user` in `chat` as well, the first time
    /// they write there (at once: the menu's first setting comes later and
    /// covers it).
    pub(crate) fn show_menu_to(self: &std::sync::Arc<Self>, chat: ChatId, user: u64) {
        if !ferrobot_app::lock(&self.menu_scopes).insert((chat, user))
            || !self.can_set_menu.load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let inner = std::sync::Arc::clone(self);
        tokio::spawn(async move {
            let inner = &inner;
            (inner.menu)
                .send(|commands| async move {
                    inner.send_menu_to((chat, user), &menu_of(commands)).await;
                })
                .await;
        });
    }

    /// Sets `menu` for one scope. When Telegram refuses (a user who has
    /// never opened the bot has no private chat yet), the scope is tried
    /// again the next time they write.
    async fn send_menu_to(&self, (chat, user): MenuScope, menu: &[BotCommand]) {
        let scope = if chat.0 == user as i64 {
            BotCommandScope::Chat {
                chat_id: Recipient::Id(chat),
            }
        } else {
            BotCommandScope::ChatMember {
                chat_id: Recipient::Id(chat),
                user_id: UserId(user),
            }
        };
        let set = self
            .call("setMyCommands", || {
                self.bot
                    .set_my_commands(menu.to_vec())
                    .scope(scope.clone())
                    .send()
            })
            .await;
        if let Err(error) = set {
            tracing::info!(user_id = user, chat_id = chat.0, error = %self.redact(&error), "could not set the command menu for this user here (one who has never opened the bot has no chat with it yet); trying again when they write");
            ferrobot_app::lock(&self.menu_scopes).remove(&(chat, user));
        }
    }
}

/// The menu Telegram can show: the built-ins (`/new`, `/undo`, `/help`,
/// which `serve` puts first), then the tools it can name.
fn menu_of(commands: Vec<CommandSpec>) -> Vec<BotCommand> {
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
    menu
}
