//! Asking the user before a tool runs.
//!
//! A tool that wants approval says so through
//! [`Tool::confirmation`](crate::tool::Tool::confirmation). The agent then
//! sends a [`ConfirmRequest`] to its [`ConfirmHandler`] — a terminal prompt,
//! Telegram buttons — and runs the tool only when the answer approves it
//! ([`Decision`]: approve, approve with edited arguments, deny with a
//! reason, always allow, or defer to a human who answers later).
//! An agent without a handler declines every such call.
//!
//! Whether a call is asked about at all is the
//! [`Policy`](crate::policy::Policy)'s to say.

use std::future::Future;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::policy::Scope;

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
    /// Why it is asked: the rule or default that said "ask"
    /// ([`Verdict::reason`](crate::policy::Verdict::reason)).
    pub reason: String,
    /// What an "always allow" answer would cover, when one is offered:
    /// [`Scope::Tool`] by default; `None` for a tool that runs other
    /// programs, which is approved one call at a time.
    pub always: Option<Scope>,
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
            reason: String::new(),
            always: Some(Scope::Tool),
        }
    }

    /// The same request, started by `user`.
    #[must_use]
    pub fn from_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// The same request, for the call `call_id` with `arguments`.
    #[must_use]
    pub fn for_call(mut self, call_id: impl Into<String>, arguments: Value) -> Self {
        self.call_id = call_id.into();
        self.arguments = arguments;
        self
    }

    /// The same request, asked because of `reason`.
    #[must_use]
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// The same request, offering "always" for `scope` (`None`: not offered).
    #[must_use]
    pub fn offering(mut self, scope: Option<Scope>) -> Self {
        self.always = scope;
        self
    }
}

/// The user's answer.
///
/// # Examples
/// ```
/// use ferrobot::confirm::Decision;
/// use ferrobot::policy::Scope;
/// assert_eq!(Decision::from(true), Decision::Approve);
/// assert_eq!(Decision::deny("not that folder"), Decision::Deny(Some("not that folder".into())));
/// assert!(Decision::Always(Scope::Tool).approves());
/// assert!(!Decision::Defer.approves());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Decision {
    /// Run the call as the model wrote it.
    Approve,
    /// Run it with these arguments instead (a JSON object). They are checked
    /// as the model's are, and against the rules: a rule that denies the
    /// edited call still denies it.
    Edit(Value),
    /// Don't run it. The model reads the reason when there is one, else
    /// "Cancelled by user."
    Deny(Option<String>),
    /// Run it, and every later call this [`Scope`] covers in this
    /// conversation without asking. Stored with the conversation, so it
    /// survives a restart; never beats a rule that denies. Refused for
    /// tools that run other programs
    /// ([`Tool::command_line`](crate::tool::Tool::command_line)): the call
    /// runs once, as for [`Approve`](Self::Approve).
    Always(Scope),
    /// Nobody can answer now: the turn ends with the call pending
    /// ([`Reply::pending`](crate::Reply::pending)), stored with the
    /// conversation, and [`Agent::resume`](crate::Agent::resume) continues
    /// it once someone decided — later, in another process too.
    Defer,
}

impl Decision {
    /// A denial the model reads the reason of.
    pub fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny(Some(reason.into()))
    }

    /// One word for logs and traces: `approve`, `edit`, `deny`, `always`,
    /// `defer`.
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Edit(_) => "edit",
            Decision::Deny(_) => "deny",
            Decision::Always(_) => "always",
            Decision::Defer => "defer",
        }
    }

    /// Whether the call runs.
    pub fn approves(&self) -> bool {
        matches!(
            self,
            Decision::Approve | Decision::Edit(_) | Decision::Always(_)
        )
    }
}

impl From<bool> for Decision {
    fn from(approved: bool) -> Self {
        if approved {
            Decision::Approve
        } else {
            Decision::Deny(None)
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
                return Decision::Deny(None);
            }
            decision.await.unwrap_or(Decision::Deny(None))
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
        self.answer(Decision::Deny(None));
    }
}
