//! Cassettes: a turn with a tool round recorded against an OpenAI-compatible
//! server over loopback, replayed with the server gone; the file's form and
//! what never reaches it; a changed request named field by field; replay
//! without a file; recording what is missing; matching by request; errors
//! kept and replayed.

use ferrobot::provider::{OpenAiCompatible, ProviderError, RetryPolicy};
use ferrobot::testing::{Cassette, Mode, OpenAiStream, text_sse};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Error};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

use crate::sqlite::TempDir;

const KEY: &str = "sk-test-CASSETTE-KEY-1234";

/// Answers the chat requests with `bodies`, in order.
struct InOrder(std::sync::Mutex<std::collections::VecDeque<String>>);

impl Respond for InOrder {
    fn respond(&self, _: &wiremock::Request) -> ResponseTemplate {
        match self.0.lock().unwrap().pop_front() {
            Some(body) => ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
            None => ResponseTemplate::new(500).set_body_string("nothing scripted"),
        }
    }
}

async fn server(bodies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(InOrder(std::sync::Mutex::new(bodies.into())))
        .mount(&server)
        .await;
    server
}

fn provider(url: &str) -> OpenAiCompatible {
    OpenAiCompatible::new(format!("{url}/v1"))
        .model("test-model")
        .api_key(KEY)
        .retry(RetryPolicy::none())
}

fn agent(provider: Cassette) -> Agent {
    Agent::builder()
        .provider(provider)
        .system_prompt("You add numbers.")
        .tool(from_fn(
            "add",
            "Add two numbers.",
            |args: Value, _| async move {
                (args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string()
            },
        ))
        .build()
}

/// A tool round: the call's arguments streamed in pieces, then the answer.
fn tool_round() -> Vec<String> {
    vec![
        OpenAiStream::new()
            .tool_call("call_1", "add", &json!({"a": 1, "b": 2}))
            .into_sse(),
        text_sse("1 + 2 = 3."),
    ]
}

#[tokio::test]
async fn a_turn_is_recorded_then_replayed_with_the_server_gone() {
    let dir = TempDir::new("cassette-roundtrip");
    let file = dir.file("add.json");
    let live = server(tool_round()).await;
    let recording = Cassette::new(&file, provider(&live.uri())).mode(Mode::RecordAll);
    let reply = agent(recording)
        .handle("ann", "what is 1 + 2?")
        .await
        .unwrap();
    assert_eq!(reply.text, "1 + 2 = 3.");
    assert_eq!(reply.tool_calls[0].content, "3");
    let uri = live.uri();
    drop(live);

    // The file: versioned, each call's request and joined answer, no key.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "the key reached the file");
    let cassette: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(cassette["ferrobot_cassette"], 1);
    assert_eq!(cassette["provider"], "openai");
    assert_eq!(cassette["model"], "test-model");
    assert_eq!(cassette["native_output"], true);
    let calls = cassette["interactions"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["request"]["system"], "You add numbers.");
    assert_eq!(calls[0]["request"]["tools"][0]["name"], "add");
    let asked = &calls[0]["events"][0]["tool_call"];
    assert_eq!(asked["name"], "add");
    assert_eq!(
        serde_json::from_str::<Value>(asked["arguments"].as_str().unwrap()).unwrap(),
        json!({"a": 1, "b": 2})
    );
    assert_eq!(calls[1]["events"][0]["text"], "1 + 2 = 3.");

    // Replayed: the same answer, the tool run again, nothing on the network.
    let replaying = Cassette::new(&file, provider(&uri)).mode(Mode::Replay);
    let reply = agent(replaying)
        .handle("ann", "what is 1 + 2?")
        .await
        .unwrap();
    assert_eq!(reply.text, "1 + 2 = 3.");
    assert_eq!(reply.tool_calls[0].content, "3");
    let reply = agent(Cassette::replay(&file))
        .handle("bob", "what is 1 + 2?")
        .await
        .unwrap();
    assert_eq!(reply.text, "1 + 2 = 3.");
}

#[tokio::test]
async fn a_changed_request_fails_naming_each_field_that_differs() {
    let dir = TempDir::new("cassette-mismatch");
    let file = dir.file("add.json");
    let live = server(tool_round()).await;
    let recording = Cassette::new(&file, provider(&live.uri())).mode(Mode::RecordAll);
    agent(recording)
        .handle("ann", "what is 1 + 2?")
        .await
        .unwrap();

    let error = agent(Cassette::replay(&file))
        .handle("ann", "what is 2 + 2?")
        .await
        .unwrap_err();
    let Error::Provider(ProviderError::InvalidRequest { provider, message }) = &error else {
        panic!("{error:?}");
    };
    assert!(provider.ends_with("add.json"), "{provider}");
    assert!(
        message.starts_with("call 1 differs from its recording (1 field):"),
        "{message}"
    );
    assert!(
        message.contains(
            r#"messages.0.parts.0.text: recorded "what is 1 + 2?", now "what is 2 + 2?""#
        ),
        "{message}"
    );
    assert!(message.contains("FERROBOT_RECORD=all"), "{message}");

    // A part that changes on every run can be left out.
    let changed = Agent::builder()
        .provider(Cassette::replay(&file).ignore("system"))
        .system_prompt("You add numbers. Today is Tuesday.")
        .tool(from_fn("add", "Add two numbers.", |_: Value, _| async {
            "3"
        }))
        .build();
    let reply = changed.handle("ann", "what is 1 + 2?").await.unwrap();
    assert_eq!(reply.text, "1 + 2 = 3.");
}

#[tokio::test]
async fn replaying_without_a_file_says_how_to_record_one() {
    let dir = TempDir::new("cassette-missing");
    let error = agent(Cassette::replay(dir.file("none.json")))
        .handle("ann", "hi")
        .await
        .unwrap_err();
    let error = ferrobot::error_chain(&error);
    assert!(error.contains("there is no such file"), "{error}");
    assert!(error.contains("FERROBOT_RECORD=missing"), "{error}");
}

#[tokio::test]
async fn record_missing_replays_what_is_kept_and_records_the_rest() {
    let dir = TempDir::new("cassette-more");
    let file = dir.file("chat.json");
    let first = server(vec![text_sse("Hello.")]).await;
    let recording = Cassette::new(&file, provider(&first.uri())).mode(Mode::RecordMissing);
    agent(recording).handle("ann", "hi").await.unwrap();
    drop(first);

    // The first call comes from the file; only the second reaches a server.
    let second = server(vec![text_sse("Bye.")]).await;
    let agent = agent(Cassette::new(&file, provider(&second.uri())).mode(Mode::RecordMissing));
    assert_eq!(agent.handle("ann", "hi").await.unwrap().text, "Hello.");
    assert_eq!(agent.handle("ann", "bye").await.unwrap().text, "Bye.");
    assert_eq!(second.received_requests().await.unwrap().len(), 1);
    let cassette: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(cassette["interactions"].as_array().unwrap().len(), 2);

    // Replaying only, one call more than the file holds fails.
    let replaying = self::agent(Cassette::replay(&file));
    replaying.handle("ann", "hi").await.unwrap();
    replaying.handle("ann", "bye").await.unwrap();
    let error = ferrobot::error_chain(&replaying.handle("ann", "again").await.unwrap_err());
    assert!(
        error.contains("it holds 2 call(s) and this is one more"),
        "{error}"
    );
}

#[tokio::test]
async fn concurrent_conversations_replay_by_request() {
    let dir = TempDir::new("cassette-concurrent");
    let file = dir.file("two.json");
    let live = server(vec![text_sse("For Ann."), text_sse("For Bob.")]).await;
    let recording = Agent::builder()
        .provider(Cassette::new(&file, provider(&live.uri())).mode(Mode::RecordAll))
        .build();
    assert_eq!(
        recording.handle("ann", "I am Ann").await.unwrap().text,
        "For Ann."
    );
    assert_eq!(
        recording.handle("bob", "I am Bob").await.unwrap().text,
        "For Bob."
    );

    // Bob first: in order, his request meets Ann's recording.
    let in_order = Agent::builder().provider(Cassette::replay(&file)).build();
    let error = ferrobot::error_chain(&in_order.handle("bob", "I am Bob").await.unwrap_err());
    assert!(
        error.contains(r#"recorded "I am Ann", now "I am Bob""#),
        "{error}"
    );
    let by_request = Agent::builder()
        .provider(Cassette::replay(&file).match_by_request())
        .build();
    assert_eq!(
        by_request.handle("bob", "I am Bob").await.unwrap().text,
        "For Bob."
    );
    assert_eq!(
        by_request.handle("ann", "I am Ann").await.unwrap().text,
        "For Ann."
    );
}

#[tokio::test]
async fn a_failed_call_is_kept_and_fails_the_same_way_on_replay() {
    let dir = TempDir::new("cassette-error");
    let file = dir.file("busy.json");
    let live = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&live)
        .await;
    // Retried, as by default: the error is a `GaveUp` holding the 503.
    let retrying = provider(&live.uri()).retry(
        RetryPolicy::builder()
            .max_attempts(2)
            .initial_backoff(std::time::Duration::from_millis(5))
            .build(),
    );
    let recording = Agent::builder()
        .provider(Cassette::new(&file, retrying).mode(Mode::RecordAll))
        .build();
    let recorded = recording.handle("ann", "hi").await.unwrap_err();
    drop(live);
    let replayed = Agent::builder()
        .provider(Cassette::replay(&file))
        .build()
        .handle("ann", "hi")
        .await
        .unwrap_err();
    assert_eq!(
        ferrobot::error_chain(&replayed),
        ferrobot::error_chain(&recorded)
    );
    let Error::Provider(ProviderError::GaveUp { last, .. }) = replayed else {
        panic!("{replayed:?}");
    };
    assert!(
        matches!(*last, ProviderError::Status { status: 503, .. }),
        "{last:?}"
    );
}

#[tokio::test]
async fn a_secret_named_for_redaction_never_reaches_the_file_and_still_replays() {
    const SECRET: &str = "nas-TOKEN-5150";
    let dir = TempDir::new("cassette-redact");
    let file = dir.file("redact.json");
    let live = server(vec![text_sse(&format!("Stored {SECRET}."))]).await;
    let recording = Agent::builder()
        .provider(
            Cassette::new(&file, provider(&live.uri()))
                .mode(Mode::RecordAll)
                .redact(SECRET),
        )
        .build();
    let prompt = format!("store {SECRET}");
    let reply = recording.handle("ann", prompt.as_str()).await.unwrap();
    assert_eq!(reply.text, format!("Stored {SECRET}."));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        text.contains("store [redacted]") && text.contains("Stored [redacted]."),
        "{text}"
    );
    drop(live);

    // The same rule on replay: the request holding the secret matches.
    let replaying = Agent::builder()
        .provider(Cassette::replay(&file).redact(SECRET))
        .build();
    let reply = replaying.handle("ann", prompt.as_str()).await.unwrap();
    assert_eq!(reply.text, "Stored [redacted].");
    // Without it, the difference is the secret itself.
    let unmasked = Agent::builder().provider(Cassette::replay(&file)).build();
    let error = ferrobot::error_chain(&unmasked.handle("ann", prompt.as_str()).await.unwrap_err());
    assert!(
        error.contains(r#"recorded "store [redacted]", now "store nas-TOKEN-5150""#),
        "{error}"
    );
}
