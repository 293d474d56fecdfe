//! Does this server and model handle tool calling properly? Fixed
//! scenarios run against any [`Provider`], each judged by protocol, not by
//! the model's skill: [`Conformance`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::request::canonical;
use crate::message::{Message, Part, Role, ToolCall, ToolResult, ToolSpec};
use crate::provider::assemble::parse_arguments;
use crate::provider::{
    ChatRequest, FinishReason, ModelSettings, OutputFormat, Provider, ProviderError, StreamEvent,
    ToolChoice,
};

/// How long one scenario may take: a small model on a laptop is slow, a
/// hung server must not hang the check.
const SCENARIO_TIME: Duration = Duration::from_secs(120);

/// How a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// It worked as the protocol says.
    Pass,
    /// It worked, with the server doing something else that ferrobot made
    /// up for; the detail says what.
    Degraded,
    /// It broke; the detail says how, and the exchange is kept.
    Fail,
    /// The model never did it (no parallel calls, no reasoning), or the
    /// check was not given what it needs.
    Skipped,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Verdict::Pass => "pass",
            Verdict::Degraded => "degraded",
            Verdict::Fail => "fail",
            Verdict::Skipped => "skipped",
        })
    }
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Outcome {
    /// The scenario, e.g. `tool_call`.
    pub name: &'static str,
    /// How it ended.
    pub verdict: Verdict,
    /// What the server did instead, what broke, why it was skipped, or a
    /// note on a pass; often empty on a pass.
    pub detail: String,
    /// For a failure, the request as sent (ferrobot's form of it) and
    /// what came back, for a bug report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange: Option<Value>,
}

/// Every scenario's result, in order.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The provider's name, e.g. `openai`.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The scenarios.
    pub scenarios: Vec<Outcome>,
}

impl Report {
    /// Whether tool calling is usable: a tool call is made and its result
    /// taken back (passed or degraded).
    pub fn tool_calling_usable(&self) -> bool {
        ["tool_call", "tool_result"].iter().all(|name| {
            self.scenarios
                .iter()
                .any(|s| s.name == *name && matches!(s.verdict, Verdict::Pass | Verdict::Degraded))
        })
    }

    /// The verdict of scenario `name`, if it ran.
    pub fn verdict(&self, name: &str) -> Option<Verdict> {
        self.scenarios
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.verdict)
    }
}

impl fmt::Display for Report {
    /// A table, one scenario a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} {}", self.provider, self.model)?;
        for outcome in &self.scenarios {
            write!(f, "{:<20} {:<9}", outcome.name, outcome.verdict)?;
            if !outcome.detail.is_empty() {
                write!(f, " {}", outcome.detail)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The check: a provider, and optionally the same server without
/// streaming and with a model it doesn't serve.
///
/// Scenarios: `streamed_text`, `non_streamed_text`, `usage`, `tool_call`,
/// `tool_result`, `zero_argument_tool`, `nested_arguments`,
/// `unicode_result`, `parallel_calls`, `reasoning`, `typed_output`,
/// `cancellation`, `error_status`. Every call runs at temperature 0 with at
/// most 256 new tokens.
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use ferrobot::provider::OpenAiCompatible;
/// use ferrobot::testing::conformance::Conformance;
///
/// let url = "http://localhost:8080/v1";
/// let report = Conformance::new(OpenAiCompatible::new(url).model("qwen3:8b"))
///     .non_streaming(OpenAiCompatible::new(url).model("qwen3:8b").streaming(false))
///     .failing(OpenAiCompatible::new(url).model("no-such-model"))
///     .run()
///     .await;
/// print!("{report}");
/// assert!(report.tool_calling_usable());
/// # }
/// ```
#[derive(Debug)]
pub struct Conformance {
    provider: Box<dyn Provider>,
    non_streaming: Option<Box<dyn Provider>>,
    failing: Option<Box<dyn Provider>>,
}

/// What one call gave: its events (or the error that ended them).
struct Call {
    request: Value,
    events: Vec<StreamEvent>,
    error: Option<ProviderError>,
}

impl Call {
    fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Each call's id (if the server gave one), name and raw arguments, by
    /// index.
    fn calls(&self) -> BTreeMap<usize, (Option<String>, String, String)> {
        let mut calls: BTreeMap<usize, (Option<String>, String, String)> = BTreeMap::new();
        for event in &self.events {
            if let StreamEvent::ToolCallDelta(delta) = event {
                // The first id and name win, as the agent assembles them:
                // some servers repeat them on every piece.
                let call = calls.entry(delta.index).or_default();
                if call.0.is_none() {
                    call.0 = delta.id.clone().filter(|id| !id.is_empty());
                }
                if call.1.is_empty()
                    && let Some(name) = &delta.name
                {
                    call.1.clone_from(name);
                }
                call.2.push_str(&delta.arguments);
            }
        }
        calls
    }

    fn finish(&self) -> Option<&FinishReason> {
        self.events.iter().rev().find_map(|e| match e {
            StreamEvent::Finish(reason) => Some(reason),
            _ => None,
        })
    }

    fn has(&self, wanted: impl Fn(&StreamEvent) -> bool) -> bool {
        self.events.iter().any(wanted)
    }

    /// The exchange, for a bug report.
    fn exchange(&self) -> Value {
        json!({
            "request": self.request,
            "events": self.events.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>(),
            "error": self.error.as_ref().map(ProviderError::chain),
        })
    }

    /// The failure, when the server failed the call.
    fn server_failure(&self, name: &'static str) -> Option<Outcome> {
        let error = self.error.as_ref()?;
        Some(self.failed(name, format!("the server failed: {}", error.chain())))
    }

    /// The raw arguments of the first call the model made; the outcome
    /// otherwise: the server's failure, or skipped when it made none.
    fn first_arguments(&self, name: &'static str) -> Result<String, Outcome> {
        if let Some(failed) = self.server_failure(name) {
            return Err(failed);
        }
        let first = self.calls().into_values().next();
        first
            .map(|(_, _, raw)| raw)
            .ok_or_else(|| outcome(name, Verdict::Skipped, "the model made no call"))
    }

    fn failed(&self, name: &'static str, detail: impl Into<String>) -> Outcome {
        Outcome {
            name,
            verdict: Verdict::Fail,
            detail: detail.into(),
            exchange: Some(self.exchange()),
        }
    }
}

fn outcome(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Outcome {
    Outcome {
        name,
        verdict,
        detail: detail.into(),
        exchange: None,
    }
}

/// What a request is made of; borrowed by the `ChatRequest` built from it.
struct Ask {
    messages: Vec<Message>,
    tools: Vec<ToolSpec>,
    choice: ToolChoice,
    output: Option<OutputFormat>,
}

impl Ask {
    fn text(prompt: &str) -> Self {
        Self {
            messages: vec![Message::user(prompt)],
            tools: Vec::new(),
            choice: ToolChoice::Auto,
            output: None,
        }
    }

    fn tools(mut self, tools: Vec<ToolSpec>, choice: ToolChoice) -> Self {
        self.tools = tools;
        self.choice = choice;
        self
    }

    fn request<'a>(
        &'a self,
        settings: &'a ModelSettings,
        cancel: &'a CancellationToken,
    ) -> ChatRequest<'a> {
        ChatRequest::new(&self.messages)
            .tools(&self.tools)
            .tool_choice(&self.choice)
            .output(self.output.as_ref())
            .settings(settings)
            .cancel(cancel)
    }
}

fn weather() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "The current weather in a city.",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. Paris."}},
            "required": ["city"],
        }),
    )
}

/// The check's own tool result: accents, CJK, an emoji and a sign.
const UNICODE: &str = "Ünïcödé ✓ 日本語 🚀 naïve café";

impl Conformance {
    /// The check against `provider`, as configured (streaming or not).
    pub fn new(provider: impl Provider + 'static) -> Self {
        Self {
            provider: Box::new(provider),
            non_streaming: None,
            failing: None,
        }
    }

    /// The same server and model without streaming, for
    /// `non_streamed_text`; skipped without it.
    #[must_use]
    pub fn non_streaming(mut self, provider: impl Provider + 'static) -> Self {
        self.non_streaming = Some(Box::new(provider));
        self
    }

    /// The same server asked for a model it doesn't serve, for
    /// `error_status`; skipped without it.
    #[must_use]
    pub fn failing(mut self, provider: impl Provider + 'static) -> Self {
        self.failing = Some(Box::new(provider));
        self
    }

    /// Runs every scenario, one after the other.
    pub async fn run(&self) -> Report {
        let mut scenarios = Vec::new();
        let text = call(
            self.provider.as_ref(),
            &Ask::text("Say hello in one short sentence."),
        )
        .await;
        scenarios.push(judge_text("streamed_text", &text));
        scenarios.push(match &self.non_streaming {
            Some(provider) => {
                let call = call(
                    provider.as_ref(),
                    &Ask::text("Say hello in one short sentence."),
                )
                .await;
                judge_text("non_streamed_text", &call)
            }
            None => outcome(
                "non_streamed_text",
                Verdict::Skipped,
                "no non-streaming provider given",
            ),
        });
        scenarios.push(if text.error.is_some() {
            outcome("usage", Verdict::Skipped, "no answer to read it from")
        } else if text.has(|e| matches!(e, StreamEvent::Usage(_))) {
            outcome("usage", Verdict::Pass, "")
        } else {
            outcome(
                "usage",
                Verdict::Degraded,
                "no usage in the answer: token counts stay 0",
            )
        });
        let (tool_call, asked) = self.tool_call().await;
        scenarios.push(tool_call);
        scenarios.push(self.tool_result(asked).await);
        scenarios.push(self.zero_argument_tool().await);
        scenarios.push(self.nested_arguments().await);
        scenarios.push(self.unicode_result().await);
        let parallel = self.parallel_calls().await;
        scenarios.push(parallel.0);
        let reasoned = [&text, &parallel.1]
            .iter()
            .any(|c| c.has(|e| matches!(e, StreamEvent::ReasoningDelta(_))));
        scenarios.push(if reasoned {
            outcome("reasoning", Verdict::Pass, "")
        } else {
            outcome(
                "reasoning",
                Verdict::Skipped,
                "the model showed no reasoning",
            )
        });
        scenarios.push(self.typed_output().await);
        scenarios.push(self.cancellation().await);
        scenarios.push(self.error_status().await);
        Report {
            provider: self.provider.name().to_owned(),
            model: self.provider.model_name().to_owned(),
            scenarios,
        }
    }

    /// One call to `get_weather`, asked for; forced when the model
    /// answers in text. Returns the call made, for `tool_result`.
    async fn tool_call(&self) -> (Outcome, Option<ToolCall>) {
        const NAME: &str = "tool_call";
        let prompt = "What is the weather in Paris? Use the get_weather tool.";
        let mut asked = call(
            self.provider.as_ref(),
            &Ask::text(prompt).tools(vec![weather()], ToolChoice::Auto),
        )
        .await;
        let mut notes = Vec::new();
        let mut forced = false;
        if asked.error.is_none() && asked.calls().is_empty() {
            // The model's choice, not the protocol's: a note, not a fault.
            forced = true;
            asked = call(
                self.provider.as_ref(),
                &Ask::text(prompt).tools(vec![weather()], ToolChoice::Required),
            )
            .await;
        }
        if let Some(failed) = asked.server_failure(NAME) {
            return (failed, None);
        }
        let calls = asked.calls();
        let Some((id, name, raw)) = calls.values().next() else {
            return (
                asked.failed(NAME, "the model never called the tool, even when required"),
                None,
            );
        };
        if name != "get_weather" {
            return (
                asked.failed(NAME, format!("the call names `{name}`, not `get_weather`")),
                None,
            );
        }
        let arguments = match arguments(raw) {
            Ok((arguments, note)) => {
                notes.extend(note);
                arguments
            }
            Err(problem) => return (asked.failed(NAME, problem), None),
        };
        if !arguments["city"].is_string() {
            return (
                asked.failed(
                    NAME,
                    format!(
                        "the arguments {arguments} have no `city` string, which the schema requires"
                    ),
                ),
                None,
            );
        }
        if id.is_none() {
            notes.push("ids missing, ferrobot minted them".into());
        }
        if asked.finish() != Some(&FinishReason::ToolCalls) {
            notes.push(format!(
                "finish reason {} beside a tool call",
                asked
                    .finish()
                    .map_or("missing".to_owned(), |f| format!("{f:?}").to_lowercase())
            ));
        }
        let made = ToolCall::new(
            id.clone().unwrap_or_else(|| "call_conformance_1".into()),
            name.clone(),
            arguments,
        );
        let mut judged = degraded_if(NAME, &notes);
        if forced {
            let note = "called once required (with tool_choice auto it answered in text)";
            judged.detail = if judged.detail.is_empty() {
                note.to_owned()
            } else {
                format!("{}; {note}", judged.detail)
            };
        }
        (judged, Some(made))
    }

    /// The call's result sent back: the model answers from it.
    async fn tool_result(&self, asked: Option<ToolCall>) -> Outcome {
        const NAME: &str = "tool_result";
        let made = asked.unwrap_or_else(|| {
            ToolCall::new(
                "call_conformance_1",
                "get_weather",
                json!({"city": "Paris"}),
            )
        });
        let ask = Ask {
            messages: round(
                "What is the weather in Paris? Use the get_weather tool.",
                made,
                "Sunny, 21 °C.",
            ),
            tools: vec![weather()],
            choice: ToolChoice::Auto,
            output: None,
        };
        let answer = call(self.provider.as_ref(), &ask).await;
        match &answer.error {
            Some(error) => answer.failed(
                NAME,
                format!("the server refused the tool result: {}", error.chain()),
            ),
            None if answer.text().trim().is_empty() && answer.calls().is_empty() => {
                answer.failed(NAME, "no answer after the tool result")
            }
            None if answer.text().trim().is_empty() => outcome(
                NAME,
                Verdict::Degraded,
                "the model called a tool again instead of answering from the result",
            ),
            None => outcome(NAME, Verdict::Pass, ""),
        }
    }

    async fn zero_argument_tool(&self) -> Outcome {
        const NAME: &str = "zero_argument_tool";
        let clock = ToolSpec::new(
            "get_time",
            "The current time. Takes no arguments.",
            json!({"type": "object", "properties": {}}),
        );
        let ask = Ask::text("What time is it? Use the get_time tool.")
            .tools(vec![clock], ToolChoice::Required);
        let answer = call(self.provider.as_ref(), &ask).await;
        let raw = match answer.first_arguments(NAME) {
            Ok(raw) => raw,
            Err(outcome) => return outcome,
        };
        match arguments(&raw) {
            Ok((arguments, note)) if arguments.as_object().is_some_and(|o| o.is_empty()) => {
                if raw.trim().is_empty() {
                    outcome(NAME, Verdict::Degraded, "no arguments at all, read as {}")
                } else {
                    degraded_if(NAME, &note.into_iter().collect::<Vec<_>>())
                }
            }
            Ok((arguments, _)) => outcome(
                NAME,
                Verdict::Degraded,
                format!("arguments {arguments} for a tool that takes none"),
            ),
            Err(problem) => answer.failed(NAME, problem),
        }
    }

    async fn nested_arguments(&self) -> Outcome {
        const NAME: &str = "nested_arguments";
        let event = ToolSpec::new(
            "create_event",
            "Put an event in the calendar.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "when": {
                        "type": "object",
                        "properties": {"date": {"type": "string"}, "hour": {"type": "integer"}},
                        "required": ["date", "hour"],
                    },
                    "attendees": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["title", "when", "attendees"],
            }),
        );
        let ask =
            Ask::text("Put a team lunch on 2026-12-03 at 12 with Ann and Bob in the calendar.")
                .tools(vec![event], ToolChoice::Required);
        let answer = call(self.provider.as_ref(), &ask).await;
        let raw = match answer.first_arguments(NAME) {
            Ok(raw) => raw,
            Err(outcome) => return outcome,
        };
        match arguments(&raw) {
            Ok((arguments, note)) => {
                let shaped = arguments["title"].is_string()
                    && arguments["when"]["date"].is_string()
                    && arguments["when"]["hour"].is_i64()
                    && arguments["attendees"].is_array();
                if shaped {
                    degraded_if(NAME, &note.into_iter().collect::<Vec<_>>())
                } else {
                    answer.failed(
                        NAME,
                        format!("the arguments {arguments} don't have the schema's shape"),
                    )
                }
            }
            Err(problem) => answer.failed(NAME, problem),
        }
    }

    async fn unicode_result(&self) -> Outcome {
        const NAME: &str = "unicode_result";
        let made = ToolCall::new(
            "call_conformance_2",
            "get_weather",
            json!({"city": "Zürich"}),
        );
        let ask = Ask {
            messages: round(
                "What is the weather in Zürich? Use the get_weather tool.",
                made,
                UNICODE,
            ),
            tools: vec![weather()],
            choice: ToolChoice::Auto,
            output: None,
        };
        let answer = call(self.provider.as_ref(), &ask).await;
        match &answer.error {
            Some(error) => answer.failed(
                NAME,
                format!(
                    "the server refused a tool result in Unicode: {}",
                    error.chain()
                ),
            ),
            None if answer.text().contains(UNICODE) => {
                outcome(NAME, Verdict::Pass, "echoed intact")
            }
            None => outcome(NAME, Verdict::Pass, "taken (the model didn't repeat it)"),
        }
    }

    async fn parallel_calls(&self) -> (Outcome, Call) {
        const NAME: &str = "parallel_calls";
        let ask = Ask::text(
            "What is the weather in Paris and in Tokyo? Call get_weather once for each city, both at once.",
        )
        .tools(vec![weather()], ToolChoice::Auto);
        let answer = call(self.provider.as_ref(), &ask).await;
        let verdict = match answer.server_failure(NAME) {
            Some(failed) => failed,
            None => {
                let calls = answer.calls();
                let ids: Vec<_> = calls.values().filter_map(|c| c.0.clone()).collect();
                let mut unique = ids.clone();
                unique.sort();
                unique.dedup();
                match calls.len() {
                    0 | 1 => outcome(NAME, Verdict::Skipped, "the model made one call or none"),
                    n if unique.len() < ids.len() => {
                        answer.failed(NAME, format!("{n} calls share an id"))
                    }
                    n if ids.len() < n => outcome(
                        NAME,
                        Verdict::Degraded,
                        format!("{n} calls, ids missing, ferrobot minted them"),
                    ),
                    n => outcome(NAME, Verdict::Pass, format!("{n} calls")),
                }
            }
        };
        (verdict, answer)
    }

    async fn typed_output(&self) -> Outcome {
        const NAME: &str = "typed_output";
        if !self.provider.native_output() {
            return outcome(
                NAME,
                Verdict::Skipped,
                "the provider has no native structured output",
            );
        }
        let mut ask = Ask::text("Which city is the capital of France? Answer in JSON.");
        ask.output = Some(OutputFormat::new(
            "capital",
            json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": false,
            }),
        ));
        let answer = call(self.provider.as_ref(), &ask).await;
        if let Some(error) = &answer.error {
            return answer.failed(
                NAME,
                format!("the server refused a JSON schema: {}", error.chain()),
            );
        }
        match serde_json::from_str::<Value>(answer.text().trim()) {
            Ok(value) if value["city"].is_string() => outcome(NAME, Verdict::Pass, ""),
            Ok(value) => answer.failed(NAME, format!("{value} doesn't fit the schema")),
            Err(error) => answer.failed(NAME, format!("the answer is no JSON ({error})")),
        }
    }

    /// The call cancelled after its first event: the stream ends soon.
    async fn cancellation(&self) -> Outcome {
        const NAME: &str = "cancellation";
        let cancel = CancellationToken::new();
        let ask = Ask::text("Count from 1 to 100, one number a line.");
        let settings = settings();
        let request = ask.request(&settings, &cancel);
        let sent = canonical(&request);
        let failed = |detail: String| Outcome {
            name: NAME,
            verdict: Verdict::Fail,
            detail,
            exchange: Some(json!({ "request": sent })),
        };
        let mut stream = self.provider.stream(request);
        match tokio::time::timeout(SCENARIO_TIME, stream.next()).await {
            Err(_) => return failed("no event before the time-out".into()),
            Ok(None) => {
                return outcome(
                    NAME,
                    Verdict::Skipped,
                    "the answer ended before it could be cancelled",
                );
            }
            Ok(Some(Err(error))) => return failed(format!("the server failed: {}", error.chain())),
            Ok(Some(Ok(_))) => {}
        }
        cancel.cancel();
        let cancelled = Instant::now();
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            let (mut after, mut finished) = (0usize, false);
            while let Some(Ok(event)) = stream.next().await {
                after += 1;
                finished |= matches!(event, StreamEvent::Finish(_));
            }
            (after, finished)
        })
        .await;
        match drained {
            // The whole answer came: the cancel was never put to the test.
            Ok((_, true)) => outcome(
                NAME,
                Verdict::Skipped,
                "the answer finished before the cancel took effect",
            ),
            Ok(_) if cancelled.elapsed() < Duration::from_secs(2) => {
                outcome(NAME, Verdict::Pass, "")
            }
            Ok((after, false)) => outcome(
                NAME,
                Verdict::Degraded,
                format!(
                    "{after} events and {} ms after the cancel",
                    cancelled.elapsed().as_millis()
                ),
            ),
            Err(_) => failed("the stream went on 5 s after the cancel".into()),
        }
    }

    async fn error_status(&self) -> Outcome {
        const NAME: &str = "error_status";
        let Some(failing) = &self.failing else {
            return outcome(
                NAME,
                Verdict::Skipped,
                "no provider asking for a missing model given",
            );
        };
        let answer = call(failing.as_ref(), &Ask::text("Say hello.")).await;
        // Retried first: what the server said is the last answer.
        let mut error = answer.error.as_ref();
        while let Some(ProviderError::GaveUp { last, .. }) = error {
            error = Some(last);
        }
        match error {
            Some(ProviderError::Status {
                status, message, ..
            }) if (400..500).contains(status) => {
                if message.trim().is_empty() {
                    outcome(
                        NAME,
                        Verdict::Degraded,
                        format!("{status} without a message"),
                    )
                } else {
                    outcome(NAME, Verdict::Pass, format!("{status}"))
                }
            }
            Some(ProviderError::Status { status, .. }) => outcome(
                NAME,
                Verdict::Degraded,
                format!("{status} for a missing model, where a 4xx says the request is at fault"),
            ),
            Some(error) => {
                answer.failed(NAME, format!("not an HTTP status but: {}", error.chain()))
            }
            None => outcome(
                NAME,
                Verdict::Skipped,
                "the server answers for any model name",
            ),
        }
    }
}

/// Pass, or degraded with the notes joined.
fn degraded_if(name: &'static str, notes: &[String]) -> Outcome {
    if notes.is_empty() {
        outcome(name, Verdict::Pass, "")
    } else {
        outcome(name, Verdict::Degraded, notes.join("; "))
    }
}

/// A conversation of one tool round: the question, the call, its result.
fn round(prompt: &str, made: ToolCall, result: &str) -> Vec<Message> {
    let id = made.id.clone();
    vec![
        Message::user(prompt),
        Message::new(Role::Assistant, vec![Part::ToolCall(made)]),
        Message::new(
            Role::Tool,
            vec![Part::ToolResult(ToolResult::ok(id, result))],
        ),
    ]
}

/// A call's raw arguments decoded as the agent decodes them, as an
/// object, with a note when they came double-encoded; why not otherwise.
fn arguments(raw: &str) -> Result<(Value, Option<String>), String> {
    let double = matches!(serde_json::from_str::<Value>(raw), Ok(Value::String(_)));
    match parse_arguments(raw.to_owned()) {
        object @ Value::Object(_) => Ok((
            object,
            double.then(|| "arguments arrived double-encoded, ferrobot decoded them".to_owned()),
        )),
        Value::String(_) if serde_json::from_str::<Value>(raw).is_err() => {
            Err(format!("the arguments are no JSON: {raw}"))
        }
        other => Err(format!("the arguments are {other}, not an object")),
    }
}

fn settings() -> ModelSettings {
    ModelSettings::builder()
        .temperature(0.0)
        .max_tokens(256)
        .build()
}

/// One call, its events collected, within [`SCENARIO_TIME`].
async fn call(provider: &dyn Provider, ask: &Ask) -> Call {
    let settings = settings();
    let never = CancellationToken::new();
    let request = ask.request(&settings, &never);
    let mut made = Call {
        request: canonical(&request),
        events: Vec::new(),
        error: None,
    };
    let collected = tokio::time::timeout(SCENARIO_TIME, async {
        let mut stream = provider.stream(request);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => made.events.push(event),
                Err(error) => {
                    made.error = Some(error);
                    break;
                }
            }
        }
    })
    .await;
    if collected.is_err() {
        made.error = Some(ProviderError::Other(
            format!("no end after {} s", SCENARIO_TIME.as_secs()).into(),
        ));
    }
    made
}

fn judge_text(name: &'static str, call: &Call) -> Outcome {
    if let Some(failed) = call.server_failure(name) {
        return failed;
    }
    if call.text().trim().is_empty() {
        return call.failed(name, "no text in the answer");
    }
    match call.finish() {
        Some(FinishReason::Stop) => outcome(name, Verdict::Pass, ""),
        Some(FinishReason::Length) => outcome(name, Verdict::Pass, "cut at the token limit"),
        None => outcome(name, Verdict::Degraded, "no finish reason, read as stop"),
        Some(other) => outcome(name, Verdict::Degraded, format!("finish reason {other:?}")),
    }
}
