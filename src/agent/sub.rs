//! Sub-agents: an [`Agent`] as another agent's tool.
//!
//! [`Agent::as_tool`] makes an [`AgentTool`]. A call of it runs one turn of
//! the sub-agent (the child) on the task the model wrote, and gives the
//! child's answer back as the call's result. What flows from the calling
//! turn (the parent) to the child travels in a [`TurnScope`], which the
//! parent's turn makes once it runs tools and hands every call in its
//! [`ToolContext`]: the parent's rules (the child's calls are held to them
//! too), its confirmation handler, what is left of its budget, where its
//! events go, and how deep the chain already is. The child's turn is told
//! where it stands through [`Within`], a crate-private part of its
//! [`TurnRequest`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::budget::Inherited;
use super::event::{AgentEvent, Reply, SubAgentEvent};
use super::{Agent, EventSink, Inner, NoSink, TurnRequest, WhileBusy, turn};
use crate::confirm::ConfirmHandler;
use crate::error::{Error, Result};
use crate::message::{ToolSpec, Usage};
use crate::policy::{Approval, Policy, Verdict};
use crate::tool::arguments::{normalize, parse_checked, parse_whole};
use crate::tool::{Constraints, Effects, Tool, ToolContext, ToolError, ToolOutput};

/// Limits on the sub-agents a turn runs ([`Agent::as_tool`]), so that
/// agents calling agents can't multiply without end.
///
/// # Examples
/// ```
/// use ferrobot::agent::SubAgentLimits;
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let lead = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .sub_agent_limits(SubAgentLimits::builder().max_depth(1).max_calls(4).build())
///     .build();
/// # let _ = lead;
/// assert_eq!(SubAgentLimits::default().max_depth, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, bon::Builder)]
#[non_exhaustive]
pub struct SubAgentLimits {
    /// How many agents deep a chain may go below a turn started by a
    /// program (`handle`, `stream`): with 1, this agent's sub-agents run,
    /// theirs don't. The lowest of every agent's in a chain applies, so a
    /// cycle (an agent that is its own sub-agent, or its sub-agent's) stops
    /// there. By default, 3.
    #[builder(default = 3)]
    pub max_depth: u32,
    /// Sub-agent calls one turn of this agent may have running at once,
    /// its sub-agents' own included; one more is refused, and the model is
    /// told to call again once they answered. By default, 4.
    #[builder(default = 4)]
    pub max_running: usize,
    /// Sub-agent calls one turn of this agent may make in all, its
    /// sub-agents' own included (so it bounds the whole tree below the
    /// turn); past it, the model is told to answer with what it has. By
    /// default, 16.
    #[builder(default = 16)]
    pub max_calls: u32,
}

impl Default for SubAgentLimits {
    fn default() -> Self {
        Self::builder().build()
    }
}

/// What a turn that runs tools hands down to the sub-agents its calls
/// start: made once per turn (at its first tool round), shared by its
/// calls as one `Arc`.
pub(crate) struct TurnScope {
    /// The agent's rules: its sub-agents' calls are held to them too.
    policy: Arc<Policy>,
    /// The agent's confirmation handler: a sub-agent without its own asks
    /// through it.
    confirm: Option<Arc<dyn ConfirmHandler>>,
    confirm_timeout: Option<Duration>,
    /// The turn's conversation: questions asked through this agent's
    /// handler name it, so a front end asks in the right chat.
    conversation: Arc<str>,
    /// Who started the chain's first turn.
    user: Option<String>,
    /// The turn that called this one, for a sub-agent's turn.
    parent: Option<Arc<TurnScope>>,
    /// How many agents are above this turn's: 0 for a program's turn.
    depth: u32,
    /// The lowest `max_depth` of this agent and every one above it.
    max_depth: u32,
    limits: SubAgentLimits,
    /// Where the turn's events go, when someone listens.
    forward: Option<Forwarder>,
    /// The turn's limits, its own and those it inherited, the lower of each.
    budget: Inherited,
    /// What the turn has used, as of its latest tool round.
    tokens_spent: AtomicU64,
    bytes_spent: AtomicUsize,
    /// Sub-agent calls made, and running now.
    calls: AtomicU32,
    running: AtomicUsize,
    /// Tokens the sub-agents of the turn's calls spent since the turn last
    /// took them (input, output, reasoning, cached): the turn's too.
    children: [AtomicU64; 4],
    /// The turn's agent, for the background tasks a call starts
    /// ([`Delegate`](super::Delegate)): they outlive the turn.
    agent: std::sync::Weak<Inner>,
}

impl fmt::Debug for TurnScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnScope")
            .field("conversation", &self.conversation)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl TurnScope {
    /// The scope of a turn of `inner` in `conversation`, started at
    /// `started`; `within` when it is a sub-agent's turn.
    pub(crate) fn new(
        inner: &Inner,
        conversation: &Arc<str>,
        user: Option<&str>,
        within: Option<&Within>,
        forward: Option<Forwarder>,
        started: Instant,
    ) -> Arc<Self> {
        let inherited = within.map(|w| w.inherited).unwrap_or_default();
        let own = inner.budget;
        let budget = Inherited {
            deadline: lower(
                own.wall_time.map(|limit| started + limit),
                inherited.deadline,
            ),
            output_tokens: lower(own.output_tokens, inherited.output_tokens),
            tool_output_bytes: lower(own.tool_output_bytes, inherited.tool_output_bytes),
        };
        let parent = within.and_then(|w| w.parent.clone());
        let max_depth = parent.as_ref().map_or(inner.sub_agents.max_depth, |p| {
            p.max_depth.min(inner.sub_agents.max_depth)
        });
        Arc::new(Self {
            policy: Arc::clone(&inner.policy),
            confirm: inner.confirm.clone(),
            confirm_timeout: inner.confirm_timeout,
            conversation: Arc::clone(conversation),
            user: user.map(str::to_owned),
            parent,
            depth: within.map_or(0, |w| w.depth),
            max_depth,
            limits: inner.sub_agents,
            forward,
            budget,
            tokens_spent: AtomicU64::new(0),
            bytes_spent: AtomicUsize::new(0),
            calls: AtomicU32::new(0),
            running: AtomicUsize::new(0),
            children: Default::default(),
            agent: inner.me.clone(),
        })
    }

    /// The tokens the turn's sub-agents spent since the last call, to add
    /// to the turn's usage (and budget).
    pub(crate) fn take_spent(&self) -> Usage {
        let [input, output, reasoning, cached] = &self.children;
        Usage {
            input_tokens: input.swap(0, Ordering::Relaxed),
            output_tokens: output.swap(0, Ordering::Relaxed),
            reasoning_tokens: reasoning.swap(0, Ordering::Relaxed),
            cached_tokens: cached.swap(0, Ordering::Relaxed),
        }
    }

    /// Counts the tokens a sub-agent's turn spent.
    fn add_spent(&self, usage: Usage) {
        let [input, output, reasoning, cached] = &self.children;
        input.fetch_add(usage.input_tokens, Ordering::Relaxed);
        output.fetch_add(usage.output_tokens, Ordering::Relaxed);
        reasoning.fetch_add(usage.reasoning_tokens, Ordering::Relaxed);
        cached.fetch_add(usage.cached_tokens, Ordering::Relaxed);
    }

    /// This scope for work that outlives its turn (a background task): the
    /// same rules, confirmation handlers, conversation and depth, up the
    /// chain, but no listener (the turn's stream ends with the turn) and
    /// no budget (the task spends its specialist's own), nothing counted.
    pub(super) fn detached(&self) -> Arc<Self> {
        Arc::new(Self {
            policy: Arc::clone(&self.policy),
            confirm: self.confirm.clone(),
            confirm_timeout: self.confirm_timeout,
            conversation: Arc::clone(&self.conversation),
            user: self.user.clone(),
            parent: self.parent.as_ref().map(|p| p.detached()),
            depth: self.depth,
            max_depth: self.max_depth,
            limits: self.limits,
            forward: None,
            budget: Inherited::default(),
            tokens_spent: AtomicU64::new(0),
            bytes_spent: AtomicUsize::new(0),
            calls: AtomicU32::new(0),
            running: AtomicUsize::new(0),
            children: Default::default(),
            agent: self.agent.clone(),
        })
    }

    /// How many agents are above this turn's: 0 for a program's turn.
    pub(super) fn depth(&self) -> u32 {
        self.depth
    }

    /// The turn's agent, while it exists.
    pub(super) fn agent(&self) -> Option<Arc<Inner>> {
        self.agent.upgrade()
    }

    /// Notes what the turn has used, before a tool round.
    pub(crate) fn note_spent(&self, output_tokens: u64, tool_output_bytes: usize) {
        self.tokens_spent.store(output_tokens, Ordering::Relaxed);
        self.bytes_spent.store(tool_output_bytes, Ordering::Relaxed);
    }

    /// What the turn has left, for a sub-agent it starts now.
    fn left(&self) -> Inherited {
        let tokens = self.tokens_spent.load(Ordering::Relaxed);
        let bytes = self.bytes_spent.load(Ordering::Relaxed);
        Inherited {
            deadline: self.budget.deadline,
            output_tokens: self.budget.output_tokens.map(|l| l.saturating_sub(tokens)),
            tool_output_bytes: self
                .budget
                .tool_output_bytes
                .map(|l| l.saturating_sub(bytes)),
        }
    }

    /// The turns above this one, nearest first.
    fn above(&self) -> impl Iterator<Item = &TurnScope> {
        std::iter::successors(self.parent.as_deref(), |s| s.parent.as_deref())
    }

    /// This turn and the turns above it, nearest first.
    fn chain(&self) -> impl Iterator<Item = &TurnScope> {
        std::iter::once(self).chain(self.above())
    }

    /// Counts a sub-agent call of this turn in, in this turn and every turn
    /// above it (a turn's limits bound its sub-agents' calls too), or says
    /// which limit refuses it.
    fn admit(self: &Arc<Self>, tool: &str) -> std::result::Result<Running, ToolError> {
        for scope in self.chain() {
            let made = scope.calls.fetch_add(1, Ordering::Relaxed);
            if made >= scope.limits.max_calls {
                return Err(ToolError::new(format!(
                    "sub-agent call limit {} reached: `{tool}` was not run. \
                     Answer with what you have.",
                    scope.limits.max_calls
                )));
            }
        }
        for scope in self.chain() {
            scope.running.fetch_add(1, Ordering::Relaxed);
        }
        // Counted as running in each turn until the guard drops, refused
        // or not.
        let guard = Running(Arc::clone(self));
        for scope in self.chain() {
            // Its own count is in already: more than the limit is one too many.
            if scope.running.load(Ordering::Relaxed) > scope.limits.max_running {
                return Err(ToolError::new(format!(
                    "sub-agent limit of {} running at once reached: `{tool}` was not run. \
                     Call it again once the running ones have answered.",
                    scope.limits.max_running
                )));
            }
        }
        Ok(guard)
    }
}

/// A sub-agent call counted as running, in its turn and those above it,
/// until dropped.
struct Running(Arc<TurnScope>);

impl Drop for Running {
    fn drop(&mut self) {
        for scope in self.0.chain() {
            scope.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The lower of two optional limits; none is no limit.
fn lower<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The verdict on a call of a sub-agent's turn, held to the rules of every
/// agent above it: the strictest wins (deny over ask over allow), and a
/// verdict from above says so in its reason. `approvals` are the
/// sub-agent's conversation's. Nothing to do in a program's turn.
pub(crate) fn strictest(
    scope: &TurnScope,
    tool: &dyn Tool,
    arguments: &Value,
    approvals: &[Approval],
    verdict: Verdict,
) -> Verdict {
    let mut verdict = verdict;
    for above in scope.above() {
        let theirs = above.policy.evaluate(tool, arguments, approvals);
        if theirs.permission > verdict.permission {
            verdict = Verdict::new(
                theirs.permission,
                theirs.layer,
                format!("{} (of an agent above this one)", theirs.reason),
            );
        }
    }
    verdict
}

/// Who is asked about a call: a confirmation handler, the conversation
/// the question names, and how long that handler's agent waits.
pub(crate) struct Asker<'a> {
    pub(crate) handler: &'a Arc<dyn ConfirmHandler>,
    pub(crate) conversation: &'a Arc<str>,
    pub(crate) timeout: Option<Duration>,
}

/// Who is asked about a call of `scope`'s turn, whose agent's own handler
/// is `own`: that one, else the nearest agent's above that has one, naming
/// that agent's turn's conversation.
pub(crate) fn asker<'a>(
    own: Option<&'a Arc<dyn ConfirmHandler>>,
    own_timeout: Option<Duration>,
    conversation: &'a Arc<str>,
    scope: &'a TurnScope,
) -> Option<Asker<'a>> {
    if let Some(handler) = own {
        return Some(Asker {
            handler,
            conversation,
            timeout: own_timeout,
        });
    }
    scope.above().find_map(|above| {
        let handler = above.confirm.as_ref()?;
        Some(Asker {
            handler,
            conversation: &above.conversation,
            timeout: above.confirm_timeout,
        })
    })
}

/// Where a sub-agent's turn stands: the turn that called it, what that
/// turn had left, how deep it is. Its [`TurnRequest`] carries it.
#[derive(Clone)]
pub(crate) struct Within {
    /// `None` when the tool was called outside a turn (a test calling it).
    parent: Option<Arc<TurnScope>>,
    pub(super) inherited: Inherited,
    depth: u32,
}

impl fmt::Debug for Within {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Within")
            .field("depth", &self.depth)
            .field("inherited", &self.inherited)
            .finish_non_exhaustive()
    }
}

/// Sends events into a stream's channel, wrapped in the tags of the
/// sub-agent calls they come from: what `Agent::stream`'s sink hands down.
#[derive(Clone)]
pub(crate) struct Forwarder {
    tx: mpsc::Sender<Result<AgentEvent>>,
    /// The stream's turn: cancelled when nobody listens any more.
    cancel: CancellationToken,
    /// The calls, outermost first.
    tags: Vec<Tag>,
}

#[derive(Clone)]
struct Tag {
    tool: String,
    call_id: String,
    depth: u32,
}

impl Forwarder {
    pub(crate) fn new(tx: mpsc::Sender<Result<AgentEvent>>, cancel: CancellationToken) -> Self {
        Self {
            tx,
            cancel,
            tags: Vec::new(),
        }
    }

    fn tagged(&self, tag: Tag) -> Self {
        let mut tags = self.tags.clone();
        tags.push(tag);
        Self {
            tx: self.tx.clone(),
            cancel: self.cancel.clone(),
            tags,
        }
    }
}

/// A sub-agent's turn's sink: its events go to the stream of the turn at
/// the top, tagged. The channel is bounded: a slow reader slows the
/// sub-agent down rather than piling events up.
struct Tagged(Forwarder);

impl EventSink for Tagged {
    fn emit(&self, event: AgentEvent) -> impl Future<Output = ()> + Send {
        let mut event = event;
        for tag in self.0.tags.iter().rev() {
            event = AgentEvent::SubAgent(SubAgentEvent::new(
                tag.tool.clone(),
                tag.call_id.clone(),
                tag.depth,
                event,
            ));
        }
        super::deliver(&self.0.tx, &self.0.cancel, event)
    }

    fn forwarder(&self) -> Option<Forwarder> {
        Some(self.0.clone())
    }
}

/// An [`Agent`] as another agent's tool, made by [`Agent::as_tool`].
///
/// A call runs one turn of the sub-agent with its own system prompt, model
/// and tools, on the task the model wrote, and the model reads the
/// sub-agent's answer as the call's result. By default:
///
/// - **Input**: `{"task": string}`; [`input`](Self::input) takes a typed
///   one.
/// - **History**: fresh for every call: the sub-agent sees only the task,
///   in a conversation of its own named `{conversation}/{tool}/{call id}`
///   (the calling turn's conversation, this tool's name, the call's id),
///   forgotten once it answered. [`keep_conversation`](Self::keep_conversation)
///   and [`conversation`](Self::conversation) keep one instead.
/// - **Permissions**: each of the sub-agent's calls is held to its own
///   rules and to those of every agent above it; the strictest wins. A
///   call that must be asked about asks the sub-agent's confirmation
///   handler, or, without one, the nearest handler above, naming that
///   agent's conversation.
/// - **Budget and cancellation**: the sub-agent's turn has at most what the
///   calling turn has left of its [`TurnBudget`](super::TurnBudget) (time,
///   written tokens, tool output), and stops with it. The tokens it spends
///   count in the calling turn's [`Reply::usage`] and budget.
/// - **Events**: the sub-agent's events appear in the calling turn's
///   stream as [`AgentEvent::SubAgent`].
/// - **Limits**: [`SubAgentLimits`] of the calling agents bound how deep
///   agents nest and how many calls a turn makes.
///
/// A failure of the sub-agent's turn (its model unreachable, say) is the
/// call's error, which the calling model reads; it never fails the calling
/// turn. Neither does a sub-agent's call that waits for a human's decision
/// ([`Decision::Defer`](crate::confirm::Decision::Defer)): a sub-agent's
/// turn can't wait, so the call ends with an error naming the calls that
/// would have waited.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
/// use ferrobot::testing::{MockProvider, MockTurn};
/// use ferrobot::Agent;
/// use serde_json::json;
///
/// let researcher = Agent::builder()
///     .provider(MockProvider::replying("Paris has 2.1 million inhabitants."))
///     .system_prompt("You look things up.")
///     .build();
/// let lead_model = MockProvider::new()
///     .then(MockTurn::new().tool_call("research", json!({"task": "Population of Paris?"})))
///     .then(MockTurn::new().text("About 2.1 million."));
/// let lead = Agent::builder()
///     .provider(lead_model)
///     .tool(researcher.as_tool("research", "Look things up."))
///     .build();
///
/// let reply = lead.handle("alice", "How many people live in Paris?").await?;
/// assert_eq!(reply.text, "About 2.1 million.");
/// assert_eq!(reply.tool_calls[0].content, "Paris has 2.1 million inhabitants.");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AgentTool {
    agent: Agent,
    spec: ToolSpec,
    input: Input,
    conversation: Keep,
    effects: Effects,
    timeout: Duration,
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.spec.name)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

/// Which conversation a sub-agent's call runs in.
#[derive(Debug, Clone)]
enum Keep {
    /// A new one per call, forgotten after it.
    Fresh,
    /// One per calling conversation.
    PerCaller,
    /// This one, whoever calls.
    Fixed(Arc<str>),
}

type Render = dyn Fn(&str, Value) -> std::result::Result<String, ToolError> + Send + Sync;

/// How the model's arguments become the sub-agent's message.
#[derive(Clone)]
struct Input {
    /// Whether the arguments read as the input type.
    check: fn(&str, &Value) -> std::result::Result<(), ToolError>,
    constraints: Arc<Constraints>,
    render: Arc<Render>,
}

/// The default input.
#[derive(serde::Deserialize, JsonSchema)]
struct Task {
    /// What to do, with everything needed to do it: the sub-agent sees
    /// nothing else of this conversation.
    task: String,
}

/// How long a sub-agent's turn may take by default: several model calls
/// and tool rounds, longer than an ordinary tool's 60 s.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

impl Input {
    /// Arguments read as `T` (checked as a `from_fn` tool's are), then
    /// written as the sub-agent's message by `write`.
    fn of<T: DeserializeOwned + JsonSchema>(
        write: impl Fn(T) -> String + Send + Sync + 'static,
    ) -> (Value, Self) {
        let schema = crate::tool::schema::for_type::<T>();
        let constraints = Arc::new(Constraints::for_typed(&schema));
        let checked = Arc::clone(&constraints);
        let render = move |tool: &str, arguments: Value| {
            parse_checked::<T>(tool, arguments, &checked).map(&write)
        };
        let input = Self {
            check: |tool, arguments| parse_whole::<T>(tool, arguments).map(drop),
            constraints,
            render: Arc::new(render),
        };
        (schema, input)
    }
}

impl Agent {
    /// This agent as a tool of another agent: a call runs one turn of this
    /// agent on the task the calling model wrote (`{"task": "…"}`) and
    /// answers with this agent's reply. `name` and `description` are what
    /// the calling model sees. See [`AgentTool`] for what the sub-agent
    /// inherits and how to configure it.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Agent, testing::MockProvider, tool::Tool};
    ///
    /// let researcher = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let research = researcher.as_tool("research", "Look things up on the web.");
    /// assert_eq!(research.name(), "research");
    /// assert_eq!(research.spec().parameters["required"], serde_json::json!(["task"]));
    /// let lead = Agent::builder().provider(MockProvider::replying("…")).tool(research).build();
    /// # let _ = lead;
    /// ```
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> AgentTool {
        AgentTool::new(self.clone(), name.into(), description.into())
    }
}

impl AgentTool {
    /// `agent` as the tool `name`, with the default input and settings.
    pub(super) fn new(agent: Agent, name: String, description: String) -> Self {
        let (schema, input) = Input::of(|task: Task| task.task);
        Self {
            agent,
            spec: ToolSpec::new(name, description, schema),
            input,
            conversation: Keep::Fresh,
            effects: Effects::NONE,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl AgentTool {
    /// Takes a `T` as input instead of `{"task": …}`: its schema is what the
    /// calling model sees (doc comments and constraints included, checked
    /// as a [`from_fn`](crate::tool::from_fn) tool's arguments), and the
    /// sub-agent's message is the value as pretty-printed JSON. `T` must be
    /// a struct (tool arguments are an object). By default, `{"task": string}`.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Agent, testing::MockProvider, tool::Tool};
    ///
    /// /// What to look up.
    /// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// struct Query {
    ///     /// The question.
    ///     question: String,
    ///     /// How many sources to read.
    ///     #[schemars(range(min = 1, max = 5))]
    ///     sources: u8,
    /// }
    ///
    /// let researcher = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let research = researcher.as_tool("research", "Look things up.").input::<Query>();
    /// assert_eq!(research.spec().parameters["properties"]["sources"]["maximum"], 5);
    /// ```
    #[must_use]
    pub fn input<T: Serialize + DeserializeOwned + JsonSchema>(self) -> Self {
        self.input_with(|value: T| {
            serde_json::to_string_pretty(&value).unwrap_or_else(|e| e.to_string())
        })
    }

    /// Takes a `T` as input, as [`input`](Self::input) does, and writes the
    /// sub-agent's message with `write`.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Agent, testing::MockProvider};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Review {
    ///     /// The file to review.
    ///     path: String,
    /// }
    ///
    /// let reviewer = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let review = reviewer
    ///     .as_tool("review", "Review a file.")
    ///     .input_with(|review: Review| format!("Review {} for bugs.", review.path));
    /// # let _ = review;
    /// ```
    #[must_use]
    pub fn input_with<T: DeserializeOwned + JsonSchema>(
        mut self,
        write: impl Fn(T) -> String + Send + Sync + 'static,
    ) -> Self {
        let (schema, input) = Input::of(write);
        self.spec.parameters = schema;
        self.input = input;
        self
    }

    /// Keeps one conversation of the sub-agent per calling conversation,
    /// named `{conversation}/{tool}` (the calling turn's conversation, this
    /// tool's name), in the sub-agent's history store: each call sees the
    /// earlier calls' tasks and answers from the same conversation. By
    /// default, each call starts afresh.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{Agent, testing::MockProvider};
    /// let planner = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let plan = planner.as_tool("plan", "Keep the plan.").keep_conversation();
    /// # let _ = plan;
    /// ```
    #[must_use]
    pub fn keep_conversation(mut self) -> Self {
        self.conversation = Keep::PerCaller;
        self
    }

    /// Runs every call in the sub-agent's conversation `id`, whoever calls:
    /// one history shared by every calling conversation (and by the
    /// sub-agent's own `handle` with that id). Calls wait for each other's
    /// turns. By default, each call starts afresh.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ferrobot::{Agent, testing::MockProvider, tool::{Effects, Tool}};
    ///
    /// let archivist = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let archive = archivist
    ///     .as_tool("archive", "File a note in the team's archive.")
    ///     .conversation("team-archive")
    ///     .effects(Effects::NONE.idempotent())
    ///     .timeout(Duration::from_secs(60));
    /// assert_eq!(Tool::timeout(&archive), Some(Duration::from_secs(60)));
    /// ```
    #[must_use]
    pub fn conversation(mut self, id: impl Into<String>) -> Self {
        self.conversation = Keep::Fixed(Arc::from(id.into()));
        self
    }

    /// Declares what the sub-agent's work does to the world, for the
    /// calling agent's [`Policy`](crate::policy::Policy) defaults (a
    /// destructive one is asked about before it starts). Each of the
    /// sub-agent's own calls is judged anyway. By default, nothing.
    #[must_use]
    pub fn effects(mut self, effects: Effects) -> Self {
        self.effects = effects;
        self
    }

    /// How long the sub-agent's turn may take; at the limit it stops and
    /// the calling model is told. By default, 5 minutes (not the calling
    /// agent's tool time-out: a sub-agent's turn is several model calls).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The sub-agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    async fn run(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> std::result::Result<ToolOutput, ToolError> {
        let name = self.spec.name.as_str();
        let task = (self.input.render)(name, arguments)?;
        let ended = self.turn(task, &ctx).await?;
        answer(name, ended)
    }

    /// Runs the sub-agent's turn on `task` for the call `ctx` describes;
    /// a limit that refuses the call is the outer error.
    pub(super) async fn turn(
        &self,
        task: String,
        ctx: &ToolContext,
    ) -> std::result::Result<Result<Reply>, ToolError> {
        let name = self.spec.name.as_str();
        let caller: Option<Arc<TurnScope>> = ctx
            .caller()
            .and_then(|caller| Arc::clone(caller).downcast().ok());
        let depth = caller.as_ref().map_or(0, |c| c.depth) + 1;
        let max_depth = caller
            .as_ref()
            .map_or(self.agent.inner.sub_agents.max_depth, |c| c.max_depth);
        if depth > max_depth {
            return Err(ToolError::new(format!(
                "sub-agent depth limit {max_depth} reached: `{name}` was not run. \
                 Answer with what you have."
            )));
        }
        let _running = caller.as_ref().map(|c| c.admit(name)).transpose()?;
        let conversation: Arc<str> = match &self.conversation {
            Keep::Fresh => format!("{}/{name}/{}", ctx.conversation(), ctx.call_id()).into(),
            Keep::PerCaller => format!("{}/{name}", ctx.conversation()).into(),
            Keep::Fixed(id) => Arc::clone(id),
        };
        let mut request = TurnRequest::new(task).while_busy(WhileBusy::Queue);
        request.user = caller.as_ref().and_then(|c| c.user.clone());
        request.within = Some(Within {
            inherited: caller.as_ref().map(|c| c.left()).unwrap_or_default(),
            parent: caller.clone(),
            depth,
        });
        let history = Arc::clone(&self.agent.inner.history);
        let mut forget = Forget {
            history: matches!(self.conversation, Keep::Fresh).then_some(history),
            conversation: Arc::clone(&conversation),
        };
        let inner = &self.agent.inner;
        let cancel = ctx.cancellation();
        let forward = caller.as_ref().and_then(|c| c.forward.as_ref());
        let ended = match forward {
            Some(forward) => {
                let sink = Tagged(forward.tagged(Tag {
                    tool: name.to_owned(),
                    call_id: ctx.call_id().to_owned(),
                    depth,
                }));
                let ended = turn::run(
                    inner,
                    Arc::clone(&conversation),
                    &request,
                    &sink,
                    cancel,
                    false,
                )
                .await;
                if let Ok(reply) = &ended {
                    sink.emit(AgentEvent::Done(reply.clone())).await;
                }
                ended
            }
            None => {
                let sink = NoSink::default();
                turn::run(
                    inner,
                    Arc::clone(&conversation),
                    &request,
                    &sink,
                    cancel,
                    false,
                )
                .await
            }
        };
        if let (Some(caller), Ok(reply)) = (&caller, &ended) {
            caller.add_spent(reply.usage);
        }
        if let Ok(reply) = &ended
            && !reply.pending.is_empty()
            && let Err(error) = inner.history.set_pending(&conversation, None).await
        {
            tracing::warn!(%conversation, error = %error.chain(), "could not drop the sub-agent's waiting calls");
        }
        forget.now().await;
        Ok(ended)
    }
}

/// The calling model's result of a sub-agent's turn.
fn answer(name: &str, ended: Result<Reply>) -> std::result::Result<ToolOutput, ToolError> {
    match ended {
        Ok(reply) if !reply.pending.is_empty() => {
            let calls: Vec<String> = reply
                .pending
                .iter()
                .map(|p| format!("`{}` ({})", p.tool, p.prompt))
                .collect();
            Err(ToolError::new(format!(
                "`{name}` stopped before running {}: they wait for a person's decision, \
                 and a sub-agent can't wait. Nothing of them ran. Answer with what you have, \
                 or ask the user to do it.",
                calls.join(", ")
            )))
        }
        Ok(reply) => Ok(ToolOutput::text(reply.text)),
        Err(Error::Cancelled) => Err(ToolError::new(format!("`{name}` was stopped."))),
        Err(error) => Err(ToolError::new(format!(
            "the sub-agent `{name}` failed: {}. Answer without it, or try again later.",
            crate::error::chain(&error)
        ))),
    }
}

/// Forgets a fresh call's conversation once the call is over, however it
/// ends: awaited when it answers, in the background when it is dropped
/// (the calling turn was cancelled or timed out).
struct Forget {
    history: Option<Arc<dyn crate::history::HistoryStore>>,
    conversation: Arc<str>,
}

impl Forget {
    async fn now(&mut self) {
        if let Some(history) = self.history.take() {
            forget(&*history, &self.conversation).await;
        }
    }
}

impl Drop for Forget {
    fn drop(&mut self) {
        let Some(history) = self.history.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let conversation = Arc::clone(&self.conversation);
        runtime.spawn(async move { forget(&*history, &conversation).await });
    }
}

async fn forget(history: &dyn crate::history::HistoryStore, conversation: &str) {
    if let Err(error) = history.clear(conversation).await {
        tracing::warn!(%conversation, error = %error.chain(), "could not forget a sub-agent's conversation");
    }
}

impl Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> BoxFuture<'_, std::result::Result<ToolOutput, ToolError>> {
        Box::pin(self.run(arguments, ctx))
    }

    fn check_arguments(&self, arguments: &Value) -> std::result::Result<(), ToolError> {
        let arguments = normalize(arguments.clone());
        (self.input.check)(&self.spec.name, &arguments)?;
        self.input.constraints.check(&self.spec.name, &arguments)
    }

    fn effects(&self) -> Effects {
        self.effects
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_of_two_limits_and_none_is_no_limit() {
        assert_eq!(lower(Some(3), Some(5)), Some(3));
        assert_eq!(lower(None, Some(5)), Some(5));
        assert_eq!(lower(Some(3), None), Some(3));
        assert_eq!(lower::<u32>(None, None), None);
    }
}
