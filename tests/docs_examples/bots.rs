//! The examples of `docs/bots.md` (feature `bot`).

use std::sync::{Arc, Mutex};

use ferrobot::bot::{Channel, ChannelError, Handler, Incoming, serve};
use ferrobot::{Agent, testing::MockProvider};
use futures_util::future::BoxFuture;

/// Delivers a script of messages and keeps what the bot posts.
#[derive(Default)]
pub struct Scripted {
    pub script: Vec<Incoming>,
    pub posted: Mutex<Vec<(String, String)>>,
}

impl Channel for Scripted {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            for message in &self.script {
                handler.answer(message.clone()).await;
            }
            Ok(())
        })
    }

    fn post<'a>(&'a self, chat: &'a str, text: &'a str, _done: bool) -> BoxFuture<'a, Result<String, ChannelError>> {
        let mut posted = self.posted.lock().unwrap();
        posted.push((chat.to_owned(), text.to_owned()));
        let id = posted.len().to_string();
        Box::pin(async move { Ok(id) })
    }
}

#[tokio::test]
async fn the_bot_answers_in_the_chat_it_was_asked_in() {
    let channel = Arc::new(Scripted {
        script: vec![Incoming::new("chat-1", "ann", "hello")],
        ..Scripted::default()
    });
    let agent = Agent::builder().provider(MockProvider::replying("Hi Ann!")).build();
    serve(agent, channel.clone()).await.unwrap();
    assert_eq!(*channel.posted.lock().unwrap(), [("chat-1".to_owned(), "Hi Ann!".to_owned())]);
}
