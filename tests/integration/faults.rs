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

#[tokio::test]
async fn arguments_over_the_cap_are_dropped_and_the_call_refused_with_why() {
    use ferrobot::agent::ToolOutcome;
    use ferrobot::provider::MAX_TOOL_ARGUMENTS;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::from_fn;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // `{"text":"xxx…"}` of exactly `size` bytes.
    let arguments = |size: usize| format!(r#"{{"text":"{}"}}"#, "x".repeat(size - 11));
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&ran);
    let echo = from_fn("echo", "Echo.", move |v: serde_json::Value, _ctx| {
        counted.fetch_add(1, Ordering::Relaxed);
        async move { v["text"].as_str().map_or(0, str::len) }
    });
    let mock = MockProvider::new()
        .then(MockTurn::new().raw_tool_call("c1", "echo", arguments(MAX_TOOL_ARGUMENTS + 1)))
        .then(MockTurn::new().text("Too long, then."))
        .then(MockTurn::new().raw_tool_call("c2", "echo", arguments(MAX_TOOL_ARGUMENTS)))
        .then(MockTurn::new().text("Done."));
    let agent = Agent::builder().provider(mock.clone()).tool(echo).build();

    let over = agent.handle("c", "echo a lot").await.unwrap();
    assert_eq!(over.text, "Too long, then.");
    assert_eq!(over.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert_eq!(
        over.tool_calls[0].content,
        format!(
            "Not run: the arguments of `echo` were {} bytes, more than the 1 MiB a call may carry, and were not read. Call it again with less: a path or a name rather than the content.",
            MAX_TOOL_ARGUMENTS + 1
        )
    );
    assert_eq!(ran.load(Ordering::Relaxed), 0, "the tool did not run");
    // The history keeps the call's size, not its megabyte.
    let kept = agent.history().load("c").await.unwrap();
    let stored = serde_json::to_string(&kept).unwrap();
    assert!(stored.len() < 10_000, "{} bytes stored", stored.len());

    // Exactly at the cap, the call runs.
    let at = agent.handle("c", "echo exactly that much").await.unwrap();
    assert_eq!(at.text, "Done.");
    assert_eq!(at.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(ran.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_ten_megabyte_result_is_cut_at_the_cap_saying_how_long_it_was() {
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::{MAX_TOOL_RESULT, from_fn};
    use serde_json::json;

    let dump = from_fn("dump", "Dumps.", |v: serde_json::Value, _ctx| async move {
        // Multi-byte characters, so the cut must find a boundary.
        "é".repeat(v["chars"].as_u64().unwrap_or(0) as usize)
    });
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("dump", json!({"chars": 5 * 1024 * 1024})))
        .then(MockTurn::new().text("Cut."))
        .then(MockTurn::new().tool_call("dump", json!({"chars": MAX_TOOL_RESULT / 2})))
        .then(MockTurn::new().text("Whole."));
    let agent = Agent::builder().provider(mock.clone()).tool(dump).build();

    let cut = agent.handle("c", "dump 10 MB").await.unwrap();
    let content = &cut.tool_calls[0].content;
    let (kept, note) = content.rsplit_once('\n').unwrap();
    assert_eq!(kept.len(), MAX_TOOL_RESULT);
    assert_eq!(
        note,
        format!(
            "[output cut: {} bytes in all, the first {MAX_TOOL_RESULT} kept. Ask for less, or for a part.]",
            10 * 1024 * 1024
        )
    );
    // The model was given the cut result, not the 10 MB.
    let sent = serde_json::to_string(&mock.requests()[1].messages).unwrap();
    assert!(
        sent.len() < 2 * MAX_TOOL_RESULT,
        "{} bytes sent",
        sent.len()
    );

    // Exactly at the cap: whole.
    let whole = agent.handle("c", "dump 1 MiB").await.unwrap();
    assert_eq!(whole.tool_calls[0].content.len(), MAX_TOOL_RESULT);
}

/// A whole HTTP response with extra header lines.
fn status(code: u16, headers: &str, body: &str) -> Script {
    let reason = match code {
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Error",
    };
    Script::raw(format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n{body}",
        body.len()
    ))
}

fn hello() -> Script {
    sse(&[&event(HEL), &event(LO), &event(STOP), b"data: [DONE]\n\n"])
}

/// An agent retrying quickly on the server playing `scripts`, one a
/// connection; the reply, how long it took and how many requests came.
async fn retried(scripts: Vec<Script>) -> (Result<String, String>, std::time::Duration, usize) {
    let server = FaultServer::start(scripts).await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.url()))
        .model("m")
        .retry(
            RetryPolicy::builder()
                .initial_backoff(std::time::Duration::from_millis(20))
                .max_retry_after(std::time::Duration::from_secs(5))
                .build(),
        );
    let agent = Agent::builder().provider(provider).build();
    let started = std::time::Instant::now();
    let reply = agent.handle("c", "hi").await;
    (
        reply.map(|r| r.text).map_err(|e| e.user_message()),
        started.elapsed(),
        server.requests().len(),
    )
}

const BUSY: &str = r#"{"error":{"message":"slow down"}}"#;

#[tokio::test]
async fn a_429_is_retried_after_the_wait_it_names_in_seconds_or_as_a_date() {
    let (reply, took, asked) =
        retried(vec![status(429, "retry-after: 1\r\n", BUSY), hello()]).await;
    assert_eq!(reply.unwrap(), "Hello.");
    assert!(took >= std::time::Duration::from_secs(1), "{took:?}");
    assert_eq!(asked, 2);
    // As an HTTP date, two seconds from now (at least one, whole seconds).
    let date =
        httpdate::fmt_http_date(std::time::SystemTime::now() + std::time::Duration::from_secs(2));
    let (reply, took, asked) = retried(vec![
        status(429, &format!("retry-after: {date}\r\n"), BUSY),
        hello(),
    ])
    .await;
    assert_eq!(reply.unwrap(), "Hello.");
    assert!(took >= std::time::Duration::from_millis(900), "{took:?}");
    assert_eq!(asked, 2);
}

#[tokio::test]
async fn a_429_without_a_wait_and_a_500_are_retried_with_back_off() {
    let (reply, _, asked) = retried(vec![
        status(429, "", BUSY),
        status(500, "", r#"{"error":{"message":"oops"}}"#),
        hello(),
    ])
    .await;
    assert_eq!(reply.unwrap(), "Hello.");
    assert_eq!(asked, 3);
}

#[tokio::test]
async fn a_wait_longer_than_allowed_is_not_taken_and_says_why() {
    let (reply, took, asked) =
        retried(vec![status(429, "retry-after: 3600\r\n", BUSY), hello()]).await;
    let message = reply.unwrap_err();
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    assert_eq!(asked, 1, "not retried");
    assert!(
        message.contains("429") && message.contains("slow down"),
        "{message}"
    );
}

#[tokio::test]
async fn a_500_every_time_gives_up_naming_the_tries_and_the_server_s_words() {
    let oops = status(500, "", r#"{"error":{"message":"model crashed"}}"#);
    let (reply, _, asked) = retried(vec![oops]).await;
    let message = reply.unwrap_err();
    assert_eq!(asked, 3);
    assert!(message.starts_with("LLM unavailable: "), "{message}");
    assert!(
        message.contains("500") && message.contains("model crashed"),
        "{message}"
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_says_where_to_point_the_base_url() {
    let moved = status(
        308,
        "location: https://new.example/v1/chat/completions\r\n",
        "",
    );
    let (reply, _, asked) = retried(vec![moved, hello()]).await;
    let message = reply.unwrap_err();
    assert_eq!(asked, 1, "neither followed nor retried");
    assert!(
        message.contains("308")
            && message.contains("redirects to https://new.example/v1/chat/completions")
            && message.contains("set the base URL"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_quoting_the_refused_key_has_it_masked_in_the_error() {
    const KEY: &str = "sk-quoted-back-1234";
    let server = FaultServer::start([status(
        401,
        "",
        &format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}."}}}}"#),
    )])
    .await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.url()))
        .model("m")
        .api_key(KEY)
        .retry(RetryPolicy::none());
    let agent = Agent::builder().provider(provider).build();
    let error = agent.handle("c", "hi").await.unwrap_err();
    let shown = format!(
        "{} | {}",
        error.user_message(),
        ferrobot::error_chain(&error)
    );
    assert!(!shown.contains(KEY), "{shown}");
    assert!(
        shown.contains("Incorrect API key provided: [redacted]."),
        "{shown}"
    );
}

/// The first error a provider with a 300 ms read time-out and no retries
/// meets on the server playing `script`, and how long it took to come.
async fn first_error(script: Script) -> (ferrobot::provider::ProviderError, std::time::Duration) {
    use ferrobot::provider::{ChatRequest, Provider};
    use futures_util::StreamExt;
    let server = FaultServer::start([script]).await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.url()))
        .model("m")
        .retry(RetryPolicy::none())
        .timeouts(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_millis(300),
        );
    let messages = [ferrobot::Message::user("hi")];
    let started = std::time::Instant::now();
    let error = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        provider.stream(ChatRequest::new(&messages)).next(),
    )
    .await
    .expect("the error comes, rather than a wait for ever")
    .expect("an error, not the end of the stream")
    .unwrap_err();
    (error, started.elapsed())
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_after_the_read_time_out() {
    // The connection is taken and the request read, and nothing comes back.
    let (error, waited) = first_error(Script(vec![Step::Stall])).await;
    assert!(
        matches!(error, ferrobot::provider::ProviderError::Timeout { .. }),
        "{error}"
    );
    assert!(
        error.to_string().ends_with("did not answer within 300ms"),
        "{error}"
    );
    assert!(
        waited >= std::time::Duration::from_millis(300)
            && waited < std::time::Duration::from_secs(3),
        "gave up after {waited:?}"
    );
}

#[tokio::test]
async fn an_error_whose_body_never_ends_is_reported_after_the_read_time_out() {
    // A 500 whose head promises a body that never comes: the status is
    // still reported, rather than the turn waiting for ever.
    let head = "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n\
                content-length: 100\r\n\r\n{\"error\":";
    let (error, waited) = first_error(Script::raw(head).then(Step::Stall)).await;
    assert!(
        matches!(
            error,
            ferrobot::provider::ProviderError::Status { status: 500, .. }
        ),
        "{error}"
    );
    assert!(
        waited < std::time::Duration::from_secs(3),
        "reported after {waited:?}"
    );
}
