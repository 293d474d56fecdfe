//! What a turn reports while it runs, and what it ends with.
//!
//! [`AgentEvent`]s stream out of a [`TurnStream`]; the last one is
//! [`AgentEvent::Done`] with the turn's [`Reply`], or the stream ends with an
//! error. [`TurnStream::transcript`] collects a whole turn into a
//! [`Transcript`], whose lines are the events' `Display`.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;

use super::TurnStream;
use crate::error::{Error, Result};
use crate::message::{ToolCall, Usage};
use crate::provider::{FinishReason, ToolCallDelta};

/// One thing that happened during a turn, in order.
///
/// A turn's stream ends with [`AgentEvent::Done`] or an error.
///
/// # The order of a turn
///
/// A turn streams its events in this order:
///
/// 1. [`Status`]`(`[`Thinking`](Status::Thinking)`)`, before each model call.
/// 2. What the model writes, as it streams and in the order it wrote it:
///    [`ReasoningDelta`](Self::ReasoningDelta), [`TextDelta`](Self::TextDelta),
///    [`RefusalDelta`](Self::RefusalDelta) and
///    [`ToolCallDelta`](Self::ToolCallDelta). Tool-call deltas come as the
///    provider sends them: `OpenAiCompatible`, `Anthropic` and
///    `OpenAiResponses` send one delta that opens the call (its id and name,
///    usually no arguments yet), then one per piece of the arguments;
///    `Gemini`, `Ollama`, a non-streamed response and
///    [`MockProvider`](crate::testing::MockProvider) send one delta per call,
///    with the whole arguments.
/// 3. [`Usage`](Self::Usage), once the model call has ended, when the
///    provider reported token counts (`OpenAiCompatible` asks for them;
///    [`MockTurn::usage`](crate::testing::MockTurn::usage) scripts them). One
///    per model call: [`Reply::usage`] is their sum.
/// 4. Each tool call of the answer, in the model's order:
///    [`ToolCallStarted`](Self::ToolCallStarted), then
///    [`Status`]`(`[`AwaitingConfirmation`](Status::AwaitingConfirmation)`)`
///    if the tool asks first, [`Status`]`(`[`RunningTool`](Status::RunningTool)`)`
///    if it runs, and [`ToolCallFinished`](Self::ToolCallFinished) however it
///    ended. A call refused before it runs (unknown tool, invalid arguments, a
///    declined confirmation) has no `RunningTool`. When a round's calls run
///    concurrently their events interleave: each call's keep this order, and
///    `ToolCallFinished` come in the order the calls finish.
/// 5. Then 1 again: the model reads the results.
/// 6. [`Done`](Self::Done), last, once the model answers without tool calls.
///
/// How other turns end:
///
/// - **A provider failure** ends the stream with `Err(`[`Error::Provider`]`)`
///   after what had streamed; the failed call has no `Usage`.
/// - **Cancelling** ([`TurnStream::cancellation`]) ends it with
///   `Err(`[`Error::Cancelled`]`)`. An interrupted model call has no `Usage`;
///   each call of an interrupted tool round still gets `ToolCallStarted` and
///   a `ToolCallFinished` with [`ToolOutcome::Interrupted`]. A turn cancelled
///   while it waits for the conversation's previous turn yields only the
///   error.
/// - **The round cap and budgets** ([`TurnBudget`](super::TurnBudget)): the
///   last model call streams as any other, without tools. A tool call the
///   model makes anyway is not run: it has `ToolCallStarted` and a
///   `ToolCallFinished` with [`ToolOutcome::Rejected`] (no `RunningTool`),
///   and is in [`Reply::tool_calls`] as such.
/// - **A slash command** calls no model: no `Thinking`, no deltas, no
///   `Usage`; its tool call has the events of step 4, then `Done`. A
///   built-in command (`/help`, `/undo`) yields only `Done`.
/// - **A summary** of a long conversation (a
///   [`ContextPolicy`](crate::history::ContextPolicy) with compaction) is a
///   model call without events: its tokens are in [`Reply::usage`] but in no
///   `Usage` event.
/// - **A typed answer** ([`Output`](super::Output)): while it streams, each
///   delta that changes what can be read of it so far is followed by a
///   `PartialOutput` with that value (strings cut off kept as far as they
///   came, keys without a value left out). The deltas themselves come as
///   usual: `TextDelta`s in native and prompted modes, `ToolCallDelta`s of
///   the output tool in tool mode, whose call has no `ToolCallStarted`.
///   An answer that doesn't fit is followed by another model call.
/// - **A sub-agent** ([`Agent::as_tool`](super::Agent::as_tool)) runs as a
///   tool call: between its `RunningTool` and `ToolCallFinished` come its
///   own turn's events, each wrapped in [`SubAgent`](Self::SubAgent), in
///   the order above, ending with its `Done`. Its `Usage` events are
///   wrapped too; [`Reply::usage`] counts its tokens all the same.
///
/// # Display
///
/// Each event displays as one line (no line break in it) for logs and tests:
///
/// | event | line |
/// |-------|------|
/// | `Status(Thinking)` | `thinking` |
/// | `Status(AwaitingConfirmation { tool })` | `awaiting confirmation of delete_file` |
/// | `Status(RunningTool { tool })` | `running get_weather` |
/// | `TextDelta` | `text "It is "` |
/// | `ReasoningDelta` | `reasoning "Paris is in France."` |
/// | `RefusalDelta` | `refusal "I can't."` |
/// | `ToolCallDelta` | `tool call delta #0 id=call_1 name=get_weather "{\"city\":"` |
/// | `ToolCallStarted` | `tool call call_1 get_weather {"city":"Paris"}` |
/// | `ToolCallFinished` | `tool result call_1 get_weather ok: 18 °C`, images after it: `… ok: The page: [image: image/png, 120 KB]` |
/// | `Usage` | `usage 12 in / 5 out`, or `usage 12 in (8 cached) / 5 out (3 reasoning)` |
/// | `PartialOutput` | `partial output {"name":"Ber"}` |
/// | `Steered` | `steered "use the staging server"` |
/// | `Done` | `done "It is 18 °C."`, or `done refusal "I can't."` |
/// | `SubAgent` | `[research call_1] ` then the sub-agent's event's line: `[research call_1] running get_weather` |
///
/// What the model writes in pieces (text, reasoning, refusal, a tool call's
/// arguments as they stream) and the reply's text are quoted and escaped
/// as Rust's `{:?}` does, so spaces at the ends and line breaks show. A
/// call's arguments are compact JSON. A tool's output ([`ToolOutcome`], then
/// the content) and the ids and names are shown as they are, with line
/// breaks written `\n` and `\r`. Nothing is shortened, and durations are
/// left out, so a turn's lines are the same on every run. The format may
/// grow with new events; the lines above stay as they are.
///
/// # Examples
///
/// A turn with one tool round, through [`MockProvider`](crate::testing::MockProvider):
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::testing::{MockProvider, MockTurn};
/// use ferrobot::{Agent, Usage, tool::from_fn};
/// use serde_json::json;
///
/// let usage = |input_tokens, output_tokens| Usage { input_tokens, output_tokens, ..Usage::default() };
/// let mock = MockProvider::new()
///     .then(MockTurn::new().tool_call("get_weather", json!({"city": "Paris"})).usage(usage(12, 5)))
///     .then(MockTurn::new().text("It is 18 °C.").chunked(6).usage(usage(30, 4)));
/// let weather = from_fn("get_weather", "Current weather.", |_: serde_json::Value, _ctx| async { "18 °C" });
/// let agent = Agent::builder().provider(mock).tool(weather).build();
///
/// let transcript = agent.stream("alice", "Weather in Paris?").transcript().await;
/// assert_eq!(
///     transcript.lines(),
///     [
///         "thinking",
///         r#"tool call delta #0 id=call_1 name=get_weather "{\"city\":\"Paris\"}""#,
///         "usage 12 in / 5 out",
///         r#"tool call call_1 get_weather {"city":"Paris"}"#,
///         "running get_weather",
///         "tool result call_1 get_weather ok: 18 °C",
///         "thinking",
///         r#"text "It is ""#,
///         r#"text "18 °C.""#,
///         "usage 30 in / 4 out",
///         r#"done "It is 18 °C.""#,
///     ]
/// );
/// assert_eq!(transcript.reply?.usage.output_tokens, 9);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// What the agent is doing now, for a spinner.
    Status(Status),
    /// A piece of the answer.
    TextDelta(String),
    /// A piece of the model's reasoning.
    ReasoningDelta(String),
    /// A piece of a refusal; it becomes the reply's text.
    RefusalDelta(String),
    /// A piece of a tool call the model is writing.
    ToolCallDelta(ToolCallDelta),
    /// A tool call is about to be decided on and run.
    ToolCallStarted(ToolCall),
    /// A tool call ended, however it ended.
    ToolCallFinished(ToolCallRecord),
    /// Token counts of one model call.
    Usage(Usage),
    /// What can be read so far of a typed answer that is streaming: a JSON
    /// value of the answer's shape, with what hasn't come yet left out. Not
    /// checked: the checked answer is [`Reply::output`].
    PartialOutput(serde_json::Value),
    /// The user said this while the turn ran, and it was entered into the
    /// turn ([`WhileBusy::Steer`](super::WhileBusy::Steer)): the model
    /// answers it next. What follows is a new answer.
    Steered(String),
    /// The turn's reply. Last event of a successful turn.
    Done(Reply),
    /// An event of a sub-agent's turn, run by one of this turn's tool calls
    /// ([`Agent::as_tool`](super::Agent::as_tool)): the child's events come
    /// in its own order, between the call's `ToolCallStarted` and
    /// `ToolCallFinished`, and its reply last as a `Done`. A grandchild's
    /// events are wrapped twice.
    SubAgent(SubAgentEvent),
}

/// An event of a sub-agent's turn, tagged with the call that ran it.
///
/// # Examples
/// ```
/// use ferrobot::agent::{AgentEvent, Status, SubAgentEvent};
/// let event = AgentEvent::SubAgent(SubAgentEvent::new("research", "call_1", 1, AgentEvent::Status(Status::Thinking)));
/// assert_eq!(event.to_string(), "[research call_1] thinking");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SubAgentEvent {
    /// The name of the tool that runs the sub-agent.
    pub tool: String,
    /// The id of the tool call that runs it, in the calling turn.
    pub call_id: String,
    /// How deep the sub-agent is: 1 for a sub-agent of the agent whose
    /// turn this is, 2 for one of its sub-agents, and so on.
    pub depth: u32,
    /// What happened in the sub-agent's turn.
    pub event: Box<AgentEvent>,
}

impl SubAgentEvent {
    /// `event` of the sub-agent run by the call `call_id` of `tool`,
    /// `depth` agents below the top.
    pub fn new(
        tool: impl Into<String>,
        call_id: impl Into<String>,
        depth: u32,
        event: AgentEvent,
    ) -> Self {
        Self {
            tool: tool.into(),
            call_id: call_id.into(),
            depth,
            event: Box::new(event),
        }
    }

    /// The sub-agent's own event, through any nesting: what a grandchild
    /// did, without the tags of the calls that ran it.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::{AgentEvent, SubAgentEvent};
    /// let inner = AgentEvent::TextDelta("hi".into());
    /// let nested = SubAgentEvent::new("lookup", "call_2", 2, inner.clone());
    /// let outer = SubAgentEvent::new("research", "call_1", 1, AgentEvent::SubAgent(nested));
    /// assert_eq!(outer.innermost(), &inner);
    /// ```
    pub fn innermost(&self) -> &AgentEvent {
        match &*self.event {
            AgentEvent::SubAgent(nested) => nested.innermost(),
            event => event,
        }
    }
}

/// What the agent is busy with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Waiting for the model.
    Thinking,
    /// Waiting for the user to approve a tool call.
    AwaitingConfirmation {
        /// The tool's name.
        tool: String,
    },
    /// Running a tool.
    RunningTool {
        /// The tool's name.
        tool: String,
    },
}

impl fmt::Display for Status {
    /// `thinking`, `awaiting confirmation of TOOL` or `running TOOL`.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::Status;
    /// assert_eq!(Status::Thinking.to_string(), "thinking");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Thinking => f.write_str("thinking"),
            Status::AwaitingConfirmation { tool } => {
                write!(f, "awaiting confirmation of {}", OneLine(tool))
            }
            Status::RunningTool { tool } => write!(f, "running {}", OneLine(tool)),
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolOutcome {
    /// The tool ran and succeeded.
    Ok,
    /// The tool ran and returned an error.
    Failed,
    /// The model's arguments were not valid JSON, not an object, or did not
    /// fit the tool's schema; the model is told what to fix.
    InvalidArguments,
    /// The tool panicked; the panic was caught.
    Panicked,
    /// The tool ran past its time-out and was stopped.
    TimedOut,
    /// The user declined the call (or no one could be asked).
    Declined,
    /// The call was not run: unknown or disabled tool, unavailable here, the
    /// round limit or a [`TurnBudget`](super::TurnBudget) limit reached, or
    /// invalid arguments too many times in a turn.
    Rejected,
    /// The turn was cancelled before or while the tool ran.
    Interrupted,
    /// The [`Policy`](crate::policy::Policy) denied the call: a rule or the
    /// floor.
    Denied,
    /// Nobody could decide on the call yet
    /// ([`Decision::Defer`](crate::confirm::Decision::Defer)): it waits,
    /// with its turn, for [`Agent::resume`](crate::Agent::resume).
    Deferred,
}

impl ToolOutcome {
    /// Whether the tool ran and succeeded.
    pub fn is_ok(self) -> bool {
        self == ToolOutcome::Ok
    }
}

impl fmt::Display for ToolOutcome {
    /// In lower case words: `ok`, `failed`, `invalid arguments`, `panicked`,
    /// `timed out`, `declined`, `rejected`, `interrupted`.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::ToolOutcome;
    /// assert_eq!(ToolOutcome::InvalidArguments.to_string(), "invalid arguments");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Failed => "failed",
            ToolOutcome::InvalidArguments => "invalid arguments",
            ToolOutcome::Panicked => "panicked",
            ToolOutcome::TimedOut => "timed out",
            ToolOutcome::Declined => "declined",
            ToolOutcome::Rejected => "rejected",
            ToolOutcome::Interrupted => "interrupted",
            ToolOutcome::Denied => "denied",
            ToolOutcome::Deferred => "deferred",
        })
    }
}

/// A tool call and how it ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCallRecord {
    /// The call as the model (or slash command) made it.
    pub call: ToolCall,
    /// How it ended.
    pub outcome: ToolOutcome,
    /// What the model was told: the tool's output or what went wrong.
    pub content: String,
    /// The images the tool showed the model, after `content`.
    pub images: Vec<crate::message::Image>,
    /// Time from the decision to run until the result, confirmation included.
    pub duration: Duration,
    /// What the [`Policy`](crate::policy::Policy) said, and which rule or
    /// default said it; `None` for a call turned back before it was asked
    /// (unknown tool, bad arguments).
    pub verdict: Option<crate::policy::Verdict>,
    /// The user's answer when asked ([`Decision::Edit`](crate::confirm::Decision::Edit)
    /// holds the arguments the call ran with); `None` when nobody was asked.
    pub decision: Option<crate::confirm::Decision>,
    /// Who answered, when the front end said who started the turn.
    pub approver: Option<String>,
}

/// The end of a successful turn.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Reply {
    /// The answer: the model's text, or its refusal when it refused. For a
    /// slash command, the tool's output.
    pub text: String,
    /// The model's reasoning in its final answer, if it showed any.
    pub reasoning: Option<String>,
    /// Whether the model refused.
    pub is_refusal: bool,
    /// Token counts of every model call of the turn, added up, those of the
    /// sub-agents it ran ([`Agent::as_tool`](super::Agent::as_tool))
    /// included.
    pub usage: Usage,
    /// Every tool call of the turn, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Why the model stopped; `None` for slash commands.
    pub finish_reason: Option<FinishReason>,
    /// The typed answer, checked against its [`Output`](super::Output);
    /// `None` when the turn asked for none. [`text`](Self::text) holds it
    /// as the model wrote it.
    pub output: Option<serde_json::Value>,
    /// Tool calls waiting for a decision
    /// ([`Decision::Defer`](crate::confirm::Decision::Defer)): the turn
    /// stopped before them, and [`text`](Self::text) lists them. Answer
    /// them with [`Agent::resume`](super::Agent::resume). Empty otherwise.
    pub pending: Vec<crate::confirm::ConfirmRequest>,
    /// Whether the message was entered into the conversation's running turn
    /// instead of running a turn of its own
    /// ([`WhileBusy::Steer`](super::WhileBusy::Steer)): then
    /// [`text`](Self::text) only says so, and the running turn answers it.
    pub steered: bool,
}

impl fmt::Display for AgentEvent {
    /// One line; see [the table above](AgentEvent#display).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentEvent::Status(status) => status.fmt(f),
            AgentEvent::TextDelta(text) => write!(f, "text {text:?}"),
            AgentEvent::ReasoningDelta(text) => write!(f, "reasoning {text:?}"),
            AgentEvent::RefusalDelta(text) => write!(f, "refusal {text:?}"),
            AgentEvent::ToolCallDelta(delta) => {
                write!(f, "tool call delta #{}", delta.index)?;
                if let Some(id) = &delta.id {
                    write!(f, " id={}", OneLine(id))?;
                }
                if let Some(name) = &delta.name {
                    write!(f, " name={}", OneLine(name))?;
                }
                write!(f, " {:?}", delta.arguments)
            }
            AgentEvent::ToolCallStarted(call) => write!(
                f,
                "tool call {} {} {}",
                OneLine(&call.id),
                OneLine(&call.name),
                call.arguments
            ),
            AgentEvent::ToolCallFinished(record) => {
                write!(
                    f,
                    "tool result {} {} {}",
                    OneLine(&record.call.id),
                    OneLine(&record.call.name),
                    record.outcome
                )?;
                if !record.content.is_empty() {
                    write!(f, ": {}", OneLine(&record.content))?;
                }
                for image in &record.images {
                    write!(f, " {}", image.describe())?;
                }
                Ok(())
            }
            AgentEvent::Usage(usage) => {
                write!(f, "usage {} in", usage.input_tokens)?;
                if usage.cached_tokens > 0 {
                    write!(f, " ({} cached)", usage.cached_tokens)?;
                }
                write!(f, " / {} out", usage.output_tokens)?;
                if usage.reasoning_tokens > 0 {
                    write!(f, " ({} reasoning)", usage.reasoning_tokens)?;
                }
                Ok(())
            }
            AgentEvent::PartialOutput(value) => write!(f, "partial output {value}"),
            AgentEvent::Steered(text) => write!(f, "steered {text:?}"),
            AgentEvent::Done(reply) if reply.is_refusal => {
                write!(f, "done refusal {:?}", reply.text)
            }
            AgentEvent::Done(reply) => write!(f, "done {:?}", reply.text),
            AgentEvent::SubAgent(sub) => write!(
                f,
                "[{} {}] {}",
                OneLine(&sub.tool),
                OneLine(&sub.call_id),
                sub.event
            ),
        }
    }
}

/// Writes a text with its line breaks escaped, so it stays on one line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['\n', '\r']) {
            f.write_str(&rest[..at])?;
            f.write_str(if rest.as_bytes()[at] == b'\n' {
                "\\n"
            } else {
                "\\r"
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// A whole turn, collected by [`TurnStream::transcript`]: its events and
/// how it ended.
///
/// Its `Display` is [`lines`](Self::lines), one per line, for printing a
/// turn or snapshotting it (`insta::assert_snapshot!(transcript.to_string())`).
#[derive(Debug)]
#[non_exhaustive]
pub struct Transcript {
    /// Every event the stream yielded, in order; [`AgentEvent::Done`] last
    /// when the turn succeeded.
    pub events: Vec<AgentEvent>,
    /// The turn's reply, or why it ended without one.
    pub reply: Result<Reply>,
}

impl Transcript {
    /// Each event's line ([`AgentEvent`]'s `Display`), in order, and
    /// `error: …` last when the turn failed, with the error's causes
    /// (`error: LLM unavailable: server answered 503: busy`, `error: turn
    /// cancelled`).
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.events.iter().map(ToString::to_string).collect();
        if let Err(error) = &self.reply {
            lines.push(format!("error: {}", OneLine(&crate::error::chain(error))));
        }
        lines
    }
}

impl fmt::Display for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.lines().iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(line)?;
        }
        Ok(())
    }
}

impl TurnStream {
    /// Waits for the turn to end and collects it: the events not yet taken
    /// from the stream, and the reply or the error it ended with. For tests
    /// that assert a whole turn, and for programs that log one.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::{Agent, testing::{MockProvider, MockTurn}};
    ///
    /// let mock = MockProvider::new().then(MockTurn::new().reasoning("A greeting.").text("Hi!"));
    /// let agent = Agent::builder().provider(mock).build();
    ///
    /// let transcript = agent.stream("alice", "hello").transcript().await;
    /// assert_eq!(transcript.lines(), ["thinking", r#"reasoning "A greeting.""#, r#"text "Hi!""#, r#"done "Hi!""#]);
    /// println!("{transcript}"); // the same lines, for a log
    /// assert_eq!(transcript.reply?.text, "Hi!");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn transcript(mut self) -> Transcript {
        let mut events = Vec::new();
        let reply = loop {
            match self.next().await {
                Some(Ok(AgentEvent::Done(reply))) => {
                    events.push(AgentEvent::Done(reply.clone()));
                    break Ok(reply);
                }
                Some(Ok(event)) => events.push(event),
                Some(Err(error)) => break Err(error),
                // The turn's task ended without sending how (it panicked);
                // `into_reply` reads that as cancelled too.
                None => break Err(Error::Cancelled),
            }
        };
        Transcript { events, reply }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::provider::ProviderError;

    fn record(outcome: ToolOutcome, content: &str) -> ToolCallRecord {
        ToolCallRecord {
            call: ToolCall::new("call_1", "get_weather", json!({"city": "Paris"})),
            outcome,
            content: content.to_owned(),
            images: Vec::new(),
            duration: Duration::from_millis(3),
            verdict: None,
            decision: None,
            approver: None,
        }
    }

    fn line(event: &AgentEvent) -> String {
        event.to_string()
    }

    #[test]
    fn each_event_is_one_line() {
        let tool = || "rm".to_owned();
        assert_eq!(line(&AgentEvent::Status(Status::Thinking)), "thinking");
        assert_eq!(
            line(&AgentEvent::Status(Status::AwaitingConfirmation {
                tool: tool()
            })),
            "awaiting confirmation of rm"
        );
        assert_eq!(
            line(&AgentEvent::Status(Status::RunningTool { tool: tool() })),
            "running rm"
        );
        assert_eq!(line(&AgentEvent::TextDelta("Hel".into())), r#"text "Hel""#);
        assert_eq!(
            line(&AgentEvent::ReasoningDelta(" so \"two\"\n".into())),
            r#"reasoning " so \"two\"\n""#
        );
        assert_eq!(
            line(&AgentEvent::RefusalDelta("No.".into())),
            r#"refusal "No.""#
        );
        assert_eq!(
            line(&AgentEvent::ToolCallDelta(ToolCallDelta {
                index: 1,
                id: Some("call_2".into()),
                name: Some("get_weather".into()),
                arguments: String::new(),
            })),
            r#"tool call delta #1 id=call_2 name=get_weather """#
        );
        assert_eq!(
            line(&AgentEvent::ToolCallDelta(ToolCallDelta {
                index: 0,
                arguments: "{\n \"ci".into(),
                ..ToolCallDelta::default()
            })),
            r#"tool call delta #0 "{\n \"ci""#
        );
        assert_eq!(
            line(&AgentEvent::ToolCallStarted(
                record(ToolOutcome::Ok, "").call
            )),
            r#"tool call call_1 get_weather {"city":"Paris"}"#
        );
        assert_eq!(
            line(&AgentEvent::ToolCallFinished(record(
                ToolOutcome::Ok,
                "18 °C"
            ))),
            "tool result call_1 get_weather ok: 18 °C"
        );
        assert_eq!(
            line(&AgentEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 5,
                ..Usage::default()
            })),
            "usage 12 in / 5 out"
        );
        assert_eq!(
            line(&AgentEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 5,
                reasoning_tokens: 3,
                cached_tokens: 8,
            })),
            "usage 12 in (8 cached) / 5 out (3 reasoning)"
        );
        let reply = Reply {
            text: "It is\n18 °C.".into(),
            ..Reply::default()
        };
        assert_eq!(
            line(&AgentEvent::Done(reply.clone())),
            r#"done "It is\n18 °C.""#
        );
        let refusal = Reply {
            is_refusal: true,
            text: "I can't.".into(),
            ..reply
        };
        assert_eq!(
            line(&AgentEvent::Done(refusal)),
            r#"done refusal "I can't.""#
        );
    }

    #[test]
    fn an_event_fits_memcpys_fast_path() {
        // Every streamed chunk moves an event a few times; past 256 bytes
        // each move takes memcpy's slower loop (measured: ../shared/perf
        // instr.sh, s1, when `ToolCallRecord` grew by a `Usage`).
        assert!(std::mem::size_of::<AgentEvent>() <= 256);
    }

    #[test]
    fn a_tool_result_stays_on_one_line_and_says_how_the_call_ended() {
        let lines = [
            (ToolOutcome::Ok, "a\nb\r\nc", "ok: a\\nb\\r\\nc"),
            (ToolOutcome::Failed, "Error: boom", "failed: Error: boom"),
            (ToolOutcome::InvalidArguments, "x", "invalid arguments: x"),
            (ToolOutcome::Panicked, "x", "panicked: x"),
            (ToolOutcome::TimedOut, "x", "timed out: x"),
            (ToolOutcome::Declined, "x", "declined: x"),
            (ToolOutcome::Rejected, "x", "rejected: x"),
            (ToolOutcome::Interrupted, "x", "interrupted: x"),
            // No output, no colon.
            (ToolOutcome::Ok, "", "ok"),
        ];
        for (outcome, content, end) in lines {
            assert_eq!(
                line(&AgentEvent::ToolCallFinished(record(outcome, content))),
                format!("tool result call_1 get_weather {end}")
            );
        }
        // Names and ids written by a model keep the line too.
        let mut odd = record(ToolOutcome::Ok, "ok");
        odd.call.name = "get\nweather".into();
        let odd = line(&AgentEvent::ToolCallStarted(odd.call));
        assert_eq!(odd, r#"tool call call_1 get\nweather {"city":"Paris"}"#);
        assert_eq!(odd.lines().count(), 1);
    }

    #[test]
    fn a_failed_transcript_ends_with_the_error_and_its_causes() {
        let transcript = Transcript {
            events: vec![
                AgentEvent::Status(Status::Thinking),
                AgentEvent::TextDelta("Hi".into()),
            ],
            reply: Err(Error::Provider(ProviderError::Status {
                status: 503,
                message: "busy\nretry later".into(),
                retry_after: None,
            })),
        };
        assert_eq!(
            transcript.lines(),
            [
                "thinking",
                r#"text "Hi""#,
                r"error: LLM unavailable: server answered 503: busy\nretry later"
            ]
        );
        assert_eq!(
            transcript.to_string(),
            "thinking\ntext \"Hi\"\nerror: LLM unavailable: server answered 503: busy\\nretry later"
        );
        let cancelled = Transcript {
            events: Vec::new(),
            reply: Err(Error::Cancelled),
        };
        assert_eq!(cancelled.to_string(), "error: turn cancelled");
    }
}
