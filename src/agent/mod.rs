//! The agent: a provider, tools and a history store, joined by the turn loop.
//!
//! [`Agent::handle`] runs one turn and returns its [`Reply`];
//! [`Agent::stream`] runs it in the background and yields [`AgentEvent`]s as
//! they happen. Both follow the life of one turn:
//!
//! 1. Text starting with `/` is a slash command: `/name key=value …` runs that
//!    tool directly (the model is never called, nothing enters history).
//!    The built-ins ([`Builtin`]) win over a tool of the same name: `/help`
//!    lists the commands, `/undo` takes back the last turn, `/new` belongs
//!    to the front end.
//! 2. The conversation's turn lock is taken; other conversations never wait.
//! 3. The user message is stored; the provider is called with the history and
//!    the enabled tools; deltas are forwarded as events. Images of earlier
//!    turns are sent as the [`ImagePolicy`] says, their bytes loaded from
//!    the history store.
//! 4. Text only ends the turn. Tool calls are each decided (unknown, disabled,
//!    unavailable, bad arguments, confirmation) and run concurrently (bounded),
//!    one at a time when any needs confirmation; failures become results.
//! 5. The assistant message and its results are stored together and the model
//!    is called again, until `max_tool_rounds` or a [`TurnBudget`] limit,
//!    after which tools are withdrawn for a last answer.
//! 6. A provider failure ends the turn with [`Error::Provider`]; cancelling
//!    keeps what streamed, marked interrupted.

mod alarm;
mod answer;
mod budget;
mod builtin;
mod delegate;
mod event;
mod exec;
mod images;
mod instructions;
mod output;
mod prompt;
mod request;
mod running;
mod slash;
mod sub;
mod turn;
mod undo;
mod watch;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use budget::TurnBudget;
pub use builtin::Builtin;
pub use delegate::Delegate;
pub use event::{
    AgentEvent, Reply, Status, SubAgentEvent, ToolCallRecord, ToolOutcome, Transcript,
};
pub use images::ImagePolicy;
pub use instructions::Instructions;
pub use output::{Output, OutputMode, OutputSchemaError};
pub use prompt::{PromptTail, TurnInfo};
pub use request::TurnRequest;
pub use running::WhileBusy;
pub use slash::parse_arguments;
pub use sub::{AgentTool, SubAgentLimits};
pub use watch::{TurnWatch, TurnWatcher};

use self::running::Turns;
use crate::confirm::{ConfirmHandler, Decision};
use crate::error::{Error, Result};
use crate::history::{HistoryStore, MemoryHistory};
use crate::policy::Policy;
use crate::provider::{ModelSettings, Provider};
use crate::tool::context::SharedState;
use crate::tool::{IntoTool, Notifier, Tool, ToolRegistry};

/// An LLM agent: give it a provider and tools, then hand it messages.
///
/// Cloning is cheap and shares everything: tools, history, locks.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("Hello!"))
///     .system_prompt("You are terse.")
///     .build();
/// let reply = agent.handle("alice", "hi").await?;
/// assert_eq!(reply.text, "Hello!");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    provider: Arc<dyn Provider>,
    system_prompt: Option<String>,
    /// Sections joined after the system prompt at each turn's start.
    instructions: Instructions,
    tools: ToolRegistry,
    state: SharedState,
    history: Arc<dyn HistoryStore>,
    confirm: Option<Arc<dyn ConfirmHandler>>,
    /// Shared with the turns of its sub-agents, which are held to it too.
    policy: Arc<Policy>,
    /// The notifier, and tools' later messages when no scheduler keeps
    /// them.
    notifier: Option<Arc<crate::tool::context::LaterInMemory>>,
    context: Option<crate::history::ContextPolicy>,
    images: ImagePolicy,
    settings: ModelSettings,
    max_tool_rounds: u32,
    budget: TurnBudget,
    sub_agents: SubAgentLimits,
    output: Option<Output>,
    max_concurrent_tools: usize,
    tool_timeout: Duration,
    confirm_timeout: Option<Duration>,
    /// One turn at a time per conversation, and the running ones.
    turns: Turns,
    while_busy: WhileBusy,
    watcher: Option<Arc<dyn TurnWatcher>>,
    prompt_tail: Option<Arc<dyn PromptTail>>,
    /// What [`TurnInfo::now`] reads; the system clock when `None`.
    clock: Option<Arc<dyn Fn() -> std::time::SystemTime + Send + Sync>>,
    /// Exclusive tools take it for writing, all others for reading.
    exclusive: tokio::sync::RwLock<()>,
    /// The agent's background tasks ([`Delegate`]), for `/tasks` and
    /// `/cancel`; empty, and never touched by a turn, without them.
    tasks: delegate::Tasks,
    /// Itself, for the background tasks a turn's call starts: they
    /// outlive the turn, which only borrows the agent.
    me: std::sync::Weak<Inner>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.inner.provider)
            .field("tools", &self.inner.tools)
            .field("max_tool_rounds", &self.inner.max_tool_rounds)
            .finish_non_exhaustive()
    }
}

#[bon::bon]
impl Agent {
    /// Starts building an agent; only the provider is required.
    ///
    /// # Panics
    /// `build()` panics when a tool reads shared state
    /// ([`Tool::state_types`]) the builder was not given with
    /// [`state`](AgentBuilder::state), naming the tools, the missing types
    /// and the types present: a mistake in the program, found at start-up.
    #[builder(finish_fn = build)]
    pub fn new(
        #[builder(field)] tools: Vec<Arc<dyn Tool>>,
        #[builder(field)] state: SharedState,
        /// The model endpoint.
        #[builder(with = |provider: impl Provider + 'static| Arc::new(provider) as Arc<dyn Provider>)]
        provider: Arc<dyn Provider>,
        /// Sent before every conversation. By default, none.
        #[builder(into)]
        system_prompt: Option<String>,
        /// Where conversations are kept. By default, a [`MemoryHistory`].
        #[builder(with = |store: impl HistoryStore| Arc::new(store) as Arc<dyn HistoryStore>)]
        history: Option<Arc<dyn HistoryStore>>,
        /// Asked before tools that want confirmation run. By default, none,
        /// and such calls are declined.
        #[builder(with = |handler: impl ConfirmHandler| Arc::new(handler) as Arc<dyn ConfirmHandler>)]
        confirm: Option<Arc<dyn ConfirmHandler>>,
        /// Which calls run, are asked about, or never run. By default, no
        /// rules: tools that ask ([`Tool::confirmation`]) or are destructive
        /// ([`Effects`](crate::tool::Effects)) are asked about, the rest run.
        #[builder(default)]
        policy: Policy,
        /// How long the confirmation handler may take to answer; no answer
        /// in time declines the call. By default, as long as it takes.
        confirm_timeout: Option<Duration>,
        /// Delivers [`ToolContext::notify_later`](crate::ToolContext::notify_later)
        /// messages. By default, none.
        #[builder(with = |notifier: impl Notifier| Arc::new(notifier) as Arc<dyn Notifier>)]
        notifier: Option<Arc<dyn Notifier>>,
        /// How much of a long conversation is sent to the model. By default,
        /// all of it.
        context: Option<crate::history::ContextPolicy>,
        /// Which earlier images are sent to the model again; older ones are
        /// sent as their description. By default,
        /// [`ImagePolicy::Recent(3)`](ImagePolicy::Recent): those of the
        /// last three turns.
        #[builder(default)]
        images: ImagePolicy,
        /// Sampling settings for every model call. By default, the provider's.
        #[builder(default)]
        settings: ModelSettings,
        /// Rounds of tool calls per turn before tools are withdrawn. By default, 10.
        #[builder(default = 10)]
        max_tool_rounds: u32,
        /// Limits on a turn's time, tool output and written tokens, past
        /// which tools are withdrawn as past `max_tool_rounds`. By default,
        /// none.
        #[builder(default)]
        budget: TurnBudget,
        /// Limits on the sub-agents ([`Agent::as_tool`]) a turn runs: how
        /// deep they nest, how many run at once, how many in all. By
        /// default, [`SubAgentLimits::default`]: 3 deep, 4 at once, 16 per
        /// turn.
        #[builder(default)]
        sub_agent_limits: SubAgentLimits,
        /// The shape of every answer ([`Reply::output`]), unless a turn asks
        /// for its own ([`TurnRequest::output`]). By default, none: answers
        /// are text.
        output: Option<Output>,
        /// Tool calls of one round that run at once. By default, 4.
        #[builder(default = 4)]
        max_concurrent_tools: usize,
        /// Time-out for tools that don't set their own. By default, 60 s.
        #[builder(default = Duration::from_secs(60))]
        tool_timeout: Duration,
        /// What a message does when it arrives while a turn of its
        /// conversation runs, unless it says itself
        /// ([`TurnRequest::while_busy`]). By default,
        /// [`WhileBusy::Queue`]: it waits for that turn to end.
        #[builder(default)]
        while_busy: WhileBusy,
        /// Writes the end of each turn's system prompt: the facts that
        /// change, such as the date ([`PromptTail`]). By default, none.
        #[builder(with = |tail: impl PromptTail| Arc::new(tail) as Arc<dyn PromptTail>)]
        prompt_tail: Option<Arc<dyn PromptTail>>,
        /// The time each turn starts at as [`TurnInfo::now`] gives it to
        /// the [`prompt_tail`](AgentBuilder::prompt_tail). By default, the
        /// system clock; a recorded test fixes it, so that a prompt holding
        /// the date replays on any day.
        ///
        /// ```
        /// use std::time::{Duration, SystemTime};
        /// # use ferrobot::{Agent, testing::MockProvider};
        /// let recorded = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        /// let agent = Agent::builder()
        ///     .provider(MockProvider::replying("ok"))
        ///     .clock(move || recorded)
        ///     .build();
        /// # let _ = agent;
        /// ```
        #[builder(with = |clock: impl Fn() -> std::time::SystemTime + Send + Sync + 'static| Arc::new(clock) as Arc<dyn Fn() -> std::time::SystemTime + Send + Sync>)]
        clock: Option<Arc<dyn Fn() -> std::time::SystemTime + Send + Sync>>,
        /// Told of every turn, its events and its end ([`TurnWatcher`]),
        /// e.g. to write a trace of each. By default, none.
        #[builder(with = |watcher: impl TurnWatcher| Arc::new(watcher) as Arc<dyn TurnWatcher>)]
        watcher: Option<Arc<dyn TurnWatcher>>,
    ) -> Agent {
        check_state(&tools, &state);
        let registry = ToolRegistry::new();
        for tool in tools {
            registry.register(tool);
        }
        Agent {
            inner: Arc::new_cyclic(|me| Inner {
                provider,
                instructions: Instructions::new(system_prompt.clone()),
                system_prompt,
                tools: registry,
                state,
                history: history.unwrap_or_else(|| Arc::new(MemoryHistory::new())),
                confirm,
                policy: Arc::new(policy),
                notifier: notifier
                    .map(|notifier| Arc::new(crate::tool::context::LaterInMemory::new(notifier))),
                context,
                images,
                settings,
                max_tool_rounds,
                budget,
                sub_agents: sub_agent_limits,
                output,
                max_concurrent_tools: max_concurrent_tools.max(1),
                tool_timeout,
                confirm_timeout,
                turns: Turns::default(),
                while_busy,
                watcher,
                prompt_tail,
                clock,
                exclusive: tokio::sync::RwLock::new(()),
                tasks: delegate::Tasks::default(),
                me: me.clone(),
            }),
        }
    }

    /// Runs one turn of `conversation` and returns the reply.
    ///
    /// `conversation` is any stable id: a user, a chat, a channel. `request`
    /// is the user's text, or a [`TurnRequest`] saying more (who sent it,
    /// the shape of the answer). The turn runs inside this future: dropping
    /// it stops the turn where it is, and what the model had written of its
    /// answer is not kept. To stop a turn and keep that, use
    /// [`stream`](Self::stream) and its
    /// [`cancellation`](TurnStream::cancellation).
    ///
    /// # Errors
    /// [`Error::Provider`] when the model endpoint fails (show
    /// [`Error::user_message`]), [`Error::History`] when the store fails,
    /// [`Error::Output`] when a typed answer could not be had.
    pub fn handle<'a>(
        &'a self,
        conversation: &'a str,
        request: impl Into<TurnRequest>,
    ) -> impl Future<Output = Result<Reply>> + Send + 'a {
        // Not generic past this line, and boxed: the turn and its drop code
        // compile once, in ferrobot, rather than in every crate (and every
        // codegen unit) that calls `handle`.
        let turn: std::pin::Pin<Box<dyn Future<Output = Result<Reply>> + Send + 'a>> =
            Box::pin(self.handle_request(conversation, request.into()));
        turn
    }

    /// The turn [`handle`](Self::handle) boxes. An `async` block, not an
    /// `async fn`: an `async fn`'s future keeps each argument twice (the
    /// argument and the local it is moved into), and the request (256
    /// bytes) sat in every conversation's future twice.
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice"
    )]
    fn handle_request<'a>(
        &'a self,
        conversation: &'a str,
        request: TurnRequest,
    ) -> impl Future<Output = Result<Reply>> + Send + 'a {
        async move {
            let cancel = CancellationToken::new();
            let sink = NoSink {
                watching: self.watch(conversation, &request),
            };
            let reply = turn::run(
                &self.inner,
                conversation.into(),
                &request,
                &sink,
                &cancel,
                true,
            )
            .await;
            ended(sink.watching, reply.as_ref());
            reply
        }
    }

    /// The watch of a turn of `conversation` asked `request`, if the agent
    /// has a watcher.
    fn watch(&self, conversation: &str, request: &TurnRequest) -> Watching {
        let watcher = self.inner.watcher.as_ref()?;
        Some(std::sync::Mutex::new(watcher.start(conversation, request)))
    }

    /// Runs one turn whose answer is a `T`: the model is asked for it
    /// (natively where the provider can, else through an output tool), the
    /// answer is checked and read into `T`, and an answer that doesn't fit
    /// is sent back with what was wrong, field by field, up to
    /// [`Output::retries`] times. Tools run first, as in any turn.
    ///
    /// # Errors
    /// As [`handle`](Self::handle); [`Error::Output`] when no answer fit
    /// (it carries the last one) or the model refused.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// /// An invoice's essentials.
    /// #[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
    /// struct Invoice {
    ///     number: String,
    ///     total_cents: u64,
    /// }
    ///
    /// let mock = MockProvider::replying(r#"{"number": "F-17", "total_cents": 4200}"#).with_native_output(true);
    /// let agent = Agent::builder().provider(mock).build();
    /// let invoice: Invoice = agent.extract("alice", "the invoice in this mail: …").await?;
    /// assert_eq!(invoice, Invoice { number: "F-17".into(), total_cents: 4200 });
    /// # Ok(()) }
    /// ```
    pub async fn extract<T: serde::de::DeserializeOwned + schemars::JsonSchema>(
        &self,
        conversation: &str,
        request: impl Into<TurnRequest>,
    ) -> Result<T> {
        let mut request = request.into();
        // A mode or retry count the caller chose is kept.
        let output = match request.output.take() {
            Some(chosen) => Output::of::<T>()
                .mode(chosen.output_mode())
                .retries(chosen.max_retries()),
            None => Output::of::<T>(),
        };
        let reply = self.handle(conversation, request.output(output)).await?;
        if !reply.pending.is_empty() {
            return Err(Error::Pending(crate::PendingError::Waiting {
                calls: reply
                    .pending
                    .iter()
                    .map(|p| turn::named(&p.tool, &p.call_id))
                    .collect(),
            }));
        }
        let Some(value) = reply.output else {
            // A slash command answers without the model.
            return Err(Error::Output(crate::error::OutputError::NoAnswer(format!(
                "a slash command answered: {}",
                reply.text
            ))));
        };
        // The answer was read into `T` already; this can't fail.
        serde_json::from_value(value).map_err(|e| {
            Error::Output(crate::error::OutputError::Invalid {
                attempts: 1,
                problems: vec![e.to_string()],
                answer: reply.text,
            })
        })
    }

    /// Runs one turn in the background, yielding its events as they happen.
    /// The last item is [`AgentEvent::Done`] or an error. Cancel through
    /// [`TurnStream::cancellation`]; dropping the stream cancels too.
    ///
    /// # Panics
    /// When called outside a Tokio runtime.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::{Agent, AgentEvent, testing::MockProvider};
    /// use futures_util::StreamExt;
    ///
    /// let agent = Agent::builder().provider(MockProvider::replying("Hello there")).build();
    /// let mut events = agent.stream("alice", "hi");
    /// let mut text = String::new();
    /// while let Some(event) = events.next().await {
    ///     if let AgentEvent::TextDelta(delta) = event? {
    ///         text.push_str(&delta);
    ///     }
    /// }
    /// assert_eq!(text, "Hello there");
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(&self, conversation: &str, request: impl Into<TurnRequest>) -> TurnStream {
        // Not generic past this line: the turn compiles once, in ferrobot.
        self.stream_request(conversation, request.into())
    }

    fn stream_request(&self, conversation: &str, request: TurnRequest) -> TurnStream {
        let (tx, rx) = mpsc::channel(64);
        let cancel = CancellationToken::new();
        let sink = ChannelSink {
            tx,
            cancel: cancel.clone(),
            watching: self.watch(conversation, &request),
        };
        let inner = Arc::clone(&self.inner);
        let conversation = Arc::<str>::from(conversation);
        let turn_cancel = cancel.clone();
        tokio::spawn(async move {
            let turn = turn::run(&inner, conversation, &request, &sink, &turn_cancel, false);
            let result = turn.await;
            let ChannelSink { tx, watching, .. } = sink;
            ended(watching, result.as_ref());
            let _ = tx.send(result.map(AgentEvent::Done)).await;
        });
        TurnStream { rx, cancel }
    }

    /// Continues the conversation's turn that waits for decisions: the calls
    /// a [`ConfirmHandler`] deferred
    /// ([`Decision::Defer`]), listed in
    /// that turn's [`Reply::pending`] and kept with the conversation — in
    /// this process or, with a store that keeps them (`SqliteHistory`),
    /// another one after a restart. Give one decision per waiting call, by
    /// call id; approved calls run (edited arguments and the rules are
    /// checked again: a rule that denies still denies), then the turn goes
    /// on as any turn does and returns its reply.
    ///
    /// While a turn waits, the conversation takes no new message
    /// ([`PendingError::Waiting`](crate::PendingError::Waiting)). The
    /// confirmation time-out doesn't run while a call waits, and the
    /// resumed turn's [`TurnBudget`] starts afresh; its rounds count on
    /// from where the turn stopped. [`stream`](Self::stream) with
    /// [`TurnRequest::resume`] does the same with events.
    ///
    /// # Errors
    /// [`Error::Pending`] when nothing waits, a decision names a call that
    /// doesn't wait, or a waiting call has no decision (or `Defer` again):
    /// nothing runs then. Otherwise as [`handle`](Self::handle).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::confirm::{ConfirmRequest, Decision};
    /// use ferrobot::testing::{MockProvider, MockTurn};
    /// use ferrobot::{Agent, agent::ToolOutcome, tool::from_fn};
    ///
    /// let delete = from_fn("delete_logs", "Delete old logs.", |_: serde_json::Value, _| async { "deleted 3 files" })
    ///     .confirm("Delete the old logs?");
    /// let model = MockProvider::new()
    ///     .then(MockTurn::new().tool_call("delete_logs", serde_json::json!({})))
    ///     .then(MockTurn::new().text("Done: 3 files deleted."));
    /// let agent = Agent::builder()
    ///     .provider(model)
    ///     .tool(delete)
    ///     // A web app: nobody can answer now.
    ///     .confirm(|_: ConfirmRequest| async { Decision::Defer })
    ///     .build();
    ///
    /// let waiting = agent.handle("ops", "clean the logs").await?;
    /// assert_eq!(waiting.pending[0].prompt, "Delete the old logs?");
    ///
    /// // Later, once a reviewer said yes:
    /// let id = waiting.pending[0].call_id.clone();
    /// let reply = agent.resume("ops", [(id, Decision::Approve)]).await?;
    /// assert_eq!(reply.text, "Done: 3 files deleted.");
    /// assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    /// # Ok(()) }
    /// ```
    pub async fn resume<I: Into<String>>(
        &self,
        conversation: &str,
        decisions: impl IntoIterator<Item = (I, Decision)>,
    ) -> Result<Reply> {
        self.handle(conversation, TurnRequest::resume(decisions))
            .await
    }

    /// The agent's tools; enable or disable them here at any time.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Sections joined after the system prompt, set and removed while the
    /// agent runs (an MCP server's instructions, say); each turn reads them
    /// at its start. See [`Instructions`].
    pub fn instructions(&self) -> &Instructions {
        &self.inner.instructions
    }

    /// Takes back the conversation's last turn: its last message from the
    /// user and everything after it (the answer, tool calls and results),
    /// once no turn of the conversation runs. Returns that message's text,
    /// or `None` when there is nothing to take back. What tools did is not
    /// undone. `/undo` does the same from a chat.
    ///
    /// # Errors
    /// [`Error::History`] when the store fails or can't truncate
    /// ([`HistoryError::Unsupported`](crate::history::HistoryError::Unsupported)).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::{Agent, testing::MockProvider};
    /// let agent = Agent::builder().provider(MockProvider::replying("Done.")).build();
    /// agent.handle("alice", "delete the logs").await?;
    /// assert_eq!(agent.undo("alice").await?.as_deref(), Some("delete the logs"));
    /// assert!(agent.history().load("alice").await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn undo(&self, conversation: &str) -> Result<Option<String>> {
        undo::undo(&self.inner, &conversation.into(), &CancellationToken::new()).await
    }

    /// Stops the conversation's running turn, as `/stop` does from a chat:
    /// what it wrote so far is kept, marked interrupted, and the turn ends
    /// with [`Error::Cancelled`]. Returns false when no turn of the
    /// conversation runs; a turn still waiting for the running one is not
    /// touched. Only turns of this process are seen (of this agent and its
    /// clones).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use ferrobot::{Agent, Error, testing::{MockProvider, MockTurn}};
    ///
    /// let mock = MockProvider::new().then(MockTurn::new().text("too late").delay(Duration::from_secs(60)));
    /// let agent = Agent::builder().provider(mock).build();
    /// assert!(!agent.stop("alice"));
    /// let turn = tokio::spawn({
    ///     let agent = agent.clone();
    ///     async move { agent.handle("alice", "count to a billion").await }
    /// });
    /// while !agent.stop("alice") {
    ///     tokio::task::yield_now().await;
    /// }
    /// assert!(matches!(turn.await.unwrap(), Err(Error::Cancelled)));
    /// # }
    /// ```
    pub fn stop(&self, conversation: &str) -> bool {
        self.inner.turns.stop(conversation)
    }

    /// The agent's history store.
    pub fn history(&self) -> &Arc<dyn HistoryStore> {
        &self.inner.history
    }

    /// The agent's provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.inner.provider
    }

    /// The shared value of type `T` the agent was built with
    /// ([`AgentBuilder::state`], given as a `T` or an `Arc<T>`): the state
    /// the tools read and change, for the program to see. `None` when it
    /// has none of that type.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// struct Calls(AtomicU32);
    /// let agent = Agent::builder()
    ///     .provider(MockProvider::replying("ok"))
    ///     .state(Calls(AtomicU32::new(0)))
    ///     .build();
    /// let calls = agent.state::<Calls>().unwrap();
    /// assert_eq!(calls.0.load(Ordering::Relaxed), 0);
    /// assert!(agent.state::<String>().is_none());
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.inner.state.handle()
    }
}

impl<S: agent_builder::State> AgentBuilder<S> {
    /// Registers a tool. Call once per tool.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Registers several tools.
    pub fn tools<T: IntoTool>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools
            .extend(tools.into_iter().map(IntoTool::into_tool));
        self
    }

    /// Shares a value with every tool, read in tools with a
    /// [`State<T>`](crate::tool::State) parameter or
    /// [`ToolContext::state`](crate::ToolContext::state), and by the program
    /// with [`Agent::state`]. One value per type: a second replaces the
    /// first. Give a `T`, or an `Arc<T>` to keep a handle of your own; tools
    /// find it as a `T` either way.
    ///
    /// # Examples
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// struct Thermostat(Mutex<f64>);
    /// let thermostat = Arc::new(Thermostat(Mutex::new(19.0)));
    /// let agent = Agent::builder()
    ///     .provider(MockProvider::replying("ok"))
    ///     .state(Arc::clone(&thermostat))
    ///     .build();
    /// *thermostat.0.lock().unwrap() = 21.0; // as a tool would
    /// let seen = agent.state::<Thermostat>().unwrap();
    /// assert_eq!(*seen.0.lock().unwrap(), 21.0);
    /// assert!(Arc::ptr_eq(&seen, &thermostat));
    /// ```
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state = self.state.with(value);
        self
    }
}

/// Every tool's state is there, or the program stops at start-up saying
/// which tools miss which types, and which types the agent has.
fn check_state(tools: &[Arc<dyn Tool>], state: &SharedState) {
    let missing: Vec<String> = tools
        .iter()
        .flat_map(|tool| {
            tool.state_types()
                .into_iter()
                .filter(|ty| !state.has(*ty))
                .map(|ty| format!("`{}` needs `{}`", tool.name(), ty.name()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the agent lacks state its tools read: {}. Add each with `Agent::builder().state(value)` \
         (a value of the type, or an `Arc` of it); the state it has: {}",
        missing.join(", "),
        state.present()
    );
}

/// The events of a turn started with [`Agent::stream`].
#[derive(Debug)]
pub struct TurnStream {
    rx: mpsc::Receiver<Result<AgentEvent>>,
    cancel: CancellationToken,
}

impl TurnStream {
    /// Cancels the turn when cancelled: the model call or running tools stop,
    /// what streamed is kept in history marked interrupted, and the stream
    /// ends with [`Error::Cancelled`].
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Waits for the turn to end and returns its reply, skipping the events.
    ///
    /// # Errors
    /// As [`Agent::handle`], plus [`Error::Cancelled`].
    pub async fn into_reply(mut self) -> Result<Reply> {
        while let Some(event) = self.rx.recv().await {
            if let AgentEvent::Done(reply) = event? {
                return Ok(reply);
            }
        }
        Err(Error::Cancelled)
    }
}

impl Stream for TurnStream {
    type Item = Result<AgentEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for TurnStream {
    fn drop(&mut self) {
        // A turn nobody listens to stops, keeping what it had. Cancelling a
        // turn that already ended does nothing.
        self.cancel.cancel();
    }
}

/// Where a turn sends its events.
pub(crate) trait EventSink: Sync {
    fn emit(&self, event: AgentEvent) -> impl Future<Output = ()> + Send;

    /// Whether anyone hears the events: when nobody does (`handle` without
    /// a watcher), the answer's deltas and the copies of calls and records
    /// are not made into events at all.
    fn listens(&self) -> bool {
        true
    }

    /// Emits the event `make` builds, if anyone [`listens`](Self::listens).
    fn emit_with(&self, make: impl FnOnce() -> AgentEvent) -> impl Future<Output = ()> + Send {
        let event = self.listens().then(make);
        async move {
            if let Some(event) = event {
                self.emit(event).await;
            }
        }
    }

    /// Where a sub-agent's events go to reach this sink's listener, tagged;
    /// `None` when nobody listens (`handle`), so they are not made at all.
    fn forwarder(&self) -> Option<sub::Forwarder> {
        None
    }
}

/// A turn's [`TurnWatch`], if the agent has a watcher: each sink tells it
/// the events it emits.
type Watching = Option<std::sync::Mutex<Box<dyn TurnWatch>>>;

fn tell(watching: &Watching, event: &AgentEvent) {
    if let Some(watch) = watching {
        watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .event(event);
    }
}

/// Ends the turn's watch with `result`.
fn ended(watching: Watching, result: std::result::Result<&Reply, &Error>) {
    if let Some(watch) = watching {
        watch
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .end(result);
    }
}

/// For [`Agent::handle`]: the reply is all the caller wants (and the
/// watcher, if any).
#[derive(Default)]
struct NoSink {
    watching: Watching,
}

impl EventSink for NoSink {
    // Not an `async fn`: its future would hold the event until polled, and
    // every turn future awaiting an emit would carry that room.
    fn emit(&self, event: AgentEvent) -> impl Future<Output = ()> + Send {
        tell(&self.watching, &event);
        std::future::ready(())
    }

    fn listens(&self) -> bool {
        self.watching.is_some()
    }
}

struct ChannelSink {
    tx: mpsc::Sender<Result<AgentEvent>>,
    cancel: CancellationToken,
    watching: Watching,
}

impl EventSink for ChannelSink {
    fn emit(&self, event: AgentEvent) -> impl Future<Output = ()> + Send {
        tell(&self.watching, &event);
        deliver(&self.tx, &self.cancel, event)
    }

    fn forwarder(&self) -> Option<sub::Forwarder> {
        Some(sub::Forwarder::new(self.tx.clone(), self.cancel.clone()))
    }
}

/// Puts `event` on a turn stream's channel once it has room; a channel
/// whose reader is gone cancels the turn (`cancel`).
///
/// A slot first, then the event into it: `Sender::send`'s future keeps the
/// event twice, and with an `async fn`'s own copy that was 1.2 KB of every
/// streamed turn's future.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments twice"
)]
fn deliver<'a>(
    tx: &'a mpsc::Sender<Result<AgentEvent>>,
    cancel: &'a CancellationToken,
    event: AgentEvent,
) -> impl Future<Output = ()> + Send + 'a {
    async move {
        match tx.reserve().await {
            Ok(slot) => slot.send(Ok(event)),
            Err(_) => cancel.cancel(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MockProvider;

    /// What each conversation in flight costs before any request: the turn
    /// future `handle` boxes, in the task a server spawns per message. It
    /// held the turn's state three times over (each step taking it by value)
    /// until the steps borrowed it: 5.1 KB then, 3.8 KB after (this build;
    /// 5.3 and 3.8 KB in release; 4.1 KB in release once it held the whole
    /// request). Then 2.3 KB, in both builds, once no local was kept twice
    /// or kept while the model streams (see `Turn::answered`); 2.2 KB once
    /// the model's stream was read in the turn's own future. A step taking
    /// the turn by value, or an `async fn` taking a large argument, shows
    /// here.
    #[test]
    fn a_turn_future_stays_small() {
        let agent = Agent::builder()
            .provider(MockProvider::replying("ok"))
            .build();
        let bytes = std::mem::size_of_val(&agent.handle_request("c", "size".into()));
        assert!(bytes <= 2560, "an `Agent::handle` future is {bytes} bytes");
    }

    /// The same for a streamed turn (`Agent::stream`, as the bots run
    /// theirs): each event's emit kept it twice beside the channel's own
    /// copy, 3.2 KB in all, until the sinks took a slot first (2.3 KB, in
    /// both builds; 2.2 KB now).
    #[test]
    fn a_streamed_turn_future_stays_small() {
        let agent = Agent::builder()
            .provider(MockProvider::replying("ok"))
            .build();
        let (tx, _rx) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let sink = ChannelSink {
            tx,
            cancel: cancel.clone(),
            watching: None,
        };
        let request = TurnRequest::from("size");
        let turn = turn::run(&agent.inner, "c".into(), &request, &sink, &cancel, false);
        let bytes = std::mem::size_of_val(&turn);
        assert!(bytes <= 2560, "an `Agent::stream` turn is {bytes} bytes");
    }
}
