//! `Discord` as a [`Channel`]: each call handed to the module that does it
//! (`gateway`, `menu`, `rest`, `confirm`).

use std::sync::Arc;
use std::time::Duration;

use ferrobot::bot::{Channel, ChannelError, CommandSpec, Handler, Length};
use ferrobot::confirm::{ConfirmRequest, Decision};
use futures_util::future::BoxFuture;

use crate::rest::{Target, target};
use crate::{Discord, MESSAGE_LIMIT};

impl Channel for Discord {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.receive(handler))
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
        Box::pin(self.inner.post(conversation, text, done))
    }

    fn edit<'a>(
        &'a self,
        conversation: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.inner.edit(conversation, message, text, done))
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
