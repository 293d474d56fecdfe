//! What the tests share: the fake Bot API (`FakeBotApi`, with the files it
//! serves), the people and the token they use, and `start`, which serves an
//! agent on Telegram pointed at the fake.

use std::collections::{HashMap, VecDeque};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::bot::{Channel, serve};
use ferrobot_app::{Config, ConfigSource};
use ferrobot_telegram::Telegram;
use ferrobot_testkit::eventually;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub(crate) const TOKEN: &str = "123456:TEST-token_secret";
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_ferrobot-telegram");
pub(crate) const ANN: u64 = 111;
pub(crate) const BOB: u64 = 222;
pub(crate) const STRANGER: u64 = 999;

/// A Bot API: answers every method the bot uses, hands out queued updates
/// to `getUpdates`, records every other call, and fails calls on request.
#[derive(Clone, Default)]
pub(crate) struct FakeBotApi(pub(crate) Arc<Mutex<State>>);

#[derive(Default)]
pub(crate) struct State {
    updates: VecDeque<Value>,
    /// Every call but `getUpdates`: method, body, and whether it succeeded.
    pub(crate) calls: Vec<(String, Value, bool)>,
    next_message: i64,
    next_update: i64,
    /// (method, only when MarkdownV2 is asked for, status, body)
    failures: Vec<(String, bool, u16, Value)>,
    /// Files by id: their path and their bytes (`None`: the download fails).
    files: HashMap<String, (String, Option<Vec<u8>>)>,
    /// The paths of the files downloaded (or tried).
    pub(crate) downloads: Vec<String>,
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
        // A multipart body (`setWebhook`, uploads) is kept as its text.
        let body: Value = serde_json::from_slice(&request.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
        let mut state = self.0.lock().unwrap();
        if method == "getupdates" {
            // As the real API: an offset confirms the updates before it,
            // and the rest are sent again until confirmed.
            let offset = body["offset"].as_i64().unwrap_or(0);
            state
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap_or_default() >= offset);
            let updates: Vec<Value> = state.updates.iter().cloned().collect();
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
            "getfile" => {
                let id = body["file_id"].as_str().unwrap_or_default();
                match state.files.get(id) {
                    Some((path, bytes)) => ok(json!({
                        "file_id": id, "file_unique_id": format!("u-{id}"),
                        "file_size": bytes.as_ref().map_or(0, Vec::len), "file_path": path,
                    })),
                    None => ResponseTemplate::new(400).set_body_json(json!({
                        "ok": false, "error_code": 400, "description": "Bad Request: invalid file_id",
                    })),
                }
            }
            "getwebhookinfo" => {
                ok(json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0}))
            }
            _ => ok(json!(true)),
        }
    }
}

/// The file downloads (`/file/bot<TOKEN>/<file_path>`, the path's slashes
/// escaped as teloxide sends them): the bytes of the file at that path.
#[derive(Clone)]
struct FakeFiles(Arc<Mutex<State>>);

impl Respond for FakeFiles {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let path = request.url.path();
        let path = path.splitn(4, '/').nth(3).unwrap_or_default();
        let path = path.replace("%2F", "/").replace("%2f", "/");
        let mut state = self.0.lock().unwrap();
        state.downloads.push(path.clone());
        let bytes = state
            .files
            .values()
            .find(|(p, _)| *p == path)
            .and_then(|(_, bytes)| bytes.clone());
        match bytes {
            Some(bytes) => {
                ResponseTemplate::new(200).set_body_raw(bytes, "application/octet-stream")
            }
            None => ResponseTemplate::new(500).set_body_string("storage unavailable"),
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
    pub(crate) async fn start() -> (Self, MockServer) {
        let server = MockServer::start().await;
        (Self::serve(&server).await, server)
    }

    /// The fake Bot API on `server`.
    pub(crate) async fn serve(server: &MockServer) -> Self {
        let fake = Self::default();
        Mock::given(path_regex(r"^/bot[^/]+/\w+$"))
            .respond_with(fake.clone())
            .mount(server)
            .await;
        Mock::given(path_regex(r"^/file/bot[^/]+/.+$"))
            .respond_with(FakeFiles(Arc::clone(&fake.0)))
            .mount(server)
            .await;
        fake
    }

    /// Serves `bytes` as the file `file_id` (`getFile`, then the download);
    /// `None`: `getFile` answers, the download fails.
    pub(crate) fn file(&self, file_id: &str, bytes: Option<&[u8]>) {
        let path = format!("photos/{file_id}.jpg");
        self.0
            .lock()
            .unwrap()
            .files
            .insert(file_id.to_owned(), (path, bytes.map(<[u8]>::to_vec)));
    }

    /// A message from `user` in `chat` (private when positive) with
    /// `fields` (`photo`, `document`, `caption`, …).
    pub(crate) fn media(&self, user: u64, chat: i64, fields: Value) {
        let chat_json = if chat < 0 {
            json!({"id": chat, "type": "supergroup", "title": "Ops"})
        } else {
            json!({"id": chat, "type": "private", "first_name": "Ann"})
        };
        let mut message = json!({
            "message_id": 1000, "date": 1700000000, "chat": chat_json,
            "from": {"id": user, "is_bot": false, "first_name": "Ann"},
        });
        let Value::Object(fields) = fields else {
            panic!("fields are an object")
        };
        for (key, value) in fields {
            message[key] = value;
        }
        self.push(json!({ "message": message }));
    }

    pub(crate) fn push(&self, mut update: Value) {
        let mut state = self.0.lock().unwrap();
        state.next_update += 1;
        update["update_id"] = json!(state.next_update);
        state.updates.push_back(update);
    }

    pub(crate) fn text(&self, user: u64, chat: i64, text: &str) {
        self.push(json!({"message": {
            "message_id": 1000, "date": 1700000000, "text": text,
            "from": {"id": user, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": chat, "type": "private", "first_name": "Ann"},
        }}));
    }

    /// A message in topic `topic` of the forum supergroup `chat`.
    pub(crate) fn topic_text(&self, user: u64, chat: i64, topic: i32, text: &str) {
        self.push(json!({"message": {
            "message_id": 1000, "date": 1700000000, "text": text,
            "message_thread_id": topic, "is_topic_message": true,
            "from": {"id": user, "is_bot": false, "first_name": "Ann"},
            "chat": {"id": chat, "type": "supergroup", "title": "Ops", "is_forum": true},
        }}));
    }

    /// A press of a button on the bot's message in `chat`.
    pub(crate) fn press(&self, user: u64, chat: i64, data: &str) {
        self.press_on(
            user,
            &json!({"id": chat, "type": "private", "first_name": "Ann"}),
            None,
            data,
        );
    }

    /// A press of a button on the bot's message in `chat`, in `topic`.
    pub(crate) fn press_on(&self, user: u64, chat: &Value, topic: Option<i32>, data: &str) {
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

    pub(crate) fn fail(&self, method: &str, markdown_only: bool, status: u16, body: Value) {
        self.0
            .lock()
            .unwrap()
            .failures
            .push((method.to_lowercase(), markdown_only, status, body));
    }

    /// The successful calls of `method`.
    pub(crate) fn calls(&self, method: &str) -> Vec<Value> {
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
    pub(crate) fn mark(&self) -> usize {
        self.0.lock().unwrap().calls.len()
    }

    /// Finished replies (whole sends and last edits of a streamed draft,
    /// both in MarkdownV2) among the calls after the first `after`: where a
    /// reply lands depends on whether a draft was shown before the model
    /// finished, which is a matter of timing.
    pub(crate) fn replies(&self, after: usize) -> Vec<(Value, bool)> {
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
    pub(crate) async fn wait_for_reply(
        &self,
        after: usize,
        wanted: impl Fn(&Value) -> bool,
    ) -> Value {
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
    pub(crate) async fn wait_for(&self, method: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        self.wait_until(&format!("a matching {method} call"), || {
            self.calls(method).into_iter().find(|c| wanted(c))
        })
        .await
    }

    /// Checks `found` every 20 ms, up to 30 s, until it finds something;
    /// then panics naming `what` and showing every call.
    pub(crate) async fn wait_until<T>(&self, what: &str, found: impl Fn() -> Option<T>) -> T {
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

/// The bot's channel to the fake at `server`, with the test settings.
/// The environment that runs the binary against the fake Bot API at `api`
/// and the model server at `model`: Ann allowed, no start-up notice, quick
/// edits, the context window given (the model server is not asked).
pub(crate) fn binary_env(api: &MockServer, model: &MockServer) -> Vec<(&'static str, String)> {
    vec![
        ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
        ("FERROBOT_TELEGRAM__API_URL", api.uri()),
        ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
        ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
        ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
        ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
        ("FERROBOT_LLM__MODEL", "test-model".into()),
        ("FERROBOT_CONTEXT__WINDOW", "32768".into()),
    ]
}

pub(crate) fn channel(server: &MockServer, allowed: &[u64]) -> Arc<dyn Channel> {
    Arc::new(Telegram::new(&settings(server, allowed), TOKEN).unwrap())
}

/// Serves `agent` (built around the channel) in the background.
pub(crate) fn start(
    server: &MockServer,
    allowed: &[u64],
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> tokio::task::JoinHandle<()> {
    start_with(server, allowed, |_| {}, build)
}

/// [`start`], with the settings changed by `adjust` first.
pub(crate) fn start_with(
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

/// A port free a moment ago.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Posts `body` to the webhook at `path` on local `port`, with `secret`
/// in Telegram's header; the response's status, `None` when the replica can't be reached.
/// (HTTP/1.1 by hand: one request per connection, as short as it gets.)
pub(crate) async fn post(port: u16, path: &str, secret: Option<&str>, body: &[u8]) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let secret = secret
        .map(|s| format!("X-Telegram-Bot-Api-Secret-Token: {s}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{secret}\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    stream.write_all(body).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    // `HTTP/1.1 200 OK`
    let status = String::from_utf8_lossy(response.get(9..12)?).into_owned();
    status.parse().ok()
}

/// The panel's runtime file in `home`, once the bot wrote it.
pub(crate) async fn runtime(home: &ferrobot_testkit::Home) -> ferrobot_app::panel::Runtime {
    let dir = home.path().join("data/ferrobot/run");
    for _ in 0..1500 {
        if let Some((runtime, _)) = ferrobot_app::panel::Runtime::list(&dir).pop()
            && runtime.port.is_some()
        {
            return runtime;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no runtime file with a panel in {}", dir.display());
}
