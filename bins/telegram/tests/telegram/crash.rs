//! Crashes: the binary killed (SIGKILL) at random moments while 200 messages
//! across 20 chats arrive, restarted each time, against a Bot API that
//! sends unacknowledged updates again (as the real one does). Every
//! message gets exactly one final answer, at most one draft per crash is
//! left over, and the history holds each turn once.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use ferrobot::history::{HistoryStore, SqliteHistory};
use ferrobot::message::Role;
use ferrobot::testing::OpenAiStream;
use ferrobot_testkit::Home;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{ANN, BIN, FakeBotApi, TOKEN};

const CHATS: i64 = 20;
const MESSAGES: usize = 200;

/// A model answering `re: TEXT` to the last user message, after a moment:
/// kills land while turns run.
async fn echo_model() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            let last = body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            let answer = OpenAiStream::new().text(&format!("re: {last}")).into_sse();
            ResponseTemplate::new(200)
                .set_body_raw(answer, "text/event-stream")
                .set_delay(Duration::from_millis(80))
        })
        .mount(&server)
        .await;
    server
}

/// A small, seeded random source (xorshift): the seed is printed, so a
/// failing run can be repeated.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The last text of each message the bot posted, and whether it was
/// finished (MarkdownV2) or a draft (plain), in the order first posted.
fn shown(api: &FakeBotApi) -> Vec<(String, bool)> {
    let state = api.0.lock().unwrap();
    let mut order = Vec::new();
    let mut last: HashMap<(i64, i64), (String, bool)> = HashMap::new();
    let mut next_id = 0;
    for (method, body, ok) in &state.calls {
        if !ok {
            continue;
        }
        let chat = body["chat_id"].as_i64().unwrap_or_default();
        let id = match method.as_str() {
            // The fake numbers sent messages 1, 2, … in order.
            "sendmessage" => {
                next_id += 1;
                next_id
            }
            "editmessagetext" => body["message_id"].as_i64().unwrap_or_default(),
            _ => continue,
        };
        let text = body["text"].as_str().unwrap_or_default().to_owned();
        let done = body["parse_mode"] == "MarkdownV2";
        if last.insert((chat, id), (text, done)).is_none() {
            order.push((chat, id));
        }
    }
    order
        .into_iter()
        .map(|key| last.remove(&key).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_the_bot_answers_every_message_exactly_once() {
    let (api, server) = FakeBotApi::start().await;
    let model = echo_model().await;
    let home = Home::new("telegram-crash");
    let env = [
        ("FERROBOT_TELEGRAM__TOKEN", TOKEN.to_owned()),
        ("FERROBOT_TELEGRAM__API_URL", server.uri()),
        ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
        ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "30".into()),
        ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
        ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
        ("FERROBOT_LLM__MODEL", "test-model".into()),
    ];
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut dice = Dice(seed);
    let mut bot = home.command(BIN, &env).spawn().unwrap();
    let mut kills = 0;
    let mut sent = 0;
    while sent < MESSAGES {
        for _ in 0..=dice.below(12) {
            if sent == MESSAGES {
                break;
            }
            let chat = 5000 + (dice.below(CHATS as u64) as i64);
            api.text(ANN, chat, &format!("m{sent}"));
            sent += 1;
        }
        tokio::time::sleep(Duration::from_millis(50 + dice.below(500))).await;
        if dice.below(2) == 0 {
            bot.start_kill().unwrap();
            bot.wait().await.unwrap();
            kills += 1;
            bot = home.command(BIN, &env).spawn().unwrap();
        }
    }
    // Every message answered, within three minutes.
    let deadline = Instant::now() + Duration::from_secs(180);
    let answered = |shown: &[(String, bool)]| {
        (0..MESSAGES)
            .filter(|i| {
                shown
                    .iter()
                    .any(|(t, done)| *done && *t == format!("re: m{i}"))
            })
            .count()
    };
    let waited = Instant::now();
    while answered(&shown(&api)) < MESSAGES && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("all answered {:?} after the last message", waited.elapsed());
    // Let anything still in flight land, then stop the bot for good.
    tokio::time::sleep(Duration::from_millis(500)).await;
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    let shown = shown(&api);
    println!("{kills} kills, {} messages shown", shown.len());
    let odd: Vec<_> = shown
        .iter()
        .filter(|(t, _)| !t.starts_with("re: m"))
        .collect();
    assert!(
        odd.is_empty(),
        "shown beside the answers (seed {seed}): {odd:?}"
    );
    for i in 0..MESSAGES {
        let answer = format!("re: m{i}");
        let finals = shown
            .iter()
            .filter(|(t, done)| *done && *t == answer)
            .count();
        if finals != 1 {
            // What the bot sent, to see how it went.
            let state = api.0.lock().unwrap();
            let mut n = 0;
            for (method, body, _) in &state.calls {
                if method == "sendmessage" {
                    n += 1;
                }
                if matches!(method.as_str(), "sendmessage" | "editmessagetext") {
                    println!("{method} #{n} {body}");
                }
            }
        }
        assert_eq!(
            finals, 1,
            "m{i} has {finals} answers (seed {seed}); last log: {log}"
        );
    }
    // Nothing else was finished; a draft left unfinished is one a crash
    // cut off.
    assert!(
        shown
            .iter()
            .all(|(t, done)| !*done || t.starts_with("re: m")),
        "{shown:?}"
    );
    let strays: Vec<_> = shown.iter().filter(|(_, done)| !*done).collect();
    assert!(
        strays.len() <= kills,
        "{} strays after {kills} kills (seed {seed}): {strays:?}",
        strays.len()
    );
    // The history holds each turn once: every message once, each answered.
    let history = SqliteHistory::open(home.path().join("data/ferrobot/history.db"))
        .await
        .unwrap();
    let mut stored = 0;
    for chat in 5000..5000 + CHATS {
        let messages = history.load(&chat.to_string()).await.unwrap();
        let asked: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text())
            .collect();
        let mut unique = asked.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            asked.len(),
            "a turn twice in chat {chat}: {asked:?}"
        );
        for (i, message) in messages.iter().enumerate() {
            if message.role == Role::User {
                let next = messages.get(i + 1).map(|m| m.text());
                assert_eq!(
                    next,
                    Some(format!("re: {}", message.text())),
                    "an orphaned turn in chat {chat}"
                );
            }
        }
        stored += asked.len();
    }
    assert_eq!(stored, MESSAGES);
    assert!(history.unfinished().await.unwrap().is_empty());
}
