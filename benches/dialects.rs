//! The same answer, 3,000 text deltas, in each streaming dialect's wire
//! format, served over loopback and parsed + assembled by its provider. The
//! figures compare the dialects' decoders on one footing (events per
//! second), with the OpenAI-compatible decoder as the reference.
//!
//! Run with: `cargo bench --bench dialects --all-features`

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrobot::Message;
use ferrobot::provider::{
    Anthropic, Assembler, ChatRequest, Gemini, OpenAiCompatible, OpenAiResponses, Provider,
};
use ferrobot::testing::OpenAiStream;
use futures_util::StreamExt;
use serde_json::json;

const DELTAS: usize = 3_000;

/// Makes a dialect's provider for a server root.
type Make = fn(&str) -> Box<dyn Provider>;

fn word(i: usize) -> String {
    format!("word{i} ")
}

fn openai() -> String {
    let mut stream = OpenAiStream::new();
    for i in 0..DELTAS {
        stream = stream.text(&word(i));
    }
    stream.finish("stop").usage(10, DELTAS as u64).into_sse()
}

fn named(events: impl IntoIterator<Item = serde_json::Value>) -> String {
    events
        .into_iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().expect("typed event")
            )
        })
        .collect()
}

fn anthropic() -> String {
    let mut events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    events.extend((0..DELTAS).map(|i| json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word(i)}})));
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": DELTAS}}),
        json!({"type": "message_stop"}),
    ]);
    named(events)
}

fn gemini() -> String {
    (0..DELTAS)
        .map(|i| {
            let mut chunk = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": word(i)}]}}]});
            if i + 1 == DELTAS {
                chunk["candidates"][0]["finishReason"] = json!("STOP");
                chunk["usageMetadata"] = json!({"promptTokenCount": 10, "candidatesTokenCount": DELTAS});
            }
            format!("data: {chunk}\r\n\r\n")
        })
        .collect()
}

fn responses() -> String {
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}}),
    ];
    events.extend((0..DELTAS).map(|i| json!({"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "delta": word(i)})));
    events.push(json!({"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 10, "output_tokens": DELTAS}}}));
    named(events)
}

async fn parse_and_assemble(provider: &dyn Provider, messages: &[Message]) -> String {
    let mut events = provider.stream(ChatRequest::new(messages));
    let mut assembler = Assembler::new();
    while let Some(event) = events.next().await {
        assembler.push(&event.expect("a well-formed stream"));
    }
    assembler.finish().message.text()
}

fn dialects(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let expected: String = (0..DELTAS).map(word).collect();
    let messages = [Message::user("hi")];
    let mut group = c.benchmark_group("dialects");
    group
        .throughput(Throughput::Elements(DELTAS as u64))
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let cases: [(&str, String, Make); 4] = [
        ("openai", openai(), |url| {
            Box::new(OpenAiCompatible::new(format!("{url}/v1")).model("m"))
        }),
        ("anthropic", anthropic(), |url| {
            Box::new(Anthropic::with_base_url(url).model("m"))
        }),
        ("gemini", gemini(), |url| {
            Box::new(Gemini::with_base_url(url).model("m"))
        }),
        ("responses", responses(), |url| {
            Box::new(OpenAiResponses::new(format!("{url}/v1")).model("m"))
        }),
    ];
    for (name, body, provider) in cases {
        let response = common::sse_response(&body);
        let server = common::serve(move |_| response.clone());
        let provider = provider(&format!("http://{}", server.addr));
        assert_eq!(
            runtime.block_on(parse_and_assemble(provider.as_ref(), &messages)),
            expected,
            "{name}"
        );
        eprintln!("{name}: body {} bytes", body.len());
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                black_box(parse_and_assemble(provider.as_ref(), &messages).await)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, dialects);
criterion_main!(benches);
