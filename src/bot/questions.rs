//! Confirmation questions waiting for a button press: what a chat channel
//! needs between posting ✅ / ❌ (and "Always", when offered) and the press,
//! and the texts around them ([`asked`], [`decided`], [`always_covers`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::confirm::{ConfirmRequest, Decision};
use crate::policy::Scope;

/// The questions a channel has asked and not yet seen answered. Each gets
/// button data (`confirm:NONCE-N:yes` / `…:no`, and `…:always` when the
/// request offers "always allow"; the nonce new in every process, so a
/// button left from before a restart answers nothing); a press
/// is matched back to its question, in the chat it was asked in, and only the
/// user whose message started the turn may answer it.
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
/// assert!(questions.press(&question.yes, "bob", "chat-1").is_err(), "not Bob's question");
/// assert!(questions.press(&question.yes, "ann", "chat-2").is_err(), "not asked there");
/// assert_eq!(questions.press(&question.yes, "ann", "chat-1").unwrap().decision, Decision::Approve);
/// assert_eq!(questions.wait(question, Duration::from_secs(1)).await, Some(Decision::Approve));
///
/// // "Always" is offered when the request says what it would cover.
/// let question = questions.ask(&request);
/// let always = question.always.clone().expect("offered for a tool that runs no programs");
/// let answered = questions.press(&always, "ann", "chat-1").unwrap();
/// assert_eq!(answered.decision, Decision::Always(ferrobot::policy::Scope::Tool));
/// # }
/// ```
#[derive(Debug)]
pub struct Questions {
    pending: Mutex<HashMap<String, Pending>>,
    next: AtomicU64,
    nonce: u32,
}

impl Default for Questions {
    fn default() -> Self {
        use std::hash::BuildHasher as _;
        // Random enough to tell this process's buttons from an earlier one's,
        // without a dependency: std's hasher keys are random per process.
        let nonce = std::collections::hash_map::RandomState::new()
            .hash_one(std::time::SystemTime::now()) as u32;
        Self {
            pending: Mutex::default(),
            next: AtomicU64::new(0),
            nonce,
        }
    }
}

#[derive(Debug)]
struct Pending {
    user: Option<String>,
    chat: String,
    prompt: String,
    tool: String,
    always: Option<Scope>,
    answer: oneshot::Sender<Decision>,
}

/// What a press decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Answered {
    /// The decision, already passed to the waiting turn.
    pub decision: Decision,
    /// The question's prompt, to show it decided ([`decided`]).
    pub prompt: String,
    /// The tool asked about, to say what "always" allowed ([`decided`]).
    pub tool: String,
}

/// A question asked: the data for its buttons, and where its answer arrives.
#[derive(Debug)]
pub struct Question {
    id: String,
    /// The ✅ button's data.
    pub yes: String,
    /// The ❌ button's data.
    pub no: String,
    /// The "Always" button's data; `None` when "always allow" isn't offered
    /// ([`ConfirmRequest::always`]): show no such button.
    pub always: Option<String>,
    answer: oneshot::Receiver<Decision>,
}

/// Why a press answered nothing; the text is for the presser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unanswered {
    /// The button isn't a confirmation button of ours.
    #[error("This button isn't mine to answer.")]
    NotOurs,
    /// The question was answered, timed out, asked before a restart, or
    /// asked in another chat.
    #[error("This question has expired.")]
    Expired,
    /// Someone other than the asker pressed.
    #[error("Only the person who asked can answer this.")]
    NotTheAsker,
}

impl Questions {
    /// Registers a question for `request`; post [`asked`]'s text with
    /// buttons carrying [`Question::yes`], [`Question::no`] and, when
    /// offered, [`Question::always`], then [`wait`](Self::wait).
    pub fn ask(&self, request: &ConfirmRequest) -> Question {
        let id = format!(
            "{:08x}-{}",
            self.nonce,
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (answer, receiver) = oneshot::channel();
        self.lock().insert(
            id.clone(),
            Pending {
                user: request.user.clone(),
                chat: super::chat_of(&request.conversation).to_owned(),
                prompt: request.prompt.clone(),
                tool: request.tool.clone(),
                always: request.always.clone(),
                answer,
            },
        );
        Question {
            yes: format!("confirm:{id}:yes"),
            no: format!("confirm:{id}:no"),
            always: request
                .always
                .is_some()
                .then(|| format!("confirm:{id}:always")),
            id,
            answer: receiver,
        }
    }

    /// The answer, or `None` when none came within `timeout` (the question
    /// is then forgotten; decline it).
    pub async fn wait(&self, question: Question, timeout: Duration) -> Option<Decision> {
        let answer = tokio::time::timeout(timeout, question.answer).await;
        self.forget(&question.id);
        answer.ok().and_then(Result::ok)
    }

    /// A press of the button with `data` by `user` in `chat`: the decision
    /// it gave the waiting question, or why it gave none. A question from a
    /// turn without a known user may be answered by anyone the channel lets
    /// in.
    ///
    /// # Errors
    /// [`Unanswered`], with the text to show the presser.
    pub fn press(&self, data: &str, user: &str, chat: &str) -> Result<Answered, Unanswered> {
        let (id, choice) = data
            .strip_prefix("confirm:")
            .and_then(|d| d.rsplit_once(':'))
            .ok_or(Unanswered::NotOurs)?;
        let mut pending = self.lock();
        let asker = pending
            .get(id)
            .filter(|asker| asker.chat == chat)
            .ok_or(Unanswered::Expired)?;
        if asker.user.as_deref().is_some_and(|asker| asker != user) {
            tracing::warn!(
                user,
                "a button press from someone other than the asker was ignored"
            );
            return Err(Unanswered::NotTheAsker);
        }
        let decision = match choice {
            "yes" => Decision::Approve,
            "no" => Decision::Deny(None),
            // Only offered with a scope; anything else isn't our button.
            "always" => Decision::Always(asker.always.clone().ok_or(Unanswered::NotOurs)?),
            _ => return Err(Unanswered::NotOurs),
        };
        let waiting = pending.remove(id).ok_or(Unanswered::Expired)?;
        // The turn stopped waiting (a time-out a moment ago): say so, rather
        // than show a decision that wasn't taken.
        waiting
            .answer
            .send(decision.clone())
            .map_err(|_| Unanswered::Expired)?;
        Ok(Answered {
            decision,
            prompt: waiting.prompt,
            tool: waiting.tool,
        })
    }

    /// Drops a question that could not be asked.
    pub fn forget(&self, question: &str) {
        self.lock().remove(question);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Question {
    /// Its id, for [`Questions::forget`].
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The text to post with a question's buttons: the prompt, why it is asked
/// (the rule or default that said "ask"), and, when "Always" is offered,
/// exactly what it would allow.
///
/// # Examples
/// ```
/// use ferrobot::bot::asked;
/// use ferrobot::confirm::ConfirmRequest;
/// let request = ConfirmRequest::new("chat-1", "reboot", "Reboot?");
/// assert_eq!(
///     asked(&request),
///     "Reboot?\n\nAlways: allow every call of `reboot` in this conversation"
/// );
/// ```
pub fn asked(request: &ConfirmRequest) -> String {
    let mut text = request.prompt.clone();
    if !request.reason.is_empty() {
        text.push_str(&format!("\n\nWhy: {}", request.reason));
    }
    if let Some(scope) = &request.always {
        text.push_str(&format!(
            "\n\nAlways: allow {}",
            always_covers(&request.tool, scope)
        ));
    }
    text
}

/// What an "always allow" answer for `tool` covers, in words, for the
/// question and its decided text: "every call of `reboot` in this
/// conversation".
///
/// # Examples
/// ```
/// use ferrobot::bot::always_covers;
/// use ferrobot::policy::Scope;
/// let scope = Scope::Prefix { argument: "path".into(), prefix: "/srv/notes".into() };
/// assert_eq!(
///     always_covers("read_file", &scope),
///     "calls of `read_file` whose `path` starts with \"/srv/notes\" in this conversation"
/// );
/// ```
pub fn always_covers(tool: &str, scope: &Scope) -> String {
    let calls = match scope {
        Scope::Tool => format!("every call of `{tool}`"),
        Scope::Call { arguments } => format!("calls of `{tool}` with arguments {arguments}"),
        Scope::Prefix { argument, prefix } => {
            format!("calls of `{tool}` whose `{argument}` starts with {prefix:?}")
        }
    };
    format!("{calls} in this conversation")
}

/// The question's text once decided, to replace the one with buttons:
/// "✅ Approved", "❌ Declined", for "always" what it allowed (a call of
/// `tool`), or, for `None`, that nobody answered within `timeout`.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::bot::decided;
/// use ferrobot::confirm::Decision;
/// use ferrobot::policy::Scope;
/// let timeout = Duration::from_secs(300);
/// assert_eq!(decided("Reboot?", "reboot", None, timeout), "Reboot?\n\n⌛ No answer within 5 min: declined");
/// assert_eq!(decided("Reboot?", "reboot", None, Duration::from_secs(90)), "Reboot?\n\n⌛ No answer within 90 s: declined");
/// assert_eq!(
///     decided("Reboot?", "reboot", Some(Decision::Always(Scope::Tool)), timeout),
///     "Reboot?\n\n✅ Always allowed: every call of `reboot` in this conversation"
/// );
/// ```
pub fn decided(prompt: &str, tool: &str, decision: Option<Decision>, timeout: Duration) -> String {
    let outcome = match decision {
        Some(Decision::Always(scope)) => {
            format!("✅ Always allowed: {}", always_covers(tool, &scope))
        }
        Some(Decision::Edit(_)) => "✅ Approved, with changes".to_owned(),
        Some(Decision::Deny(Some(reason))) => format!("❌ Declined: {reason}"),
        Some(Decision::Defer) => "⏳ Left for later".to_owned(),
        Some(decision) if decision.approves() => "✅ Approved".to_owned(),
        Some(_) => "❌ Declined".to_owned(),
        None => format!("⌛ No answer within {}: declined", spoken(timeout)),
    };
    format!("{prompt}\n\n{outcome}")
}

/// A time-out as people say it: "5 min", or "90 s" when not whole minutes.
fn spoken(timeout: Duration) -> String {
    match timeout.as_secs() {
        secs if secs >= 60 && secs % 60 == 0 => format!("{} min", secs / 60),
        secs => format!("{secs} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_button_from_before_a_restart_answers_nothing() {
        let request = ConfirmRequest::new("chat-1", "reboot", "Reboot?").from_user("ann");
        let before = Questions::default().ask(&request);
        let now = Questions::default();
        let question = now.ask(&request);
        assert_eq!(
            now.press(&before.yes, "ann", "chat-1"),
            Err(Unanswered::Expired)
        );
        assert_eq!(
            now.press("vote:1", "ann", "chat-1"),
            Err(Unanswered::NotOurs)
        );
        // A press after the time-out is told so, not shown as a decision.
        assert_eq!(now.wait(question, Duration::from_millis(1)).await, None);
        let mut program = request.clone();
        program.always = None;
        let once = now.ask(&program);
        assert_eq!(
            once.always, None,
            "no \"always\" for a tool that runs programs"
        );
        // A forged "always" press for it answers nothing.
        let forged = once.yes.replace(":yes", ":always");
        assert_eq!(
            now.press(&forged, "ann", "chat-1"),
            Err(Unanswered::NotOurs)
        );
        let late = now.ask(&request);
        let yes = late.yes.clone();
        drop(late);
        assert_eq!(now.press(&yes, "ann", "chat-1"), Err(Unanswered::Expired));
    }
}
