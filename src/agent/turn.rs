//! The turn loop: model call, tool round, repeat.

use std::collections::HashMap;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::answer::{Typed, Verdict, Watch};
use super::budget::{Limit, Spent};
use super::event::{AgentEvent, Reply, Status, ToolCallRecord, ToolOutcome};
use super::running::{RunningTurn, WhileBusy};
use super::sub::{TurnScope, Within};
use super::{EventSink, Inner, TurnRequest, exec, slash};
use crate::confirm::{ConfirmRequest, Decision};
use crate::error::{Error, PendingError, Result};
use crate::history::{PendingCall, PendingTurn, shorten_tool_outputs, since_summary};
use crate::message::{Message, Part, Role, ToolCall, ToolResult, ToolSpec, Usage};
use crate::provider::{
    Assembled, Assembler, ChatRequest, OutputFormat, ProviderError, StreamEvent, ToolChoice,
};

/// The user's message of a turn: its text, then its images.
fn user_message(request: &TurnRequest) -> Message {
    let mut parts = vec![Part::text(&request.text)];
    parts.extend(request.images.iter().cloned().map(Part::Image));
    Message::new(Role::User, parts)
}

/// Runs one turn of `conversation`, stopped when `cancel` is cancelled.
/// A token that is the turn's `own` (nothing else cancels or watches it)
/// is the running turn's token as it is, where a caller's shared one gets a
/// child for the turn, which `/stop` cancels alone.
pub(super) async fn run(
    inner: &Inner,
    conversation: Arc<str>,
    request: &TurnRequest,
    sink: &impl EventSink,
    cancel: &CancellationToken,
    own: bool,
) -> Result<Reply> {
    let user = request.user.as_deref();
    // A sub-agent's task is the calling model's text: it runs no commands.
    if request.within.is_none()
        && let Some(command) = request.text.trim_start().strip_prefix('/')
    {
        return Ok(slash::run(inner, &conversation, user, command, sink, cancel).await);
    }
    // Read once: sections set while the turn runs count from the next one.
    let system = inner.instructions.joined();
    let typed = request
        .output
        .as_ref()
        .or(inner.output.as_ref())
        .map(|output| {
            Typed::new(
                output,
                inner.provider.as_ref(),
                system.as_deref().or(inner.system_prompt.as_deref()),
            )
            .map(Box::new)
        })
        .transpose()?;
    let start = match &request.decisions {
        // Decisions continue the waiting turn; they steer nothing.
        Some(decisions) => Start::Resume(decisions),
        // What a crash interrupted goes on where it stood.
        None if request.recover => Start::Recover,
        None => {
            let mode = request.while_busy.unwrap_or(inner.while_busy);
            match busy(inner, &conversation, mode, user_message(request)) {
                Ok(reply) => return Ok(reply),
                Err(message) => Start::Message(message),
            }
        }
    };
    let new = matches!(start, Start::Message(_));
    let journaled = request.journal.as_deref();
    let (mut held, _shared) = lock_turn(inner, &conversation, new, journaled, cancel).await?;
    let tail = inner.prompt_tail.as_ref().and_then(|tail| {
        let turn = super::TurnInfo {
            conversation: &conversation,
            user,
            user_name: request.user_name.as_deref(),
            now: inner
                .clock
                .as_ref()
                .map_or_else(std::time::SystemTime::now, |clock| clock()),
        };
        tail.tail(&turn).filter(|text| !text.trim().is_empty())
    });
    // Once for the turn: every model call of it sends the same prompt.
    let prompt = tail.map(|tail| {
        let base = typed
            .as_deref()
            .and_then(Typed::system)
            .or(system.as_deref())
            .or(inner.system_prompt.as_deref());
        match base {
            Some(base) => format!("{base}\n\n{tail}"),
            None => tail,
        }
    });
    let running = held.start(cancel, own);
    let span = tracing::info_span!("turn", "gen_ai.conversation.id" = %conversation);
    let mut turn = Turn {
        inner,
        conversation: Arc::clone(&conversation),
        user,
        sink,
        cancel: running.cancellation(),
        running: &running,
        usage: Usage::default(),
        records: Vec::new(),
        bad_arguments: HashMap::new(),
        typed,
        within: request.within.as_ref(),
        scope: None,
        system,
        prompt,
        journal: request.journal.as_deref(),
        interrupted: Vec::new(),
    };
    // Not one future for both steps: the model's answer streams through
    // every future it is awaited in, once a token.
    // (What `start` returns is taken apart before the loop's await, which
    // would keep it.)
    let ended = 'ended: {
        let (history, round, spent) = match turn.start(start).instrument(span.clone()).await {
            Ok(Begun::Rounds {
                history,
                round,
                spent,
            }) => (history, round, spent),
            Ok(Begun::Reply(reply)) => break 'ended Ok(reply),
            Err(error) => break 'ended Err(error),
        };
        turn.rounds(history, round, spent).instrument(span).await
    };
    keep_unread(inner, &conversation, &running, ended).await
}

/// Takes the turn locks of `conversation`: this process's, then the
/// store's (replicas). A `new` turn (not a resumed or recovered one) waits
/// while the store holds a turn a crash interrupted, other than the one of
/// journaled message `own`.
///
/// Its own future: what the waiting keeps is not kept in the turn's
/// future while the turn runs.
async fn lock_turn<'i>(
    inner: &'i Inner,
    conversation: &Arc<str>,
    new: bool,
    own: Option<&str>,
    cancel: &CancellationToken,
) -> Result<(
    super::running::TurnGuard<'i>,
    Option<crate::history::TurnGuard>,
)> {
    let mut waited = None;
    loop {
        // The locks first: when they are free, the cancellation isn't
        // even polled (a waiter on the token costs more than the lock).
        let turn = tokio::select! {
            biased;
            guard = inner.turns.lock(conversation) => guard,
            () = cancel.cancelled() => return Err(Error::Cancelled),
        };
        // Other processes sharing the store (replicas) wait too.
        let shared = tokio::select! {
            biased;
            guard = inner.history.lock_turn(conversation) => guard?,
            () = cancel.cancelled() => return Err(Error::Cancelled),
        };
        // …so a turn cancelled meanwhile is caught here.
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        // A recovery or a resumed turn is the interrupted one itself; a
        // store only this process uses (no shared lock) has its
        // interrupted turns recovered before new ones, and isn't asked.
        if shared.is_none() || !new {
            return Ok((turn, shared));
        }
        let Some(pause) = after_interrupted(inner, conversation, own, &mut waited).await else {
            return Ok((turn, shared));
        };
        // Without the locks: the process recovering that turn needs them.
        drop((turn, shared));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = cancel.cancelled() => return Err(Error::Cancelled),
        }
    }
}

/// How long a journaled turn waits for a turn left half-done in its
/// conversation (see [`HistoryStore::started_in`](crate::history::HistoryStore::started_in))
/// before it runs anyway: a stopped replica's turn is recovered within
/// a minute, then runs as long as a turn may.
const WAIT_FOR_INTERRUPTED: Duration = Duration::from_secs(15 * 60);

/// Whether the turn (answering journaled message `own`, if any) must wait
/// for another turn left half-done in `conversation` (its user message
/// stored, no answer: a stopped process's, being recovered), and how long
/// to pause before looking again; `None` to run now. `waited` is when the
/// turn began waiting.
async fn after_interrupted(
    inner: &Inner,
    conversation: &str,
    own: Option<&str>,
    waited: &mut Option<Instant>,
) -> Option<Duration> {
    let interrupted = match inner.history.started_in(conversation).await {
        Ok(mut started) => {
            started.retain(|id| Some(id.as_str()) != own);
            if started.is_empty() {
                return None;
            }
            started
        }
        Err(error) => {
            tracing::warn!(%conversation, error = %error.chain(), "could not ask the journal for interrupted turns; running the turn");
            return None;
        }
    };
    let since = *waited.get_or_insert_with(|| {
        tracing::info!(%conversation, turns = ?interrupted, "waiting for an interrupted turn of the conversation to be recovered first");
        Instant::now()
    });
    if since.elapsed() > WAIT_FOR_INTERRUPTED {
        tracing::warn!(%conversation, turns = ?interrupted, "an interrupted turn was not recovered in 15 minutes; running the next one beside it");
        return None;
    }
    Some(Duration::from_millis(250))
}

/// How a turn starts: with the user's message, with decisions on the
/// calls its conversation's waiting turn stopped before, or where a crash
/// interrupted it.
enum Start<'r> {
    Message(Message),
    Resume(&'r [(String, Decision)]),
    Recover,
}

/// What a message does while a turn of its conversation may be running:
/// steered into it (its reply comes at once), or it stops that turn, or
/// waits. Gives the message back when it must run as a turn of its own.
fn busy(
    inner: &Inner,
    conversation: &str,
    mode: WhileBusy,
    message: Message,
) -> std::result::Result<Reply, Message> {
    match mode {
        WhileBusy::Steer => {
            inner.turns.steer(conversation, message)?;
            Ok(Reply {
                text: STEERED.to_owned(),
                steered: true,
                ..Reply::default()
            })
        }
        WhileBusy::Interrupt => {
            inner.turns.stop(conversation);
            Err(message)
        }
        WhileBusy::Queue => Err(message),
    }
}

/// What a steered message's own reply says.
const STEERED: &str = "Added to the running turn.";

/// Stores what was said to a turn that ended without reading it, as the
/// user wrote it: nothing the user said is lost, and the next turn's model
/// sees it. A store that fails here is logged: the turn's own outcome,
/// `ended`, is what the caller needs, and is handed back. (It goes through
/// this future rather than wait in the turn's, where it took 192 bytes
/// beside everything the turn keeps; an `async` block, not an `async fn`,
/// which would keep it twice.)
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments twice"
)]
fn keep_unread<'a>(
    inner: &'a Inner,
    conversation: &'a Arc<str>,
    running: &'a RunningTurn<'_>,
    ended: Result<Reply>,
) -> impl Future<Output = Result<Reply>> + Send + 'a {
    async move {
        let unread = running.close();
        if !unread.is_empty()
            && let Err(error) = inner.history.append(conversation, &unread).await
        {
            tracing::warn!(%conversation, error = %crate::error::chain(&error), lost = unread.len(), "could not keep messages said while the turn ended");
        }
        ended
    }
}

/// One turn's state. Its steps borrow it: a step taking it by value put
/// another copy of it in the turn future at each level (1.5 KB a turn).
struct Turn<'a, S> {
    inner: &'a Inner,
    conversation: Arc<str>,
    user: Option<&'a str>,
    sink: &'a S,
    cancel: &'a CancellationToken,
    /// Where messages said while the turn runs wait ([`WhileBusy::Steer`]).
    running: &'a RunningTurn<'a>,
    usage: Usage,
    records: Vec<ToolCallRecord>,
    /// How often each tool got invalid arguments this turn.
    bad_arguments: HashMap<String, u32>,
    /// The typed answer asked for, if any. Boxed: the turn's future holds
    /// the turn, and most turns ask for none.
    typed: Option<Box<Typed<'a>>>,
    /// Where a sub-agent's turn stands; `None` for a program's turn.
    within: Option<&'a Within>,
    /// What the turn's tool calls hand down to sub-agents, made at its
    /// first tool round. (Not a `OnceLock`: a cell in the turn would cost
    /// every streamed chunk, its fields no longer known not to change.)
    scope: Option<Arc<TurnScope>>,
    /// The system prompt with the agent's [`Instructions`](super::Instructions),
    /// when it has any; else the agent's own is sent.
    system: Option<Arc<str>>,
    /// The whole system prompt, when the agent's [`PromptTail`](super::PromptTail)
    /// ends it: made once for the turn.
    prompt: Option<String>,
    /// The journaled message the turn answers, whose entry it marks.
    journal: Option<&'a str>,
    /// Calls that were running when a crash interrupted the turn being
    /// recovered: calling one again asks first.
    interrupted: Vec<ToolCall>,
}

/// What the model reads for a call that was running when the process
/// stopped.
const INTERRUPTED: &str = "Interrupted: the program stopped while this call ran, so it may or \
may not have taken effect. It was not run again; check its effects before calling it again.";

/// Where a turn's model calls begin, or its reply when it needs none.
enum Begun {
    /// The history so far, the round the calls count from, the budget.
    Rounds {
        history: Vec<Message>,
        round: u32,
        spent: Spent,
    },
    /// A recovered turn whose answer was stored before the crash.
    Reply(Reply),
}

/// Where the turn goes after a model call.
enum Next {
    /// The turn ends with this reply.
    Reply(Reply),
    /// The model is asked again in the same round.
    Ask,
    /// The round's calls ran: the next round asks the model.
    Round,
}

/// How one model call ended.
enum CallEnd {
    Complete(Assembled),
    Cancelled(Assembler),
    Failed(Assembler, ProviderError),
}

impl<S: EventSink> Turn<'_, S> {
    /// The system prompt this turn sends.
    fn system_prompt(&self) -> Option<&str> {
        self.system
            .as_deref()
            .or(self.inner.system_prompt.as_deref())
    }

    /// Begins the turn where `start` puts it: a new turn, a resumed one or
    /// a recovered one. The model calls come after, in one place
    /// ([`rounds`](Self::rounds)): each `rounds` awaited is a copy of the
    /// whole loop in the binary, and its future sizes the turn's.
    async fn start(&mut self, start: Start<'_>) -> Result<Begun> {
        match start {
            Start::Message(message) => self.begin(message).await,
            Start::Resume(decisions) => self.resume(decisions).await,
            Start::Recover => self.recover().await,
        }
    }

    /// Starts a turn with the user's message.
    async fn begin(&mut self, user: Message) -> Result<Begun> {
        if let Some(pending) = self.inner.history.pending(&self.conversation).await? {
            return Err(PendingError::Waiting {
                calls: pending
                    .waiting
                    .iter()
                    .map(|w| named(&w.call.name, &w.call.id))
                    .collect(),
            }
            .into());
        }
        // The budget counts from here: waiting for the conversation's
        // earlier turn is not this turn's work.
        let spent = Spent::new();
        let mut history = since_summary(self.inner.history.load(&self.conversation).await?);
        self.store(std::slice::from_ref(&user)).await?;
        history.push(user);
        super::images::prepare(self.inner, &mut history).await;
        Ok(Begun::Rounds {
            history,
            round: 0,
            spent,
        })
    }

    /// Continues the turn that waited for decisions: runs (or refuses) its
    /// waiting calls as decided, stores the round whole, and goes on.
    async fn resume(&mut self, decisions: &[(String, Decision)]) -> Result<Begun> {
        let pending = self
            .inner
            .history
            .pending(&self.conversation)
            .await?
            .ok_or(PendingError::NothingPending)?;
        let answers = match_decisions(&pending, decisions)?;
        // A new budget: the time spent waiting for a human is nobody's work.
        let spent = Spent::new();
        let mut history = since_summary(self.inner.history.load(&self.conversation).await?);
        super::images::prepare(self.inner, &mut history).await;
        let calls: Vec<ToolCall> = pending.waiting.iter().map(|w| w.call.clone()).collect();
        let scope = self.scope(&spent);
        let round = exec::Round {
            calls: &calls,
            recent: &last_calls(&history),
            bad_arguments: &self.bad_arguments,
            answers: &answers,
            scope: &scope,
            interrupted: &[],
        };
        let decided = exec::run_calls(
            self.inner,
            &self.conversation,
            self.user,
            round,
            self.sink,
            self.cancel,
        )
        .await;
        let (mut results, records): (Vec<ToolResult>, Vec<ToolCallRecord>) =
            decided.into_iter().unzip();
        self.usage += scope.take_spent();
        results.extend(pending.results.iter().cloned());
        // In the order the model made the calls, as the first round would
        // have; a result for no call of the message (none is expected) first.
        let mut ordered = Vec::with_capacity(results.len());
        for call in pending.message.tool_calls() {
            while let Some(at) = results.iter().position(|r| r.call_id == call.id) {
                ordered.push(results.remove(at));
            }
        }
        results.append(&mut ordered);
        let step = [pending.message, Message::tool_results(results)];
        self.inner
            .history
            .settle_pending(&self.conversation, &step)
            .await?;
        self.records.extend(records);
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        history.extend(step);
        Ok(Begun::Rounds {
            history,
            round: pending.round,
            spent,
        })
    }

    /// Goes on with the journaled turn a crash interrupted, from what the
    /// history holds: an answer stored is the reply; calls that were
    /// running are answered as interrupted; then the model is called again.
    async fn recover(&mut self) -> Result<Begun> {
        let id = self.journal.ok_or(Error::Recovery(
            "a turn to recover needs its journaled message's id".into(),
        ))?;
        let intake = self
            .inner
            .history
            .intake(id)
            .await?
            .ok_or_else(|| Error::Recovery(format!("no message `{id}` in the journal")))?;
        if intake.stage == crate::history::Stage::Answered
            && let Some(answer) = intake.answer
        {
            // Stored before the crash, perhaps never shown.
            return Ok(Begun::Reply(self.reply(Assembled {
                message: Message::assistant(answer),
                usage: None,
                finish: None,
            })));
        }
        let spent = Spent::new();
        let mut history = since_summary(self.inner.history.load(&self.conversation).await?);
        if let Some(calling) = intake.calling {
            self.interrupted = calling.tool_calls().cloned().collect();
            let results = self
                .interrupted
                .iter()
                .map(|call| ToolResult::error(&call.id, INTERRUPTED));
            let step = [calling, Message::tool_results(results)];
            self.store(&step).await?;
            history.extend(step);
        }
        super::images::prepare(self.inner, &mut history).await;
        Ok(Begun::Rounds {
            history,
            round: 0,
            spent,
        })
    }

    /// Model calls and tool rounds from round `round` on, until an answer.
    async fn rounds(
        &mut self,
        mut history: Vec<Message>,
        mut round: u32,
        mut spent: Spent,
    ) -> Result<Reply> {
        loop {
            // Read each round: a tool switched off mid-turn is not offered again.
            let mut tools = self.inner.tools.specs();
            // Past the cap or the budget the tools are withdrawn for a last
            // answer (still described: some providers refuse tool calls in a
            // conversation without them).
            let limit = if round >= self.inner.max_tool_rounds {
                Some(Limit::Rounds(self.inner.max_tool_rounds))
            } else {
                self.budget_reached(&spent)
            };
            let (choice, format) = match &mut self.typed {
                Some(typed) => {
                    let (choice, format) = typed.plan(&mut tools, limit.is_some());
                    (choice, format.cloned())
                }
                None if limit.is_some() => (ToolChoice::None, None),
                None => (ToolChoice::Auto, None),
            };
            self.compact(&mut history, &tools).await?;
            let assembled = match self
                .call_model(&history, &tools, choice, format.as_ref())
                .await
            {
                CallEnd::Complete(assembled) => assembled,
                CallEnd::Cancelled(partial) => {
                    self.store_partial(partial).await?;
                    return Err(Error::Cancelled);
                }
                CallEnd::Failed(partial, error) => {
                    self.store_partial(partial).await?;
                    return Err(Error::Provider(error));
                }
            };
            match self
                .answered(assembled, &mut history, round, &mut spent, limit)
                .await?
            {
                Next::Reply(reply) => return Ok(reply),
                Next::Ask => {}
                Next::Round => round += 1,
            }
        }
    }

    /// What follows round `round`'s model answer: it is judged and
    /// stored, or its calls run and their results are stored.
    ///
    /// Its own future, apart from the loop's in [`rounds`](Self::rounds):
    /// what lives across its awaits would otherwise hold space in the
    /// loop's future while the model streams (half a kilobyte a
    /// conversation). An `async` block, as in `Agent::handle`, so that
    /// `assembled` is not kept twice.
    #[expect(
        clippy::manual_async_fn,
        reason = "an `async fn` keeps its arguments twice"
    )]
    fn answered(
        &mut self,
        assembled: Assembled,
        history: &mut Vec<Message>,
        round: u32,
        spent: &mut Spent,
        limit: Option<Limit>,
    ) -> impl Future<Output = Result<Next>> {
        async move {
            if let Some(typed) = &mut self.typed {
                match typed.judge(&assembled.message, assembled.finish.as_ref()) {
                    Verdict::Continue => {}
                    Verdict::AskNow => return Ok(Next::Ask),
                    Verdict::Answer { value, text, store } => {
                        self.store_answer(&store).await?;
                        let mut reply = self.reply(assembled);
                        reply.text = text;
                        reply.output = Some(value);
                        return Ok(Next::Reply(reply));
                    }
                    Verdict::Retry(store) => {
                        self.store(&store).await?;
                        history.extend(store);
                        return Ok(Next::Ask);
                    }
                    Verdict::Fail(error, store) => {
                        self.store(&store).await?;
                        return Err(error.into());
                    }
                }
            }
            let calls: Vec<ToolCall> = assembled.message.tool_calls().cloned().collect();
            if calls.is_empty() {
                self.store_answer(std::slice::from_ref(&assembled.message))
                    .await?;
                if self.steer_after_answer(&assembled.message, history).await? {
                    return Ok(Next::Ask);
                }
                return Ok(Next::Reply(self.reply(assembled)));
            }
            let results = if let Some(limit) = limit {
                // Tools were withdrawn and the model called one anyway (rare:
                // boxed, so its future does not size every turn's).
                Box::pin(self.refuse_all(&calls, limit)).await
            } else {
                if self.journal.is_some() {
                    // Before they run: after a crash, they may have.
                    self.mark(&crate::history::Mark::Calling(assembled.message.clone()))
                        .await?;
                }
                let scope = self.scope(spent);
                let scope = &scope;
                scope.note_spent(self.usage.output_tokens, spent.tool_output_bytes);
                let round = exec::Round {
                    calls: &calls,
                    recent: &last_calls(history),
                    bad_arguments: &self.bad_arguments,
                    answers: &HashMap::new(),
                    scope,
                    interrupted: &self.interrupted,
                };
                let results = exec::run_calls(
                    self.inner,
                    &self.conversation,
                    self.user,
                    round,
                    self.sink,
                    self.cancel,
                )
                .await;
                // The tokens the round's sub-agents spent are the turn's.
                self.usage += scope.take_spent();
                results
            };
            let (mut results, mut records): (Vec<ToolResult>, Vec<ToolCallRecord>) =
                results.into_iter().unzip();
            if records.iter().any(|r| r.outcome == ToolOutcome::Deferred) {
                match self
                    .keep_pending(&assembled.message, &results, &records, round + 1)
                    .await
                {
                    Ok(pending) => {
                        self.records.extend(records);
                        return Ok(Next::Reply(self.pending_reply(assembled, pending)));
                    }
                    Err(error) => {
                        tracing::warn!(error = %error.chain(), "the history store can't keep calls waiting for a decision; they are declined");
                        decline_deferred(&mut results, &mut records);
                    }
                }
            }
            spent.tool_output_bytes += results.iter().map(|r| r.content.len()).sum::<usize>();
            let step = [assembled.message.clone(), Message::tool_results(results)];
            if limit.is_some() {
                // The turn ends with this step.
                self.store_answer(&step).await?;
            } else {
                self.store(&step).await?;
            }
            for record in &records {
                if record.outcome == ToolOutcome::InvalidArguments {
                    *self
                        .bad_arguments
                        .entry(record.call.name.clone())
                        .or_default() += 1;
                }
            }
            self.records.extend(records);
            if self.cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            if let Some(limit) = limit {
                if self.typed.is_some() {
                    // Asked for its answer, the model called tools instead.
                    return Err(crate::error::OutputError::NoAnswer(format!(
                        "the model called tools instead of answering, past the limit ({limit})"
                    ))
                    .into());
                }
                let mut reply = self.reply(assembled);
                if reply.text.is_empty() {
                    reply.text = match limit {
                        Limit::Rounds(rounds) => format!(
                            "I stopped after {rounds} rounds of tool calls without reaching an answer."
                        ),
                        limit => format!("I stopped without reaching an answer: {limit}."),
                    };
                }
                return Ok(Next::Reply(reply));
            }
            history.extend(step);
            self.steer_in(history).await?;
            Ok(Next::Round)
        }
    }

    /// Enters what the user said since the last step, as one steering
    /// message after the step's tool results: the model reads it before its
    /// next step.
    async fn steer_in(&self, history: &mut Vec<Message>) -> Result<()> {
        if let Some(steering) = self.running.take() {
            self.enter(steering, history).await?;
        }
        Ok(())
    }

    /// After an answer (already stored): when the user said something
    /// meanwhile, it follows the answer and the model answers again (true);
    /// else the inbox closes and the turn can end.
    async fn steer_after_answer(
        &self,
        answer: &Message,
        history: &mut Vec<Message>,
    ) -> Result<bool> {
        let Some(steering) = self.running.take_or_close() else {
            return Ok(false);
        };
        history.push(answer.clone());
        self.enter(steering, history).await?;
        Ok(true)
    }

    async fn enter(&self, steering: Message, history: &mut Vec<Message>) -> Result<()> {
        self.store(std::slice::from_ref(&steering)).await?;
        self.sink.emit(AgentEvent::Steered(steering.text())).await;
        history.push(steering);
        Ok(())
    }

    /// Shortens old tool outputs, then summarises what came before the
    /// current turn, when the prompt nears the context window (if the agent's
    /// context policy asks for it). The summary and a verbatim copy of the
    /// current turn are stored; the originals stay in the store.
    async fn compact(&mut self, history: &mut Vec<Message>, tools: &[ToolSpec]) -> Result<()> {
        let Some(policy) = &self.inner.context else {
            return Ok(());
        };
        let Some(compaction) = &policy.compaction else {
            return Ok(());
        };
        let fixed = self.system_prompt().map_or(0, |s| s.len() / 3)
            + tools
                .iter()
                .map(|t| (t.description.len() + t.parameters.to_string().len()) / 3)
                .sum::<usize>();
        let estimate = |messages: &[Message]| {
            fixed
                + messages
                    .iter()
                    .map(|m| policy.estimator.estimate(m))
                    .sum::<usize>()
        };
        if estimate(history) <= compaction.limit() {
            return Ok(());
        }
        // The current turn starts at the last user message that is not a summary.
        let Some(current) = history.iter().rposition(Message::starts_turn) else {
            return Ok(());
        };
        if shorten_tool_outputs(&mut history[..current], compaction.keep_tool_output)
            && estimate(history) <= compaction.limit()
        {
            tracing::debug!("old tool outputs shortened to fit the context window");
            return Ok(());
        }
        if current == 0 || (current == 1 && history[0].summary) {
            return Ok(());
        }
        match self
            .summarise(&history[..current], tools, &compaction.instructions)
            .await
        {
            Ok(summary) => {
                let mut compacted = vec![Message::summary(summary)];
                compacted.extend(history[current..].iter().cloned());
                self.store(&compacted).await?;
                tracing::info!(replaced = current, "conversation compacted into a summary");
                *history = compacted;
            }
            Err(error) => {
                tracing::warn!(error = %error.chain(), "could not summarise the conversation; sending it trimmed");
            }
        }
        Ok(())
    }

    /// Asks the model for a summary of `older`; `tools` are described (the
    /// conversation may hold calls of them), not offered.
    async fn summarise(
        &mut self,
        older: &[Message],
        tools: &[ToolSpec],
        instructions: &str,
    ) -> std::result::Result<String, ProviderError> {
        let mut messages = older.to_vec();
        messages.push(Message::user(
            "Summarise the conversation so far, as instructed.",
        ));
        let request = ChatRequest::new(&messages)
            .system(Some(instructions))
            .tools(tools)
            .tool_choice(&ToolChoice::None)
            .settings(&self.inner.settings)
            .cancel(self.cancel);
        let mut events = self.inner.provider.stream(request);
        let mut assembler = Assembler::new();
        while let Some(event) = events.next().await {
            assembler.push(&event?);
        }
        let assembled = assembler.finish();
        if let Some(usage) = assembled.usage {
            self.usage += usage;
        }
        Ok(assembled.message.text())
    }

    /// One model call, forwarding deltas as they arrive.
    async fn call_model(
        &mut self,
        history: &[Message],
        tools: &[ToolSpec],
        choice: ToolChoice,
        format: Option<&OutputFormat>,
    ) -> CallEnd {
        let provider = &self.inner.provider;
        // Named and typed as the GenAI conventions want once exported
        // (`otel.*` is read by OpenTelemetry bridges; formatted only then).
        let span = tracing::info_span!(
            "chat",
            "otel.name" = %format_args!("chat {}", provider.model_name()),
            "otel.kind" = "client",
            "otel.status_code" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "gen_ai.operation.name" = "chat",
            "gen_ai.provider.name" = provider.name(),
            "gen_ai.request.model" = provider.model_name(),
            "gen_ai.usage.input_tokens" = tracing::field::Empty,
            "gen_ai.usage.output_tokens" = tracing::field::Empty,
            "gen_ai.response.finish_reasons" = tracing::field::Empty,
        );
        self.sink.emit(AgentEvent::Status(Status::Thinking)).await;
        let start = self
            .inner
            .context
            .as_ref()
            .map_or(0, |policy| policy.start(history));
        let typed = self.typed.as_deref();
        let system = self.prompt.as_deref().or_else(|| {
            typed
                .and_then(Typed::system)
                .or(self.system.as_deref())
                .or(self.inner.system_prompt.as_deref())
        });
        let request = ChatRequest::new(&history[start..])
            .system(system)
            .tools(tools)
            .tool_choice(&choice)
            .output(format)
            .settings(&self.inner.settings)
            .cancel(self.cancel);
        let mut events = provider.stream(request);
        let mut assembler = Assembler::new();
        // What streams is made into events only for a listener: the typed
        // answer's partial reads (a parse of all of it so far) too.
        let listens = self.sink.listens();
        // Boxed: rare (typed answers streamed to a listener), and it stays
        // in the turn's future while the answer streams.
        let mut partial = listens.then(|| Partial::new(typed).map(Box::new)).flatten();
        // One future with the turn's, not an instrumented one of its own:
        // every token's wake-up goes through each future it is awaited in.
        // The span is entered where the provider's stream is polled.
        let end = 'stream: {
            // Events come first; cancellation is looked at only while the
            // stream waits, when a cancel must wake this task, through an
            // [`Alarm`](super::alarm::Alarm): one load a look. (Polling the
            // cancellation, or building it, for every event cost more than
            // parsing the event.) A stream that never waits is checked
            // every 32 events.
            let cancelled = self.cancel.cancelled();
            tokio::pin!(cancelled);
            let mut alarm = super::alarm::Alarm::default();
            let mut seen: u32 = 0;
            loop {
                seen = seen.wrapping_add(1);
                if seen.is_multiple_of(32) && self.cancel.is_cancelled() {
                    break 'stream CallEnd::Cancelled(assembler);
                }
                // The wait's outcome is read in a block of its own, and a
                // listener's events are emitted by one future: a local kept
                // across two awaits, or borrowed across one, is kept in the
                // future while the stream waits too (400 bytes of every
                // turn's future, before).
                let event = {
                    let next = std::future::poll_fn(|cx| {
                        let polled = span.in_scope(|| events.poll_next_unpin(cx));
                        if let Poll::Ready(next) = polled {
                            return Poll::Ready(Some(next));
                        }
                        if alarm.rung(cancelled.as_mut(), cx) {
                            return Poll::Ready(None);
                        }
                        Poll::Pending
                    })
                    .await;
                    let Some(next) = next else {
                        break 'stream CallEnd::Cancelled(assembler);
                    };
                    match next {
                        Some(Ok(event)) => event,
                        Some(Err(error)) => break 'stream CallEnd::Failed(assembler, error),
                        None => break,
                    }
                };
                assembler.push(&event);
                if listens {
                    let shown = partial.as_mut().and_then(|p| p.push(&event));
                    emit_streamed(self.sink, forward(event), shown).await;
                }
            }
            let assembled = assembler.finish();
            if let Some(usage) = assembled.usage {
                self.sink.emit(AgentEvent::Usage(usage)).await;
            }
            CallEnd::Complete(assembled)
        };
        if let CallEnd::Failed(_, error) = &end {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", tracing::field::display(error.error_type()));
        }
        if let CallEnd::Complete(assembled) = &end {
            let usage = assembled.usage.unwrap_or_default();
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            if let Some(finish) = &assembled.finish {
                span.record(
                    "gen_ai.response.finish_reasons",
                    tracing::field::display(finish),
                );
            }
            // Counted here; its event went out as the stream ended (an
            // await here kept `end` in the future beside the stream's state).
            if let Some(usage) = assembled.usage {
                self.usage += usage;
            }
        }
        end
    }

    /// Keeps what streamed before a cancel or failure, marked interrupted.
    /// Tool calls are dropped: they never ran, and a call without a result
    /// would make the next request invalid.
    async fn store_partial(&self, partial: Assembler) -> Result<()> {
        let mut message = partial.finish().message;
        message.parts.retain(|p| !matches!(p, Part::ToolCall(_)));
        if message.parts.is_empty() {
            return Ok(());
        }
        self.store(&[message.with_interrupted(true)]).await
    }

    /// Calls made after tools were withdrawn: not run, but reported like
    /// any other refused call, so a stream shows every call the model made.
    async fn refuse_all(
        &self,
        calls: &[ToolCall],
        limit: Limit,
    ) -> Vec<(ToolResult, ToolCallRecord)> {
        let mut refused = Vec::with_capacity(calls.len());
        for call in calls {
            self.sink
                .emit_with(|| AgentEvent::ToolCallStarted(call.clone()))
                .await;
            let (result, record) = exec::not_run(
                call,
                ToolOutcome::Rejected,
                format!("Not run: {limit}. Answer with what you have."),
            );
            self.sink
                .emit_with(|| AgentEvent::ToolCallFinished(record.clone()))
                .await;
            refused.push((result, record));
        }
        refused
    }

    /// Keeps the round whose calls wait for decisions with the
    /// conversation: the model's message, the results of the calls that
    /// were decided, and the waiting calls with their questions.
    async fn keep_pending(
        &self,
        message: &Message,
        results: &[ToolResult],
        records: &[ToolCallRecord],
        round: u32,
    ) -> std::result::Result<PendingTurn, crate::history::HistoryError> {
        let waiting: Vec<PendingCall> = records
            .iter()
            .filter(|r| r.outcome == ToolOutcome::Deferred)
            .map(|r| {
                let reason = r.verdict.as_ref().map_or("", |v| v.reason.as_str());
                PendingCall::new(r.call.clone(), r.content.clone(), reason)
            })
            .collect();
        let done = records
            .iter()
            .zip(results)
            .filter(|(r, _)| r.outcome != ToolOutcome::Deferred)
            .map(|(_, result)| result.clone())
            .collect();
        let pending = PendingTurn::new(
            message.clone(),
            done,
            waiting,
            round,
            self.user.map(str::to_owned),
        );
        self.inner
            .history
            .set_pending(&self.conversation, Some(&pending))
            .await?;
        Ok(pending)
    }

    /// The reply of a turn that waits: the calls, as questions to answer
    /// with [`Agent::resume`](super::Agent::resume).
    fn pending_reply(&mut self, assembled: Assembled, pending: PendingTurn) -> Reply {
        let questions: Vec<ConfirmRequest> = pending
            .waiting
            .into_iter()
            .map(|waiting| {
                let always =
                    self.inner.tools.get(&waiting.call.name).and_then(|tool| {
                        exec::always_offer(tool.as_ref(), &waiting.call.arguments)
                    });
                let mut question = ConfirmRequest::new(
                    self.conversation.as_ref(),
                    &waiting.call.name,
                    waiting.prompt,
                )
                .for_call(waiting.call.id, waiting.call.arguments)
                .because(waiting.reason)
                .offering(always);
                question.user = self.user.map(str::to_owned);
                question
            })
            .collect();
        let mut text = String::from("Waiting for a decision before running:");
        for question in &questions {
            text.push_str(&format!("\n- {} (`{}`)", question.prompt, question.tool));
        }
        let mut reply = self.reply(assembled);
        reply.text = text;
        reply.pending = questions;
        reply
    }

    /// The first budget limit the turn has reached, its own or (a
    /// sub-agent's turn) what its caller had left.
    fn budget_reached(&self, spent: &Spent) -> Option<Limit> {
        let tokens = self.usage.output_tokens;
        let own = self.inner.budget.reached(spent, tokens);
        own.or_else(|| self.within?.inherited.reached(spent, tokens))
    }

    /// What the turn hands down to the sub-agents its calls run, made at
    /// its first tool round.
    // Out of line: inlined into the turn's state machine, it tipped the
    // compiler into no longer inlining the model call's stream polling,
    // which cost every streamed chunk (../shared/perf instr.sh, s1).
    #[inline(never)]
    fn scope(&mut self, spent: &Spent) -> Arc<TurnScope> {
        let scope = self.scope.get_or_insert_with(|| {
            TurnScope::new(
                self.inner,
                &self.conversation,
                self.user,
                self.within,
                self.sink.forwarder(),
                spent.started,
            )
        });
        Arc::clone(scope)
    }

    /// Stores `messages`; a journaled turn's entry is marked started, in the
    /// same transaction.
    async fn store(&self, messages: &[Message]) -> Result<()> {
        self.store_marked(messages, false).await
    }

    /// Stores the messages that end the turn with its answer; a journaled
    /// turn's entry is marked answered, in the same transaction.
    async fn store_answer(&self, messages: &[Message]) -> Result<()> {
        self.store_marked(messages, true).await
    }

    async fn store_marked(&self, messages: &[Message], answered: bool) -> Result<()> {
        let history = &self.inner.history;
        let Some(id) = self.journal else {
            return Ok(history.append(&self.conversation, messages).await?);
        };
        let mark = if answered {
            let last = messages.last();
            crate::history::Mark::Answered {
                text: last.map(|m| shown(m).0).unwrap_or_default(),
            }
        } else {
            crate::history::Mark::Started {
                conversation: self.conversation.to_string(),
            }
        };
        Ok(history
            .append_marked(&self.conversation, messages, id, &mark)
            .await?)
    }

    /// Marks the journaled turn's entry.
    async fn mark(&self, mark: &crate::history::Mark) -> Result<()> {
        if let Some(id) = self.journal {
            self.inner.history.mark(id, mark).await?;
        }
        Ok(())
    }

    fn reply(&mut self, assembled: Assembled) -> Reply {
        let message = &assembled.message;
        let (text, is_refusal) = shown(message);
        Reply {
            is_refusal,
            text,
            reasoning: message.reasoning(),
            usage: self.usage,
            tool_calls: std::mem::take(&mut self.records),
            finish_reason: assembled.finish,
            output: None,
            pending: Vec::new(),
            steered: false,
        }
    }
}

/// What an answer shows: its text, or its refusal when it has no text
/// (and whether it is one).
fn shown(answer: &Message) -> (String, bool) {
    let text = answer.text();
    match answer.refusal().filter(|_| text.is_empty()) {
        Some(refusal) => (refusal, true),
        None => (text, false),
    }
}

/// A call as errors name it: `` `tool` (id) ``.
pub(super) fn named(tool: &str, id: &str) -> String {
    format!("`{tool}` ({id})")
}

/// The decisions for a pending turn's waiting calls, by call id: one for
/// each, none for another call, and none of them "later" again.
fn match_decisions(
    pending: &PendingTurn,
    decisions: &[(String, Decision)],
) -> std::result::Result<HashMap<String, Decision>, PendingError> {
    let waiting: Vec<String> = pending
        .waiting
        .iter()
        .map(|w| named(&w.call.name, &w.call.id))
        .collect();
    let mut answers = HashMap::new();
    for (id, decision) in decisions {
        if !pending.waiting.iter().any(|w| w.call.id == *id) {
            return Err(PendingError::UnknownCall {
                id: id.clone(),
                waiting,
            });
        }
        answers.insert(id.clone(), decision.clone());
    }
    for waiting in &pending.waiting {
        match answers.get(&waiting.call.id) {
            None | Some(Decision::Defer) => {
                return Err(PendingError::Undecided {
                    call: named(&waiting.call.name, &waiting.call.id),
                });
            }
            Some(_) => {}
        }
    }
    Ok(answers)
}

/// Deferred calls the store couldn't keep are declined: nothing runs
/// without a decision, and the model reads why.
fn decline_deferred(results: &mut [ToolResult], records: &mut [ToolCallRecord]) {
    const WHY: &str = "Not run: the user's decision was deferred, and this agent's history store can't keep a call waiting.";
    for (result, record) in results.iter_mut().zip(records) {
        if record.outcome == ToolOutcome::Deferred {
            record.outcome = ToolOutcome::Declined;
            WHY.clone_into(&mut record.content);
            *result = ToolResult::error(&record.call.id, WHY);
        }
    }
}

/// The conversation's last two tool calls, oldest first: the agent asks
/// before the same call runs a third time in a row.
fn last_calls(history: &[Message]) -> Vec<ToolCall> {
    let mut calls: Vec<ToolCall> = history
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls().rev())
        .take(2)
        .cloned()
        .collect();
    calls.reverse();
    calls
}

/// The agent event a provider event becomes, if any.
fn forward(event: StreamEvent) -> Option<AgentEvent> {
    Some(match event {
        StreamEvent::TextDelta(t) => AgentEvent::TextDelta(t),
        StreamEvent::ReasoningDelta(t) => AgentEvent::ReasoningDelta(t),
        StreamEvent::RefusalDelta(t) => AgentEvent::RefusalDelta(t),
        StreamEvent::ToolCallDelta(d) => AgentEvent::ToolCallDelta(d),
        // Usage is reported once per call, after it; the finish reason is on the reply.
        _ => return None,
    })
}

/// Emits what a streamed event became for the listener, then the typed
/// answer's new partial read. (An `async` block: an `async fn` keeps its
/// arguments twice.)
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments twice"
)]
fn emit_streamed(
    sink: &impl EventSink,
    forwarded: Option<AgentEvent>,
    shown: Option<serde_json::Value>,
) -> impl Future<Output = ()> + Send {
    async move {
        if let Some(event) = forwarded {
            sink.emit(event).await;
        }
        if let Some(value) = shown {
            sink.emit(AgentEvent::PartialOutput(value)).await;
        }
    }
}

/// A typed answer as it streams: its text so far, and the last value shown.
struct Partial<'t, 'o> {
    typed: &'t Typed<'o>,
    watch: Watch<'t>,
    /// The output tool call's index, once its name came.
    index: Option<usize>,
    text: String,
    /// How long `text` was when last read.
    read_at: usize,
    shown: Option<serde_json::Value>,
}

impl<'t, 'o> Partial<'t, 'o> {
    fn new(typed: Option<&'t Typed<'o>>) -> Option<Self> {
        let typed = typed?;
        let watch = typed.watch();
        if matches!(watch, Watch::Nothing) {
            return None;
        }
        Some(Self {
            typed,
            watch,
            index: None,
            text: String::new(),
            read_at: 0,
            shown: None,
        })
    }

    /// The value to show after `event`, when it changed what can be read.
    fn push(&mut self, event: &StreamEvent) -> Option<serde_json::Value> {
        match (event, self.watch) {
            (StreamEvent::TextDelta(delta), Watch::Text) => self.text.push_str(delta),
            (StreamEvent::ToolCallDelta(delta), Watch::Tool(name)) => {
                if delta.name.as_deref() == Some(name) {
                    self.index = Some(delta.index);
                }
                if self.index != Some(delta.index) {
                    return None;
                }
                self.text.push_str(&delta.arguments);
            }
            _ => return None,
        }
        // Each read parses the whole answer so far: reading again only
        // once it grew by an eighth (and at least 16 bytes) keeps a long
        // answer's reads linear in its length.
        let grown = self.text.len() - self.read_at;
        if grown < (self.read_at / 8).max(16) {
            return None;
        }
        self.read_at = self.text.len();
        let value = self.typed.partial(&self.text)?;
        if self.shown.as_ref() == Some(&value) {
            return None;
        }
        self.shown = Some(value.clone());
        Some(value)
    }
}
