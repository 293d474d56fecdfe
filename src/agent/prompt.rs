//! The part of the system prompt that changes from turn to turn (today's
//! date, who is asking), sent last so that everything before it stays the
//! same and providers' prompt caches keep it.

use std::time::SystemTime;

/// What a [`PromptTail`] may say something about: the turn it is for.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TurnInfo<'a> {
    /// The conversation.
    pub conversation: &'a str,
    /// Who asks, when the front end says ([`TurnRequest::user`](super::TurnRequest::user)):
    /// the platform's id.
    pub user: Option<&'a str>,
    /// What they are called, when the front end says
    /// ([`TurnRequest::user_name`](super::TurnRequest::user_name)).
    pub user_name: Option<&'a str>,
    /// When the turn starts.
    pub now: SystemTime,
}

/// Writes the end of each turn's system prompt, after the agent's prompt,
/// its [`Instructions`](super::Instructions) and any output-format
/// instructions: the facts that change, such as the date. Called once at
/// each turn's start; its text is the same for every model call of the
/// turn. `None` (or empty text) adds nothing.
///
/// Keep the text coarse — the date, not the minute — so that consecutive
/// turns send the same prompt, which providers cache and recorded tests
/// replay.
///
/// A closure `Fn(&TurnInfo) -> Option<String>` is one.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::agent::{TurnInfo, TurnRequest};
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let mock = MockProvider::replying("ok");
/// let agent = Agent::builder()
///     .provider(mock.clone())
///     .system_prompt("Be terse.")
///     .prompt_tail(|turn: &TurnInfo| turn.user_name.map(|name| format!("The user is {name}.")))
///     .build();
/// agent.handle("c", TurnRequest::new("hi").user("111").user_name("Ann")).await?;
/// assert_eq!(mock.requests()[0].system.as_deref(), Some("Be terse.\n\nThe user is Ann."));
/// # Ok(())
/// # }
/// ```
pub trait PromptTail: Send + Sync + 'static {
    /// The text for `turn`.
    fn tail(&self, turn: &TurnInfo<'_>) -> Option<String>;
}

impl<F> PromptTail for F
where
    F: Fn(&TurnInfo<'_>) -> Option<String> + Send + Sync + 'static,
{
    fn tail(&self, turn: &TurnInfo<'_>) -> Option<String> {
        self(turn)
    }
}
