//! What a turn reports: its events in order, and its tracing spans.

use std::sync::Arc;
use std::time::Duration;

use ferrobot::agent::{Status, ToolOutcome};
use ferrobot::confirm::ConfirmRequest;
use ferrobot::provider::{ProviderError, ToolChoice};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{FnTool, from_fn};
use ferrobot::{Agent, AgentEvent, Error, Usage};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::echo_tool;

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}

/// The tool of the documented turn: it is always 18 °C in Paris.
fn get_weather() -> FnTool {
    from_fn("get_weather", "Current weather.", |_: Value, _| async {
        "18 °C"
    })
}

/// The turn `AgentEvent`'s docs and docs/agent.md walk through: one tool
/// round, then the answer.
#[tokio::test]
async fn a_tool_round_through_the_mock_streams_the_documented_events() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .reasoning("Look it up.")
                .tool_call("get_weather", json!({"city": "Paris"}))
                .usage(usage(12, 5)),
        )
        .then(
            MockTurn::new()
                .text("It is 18 °C.")
                .chunked(6)
                .usage(usage(30, 4)),
        );
    let agent = Agent::builder().provider(mock).tool(get_weather()).build();
    let transcript = agent.stream("a", "Weather in Paris?").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"reasoning "Look it up.""#,
            // MockProvider sends a call whole, in one delta.
            r#"tool call delta #0 id=call_1 name=get_weather "{\"city\":\"Paris\"}""#,
            // After the model call, before its tools.
            "usage 12 in / 5 out",
            r#"tool call call_1 get_weather {"city":"Paris"}"#,
            "running get_weather",
            "tool result call_1 get_weather ok: 18 °C",
            "thinking",
            r#"text "It is ""#,
            r#"text "18 °C.""#,
            "usage 30 in / 4 out",
            r#"done "It is 18 °C.""#,
        ]
    );
    let reply = transcript.reply.unwrap();
    assert_eq!(reply.usage, usage(42, 9), "the sum of the usage events");
    assert!(matches!(transcript.events.last(), Some(AgentEvent::Done(done)) if *done == reply));
}

/// The lines of the `text` code block that follows `marker` in docs/agent.md.
#[cfg(feature = "openai")]
fn documented_lines(marker: &str) -> Vec<String> {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agent.md")).unwrap();
    let after = &guide[guide
        .find(marker)
        .unwrap_or_else(|| panic!("docs/agent.md lost the marker `{marker}`"))..];
    let block = &after[after.find("```text\n").unwrap() + "```text\n".len()..];
    block[..block.find("```").unwrap()]
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The same turn from an OpenAI-compatible server that streams the
/// arguments in pieces, as OpenAI's does: one delta opens the call, one per
/// piece follows. The lines are the ones docs/agent.md shows.
#[cfg(feature = "openai")]
#[tokio::test]
async fn a_tool_round_over_openai_compatible_streams_the_documented_events() {
    use ferrobot::provider::OpenAiCompatible;
    use ferrobot::testing::OpenAiStream;
    use wiremock::{Mock, MockServer, Request, ResponseTemplate, matchers::method};

    let call = OpenAiStream::new()
        .tool_call_fragment(json!({"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}))
        .tool_call_fragment(json!({"index": 0, "function": {"arguments": "{\"city\":"}}))
        .tool_call_fragment(json!({"index": 0, "function": {"arguments": "\"Paris\"}"}}))
        .finish("tool_calls")
        .usage(12, 5)
        .into_sse();
    let answer = OpenAiStream::new()
        .text("It is ")
        .text("18 °C.")
        .finish("stop")
        .usage(30, 4)
        .into_sse();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |request: &Request| {
            let body = String::from_utf8_lossy(&request.body);
            let sse = if body.contains(r#""role":"tool""#) {
                &answer
            } else {
                &call
            };
            ResponseTemplate::new(200).set_body_raw(sse.clone(), "text/event-stream")
        })
        .mount(&server)
        .await;
    let agent = Agent::builder()
        .provider(OpenAiCompatible::new(format!("{}/v1", server.uri())).model("test"))
        .tool(get_weather())
        .build();
    let transcript = agent.stream("a", "Weather in Paris?").transcript().await;
    assert_eq!(
        transcript.lines(),
        documented_lines("<!-- openai-compatible events -->")
    );
    assert_eq!(transcript.reply.unwrap().text, "It is 18 °C.");
}

/// A real recording of gpt-4o-mini calling a tool (the shared corpus): one
/// delta per fragment the server sent, the usage chunk after the finish.
#[cfg(feature = "openai")]
#[tokio::test]
async fn a_recorded_openai_tool_call_streams_one_delta_per_fragment() {
    use ferrobot::provider::OpenAiCompatible;
    use wiremock::{Mock, MockServer, Request, ResponseTemplate, matchers::method};

    let Some(dir) = crate::support::corpus("01_openai_chat_stream") else {
        return;
    };
    let recorded =
        std::fs::read(dir.join("pai_gpt4o_mini_single_tool_obfuscation/response.txt")).unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |request: &Request| {
            let body = String::from_utf8_lossy(&request.body);
            let sse = if body.contains(r#""role":"tool""#) {
                ferrobot::testing::text_sse("London.").into_bytes()
            } else {
                recorded.clone()
            };
            ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
        })
        .mount(&server)
        .await;
    let capital = from_fn(
        "get_capital",
        "Capital of a country.",
        |_: Value, _| async { "London" },
    );
    let agent = Agent::builder()
        .provider(OpenAiCompatible::new(format!("{}/v1", server.uri())).model("test"))
        .tool(capital)
        .build();
    let transcript = agent.stream("a", "Capital of the UK?").transcript().await;
    let id = "call_ZR5UUuTt3pf61kjwAJIYdVMj";
    assert_eq!(
        transcript.lines(),
        [
            "thinking".to_owned(),
            format!(r#"tool call delta #0 id={id} name=get_capital """#),
            r#"tool call delta #0 "{\"""#.to_owned(),
            r#"tool call delta #0 "country""#.to_owned(),
            r#"tool call delta #0 "\":\"""#.to_owned(),
            r#"tool call delta #0 "UK""#.to_owned(),
            r#"tool call delta #0 "\"}""#.to_owned(),
            "usage 53 in / 15 out".to_owned(),
            format!(r#"tool call {id} get_capital {{"country":"UK"}}"#),
            "running get_capital".to_owned(),
            format!("tool result {id} get_capital ok: London"),
            "thinking".to_owned(),
            r#"text "London.""#.to_owned(),
            "usage 10 in / 5 out".to_owned(),
            r#"done "London.""#.to_owned(),
        ]
    );
}

#[tokio::test]
async fn a_provider_failure_ends_the_transcript_with_the_error() {
    let down = ProviderError::Status {
        status: 503,
        message: "busy".into(),
        retry_after: None,
    };
    let mock = MockProvider::new().then(MockTurn::new().text("Let me").error(down));
    let agent = Agent::builder().provider(mock).build();
    let transcript = agent.stream("a", "hi").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"text "Let me""#,
            "error: LLM unavailable: server answered 503: busy"
        ]
    );
    assert!(matches!(transcript.reply, Err(Error::Provider(_))));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_tool_round_finishes_each_call_as_interrupted() {
    let slow = from_fn("slow", "Slow.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    let mock = MockProvider::new().then(
        MockTurn::new()
            .tool_call("slow", json!({}))
            .tool_call("slow", json!({}))
            .usage(usage(3, 2)),
    );
    // One at a time: the second call is still waiting when the turn stops.
    let agent = Agent::builder()
        .provider(mock)
        .tool(slow)
        .max_concurrent_tools(1)
        .build();
    let events = agent.stream("a", "go");
    let stop = events.cancellation();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
    });
    let interrupted = "interrupted: Interrupted: the user cancelled the turn.";
    assert_eq!(
        events.transcript().await.lines(),
        [
            "thinking".to_owned(),
            r#"tool call delta #0 id=call_1 name=slow "{}""#.to_owned(),
            r#"tool call delta #1 id=call_2 name=slow "{}""#.to_owned(),
            "usage 3 in / 2 out".to_owned(),
            "tool call call_1 slow {}".to_owned(),
            "running slow".to_owned(),
            format!("tool result call_1 slow {interrupted}"),
            "tool call call_2 slow {}".to_owned(),
            format!("tool result call_2 slow {interrupted}"),
            "error: turn cancelled".to_owned(),
        ]
    );
}

#[tokio::test]
async fn a_declined_call_awaits_confirmation_and_never_runs() {
    let rm = from_fn("rm", "Delete.", |_: Value, _| async { "deleted" }).confirm("Delete {path}?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("rm", json!({"path": "/etc"})))
        .then(MockTurn::new().text("Not deleted."));
    let agent = Agent::builder()
        .provider(mock)
        .tool(rm)
        .confirm(|_: ConfirmRequest| async { false })
        .build();
    assert_eq!(
        agent.stream("a", "delete /etc").transcript().await.lines(),
        [
            "thinking",
            r#"tool call delta #0 id=call_1 name=rm "{\"path\":\"/etc\"}""#,
            r#"tool call call_1 rm {"path":"/etc"}"#,
            "awaiting confirmation of rm",
            "tool result call_1 rm declined: Cancelled by user.",
            "thinking",
            r#"text "Not deleted.""#,
            r#"done "Not deleted.""#,
        ]
    );
}

/// Calls made after the tools were withdrawn are refused, with the events
/// of a refused call, and the reply lists them.
#[tokio::test]
async fn a_call_past_the_round_cap_is_reported_as_rejected() {
    let mock = MockProvider::from_fn(|request| {
        let turn = MockTurn::new().tool_call("echo", json!({}));
        if request.tool_choice == ToolChoice::None {
            turn.text("Enough.")
        } else {
            turn
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .max_tool_rounds(1)
        .build();
    let transcript = agent.stream("a", "loop").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"tool call delta #0 id=call_1 name=echo "{}""#,
            "tool call call_1 echo {}",
            "running echo",
            "tool result call_1 echo ok: {}",
            "thinking",
            r#"tool call delta #0 id=call_1 name=echo "{}""#,
            r#"text "Enough.""#,
            "tool call call_1 echo {}",
            "tool result call_1 echo rejected: Not run: the limit of 1 tool round per turn was reached. Answer with what you have.",
            r#"done "Enough.""#,
        ]
    );
    let reply = transcript.reply.unwrap();
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(reply.tool_calls[1].outcome, ToolOutcome::Rejected);
}

#[tokio::test]
async fn a_slash_command_streams_its_tool_call_and_no_model_events() {
    let agent = Agent::builder()
        .provider(MockProvider::new())
        .tool(get_weather())
        .build();
    let transcript = agent
        .stream("a", "/get_weather city=Paris")
        .transcript()
        .await;
    let lines = transcript.lines();
    // The call id is generated.
    let id = match &transcript.events[0] {
        AgentEvent::ToolCallStarted(call) => call.id.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        lines,
        [
            format!(r#"tool call {id} get_weather {{"city":"Paris"}}"#),
            "running get_weather".to_owned(),
            format!("tool result {id} get_weather ok: 18 °C"),
            r#"done "18 °C""#.to_owned(),
        ]
    );
    assert_eq!(
        agent.stream("a", "/help").transcript().await.events.len(),
        1,
        "a built-in yields only Done"
    );
}

#[tokio::test]
async fn events_arrive_in_the_order_things_happen() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .reasoning("hmm")
                .tool_call("echo", json!({"a": 1}))
                .usage(Usage {
                    input_tokens: 1,
                    output_tokens: 1,
                    ..Default::default()
                }),
        )
        .then(MockTurn::new().text("Hello world").chunked(6));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    let events: Vec<AgentEvent> = agent.stream("a", "hi").map(Result::unwrap).collect().await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            AgentEvent::Status(Status::Thinking) => "thinking".into(),
            AgentEvent::Status(Status::RunningTool { tool }) => format!("running {tool}"),
            AgentEvent::ReasoningDelta(t) => format!("reasoning {t}"),
            AgentEvent::ToolCallDelta(_) => "call delta".into(),
            AgentEvent::ToolCallStarted(call) => format!("started {}", call.name),
            AgentEvent::ToolCallFinished(record) => {
                format!("finished {} {:?}", record.call.name, record.outcome)
            }
            AgentEvent::TextDelta(t) => format!("text {t}"),
            AgentEvent::Usage(_) => "usage".into(),
            AgentEvent::Done(reply) => format!("done {}", reply.text),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "thinking",
            "reasoning hmm",
            "call delta",
            "usage",
            "started echo",
            "running echo",
            "finished echo Ok",
            "thinking",
            "text Hello ",
            "text world",
            "done Hello world"
        ]
    );
}

/// Records every span's name and fields.
#[derive(Clone, Default)]
struct SpanLog(Arc<std::sync::Mutex<Vec<LoggedSpan>>>);

/// A span's id, name and fields.
type LoggedSpan = (u64, String, std::collections::BTreeMap<String, String>);

struct FieldVisitor<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>
    tracing_subscriber::Layer<S> for SpanLog
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if !RECORDING.get() {
            return;
        }
        let mut fields = std::collections::BTreeMap::new();
        attrs.record(&mut FieldVisitor(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((id.into_u64(), attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if !RECORDING.get() {
            return;
        }
        let mut log = self.0.lock().unwrap();
        if let Some((_, _, fields)) = log.iter_mut().rev().find(|(i, _, _)| *i == id.into_u64()) {
            values.record(&mut FieldVisitor(fields));
        }
    }
}

thread_local! {
    /// Whether spans made on this thread are logged: the traced test's only.
    static RECORDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The spans of recording threads. One subscriber for the whole test
/// binary, set globally: tracing decides once per span site whether anyone
/// listens, on whichever thread reaches it first, so a subscriber scoped to
/// one test would miss the sites another test's thread reached first.
fn span_log() -> &'static SpanLog {
    use tracing_subscriber::layer::SubscriberExt;
    static LOG: std::sync::OnceLock<SpanLog> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log = SpanLog::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(log.clone()))
            .expect("no other global subscriber in these tests");
        log
    })
}

#[tokio::test]
async fn turns_model_calls_and_tool_calls_are_traced_with_gen_ai_fields() {
    let log = span_log();
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("echo", json!({})).usage(Usage {
            input_tokens: 11,
            output_tokens: 7,
            ..Default::default()
        }))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    // A current-thread runtime: the turn and its tools run on this thread.
    RECORDING.set(true);
    agent.handle("erin", "hi").await.unwrap();
    RECORDING.set(false);
    let spans = log.0.lock().unwrap().clone();
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, n, _)| n == name)
            .map(|(_, _, f)| f.clone())
            .unwrap_or_else(|| panic!("no `{name}` span"))
    };
    assert_eq!(
        find("turn")
            .get("gen_ai.conversation.id")
            .map(String::as_str),
        Some("erin"),
        "{spans:#?}"
    );
    let chat = find("chat");
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.request.model"], "mock");
    assert_eq!(chat["gen_ai.usage.input_tokens"], "11");
    assert_eq!(chat["gen_ai.usage.output_tokens"], "7");
    assert_eq!(chat["gen_ai.response.finish_reasons"], "tool_calls");
    let tool = find("execute_tool");
    assert_eq!(tool["gen_ai.tool.name"], "echo");
    assert_eq!(tool["gen_ai.tool.call.id"], "call_1");
}

/// `handle` makes no events when nobody listens; with a watcher it makes
/// them all, as `stream` does.
#[tokio::test]
async fn a_watcher_sees_the_events_of_a_handled_turn() {
    struct Kinds(Arc<std::sync::Mutex<Vec<String>>>);
    impl ferrobot::agent::TurnWatch for Kinds {
        fn event(&mut self, event: &AgentEvent) {
            let kind = match event {
                AgentEvent::TextDelta(t) => format!("text {t}"),
                AgentEvent::ToolCallStarted(call) => format!("started {}", call.name),
                AgentEvent::ToolCallFinished(record) => format!("finished {}", record.call.name),
                AgentEvent::Status(Status::RunningTool { tool }) => format!("running {tool}"),
                _ => return,
            };
            self.0.lock().unwrap().push(kind);
        }
        fn end(self: Box<Self>, _: Result<&ferrobot::Reply, &Error>) {}
    }
    let kinds = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = Arc::clone(&kinds);
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("echo", json!({"a": 1})))
        .then(MockTurn::new().text("Hello world").chunked(6));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .watcher(move |_: &str, _: &ferrobot::agent::TurnRequest| Kinds(Arc::clone(&kept)))
        .build();
    agent.handle("a", "hi").await.unwrap();
    assert_eq!(
        *kinds.lock().unwrap(),
        [
            "started echo",
            "running echo",
            "finished echo",
            "text Hello ",
            "text world"
        ]
    );
}
