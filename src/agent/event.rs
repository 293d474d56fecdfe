//! What a turn reports while it runs, and what it ends with.

use std::time::Duration;

use crate::message::{ToolCall, Usage};
use crate::provider::{FinishReason, ToolCallDelta};

/// One thing that happened during a turn, in order.
///
/// A turn's stream ends with [`AgentEvent::Done`] or an error.
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
    /// The turn's reply. Last event of a successful turn.
    Done(Reply),
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
}

impl ToolOutcome {
    /// Whether the tool ran and succeeded.
    pub fn is_ok(self) -> bool {
        self == ToolOutcome::Ok
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
    /// Time from the decision to run until the result, confirmation included.
    pub duration: Duration,
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
    /// Token counts of every model call of the turn, added up.
    pub usage: Usage,
    /// Every tool call of the turn, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Why the model stopped; `None` for slash commands.
    pub finish_reason: Option<FinishReason>,
}
