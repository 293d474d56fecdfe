//! Rows of the fault matrix (docs/reliability.md) over a real socket, the
//! raw-TCP fault server playing the misbehaving model server, each with
//! what the user sees asserted at the agent: a malformed chunk, a body
//! ending inside a UTF-8 character, a duplicate `[DONE]`, a 10 MB line, a
//! reset mid-stream — and what streamed before a failure kept marked
//! interrupted, never as a finished answer.

use ferrobot::Agent;
use ferrobot::provider::{OpenAiCompatible, RetryPolicy};
use ferrobot_testkit::fault::{FaultServer, Script, Step};

const HEL: &str = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}"#;
const LO: &str = r#"{"choices":[{"index":0,"delta":{"content":"lo."},"finish_reason":null}]}"#;
const STOP: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

/// Each piece its own write, as an SSE body.
fn sse(pieces: &[&[u8]]) -> Script {
    Script::chunked_complete("text/event-stream", pieces.iter().copied())
}

fn event(data: &str) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// An agent on the server answering with `script`, with no retries (the
/// fault reaches the turn as it came).
async fn agent(script: Script) -> (Agent, FaultServer) {
    let server = FaultServer::start([script]).await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.url()))
        .model("m")
        .retry(RetryPolicy::none());
    (Agent::builder().provider(provider).build(), server)
}

/// The turn's error as the user reads it, and what the conversation kept:
/// each message's text, and whether it is marked interrupted.
async fn failed(agent: &Agent) -> (String, Vec<(String, bool)>) {
    let error = agent.handle("c", "hi").await.unwrap_err();
    let kept = agent.history().load("c").await.unwrap();
    (
        error.user_message(),
        kept.iter().map(|m| (m.text(), m.interrupted)).collect(),
    )
}

/// The question, and the answer's start marked interrupted.
fn question_and_interrupted_start() -> Vec<(String, bool)> {
    vec![("hi".into(), false), ("Hel".into(), true)]
}

#[tokio::test]
async fn a_malformed_chunk_ends_the_turn_with_the_chunk_named() {
    let (agent, _server) = agent(sse(&[
        &event(HEL),
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":oops}}]}\n\n",
        &event(STOP),
    ]))
    .await;
    let (message, kept) = failed(&agent).await;
    assert!(message.starts_with("LLM unavailable: "), "{message}");
    assert!(message.contains("oops"), "the chunk is quoted: {message}");
    // The question is kept, and the answer's start only as interrupted.
    assert_eq!(kept, question_and_interrupted_start());
}

#[tokio::test]
async fn a_body_ending_inside_a_character_is_a_clear_error() {
    let mut cut = format!(
        "data: {}",
        r#"{"choices":[{"index":0,"delta":{"content":"caf"#
    )
    .into_bytes();
    cut.extend_from_slice(&"é".as_bytes()[..1]);
    let (agent, _server) = agent(sse(&[&event(HEL), &cut])).await;
    let (message, kept) = failed(&agent).await;
    assert!(message.contains("not valid UTF-8"), "{message}");
    assert_eq!(kept, question_and_interrupted_start());
}

#[tokio::test]
async fn a_second_done_changes_nothing() {
    let (agent, _server) = agent(sse(&[
        &event(HEL),
        &event(LO),
        &event(STOP),
        b"data: [DONE]\n\n",
        b"data: [DONE]\n\n",
    ]))
    .await;
    let reply = agent.handle("c", "hi").await.unwrap();
    assert_eq!(reply.text, "Hello.");
}

#[tokio::test]
async fn a_ten_megabyte_line_in_many_pieces_arrives_whole() {
    let text = "x".repeat(10 * 1024 * 1024);
    let line = event(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
    ));
    let pieces: Vec<&[u8]> = line.chunks(64 * 1024).collect();
    let mut all = pieces.clone();
    let stop = event(STOP);
    all.push(&stop);
    let (agent, _server) = agent(sse(&all)).await;
    let reply = agent.handle("c", "hi").await.unwrap();
    assert_eq!(reply.text.len(), text.len());
}

#[tokio::test]
async fn a_reset_mid_stream_ends_the_turn_keeping_its_start_as_interrupted() {
    let script = Script::chunked("text/event-stream", [event(HEL)])
        .then(Step::Pause(std::time::Duration::from_millis(20)))
        .then(Step::Reset);
    let (agent, _server) = agent(script).await;
    let (message, kept) = failed(&agent).await;
    assert!(message.starts_with("LLM unavailable: "), "{message}");
    assert!(message.contains("slash commands still work"), "{message}");
    assert_eq!(kept, question_and_interrupted_start());
}
