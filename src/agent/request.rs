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
    /// The shape the answer must have; `None` for the agent's own
    /// ([`AgentBuilder::output`](super::AgentBuilder::output)), if any.
    pub output: Option<Output>,
    /// Decisions on the calls of the conversation's pending turn, by call
    /// id ([`TurnRequest::resume`]); `None` for a new message.
    pub decisions: Option<Vec<(String, Decision)>>,
    /// What happens to it when a turn of the conversation is running; `None`
    /// for the agent's own ([`AgentBuilder::while_busy`](super::AgentBuilder::while_busy)).
    pub while_busy: Option<WhileBusy>,
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
