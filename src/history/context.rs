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
/// for each message's framing, plus [`IMAGE_TOKENS`] for each image: rough,
/// and on the high side for English and code, so a budget it approves fits.
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
                Part::Opaque(opaque) => opaque.value.to_string().len(),
                // Counted below, with the images of tool results.
                Part::Image(_) => 0,
            })
            .sum();
        chars.div_ceil(3) + 4 + message.images().count() * IMAGE_TOKENS
    }
}

/// What [`CharEstimate`] counts for an image: about what Anthropic charges
/// for a large one (1.15 megapixels); `OpenAI` charges 765 for a 1024×1024
/// image at high detail, Gemini 258 a tile. Images are sent as they are, so
/// the estimate errs high, like the rest.
pub const IMAGE_TOKENS: usize = 1_600;

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
    /// Shorten and summarise the conversation when it nears the context
    /// window. By default, off.
    pub compaction: Option<Compaction>,
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

/// Compaction, as the reference Lembas does it: before a model call, when the
/// estimated prompt passes `threshold` of the context window, old tool
/// outputs are shortened first; if that is not enough, the model summarises
/// everything before the current turn, and the summary (a
/// [`Message::summary`]) and the current turn, verbatim, are appended to the
/// store. The summarised messages stay in the store; later turns start from
/// the summary.
///
/// # Examples
/// ```
/// use ferrobot::history::{Compaction, ContextPolicy};
/// let policy = ContextPolicy::builder()
///     .compaction(Compaction::builder().context_window(32_000).build())
///     .build();
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, bon::Builder)]
#[non_exhaustive]
pub struct Compaction {
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The fraction of the window that triggers compaction. By default, 0.8.
    #[builder(default = 0.8)]
    pub threshold: f32,
    /// How many characters of an old tool output are kept when shortening.
    /// By default, 400.
    #[builder(default = 400)]
    pub keep_tool_output: usize,
    /// The instructions for the summarising call. By default, a request for
    /// a dense summary that keeps facts, decisions, names and open tasks.
    #[builder(default = DEFAULT_SUMMARY_INSTRUCTIONS.to_owned(), into)]
    pub instructions: String,
}

const DEFAULT_SUMMARY_INSTRUCTIONS: &str = "You are summarising a conversation between a user and an \
assistant so that it can continue without the full transcript. Write a dense summary: the user's goals, \
facts learned (including tool results that still matter), decisions made, names, numbers and paths, and \
anything still open. Do not address the user; output only the summary.";

impl Compaction {
    /// The estimated tokens above which compaction starts.
    pub(crate) fn limit(&self) -> usize {
        (self.context_window as f64 * f64::from(self.threshold)) as usize
    }
}

/// The messages from the last compaction summary on: what a turn continues from.
pub(crate) fn since_summary(mut messages: Vec<Message>) -> Vec<Message> {
    if let Some(at) = messages.iter().rposition(|m| m.summary) {
        messages.drain(..at);
    }
    messages
}

/// Cuts the tool outputs of `messages` to `keep` characters, saying how long
/// they were.
pub(crate) fn shorten_tool_outputs(messages: &mut [Message], keep: usize) -> bool {
    let mut changed = false;
    for message in messages {
        for part in &mut message.parts {
            let Part::ToolResult(result) = part else {
                continue;
            };
            let length = result.content.chars().count();
            if length > keep + 60 {
                let cut = result
                    .content
                    .char_indices()
                    .nth(keep)
                    .map_or(result.content.len(), |(i, _)| i);
                result.content = format!(
                    "{}…\n[shortened to save context: it was {length} characters]",
                    &result.content[..cut]
                );
                changed = true;
            }
        }
    }
    changed
}
