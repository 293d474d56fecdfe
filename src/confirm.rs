//! Asking the user before a tool runs.
//!
//! A tool that wants approval says so through
//! [`Tool::confirmation`](crate::tool::Tool::confirmation). The agent then
//! sends a [`ConfirmRequest`] to its [`ConfirmHandler`] — a terminal prompt,
//! Telegram buttons — and runs the tool only on [`Decision::Approve`].
//! An agent without a handler declines every such call.

use std::future::Future;

use futures_util::future::BoxFuture;
use serde_json::Value;

/// A question for the user: may this tool call run?
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConfirmRequest {
    /// The conversation the call belongs to.
    pub conversation: String,
    /// Who started the turn, when the caller said so
    /// ([`Agent::stream_from`](crate::Agent::stream_from)): a bot lets only
    /// them answer.
    pub user: Option<String>,
    /// The tool call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The question, with placeholders filled from the arguments.
    pub prompt: String,
    /// The arguments the tool would run with.
    pub arguments: Value,
}

impl ConfirmRequest {
    /// A request to run `tool` in `conversation`, asking `prompt`, with no
    /// arguments: for testing a [`ConfirmHandler`] or a channel's prompts.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::confirm::ConfirmRequest;
    /// let request = ConfirmRequest::new("chat-1", "reboot", "Reboot?").from_user("ann");
    /// assert_eq!(request.user.as_deref(), Some("ann"));
    /// ```
    pub fn new(
        conversation: impl Into<String>,
        tool: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        Self {
            conversation: conversation.into(),
            user: None,
            call_id: "call_test".into(),
            tool: tool.into(),
            prompt: prompt.into(),
            arguments: Value::Object(serde_json::Map::new()),
        }
    }

    /// The same request, started by `user`.
    #[must_use]
    pub fn from_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run the tool.
    Approve,
    /// Don't; the model is told "Cancelled by user."
    Decline,
}

impl From<bool> for Decision {
    fn from(approved: bool) -> Self {
        if approved {
            Decision::Approve
        } else {
            Decision::Decline
        }
    }
}

/// Answers [`ConfirmRequest`]s.
///
/// Async closures taking a `ConfirmRequest` and returning `bool` or
/// [`Decision`] implement it.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, confirm::ConfirmRequest, testing::MockProvider};
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .confirm(|request: ConfirmRequest| async move { request.tool != "reboot" })
///     .build();
/// # let _ = agent;
/// ```
pub trait ConfirmHandler: Send + Sync + 'static {
    /// Called once per tool call that needs approval, before it runs. Calls
    /// needing approval run one at a time, so prompts never overlap within a
    /// turn. Waiting as long as the user needs is fine; bots should time out
    /// and decline.
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision>;
}

impl<F, Fut, D> ConfirmHandler for F
where
    F: Fn(ConfirmRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = D> + Send + 'static,
    D: Into<Decision>,
{
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let answer = self(request);
        Box::pin(async move { answer.await.into() })
    }
}
