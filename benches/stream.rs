//! Stream parse + assemble throughput: a ~1 MB chat-completions SSE body (text
//! deltas, then four tool calls whose arguments arrive interleaved in small
//! fragments) served over loopback HTTP, parsed by `OpenAiCompatible` and
//! folded by `Assembler`.
//!
//! Run with: `cargo bench --bench stream`
//!
//! Two references sit beside it in the group: `floor_parse_assemble`, a
//! plain reqwest + serde client doing the same folding (see
//! `common/floor.rs`), and `http_bytes_only`, which reads the response and
//! throws the bytes away: the transport's share of the time.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrobot::Message;
use ferrobot::provider::{Assembled, Assembler, ChatRequest, OpenAiCompatible, Provider};
use ferrobot::testing::OpenAiStream;
use futures_util::StreamExt;
use serde_json::{Value, json};

use common::floor::Floor;

/// Text deltas before the tool calls.
const TEXT_DELTAS: usize = 3_000;
/// Tool calls, streamed interleaved.
const CALLS: usize = 4;
/// Characters of `content` in each call's arguments.
const CONTENT_CHARS: usize = 3_000;

const QUESTION: &str = "Why is the disk filling up?";

const WORDS: [&str; 12] = [
    "The ",
    "disk ",
    "usage ",
    "on ",
    "/var ",
    "is ",
    "growing; ",
    "let ",
    "me ",
    "check ",
    "the ",
    "logs.\n",
];

/// What the body must assemble into.
struct Expected {
    text: String,
    arguments: Vec<Value>,
}

/// Builds the SSE body: text deltas of one word each, then `CALLS` tool calls
/// whose argument text comes in fragments of 1 to 7 bytes, round-robin
/// across the calls as parallel-tool-call models send them.
fn body() -> (String, Expected) {
    let mut stream = OpenAiStream::new();
    let mut text = String::new();
    for word in WORDS.iter().cycle().take(TEXT_DELTAS) {
        stream = stream.text(word);
        text.push_str(word);
    }
    let arguments: Vec<Value> = (0..CALLS)
        .map(|i| {
            let content: String = WORDS
                .iter()
                .cycle()
                .flat_map(|w| w.chars())
                .take(CONTENT_CHARS)
                .collect();
            json!({"path": format!("/tmp/report-{i}.md"), "content": content, "append": i % 2 == 0})
        })
        .collect();
    for (i, _) in arguments.iter().enumerate() {
        stream = stream.tool_call_fragment(json!({
            "index": i, "id": format!("call_{i}"), "type": "function",
            "function": {"name": "write_file", "arguments": ""}
        }));
    }
    let texts: Vec<String> = arguments.iter().map(Value::to_string).collect();
    let mut offsets = [0; CALLS];
    // A fixed linear congruential sequence: fragment sizes vary like tokens
    // do, and every run streams the same body.
    let mut seed: u32 = 0x2545_f491;
    let mut next_len = || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        1 + (seed >> 16) as usize % 7
    };
    while offsets.iter().zip(&texts).any(|(o, t)| *o < t.len()) {
        for (i, full) in texts.iter().enumerate() {
            let start = offsets[i];
            if start == full.len() {
                continue;
            }
            let end = (start + next_len()).min(full.len());
            offsets[i] = end;
            stream = stream.tool_call_fragment(json!({
                "index": i, "function": {"arguments": &full[start..end]}
            }));
        }
    }
    let body = stream.finish("tool_calls").usage(1_200, 4_000).into_sse();
    (body, Expected { text, arguments })
}

/// One model call: stream the events and fold them into a message.
async fn parse_and_assemble(provider: &OpenAiCompatible, messages: &[Message]) -> Assembled {
    let mut events = provider.stream(ChatRequest::new(messages));
    let mut assembler = Assembler::new();
    while let Some(event) = events.next().await {
        assembler.push(&event.expect("stream event"));
    }
    assembler.finish()
}

/// The same request with a bare client, discarding the body.
async fn bytes_only(client: &reqwest::Client, url: &str, request: &[u8]) -> usize {
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(request.to_vec())
        .send()
        .await
        .expect("response");
    let mut bytes = response.bytes_stream();
    let mut total = 0;
    while let Some(chunk) = bytes.next().await {
        total += chunk.expect("body chunk").len();
    }
    total
}

/// The floor's version: text and calls, arguments parsed as `Assembler` does.
async fn floor_parse_assemble(floor: &Floor) -> (String, Vec<Value>) {
    let (text, calls) = floor.call(&[Floor::user(QUESTION)]).await;
    let arguments = calls
        .into_iter()
        .map(|call| serde_json::from_str(&call.arguments).expect("arguments JSON"))
        .collect();
    (text, arguments)
}

fn check(assembled: &Assembled, expected: &Expected) {
    assert_eq!(assembled.message.text(), expected.text);
    let calls: Vec<_> = assembled.message.tool_calls().collect();
    assert_eq!(calls.len(), CALLS);
    for (i, (call, arguments)) in calls.iter().zip(&expected.arguments).enumerate() {
        assert_eq!(call.id, format!("call_{i}"));
        assert_eq!(call.name, "write_file");
        assert_eq!(&call.arguments, arguments);
    }
}

fn stream(c: &mut Criterion) {
    let (body, expected) = body();
    let response = common::sse_response(&body);
    let server = common::serve(move |_| response.clone());
    let url = format!("http://{}/v1", server.addr);
    // Current-thread: parsing and the connection's I/O share one core, so
    // the figure is CPU cost, not how well two cores overlap them.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let provider = OpenAiCompatible::new(&url).model("test");
    let messages = [Message::user(QUESTION)];
    check(
        &runtime.block_on(parse_and_assemble(&provider, &messages)),
        &expected,
    );
    let floor = Floor::new(server.addr, None);
    let (text, arguments) = runtime.block_on(floor_parse_assemble(&floor));
    assert_eq!(text, expected.text);
    assert_eq!(arguments, expected.arguments);
    // After `Floor::new`, which installs the crypto provider reqwest needs.
    let client = reqwest::Client::builder().build().expect("reqwest client");
    let endpoint = format!("{url}/chat/completions");
    let request = br#"{"model":"test","messages":[{"role":"user","content":"Why is the disk filling up?"}],"stream":true}"#;
    assert_eq!(
        runtime.block_on(bytes_only(&client, &endpoint, request)),
        body.len()
    );
    eprintln!(
        "stream: body {} bytes, {} SSE events",
        body.len(),
        body.matches("\n\n").count()
    );

    let mut group = c.benchmark_group("stream");
    group
        .throughput(Throughput::Bytes(body.len() as u64))
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("openai_parse_assemble", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(parse_and_assemble(&provider, &messages).await) });
    });
    group.bench_function("floor_parse_assemble", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(floor_parse_assemble(&floor).await) });
    });
    group.bench_function("http_bytes_only", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(bytes_only(&client, &endpoint, request).await) });
    });
    group.finish();
}

criterion_group!(benches, stream);
criterion_main!(benches);
