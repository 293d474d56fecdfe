//! Fitting a long conversation into the model's context window.

use std::fmt;
use std::sync::Arc;

use crate::message::{Message, Part, Role};

/// Estimates how many tokens a message takes in a prompt.
///
/// The default, [`CharEstimate`], is cheap and errs high; plug in an exact
/// tokenizer for your model when the budget is tight.
pub trait TokenEstimator: Send + Sync + 'static {
    /// Tokens `message` takes, its role and framing included.
    fn estimate(&self, message: &Message) -> usize;
}

impl<F: Fn(&Message) -> usize + Send + Sync + 'static> TokenEstimator for F {
    fn estimate(&self, message: &Message) -> usize {
        self(message)
    }
}

/// One token per three characters of text, arguments and results, plus a few
/// for each message's framing: rough, and on the high side for English and
/// code, so a budget it approves fits.
///
/// # Examples
/// ```
/// use ferrobot::{Message, history::{CharEstimate, TokenEstimator}};
/// assert_eq!(CharEstimate.estimate(&Message::user("123456789")), 3 + 4);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CharEstimate;

impl TokenEstimator for CharEstimate {
    fn estimate(&self, message: &Message) -> usize {
        let chars: usize = message
            .parts
            .iter()
            .map(|part| match part {
                Part::Text { text } | Part::Refusal { text } => text.chars().count(),
                Part::Reasoning(r) => {
                    r.text.chars().count() + r.signature.as_ref().map_or(0, String::len)
                }
                Part::ToolCall(call) => {
                    call.name.len() + call.arguments.to_string().len() + call.id.len()
                }
                Part::ToolResult(result) => result.content.chars().count() + result.call_id.len(),
            })
            .sum();
        chars.div_ceil(3) + 4
    }
}

/// How much of a conversation is sent to the model.
///
/// The store always keeps everything; the policy picks the most recent part
/// that fits. It cuts only before a user message, so an assistant's tool
/// calls always travel with their results (and with the reasoning a provider
/// wants back beside them), and it never cuts into the current turn. The
/// system prompt is sent separately and is never cut.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, history::ContextPolicy, testing::MockProvider};
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .context(ContextPolicy::builder().max_messages(40).max_tokens(6_000).build())
///     .build();
/// # let _ = agent;
/// ```
#[derive(Clone, bon::Builder)]
#[non_exhaustive]
pub struct ContextPolicy {
    /// Send at most this many messages. By default, no limit.
    pub max_messages: Option<usize>,
    /// Send at most this many (estimated) tokens of conversation. By
    /// default, no limit.
    pub max_tokens: Option<usize>,
    /// How tokens are counted. By default, [`CharEstimate`].
    #[builder(default = Arc::new(CharEstimate), with = |e: impl TokenEstimator| Arc::new(e) as Arc<dyn TokenEstimator>)]
    pub estimator: Arc<dyn TokenEstimator>,
}

impl fmt::Debug for ContextPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextPolicy")
            .field("max_messages", &self.max_messages)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl ContextPolicy {
    /// Where the part of `messages` to send begins.
    ///
    /// The earliest user message from which the rest fits both limits; when
    /// not even the current turn fits, the current turn (from the last user
    /// message) is sent whole rather than cut.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Message, history::ContextPolicy};
    /// let messages = [Message::user("a"), Message::assistant("b"), Message::user("c"), Message::assistant("d")];
    /// let policy = ContextPolicy::builder().max_messages(3).build();
    /// assert_eq!(policy.start(&messages), 2);
    /// ```
    pub fn start(&self, messages: &[Message]) -> usize {
        if self.max_messages.is_none() && self.max_tokens.is_none() {
            return 0;
        }
        let Some(last_user) = messages.iter().rposition(|m| m.role == Role::User) else {
            return 0;
        };
        // Walk back from the end, adding each message's cost; remember the
        // earliest user message at which everything after still fits.
        let mut tokens = 0;
        let mut best = last_user;
        let mut everything_fits = true;
        for (i, message) in messages.iter().enumerate().rev() {
            let count = messages.len() - i;
            if self.max_tokens.is_some() {
                tokens += self.estimator.estimate(message);
            }
            let fits = self.max_messages.is_none_or(|max| count <= max)
                && self.max_tokens.is_none_or(|max| tokens <= max);
            if !fits {
                everything_fits = false;
                break;
            }
            if message.role == Role::User && i <= last_user {
                best = i;
            }
        }
        // Whatever precedes the first user message goes too when all fits.
        if everything_fits { 0 } else { best }
    }
}
