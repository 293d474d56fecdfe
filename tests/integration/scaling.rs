//! Nothing quadratic in the stream decoders: ten times the answer costs
//! about ten times the time, whether it comes as many small events or as
//! one long line in many pieces. Checked by ratio (a quadratic decoder
//! takes ~100×), never by an absolute time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrobot::Message;
use ferrobot::provider::{
    Anthropic, ChatRequest, Ollama, OpenAiCompatible, Provider, ProviderError, Replay, Replayed,
    RetryPolicy, WireRequest,
};
use futures_util::StreamExt as _;

/// Answers with `body` cut into pieces of `piece` bytes.
struct Pieces(Replayed);

impl Replay for Pieces {
    fn respond(&self, _: &WireRequest<'_>) -> Option<Result<Replayed, ProviderError>> {
        Some(Ok(self.0.clone()))
    }
}

fn pieces(content_type: &str, body: &[u8], piece: usize) -> Arc<dyn Replay> {
    let chunks = body
        .chunks(piece)
        .map(|c| (Duration::ZERO, Bytes::copy_from_slice(c)))
        .collect();
    Arc::new(Pieces(Replayed::new(
        200,
        vec![("content-type".into(), content_type.into())],
        chunks,
    )))
}

/// The fastest of three runs of the whole answer, read and assembled.
async fn time(provider: &dyn Provider) -> Duration {
    let messages = [Message::user("hi")];
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let mut stream = provider.stream(ChatRequest::new(&messages));
        let mut text = 0;
        while let Some(event) = stream.next().await {
            if let ferrobot::provider::StreamEvent::TextDelta(delta) = event.unwrap() {
                text += delta.len();
            }
        }
        assert!(text > 0);
        best = best.min(started.elapsed());
    }
    best
}

/// Times `make(size)` at 100 KB and 1 MB and checks the ratio.
async fn linear(what: &str, make: impl Fn(usize) -> Box<dyn Provider>) {
    // Warm: the first run pays for lazy set-up.
    time(make(10_000).as_ref()).await;
    let small = time(make(100_000).as_ref()).await;
    let large = time(make(1_000_000).as_ref()).await;
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < 40.0,
        "{what}: 10× the answer took {ratio:.1}× the time ({small:?} → {large:?}): something is quadratic"
    );
}

/// OpenAI's SSE: `size` bytes of text in 20-byte deltas.
fn openai_events(size: usize) -> Vec<u8> {
    let mut body = String::new();
    for _ in 0..size / 20 {
        body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"twenty bytes of text\"}}]}\n\n");
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    body.into_bytes()
}

/// OpenAI's SSE: one delta of `size` bytes, on one line.
fn openai_line(size: usize) -> Vec<u8> {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\ndata: [DONE]\n\n",
        "x".repeat(size)
    )
    .into_bytes()
}

fn openai(body: &[u8], piece: usize) -> Box<dyn Provider> {
    Box::new(
        OpenAiCompatible::new("http://scaling.invalid/v1")
            .model("m")
            .retry(RetryPolicy::none())
            .replay(pieces("text/event-stream", body, piece)),
    )
}

#[tokio::test]
async fn openai_sse_decodes_in_linear_time() {
    linear("many small events", |size| {
        openai(&openai_events(size), 1_000)
    })
    .await;
    linear("one long line in 1 KB pieces", |size| {
        openai(&openai_line(size), 1_000)
    })
    .await;
}

#[tokio::test]
async fn anthropic_sse_decodes_in_linear_time() {
    let events = |size: usize| {
        let mut body = String::from(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        );
        for _ in 0..size / 20 {
            body.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"twenty bytes of text\"}}\n\n");
        }
        body.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        body.into_bytes()
    };
    linear("Anthropic events", |size| {
        Box::new(
            Anthropic::with_base_url("http://scaling.invalid")
                .model("m")
                .api_key("k")
                .retry(RetryPolicy::none())
                .replay(pieces("text/event-stream", &events(size), 1_000)),
        )
    })
    .await;
}

#[tokio::test]
async fn ollama_ndjson_decodes_in_linear_time() {
    let lines = |size: usize| {
        let mut body = String::new();
        for _ in 0..size / 20 {
            body.push_str("{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"twenty bytes of text\"},\"done\":false}\n");
        }
        body.push_str("{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\"}\n");
        body.into_bytes()
    };
    linear("Ollama lines", |size| {
        Box::new(
            Ollama::new("http://scaling.invalid")
                .model("m")
                .retry(RetryPolicy::none())
                .replay(pieces("application/x-ndjson", &lines(size), 1_000)),
        )
    })
    .await;
}
