//! What one turn is given.

use super::output::Output;
use super::running::WhileBusy;
use crate::confirm::Decision;
use crate::message::Image;

/// What a turn is given: the user's text and, when wanted, images, who sent
/// it and the shape of the answer. [`Agent::handle`](super::Agent::handle) and
/// [`Agent::stream`](super::Agent::stream) take one, or just the text.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
/// use ferrobot::agent::{Output, TurnRequest};
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let agent = Agent::builder().provider(MockProvider::replying(r#"["red", "green"]"#)).build();
/// let schema = serde_json::json!({"type": "array", "items": {"type": "string"}});
/// let request = TurnRequest::new("two colours?")
///     .user("alice")
///     .output(Output::schema(schema).unwrap().mode(ferrobot::agent::OutputMode::Prompted));
/// let reply = agent.handle("alice", request).await?;
/// assert_eq!(reply.output, Some(serde_json::json!(["red", "green"])));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TurnRequest {
    /// The user's message.
    pub text: String,
    /// Images sent with it, after the text.
    pub images: Vec<Image>,
    /// Who sent it, when the front end knows: confirmation requests carry
    /// it ([`ConfirmRequest::user`](crate::confirm::ConfirmRequest::user)),
    /// so a chat bot can let only them answer.
    pub user: Option<String>,
    /// What the sender is called, when the front end knows: for the
    /// agent's [`PromptTail`](super::PromptTail) ([`TurnInfo::user_name`](super::TurnInfo::user_name)).
    pub user_name: Option<String>,
    /// The shape the answer must have; `None` for the agent's own
    /// ([`AgentBuilder::output`](super::AgentBuilder::output)), if any.
    pub output: Option<Output>,
    /// Decisions on the calls of the conversation's pending turn, by call
    /// id ([`TurnRequest::resume`]); `None` for a new message.
    pub decisions: Option<Vec<(String, Decision)>>,
    /// What happens to it when a turn of the conversation is running; `None`
    /// for the agent's own ([`AgentBuilder::while_busy`](super::AgentBuilder::while_busy)).
    pub while_busy: Option<WhileBusy>,
    /// The id of the journaled message this turn answers
    /// ([`TurnRequest::journal`]), if any.
    pub journal: Option<String>,
    /// Whether the turn recovers its journaled message's interrupted turn
    /// ([`TurnRequest::recover`]) rather than starting one.
    pub recover: bool,
    /// Set when the turn is a sub-agent's, run by a call of another turn.
    pub(crate) within: Option<super::sub::Within>,
}

impl TurnRequest {
    /// A turn for the message `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// Sends an image with the message (call once per image).
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Image, agent::TurnRequest};
    /// let request = TurnRequest::new("What is on this photo?").image(Image::jpeg(vec![0xff, 0xd8, 0xff]));
    /// assert_eq!(request.images.len(), 1);
    /// ```
    #[must_use]
    pub fn image(mut self, image: Image) -> Self {
        self.images.push(image);
        self
    }

    /// Continues the conversation's turn that waits for decisions
    /// ([`Reply::pending`](super::Reply::pending)) with one decision per
    /// waiting call, by call id; [`Agent::resume`](super::Agent::resume)
    /// does the same without events. The text is unused.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{agent::TurnRequest, confirm::Decision};
    /// let request = TurnRequest::resume([("call_1", Decision::Approve), ("call_2", Decision::deny("not that one"))])
    ///     .user("ann");
    /// assert_eq!(request.decisions.as_ref().map(Vec::len), Some(2));
    /// ```
    pub fn resume<I: Into<String>>(decisions: impl IntoIterator<Item = (I, Decision)>) -> Self {
        Self {
            decisions: Some(
                decisions
                    .into_iter()
                    .map(|(id, decision)| (id.into(), decision))
                    .collect(),
            ),
            ..Self::default()
        }
    }

    /// Says who sent the message.
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// With what the sender is called (see [`TurnRequest::user_name`]).
    #[must_use]
    pub fn user_name(mut self, name: impl Into<String>) -> Self {
        self.user_name = Some(name.into());
        self
    }

    /// Asks for an answer of this shape; [`Reply::output`](super::Reply::output)
    /// holds it.
    #[must_use]
    pub fn output(mut self, output: Output) -> Self {
        self.output = Some(output);
        self
    }

    /// Says what happens to the message when a turn of the conversation is
    /// running, for this message only.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::{TurnRequest, WhileBusy};
    /// let request = TurnRequest::new("stop, use the other file").while_busy(WhileBusy::Steer);
    /// assert_eq!(request.while_busy, Some(WhileBusy::Steer));
    /// ```
    #[must_use]
    pub fn while_busy(mut self, mode: WhileBusy) -> Self {
        self.while_busy = Some(mode);
        self
    }

    /// Answers the journaled message `id` (see
    /// [`HistoryStore::receive`](crate::history::HistoryStore::receive)):
    /// the turn marks its journal entry in the same transaction as each
    /// message it stores, and notes the tool calls running, so that after
    /// a crash the entry says where the turn stood.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use ferrobot::history::{Intake, Stage};
    /// use ferrobot::{Agent, agent::TurnRequest, testing::MockProvider};
    ///
    /// let agent = Agent::builder().provider(MockProvider::replying("hi")).build();
    /// let store = agent.history();
    /// store.receive(&Intake::new("chat:1", "ann", "hello")).await?;
    /// agent.handle("ann", TurnRequest::new("hello").journal("chat:1")).await?;
    /// assert_eq!(store.intake("chat:1").await?.unwrap().stage, Stage::Answered);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn journal(mut self, id: impl Into<String>) -> Self {
        self.journal = Some(id.into());
        self
    }

    /// Recovers the turn of journaled message `id` that a crash interrupted
    /// ([`Stage::Started`](crate::history::Stage::Started)), in the
    /// conversation its entry names: nothing is stored again; calls that
    /// were running are given to the model as interrupted (they may or may
    /// not have taken effect), and calling one of them again asks the user
    /// first unless the tool only reads or is idempotent; then the turn
    /// goes on. An answer already stored is the reply, at once. The text
    /// is unused.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::TurnRequest;
    /// let request = TurnRequest::recover("telegram:42:7");
    /// assert!(request.recover);
    /// assert_eq!(request.journal.as_deref(), Some("telegram:42:7"));
    /// ```
    pub fn recover(id: impl Into<String>) -> Self {
        Self {
            journal: Some(id.into()),
            recover: true,
            ..Self::default()
        }
    }
}

impl From<&str> for TurnRequest {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for TurnRequest {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl From<&String> for TurnRequest {
    fn from(text: &String) -> Self {
        Self::new(text.as_str())
    }
}
