//! Crashes: the binary killed (SIGKILL) at random moments while 200 messages
//! across 20 chats arrive, restarted each time, against a Bot API that
//! sends unacknowledged updates again (as the real one does). Every
//! message gets exactly one final answer, at most one draft per crash is
//! left over, and the history holds each turn once: with the SQLite file,
//! and with a PostgreSQL database (where a killed process's messages are
//! claimed once it counts as stopped, 30 s after its last beat).
//!
//! The checks (`answered_once`, `each_turn_once`) and the echoing model
//! serve the scale-out tests too (`scale`).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use ferrobot::history::{HistoryStore, PostgresHistory, SqliteHistory};
use ferrobot::message::Role;
use ferrobot::testing::OpenAiStream;
use ferrobot_testkit::Home;
use ferrobot_testkit::postgres::Database;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{ANN, BIN, FakeBotApi, TOKEN};

const CHATS: i64 = 20;
const MESSAGES: usize = 200;

/// A model answering `re: TEXT` to the last user message, after a moment:
/// kills land while turns run.
pub(crate) async fn echo_model(delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(move |request: &Request| {
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
                .set_delay(delay)
        })
        .mount(&server)
        .await;
    server
}

/// A small, seeded random source (xorshift): the seed is printed, so a
/// failing run can be repeated.
pub(crate) struct Dice(pub(crate) u64);

impl Dice {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The last text of each message the bot posted, and whether it was
/// finished (MarkdownV2) or a draft (plain), in the order first posted.
pub(crate) fn shown(api: &FakeBotApi) -> Vec<(i64, String, bool)> {
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
        .map(|key| {
            let (text, done) = last.remove(&key).unwrap();
            (key.0, text, done)
        })
        .collect()
}

/// A seed from the clock, printed so that a failing run can be repeated.
pub(crate) fn seed() -> u64 {
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    seed
}

/// How many of `m0` … `m{messages - 1}` have their final answer shown.
pub(crate) fn answered(shown: &[(i64, String, bool)], messages: usize) -> usize {
    (0..messages)
        .filter(|i| {
            shown
                .iter()
                .any(|(_, t, done)| *done && *t == format!("re: m{i}"))
        })
        .count()
}

/// Waits (up to `limit`) until every message's answer is shown, then a
/// moment more for what is still in flight.
pub(crate) async fn wait_answered(api: &FakeBotApi, messages: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    let waited = Instant::now();
    while answered(&shown(api), messages) < messages && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("all answered {:?} after the last message", waited.elapsed());
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// The guarantee, as the chats show it: each message has exactly one
/// final answer, nothing else was posted, and a chat holds at most one
/// unfinished draft per kill (one posted just before it), `most_drafts`
/// in all.
pub(crate) fn answered_once(
    api: &FakeBotApi,
    messages: usize,
    kills: usize,
    most_drafts: usize,
    about: &str,
) {
    let shown = shown(api);
    println!("{kills} kills, {} messages shown", shown.len());
    let odd: Vec<_> = shown
        .iter()
        .filter(|(_, t, _)| !t.starts_with("re: m"))
        .collect();
    assert!(
        odd.is_empty(),
        "shown beside the answers ({about}): {odd:?}"
    );
    for i in 0..messages {
        let answer = format!("re: m{i}");
        let finals = shown
            .iter()
            .filter(|(_, t, done)| *done && *t == answer)
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
        assert_eq!(finals, 1, "m{i} has {finals} answers ({about})");
    }
    let mut strays: HashMap<i64, usize> = HashMap::new();
    for (chat, _, done) in &shown {
        if !done {
            *strays.entry(*chat).or_default() += 1;
        }
    }
    assert!(
        strays.values().all(|n| *n <= kills) && strays.values().sum::<usize>() <= most_drafts,
        "too many drafts left after {kills} kills ({about}): {strays:?}"
    );
}

/// The history holds each turn once, in order: every message of `chats`
/// once, each followed by its own answer (no turn interleaved with
/// another), `messages` in all, and nothing left unfinished.
pub(crate) async fn each_turn_once(
    history: &dyn HistoryStore,
    chats: std::ops::Range<i64>,
    messages: usize,
) {
    let mut stored = 0;
    for chat in chats {
        let kept = history.load(&chat.to_string()).await.unwrap();
        let asked: Vec<String> = kept
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
        for (i, message) in kept.iter().enumerate() {
            if message.role == Role::User {
                let next = kept.get(i + 1).map(|m| m.text());
                assert_eq!(
                    next,
                    Some(format!("re: {}", message.text())),
                    "an orphaned or interleaved turn in chat {chat}"
                );
            }
        }
        stored += asked.len();
    }
    assert_eq!(stored, messages);
    assert!(history.unfinished().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_the_bot_answers_every_message_exactly_once() {
    let home = Home::new("telegram-crash");
    killed_at_random(&home, &[]).await;
    let history = SqliteHistory::open(home.path().join("data/ferrobot/history.db"))
        .await
        .unwrap();
    each_turn_once(&history, 5000..5000 + CHATS, MESSAGES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_on_postgresql_every_message_is_answered_exactly_once() {
    let Some(db) = Database::new().await else {
        return;
    };
    let home = Home::new("telegram-crash-postgres");
    killed_at_random(&home, &[("FERROBOT_HISTORY__URL", db.url())]).await;
    let history = PostgresHistory::connect(&db.url()).await.unwrap();
    each_turn_once(&history, 5000..5000 + CHATS, MESSAGES).await;
    drop(history);
    db.remove().await;
}

/// Sends 200 messages across 20 chats to the binary, killing and
/// restarting it at random moments, with `extra` settings; checks that
/// each message was answered once.
async fn killed_at_random(home: &Home, extra: &[(&str, String)]) {
    let (api, server) = FakeBotApi::start().await;
    let model = echo_model(Duration::from_millis(80)).await;
    let mut env = vec![
        ("FERROBOT_TELEGRAM__TOKEN", TOKEN.to_owned()),
        ("FERROBOT_TELEGRAM__API_URL", server.uri()),
        ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
        ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "30".into()),
        ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
        ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
        ("FERROBOT_LLM__MODEL", "test-model".into()),
    ];
    env.extend(extra.iter().cloned());
    let seed = seed();
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
    // Every message answered, within three minutes (a PostgreSQL replica
    // killed counts as stopped only after 30 s).
    wait_answered(&api, MESSAGES, Duration::from_secs(180)).await;
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    // At most one draft left per crash, as the guarantee says.
    let about = format!("seed {seed}; last log: {log}");
    answered_once(&api, MESSAGES, kills, kills, &about);
}
