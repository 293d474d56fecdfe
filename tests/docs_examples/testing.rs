//! The examples of `docs/testing.md`.

use ferrobot::Agent;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use serde_json::json;

#[test]
fn other_ways_to_answer() {
    use ferrobot::testing::{MockProvider, MockTurn};

    // The same answer to every call.
    let hello = MockProvider::replying("Hello!");

    // An answer computed from the request.
    let echo = MockProvider::from_fn(|request| {
        let last = request.messages.last().map(|m| m.text()).unwrap_or_default();
        MockTurn::new().text(format!("you said: {last}"))
    });

    // More script, added while the agent is already using the provider.
    echo.push(MockTurn::new().text("scripted turns come first"));
    assert_eq!(hello.remaining(), 0);
    assert_eq!(echo.remaining(), 1);
}

#[tokio::test]
async fn asserting_what_the_model_was_sent() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
        .then(MockTurn::new().text("5"));
    let add = from_fn("add", "Add.", |v: serde_json::Value, _ctx| async move {
        v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
    });
    let agent = Agent::builder().provider(mock.clone()).tool(add).build();
    agent.handle("test", "2 + 3").await.unwrap();
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    // The second call carried the tool's result back to the model.
    let result = requests[1].messages.last().unwrap().tool_results_iter().next().unwrap();
    assert_eq!(result.content, "5");
    assert!(!result.is_error);
    assert_eq!(mock.remaining(), 0); // the whole script was used
}

#[tokio::test]
async fn streams() {
    use ferrobot::{Agent, AgentEvent, testing::{MockProvider, MockTurn}};
    use futures_util::StreamExt;

    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().text("Hello, world").chunked(5)))
        .build();
    let mut events = agent.stream("test", "hi");
    let mut deltas = Vec::new();
    while let Some(event) = events.next().await {
        if let AgentEvent::TextDelta(text) = event.unwrap() {
            deltas.push(text);
        }
    }
    assert_eq!(deltas, ["Hello", ", wor", "ld"]);
}

#[tokio::test]
async fn a_whole_turn() {
    use ferrobot::{Agent, testing::{MockProvider, MockTurn}};

    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().text("Hello, world").chunked(5)))
        .build();
    let transcript = agent.stream("test", "hi").transcript().await;
    assert_eq!(
        transcript.lines(),
        ["thinking", r#"text "Hello""#, r#"text ", wor""#, r#"text "ld""#, r#"done "Hello, world""#]
    );
    assert_eq!(transcript.reply.unwrap().text, "Hello, world");
}

#[tokio::test]
async fn failures() {
    use ferrobot::{Agent, Error, provider::ProviderError, testing::{MockProvider, MockTurn}};

    let down = ProviderError::Status { status: 503, message: "overloaded".into(), retry_after: None };
    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::failing(down)))
        .build();
    let err = agent.handle("test", "hi").await.unwrap_err();
    assert!(matches!(err, Error::Provider(_)));
    assert_eq!(
        err.user_message(),
        "LLM unavailable: server answered 503: overloaded — slash commands still work"
    );
}

#[tokio::test]
async fn confirmation() {
    use ferrobot::{Agent, agent::ToolOutcome, confirm::ConfirmRequest, tool::from_fn};
    use ferrobot::testing::{MockProvider, MockTurn};
    use serde_json::json;

    let reboot = from_fn("reboot", "Reboot the machine.", |_: serde_json::Value, _ctx| async { "rebooting" })
        .confirm("Reboot now?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Okay, I won't."));
    let agent = Agent::builder()
        .provider(mock)
        .tool(reboot)
        .confirm(|request: ConfirmRequest| async move {
            assert_eq!(request.prompt, "Reboot now?");
            false // decline
        })
        .build();
    let reply = agent.handle("test", "reboot please").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    assert_eq!(reply.tool_calls[0].content, "Cancelled by user.");
}

#[tokio::test]
async fn a_tool_alone() {
    use ferrobot::tool::{Tool, ToolContext, from_fn};
    use serde_json::json;

    let shout = from_fn("shout", "Upper-case a text.", |v: serde_json::Value, _ctx| async move {
        v["text"].as_str().unwrap_or_default().to_uppercase()
    });
    let out = shout.call(json!({"text": "hi"}), ToolContext::for_test("test")).await;
    assert_eq!(out.unwrap(), "HI");
}

#[cfg(feature = "macros")]
#[tokio::test]
async fn a_tool_with_state_and_context() {
    use std::sync::{Arc, Mutex};
    use ferrobot::tool::{State, Tool, ToolContext};
    use ferrobot::tool;
    use serde_json::json;

    /// The heating of one house.
    pub struct Thermostat {
        celsius: Mutex<f64>,
    }

    /// Set the target temperature.
    #[tool]
    async fn set(
        State(thermostat): State<Thermostat>,
        ctx: &ToolContext,
        /// The new target, in °C.
        celsius: f64,
    ) -> String {
        *thermostat.celsius.lock().unwrap() = celsius;
        format!("{} set the heating to {celsius} °C", ctx.conversation())
    }

    // `run` is the function itself: every parameter, in its order.
    let thermostat = Arc::new(Thermostat { celsius: Mutex::new(19.0) });
    let text = set::run(State(thermostat.clone()), &ToolContext::for_test("t"), 20.0).await;
    assert_eq!(text, "t set the heating to 20 °C");
    assert_eq!(*thermostat.celsius.lock().unwrap(), 20.0);

    // `call` is the tool as the agent runs it: JSON in, text out, state from the context.
    let ctx = ToolContext::for_test("t").with_state(Thermostat { celsius: Mutex::new(19.0) });
    let text = set.call(json!({"celsius": 21.5}), ctx).await.unwrap();
    assert_eq!(text, "t set the heating to 21.5 °C");
}

#[tokio::test]
async fn over_real_http() {
    use ferrobot::{Agent, provider::OpenAiCompatible, testing::text_sse};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(text_sse("Hello from the wire"), "text/event-stream"))
        .mount(&server)
        .await;
    let provider = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("test-model");
    let agent = Agent::builder().provider(provider).build();
    let reply = agent.handle("test", "hi").await.unwrap();
    assert_eq!(reply.text, "Hello from the wire");
    assert_eq!(reply.usage.input_tokens, 10);
}

/// Compiled, not run: recording needs a real model server.
#[cfg(feature = "cassette")]
#[allow(dead_code)]
async fn cassettes() -> ferrobot::Result<()> {
    #[ferrobot::tool]
    /// Free space on a mount.
    async fn disk_free(path: String) -> String {
        format!("{path}: 42 GB free")
    }
    use ferrobot::{Agent, provider::OpenAiCompatible, testing::Cassette};

    let server = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
    let provider = Cassette::new("tests/cassettes/disk.json", server);
    let agent = Agent::builder().provider(provider).tool(disk_free).build();
    let reply = agent.handle("test", "How much disk is free on /?").await?;
    assert!(reply.text.contains("GB"));
    Ok(())
}

/// Compiled, not run: recording needs a real model server.
#[cfg(feature = "cassette")]
#[allow(dead_code)]
fn wire_cassette() {
    use ferrobot::{Agent, provider::OpenAiCompatible, testing::WireCassette};

    let server = OpenAiCompatible::new("http://localhost:8080/v1").model("qwen3:8b");
    let provider = WireCassette::new("tests/cassettes/hello.wire.json").wrap(server);
    let agent = Agent::builder().provider(provider).build();
    let _ = agent;
}

/// Compiled, not run: it needs a real model server.
#[cfg(feature = "conformance")]
#[allow(dead_code)]
async fn conformance() {
    use ferrobot::provider::OpenAiCompatible;
    use ferrobot::testing::conformance::Conformance;

    let url = "http://localhost:8080/v1";
    let report = Conformance::new(OpenAiCompatible::new(url).model("qwen3:8b"))
        .non_streaming(OpenAiCompatible::new(url).model("qwen3:8b").streaming(false))
        .failing(OpenAiCompatible::new(url).model("no-such-model"))
        .run()
        .await;
    print!("{report}");
    assert!(report.tool_calling_usable());
}

/// "In ten lines": the guide's first example, whole, as a reader's test file.
mod in_ten_lines {
    use ferrobot::provider::Provider;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::{Agent, tool::from_fn};
    use serde_json::json;

    /// In your crate: the agent, from any provider.
    fn my_agent(provider: impl Provider + 'static) -> Agent {
        let add = from_fn("add", "Add two integers.", |v: serde_json::Value, _ctx| async move {
            v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
        });
        Agent::builder().provider(provider).tool(add).build()
    }

    #[tokio::test]
    async fn answers_sums_with_the_add_tool() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
            .then(MockTurn::new().text("2 + 3 = 5"));
        let agent = my_agent(mock.clone());

        let reply = agent.handle("test", "what is 2 + 3?").await.unwrap();
        assert_eq!(reply.text, "2 + 3 = 5");
        assert_eq!(reply.tool_calls[0].content, "5"); // the tool really ran
        assert_eq!(mock.requests()[0].tool_names(), ["add"]); // and was offered
    }
}

/// Compiled, not run: the files come from a real recording.
#[cfg(feature = "cassette")]
#[allow(dead_code)]
fn secrets_and_dates() {
    use std::time::{Duration, SystemTime};

    use ferrobot::{Agent, testing::Cassette};

    let token = std::env::var("NAS_TOKEN").unwrap_or_default();
    let recorded = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
    let agent = Agent::builder()
        .provider(Cassette::replay("tests/cassettes/nas.json").redact(token))
        .clock(move || recorded)
        .build();
    let _ = agent;
}

/// Compiled, not run: recording needs a chat platform and a model server.
#[cfg(all(feature = "cassette", feature = "bot"))]
#[allow(dead_code)]
async fn session_recorded(
    telegram: std::sync::Arc<dyn ferrobot::bot::Channel>,
) -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::Arc;

    use ferrobot::bot::{Channel, ChannelConfirm, serve};
    use ferrobot::testing::{Cassette, Mode, SessionRecorder};
    use ferrobot::{Agent, provider::OpenAiCompatible};

    let recorder = SessionRecorder::new("tests/sessions/disk.json", telegram);
    let model = OpenAiCompatible::new("http://localhost:8080/v1").model("qwen3:8b");
    let model = Cassette::new(recorder.model_path(), model).mode(Mode::RecordAll);
    let channel: Arc<dyn Channel> = Arc::new(recorder);
    let agent = Agent::builder()
        .provider(model)
        .confirm(ChannelConfirm(channel.clone()))
        .build();
    serve(agent, channel).await?;
    Ok(())
}

/// Compiled, not run: the files come from a real recording.
#[cfg(all(feature = "cassette", feature = "bot", feature = "macros"))]
#[allow(dead_code)]
async fn session_replayed() -> Result<(), Box<dyn std::error::Error>> {
    #[ferrobot::tool]
    /// Free space on a mount.
    async fn disk_free(path: String) -> String {
        format!("{path}: 42 GB free")
    }
    use ferrobot::Agent;
    use ferrobot::testing::{Cassette, Session};

    let session = Session::open("tests/sessions/disk.json")?;
    let recorded_at = session.recorded_at();
    let agent = Agent::builder()
        .provider(Cassette::replay(session.model_path()))
        .tool(disk_free)
        .confirm(session.confirm())
        .clock(move || recorded_at)
        .build();
    session.replay(agent).await?; // Err(SessionError::Differs { report }) when it changed
    Ok(())
}
