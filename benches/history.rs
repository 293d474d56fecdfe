//! History stores: append and load throughput of a 10,000-message
//! conversation in `SqliteHistory`, the memory of 10,000 conversations
//! in `MemoryHistory`, and what the turn journal costs a turn on SQLite
//! (journaled before, marked with each store, delivered after).
//!
//! Run with: `cargo bench --bench history --all-features`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrobot::Agent;
use ferrobot::agent::TurnRequest;
use ferrobot::history::{HistoryStore, Intake, Mark, MemoryHistory, SqliteHistory};
use ferrobot::testing::MockProvider;
use ferrobot::{Message, ToolCall, ToolResult};
use serde_json::json;

const MESSAGES: usize = 10_000;

/// A step as the agent stores it: an assistant message with a tool call, and
/// its result; plus the user's messages between.
fn step(i: usize) -> Vec<Message> {
    vec![
        Message::user(format!("question {i}: how full is the disk on host-{i}?")),
        Message::new(
            ferrobot::Role::Assistant,
            vec![
                ferrobot::Part::text("Checking."),
                ferrobot::Part::ToolCall(ToolCall::new(
                    format!("c{i}"),
                    "disk_usage",
                    json!({"path": "/", "human": true}),
                )),
            ],
        ),
        Message::tool_results([ToolResult::ok(
            format!("c{i}"),
            "Filesystem 42G used 58G free (42%)",
        )]),
        Message::assistant(format!("Host-{i} has 58 GB free.")),
    ]
}

fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrobot-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("history.db")
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn history(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("sqlite_10k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(MESSAGES as u64));
    // Appends as the agent makes them: the user message alone, then the
    // assistant message with its result in one transaction, then the answer.
    group.bench_function("append", |b| {
        b.to_async(&runtime).iter_custom(|iters| async move {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let path = temp_db("append");
                let store = SqliteHistory::open(&path).await.expect("open");
                let started = Instant::now();
                for i in 0..MESSAGES / 4 {
                    let step = step(i);
                    store.append("c", &step[..1]).await.expect("append");
                    store.append("c", &step[1..3]).await.expect("append");
                    store.append("c", &step[3..]).await.expect("append");
                }
                total += started.elapsed();
                let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
            }
            total
        });
    });
    let path = temp_db("load");
    let store = runtime.block_on(async {
        let store = SqliteHistory::open(&path).await.expect("open");
        for i in 0..MESSAGES / 4 {
            store.append("c", &step(i)).await.expect("append");
        }
        store
    });
    group.bench_function("load", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(store.load("c").await.expect("load")) });
    });
    group.finish();
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));

    // Memory of 10,000 in-memory conversations of one step each.
    let before = rss_kib();
    let memory = runtime.block_on(async {
        let store = MemoryHistory::new();
        for i in 0..10_000 {
            store
                .append(&format!("user-{i}"), &step(i))
                .await
                .expect("append");
        }
        store
    });
    let after = rss_kib();
    eprintln!(
        "memory: 10000 in-memory conversations of 4 messages: +{} KiB ({:.1} KiB per conversation)",
        after - before,
        (after - before) as f64 / 10_000.0
    );
    black_box(memory);
}

/// 100 one-answer turns on a SQLite file, each in a conversation of its
/// own, with and without the journal.
fn journal(c: &mut Criterion) {
    const TURNS: usize = 100;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("sqlite_turns");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(TURNS as u64));
    for journaled in [false, true] {
        let name = if journaled {
            "journaled"
        } else {
            "unjournaled"
        };
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter_custom(|iters| async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let path = temp_db(name);
                    let store = SqliteHistory::open(&path).await.expect("open");
                    let agent = Agent::builder()
                        .provider(MockProvider::replying("Disk / has 42 GB free."))
                        .history(store.clone())
                        .build();
                    let started = Instant::now();
                    for i in 0..TURNS {
                        let conversation = format!("chat-{i}");
                        let request = TurnRequest::new("how full is the disk?");
                        if !journaled {
                            agent.handle(&conversation, request).await.expect("turn");
                            continue;
                        }
                        let id = format!("bench:{i}");
                        let intake = Intake::new(&id, &conversation, "how full is the disk?");
                        store.receive(&intake).await.expect("receive");
                        agent
                            .handle(&conversation, request.journal(&id))
                            .await
                            .expect("turn");
                        store.mark(&id, &Mark::Delivered).await.expect("mark");
                    }
                    total += started.elapsed();
                    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, history, journal);
criterion_main!(benches);
