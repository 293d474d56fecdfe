//! Background work: [`Delegate`], a tool that hands a job to a specialist
//! agent and returns at once, and the agent's table of the tasks it
//! started ([`Tasks`]), which `/tasks` lists and `/cancel ID` stops.
//!
//! A call checks its arguments, takes a place in the tool's bounded queue,
//! notes the task in the calling agent's table and spawns it; the calling
//! turn reads "Started task 3 …" and ends. The task waits for one of the
//! running slots, runs one turn of the specialist (as a sub-agent's call
//! would: [`AgentTool::turn`], fresh history, the calling agent's rules as
//! a ceiling) and posts its answer through the calling agent's
//! [`Notifier`](crate::tool::Notifier) to the conversation that delegated,
//! after appending it to that conversation's history under its turn lock.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::sub::{AgentTool, TurnScope};
use super::{Agent, Inner};
use crate::error::Error;
use crate::message::{Message, ToolSpec};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// A tool that hands long jobs to specialist agents, who work on them in
/// the background: the call returns at once with a task id, the turn ends,
/// and the specialist's answer is posted in the chat later, as a message of
/// its own.
///
/// The model sees one tool, `delegate(agent, task)`, whose `agent` is one
/// of the specialists' names, each described. A call:
///
/// 1. is checked: an unknown specialist or an empty task is an error the
///    model reads, and so is a full queue (at most
///    [`max_running`](Self::max_running) tasks run at once and
///    [`max_waiting`](Self::max_waiting) more wait; one more is refused);
/// 2. starts a task, numbered per agent (1, 2, 3 …), and answers
///    "Started task 3 (researcher). Its result will be posted in this chat
///    when it is ready; /tasks lists tasks, /cancel 3 stops it.";
/// 3. the task runs one turn of the specialist on the task text, as a
///    sub-agent's call does ([`AgentTool`]): a fresh conversation, the
///    specialist's own tools, budget and model, each of its calls held to
///    its own rules and to the calling agent's (the strictest wins), its
///    questions asked through its own confirmation handler or, without
///    one, the calling agent's;
/// 4. its answer, or what went wrong, or that it was cancelled, is
///    appended to the calling conversation's history as an assistant
///    message ("Task 3 (researcher) finished:\n\n…"), once no turn of that
///    conversation runs, so the model sees it next turn; then it is sent
///    through the calling agent's [`notifier`](super::AgentBuilder::notifier).
///
/// The calling turn's cancellation and budget don't reach the task (that
/// turn is over): `/cancel ID` stops it, and `/tasks` lists the
/// conversation's tasks. Tasks live in this process's memory: a restart
/// loses those queued or running.
///
/// The calling agent needs a notifier, and the tool works in a
/// conversation's own turns, not in a sub-agent's; otherwise a call is an
/// error the model reads.
///
/// Clones share the queue: a clone given to several agents bounds their
/// tasks together.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
/// use ferrobot::agent::Delegate;
/// use ferrobot::testing::{MockProvider, MockTurn};
/// use ferrobot::Agent;
/// use serde_json::json;
///
/// let researcher = Agent::builder()
///     .provider(MockProvider::replying("Paris has 2.1 million inhabitants."))
///     .build();
/// let lead_model = MockProvider::new()
///     .then(MockTurn::new().tool_call("delegate", json!({"agent": "researcher", "task": "Population of Paris?"})))
///     .then(MockTurn::new().text("On it: I'll post the answer here."));
/// let (tx, mut posted) = tokio::sync::mpsc::unbounded_channel();
/// let lead = Agent::builder()
///     .provider(lead_model)
///     .tool(Delegate::new().agent("researcher", "Looks things up.", researcher))
///     .notifier(move |chat: String, text: String| {
///         let tx = tx.clone();
///         async move { tx.send((chat, text)).unwrap(); }
///     })
///     .build();
///
/// let reply = lead.handle("alice", "How many people live in Paris?").await?;
/// assert_eq!(reply.text, "On it: I'll post the answer here.");
/// assert!(reply.tool_calls[0].content.starts_with("Started task 1 (researcher)."));
/// // Later, in the same chat:
/// let (chat, text) = posted.recv().await.unwrap();
/// assert_eq!(chat, "alice");
/// assert_eq!(text, "Task 1 (researcher) finished:\n\nParis has 2.1 million inhabitants.");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Delegate {
    spec: ToolSpec,
    specialists: Vec<Specialist>,
    max_running: usize,
    max_waiting: usize,
    /// How long one task may run.
    timeout: Duration,
    /// Places in the queue: running and waiting together.
    places: Arc<Semaphore>,
    /// Running slots.
    slots: Arc<Semaphore>,
}

#[derive(Clone)]
struct Specialist {
    name: String,
    description: String,
    tool: AgentTool,
}

impl fmt::Debug for Delegate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delegate")
            .field(
                "specialists",
                &self.specialists.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("max_running", &self.max_running)
            .field("max_waiting", &self.max_waiting)
            .finish_non_exhaustive()
    }
}

impl Default for Delegate {
    fn default() -> Self {
        Self::new()
    }
}

/// By default, this many tasks run at once…
const MAX_RUNNING: usize = 2;
/// …and this many more wait.
const MAX_WAITING: usize = 8;
/// A task running longer is stopped.
const TIMEOUT: Duration = Duration::from_secs(30 * 60);

impl Delegate {
    /// A `delegate` tool without specialists yet; add them with
    /// [`agent`](Self::agent).
    ///
    /// # Examples
    /// ```
    /// use ferrobot::{agent::Delegate, tool::Tool};
    /// assert_eq!(Delegate::new().name(), "delegate");
    /// ```
    pub fn new() -> Self {
        let mut delegate = Self {
            spec: ToolSpec::new("delegate", "", json!({})),
            specialists: Vec::new(),
            max_running: MAX_RUNNING,
            max_waiting: MAX_WAITING,
            timeout: TIMEOUT,
            places: Arc::new(Semaphore::new(MAX_RUNNING + MAX_WAITING)),
            slots: Arc::new(Semaphore::new(MAX_RUNNING)),
        };
        delegate.describe();
        delegate
    }

    /// Adds a specialist: `name` is what the model writes as `agent`
    /// (a second one of the same name replaces the first), `description`
    /// tells it what this one is good at.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::Delegate;
    /// use ferrobot::{Agent, testing::MockProvider, tool::Tool};
    ///
    /// let researcher = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let writer = Agent::builder().provider(MockProvider::replying("…")).build();
    /// let delegate = Delegate::new()
    ///     .agent("researcher", "Looks things up on the web.", researcher)
    ///     .agent("writer", "Writes long texts.", writer);
    /// assert_eq!(delegate.spec().parameters["properties"]["agent"]["enum"], serde_json::json!(["researcher", "writer"]));
    /// ```
    #[must_use]
    pub fn agent(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        agent: Agent,
    ) -> Self {
        let name = name.into();
        let description = description.into();
        let specialist = Specialist {
            tool: AgentTool::new(agent, name.clone(), description.clone()),
            name,
            description,
        };
        match self
            .specialists
            .iter_mut()
            .find(|s| s.name == specialist.name)
        {
            Some(same) => *same = specialist,
            None => self.specialists.push(specialist),
        }
        self.describe();
        self
    }

    /// How many tasks run at once; more wait their turn. By default, 2.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::Delegate;
    /// let delegate = Delegate::new().max_running(1).max_waiting(4);
    /// # let _ = delegate;
    /// ```
    #[must_use]
    pub fn max_running(mut self, tasks: usize) -> Self {
        self.max_running = tasks.max(1);
        self.resize();
        self
    }

    /// How many tasks may wait for a running one to end; one more is
    /// refused, and the model is told to do the job itself or try later.
    /// By default, 8.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::Delegate;
    /// // No waiting: a task starts now, or not at all.
    /// let delegate = Delegate::new().max_running(4).max_waiting(0);
    /// # let _ = delegate;
    /// ```
    #[must_use]
    pub fn max_waiting(mut self, tasks: usize) -> Self {
        self.max_waiting = tasks;
        self.resize();
        self
    }

    /// How long one task may run, from when it starts (not while it
    /// waits); past it the task is stopped and the chat is told it failed.
    /// By default, 30 minutes.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ferrobot::agent::Delegate;
    /// let delegate = Delegate::new().timeout(Duration::from_secs(10 * 60));
    /// # let _ = delegate;
    /// ```
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// New permits for new limits: the setters run while the tool is
    /// built, before any task holds one.
    fn resize(&mut self) {
        self.places = Arc::new(Semaphore::new(self.max_running + self.max_waiting));
        self.slots = Arc::new(Semaphore::new(self.max_running));
    }

    /// The tool's description and schema, naming the specialists.
    fn describe(&mut self) {
        let mut description = String::from(
            "Hand a long job to a specialist, who does it in the background: this returns \
             at once with a task id, and the result is posted in this chat when it is ready \
             (you will see it in the conversation). Use it for work that takes a while; \
             tell the user it has started.",
        );
        if !self.specialists.is_empty() {
            description.push_str("\nSpecialists:");
            for s in &self.specialists {
                description.push_str(&format!("\n- {}: {}", s.name, s.description));
            }
        }
        let names: Vec<&str> = self.specialists.iter().map(|s| s.name.as_str()).collect();
        self.spec = ToolSpec::new(
            "delegate",
            description,
            json!({
                "type": "object",
                "properties": {
                    "agent": {
                        "type": "string",
                        "enum": names,
                        "description": "Which specialist does it.",
                    },
                    "task": {
                        "type": "string",
                        "description": "What to do, with everything needed to do it: the \
                                        specialist sees nothing else of this conversation.",
                    },
                },
                "required": ["agent", "task"],
                "additionalProperties": false,
            }),
        );
    }

    /// The specialist and the task the arguments name.
    fn read<'a>(&'a self, arguments: &Value) -> Result<(&'a Specialist, String), ToolError> {
        let field = |key: &str| arguments.get(key).and_then(Value::as_str);
        let Some(name) = field("agent") else {
            return Err(ToolError::new(format!(
                "`delegate` needs `agent`, one of: {}",
                self.names()
            )));
        };
        let Some(specialist) = self.specialists.iter().find(|s| s.name == name) else {
            return Err(ToolError::new(format!(
                "there is no specialist `{name}`: choose one of {}",
                self.names()
            )));
        };
        let task = field("task").map(str::trim).unwrap_or_default();
        if task.is_empty() {
            return Err(ToolError::new(
                "`delegate` needs `task`: what to do, with everything needed to do it",
            ));
        }
        if let Some(extra) = arguments
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "agent" && *k != "task"))
        {
            return Err(ToolError::new(format!(
                "`delegate` takes `agent` and `task` only, not `{extra}`"
            )));
        }
        Ok((specialist, task.to_owned()))
    }

    fn names(&self) -> String {
        if self.specialists.is_empty() {
            return "none (this tool has no specialists)".to_owned();
        }
        self.specialists
            .iter()
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    async fn start(&self, arguments: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let (specialist, task) = self.read(&arguments)?;
        let scope: Arc<TurnScope> = ctx
            .caller()
            .and_then(|caller| Arc::clone(caller).downcast().ok())
            .ok_or_else(|| {
                ToolError::new(
                    "`delegate` starts tasks for an agent's turn, and was called outside one: \
                     there is nowhere to post the result",
                )
            })?;
        if scope.depth() > 0 {
            return Err(ToolError::new(
                "`delegate` works in a conversation's own turn, not in a sub-agent's: \
                 do the job yourself",
            ));
        }
        let parent = scope
            .agent()
            .ok_or_else(|| ToolError::new("the agent that called `delegate` is gone"))?;
        if parent.notifier.is_none() {
            return Err(ToolError::new(
                "this agent can't post results later: it was built without a notifier \
                 (developer: `Agent::builder().notifier(…)`). Do the job now instead.",
            ));
        }
        let place = Arc::clone(&self.places).try_acquire_owned().map_err(|_| {
            ToolError::new(format!(
                "the background queue is full ({} waiting): do it now or try later",
                self.max_waiting
            ))
        })?;
        let conversation: Arc<str> = ctx.conversation().into();
        let cancel = CancellationToken::new();
        let id = parent
            .tasks
            .add(&conversation, &specialist.name, &task, cancel.clone());
        let job = Job {
            id,
            name: specialist.name.clone(),
            tool: specialist.tool.clone(),
            task,
            scope: scope.detached(),
            conversation,
            cancel,
            timeout: self.timeout,
            slots: Arc::clone(&self.slots),
            place,
        };
        tokio::spawn(job.run(parent));
        Ok(ToolOutput::text(format!(
            "Started task {id} ({}). Its result will be posted in this chat when it is ready; \
             /tasks lists tasks, /cancel {id} stops it.",
            specialist.name
        )))
    }
}

impl Tool for Delegate {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(self.start(arguments, ctx))
    }

    fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        self.read(arguments).map(drop)
    }
}

/// One started task, from its place in the queue to its posted answer.
struct Job {
    id: u64,
    name: String,
    tool: AgentTool,
    task: String,
    scope: Arc<TurnScope>,
    conversation: Arc<str>,
    cancel: CancellationToken,
    timeout: Duration,
    slots: Arc<Semaphore>,
    /// Its place in the queue, given back once it ran.
    place: OwnedSemaphorePermit,
}

impl Job {
    async fn run(self, parent: Arc<Inner>) {
        let Self {
            id,
            name,
            tool,
            task,
            scope,
            conversation,
            cancel,
            timeout,
            slots,
            place,
        } = self;
        let slot = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            slot = slots.acquire_owned() => slot.ok(),
        };
        let ended = match slot {
            None => State::Cancelled,
            Some(_slot) => {
                parent.tasks.set(id, State::Running);
                let ctx = ToolContext::new(
                    Arc::clone(&conversation),
                    format!("task-{id}"),
                    cancel.clone(),
                    parent.state.clone(),
                    None,
                )
                .with_caller(scope as Arc<dyn std::any::Any + Send + Sync>);
                let Ok(done) = tokio::time::timeout(timeout, tool.turn(task, &ctx)).await else {
                    return finish(
                        &parent,
                        id,
                        &name,
                        &conversation,
                        State::Failed(format!(
                            "it ran past its time limit ({}) and was stopped",
                            crate::history::human_interval(timeout)
                        )),
                    )
                    .await;
                };
                match done {
                    Err(refused) => State::Failed(refused.to_string()),
                    Ok(Ok(reply)) if !reply.pending.is_empty() => {
                        let calls: Vec<String> = reply
                            .pending
                            .iter()
                            .map(|p| format!("`{}`", p.tool))
                            .collect();
                        State::Failed(format!(
                            "it stopped before running {}: they wait for a person's decision, \
                             and a background task can't wait",
                            calls.join(", ")
                        ))
                    }
                    Ok(Ok(reply)) => State::Finished(reply.text),
                    Ok(Err(Error::Cancelled)) => State::Cancelled,
                    Ok(Err(error)) => State::Failed(crate::error::chain(&error)),
                }
            }
        };
        drop(place);
        finish(&parent, id, &name, &conversation, ended).await;
    }
}

/// Records how task `id` ended, stores its result in the conversation and
/// posts it.
async fn finish(parent: &Inner, id: u64, name: &str, conversation: &Arc<str>, ended: State) {
    let text = match &ended {
        State::Finished(answer) => format!("Task {id} ({name}) finished:\n\n{answer}"),
        State::Failed(why) => format!("Task {id} ({name}) failed: {why}"),
        _ => format!("Task {id} ({name}) was cancelled."),
    };
    tracing::info!(task = id, specialist = %name, %conversation, state = ended.word(), "background task ended");
    parent.tasks.set(id, ended);
    {
        // Never in the middle of a turn of the conversation: the model
        // reads it as the last word before the next message.
        let _turn = parent.turns.lock(conversation).await;
        if let Err(error) = parent
            .history
            .append(conversation, &[Message::assistant(text.as_str())])
            .await
        {
            tracing::warn!(%conversation, task = id, error = %error.chain(), "could not store a background task's result");
        }
    }
    if let Some(notifier) = &parent.notifier {
        notifier.notify(conversation.to_string(), text).await;
    }
}

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Queued,
    Running,
    /// With the specialist's answer.
    Finished(String),
    /// With what went wrong.
    Failed(String),
    Cancelled,
}

impl State {
    fn word(&self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Finished(_) => "finished",
            State::Failed(_) => "failed",
            State::Cancelled => "cancelled",
        }
    }

    fn is_over(&self) -> bool {
        !matches!(self, State::Queued | State::Running)
    }
}

/// Ended tasks kept for `/tasks`, per agent.
const KEPT: usize = 20;

/// An agent's background tasks: those queued or running, and the last
/// [`KEPT`] that ended. Touched only by `delegate` calls, the tasks
/// themselves, `/tasks` and `/cancel`.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// The last id given.
    last: u64,
    /// Oldest first.
    tasks: VecDeque<Task>,
}

#[derive(Debug)]
struct Task {
    id: u64,
    conversation: Arc<str>,
    specialist: String,
    task: String,
    state: State,
    started: Instant,
    ended: Option<Instant>,
    cancel: CancellationToken,
}

impl Tasks {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes a queued task and returns its id.
    fn add(
        &self,
        conversation: &Arc<str>,
        specialist: &str,
        task: &str,
        cancel: CancellationToken,
    ) -> u64 {
        let mut table = self.table();
        table.last += 1;
        let id = table.last;
        table.tasks.push_back(Task {
            id,
            conversation: Arc::clone(conversation),
            specialist: specialist.to_owned(),
            task: task.to_owned(),
            state: State::Queued,
            started: Instant::now(),
            ended: None,
            cancel,
        });
        id
    }

    fn set(&self, id: u64, state: State) {
        let mut table = self.table();
        if let Some(task) = table.tasks.iter_mut().find(|t| t.id == id) {
            if state.is_over() {
                task.ended = Some(Instant::now());
            }
            task.state = state;
        }
        // Forget the oldest ended tasks past the last KEPT.
        let mut ended = table.tasks.iter().filter(|t| t.state.is_over()).count();
        while ended > KEPT {
            let Some(oldest) = table.tasks.iter().position(|t| t.state.is_over()) else {
                break;
            };
            table.tasks.remove(oldest);
            ended -= 1;
        }
    }

    /// `/tasks`: the conversation's tasks, newest first.
    pub(super) fn list(&self, conversation: &str) -> String {
        let table = self.table();
        let now = Instant::now();
        let lines: Vec<String> = table
            .tasks
            .iter()
            .rev()
            .filter(|t| &*t.conversation == conversation)
            .map(|t| {
                let when = match t.ended {
                    Some(ended) => format!("ended {} ago", age(now - ended)),
                    None => format!("started {} ago", age(now - t.started)),
                };
                let first = t.task.lines().next().unwrap_or_default();
                let first = match first.char_indices().nth(60) {
                    Some((at, _)) => format!("{}…", &first[..at]),
                    None => first.to_owned(),
                };
                format!(
                    "{} {} ({}, {when}): {first}",
                    t.id,
                    t.state.word(),
                    t.specialist
                )
            })
            .collect();
        if lines.is_empty() {
            return NO_TASKS.to_owned();
        }
        format!("Background tasks:\n{}", lines.join("\n"))
    }

    /// `/cancel ID`, where `args` is what follows the command.
    pub(super) fn cancel(&self, conversation: &str, args: &str) -> String {
        let Some(word) = args.split_whitespace().next() else {
            return "Say which task: /cancel ID (/tasks lists them).".to_owned();
        };
        // `/cancel 3`, `/cancel #3`, or `/cancel id=3` as a menu's option
        // (Discord) sends it.
        let number = word.strip_prefix("id=").unwrap_or(word);
        let Ok(id) = number.trim_start_matches('#').parse::<u64>() else {
            return format!("`{word}` is not a task id: they are numbers, /tasks lists them.");
        };
        let table = self.table();
        let Some(task) = table
            .tasks
            .iter()
            .find(|t| t.id == id && &*t.conversation == conversation)
        else {
            return format!("There is no task {id} in this conversation; /tasks lists them.");
        };
        if task.state.is_over() {
            return format!(
                "Task {id} ({}) has already ended: {}.",
                task.specialist,
                task.state.word()
            );
        }
        task.cancel.cancel();
        format!(
            "Cancelling task {id} ({}); this chat will be told when it has stopped.",
            task.specialist
        )
    }
}

/// What `/tasks` answers without tasks.
const NO_TASKS: &str = "No background tasks in this conversation.";

/// "40s", "3m", "2h", "1d".
fn age(elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        assert_eq!(age(Duration::from_secs(40)), "40s");
        assert_eq!(age(Duration::from_secs(200)), "3m");
        assert_eq!(age(Duration::from_secs(7300)), "2h");
        assert_eq!(age(Duration::from_secs(200_000)), "2d");
    }

    #[test]
    fn only_the_last_ended_tasks_are_kept() {
        let tasks = Tasks::default();
        let chat: Arc<str> = "chat".into();
        let running = tasks.add(&chat, "r", "keep running", CancellationToken::new());
        for _ in 0..KEPT + 5 {
            let id = tasks.add(&chat, "r", "t", CancellationToken::new());
            tasks.set(id, State::Finished(String::new()));
        }
        let table = tasks.table();
        assert_eq!(table.tasks.len(), KEPT + 1);
        assert_eq!(table.tasks[0].id, running);
        assert_eq!(table.tasks[1].id, running + 6);
    }

    #[test]
    fn cancel_answers_every_case() {
        let tasks = Tasks::default();
        let chat: Arc<str> = "chat".into();
        let token = CancellationToken::new();
        let id = tasks.add(&chat, "researcher", "look", token.clone());
        assert!(tasks.cancel("chat", "").starts_with("Say which task"));
        assert!(tasks.cancel("chat", "x").contains("not a task id"));
        assert!(tasks.cancel("other", "1").starts_with("There is no task 1"));
        assert!(
            tasks
                .cancel("chat", "id=1")
                .starts_with("Cancelling task 1")
        );
        assert!(token.is_cancelled());
        tasks.set(id, State::Cancelled);
        assert_eq!(
            tasks.cancel("chat", "1"),
            "Task 1 (researcher) has already ended: cancelled."
        );
    }
}
