//! What a turn reports: its events in order, and its tracing spans.

use std::sync::Arc;

use ferrobot::agent::Status;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, AgentEvent, Usage};
use futures_util::StreamExt;
use serde_json::json;

use super::echo_tool;

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
