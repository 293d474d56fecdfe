//! The crate's error type.

use std::error::Error as StdError;

use crate::history::HistoryError;
use crate::provider::ProviderError;

/// A boxed error from a lower layer, kept as a source.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// `Result` with [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a turn ended without a reply.
///
/// Tool failures are not errors: they become tool results the model reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model endpoint failed; slash commands still work.
    #[error("LLM unavailable")]
    Provider(#[from] ProviderError),
    /// The conversation could not be loaded or saved.
    #[error("history store failed")]
    History(#[from] HistoryError),
    /// The turn was cancelled; what had streamed is kept in history, marked
    /// interrupted.
    #[error("turn cancelled")]
    Cancelled,
    /// A typed answer ([`Output`](crate::agent::Output)) could not be had.
    #[error("no answer of the required shape")]
    Output(#[from] OutputError),
    /// A turn waiting for the user's decisions on tool calls
    /// ([`Decision::Defer`](crate::confirm::Decision::Defer)) is in the way,
    /// or [`Agent::resume`](crate::Agent::resume) was given decisions that
    /// don't fit it. Nothing changed.
    #[error("tool calls wait for a decision")]
    Pending(#[from] PendingError),
    /// A turn to recover ([`TurnRequest::recover`](crate::agent::TurnRequest::recover))
    /// has no journaled message to go on from.
    #[error("nothing to recover: {0}")]
    Recovery(String),
}

/// Why a conversation's pending turn stopped a call of
/// [`Agent::handle`](crate::Agent::handle) or
/// [`Agent::resume`](crate::Agent::resume).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PendingError {
    /// A new message came while the conversation's turn waits for
    /// decisions: it is not run (nor stored).
    #[error(
        "this conversation waits for a decision on {}; decide on them \
         (Agent::resume) before sending another message",
        list(calls)
    )]
    Waiting {
        /// The waiting calls, as `` `tool` (id) ``.
        calls: Vec<String>,
    },
    /// `resume` was called for a conversation with no turn waiting.
    #[error("no turn of this conversation waits for decisions")]
    NothingPending,
    /// A decision names a call that isn't waiting.
    #[error(
        "call `{id}` does not wait for a decision here; the waiting calls are {}",
        list(waiting)
    )]
    UnknownCall {
        /// The id given.
        id: String,
        /// The waiting calls, as `` `tool` (id) ``.
        waiting: Vec<String>,
    },
    /// A waiting call got no decision, or `Defer` again.
    #[error("call {call} needs a decision: approve, edit, deny or always")]
    Undecided {
        /// The call, as `` `tool` (id) ``.
        call: String,
    },
}

fn list(calls: &[String]) -> String {
    calls.join(", ")
}

/// Why a turn that asked for a typed answer has none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The model's last answer still didn't fit, after every retry.
    #[error("the model's answer did not match the schema, after {attempts} attempts: {}", problems.join("; "))]
    Invalid {
        /// How many answers the model gave.
        attempts: u32,
        /// What was wrong with the last one.
        problems: Vec<String>,
        /// The last answer, as the model wrote it.
        answer: String,
    },
    /// The turn ended without the model giving its answer: it kept calling
    /// tools past the round cap or a budget, or the message was a slash
    /// command (which calls no model).
    #[error("the model gave no answer: {0}")]
    NoAnswer(String),
    /// The model refused to answer (`OpenAI`'s `refusal`).
    #[error("the model refused: {0}")]
    Refused(String),
    /// The answer's type has a construct no dialect can enforce.
    #[error(
        "the output type can't be enforced by every provider: {0}. Describe the answer with \
         closed structs, Vecs, enums and scalars (a map can be a Vec of key/value structs)"
    )]
    Unportable(String),
    /// [`OutputMode::Native`](crate::agent::OutputMode::Native) was asked of a
    /// provider that can't constrain answers.
    #[error(
        "the {provider} provider can't be asked for a structured answer; use OutputMode::Tool \
         (or Auto, which picks it)"
    )]
    NativeUnsupported {
        /// The provider's name.
        provider: String,
    },
}

impl Error {
    /// A one-line message a bot can show its user, with the cause.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Error, provider::ProviderError};
    /// let e = Error::from(ProviderError::Config("no model set".into()));
    /// assert_eq!(
    ///     e.user_message(),
    ///     "LLM unavailable: invalid provider configuration: no model set — slash commands still work"
    /// );
    /// ```
    pub fn user_message(&self) -> String {
        match self {
            Error::Provider(e) => {
                format!("LLM unavailable: {} — slash commands still work", e.chain())
            }
            Error::History(e) => format!("Conversation history unavailable: {}", e.chain()),
            Error::Cancelled => "Cancelled.".to_owned(),
            Error::Output(e) => format!("No answer in the required form: {e}"),
            Error::Pending(e) => format!("Waiting for a decision: {e}"),
            Error::Recovery(e) => format!("Could not finish an interrupted answer: {e}"),
        }
    }
}

/// An error and its sources joined with ": ", for a log line: what the
/// `chain()` of ferrobot's own errors gives, for any error.
///
/// # Examples
/// ```
/// let error = std::io::Error::other("disk full");
/// assert_eq!(ferrobot::error_chain(&error), "disk full");
/// ```
pub fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        // Transparent wrappers repeat their source's message; skip the echo.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn error_is_send_sync_and_small() {
        assert_send_sync::<Error>();
        assert!(std::mem::size_of::<Result<(), Error>>() <= 80);
    }

    #[test]
    fn user_message_names_the_cause() {
        let e = Error::from(ProviderError::GaveUp {
            attempts: 3,
            elapsed: std::time::Duration::from_secs(2),
            last: Box::new(ProviderError::Status {
                status: 503,
                message: "overloaded".into(),
                retry_after: None,
            }),
        });
        assert_eq!(
            e.user_message(),
            "LLM unavailable: gave up after 3 attempts over 2s: server answered 503: overloaded — slash commands still work"
        );
    }
}
