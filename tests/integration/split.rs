//! Stream parsing must not depend on where the network cuts the bytes.

use ferrobot::Message;
use ferrobot::provider::{OpenAiCompatible, StreamEvent};
use ferrobot::testing::OpenAiStream;
use proptest::prelude::*;
use serde_json::json;

use crate::support::events;
use ferrobot_testkit::fault::{FaultServer, Script};

/// A stream with every shape of content: multi-byte text, think tags,
/// reasoning, interleaved tool-call fragments, comments, CRLF line ends and
/// a usage chunk.
fn fixture() -> Vec<u8> {
    let body = OpenAiStream::new()
        .chunk(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
        .text("<think>Привет, ")
        .text("мир 🦀</think>\n\nЖ")
        .reasoning("ok…")
        .text("Done ✅ ")
        .tool_call_fragment(
            json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"q\":\"é"}}),
        )
        .tool_call_fragment(
            json!({"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}),
        )
        .tool_call_fragment(json!({"index": 0, "function": {"arguments": "🦀\"}"}}))
        .finish("tool_calls")
        .usage(12, 34)
        .into_sse();
    let mut out = String::from(": keep-alive\n\n");
    for (i, event) in body.split("\n\n").filter(|e| !e.is_empty()).enumerate() {
        out.push_str(event);
        out.push_str(if i % 2 == 0 { "\r\n\r\n" } else { "\n\n" });
    }
    out.into_bytes()
}

fn run(pieces: Vec<Vec<u8>>) -> Vec<StreamEvent> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server =
            FaultServer::start([Script::chunked_complete("text/event-stream", pieces)]).await;
        let provider = OpenAiCompatible::new(format!("{}/v1", server.url())).model("m");
        events(&provider, &[Message::user("x")]).await.unwrap()
    })
}

/// What the events say, with adjacent deltas of one kind joined: a split may
/// cut a delta in two only where the think-tag splitter holds text back.
fn normalise(events: Vec<StreamEvent>) -> Vec<StreamEvent> {
    let mut out: Vec<StreamEvent> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(StreamEvent::TextDelta(a)), StreamEvent::TextDelta(b))
            | (Some(StreamEvent::ReasoningDelta(a)), StreamEvent::ReasoningDelta(b)) => {
                a.push_str(&b)
            }
            (_, event) => out.push(event),
        }
    }
    out
}

#[test]
fn the_fixture_decodes_as_intended() {
    let events = normalise(run(vec![fixture()]));
    assert_eq!(
        events[0],
        StreamEvent::ReasoningDelta("Привет, мир 🦀".into())
    );
    assert_eq!(events[1], StreamEvent::TextDelta("Ж".into()));
    assert!(events.contains(&StreamEvent::Usage(ferrobot::Usage {
        input_tokens: 12,
        output_tokens: 34,
        ..Default::default()
    })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_split_into_reads_gives_the_same_events(mut cuts in prop::collection::vec(0usize..2000, 0..40)) {
        let body = fixture();
        let whole = normalise(run(vec![body.clone()]));
        cuts.iter_mut().for_each(|c| *c %= body.len());
        cuts.sort_unstable();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts {
            pieces.push(body[start..cut].to_vec());
            start = cut;
        }
        pieces.push(body[start..].to_vec());
        prop_assert_eq!(normalise(run(pieces)), whole);
    }
}
