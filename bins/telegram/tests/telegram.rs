//! The Telegram bot end to end: a fake Bot API over loopback (wiremock)
//! feeding real update payloads, a model behind a fake OpenAI-compatible
//! endpoint or a `MockProvider`, and assertions on the calls the bot makes.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::bot::{Channel, serve};
use ferrobot::testing::{MockProvider, MockTurn, OpenAiStream};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot::{Agent, ToolContext};
use ferrobot_app::{Config, ConfigSource};
use ferrobot_telegram::Telegram;
use ferrobot_testkit::{Home, Recording, agent, eventually, llm, openai, recordings, text_answer};
use serde_json::{Value, json};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TOKEN: &str = "123456:TEST-token_secret";
const BIN: &str = env!("CARGO_BIN_EXE_ferrobot-telegram");
const ANN: u64 = 111;
const BOB: u64 = 222;
const STRANGER: u64 = 999;

/// A Bot API: answers every method the bot uses, hands out queued updates
/// to `getUpdates`, records every other call, and fails calls on request.
#[derive(Clone, Default)]
struct FakeBotApi(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    updates: VecDeque<Value>,
    /// Every call but `getUpdates`: method, body, and whether it succeeded.
    calls: Vec<(String, Value, bool)>,
    next_message: i64,
    next_update: i64,
    /// (method, only when MarkdownV2 is asked for, status, body)
    failures: Vec<(String, bool, u16, Value)>,
}

impl Respond for FakeBotApi {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let method = request
            .url
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_lowercase();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut state = self.0.lock().unwrap();
        if method == "getupdates" {
            let updates: Vec<Value> = state.updates.drain(..).collect();
            let delay = if updates.is_empty() { 30 } else { 0 };
            return ok(json!(updates)).set_delay(Duration::from_millis(delay));
        }
        let markdown = body["parse_mode"] == "MarkdownV2";
        if let Some(i) = state
            .failures
            .iter()
            .position(|(m, md_only, ..)| *m == method && (!md_only || markdown))
        {
            let (_, _, status, failure) = state.failures.remove(i);
            state.calls.push((method, body, false));
            return ResponseTemplate::new(status).set_body_json(failure);
        }
        state.calls.push((method.clone(), body.clone(), true));
        match method.as_str() {
            "getme" => ok(json!({
                "id": 42, "is_bot": true, "first_name": "ferrobot", "username": "ferrobot_test_bot",
                "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false, "has_main_web_app": false
            })),
            "sendmessage" | "editmessagetext" => {
                let id = if method == "sendmessage" {
                    state.next_message += 1;
                    state.next_message
                } else {
                    body["message_id"].as_i64().unwrap_or_default()
                };
                let chat = body["chat_id"].as_i64().unwrap_or_default();
                ok(json!({
                    "message_id": id, "date": 1700000000,
                    "chat": if chat < 0 { json!({"id": chat, "type": "supergroup", "title": "group"}) }
                            else { json!({"id": chat, "type": "private", "first_name": "Ann"}) },
                    "from": {"id": 42, "is_bot": true, "first_name": "ferrobot"},
                    "text": body["text"],
                }))
            }
            "getwebhookinfo" => {
                ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0}))
            }
            _ => ok(json!(true)),
        }
    }
}

fn ok(result: Value) -> ResponseTemplate {
    let body = serde_json::Map::from_iter([
        ("ok".to_owned(), json!(true)),
        ("result".to_owned(), result),
    ]);
    ResponseTemplate::new(200).set_body_json(body)
}

impl FakeBotApi {
    async fn start() -> (Self, MockServer) {
        let server = MockServer::start().await;
        (Self::serve(&server).await, server)
    }

    /// The fake Bot API on `server`.
    async fn serve(server: &MockServer) -> Self {
        let fake = Self::default();
        Mock::given(path_regex(r"^/bot[^/]+/\w+$"))
            .respond_with(fake.clone())
            .mount(server)
            .await;
        fake
    }

    fn push(&self, mut update: Value) {
        let mut state = self.0.lock().unwrap();
        state.next_update += 1;
        update["update_id"] = json!(state.next_update);
        state.updates.push_back(update);
    }

    fn text(&self, user: u64, chat: i64, text: &str) {
        self.push(json!({"message": {
            "message_id": 1000, "date": 1700000000, "text": text,
            "from": {"id": user, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": chat, "type": "private", "first_name": "Ann"},
        }}));
    }

    /// A message in topic `topic` of the forum supergroup `chat`.
    fn topic_text(&self, user: u64, chat: i64, topic: i32, text: &str) {
        self.push(json!({"message": {
            "message_id": 1000, "date": 1700000000, "text": text,
            "message_thread_id": topic, "is_topic_message": true,
            "from": {"id": user, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": chat, "type": "supergroup", "title": "Ops", "is_forum": true},
        }}));
    }

    /// A press of a button on the bot's message in `chat`.
    fn press(&self, user: u64, chat: i64, data: &str) {
        self.press_on(
            user,
            &json!({"id": chat, "type": "private", "first_name": "Ann"}),
            None,
            data,
        );
    }

    /// A press of a button on the bot's message in `chat`, in `topic`.
    fn press_on(&self, user: u64, chat: &Value, topic: Option<i32>, data: &str) {
        let mut message = json!({
            "message_id": 1, "date": 1700000000, "text": "Reboot this machine?", "chat": chat,
            "from": {"id": 42, "is_bot": true, "first_name": "ferrobot"},
        });
        if let Some(topic) = topic {
            message["message_thread_id"] = json!(topic);
            message["is_topic_message"] = json!(true);
        }
        self.push(json!({"callback_query": {
            "id": format!("press-{user}-{data}"), "chat_instance": "1", "data": data,
            "from": {"id": user, "is_bot": false, "first_name": "Someone"},
            "message": message,
        }}));
    }

    fn fail(&self, method: &str, markdown_only: bool, status: u16, body: Value) {
        self.0
            .lock()
            .unwrap()
            .failures
            .push((method.to_lowercase(), markdown_only, status, body));
    }

    /// The successful calls of `method`.
    fn calls(&self, method: &str) -> Vec<Value> {
        self.attempts(method)
            .into_iter()
            .filter(|(_, ok)| *ok)
            .map(|(body, _)| body)
            .collect()
    }

    /// Every call of `method`, and whether it succeeded.
    fn attempts(&self, method: &str) -> Vec<(Value, bool)> {
        let method = method.to_lowercase();
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, ..)| *m == method)
            .map(|(_, body, ok)| (body.clone(), *ok))
            .collect()
    }

    /// How many calls were made so far, to look only at later ones.
    fn mark(&self) -> usize {
        self.0.lock().unwrap().calls.len()
    }

    /// Finished replies (whole sends and last edits of a streamed draft,
    /// both in MarkdownV2) among the calls after the first `after`: where a
    /// reply lands depends on whether a draft was shown before the model
    /// finished, which is a matter of timing.
    fn replies(&self, after: usize) -> Vec<(Value, bool)> {
        self.0.lock().unwrap().calls[after..]
            .iter()
            .filter(|(m, body, _)| {
                matches!(m.as_str(), "sendmessage" | "editmessagetext")
                    && body["parse_mode"] == "MarkdownV2"
            })
            .map(|(_, body, ok)| (body.clone(), *ok))
            .collect()
    }

    /// Waits for a finished reply after the first `after` calls that
    /// satisfies `wanted`, up to 30 s (a binary may start cold on a loaded
    /// machine).
    async fn wait_for_reply(&self, after: usize, wanted: impl Fn(&Value) -> bool) -> Value {
        self.wait_until("a matching reply", || {
            self.replies(after)
                .into_iter()
                .find(|(c, ok)| *ok && wanted(c))
                .map(|(call, _)| call)
        })
        .await
    }

    /// Waits until a `method` call satisfies `wanted`, up to 30 s (a binary
    /// may start cold on a loaded machine).
    async fn wait_for(&self, method: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        self.wait_until(&format!("a matching {method} call"), || {
            self.calls(method).into_iter().find(|c| wanted(c))
        })
        .await
    }

    /// Checks `found` every 20 ms, up to 30 s, until it finds something;
    /// then panics naming `what` and showing every call.
    async fn wait_until<T>(&self, what: &str, found: impl Fn() -> Option<T>) -> T {
        if let Some(thing) = eventually(found).await {
            return thing;
        }
        let state = self.0.lock().unwrap();
        panic!("no {what}; calls: {:#?}", state.calls);
    }
}

fn settings(server: &MockServer, allowed: &[u64]) -> ferrobot_app::TelegramConfig {
    let mut settings = Config::load(&ConfigSource::defaults_only())
        .unwrap()
        .config
        .telegram;
    settings.api_url = server.uri();
    settings.allowed_user_ids = allowed.to_vec();
    settings.edit_interval_ms = 40;
    settings.confirm_timeout_secs = 5;
    settings
}

/// Serves `agent` (built around the channel) in the background.
fn start(
    server: &MockServer,
    allowed: &[u64],
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> tokio::task::JoinHandle<()> {
    start_with(server, allowed, |_| {}, build)
}

/// [`start`], with the settings changed by `adjust` first.
fn start_with(
    server: &MockServer,
    allowed: &[u64],
    adjust: impl FnOnce(&mut ferrobot_app::TelegramConfig),
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> tokio::task::JoinHandle<()> {
    let mut settings = settings(server, allowed);
    adjust(&mut settings);
    let telegram = Telegram::new(&settings, TOKEN).unwrap();
    let channel: Arc<dyn Channel> = Arc::new(telegram);
    let agent = build(Arc::clone(&channel));
    tokio::spawn(async move {
        serve(agent, channel).await.unwrap();
    })
}

#[tokio::test]
async fn a_message_is_answered_in_its_chat_streamed_by_edits_then_formatted() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Disk / has **42.5 GB** free.")
            .chunked(6)
            .delay(Duration::from_millis(80)),
    );
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    api.text(ANN, ANN as i64, "how much disk is left?");
    let done = api
        .wait_for("EditMessageText", |c| c["parse_mode"] == "MarkdownV2")
        .await;
    assert_eq!(done["chat_id"], json!(ANN));
    assert_eq!(done["text"], r"Disk / has *42\.5 GB* free\.");
    // The first words were posted as a plain draft, then edited in place.
    let first = &api.calls("SendMessage")[0];
    assert_eq!(first["chat_id"], json!(ANN));
    assert!(first.get("parse_mode").is_none(), "{first}");
    assert!(
        first.get("reply_parameters").is_none(),
        "no reply threading in a private chat"
    );
    assert!("Disk / has **42.5 GB** free.".starts_with(first["text"].as_str().unwrap()));
    let drafts = api.calls("EditMessageText").len() - 1;
    assert!(drafts >= 1, "edited while streaming");
    assert_eq!(api.calls("SendMessage").len(), 1, "one message, edited");
    assert_eq!(done["message_id"], json!(1));
    let typing = api.calls("SendChatAction");
    assert!(
        typing
            .iter()
            .any(|c| c["action"] == "typing" && c["chat_id"] == json!(ANN))
    );
    assert_eq!(
        recorded.requests()[0].messages[0].text(),
        "how much disk is left?"
    );
}

#[tokio::test]
async fn a_stranger_is_refused_once_and_reaches_nothing() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let ping = from_fn("ping", "Ping.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "pong" }
    });
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![ping.into_tool()])
    });
    api.text(STRANGER, STRANGER as i64, "hello");
    api.text(STRANGER, STRANGER as i64, "/ping");
    api.text(ANN, ANN as i64, "/ping");
    api.wait_for("SendMessage", |c| c["chat_id"] == json!(ANN))
        .await;
    api.wait_for("SendMessage", |c| c["chat_id"] == json!(STRANGER))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let to_stranger: Vec<Value> = api
        .calls("SendMessage")
        .into_iter()
        .filter(|c| c["chat_id"] == json!(STRANGER))
        .collect();
    assert_eq!(to_stranger.len(), 1, "one refusal: {to_stranger:?}");
    assert!(
        to_stranger[0]["text"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only Ann's /ping ran");
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}

#[tokio::test]
async fn a_tool_asks_with_buttons_and_runs_only_after_the_asker_says_yes() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "reboot", &json!({"delay": 1}))
            .into_sse(),
        text_answer("Rebooting in a minute."),
    ])
    .await;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let reboot = from_fn(
        "reboot",
        "Reboot this machine.",
        move |_: Value, ctx: ToolContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                ctx.notify_later("Rebooting now.", Duration::from_millis(50))
                    .map(|()| "scheduled")
            }
        },
    )
    .confirm("Reboot this machine?");
    let _bot = start(&server, &[ANN, BOB], |channel| {
        agent(openai(&model), &channel, vec![reboot.into_tool()])
    });
    api.text(ANN, ANN as i64, "please reboot");
    let question = api
        .wait_for("SendMessage", |c| c["text"] == "Reboot this machine?")
        .await;
    let buttons = &question["reply_markup"]["inline_keyboard"][0];
    assert_eq!(buttons[0]["text"], "✅ Yes");
    assert_eq!(buttons[1]["text"], "❌ No");
    let yes = buttons[0]["callback_data"].as_str().unwrap().to_owned();
    // Bob is allowed to use the bot, but it isn't his question.
    api.press(BOB, ANN as i64, &yes);
    let refused = api
        .wait_for("AnswerCallbackQuery", |c| {
            c["callback_query_id"] == format!("press-{BOB}-{yes}")
        })
        .await;
    assert_eq!(
        refused["text"],
        "Only the person who asked can answer this."
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "not run before the asker's yes"
    );
    api.press(ANN, ANN as i64, &yes);
    api.wait_for("EditMessageText", |c| {
        c["text"] == "Reboot this machine?\n\n✅ Approved"
    })
    .await;
    api.wait_for_reply(0, |c| c["text"] == r"Rebooting in a minute\.")
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    // The tool's later message reaches the chat that asked.
    api.wait_for("SendMessage", |c| {
        c["text"] == r"Rebooting now\." && c["chat_id"] == json!(ANN)
    })
    .await;
}

#[tokio::test]
async fn in_a_forum_each_topic_is_its_own_conversation_answered_in_the_topic() {
    const FORUM: i64 = -100_777;
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().text("Deploys look fine."))
        .then(MockTurn::new().text("The alerts are quiet."))
        .then(MockTurn::new().tool_call("restart", json!({})))
        .then(MockTurn::new().text("Restarted."));
    let recorded = model.clone();
    let restart = from_fn("restart", "Restart.", |_: Value, _| async { "done" })
        .confirm("Restart the service?");
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![restart.into_tool()])
    });
    api.topic_text(ANN, FORUM, 7, "deploys?");
    let first = api
        .wait_for_reply(0, |c| c["text"] == r"Deploys look fine\.")
        .await;
    api.topic_text(ANN, FORUM, 8, "alerts?");
    api.wait_for_reply(0, |c| c["text"] == r"The alerts are quiet\.")
        .await;
    // Every message of a reply goes to its topic, typing shows there too.
    for call in api
        .calls("SendMessage")
        .iter()
        .chain(&api.calls("SendChatAction"))
    {
        assert_eq!(call["chat_id"], json!(FORUM), "{call}");
        assert!(
            [json!(7), json!(8)].contains(&call["message_thread_id"]),
            "{call}"
        );
    }
    assert_eq!(first["chat_id"], json!(FORUM));
    // In a group the answer is a reply to its question (sent anyway if the
    // question is gone).
    // (The first message of the reply; a finished reply may be an edit of it.)
    assert_eq!(
        api.calls("SendMessage")[0]["reply_parameters"],
        json!({"message_id": 1000, "allow_sending_without_reply": true})
    );
    // Topic 8 is a conversation of its own: it didn't see topic 7's.
    let seen = format!("{:?}", recorded.requests()[1].messages);
    assert!(
        seen.contains("alerts?") && !seen.contains("deploys?"),
        "{seen}"
    );
    // A confirmation is asked in the topic, and a press there answers it.
    api.topic_text(ANN, FORUM, 7, "restart it");
    let question = api
        .wait_for("SendMessage", |c| c["text"] == "Restart the service?")
        .await;
    assert_eq!(question["message_thread_id"], json!(7));
    let yes = question["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    api.press_on(
        ANN,
        &json!({"id": FORUM, "type": "supergroup", "title": "Ops", "is_forum": true}),
        Some(7),
        &yes,
    );
    api.wait_for_reply(0, |c| {
        c["text"] == r"Restarted\." && c["chat_id"] == json!(FORUM)
    })
    .await;
    let seen = format!("{:?}", recorded.requests()[2].messages);
    assert!(
        seen.contains("deploys?") && !seen.contains("alerts?"),
        "{seen}"
    );
}

#[tokio::test]
async fn a_photo_is_told_that_only_text_is_read_in_a_private_chat_only() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let _bot = start(&server, &[ANN], |channel| agent(model, &channel, vec![]));
    let photo = |chat: Value| {
        json!({"message": {
            "message_id": 1000, "date": 1700000000, "chat": chat,
            "from": {"id": ANN, "is_bot": false, "first_name": "Ann"},
            "photo": [{"file_id": "f", "file_unique_id": "u", "width": 90, "height": 90}],
        }})
    };
    api.push(photo(
        json!({"id": -100_555, "type": "supergroup", "title": "Ops"}),
    ));
    api.push(photo(
        json!({"id": ANN, "type": "private", "first_name": "Ann"}),
    ));
    let note = api.wait_for("SendMessage", |_| true).await;
    assert_eq!(note["chat_id"], json!(ANN));
    assert!(
        note["text"].as_str().unwrap().contains("only read text"),
        "{note}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        api.calls("SendMessage").len(),
        1,
        "nothing said in the group"
    );
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}

#[tokio::test]
async fn a_question_nobody_answers_is_declined_after_the_time_out() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let recorded = model.clone();
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooted" })
        .confirm("Reboot this machine?");
    let _bot = start_with(
        &server,
        &[ANN],
        |settings| settings.confirm_timeout_secs = 1,
        |channel| agent(model, &channel, vec![reboot.into_tool()]),
    );
    api.text(ANN, ANN as i64, "reboot");
    api.wait_for("EditMessageText", |c| {
        c["text"] == "Reboot this machine?\n\n⌛ No answer within 1 s: declined"
    })
    .await;
    api.wait_for_reply(0, |c| c["text"] == r"Left it running\.")
        .await;
    let results = &recorded.requests()[1].messages;
    assert!(format!("{results:?}").contains("Cancelled by user."));
}

/// Telegram's length of a MarkdownV2 text: what shows, escapes and entity
/// markers left out (enough for the text these tests send).
fn shown_len(markdown_v2: &str) -> usize {
    let mut shown = String::new();
    let mut chars = markdown_v2.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => shown.extend(chars.next()),
            '`' | '*' | '_' => {}
            c => shown.push(c),
        }
    }
    shown.encode_utf16().count()
}

#[tokio::test]
async fn a_long_reply_is_split_within_the_limit_without_breaking_code_blocks() {
    let (api, server) = FakeBotApi::start().await;
    let code = "let size = disk.available(); // 🚀\n".repeat(120);
    let prose = "Everything looks fine on this machine, nothing to worry about. ".repeat(60);
    let reply = format!("{prose}\n\n```rust\n{code}```\n\n{prose}That is all.");
    let _bot = start(&server, &[ANN], |channel| {
        agent(MockProvider::replying(reply.clone()), &channel, vec![])
    });
    api.text(ANN, ANN as i64, "report");
    // Wait for the last words, then check every finished piece.
    api.wait_for_reply(0, |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.ends_with(r"That is all\."))
    })
    .await;
    let pieces: Vec<String> = api
        .replies(0)
        .iter()
        .map(|(c, _)| c["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(pieces.len() >= 3, "{} pieces", pieces.len());
    for piece in &pieces {
        assert!(
            shown_len(piece) <= 4096,
            "a piece of {} units",
            shown_len(piece)
        );
        assert_eq!(
            piece.matches("```").count() % 2,
            0,
            "code fences balanced in {piece:.80}…"
        );
    }
    let code_pieces = pieces.iter().filter(|p| p.contains("```rust\n")).count();
    assert!(
        code_pieces >= 2,
        "the code block is reopened in the next message"
    );
    assert!(
        pieces.iter().all(|p| !p.contains('\u{FFFD}')),
        "no emoji cut in half"
    );
}

#[tokio::test]
async fn markdown_telegram_rejects_is_sent_again_as_plain_text() {
    let (api, server) = FakeBotApi::start().await;
    let ping = from_fn("ping", "Ping.", |_: Value, _| async { "pong *unbalanced" });
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Streamed *answer")
            .chunked(4)
            .delay(Duration::from_millis(60)),
    );
    let _bot = start(&server, &[ANN], |channel| {
        agent(model, &channel, vec![ping.into_tool()])
    });
    let refusal = json!({"ok": false, "error_code": 400,
        "description": "Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 5"});
    // A whole reply (a slash command's) is sent…
    api.fail("SendMessage", true, 400, refusal.clone());
    api.text(ANN, ANN as i64, "/ping");
    let plain = api
        .wait_for("SendMessage", |c| c["text"] == "```\npong *unbalanced\n```")
        .await;
    assert!(plain.get("parse_mode").is_none());
    // …and a streamed one is edited, in plain text. (Were it finished before
    // a draft was shown, it would be sent whole: that is refused too.)
    api.fail("EditMessageText", true, 400, refusal.clone());
    api.fail("SendMessage", true, 400, refusal);
    let before = api.mark();
    api.text(ANN, ANN as i64, "hi");
    api.wait_until("plain text after the refused Markdown", || {
        let calls = api.0.lock().unwrap().calls[before..].to_vec();
        let refused = calls
            .iter()
            .position(|(_, c, ok)| !ok && c["parse_mode"] == "MarkdownV2")?;
        calls[refused + 1..]
            .iter()
            .any(|(_, c, ok)| {
                *ok && c["text"] == "Streamed *answer"
                    && c.get("parse_mode").is_none()
                    && c["chat_id"] == json!(ANN)
            })
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_command_menu_lists_the_tools_telegram_can_name() {
    let (api, server) = FakeBotApi::start().await;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        /// How many lines.
        #[allow(dead_code)]
        lines: u32,
    }
    let tools = vec![
        from_fn(
            "tail_log",
            "Show the end of the log.\nMore detail.",
            |_: Args, _| async { "" },
        )
        .into_tool(),
        from_fn(
            "Reboot-Now",
            "Not a Telegram command name.",
            |_: Value, _| async { "" },
        )
        .into_tool(),
    ];
    let mut running = None;
    let _bot = start(&server, &[ANN], |channel| {
        let agent = agent(MockProvider::replying("ok"), &channel, tools);
        running = Some(agent.clone());
        agent
    });
    let menu = api.wait_for("SetMyCommands", |_| true).await;
    assert_eq!(
        menu["commands"],
        json!([
            {"command": "new", "description": "Start a fresh conversation"},
            {"command": "undo", "description": "Take back your last message and its answer"},
            {"command": "help", "description": "List the commands"},
            {"command": "tail_log", "description": "Show the end of the log."},
        ])
    );
    // A menu command runs the tool directly, as a typed slash command would.
    api.text(ANN, ANN as i64, "/tail_log lines=x");
    let answer = api.wait_for("SendMessage", |_| true).await;
    assert!(
        answer["text"].as_str().unwrap().contains("expected u32"),
        "{answer}"
    );
    // /start greets with the command list.
    api.text(ANN, ANN as i64, "/start");
    api.wait_for("SendMessage", |c| {
        c["text"].as_str().unwrap().contains("tail\\_log")
    })
    .await;
    // A tool switched off while the bot runs leaves the menu.
    running.unwrap().tools().set_enabled("tail_log", false);
    let menu = api
        .wait_for("SetMyCommands", |m| {
            m["commands"].as_array().unwrap().len() == 3
        })
        .await;
    assert!(!menu.to_string().contains("tail_log"), "{menu}");
}

#[tokio::test]
async fn flood_control_is_waited_out_and_the_reply_still_arrives() {
    let (api, server) = FakeBotApi::start().await;
    let _bot = start(&server, &[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    });
    // The finished reply is refused once, whether it is sent whole or is the
    // last edit of a draft.
    let flood = json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
                       "parameters": {"retry_after": 1}});
    api.fail("SendMessage", true, 429, flood.clone());
    api.fail("EditMessageText", true, 429, flood);
    let asked = std::time::Instant::now();
    api.text(ANN, ANN as i64, "status?");
    api.wait_for_reply(0, |c| c["text"] == r"Fine\.").await;
    assert!(
        asked.elapsed() >= Duration::from_secs(1),
        "waited as told: {:#?}",
        api.0.lock().unwrap().calls
    );
    let attempts: Vec<bool> = api.replies(0).iter().map(|(_, ok)| *ok).collect();
    assert_eq!(attempts, [false, true], "the refused call, then the retry");
}

/// Every recorded update (messages in private chats and supergroups, a
/// 2017 payload without `is_bot`, service messages, button presses for
/// other bots) is answered or left alone as its kind requires.
#[tokio::test]
async fn recorded_updates_are_answered_or_left_alone_as_their_kind_requires() {
    let Some(recordings) = recordings("07_telegram_updates") else {
        return;
    };
    let recordings: Vec<(String, Vec<Value>, Vec<Value>)> = recordings
        .into_iter()
        .map(
            |Recording {
                 name,
                 response,
                 expected,
             }| {
                let raw = match response.get("result") {
                    Some(Value::Array(updates)) => updates.clone(),
                    _ => vec![response],
                };
                let wanted = match expected.get("updates") {
                    Some(Value::Array(updates)) => updates.clone(),
                    _ => vec![expected["update"].clone()],
                };
                assert_eq!(raw.len(), wanted.len());
                (name, raw, wanted)
            },
        )
        .collect();
    assert!(recordings.len() >= 8, "{} recordings", recordings.len());
    let allowed: Vec<u64> = recordings
        .iter()
        .flat_map(|(_, _, wanted)| wanted.iter().filter_map(|u| u["from"]["id"].as_u64()))
        .collect();
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let _bot = start(&server, &allowed, |channel| agent(model, &channel, vec![]));
    for (name, raw, wanted) in recordings {
        for (update, wanted) in raw.into_iter().zip(wanted) {
            let before = (api.mark(), recorded.requests().len());
            eprintln!("replaying {name}");
            api.push(update);
            match (wanted["kind"].as_str(), wanted["text"].as_str()) {
                (Some("message"), Some(text)) => {
                    let chat = wanted["chat"]["id"].clone();
                    let reply = api.wait_for_reply(before.0, |c| c["chat_id"] == chat).await;
                    if text.starts_with('/') {
                        // A command this bot doesn't have: answered without the model.
                        assert!(
                            reply["text"].as_str().unwrap().contains("Unknown command"),
                            "{name}: {reply}"
                        );
                    } else {
                        assert_eq!(reply["text"], r"Noted\.", "{name}");
                        let asked = recorded.requests();
                        assert_eq!(asked.len(), before.1 + 1, "{name}");
                        assert_eq!(
                            asked.last().unwrap().messages.last().unwrap().text(),
                            text,
                            "{name}"
                        );
                    }
                }
                (Some("message"), None) => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    assert_eq!(
                        api.mark(),
                        before.0,
                        "{name}: a service message is left alone"
                    );
                }
                (Some("callback_query"), _) => {
                    let id = wanted["callback_query_id"].clone();
                    let answer = api
                        .wait_for("AnswerCallbackQuery", |c| c["callback_query_id"] == id)
                        .await;
                    assert_eq!(
                        answer["text"], "This button isn't mine to answer.",
                        "{name}"
                    );
                }
                other => panic!("{name}: unexpected kind {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn the_binary_runs_from_the_environment_alone() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("All good.")]).await;
    let home = Home::new("telegram-env");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
            ],
        )
        .spawn()
        .unwrap();
    // Once connected, the start-up report goes to the first allowed user.
    let notice = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("ferrobot is online"))
        })
        .await;
    assert_eq!(notice["chat_id"], json!(ANN));
    assert!(
        notice["text"].as_str().unwrap().contains("Memory"),
        "{notice}"
    );
    api.text(ANN, ANN as i64, "all good?");
    api.wait_for_reply(0, |c| c["text"] == r"All good\.").await;
    let asked = &model.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&asked.body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert!(body["messages"].to_string().contains("all good?"));
    // The system tools are offered, and the history is kept on disk.
    assert!(body["tools"].to_string().contains("disk_usage"));
    assert!(home.path().join("data/ferrobot/history.db").is_file());
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("connected to Telegram"), "{log}");
    assert!(
        !log.contains(TOKEN) && !log.contains("TEST-token"),
        "the token stays out of the log"
    );
}

#[tokio::test]
async fn a_revoked_token_stops_the_bot_with_a_clear_message() {
    let server = MockServer::start().await;
    Mock::given(path_regex(r"^/bot[^/]+/GetMe$"))
        .respond_with(
            ResponseTemplate::new(401).set_body_json(
                json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
            ),
        )
        .mount(&server)
        .await;
    let home = Home::new("telegram-revoked");
    let output = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
            ],
        )
        .output()
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("Telegram refused the bot token"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
}

#[tokio::test]
async fn without_a_token_the_bot_says_where_to_put_one() {
    let home = Home::new("telegram-no-token");
    let output = home.command(BIN, &[]).output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("FERROBOT_TELEGRAM__TOKEN"), "{log}");
}

#[tokio::test]
async fn with_nobody_allowed_the_bot_refuses_everyone_and_says_so() {
    let (api, server) = FakeBotApi::start().await;
    let home = Home::new("telegram-nobody");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
            ],
        )
        .spawn()
        .unwrap();
    api.wait_for("SetMyCommands", |_| true).await;
    api.text(ANN, ANN as i64, "hello");
    let refusal = api.wait_for("SendMessage", |_| true).await;
    assert!(refusal["text"].as_str().unwrap().contains("private bot"));
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("allowed_user_ids is empty"), "{log}");
    assert!(log.contains(&format!("user_id={ANN}")), "{log}");
}

#[tokio::test]
async fn a_bot_api_out_of_reach_at_start_is_retried_until_it_answers() {
    // A port held but not listened on, yet: connections are refused, and no
    // other test can take it meanwhile.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap();
    let mut settings = Config::load(&ConfigSource::defaults_only())
        .unwrap()
        .config
        .telegram;
    settings.api_url = format!("http://{address}");
    settings.allowed_user_ids = vec![ANN];
    let channel: Arc<dyn Channel> = Arc::new(Telegram::new(&settings, TOKEN).unwrap());
    let bot = tokio::spawn(serve(
        agent(MockProvider::replying("Back."), &channel, vec![]),
        channel,
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!bot.is_finished(), "still trying");
    let listener = socket.listen(64).unwrap().into_std().unwrap();
    let server = MockServer::builder().listener(listener).start().await;
    let api = FakeBotApi::serve(&server).await;
    api.wait_for("SetMyCommands", |_| true).await;
    api.text(ANN, ANN as i64, "there?");
    api.wait_for_reply(0, |c| c["text"] == r"Back\.").await;
}
