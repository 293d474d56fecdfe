//! What a running tool can see and do besides its arguments.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::ToolError;

/// Typed values shared by every tool of an agent, keyed by type. A value
/// given as an `Arc<T>` is found as a `T` too, sharing the caller's `Arc`.
#[derive(Clone, Default)]
pub(crate) struct SharedState(Arc<HashMap<TypeId, Shared>>);

#[derive(Clone)]
struct Shared {
    /// For messages that say which types are present.
    type_name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl SharedState {
    /// This state with `value` as its `T`, replacing any earlier one.
    pub(crate) fn with<T: Send + Sync + 'static>(&self, value: T) -> Self {
        let mut values = (*self.0).clone();
        values.insert(
            TypeId::of::<T>(),
            Shared {
                type_name: std::any::type_name::<T>(),
                value: Arc::new(value),
            },
        );
        Self(Arc::new(values))
    }

    /// The value of type `T`: given as a `T`, or as an `Arc<T>`.
    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        if let Some(shared) = self.0.get(&TypeId::of::<T>()) {
            return shared.value.downcast_ref();
        }
        let shared = self.0.get(&TypeId::of::<Arc<T>>())?;
        shared.value.downcast_ref::<Arc<T>>().map(|value| &**value)
    }

    /// The value of type `T` as a handle: the very `Arc` it was given as,
    /// when it was given as an `Arc<T>`.
    pub(crate) fn handle<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        if let Some(shared) = self.0.get(&TypeId::of::<T>()) {
            return Arc::clone(&shared.value).downcast().ok();
        }
        let shared = self.0.get(&TypeId::of::<Arc<T>>())?;
        shared.value.downcast_ref::<Arc<T>>().cloned()
    }

    /// Whether a value of this type is present, either way.
    pub(crate) fn has(&self, ty: StateType) -> bool {
        self.0.contains_key(&ty.id) || self.0.contains_key(&ty.arc_id)
    }

    /// The types present, sorted, for messages: "`a::A`, `b::B`" or "none".
    pub(crate) fn present(&self) -> String {
        // Sorted as they are put in: a few names, and no sort's code.
        let mut names: Vec<String> = Vec::with_capacity(self.0.len());
        for shared in self.0.values() {
            let name = format!("`{}`", shared.type_name);
            names.insert(names.partition_point(|n| *n < name), name);
        }
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}

/// A type of shared state a tool reads, as
/// [`Tool::state_types`](super::Tool::state_types) names it, so the agent
/// can check when it is built that every tool will find its state.
///
/// # Examples
/// ```
/// use ferrobot::tool::StateType;
/// struct Thermostat;
/// assert!(StateType::of::<Thermostat>().name().ends_with("Thermostat"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateType {
    id: TypeId,
    /// The same value may be given as an `Arc<T>`.
    arc_id: TypeId,
    name: &'static str,
}

impl StateType {
    /// The state type `T`.
    pub fn of<T: Send + Sync + 'static>() -> Self {
        Self {
            id: TypeId::of::<T>(),
            arc_id: TypeId::of::<Arc<T>>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// The type's name, with its path (`home::Thermostat`).
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A `#[tool]` parameter that receives the agent's shared value of type `T`,
/// as axum's `State` does: write `State(db): State<Db>` and build the agent
/// with `.state(db)`, where `db` is a `Db` or an `Arc<Db>` (keep a clone of
/// the `Arc`, or ask [`Agent::state`](crate::Agent::state), to see what the
/// tools do to it). It is not part of the tool's schema, and the agent
/// checks when it is built that the state is there.
///
/// # Examples
/// ```
/// use ferrobot::tool::State;
/// struct Inventory(Vec<&'static str>);
/// fn count(State(inventory): State<Inventory>) -> usize {
///     inventory.0.len()
/// }
/// # let _ = count;
/// ```
#[derive(Debug)]
pub struct State<T>(pub Arc<T>);

impl<T> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T> std::ops::Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> State<T> {
    /// The agent's shared value of type `T`.
    ///
    /// # Errors
    /// When the agent was built without one; the message says how to add it.
    pub fn from_context(ctx: &ToolContext) -> Result<Self, ToolError> {
        ctx.state_handle::<T>().map(State).ok_or_else(|| {
            ToolError::new(format!(
                "this tool needs shared state of type `{}`, and the agent has none \
                 (developer: add it with `Agent::builder().state(…)`; the state it has: {})",
                std::any::type_name::<T>(),
                ctx.state.present()
            ))
        })
    }
}

/// Delivers a message to a conversation outside any turn, for
/// [`ToolContext::notify_later`]. Bots implement it with their `send`.
///
/// Closures `Fn(String, String) -> impl Future<Output = ()>` taking the
/// conversation id and the text implement it.
pub trait Notifier: Send + Sync + 'static {
    /// Sends `text` to `conversation`. Called from a background task once the
    /// requested delay has passed.
    fn notify(&self, conversation: String, text: String) -> BoxFuture<'static, ()>;
}

impl<F, Fut> Notifier for F
where
    F: Fn(String, String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn notify(&self, conversation: String, text: String) -> BoxFuture<'static, ()> {
        Box::pin(self(conversation, text))
    }
}

/// The agent's notifier, and the later messages kept in memory for it (no
/// running scheduler), listed while they wait so a tool can withdraw them.
/// One per agent, shared by every tool call.
pub(crate) struct LaterInMemory {
    notifier: Arc<dyn Notifier>,
    waiting: Mutex<Vec<Waiting>>,
}

struct Waiting {
    conversation: Arc<str>,
    text: String,
    task: AbortHandle,
}

impl LaterInMemory {
    pub(crate) fn new(notifier: Arc<dyn Notifier>) -> Self {
        Self {
            notifier,
            waiting: Mutex::default(),
        }
    }

    /// Sends `text` to `conversation` now, through the notifier.
    pub(crate) async fn notify(&self, conversation: String, text: String) {
        self.notifier.notify(conversation, text).await;
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, conversation: Arc<str>, text: String, delay: Duration) -> Result<(), ToolError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| ToolError::new("cannot send messages later outside a Tokio runtime"))?;
        let notifier = Arc::clone(&self.notifier);
        let (to, said) = (conversation.to_string(), text.clone());
        let task = runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            notifier.notify(to, said).await;
        });
        let mut waiting = self.waiting();
        // Sent ones go as new ones come, so the list stays as long as what waits.
        waiting.retain(|w| !w.task.is_finished());
        waiting.push(Waiting {
            conversation,
            text,
            task: task.abort_handle(),
        });
        Ok(())
    }

    /// Aborts the waiting messages saying `text` (in `conversation`, or
    /// any); returns how many.
    fn withdraw(&self, conversation: Option<&str>, text: &str) -> usize {
        let mut withdrawn = 0;
        self.waiting().retain(|w| {
            if w.task.is_finished() {
                return false;
            }
            let wanted = conversation.is_none_or(|c| *w.conversation == *c) && w.text == text;
            if wanted {
                w.task.abort();
                withdrawn += 1;
            }
            !wanted
        });
        withdrawn
    }
}

/// What a tool call receives besides its arguments: which conversation asked,
/// a cancellation token, the agent's shared state, and a way to message the
/// user later.
///
/// # Examples
/// ```
/// use ferrobot::tool::ToolContext;
/// let ctx = ToolContext::for_test("alice");
/// assert_eq!(ctx.conversation(), "alice");
/// assert!(ctx.state::<u32>().is_none());
/// ```
#[derive(Clone)]
pub struct ToolContext {
    conversation: Arc<str>,
    call_id: String,
    cancel: CancellationToken,
    state: SharedState,
    later: Option<Arc<LaterInMemory>>,
    /// The turn that runs the call, as the agent describes it to the
    /// sub-agents a call may start (`agent::sub::TurnScope`): permissions,
    /// budget and events flow down through it. Kept opaque here, so the
    /// tool layer knows nothing of agents; `None` outside a turn.
    caller: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("conversation", &self.conversation)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    pub(crate) fn new(
        conversation: Arc<str>,
        call_id: String,
        cancel: CancellationToken,
        state: SharedState,
        later: Option<Arc<LaterInMemory>>,
    ) -> Self {
        Self {
            conversation,
            call_id,
            cancel,
            state,
            later,
            caller: None,
        }
    }

    /// This context for a call made by the turn `caller` describes.
    pub(crate) fn with_caller(mut self, caller: Arc<dyn Any + Send + Sync>) -> Self {
        self.caller = Some(caller);
        self
    }

    /// The turn that made the call, as given to [`with_caller`](Self::with_caller).
    pub(crate) fn caller(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.caller.as_ref()
    }

    /// A context for calling a tool directly in a unit test: no state (add
    /// it with [`with_state`](Self::with_state)), no notifier, never
    /// cancelled.
    pub fn for_test(conversation: &str) -> Self {
        Self::new(
            conversation.into(),
            "call_test".into(),
            CancellationToken::new(),
            SharedState::default(),
            None,
        )
    }

    /// This context with `value` as the shared state of type `T`, as
    /// `Agent::builder().state(value)` gives it, so a tool that reads state
    /// can be tested alone. One value per type: a second replaces the first.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::ToolContext;
    /// struct Thermostat(u32);
    /// let ctx = ToolContext::for_test("t").with_state(Thermostat(19));
    /// assert_eq!(ctx.state::<Thermostat>().map(|t| t.0), Some(19));
    /// ```
    #[must_use]
    pub fn with_state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state = self.state.with(value);
        self
    }

    /// The conversation this call belongs to (a user or chat id).
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    /// The id of this tool call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Fires when the turn is cancelled or the call times out; long-running
    /// tools should stop early when it does.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The shared value of type `T` the agent was built with
    /// (`Agent::builder().state(…)`, given as a `T` or an `Arc<T>`), if any.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.state.get()
    }

    /// The shared value of type `T`, as a handle the caller may keep.
    pub fn state_handle<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.state.handle()
    }

    /// Sends `text` to this conversation after `delay`, outside the turn —
    /// e.g. "powering off now" just before a scheduled shutdown. Returns
    /// once the message is kept.
    ///
    /// With a running [`Scheduler`](crate::schedule::Scheduler) in the
    /// agent's state (feature `schedule`) and a store that keeps later
    /// messages (`SqliteHistory`), the message is stored and survives a
    /// restart. Otherwise it waits in memory, and a restart loses it.
    ///
    /// # Errors
    /// When the agent has no notifier (`Agent::builder().notifier(…)`) nor
    /// running scheduler, or when called outside a Tokio runtime, so the
    /// tool can tell the model it could not schedule the message.
    pub fn notify_later(
        &self,
        text: impl Into<String>,
        delay: Duration,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + '_ {
        let text = text.into();
        async move {
            #[cfg(feature = "schedule")]
            if let Some(scheduler) = self.state::<crate::schedule::Scheduler>() {
                match scheduler.send_later(&self.conversation, &text, delay).await {
                    Ok(()) => return Ok(()),
                    Err(
                        crate::schedule::ScheduleError::NotRunning
                        | crate::schedule::ScheduleError::Store(
                            crate::history::HistoryError::Unsupported { .. },
                        ),
                    ) => {}
                    Err(error) => {
                        tracing::warn!(error = %error.chain(), "a later message could not be stored; it waits in memory");
                    }
                }
            }
            self.notify_later_in_memory(text, delay)
        }
    }

    fn notify_later_in_memory(&self, text: String, delay: Duration) -> Result<(), ToolError> {
        let Some(later) = &self.later else {
            return Err(ToolError::new(
                "this agent cannot send messages later: it was built without a notifier",
            ));
        };
        later.send(Arc::clone(&self.conversation), text, delay)
    }

    /// Withdraws this conversation's later messages that say exactly
    /// `text` and are not sent yet — e.g. "powering off now" once the
    /// shutdown is cancelled — and returns how many there were. Stored ones
    /// are found after a restart too, so a fixed text can always be taken
    /// back.
    ///
    /// # Errors
    /// When the store of a running scheduler fails; the message says why.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use ferrobot::ToolContext;
    /// let ctx = ToolContext::for_test("alice");
    /// assert_eq!(ctx.withdraw_later("Rebooting now.").await.unwrap(), 0);
    /// # }
    /// ```
    pub async fn withdraw_later(&self, text: &str) -> Result<usize, ToolError> {
        self.withdraw(Some(&self.conversation), text).await
    }

    /// [`withdraw_later`](Self::withdraw_later) in every conversation of
    /// the agent: for an announcement of what happens to the whole machine
    /// ("Rebooting now."), whichever conversation asked for it.
    ///
    /// # Errors
    /// When the store of a running scheduler fails; the message says why.
    pub async fn withdraw_later_everywhere(&self, text: &str) -> Result<usize, ToolError> {
        self.withdraw(None, text).await
    }

    async fn withdraw(&self, conversation: Option<&str>, text: &str) -> Result<usize, ToolError> {
        let waiting = self
            .later
            .as_ref()
            .map_or(0, |later| later.withdraw(conversation, text));
        Ok(waiting + self.withdraw_stored(conversation, text).await?)
    }

    /// [`withdraw`](Self::withdraw) of the messages a running scheduler
    /// keeps.
    #[cfg(feature = "schedule")]
    async fn withdraw_stored(
        &self,
        conversation: Option<&str>,
        text: &str,
    ) -> Result<usize, ToolError> {
        use crate::history::HistoryError;
        use crate::schedule::{ScheduleError, Scheduler};
        let Some(scheduler) = self.state::<Scheduler>() else {
            return Ok(0);
        };
        match scheduler.withdraw_later(conversation, text).await {
            Ok(withdrawn) => Ok(withdrawn),
            Err(
                ScheduleError::NotRunning | ScheduleError::Store(HistoryError::Unsupported { .. }),
            ) => Ok(0),
            Err(error) => Err(ToolError::new(format!(
                "could not withdraw the later message: {}",
                error.chain()
            ))),
        }
    }

    #[cfg(not(feature = "schedule"))]
    async fn withdraw_stored(&self, _: Option<&str>, _: &str) -> Result<usize, ToolError> {
        Ok(0)
    }
}
