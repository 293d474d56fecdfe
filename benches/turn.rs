//! Agent turn overhead on `MockProvider`: one tool round (tool call, `add`
//! tool, final text) per `Agent::handle`, and 10,000 conversations doing the
//! same round concurrently, with their resident memory.
//!
//! Run with: `cargo bench --bench turn`
//!
//! Memory is read from `/proc/self/status` (`VmRSS`, and `VmHWM` after
//! resetting it through `/proc/self/clear_refs`) and printed to stderr. Each
//! figure comes from a fresh child process (this binary, re-run with
//! `FERROBOT_BENCH_MEMORY` set), because heap freed by one run stays mapped by
//! the allocator and would hide the next run's growth. Besides
//! `MockProvider`, which keeps a copy of every request, the memory runs use a
//! provider that records nothing, to show what the agent itself holds.

#[path = "common/add.rs"]
mod add;

use add::add_tool;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use ferrobot::provider::{
    ChatRequest, EventStream, FinishReason, Health, Provider, StreamEvent, ToolCallDelta,
};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, Role};
use futures_util::future::BoxFuture;
use futures_util::{StreamExt, stream};
use serde_json::json;
use tokio::task::JoinSet;

/// Conversations in the concurrent benchmark.
const CONVERSATIONS: usize = 10_000;
/// Turns per agent in the per-turn benchmark. `MockProvider` records every
/// request and the history keeps every conversation, so a fresh agent every
/// batch keeps memory (and the cost of growing those vectors) bounded.
const BATCH: u64 = 1_000;

/// Calls `add` unless the last message is a tool result, then answers.
/// `latency` is waited before each event, like a model that takes time.
fn mock(latency: Duration) -> MockProvider {
    MockProvider::from_fn(move |request| {
        let after_tool = request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Tool);
        let turn = if after_tool {
            MockTurn::new().text("2 + 3 = 5")
        } else {
            MockTurn::new().tool_call("add", json!({"a": 2, "b": 3}))
        };
        turn.delay(latency)
    })
}

/// The answers of [`mock`] without recording anything: the agent's own cost.
#[derive(Debug)]
struct Scripted {
    latency: Duration,
}

impl Provider for Scripted {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        let after_tool = request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Tool);
        let events = if after_tool {
            vec![
                StreamEvent::TextDelta("2 + 3 = 5".to_owned()),
                StreamEvent::Finish(FinishReason::Stop),
            ]
        } else {
            vec![
                StreamEvent::ToolCallDelta(ToolCallDelta {
                    index: 0,
                    id: Some("call_1".to_owned()),
                    name: Some("add".to_owned()),
                    arguments: r#"{"a":2,"b":3}"#.to_owned(),
                }),
                StreamEvent::Finish(FinishReason::ToolCalls),
            ]
        };
        let latency = self.latency;
        stream::iter(events)
            .then(move |event| async move {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                Ok(event)
            })
            .boxed()
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async { Health::ok(Duration::ZERO) })
    }

    fn name(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        "scripted"
    }
}

/// Which provider the agent gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `MockProvider`, which records every request.
    Mock,
    /// [`Scripted`], which records nothing.
    Plain,
}

fn agent(kind: Kind, latency: Duration) -> Agent {
    let builder = Agent::builder().tool(add_tool());
    match kind {
        Kind::Mock => builder.provider(mock(latency)).build(),
        Kind::Plain => builder.provider(Scripted { latency }).build(),
    }
}

fn check(reply: &ferrobot::Reply) {
    assert_eq!(reply.text, "2 + 3 = 5");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].content, "5");
}

/// Runs one tool round in each of `CONVERSATIONS` conversations at once.
async fn concurrent(agent: &Agent) -> Duration {
    let started = Instant::now();
    let mut turns = JoinSet::new();
    for i in 0..CONVERSATIONS {
        let agent = agent.clone();
        turns.spawn(async move { agent.handle(&format!("user-{i}"), "what is 2 + 3?").await });
    }
    while let Some(reply) = turns.join_next().await {
        check(&reply.expect("turn task").expect("turn"));
    }
    started.elapsed()
}

/// `VmRSS` and `VmHWM` in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The memory runs: label, provider, model latency.
const MEMORY_RUNS: [(&str, Kind, Duration); 3] = [
    // With every turn parked on the model's latency, all 10,000 are in
    // flight at once, so the peak is the real concurrent footprint.
    ("mock_latency_1ms", Kind::Mock, Duration::from_millis(1)),
    ("plain_latency_1ms", Kind::Plain, Duration::from_millis(1)),
    ("mock_instant", Kind::Mock, Duration::ZERO),
];

const MEMORY_ENV: &str = "FERROBOT_BENCH_MEMORY";

/// In a child process: prints the resident memory of one concurrent run,
/// before, at the peak, and after with the agent (history, recorded
/// requests) still alive.
fn report_memory(label: &str) {
    let (_, kind, latency) = MEMORY_RUNS
        .into_iter()
        .find(|(l, ..)| *l == label)
        .expect("known memory run");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let agent = agent(kind, latency);
    // "5" resets VmHWM to the current VmRSS (Linux 4.0+); where that fails,
    // the peak printed is the process's lifetime peak.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let future_bytes = std::mem::size_of_val(&agent.handle("size", "of the turn future"));
    let (before, _) = memory();
    let elapsed = runtime.block_on(concurrent(&agent));
    let (after, peak) = memory();
    let grown = peak.saturating_sub(before);
    eprintln!(
        "turn_10k_concurrent memory, {label}: {CONVERSATIONS} conversations in {elapsed:.2?}; \
         VmRSS before {before} KiB, peak {peak} KiB (+{grown} KiB, {:.1} KiB per conversation{}), \
         after {after} KiB with the agent alive; an `Agent::handle` future is {future_bytes} bytes",
        grown as f64 / CONVERSATIONS as f64,
        if reset { "" } else { "; VmHWM not reset" },
    );
}

/// Runs each memory run in a fresh copy of this process.
fn memory_runs() {
    let exe = std::env::current_exe().expect("bench executable");
    for (label, ..) in MEMORY_RUNS {
        let status = std::process::Command::new(&exe)
            .env(MEMORY_ENV, label)
            .status()
            .expect("memory run");
        assert!(status.success(), "memory run {label} failed");
    }
}

fn turn(c: &mut Criterion) {
    if let Ok(label) = std::env::var(MEMORY_ENV) {
        report_memory(&label);
        std::process::exit(0);
    }
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let multi = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for kind in [Kind::Mock, Kind::Plain] {
        check(
            &single
                .block_on(agent(kind, Duration::ZERO).handle("alice", "what is 2 + 3?"))
                .expect("turn"),
        );
    }
    memory_runs();

    let mut group = c.benchmark_group("turn");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for (label, kind) in [
        ("one_tool_round/mock", Kind::Mock),
        ("one_tool_round/plain", Kind::Plain),
    ] {
        group.bench_function(label, |b| {
            b.to_async(&single).iter_custom(|iters| async move {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let batch = (iters - done).min(BATCH);
                    let agent = agent(kind, Duration::ZERO);
                    let ids: Vec<String> = (0..batch).map(|i| format!("user-{i}")).collect();
                    let started = Instant::now();
                    for id in &ids {
                        black_box(agent.handle(id, "what is 2 + 3?").await.expect("turn"));
                    }
                    total += started.elapsed();
                    done += batch;
                }
                total
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("turn_10k_concurrent");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    for (label, latency) in [
        ("instant", Duration::ZERO),
        ("model_latency_1ms", Duration::from_millis(1)),
    ] {
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let agent = agent(Kind::Mock, latency);
                        multi.block_on(concurrent(&agent))
                    })
                    .sum()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, turn);
criterion_main!(benches);
