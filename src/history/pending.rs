//! A turn waiting for a human's decisions, as the stores keep it.

use serde::{Deserialize, Serialize};

use crate::message::{Message, ToolCall, ToolResult};

/// A turn that ended with tool calls nobody could decide on yet
/// ([`Decision::Defer`](crate::confirm::Decision::Defer)), kept with its
/// conversation until [`Agent::resume`](crate::Agent::resume) continues it.
///
/// The assistant message that made the calls is kept here rather than in
/// the conversation: a stored conversation never holds a call without its
/// result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingTurn {
    /// The model's message with the calls.
    pub message: Message,
    /// Results of its calls that were decided and ran (or were refused).
    pub results: Vec<ToolResult>,
    /// The calls waiting for a decision.
    pub waiting: Vec<PendingCall>,
    /// Rounds of tool calls the turn had made, this one included.
    pub round: u32,
    /// Who started the turn, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// When it was deferred, in seconds since the Unix epoch.
    pub created: i64,
}

/// A call waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call, as the model made it.
    pub call: ToolCall,
    /// The question the user is asked.
    pub prompt: String,
    /// Why it is asked.
    pub reason: String,
}

impl PendingTurn {
    /// A pending turn: `message`'s calls, of which `waiting` wait and
    /// `results` are done.
    pub fn new(
        message: Message,
        results: Vec<ToolResult>,
        waiting: Vec<PendingCall>,
        round: u32,
        user: Option<String>,
    ) -> Self {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Self {
            message,
            results,
            waiting,
            round,
            user,
            created,
        }
    }
}

impl PendingCall {
    /// A call waiting for an answer to `prompt`, asked because of `reason`.
    pub fn new(call: ToolCall, prompt: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            call,
            prompt: prompt.into(),
            reason: reason.into(),
        }
    }
}
