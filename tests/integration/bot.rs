//! The shared bot runtime: a channel joined to an agent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::bot::{
    Channel, ChannelConfirm, ChannelError, ChannelNotifier, Handler, Incoming, serve,
};
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::provider::ProviderError;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

/// A channel that delivers a fixed list of messages and records what the
/// bot sends and asks.
#[derive(Default)]
struct FakeChannel {
    incoming: Vec<Incoming>,
    sent: Mutex<Vec<(String, String)>>,
    asked: Mutex<Vec<String>>,
    approve: bool,
    edit_interval: Option<Duration>,
    log: Mutex<Vec<String>>,
}

impl FakeChannel {
    fn log(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

fn state(done: bool) -> &'static str {
    if done { "done" } else { "draft" }
}

impl Channel for FakeChannel {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            for message in &self.incoming {
                handler.answer(message.clone()).await;
            }
            // Let later messages (notify_later) arrive.
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(())
        })
    }

    fn post<'a>(
        &'a self,
        conversation: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        let mut sent = self.sent.lock().unwrap();
        sent.push((conversation.to_owned(), text.to_owned()));
        self.log(format!(
            "post {conversation} #{} {}: {text}",
            sent.len(),
            state(done)
        ));
        let id = sent.len().to_string();
        Box::pin(async move { Ok(id) })
    }

    fn edit<'a>(
        &'a self,
        conversation: &'a str,
        message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        self.log(format!(
            "edit {conversation} #{message} {}: {text}",
            state(done)
        ));
        Box::pin(async { Ok(()) })
    }

    fn edit_interval(&self) -> Option<Duration> {
        self.edit_interval
    }

    fn typing<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, ()> {
        self.log(format!("typing {conversation}"));
        Box::pin(async {})
    }

    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        self.log(format!(
            "confirm {} from {:?}: {}",
            request.conversation, request.user, request.prompt
        ));
        self.asked.lock().unwrap().push(request.prompt);
        let approve = self.approve;
        Box::pin(async move { approve.into() })
    }
}

#[tokio::test(start_paused = true)]
async fn a_channel_gets_replies_confirmations_errors_and_later_messages() {
    let channel = Arc::new(FakeChannel {
        incoming: vec![
            Incoming::new("chat-1", "ann", "reboot please"),
            Incoming::new("chat-2", "bob", "/ping"),
            Incoming::new("chat-1", "ann", "and now?"),
        ],
        approve: true,
        ..FakeChannel::default()
    });
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Rebooting soon."))
        .then(MockTurn::failing(ProviderError::Status {
            status: 503,
            message: "loading".into(),
            retry_after: None,
        }));
    let reboot = from_fn("reboot", "Reboot.", |_: Value, ctx| async move {
        ctx.notify_later("Rebooting now.", Duration::from_millis(10))
            .await
            .map(|()| "scheduled")
    })
    .confirm("Reboot this machine?");
    let ping = from_fn("ping", "Ping.", |_: Value, _| async { "pong" });
    let dyn_channel: Arc<dyn Channel> = channel.clone();
    let agent = Agent::builder()
        .provider(mock)
        .tool(reboot)
        .tool(ping)
        .confirm(ChannelConfirm(dyn_channel.clone()))
        .notifier(ChannelNotifier(dyn_channel.clone()))
        .build();
    serve(agent, dyn_channel).await.unwrap();
    // The later message arrives whenever its delay is up: compare in order
    // of conversation and text.
    let mut sent = channel.sent.lock().unwrap().clone();
    sent.sort();
    let mut expected = vec![
        ("chat-1".to_owned(), "Rebooting soon.".to_owned()),
        ("chat-1".to_owned(), "Rebooting now.".to_owned()),
        // A slash command's tool output, shown verbatim.
        ("chat-2".to_owned(), "```\npong\n```".to_owned()),
        (
            "chat-1".to_owned(),
            "LLM unavailable: server answered 503: loading — slash commands still work".to_owned(),
        ),
    ];
    expected.sort();
    assert_eq!(sent, expected);
    assert_eq!(*channel.asked.lock().unwrap(), ["Reboot this machine?"]);
}

// Real time, not paused: with the clock paused the text before the tool
// call is posted as a draft and then finished, not posted finished.
#[tokio::test]
async fn a_reply_streams_into_one_message_and_new_starts_afresh() {
    let channel = Arc::new(FakeChannel {
        incoming: vec![
            Incoming::new("chat-1", "ann", "reboot please"),
            Incoming::new("chat-1", "ann", "/new"),
            Incoming::new("chat-1", "ann", "hello again"),
        ],
        approve: true,
        edit_interval: Some(Duration::from_millis(20)),
        ..FakeChannel::default()
    });
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .text("Rebooting.")
                .tool_call("reboot", json!({})),
        )
        .then(
            MockTurn::new()
                .text("Done: the machine will restart shortly.")
                .chunked(8)
                .delay(Duration::from_millis(60)),
        )
        .then(MockTurn::new().text("Hi!"));
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "scheduled" })
        .confirm("Reboot this machine?");
    let dyn_channel: Arc<dyn Channel> = channel.clone();
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(reboot)
        .confirm(ChannelConfirm(dyn_channel.clone()))
        .build();
    serve(agent.clone(), dyn_channel).await.unwrap();
    let log = channel.log.lock().unwrap().clone();
    let position = |line: &str| {
        log.iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("no `{line}` in {log:#?}"))
    };
    // The text before the tool call is finished on its own (the prompt may
    // overtake it: the agent doesn't wait for the chat), the prompt names the
    // user who asked, and the answer is a new message, edited as it streams.
    position("post chat-1 #1 done: Rebooting.");
    let asked = position("confirm chat-1 from Some(\"ann\"): Reboot this machine?");
    // (How much of the answer the first draft shows depends on timing.)
    let answer = log
        .iter()
        .position(|l| l.starts_with("post chat-1 #2 draft: Done:"))
        .unwrap_or_else(|| panic!("no first draft in {log:#?}"));
    let answer_done = position("edit chat-1 #2 done: Done: the machine will restart shortly.");
    position("typing chat-1");
    assert!(asked < answer && answer < answer_done, "{log:#?}");
    let drafts = log[answer..answer_done]
        .iter()
        .filter(|l| l.starts_with("edit chat-1 #2 draft"))
        .count();
    assert!(
        drafts >= 1,
        "the answer is edited while it streams: {log:#?}"
    );
    position(
        "post chat-1 #3 done: Started a fresh conversation. The earlier one is kept in the history.",
    );
    // After /new the model sees only the new message.
    let last = mock.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 1, "{:?}", last.messages);
    let conversations = agent.history().list().await.unwrap();
    assert_eq!(conversations.len(), 2);
    assert!(conversations.iter().any(|c| c.id.starts_with("chat-1~")));
}

/// A channel that stays connected until told to stop, and keeps every menu
/// it is given.
#[derive(Default)]
struct MenuChannel {
    menus: Mutex<Vec<Vec<String>>>,
    stop: tokio::sync::Notify,
}

impl Channel for MenuChannel {
    fn start(&self, _: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.stop.notified().await;
            Ok(())
        })
    }

    /// Keeps the tools' names; the built-ins must come first, every time.
    fn publish(&self, commands: Vec<ferrobot::bot::CommandSpec>) -> BoxFuture<'_, ()> {
        let builtins: Vec<_> = commands.iter().map_while(|c| c.builtin).collect();
        assert_eq!(builtins, ferrobot::agent::Builtin::ALL, "{commands:?}");
        let names = commands
            .into_iter()
            .filter(|c| c.builtin.is_none())
            .map(|c| c.name)
            .collect();
        self.menus.lock().unwrap().push(names);
        Box::pin(async {})
    }

    fn post<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async { Ok("1".to_owned()) })
    }
}

#[tokio::test(start_paused = true)]
async fn the_command_menu_follows_the_tools_once_they_settle() {
    let channel = Arc::new(MenuChannel::default());
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(from_fn("uptime", "Uptime.", |_: Value, _| async {
            "1 day"
        }))
        .build();
    let running = tokio::spawn(serve(agent.clone(), channel.clone()));
    let menus = || channel.menus.lock().unwrap().clone();
    let wait_for = |count: usize| async move {
        for _ in 0..100 {
            if menus().len() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{count} menus expected: {:?}", menus());
    };
    wait_for(1).await;
    assert_eq!(menus(), [["uptime"]], "published before connecting");
    // A tools file reloaded tool by tool is published once, whole.
    agent.tools().unregister("uptime");
    agent
        .tools()
        .register(from_fn("uptime", "Uptime.", |_: Value, _| async {
            "1 day"
        }));
    agent
        .tools()
        .register(from_fn("reboot", "Reboot.", |_: Value, _| async { "" }));
    wait_for(2).await;
    agent.tools().set_enabled("uptime", false);
    wait_for(3).await;
    // Switching a tool off and on again before it settles changes nothing.
    agent.tools().set_enabled("reboot", false);
    agent.tools().set_enabled("reboot", true);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        menus(),
        [vec!["uptime"], vec!["uptime", "reboot"], vec!["reboot"]]
    );
    channel.stop.notify_one();
    running.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_message_with_nothing_to_read_is_told_what_is_read() {
    let channel = Arc::new(FakeChannel {
        incoming: vec![
            Incoming::new("chat-1", "ann", ""),
            Incoming::new("chat-2", "bob", "").unread("voice note (audio/ogg)"),
        ],
        ..FakeChannel::default()
    });
    let mock = MockProvider::replying("unused");
    let agent = Agent::builder().provider(mock.clone()).build();
    serve(agent, channel.clone()).await.unwrap();
    let mut sent = channel.sent.lock().unwrap().clone();
    sent.sort();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0].0, "chat-1");
    assert!(sent[0].1.starts_with("I read text and images"), "{sent:?}");
    assert_eq!(
        sent[1].1,
        "This didn't reach me: voice note (audio/ogg). I read text and images (PNG, JPEG, GIF or WebP)."
    );
    assert!(mock.requests().is_empty(), "the model saw nothing");
}

#[tokio::test(start_paused = true)]
async fn a_photo_goes_to_the_model_with_its_caption() {
    let photo = ferrobot::Image::jpeg(vec![0xff, 0xd8, 0xff, 0xe0]);
    let channel = Arc::new(FakeChannel {
        incoming: vec![
            Incoming::new("chat-1", "ann", "what is this?")
                .image(photo.clone())
                .unread("notes.pdf (application/pdf)"),
            Incoming::new("chat-2", "bob", "").image(photo.clone()),
        ],
        ..FakeChannel::default()
    });
    let mock = MockProvider::replying("A cat.");
    let agent = Agent::builder().provider(mock.clone()).build();
    serve(agent, channel.clone()).await.unwrap();
    let mut requests = mock.requests();
    requests.sort_by_key(|r| r.messages[0].text());
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let images: Vec<_> = request.messages[0].images().cloned().collect();
        assert_eq!(images, std::slice::from_ref(&photo));
    }
    assert_eq!(requests[1].messages[0].text(), "what is this?");
    let sent = channel.sent.lock().unwrap().clone();
    assert!(
        sent.iter()
            .any(|(chat, text)| chat == "chat-1"
                && text.starts_with("This didn't reach me: notes.pdf")),
        "{sent:?}"
    );
}
