//! The soak: 10,000 conversations × 5 turns, each turn a tool round (the
//! model calls `add`, then answers), against a scripted OpenAI-compatible
//! server over loopback (in this process, keeping nothing), with the
//! conversations in a SQLite file. After each 1,000 conversations it
//! reports the resident memory, the open files, the runtime's live tasks,
//! the threads and the turns' latency; at the end it fails when files,
//! tasks or threads kept growing after warm-up, or memory did.
//!
//! Run with: `cargo bench --bench soak` (`SOAK_CONVERSATIONS=2000` for a
//! shorter one). Not part of `.ci/run`: it takes about a minute after a
//! release build of a few.

#[path = "common/add.rs"]
mod add;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrobot::Agent;
use ferrobot::history::SqliteHistory;
use ferrobot::provider::OpenAiCompatible;
use ferrobot::testing::OpenAiStream;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const TURNS: usize = 5;
/// Conversations served at once, each one turn after another.
const AT_ONCE: usize = 32;
const WINDOW: usize = 1_000;

/// The model: a call of `add` after a user's message, a short answer after
/// the tool's result.
fn answer(request: &[u8]) -> String {
    let body: Value = serde_json::from_slice(request).unwrap_or_default();
    let last = body["messages"].as_array().and_then(|m| m.last());
    if last.is_some_and(|m| m["role"] == "tool") {
        OpenAiStream::new()
            .text("It is ")
            .text("5.")
            .finish("stop")
            .usage(80, 4)
            .into_sse()
    } else {
        OpenAiStream::new()
            .tool_call("call_1", "add", &json!({"a": 2, "b": 3}))
            .finish("tool_calls")
            .usage(60, 12)
            .into_sse()
    }
}

/// Serves [`answer`] on `listener`, keeping nothing of what it was sent
/// (wiremock keeps every request it matched).
async fn serve_model(listener: tokio::net::TcpListener) {
    let respond = service_fn(|request: hyper::Request<Incoming>| async move {
        let body = request.into_body().collect().await?.to_bytes();
        let response = hyper::Response::builder()
            .header("content-type", "text/event-stream")
            .body(Full::new(Bytes::from(answer(&body))))
            .expect("a response");
        Ok::<_, hyper::Error>(response)
    });
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), respond));
    }
}

/// A number from this process's `/proc/self/status` line `key:`.
fn status(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// This process's resident memory, in MiB.
fn rss_mib() -> f64 {
    status("VmRSS") / 1024.0
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

struct Sample {
    conversations: usize,
    rss: f64,
    files: usize,
    tasks: usize,
    threads: usize,
}

fn main() {
    let conversations: usize = std::env::var("SOAK_CONVERSATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    // The default runtime on this machine, as a bot gets it.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(soak(conversations));
}

async fn soak(conversations: usize) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(serve_model(listener));
    let dir = std::env::temp_dir().join(format!("ferrobot-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let store = SqliteHistory::open(dir.join("history.db"))
        .await
        .expect("the history file");
    let agent = Agent::builder()
        .provider(OpenAiCompatible::new(format!("http://{address}/v1")).model("soak"))
        .history(store)
        .tool(add::add_tool())
        .build();
    let metrics = tokio::runtime::Handle::current().metrics();
    println!(
        "soak: {conversations} conversations x {TURNS} turns (a tool round each), {AT_ONCE} at once, SQLite"
    );
    println!(
        "{:>7} {:>9} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "convs",
        "RSS MiB",
        "files",
        "tasks",
        "threads",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "turns/s"
    );
    let agent = Arc::new(agent);
    let mut samples = Vec::new();
    let mut done = 0;
    while done < conversations {
        let window = WINDOW.min(conversations - done);
        let started = Instant::now();
        let mut latencies: Vec<Duration> = futures_util::stream::iter(done..done + window)
            .map(|n| {
                let agent = Arc::clone(&agent);
                async move {
                    let mut times = Vec::with_capacity(TURNS);
                    for turn in 0..TURNS {
                        let asked = Instant::now();
                        let reply = agent
                            .handle(&format!("soak-{n}"), format!("what is 2 + 3? ({turn})"))
                            .await
                            .unwrap_or_else(|e| panic!("turn {turn} of conversation {n}: {e}"));
                        assert_eq!(reply.text, "It is 5.");
                        assert_eq!(reply.tool_calls.len(), 1);
                        times.push(asked.elapsed());
                    }
                    times
                }
            })
            .buffer_unordered(AT_ONCE)
            .flat_map(futures_util::stream::iter)
            .collect()
            .await;
        let took = started.elapsed();
        done += window;
        latencies.sort();
        let sample = Sample {
            conversations: done,
            rss: rss_mib(),
            files: open_files(),
            tasks: metrics.num_alive_tasks(),
            threads: status("Threads") as usize,
        };
        println!(
            "{:>7} {:>9.1} {:>6} {:>6} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.0}",
            sample.conversations,
            sample.rss,
            sample.files,
            sample.tasks,
            sample.threads,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.9),
            percentile(&latencies, 0.99),
            percentile(&latencies, 1.0),
            latencies.len() as f64 / took.as_secs_f64(),
        );
        samples.push(sample);
    }
    let stored = agent.history().list().await.expect("the list").len();
    let _ = std::fs::remove_dir_all(&dir);
    let mut leaks = Vec::new();
    if stored != conversations {
        leaks.push(format!(
            "{stored} conversations stored, not {conversations}"
        ));
    }
    // Warm-up is the first window: the HTTP pool's connections (and the
    // server's tasks for them), SQLite's page cache.
    // Between windows every turn has ended, so after it nothing may grow:
    // memory within 10 %, the rest within a few.
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    for (what, before, after) in [
        ("open files", first.files, last.files),
        ("live tasks", first.tasks, last.tasks),
        ("threads", first.threads, last.threads),
    ] {
        if after > before + 4 {
            leaks.push(format!(
                "{what}: {before} after {} conversations, {after} after {}",
                first.conversations, last.conversations
            ));
        }
    }
    if last.rss > first.rss * 1.10 {
        leaks.push(format!(
            "memory grew after warm-up: {:.1} MiB after {} conversations, {:.1} MiB after {}",
            first.rss, first.conversations, last.rss, last.conversations
        ));
    }
    if !leaks.is_empty() {
        eprintln!("soak: leaks:\n  {}", leaks.join("\n  "));
        std::process::exit(1);
    }
    println!("soak: nothing left behind");
}
