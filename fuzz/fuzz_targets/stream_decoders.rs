//! Each dialect's answer decoder (SSE and NDJSON framing, chunk decoding,
//! and the non-streamed JSON bodies) on arbitrary bytes cut at arbitrary
//! points, the events assembled: never a panic, never a hang.
#![no_main]

use std::sync::Arc;

use ferrobot::Message;
use ferrobot::provider::{
    Anthropic, Assembler, ChatRequest, Gemini, Ollama, OpenAiCompatible, OpenAiResponses, Provider,
    Replay, RetryPolicy,
};
use ferrobot_fuzz::{Answer, block_on, split};
use futures_util::StreamExt as _;

const URL: &str = "http://fuzz.invalid";

fn drain(provider: &dyn Provider) {
    let messages = [Message::user("hi")];
    block_on(async {
        let mut stream = provider.stream(ChatRequest::new(&messages));
        let mut assembler = Assembler::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => assembler.push(&event),
                Err(_) => break,
            }
        }
        let _ = assembler.finish();
    });
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((which, cuts, body)) = split(data) else {
        return;
    };
    let sse = |body| Answer::new("text/event-stream", cuts, body) as Arc<dyn Replay>;
    let json = |body| Answer::new("application/json", cuts, body) as Arc<dyn Replay>;
    let none = RetryPolicy::none;
    match which % 7 {
        0 => drain(
            &OpenAiCompatible::new(format!("{URL}/v1"))
                .model("m")
                .retry(none())
                .replay(sse(body)),
        ),
        1 => drain(
            &OpenAiCompatible::new(format!("{URL}/v1"))
                .model("m")
                .streaming(false)
                .retry(none())
                .replay(json(body)),
        ),
        2 => drain(
            &Anthropic::with_base_url(URL)
                .model("m")
                .api_key("k")
                .retry(none())
                .replay(sse(body)),
        ),
        3 => drain(
            &Gemini::with_base_url(URL)
                .model("m")
                .api_key("k")
                .retry(none())
                .replay(sse(body)),
        ),
        4 => drain(
            &Ollama::new(URL)
                .model("m")
                .retry(none())
                .replay(Answer::new("application/x-ndjson", cuts, body)),
        ),
        5 => drain(
            &OpenAiResponses::new(format!("{URL}/v1"))
                .model("m")
                .api_key("k")
                .retry(none())
                .replay(sse(body)),
        ),
        _ => drain(
            &OpenAiResponses::new(format!("{URL}/v1"))
                .model("m")
                .api_key("k")
                .retry(none())
                .replay(json(body)),
        ),
    }
});
