//! The turn journal: messages recorded before their turns, marked as the
//! turns go, and the answers a crash interrupted recovered by `serve`, on
//! a real SQLite file left as a crash leaves it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ferrobot::Agent;
use ferrobot::agent::TurnRequest;
use ferrobot::bot::{Channel, ChannelError, Handler, Incoming, serve};
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::history::{HistoryStore, Intake, Mark, SqliteHistory, Stage};
use ferrobot::message::{Message, Role, ToolCall};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{Effects, from_fn};
use futures_util::future::BoxFuture;
use serde_json::json;

use super::sqlite::TempDir;

/// A chat that delivers its messages, posts and edits, and answers
/// confirmations as told; everything it does is logged.
#[derive(Default)]
struct Chat {
    incoming: Vec<Incoming>,
    log: Mutex<Vec<String>>,
    posted: AtomicUsize,
    approve: bool,
}

impl Chat {
    fn with(incoming: Vec<Incoming>) -> Arc<Self> {
        Arc::new(Self {
            incoming,
            ..Self::default()
        })
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Channel for Chat {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            for message in &self.incoming {
                handler.answer(message.clone()).await;
            }
            // The recovery runs beside the channel; give it time.
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(())
        })
    }

    fn post<'a>(
        &'a self,
        _conversation: &'a str,
        text: &'a str,
        _done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        let id = 100 + self.posted.fetch_add(1, Ordering::SeqCst);
        self.log.lock().unwrap().push(format!("post #{id}: {text}"));
        Box::pin(async move { Ok(id.to_string()) })
    }

    fn edit<'a>(
        &'a self,
        _conversation: &'a str,
        message: &'a str,
        text: &'a str,
        _done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        self.log
            .lock()
            .unwrap()
            .push(format!("edit #{message}: {text}"));
        Box::pin(async { Ok(()) })
    }

    fn edit_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(10))
    }

    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        self.log
            .lock()
            .unwrap()
            .push(format!("asked: {}", request.prompt));
        let approve = self.approve;
        Box::pin(async move { approve.into() })
    }
}

async fn store(name: &str) -> (TempDir, SqliteHistory) {
    let dir = TempDir::new(name);
    let store = SqliteHistory::open(dir.file("history.db")).await.unwrap();
    (dir, store)
}

/// The store as the process restarted after a crash opens it: a new
/// instance on the same file, which recovers what the crashed one left.
async fn restarted(store: &SqliteHistory) -> SqliteHistory {
    SqliteHistory::open(store.path()).await.unwrap()
}

/// What a channel journals for `text` in chat `chat`.
fn journaled(id: &str, chat: &str, text: &str) -> Intake {
    let incoming = Incoming::new(chat, "ann", text).id(id);
    Intake::new(id, chat, serde_json::to_string(&incoming).unwrap())
}

fn texts(messages: &[Message]) -> Vec<(Role, String)> {
    messages.iter().map(|m| (m.role, m.text())).collect()
}

#[tokio::test]
async fn a_message_delivered_twice_is_answered_once_and_marked_delivered() {
    let (_dir, store) = store("journal-once").await;
    let hello = Incoming::new("chat", "ann", "hello").id("t:1");
    let chat = Chat::with(vec![hello.clone(), hello]);
    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().text("Hi Ann.")))
        .history(store.clone())
        .build();
    serve(agent, chat.clone()).await.unwrap();
    // Posted as a draft, its id journaled, then finished.
    assert_eq!(chat.log(), ["post #100: Hi Ann.", "edit #100: Hi Ann."]);
    let intake = store.intake("t:1").await.unwrap().unwrap();
    assert_eq!(intake.stage, Stage::Delivered);
    assert_eq!(intake.reply.as_deref(), Some("100"));
    assert_eq!(intake.conversation.as_deref(), Some("chat"));
    assert!(store.unfinished().await.unwrap().is_empty());
    assert_eq!(store.load("chat").await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_turn_marks_its_entry_with_what_it_stores_and_the_calls_it_runs() {
    let (_dir, store) = store("journal-marks").await;
    store
        .receive(&Intake::new("cli:1", "c", "{}"))
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let (reader, seen_by_tool) = (store.clone(), seen.clone());
    let look = from_fn("look", "Looks.", move |_: serde_json::Value, _ctx| {
        let (reader, seen) = (reader.clone(), seen_by_tool.clone());
        async move {
            let intake = reader.intake("cli:1").await.unwrap().unwrap();
            *seen.lock().unwrap() = Some(intake);
            "seen".to_owned()
        }
    });
    let agent = Agent::builder()
        .provider(
            MockProvider::new()
                .then(MockTurn::new().tool_call("look", json!({})))
                .then(MockTurn::new().text("Looked.")),
        )
        .tool(look)
        .history(store.clone())
        .build();
    agent
        .handle("c", TurnRequest::new("look").journal("cli:1"))
        .await
        .unwrap();
    let during = seen.lock().unwrap().clone().unwrap();
    assert_eq!(during.stage, Stage::Started);
    let calling = during.calling.expect("the running call is journaled");
    assert_eq!(calling.tool_calls().next().unwrap().name, "look");
    let after = store.intake("cli:1").await.unwrap().unwrap();
    assert_eq!(after.stage, Stage::Answered);
    assert_eq!(after.calling, None);
}

/// The store as a crash left it: `hello` journaled in `chat`, its turn
/// started (the user's message stored), its draft posted as message `#7`.
async fn crashed_mid_turn(store: &SqliteHistory) {
    store
        .receive(&journaled("t:1", "chat", "hello"))
        .await
        .unwrap();
    let started = Mark::Started {
        conversation: "chat".into(),
    };
    store
        .append_marked("chat", &[Message::user("hello")], "t:1", &started)
        .await
        .unwrap();
    store.mark("t:1", &Mark::Reply("7".into())).await.unwrap();
}

#[tokio::test]
async fn recovery_goes_on_from_the_stored_turn_and_edits_its_draft() {
    let (_dir, store) = store("journal-recover").await;
    crashed_mid_turn(&store).await;
    let chat = Chat::with(Vec::new());
    let mock = MockProvider::new().then(MockTurn::new().text("Hello again."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(restarted(&store).await)
        .build();
    serve(agent, chat.clone()).await.unwrap();
    // The draft left by the crash is the answer; nothing else is posted.
    let log = chat.log();
    assert!(
        !log.is_empty() && log.iter().all(|l| l == "edit #7: Hello again."),
        "{log:?}"
    );
    // The model saw the stored message once; the history holds it once.
    let sent = mock.requests();
    assert_eq!(texts(&sent[0].messages), [(Role::User, "hello".to_owned())]);
    assert_eq!(
        texts(&store.load("chat").await.unwrap()),
        [
            (Role::User, "hello".to_owned()),
            (Role::Assistant, "Hello again.".to_owned())
        ]
    );
    assert_eq!(
        store.intake("t:1").await.unwrap().unwrap().stage,
        Stage::Delivered
    );
}

#[tokio::test]
async fn an_answer_stored_before_the_crash_is_shown_without_calling_the_model() {
    let (_dir, store) = store("journal-stored").await;
    crashed_mid_turn(&store).await;
    store
        .append_marked(
            "chat",
            &[Message::assistant("Stored answer.")],
            "t:1",
            &Mark::Answered {
                text: "Stored answer.".into(),
            },
        )
        .await
        .unwrap();
    let chat = Chat::with(Vec::new());
    let mock = MockProvider::new();
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(restarted(&store).await)
        .build();
    serve(agent, chat.clone()).await.unwrap();
    assert_eq!(chat.log(), ["edit #7: Stored answer."]);
    assert!(mock.requests().is_empty());
    assert_eq!(store.load("chat").await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_call_running_at_the_crash_is_not_run_again_unasked() {
    let (_dir, store) = store("journal-calls").await;
    crashed_mid_turn(&store).await;
    let calls = ToolCall::new("call_1", "reboot", json!({}));
    let read = ToolCall::new("call_2", "uptime", json!({}));
    let step = Message::new(
        Role::Assistant,
        vec![
            ferrobot::message::Part::ToolCall(calls.clone()),
            ferrobot::message::Part::ToolCall(read.clone()),
        ],
    );
    store.mark("t:1", &Mark::Calling(step)).await.unwrap();
    let reboots = Arc::new(AtomicUsize::new(0));
    let uptimes = Arc::new(AtomicUsize::new(0));
    let (r, u) = (reboots.clone(), uptimes.clone());
    let reboot = from_fn("reboot", "Reboots.", move |_: serde_json::Value, _ctx| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            "rebooting".to_owned()
        }
    });
    let uptime = from_fn("uptime", "Uptime.", move |_: serde_json::Value, _ctx| {
        let u = u.clone();
        async move {
            u.fetch_add(1, Ordering::SeqCst);
            "up 3 days".to_owned()
        }
    })
    .effects(Effects::READ_ONLY);
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("reboot", json!({}))
                .tool_call("uptime", json!({})),
        )
        .then(MockTurn::new().text("I did not reboot."));
    let chat = Chat::with(Vec::new()); // declines what it is asked
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(reboot)
        .tool(uptime)
        .history(restarted(&store).await)
        .confirm(ferrobot::bot::ChannelConfirm(chat.clone()))
        .build();
    serve(agent, chat.clone()).await.unwrap();
    // The model was told both calls were interrupted.
    let first = &mock.requests()[0].messages;
    let results: Vec<_> = first[2]
        .tool_results_iter()
        .map(|r| r.content.clone())
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|r| r.starts_with("Interrupted")),
        "{results:?}"
    );
    // Calling `reboot` again was asked about (and declined); `uptime` only
    // reads, so it ran unasked.
    assert_eq!(reboots.load(Ordering::SeqCst), 0);
    assert_eq!(uptimes.load(Ordering::SeqCst), 1);
    let log = chat.log();
    assert_eq!(
        log.iter().filter(|l| l.starts_with("asked")).count(),
        1,
        "{log:?}"
    );
    assert!(
        log.last().unwrap().ends_with("#100: I did not reboot."),
        "{log:?}"
    );
}

#[tokio::test]
async fn an_entry_of_another_front_end_is_left_for_it() {
    let (_dir, store) = store("journal-foreign").await;
    // A `ferrobot run` the CLI journaled in the same file: not a message
    // the bot can read.
    let cli = Intake::new("cli:c:1", "c", r#"{"prompt":"hello","images":[]}"#);
    store.receive(&cli).await.unwrap();
    let chat = Chat::with(Vec::new());
    let mock = MockProvider::new();
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(restarted(&store).await)
        .build();
    serve(agent, chat.clone()).await.unwrap();
    assert!(chat.log().is_empty(), "{:?}", chat.log());
    assert!(mock.requests().is_empty());
    // Still there for the CLI's next run to recover.
    assert_eq!(
        store.intake("cli:c:1").await.unwrap().unwrap().stage,
        Stage::Received
    );
}

#[tokio::test]
async fn a_command_that_was_running_is_not_run_again() {
    let (_dir, store) = store("journal-command").await;
    store
        .receive(&journaled("t:1", "chat", "/reboot"))
        .await
        .unwrap();
    store
        .mark(
            "t:1",
            &Mark::Started {
                conversation: "chat".into(),
            },
        )
        .await
        .unwrap();
    let reboots = Arc::new(AtomicUsize::new(0));
    let r = reboots.clone();
    let reboot = from_fn("reboot", "Reboots.", move |_: serde_json::Value, _ctx| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            "rebooting".to_owned()
        }
    });
    let chat = Chat::with(Vec::new());
    let agent = Agent::builder()
        .provider(MockProvider::new())
        .tool(reboot)
        .history(restarted(&store).await)
        .build();
    serve(agent, chat.clone()).await.unwrap();
    assert_eq!(reboots.load(Ordering::SeqCst), 0);
    let log = chat.log();
    assert_eq!(log.len(), 1);
    assert!(log[0].contains("interrupted this command"), "{log:?}");
}

#[tokio::test]
async fn a_message_journaled_but_not_started_runs_before_the_chats_new_ones() {
    let (_dir, store) = store("journal-order").await;
    store
        .receive(&journaled("t:1", "chat", "first"))
        .await
        .unwrap();
    let chat = Chat::with(vec![Incoming::new("chat", "ann", "second").id("t:2")]);
    let mock = MockProvider::new()
        .then(MockTurn::new().text("One."))
        .then(MockTurn::new().text("Two."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(restarted(&store).await)
        .build();
    serve(agent, chat.clone()).await.unwrap();
    assert_eq!(
        texts(&store.load("chat").await.unwrap()),
        [
            (Role::User, "first".to_owned()),
            (Role::Assistant, "One.".to_owned()),
            (Role::User, "second".to_owned()),
            (Role::Assistant, "Two.".to_owned()),
        ]
    );
    assert!(store.unfinished().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_journal_survives_reopening_and_forgets_old_delivered_entries() {
    let dir = TempDir::new("journal-reopen");
    let path = dir.file("history.db");
    {
        let store = SqliteHistory::open(&path).await.unwrap();
        for id in ["a", "b", "c"] {
            assert!(store.receive(&Intake::new(id, "chat", "{}")).await.unwrap());
        }
        store.mark("b", &Mark::Delivered).await.unwrap();
    }
    let store = SqliteHistory::open(&path).await.unwrap();
    assert!(
        !store
            .receive(&Intake::new("a", "chat", "{}"))
            .await
            .unwrap()
    );
    let unfinished: Vec<String> = store
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(unfinished, ["a", "c"]);
    // Delivered stays delivered.
    store
        .mark(
            "b",
            &Mark::Started {
                conversation: "x".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store.intake("b").await.unwrap().unwrap().stage,
        Stage::Delivered
    );
    let later = SystemTime::now() + Duration::from_secs(3600);
    assert_eq!(store.forget_delivered(later).await.unwrap(), 1);
    assert_eq!(store.intake("b").await.unwrap(), None);
    // A forgotten id is new again.
    assert!(
        store
            .receive(&Intake::new("b", "chat", "{}"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_restarted_process_claims_what_the_earlier_one_left_once_and_never_its_own() {
    let (_dir, earlier) = store("journal-claim").await;
    for id in ["a", "b", "c"] {
        assert!(
            earlier
                .receive(&Intake::new(id, "chat", "{}"))
                .await
                .unwrap()
        );
    }
    earlier.mark("b", &Mark::Delivered).await.unwrap();
    // What it journaled itself, the running process is answering.
    assert!(earlier.claim_unfinished().await.unwrap().is_empty());

    let restarted = restarted(&earlier).await;
    assert!(
        restarted
            .receive(&Intake::new("d", "chat", "{}"))
            .await
            .unwrap()
    );
    let ids = |list: Vec<Intake>| list.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(ids(restarted.claim_unfinished().await.unwrap()), ["a", "c"]);
    assert!(
        restarted.claim_unfinished().await.unwrap().is_empty(),
        "claimed once"
    );
    // All four are still unfinished, for whoever reads the journal.
    assert_eq!(ids(restarted.unfinished().await.unwrap()), ["a", "c", "d"]);
}

/// A store two agents share, as two replicas share a database: its turn
/// lock is the only thing keeping their turns of a conversation apart.
#[derive(Debug, Default, Clone)]
struct Shared(Arc<SharedState>);

#[derive(Debug, Default)]
struct SharedState {
    inner: ferrobot::history::MemoryHistory,
    locks: Arc<tokio::sync::Mutex<()>>,
    waited: AtomicUsize,
}

impl std::ops::Deref for Shared {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

impl HistoryStore for Shared {
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, ferrobot::history::HistoryError>> {
        self.inner.load(conversation)
    }

    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.inner.append(conversation, messages)
    }

    fn clear<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.inner.clear(conversation)
    }

    fn list(
        &self,
    ) -> BoxFuture<
        '_,
        Result<Vec<ferrobot::history::ConversationInfo>, ferrobot::history::HistoryError>,
    > {
        self.inner.list()
    }

    fn lock_turn<'a>(
        &'a self,
        _conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<ferrobot::history::TurnGuard>, ferrobot::history::HistoryError>>
    {
        Box::pin(async move {
            let guard = match Arc::clone(&self.locks).try_lock_owned() {
                Ok(guard) => guard,
                Err(_) => {
                    self.waited.fetch_add(1, Ordering::SeqCst);
                    Arc::clone(&self.locks).lock_owned().await
                }
            };
            Ok(Some(Box::new(guard) as ferrobot::history::TurnGuard))
        })
    }
}

#[tokio::test]
async fn two_agents_on_one_store_take_turns_by_the_stores_lock() {
    let store = Shared::default();
    // Slow answers: without the shared lock, both turns would interleave.
    let slow = || super::fixtures::slow_echo(Duration::from_millis(50));
    let first = Agent::builder()
        .provider(slow())
        .history(store.clone())
        .build();
    let second = Agent::builder()
        .provider(slow())
        .history(store.clone())
        .build();
    let (a, b) = tokio::join!(first.handle("chat", "one"), second.handle("chat", "two"));
    a.unwrap();
    b.unwrap();
    assert_eq!(store.waited.load(Ordering::SeqCst), 1);
    let texts: Vec<String> = store
        .load("chat")
        .await
        .unwrap()
        .iter()
        .map(Message::text)
        .collect();
    // Each question followed by its own answer.
    assert!(
        texts == ["one", "re: one", "two", "re: two"]
            || texts == ["two", "re: two", "one", "re: one"],
        "{texts:?}"
    );
}
