//! Confirmation questions waiting for a button press: what a chat channel
//! needs between posting ✅ / ❌ and the press.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::confirm::{ConfirmRequest, Decision};

/// The questions a channel has asked and not yet seen answered. Each gets
/// button data (`confirm:ID:yes` / `confirm:ID:no`); a press is matched back
/// to its question, and only the user whose message started the turn may
/// answer it.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// use ferrobot::bot::Questions;
/// use ferrobot::confirm::{ConfirmRequest, Decision};
/// let questions = Questions::default();
/// let request = ConfirmRequest::new("chat-1", "reboot", "Reboot?").from_user("ann");
/// let question = questions.ask(&request);
/// // … post the prompt with buttons carrying `question.yes` and `question.no` …
/// assert!(questions.press(&question.yes, "bob").is_err(), "not Bob's question");
/// assert_eq!(questions.press(&question.yes, "ann").unwrap().decision, Decision::Approve);
/// assert_eq!(questions.wait(question, Duration::from_secs(1)).await, Some(Decision::Approve));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Questions {
    pending: Mutex<HashMap<u64, Pending>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Pending {
    user: Option<String>,
    prompt: String,
    answer: oneshot::Sender<Decision>,
}

/// What a press decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Answered {
    /// The decision, already passed to the waiting turn.
    pub decision: Decision,
    /// The question's prompt, to show it decided ([`decided`]).
    pub prompt: String,
}

/// A question asked: the data for its buttons, and where its answer arrives.
#[derive(Debug)]
pub struct Question {
    id: u64,
    /// The ✅ button's data.
    pub yes: String,
    /// The ❌ button's data.
    pub no: String,
    answer: oneshot::Receiver<Decision>,
}

/// Why a press answered nothing; the text is for the presser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unanswered {
    /// The button isn't a confirmation button of ours.
    #[error("This button isn't mine to answer.")]
    NotOurs,
    /// The question was answered, timed out, or asked before a restart.
    #[error("This question has expired.")]
    Expired,
    /// Someone other than the asker pressed.
    #[error("Only the person who asked can answer this.")]
    NotTheAsker,
}

impl Questions {
    /// Registers a question for `request`; post its prompt with buttons
    /// carrying [`Question::yes`] and [`Question::no`], then
    /// [`wait`](Self::wait).
    pub fn ask(&self, request: &ConfirmRequest) -> Question {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (answer, receiver) = oneshot::channel();
        self.lock().insert(
            id,
            Pending {
                user: request.user.clone(),
                prompt: request.prompt.clone(),
                answer,
            },
        );
        Question {
            id,
            yes: format!("confirm:{id}:yes"),
            no: format!("confirm:{id}:no"),
            answer: receiver,
        }
    }

    /// The answer, or `None` when none came within `timeout` (the question
    /// is then forgotten; decline it).
    pub async fn wait(&self, question: Question, timeout: Duration) -> Option<Decision> {
        let answer = tokio::time::timeout(timeout, question.answer).await;
        self.forget(question.id);
        answer.ok().and_then(Result::ok)
    }

    /// A press of the button with `data` by `user`: the decision it gave
    /// the waiting question, or why it gave none. A question from a turn
    /// without a known user may be answered by anyone the channel lets in.
    ///
    /// # Errors
    /// [`Unanswered`], with the text to show the presser.
    pub fn press(&self, data: &str, user: &str) -> Result<Answered, Unanswered> {
        let (id, choice) = data
            .strip_prefix("confirm:")
            .and_then(|d| d.split_once(':'))
            .and_then(|(id, choice)| Some((id.parse::<u64>().ok()?, choice)))
            .ok_or(Unanswered::NotOurs)?;
        let mut pending = self.lock();
        let asker = pending.get(&id).ok_or(Unanswered::Expired)?;
        if asker.user.as_deref().is_some_and(|asker| asker != user) {
            tracing::warn!(
                user,
                "a button press from someone other than the asker was ignored"
            );
            return Err(Unanswered::NotTheAsker);
        }
        let decision = Decision::from(choice == "yes");
        let waiting = pending.remove(&id).ok_or(Unanswered::Expired)?;
        let _ = waiting.answer.send(decision);
        Ok(Answered {
            decision,
            prompt: waiting.prompt,
        })
    }

    /// Drops a question that could not be asked.
    pub fn forget(&self, question: u64) {
        self.lock().remove(&question);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Question {
    /// Its number, for [`Questions::forget`].
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// The question's text once decided, to replace the one with buttons:
/// "✅ Approved", "❌ Declined", or, for `None`, that nobody answered within
/// `timeout`.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::bot::decided;
/// assert_eq!(decided("Reboot?", None, Duration::from_secs(300)), "Reboot?\n\n⌛ No answer within 5 min: declined");
/// ```
pub fn decided(prompt: &str, decision: Option<Decision>, timeout: Duration) -> String {
    let outcome = match decision {
        Some(Decision::Approve) => "✅ Approved".to_owned(),
        Some(Decision::Decline) => "❌ Declined".to_owned(),
        None => format!(
            "⌛ No answer within {} min: declined",
            timeout.as_secs().div_ceil(60)
        ),
    };
    format!("{prompt}\n\n{outcome}")
}
