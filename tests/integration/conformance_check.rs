//! `testing::conformance` against the real llama.cpp server, and against
//! scripted misbehaving servers on the raw-TCP fault server: ids missing,
//! arguments split inside a UTF-8 character, no usage, a connection reset
//! mid-stream, an error event after a 200 — each with its verdict.

use ferrobot::provider::{OpenAiCompatible, RetryPolicy};
use ferrobot::testing::conformance::{Conformance, Report, Verdict};
use ferrobot_testkit::fault::{FaultServer, Script, Step};
use ferrobot_testkit::realserver::RealServer;

fn provider(url: &str, model: &str) -> OpenAiCompatible {
    OpenAiCompatible::new(url)
        .model(model)
        .retry(RetryPolicy::none())
}

/// The check against a server answering every request with `script`.
async fn against(script: Script) -> Report {
    let server = FaultServer::start([script]).await;
    let url = format!("{}/v1", server.url());
    Conformance::new(provider(&url, "scripted")).run().await
}

fn detail<'a>(report: &'a Report, name: &str) -> &'a str {
    &report
        .scenarios
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
        .detail
}

/// One SSE event per piece, each its own write.
fn sse(events: &[&str]) -> Vec<Vec<u8>> {
    events
        .iter()
        .map(|e| format!("data: {e}\n\n").into_bytes())
        .collect()
}

const CALL_START: &str = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]},"finish_reason":null}]}"#;
const CALL_END: &str = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}"#;
const FINISH_CALLS: &str = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#;
const TEXT: &str = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there."},"finish_reason":null}]}"#;
const FINISH_STOP: &str = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

#[tokio::test]
async fn tool_calls_without_ids_are_degraded_and_say_ferrobot_minted_them() {
    let report = against(Script::chunked_complete(
        "text/event-stream",
        sse(&[CALL_START, CALL_END, FINISH_CALLS, "[DONE]"]),
    ))
    .await;
    assert_eq!(
        report.verdict("tool_call"),
        Some(Verdict::Degraded),
        "{report}"
    );
    assert!(detail(&report, "tool_call").contains("ids missing, ferrobot minted them"));
    // Every answer is a call: the text scenarios say so, and the result is
    // taken (the model calls again instead of answering).
    assert_eq!(
        report.verdict("streamed_text"),
        Some(Verdict::Fail),
        "{report}"
    );
    assert!(report.tool_calling_usable(), "{report}");
}

#[tokio::test]
async fn arguments_split_inside_a_utf8_character_arrive_whole() {
    let start = r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_7","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Zürich\"}"}}]},"finish_reason":null}]}"#;
    let body: Vec<u8> = sse(&[start, FINISH_CALLS, "[DONE]"]).concat();
    // Cut between the two bytes of the ü.
    let cut = body.windows(2).position(|w| w == "ü".as_bytes()).unwrap() + 1;
    let script = Script::chunked_complete("text/event-stream", [&body[..cut], &body[cut..]]);
    let report = against(script).await;
    assert_eq!(report.verdict("tool_call"), Some(Verdict::Pass), "{report}");
}

#[tokio::test]
async fn an_answer_without_usage_is_degraded() {
    let report = against(Script::chunked_complete(
        "text/event-stream",
        sse(&[TEXT, FINISH_STOP, "[DONE]"]),
    ))
    .await;
    assert_eq!(
        report.verdict("streamed_text"),
        Some(Verdict::Pass),
        "{report}"
    );
    assert_eq!(report.verdict("usage"), Some(Verdict::Degraded), "{report}");
    assert!(detail(&report, "usage").contains("no usage"));
    // A server that never calls a tool can't be used for tools.
    assert_eq!(report.verdict("tool_call"), Some(Verdict::Fail), "{report}");
    assert!(!report.tool_calling_usable());
}

#[tokio::test]
async fn a_connection_reset_mid_stream_fails_and_keeps_the_exchange() {
    let report =
        against(Script::chunked("text/event-stream", sse(&[TEXT])).then(Step::Reset)).await;
    assert_eq!(
        report.verdict("streamed_text"),
        Some(Verdict::Fail),
        "{report}"
    );
    let failed = report
        .scenarios
        .iter()
        .find(|s| s.name == "streamed_text")
        .unwrap();
    assert!(
        failed.detail.starts_with("the server failed"),
        "{}",
        failed.detail
    );
    let exchange = failed.exchange.as_ref().unwrap();
    assert_eq!(
        exchange["request"]["messages"][0]["parts"][0]["text"],
        "Say hello in one short sentence."
    );
    assert!(
        exchange["events"].to_string().contains("Hello there."),
        "{exchange}"
    );
}

#[tokio::test]
async fn an_error_event_after_a_200_fails_with_the_servers_words() {
    let report = against(Script::chunked_complete(
        "text/event-stream",
        sse(&[
            TEXT,
            r#"{"error":{"message":"model crashed","type":"server_error"}}"#,
        ]),
    ))
    .await;
    assert_eq!(
        report.verdict("streamed_text"),
        Some(Verdict::Fail),
        "{report}"
    );
    assert!(
        detail(&report, "streamed_text").contains("model crashed"),
        "{report}"
    );
}

/// The real llama.cpp server and its tiny model: the verdicts the docs
/// list (docs/testing.md).
#[tokio::test]
async fn the_real_llama_cpp_server_handles_tool_calling() {
    let Some(server) = RealServer::shared() else {
        return;
    };
    let url = server.base_url();
    // With the default retries, as users run it: the server may close an
    // idle connection just as the next request takes it.
    let real = |model: &str| OpenAiCompatible::new(&url).model(model);
    let report = Conformance::new(real(server.model()))
        .non_streaming(real(server.model()).streaming(false))
        .failing(real("no-such-model"))
        .run()
        .await;
    eprintln!("{report}");
    for (name, verdict) in [
        ("streamed_text", Verdict::Pass),
        ("non_streamed_text", Verdict::Pass),
        ("usage", Verdict::Pass),
        ("tool_call", Verdict::Pass),
        ("tool_result", Verdict::Pass),
        ("zero_argument_tool", Verdict::Pass),
        ("nested_arguments", Verdict::Pass),
        ("unicode_result", Verdict::Pass),
        ("parallel_calls", Verdict::Skipped),
        ("reasoning", Verdict::Skipped),
        ("typed_output", Verdict::Pass),
        ("error_status", Verdict::Skipped),
    ] {
        assert_eq!(report.verdict(name), Some(verdict), "{name}\n{report}");
    }
    assert!(report.tool_calling_usable());
}
