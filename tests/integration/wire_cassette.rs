//! Wire cassettes: a recorded answer of each dialect (../shared/corpus)
//! served over loopback, recorded byte for byte, then replayed with the
//! server gone through the dialect's own decoder; no key in any file; a
//! changed body named; a piece cut inside a UTF-8 character kept whole.

use ferrobot::Message;
use ferrobot::provider::dialect::{Dialect, Http};
use ferrobot::provider::{
    Anthropic, Gemini, OpenAiCompatible, OpenAiResponses, ProviderError, RetryPolicy,
};
use ferrobot::testing::{Mode, WireCassette};
use ferrobot_testkit::fault::{FaultServer, Script};

use crate::sqlite::TempDir;
use crate::support::{assemble, recordings};

/// Records `provider`'s answer to "replay" into `file`, then replays it
/// through `offline` (the same dialect aimed at a closed port), and checks
/// both assemble alike and no `key` reached the file.
async fn round_trip<D: Dialect>(
    file: &std::path::Path,
    provider: Http<D>,
    offline: Http<D>,
    key: &str,
) {
    let messages = [Message::user("replay")];
    let recording = WireCassette::new(file).mode(Mode::RecordAll);
    let live = assemble(&recording.wrap(provider), &messages)
        .await
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(!text.contains(key), "the key reached {}", file.display());
    let replaying = WireCassette::new(file).mode(Mode::Replay);
    let replayed = assemble(&replaying.wrap(offline), &messages)
        .await
        .unwrap_or_else(|e| panic!("{}: {}", file.display(), e.chain()));
    // Gemini sends no call ids: ferrobot mints new ones each time.
    let without_ids = |message: &Message| {
        let mut value = serde_json::to_value(message).unwrap();
        for part in value["parts"].as_array_mut().unwrap() {
            if part["type"] == "tool_call" {
                part["id"] = serde_json::Value::Null;
            }
        }
        value
    };
    assert_eq!(
        without_ids(&replayed.message),
        without_ids(&live.message),
        "{}",
        file.display()
    );
    assert_eq!(replayed.usage, live.usage);
    assert_eq!(replayed.finish, live.finish);
}

/// A port nothing listens on.
fn closed() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn every_dialect_round_trips_through_a_wire_cassette() {
    let dir = TempDir::new("wire-dialects");
    let none = RetryPolicy::none();
    if let Some(recording) = recordings("01_openai_chat_stream").into_iter().next() {
        let server = recording.serve_stream("/v1/chat/completions").await;
        let client = |url: String| {
            OpenAiCompatible::new(format!("{url}/v1"))
                .model("test-model")
                .api_key("sk-openai-WIRE")
                .retry(none.clone())
        };
        round_trip(
            &dir.file("openai.json"),
            client(server.uri()),
            client(closed()),
            "sk-openai-WIRE",
        )
        .await;
    }
    if let Some(recording) = recordings("03_anthropic_messages_stream")
        .into_iter()
        .next()
    {
        let server = recording.serve_stream("/v1/messages").await;
        let client = |url: String| {
            Anthropic::with_base_url(url)
                .model("claude-test")
                .api_key("sk-ant-WIRE")
                .retry(none.clone())
        };
        round_trip(
            &dir.file("anthropic.json"),
            client(server.uri()),
            client(closed()),
            "sk-ant-WIRE",
        )
        .await;
    }
    if let Some(recording) = recordings("04_gemini_stream_sse").into_iter().next() {
        let server = recording
            .serve_stream("/v1beta/models/gemini-test:streamGenerateContent")
            .await;
        let client = |url: String| {
            Gemini::with_base_url(url)
                .model("gemini-test")
                .api_key("g-key-WIRE")
                .retry(none.clone())
        };
        round_trip(
            &dir.file("gemini.json"),
            client(server.uri()),
            client(closed()),
            "g-key-WIRE",
        )
        .await;
    }
    if let Some(recording) = recordings("06_openai_responses_stream").into_iter().next() {
        let server = recording.serve_stream("/v1/responses").await;
        let client = |url: String| {
            OpenAiResponses::new(format!("{url}/v1"))
                .model("gpt-test")
                .api_key("sk-resp-WIRE")
                .retry(none.clone())
        };
        round_trip(
            &dir.file("responses.json"),
            client(server.uri()),
            client(closed()),
            "sk-resp-WIRE",
        )
        .await;
    }
    // Ollama's NDJSON, served by hand (its corpus answers are not streamed).
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/api/chat"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw(
            concat!(
                r#"{"model":"m","message":{"role":"assistant","content":"Hel"},"done":false}"#, "\n",
                r#"{"model":"m","message":{"role":"assistant","content":"lo."},"done":false}"#, "\n",
                r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":2}"#, "\n",
            ),
            "application/x-ndjson",
        ))
        .mount(&server)
        .await;
    let client = |url: String| {
        ferrobot::provider::Ollama::new(url)
            .model("m")
            .api_key("ollama-WIRE")
            .retry(none.clone())
    };
    round_trip(
        &dir.file("ollama.json"),
        client(server.uri()),
        client(closed()),
        "ollama-WIRE",
    )
    .await;
}

#[tokio::test]
async fn a_changed_body_is_named_and_a_split_character_replays_whole() {
    let dir = TempDir::new("wire-split");
    let file = dir.file("split.json");
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Grüße aus Zürich.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    )
    .as_bytes();
    // Cut between the two bytes of the ü.
    let cut = body.windows(2).position(|w| w == "ü".as_bytes()).unwrap() + 1;
    let server = FaultServer::start([Script::chunked_complete(
        "text/event-stream",
        [&body[..cut], &body[cut..]],
    )])
    .await;
    let client = |url: String| {
        OpenAiCompatible::new(format!("{url}/v1"))
            .model("m")
            .retry(RetryPolicy::none())
    };
    let messages = [Message::user("hi")];
    let recording = WireCassette::new(&file).mode(Mode::RecordAll);
    let live = assemble(&recording.wrap(client(server.url())), &messages)
        .await
        .unwrap();
    assert_eq!(live.message.text(), "Grüße aus Zürich.");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("\"base64\""),
        "a piece ending inside a character is kept as base64"
    );
    drop(server);

    let replayed = assemble(
        &WireCassette::new(&file)
            .mode(Mode::Replay)
            .wrap(client(closed())),
        &messages,
    )
    .await
    .unwrap();
    assert_eq!(replayed.message.text(), "Grüße aus Zürich.");

    let changed = [Message::user("hello")];
    let error = assemble(
        &WireCassette::new(&file)
            .mode(Mode::Replay)
            .wrap(client(closed())),
        &changed,
    )
    .await
    .unwrap_err();
    let ProviderError::InvalidRequest { message, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(
        message.contains("body.messages.0.content: recorded \"hi\", now \"hello\""),
        "{message}"
    );
}

#[tokio::test]
async fn secrets_are_masked_on_record_even_split_across_pieces() {
    use ferrobot_testkit::fault::Step;
    use std::time::Duration;

    const SECRET: &str = "sk-live-SPLIT-9";
    let dir = TempDir::new("wire-redact");
    let file = dir.file("redact.json");
    let body = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"your key is {SECRET}.\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
    );
    // Cut inside the secret: the pieces are masked as one text.
    let cut = body.find("SPLIT").unwrap();
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\ndate: Wed, 02 Dec 2026 13:00:00 GMT\r\nx-request-id: req_4711\r\nconnection: close\r\n\r\n";
    let chunk = |piece: &str| format!("{:x}\r\n{piece}\r\n", piece.len()).into_bytes();
    let server = FaultServer::start([Script(vec![
        Step::Send(head.into()),
        Step::Send(chunk(&body[..cut])),
        Step::Pause(Duration::from_millis(30)),
        Step::Send(chunk(&body[cut..])),
        Step::Send(b"0\r\n\r\n".to_vec()),
    ])])
    .await;
    let client = |url: String| {
        OpenAiCompatible::new(format!("{url}/v1"))
            .model("m")
            .header("X-Gateway-Token", "gw-TOKEN-77")
            .retry(RetryPolicy::none())
    };
    let messages = [Message::user(format!("remember {SECRET}"))];
    let recording = WireCassette::new(&file)
        .mode(Mode::RecordAll)
        .redact(SECRET)
        .redact_header("x-gateway-token");
    let live = assemble(&recording.wrap(client(server.url())), &messages)
        .await
        .unwrap();
    // The program saw the real answer; the file holds none of the secrets.
    assert_eq!(live.message.text(), format!("your key is {SECRET}."));
    let text = std::fs::read_to_string(&file).unwrap();
    for secret in [SECRET, "SPLIT", "gw-TOKEN-77", "req_4711", "13:00:00"] {
        assert!(!text.contains(secret), "{secret} reached the file: {text}");
    }
    let recorded: serde_json::Value = serde_json::from_str(&text).unwrap();
    let exchange = &recorded["exchanges"][0];
    assert_eq!(
        exchange["body"]["messages"][0]["content"],
        "remember [redacted]"
    );
    assert!(
        exchange["pieces"].as_array().unwrap().len() >= 2,
        "the pieces stay apart: {exchange}"
    );
    assert!(
        exchange["request_headers"]
            .to_string()
            .contains(r#"["x-gateway-token","[redacted]"]"#),
        "{exchange}"
    );
    assert!(
        exchange["headers"]
            .to_string()
            .contains(r#"["date","[redacted]"]"#),
        "{exchange}"
    );
    drop(server);

    // Replayed with the same rule, the request (holding the secret) matches.
    let replayed = assemble(
        &WireCassette::new(&file)
            .mode(Mode::Replay)
            .redact(SECRET)
            .wrap(client(closed())),
        &messages,
    )
    .await
    .unwrap();
    assert_eq!(replayed.message.text(), "your key is [redacted].");
}
