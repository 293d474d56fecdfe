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
    /// ([`TurnRequest::user`](crate::agent::TurnRequest::user)): a bot lets only
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

/// A [`ConfirmHandler`] whose questions are answered from another task:
/// the handler goes to the agent, the [`ConfirmReceiver`] to whatever asks
/// the user (a UI task, a web request, a test). At most `capacity` questions
/// wait to be received; more wait their turn.
///
/// A question dropped without an answer, or asked after the receiver is
/// gone, is declined: nothing runs without a "yes".
///
/// # Panics
/// When `capacity` is 0.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ferrobot::testing::{MockProvider, MockTurn};
/// use ferrobot::{Agent, agent::ToolOutcome, confirm, tool::from_fn};
///
/// fn agent_answered_elsewhere() -> (Agent, confirm::ConfirmReceiver) {
///     let (handler, questions) = confirm::channel(8);
///     let reboot = from_fn("reboot", "Reboot.", |_: serde_json::Value, _| async { "rebooting" })
///         .confirm("Reboot this machine?");
///     let model = MockProvider::new()
///         .then(MockTurn::new().tool_call("reboot", serde_json::json!({})))
///         .then(MockTurn::new().text("Done."));
///     let agent = Agent::builder().provider(model).tool(reboot).confirm(handler).build();
///     (agent, questions)
/// }
///
/// let (agent, mut questions) = agent_answered_elsewhere();
/// tokio::spawn(async move {
///     while let Some(question) = questions.recv().await {
///         assert_eq!(question.request().prompt, "Reboot this machine?");
///         question.approve();
///     }
/// });
/// let reply = agent.handle("ops", "reboot it").await.unwrap();
/// assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
/// # }
/// ```
pub fn channel(capacity: usize) -> (ConfirmSender, ConfirmReceiver) {
    let (sender, receiver) = tokio::sync::mpsc::channel(capacity);
    (ConfirmSender(sender), ConfirmReceiver(receiver))
}

/// The handler half of [`channel`]: give it to `Agent::builder().confirm`.
#[derive(Debug, Clone)]
pub struct ConfirmSender(tokio::sync::mpsc::Sender<PendingConfirm>);

impl ConfirmHandler for ConfirmSender {
    fn confirm(&self, request: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let sender = self.0.clone();
        Box::pin(async move {
            let (answer, decision) = tokio::sync::oneshot::channel();
            let pending = PendingConfirm {
                request,
                answer: Some(answer),
            };
            if sender.send(pending).await.is_err() {
                return Decision::Decline;
            }
            decision.await.unwrap_or(Decision::Decline)
        })
    }
}

/// The receiving half of [`channel`]: the questions, in the order asked.
#[derive(Debug)]
pub struct ConfirmReceiver(tokio::sync::mpsc::Receiver<PendingConfirm>);

impl ConfirmReceiver {
    /// The next question; `None` once every [`ConfirmSender`] (the agent
    /// holding it) is gone.
    pub async fn recv(&mut self) -> Option<PendingConfirm> {
        self.0.recv().await
    }
}

/// A question waiting for the user's answer. Dropping it unanswered
/// declines the call.
#[derive(Debug)]
pub struct PendingConfirm {
    request: ConfirmRequest,
    answer: Option<tokio::sync::oneshot::Sender<Decision>>,
}

impl PendingConfirm {
    /// What is asked: the tool, the prompt, the arguments, who asked.
    pub fn request(&self) -> &ConfirmRequest {
        &self.request
    }

    /// Answers it.
    pub fn answer(mut self, decision: Decision) {
        if let Some(answer) = self.answer.take() {
            // The turn may have been cancelled meanwhile: nobody to tell.
            let _ = answer.send(decision);
        }
    }

    /// Runs the call.
    pub fn approve(self) {
        self.answer(Decision::Approve);
    }

    /// Doesn't; the model reads "Cancelled by user."
    pub fn decline(self) {
        self.answer(Decision::Decline);
    }
}
