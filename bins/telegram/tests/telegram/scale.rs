//! Scale-out: replicas of the binary sharing one PostgreSQL database,
//! taking updates by webhook. The test plays Telegram and the load
//! balancer: it posts each update to a live replica chosen at random,
//! several at once, and posts it again (to any replica) until one answers
//! 200, as Telegram does. One replica is killed mid-run and never comes
//! back; the other recovers what it left once it counts as stopped.
//! Every message is answered exactly once, no conversation's turns
//! interleave, and nothing is lost.
//!
//! `turns_per_second_with_1_2_and_4_replicas` (ignored; run it with
//! `--ignored --nocapture`, in a release build for figures) measures
//! throughput.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrobot::history::PostgresHistory;
use ferrobot_testkit::Home;
use ferrobot_testkit::postgres::Database;
use serde_json::{Value, json};
use tokio::process::Child;
use tokio::sync::{Mutex, Semaphore};
use wiremock::MockServer;

use crate::crash::{Dice, answered_once, each_turn_once, echo_model, seed, wait_answered};
use crate::support::{ANN, BIN, FakeBotApi, TOKEN, free_port, post};

const SECRET: &str = "webhook-secret_42";

/// A running replica: the binary listening for the webhook on `port`.
struct Replica {
    child: Child,
    port: u16,
    _home: Home,
}

/// Starts replica `n` of the bot on the fake Bot API, the model and the
/// database, and waits until its webhook endpoint answers.
async fn replica(n: usize, api: &MockServer, model: &MockServer, database: &str) -> Replica {
    let port = free_port();
    let home = Home::new(&format!("telegram-replica-{n}"));
    let env = [
        ("FERROBOT_TELEGRAM__TOKEN", TOKEN.to_owned()),
        ("FERROBOT_TELEGRAM__API_URL", api.uri()),
        ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
        ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "30".into()),
        ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
        (
            "FERROBOT_TELEGRAM__WEBHOOK_URL",
            "https://bot.example.com/telegram".into(),
        ),
        (
            "FERROBOT_TELEGRAM__WEBHOOK_LISTEN",
            format!("127.0.0.1:{port}"),
        ),
        ("FERROBOT_TELEGRAM__WEBHOOK_SECRET", SECRET.into()),
        ("FERROBOT_HISTORY__URL", database.to_owned()),
        ("FERROBOT_HISTORY__POOL_SIZE", "4".into()),
        ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
        ("FERROBOT_LLM__MODEL", "test-model".into()),
        ("FERROBOT_LOG", "warn".into()),
    ];
    // The log goes to a file: a full pipe nobody reads would stall it.
    let log = std::fs::File::create(home.path().join("replica.log")).unwrap();
    let child = home
        .command(BIN, &env)
        .stderr(Stdio::from(log))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Without the secret: refused, which says the endpoint is up.
        if post(port, "/telegram", None, b"{}").await == Some(401) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica {n} did not start: {}",
            std::fs::read_to_string(home.path().join("replica.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Replica {
        child,
        port,
        _home: home,
    }
}

/// A text message `text` from Ann in private chat `chat`, as update `id`.
fn update(id: usize, chat: i64, text: &str) -> Value {
    json!({"update_id": id, "message": {
        "message_id": id, "date": 1700000000, "text": text,
        "from": {"id": ANN, "is_bot": false, "first_name": "Ann"},
        "chat": {"id": chat, "type": "private", "first_name": "Ann"},
    }})
}

/// Telegram and the load balancer in front of the replicas: each update
/// posted to a live replica chosen at random, again (to any) until one
/// answers 200; at most `at_once` in flight, as Telegram limits a
/// webhook's connections.
struct Balancer {
    live: Arc<Mutex<Vec<u16>>>,
    slots: Arc<Semaphore>,
    posts: tokio::task::JoinSet<()>,
}

impl Balancer {
    fn new(replicas: &[Replica], at_once: usize) -> Self {
        Self {
            live: Arc::new(Mutex::new(replicas.iter().map(|r| r.port).collect())),
            slots: Arc::new(Semaphore::new(at_once)),
            posts: tokio::task::JoinSet::new(),
        }
    }

    /// Stops sending to the replica on `port`.
    async fn remove(&self, port: u16) {
        self.live.lock().await.retain(|live| *live != port);
    }

    /// Sends `update`, starting with the replica `pick` chooses; returns
    /// once it is in flight.
    async fn send(&mut self, update: Value, pick: u64) {
        let slot = Arc::clone(&self.slots).acquire_owned().await.unwrap();
        let live = Arc::clone(&self.live);
        self.posts.spawn(async move {
            let body = serde_json::to_vec(&update).unwrap();
            for attempt in 0.. {
                let port = {
                    let live = live.lock().await;
                    live[(pick as usize + attempt) % live.len()]
                };
                if post(port, "/telegram", Some(SECRET), &body).await == Some(200) {
                    break;
                }
                assert!(attempt < 600, "no replica took update {update}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            drop(slot);
        });
    }

    /// Waits until every update was taken.
    async fn finish(mut self) {
        while let Some(posted) = self.posts.join_next().await {
            posted.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_killed_answer_every_message_once_without_interleaving() {
    const CHATS: i64 = 50;
    const MESSAGES: usize = 1000;
    let Some(db) = Database::new().await else {
        return;
    };
    let (api, server) = FakeBotApi::start().await;
    let model = echo_model(Duration::from_millis(20)).await;
    let mut replicas = vec![
        replica(0, &server, &model, &db.url()).await,
        replica(1, &server, &model, &db.url()).await,
    ];
    let seed = seed();
    let mut dice = Dice(seed);
    // Telegram posts up to 40 updates at once to a webhook; 16 here.
    let mut balancer = Balancer::new(&replicas, 16);
    let mut killed = None;
    for i in 0..MESSAGES {
        if i == MESSAGES * 2 / 5 {
            // Killed mid-run, updates in flight, and never back.
            balancer.remove(replicas[0].port).await;
            replicas[0].child.start_kill().unwrap();
            killed = Some(replicas.remove(0));
        }
        let chat = 7000 + dice.below(CHATS as u64) as i64;
        balancer
            .send(update(i + 1, chat, &format!("m{i}")), dice.below(1000))
            .await;
    }
    balancer.finish().await;
    // The killed replica's messages wait until it counts as stopped (30 s
    // after its last beat) and the other claims them (every 10 s).
    wait_answered(&api, MESSAGES, Duration::from_secs(180)).await;
    let about = format!("seed {seed}");
    answered_once(&api, MESSAGES, 1, CHATS as usize, &about);
    let history = PostgresHistory::connect(&db.url()).await.unwrap();
    each_turn_once(&history, 7000..7000 + CHATS, MESSAGES).await;
    drop((history, replicas, killed));
    db.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run with --ignored --nocapture, in a release build for figures"]
async fn turns_per_second_with_1_2_and_4_replicas() {
    const CHATS: i64 = 50;
    const MESSAGES: usize = 2000;
    let mut figures = Vec::new();
    for count in [1, 2, 4] {
        let Some(db) = Database::new().await else {
            return;
        };
        let (api, server) = FakeBotApi::start().await;
        let model = echo_model(Duration::ZERO).await;
        let mut replicas = Vec::new();
        for n in 0..count {
            replicas.push(replica(n, &server, &model, &db.url()).await);
        }
        let mut dice = Dice(seed());
        let started = Instant::now();
        let mut balancer = Balancer::new(&replicas, 40);
        for i in 0..MESSAGES {
            let chat = 7000 + dice.below(CHATS as u64) as i64;
            balancer
                .send(update(i + 1, chat, &format!("m{i}")), dice.below(1000))
                .await;
        }
        balancer.finish().await;
        wait_answered(&api, MESSAGES, Duration::from_secs(300)).await;
        // `wait_answered` adds half a second for stragglers.
        let took = started.elapsed().saturating_sub(Duration::from_millis(500));
        let rate = MESSAGES as f64 / took.as_secs_f64();
        println!("{count} replica(s): {MESSAGES} turns in {took:.2?}, {rate:.0} turns/s");
        figures.push((count, rate));
        drop(replicas);
        db.remove().await;
    }
    println!("replicas, turns/s: {figures:?}");
}
