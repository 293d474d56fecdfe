//! Deciding on and running the tool calls of one round.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, stream};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::event::{AgentEvent, Status, ToolCallRecord, ToolOutcome};
use super::sub::TurnScope;
use super::{EventSink, Inner};
use crate::confirm::{ConfirmRequest, Decision};
use crate::message::{ToolCall, ToolResult};
use crate::policy::{Approval, Layer, Permission, Scope, Verdict};
use crate::tool::{Tool, ToolContext, ToolOutput};

/// What the model reads when the user declines a call.
pub(crate) const CANCELLED_BY_USER: &str = "Cancelled by user.";

/// Runs a round's calls and returns each call's result and record, in call
/// order. A call with an entry in `answers` (a resumed turn's decisions)
/// takes it instead of asking. Calls run concurrently (at most `max_concurrent_tools` at once)
/// unless one needs confirmation, in which case they run one at a time so
/// each prompt can be answered on its own. Exclusive tools run alone.
pub(crate) async fn run_calls(
    inner: &Inner,
    conversation: &Arc<str>,
    user: Option<&str>,
    round: Round<'_>,
    sink: &impl EventSink,
    cancel: &CancellationToken,
) -> Vec<(ToolResult, ToolCallRecord)> {
    let Round {
        calls,
        recent,
        bad_arguments,
        answers,
        scope,
        interrupted,
    } = round;
    let approvals = match inner.history.approvals(conversation).await {
        Ok(approvals) => approvals,
        Err(error) => {
            // Asking again is the safe side of a store that can't answer.
            tracing::warn!(error = %error.chain(), "could not read the conversation's approvals; calls they cover are asked about again");
            Vec::new()
        }
    };
    // The calls of one round run side by side: only earlier rounds count
    // as "in a row".
    let repeats = |call: &ToolCall| {
        recent.len() >= 2
            && recent[recent.len() - 2..]
                .iter()
                .all(|p| p.name == call.name && p.arguments == call.arguments)
    };
    let decided: Vec<Decided> = calls
        .iter()
        .map(|call| {
            let repeated = repeats(call);
            let again = interrupted
                .iter()
                .any(|i| i.name == call.name && i.arguments == call.arguments);
            // A tool's own checks (availability, arguments, the question
            // to ask) are its code too: a panic there fails the call only.
            std::panic::catch_unwind(AssertUnwindSafe(|| {
                decide(inner, scope, call, bad_arguments, &approvals, Again { repeated, interrupted: again })
            }))
            .unwrap_or_else(|panic| {
                tracing::error!(tool = %call.name, panic = panic_message(&*panic), "the tool panicked while its call was checked");
                Decided::Reject(ToolOutcome::Panicked, crashed(&*panic), None)
            })
        })
        .collect();
    let one_at_a_time = decided
        .iter()
        .any(|d| matches!(d, Decided::Run { ask: Some(_), .. }));
    let limit = if one_at_a_time {
        1
    } else {
        inner.max_concurrent_tools
    };
    // The futures are built up front: a `map` closure inside the stream type
    // trips the compiler's `Send` check for spawned turns. Boxed: a call's
    // future is large and the turn's should not hold its room, and one
    // `poll` serves both ways of running them below.
    let mut runs: Vec<BoxFuture<'_, (ToolResult, ToolCallRecord)>> = calls
        .iter()
        .zip(decided)
        .map(|(call, decided)| {
            let answer = answers.get(&call.id).cloned();
            run_one(
                inner,
                conversation,
                user,
                call,
                decided,
                answer,
                Context {
                    sink,
                    cancel,
                    scope,
                },
            )
            .boxed()
        })
        .collect();
    // The usual round, one call, is simply awaited: running calls side by
    // side takes a task set with its own wake-ups.
    if runs.len() == 1
        && let Some(run) = runs.pop()
    {
        return vec![run.await];
    }
    stream::iter(runs).buffered(limit).collect().await
}

/// One round's calls and what the turn knows about them.
pub(crate) struct Round<'a> {
    /// The calls, in the model's order.
    pub(crate) calls: &'a [ToolCall],
    /// The conversation's last two calls before this round, oldest first.
    pub(crate) recent: &'a [ToolCall],
    /// How often each tool got invalid arguments this turn.
    pub(crate) bad_arguments: &'a HashMap<String, u32>,
    /// Decisions given already (a resumed turn's), by call id.
    pub(crate) answers: &'a HashMap<String, Decision>,
    /// What the calls hand down to sub-agents they run.
    pub(crate) scope: &'a Arc<TurnScope>,
    /// Calls that were running when a crash interrupted the turn (a
    /// recovered turn's).
    pub(crate) interrupted: &'a [ToolCall],
}

/// Whether a call repeats one that may make running it again unwise.
#[derive(Clone, Copy)]
struct Again {
    /// The same call a third time in a row.
    repeated: bool,
    /// The same as a call a crash interrupted, which may have taken effect.
    interrupted: bool,
}

/// Where a call's events go, what cancels it, and the turn it belongs to.
struct Context<'a, S> {
    sink: &'a S,
    cancel: &'a CancellationToken,
    scope: &'a Arc<TurnScope>,
}

/// Whether and how a call may run, decided before anything runs.
enum Decided {
    Run {
        tool: Arc<dyn Tool>,
        verdict: Verdict,
        /// The question, when the verdict is to ask.
        ask: Option<String>,
    },
    Reject(ToolOutcome, String, Option<Verdict>),
}

fn decide(
    inner: &Inner,
    scope: &TurnScope,
    call: &ToolCall,
    bad_arguments: &HashMap<String, u32>,
    approvals: &[Approval],
    again: Again,
) -> Decided {
    let Some((tool, enabled)) = inner.tools.get_and_enabled(&call.name) else {
        let known: Vec<String> = inner.tools.specs().iter().map(|s| s.name.clone()).collect();
        return Decided::Reject(
            ToolOutcome::Rejected,
            format!(
                "Unknown tool `{}`. Available tools: {}.",
                call.name,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            None,
        );
    };
    if !enabled {
        return Decided::Reject(
            ToolOutcome::Rejected,
            format!("Tool `{}` is disabled.", call.name),
            None,
        );
    }
    if let Err(reason) = tool.availability() {
        return Decided::Reject(
            ToolOutcome::Rejected,
            format!("Tool `{}` is unavailable here: {reason}", call.name),
            None,
        );
    }
    let wrong = bad_arguments.get(&call.name).copied().unwrap_or(0);
    if wrong > tool.argument_retries() {
        return Decided::Reject(
            ToolOutcome::Rejected,
            format!(
                "Not run: `{}` was called with invalid arguments {wrong} times in this turn. \
                 Answer without it, or ask the user for what is missing.",
                call.name
            ),
            None,
        );
    }
    match &call.arguments {
        Value::Object(_) => {}
        arguments @ Value::String(_)
            if let Some(bytes) = crate::provider::assemble::dropped_arguments(arguments) =>
        {
            return Decided::Reject(
                ToolOutcome::InvalidArguments,
                format!(
                    "Not run: the arguments of `{}` were {bytes} bytes, more than the {} a call may carry, \
                     and were not read. Call it again with less: a path or a name rather than the content.",
                    call.name, "1 MiB"
                ),
                None,
            );
        }
        Value::String(raw) => {
            let why = serde_json::from_str::<Value>(raw)
                .err()
                .map_or_else(String::new, |e| format!(" ({e})"));
            return Decided::Reject(
                ToolOutcome::InvalidArguments,
                format!(
                    "The arguments are not valid JSON{why}. Call `{}` again with a JSON object matching its schema.",
                    call.name
                ),
                None,
            );
        }
        other => {
            return Decided::Reject(
                ToolOutcome::InvalidArguments,
                format!(
                    "The arguments must be a JSON object, not `{other}`. Call `{}` again with an object matching its schema.",
                    call.name
                ),
                None,
            );
        }
    }
    if let Err(error) = tool.check_arguments(&call.arguments) {
        return Decided::Reject(
            ToolOutcome::InvalidArguments,
            error.message().to_owned(),
            None,
        );
    }
    let mut verdict = inner
        .policy
        .evaluate(tool.as_ref(), &call.arguments, approvals);
    verdict = super::sub::strictest(scope, tool.as_ref(), &call.arguments, approvals, verdict);
    if verdict.permission == Permission::Allow {
        let effects = tool.effects();
        if again.interrupted && !effects.read_only && !effects.idempotent {
            verdict = Verdict::new(
                Permission::Ask,
                Layer::Guard,
                "the same call was running when the program stopped, and may have taken effect",
            );
        } else if again.repeated {
            verdict = Verdict::new(
                Permission::Ask,
                Layer::Guard,
                "the same call a third time in a row",
            );
        }
    }
    let ask =
        match verdict.permission {
            Permission::Deny => {
                let reason = format!(
                    "Not run: denied by the permission rules ({}).",
                    verdict.reason
                );
                return Decided::Reject(ToolOutcome::Denied, reason, Some(verdict));
            }
            Permission::Ask => Some(tool.confirmation(&call.arguments).unwrap_or_else(|| {
                crate::private::default_confirmation(&call.name, &call.arguments)
            })),
            Permission::Allow => None,
        };
    Decided::Run { tool, verdict, ask }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site, each argument distinct"
)]
async fn run_one(
    inner: &Inner,
    conversation: &Arc<str>,
    user: Option<&str>,
    call: &ToolCall,
    decided: Decided,
    answer: Option<Decision>,
    context: Context<'_, impl EventSink>,
) -> (ToolResult, ToolCallRecord) {
    let Context {
        sink,
        cancel,
        scope,
    } = context;
    sink.emit_with(|| AgentEvent::ToolCallStarted(call.clone()))
        .await;
    let started = Instant::now();
    let span = tracing::info_span!(
        "execute_tool",
        "otel.name" = %format_args!("execute_tool {}", call.name),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = %call.name,
        "gen_ai.tool.call.id" = %call.id,
    );
    let mut audit = Audit::default();
    let (outcome, content) = async {
        let (tool, verdict, ask) = match decided {
            Decided::Reject(outcome, reason, verdict) => {
                audit.verdict = verdict;
                return (outcome, reason.into());
            }
            Decided::Run { tool, verdict, ask } => (tool, verdict, ask),
        };
        audit.verdict = Some(verdict.clone());
        if cancel.is_cancelled() {
            return interrupted();
        }
        let decision = match (answer, ask) {
            // Decided already, when the turn resumes: a "no" still stops a
            // call the rules would allow.
            (Some(answer), _) => Some(answer),
            (None, Some(prompt)) => {
                sink.emit(AgentEvent::Status(Status::AwaitingConfirmation {
                    tool: call.name.clone(),
                }))
                .await;
                let offer = always_offer(tool.as_ref(), &call.arguments);
                let asked = ask_handler(
                    inner,
                    scope,
                    conversation,
                    user,
                    call,
                    prompt.clone(),
                    &verdict,
                    offer,
                    cancel,
                )
                .await;
                match asked {
                    // The question is what the deferred call's record holds.
                    Ok(Decision::Defer) => return (ToolOutcome::Deferred, prompt.into()),
                    Ok(decision) => Some(decision),
                    Err(ended) => return ended,
                }
            }
            (None, None) => None,
        };
        let mut arguments = None;
        if let Some(decision) = decision {
            audit.approver = user.map(str::to_owned);
            audit.decision = Some(decision.clone());
            match apply(
                inner,
                scope,
                conversation,
                user,
                call,
                tool.as_ref(),
                decision,
            )
            .await
            {
                Ok(edited) => arguments = edited,
                Err(ended) => return ended,
            }
        }
        sink.emit_with(|| {
            AgentEvent::Status(Status::RunningTool {
                tool: call.name.clone(),
            })
        })
        .await;
        let arguments = arguments.unwrap_or_else(|| call.arguments.clone());
        execute(
            inner,
            scope,
            conversation,
            call,
            arguments,
            tool.as_ref(),
            cancel,
        )
        .await
    }
    .instrument(span)
    .await;
    audit.log(call, outcome);
    if outcome != ToolOutcome::Ok {
        tracing::debug!(tool = %call.name, ?outcome, content = %content.text, "tool call did not succeed");
    }
    let (result, mut record) = finished(call, outcome, content, started.elapsed());
    record.verdict = audit.verdict;
    record.decision = audit.decision;
    record.approver = audit.approver;
    sink.emit_with(|| AgentEvent::ToolCallFinished(record.clone()))
        .await;
    (result, record)
}

/// What decided a call, for its record and the audit trail.
#[derive(Default)]
struct Audit {
    verdict: Option<Verdict>,
    decision: Option<Decision>,
    approver: Option<String>,
}

impl Audit {
    /// One event per decided call, on its own target so an operator can
    /// keep the audit trail apart: `RUST_LOG=ferrobot::policy=info`.
    fn log(&self, call: &ToolCall, outcome: ToolOutcome) {
        let Some(verdict) = &self.verdict else {
            return;
        };
        tracing::info!(
            target: "ferrobot::policy",
            tool = %call.name,
            call_id = %call.id,
            permission = %verdict.permission,
            layer = %verdict.layer,
            rule = %verdict.reason,
            decision = self.decision.as_ref().map(Decision::label),
            approver = self.approver.as_deref(),
            edited = matches!(self.decision, Some(Decision::Edit(_))),
            %outcome,
            "tool call decided"
        );
    }
}

/// What "always allow" would cover for this call: every call of the tool,
/// except for tools that run other programs, which are approved one call
/// at a time.
pub(crate) fn always_offer(tool: &dyn Tool, arguments: &Value) -> Option<Scope> {
    tool.command_line(arguments)
        .is_none()
        .then_some(Scope::Tool)
}

/// Carries out the user's decision: `Ok(None)` runs the call as the model
/// wrote it, `Ok(Some(arguments))` with the user's arguments instead.
async fn apply(
    inner: &Inner,
    scope: &TurnScope,
    conversation: &Arc<str>,
    user: Option<&str>,
    call: &ToolCall,
    tool: &dyn Tool,
    decision: Decision,
) -> Result<Option<Value>, Ended> {
    match decision {
        Decision::Approve => Ok(None),
        Decision::Deny(None) => Err((ToolOutcome::Declined, CANCELLED_BY_USER.into())),
        Decision::Deny(Some(reason)) => Err((
            ToolOutcome::Declined,
            format!("Declined by the user: {reason}").into(),
        )),
        Decision::Edit(arguments) => recheck(inner, scope, call, tool, arguments).map(Some),
        Decision::Always(scope) => {
            if tool.command_line(&call.arguments).is_some() {
                tracing::warn!(tool = %call.name, "\"always\" is not given for a tool that runs other programs; this call runs once");
                return Ok(None);
            }
            let mut approval = Approval::new(&call.name, scope);
            approval.granted_by = user.map(str::to_owned);
            if let Err(error) = inner.history.add_approval(conversation, &approval).await {
                tracing::warn!(tool = %call.name, error = %error.chain(), "the \"always\" approval could not be stored; this call runs, later ones are asked about again");
            }
            Ok(None)
        }
        // Asked and answered "later" is handled by the caller; a resumed
        // turn refuses it before anything runs.
        Decision::Defer => Err((
            ToolOutcome::Deferred,
            "Waiting for the user's decision.".into(),
        )),
    }
}

/// Arguments the user edited go through the same checks as the model's,
/// and the rules again: editing never turns a denied call into one that
/// runs. An "ask" is answered: the user wrote these arguments.
fn recheck(
    inner: &Inner,
    scope: &TurnScope,
    call: &ToolCall,
    tool: &dyn Tool,
    arguments: Value,
) -> Result<Value, Ended> {
    if !arguments.is_object() {
        return Err((
            ToolOutcome::InvalidArguments,
            "Not run: the user's edited arguments are not a JSON object.".into(),
        ));
    }
    if let Err(error) = tool.check_arguments(&arguments) {
        return Err((
            ToolOutcome::InvalidArguments,
            format!(
                "Not run: the user's edited arguments don't fit: {}",
                error.message()
            )
            .into(),
        ));
    }
    // Approvals never make or lift a deny: only the rules and the floor
    // can refuse the edited call, so none are read here.
    let verdict = inner.policy.evaluate(tool, &arguments, &[]);
    let verdict = super::sub::strictest(scope, tool, &arguments, &[], verdict);
    if verdict.permission == Permission::Deny {
        tracing::info!(target: "ferrobot::policy", tool = %call.name, rule = %verdict.reason, "the user's edited arguments are denied");
        return Err((
            ToolOutcome::Denied,
            format!(
                "Not run: the user's edited arguments are denied by the permission rules ({}).",
                verdict.reason
            )
            .into(),
        ));
    }
    Ok(arguments)
}

/// Asks the confirmation handler; with none, the call is declined (fail closed).
#[allow(
    clippy::too_many_arguments,
    reason = "one call site, each argument distinct"
)]
async fn ask_handler(
    inner: &Inner,
    scope: &TurnScope,
    conversation: &Arc<str>,
    user: Option<&str>,
    call: &ToolCall,
    prompt: String,
    verdict: &Verdict,
    always: Option<Scope>,
    cancel: &CancellationToken,
) -> Result<Decision, Ended> {
    // A sub-agent without a handler of its own asks through the nearest
    // agent above that has one, naming that agent's conversation.
    let asker = super::sub::asker(
        inner.confirm.as_ref(),
        inner.confirm_timeout,
        conversation,
        scope,
    );
    let Some(super::sub::Asker {
        handler,
        conversation,
        timeout: confirm_timeout,
    }) = asker
    else {
        return Err((
            ToolOutcome::Declined,
            format!(
                "Not run: `{}` needs the user's confirmation, and this agent has no way to ask. \
                 (Developer: configure one with `Agent::builder().confirm(…)`.)",
                call.name
            )
            .into(),
        ));
    };
    let request = ConfirmRequest {
        conversation: conversation.to_string(),
        user: user.map(str::to_owned),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        prompt,
        arguments: call.arguments.clone(),
        reason: verdict.reason.clone(),
        always,
    };
    // The handler is the application's code: if it panics, nobody said yes.
    let asked = AssertUnwindSafe(async { handler.confirm(request).await }).catch_unwind();
    // Nobody answering in time is a "no" too.
    let waited = async {
        match confirm_timeout {
            Some(limit) => tokio::time::timeout(limit, asked).await.map_err(|_| limit),
            None => Ok(asked.await),
        }
    };
    tokio::select! {
        decision = waited => match decision {
            Ok(Ok(decision)) => Ok(decision),
            Ok(Err(panic)) => {
                tracing::error!(tool = %call.name, panic = panic_message(&*panic), "the confirmation handler panicked; the call is declined");
                Err((
                    ToolOutcome::Declined,
                    "Not run: asking the user for confirmation failed.".into(),
                ))
            }
            Err(limit) => Err((
                ToolOutcome::Declined,
                format!(
                    "Not run: the user did not answer the confirmation within {}.",
                    human(limit)
                )
                .into(),
            )),
        },
        () = cancel.cancelled() => Err(interrupted()),
    }
}

/// Runs an approved call under its time-out, catching panics.
async fn execute(
    inner: &Inner,
    scope: &Arc<TurnScope>,
    conversation: &Arc<str>,
    call: &ToolCall,
    arguments: Value,
    tool: &dyn Tool,
    cancel: &CancellationToken,
) -> Ended {
    // Waiting for an exclusive tool elsewhere ends with the turn.
    let turn_of_tools = async {
        if tool.is_exclusive() {
            Lock::Exclusive(inner.exclusive.write().await)
        } else {
            Lock::Shared(inner.exclusive.read().await)
        }
    };
    let _turn_of_tools = tokio::select! {
        // The lock first: when it is free, the cancellation isn't even
        // polled (a waiter on the turn's token costs more than the lock)…
        biased;
        lock = turn_of_tools => lock,
        () = cancel.cancelled() => return interrupted(),
    };
    // …so a turn cancelled meanwhile is caught here, before the tool starts.
    if cancel.is_cancelled() {
        return interrupted();
    }
    let call_cancel = cancel.child_token();
    let ctx = ToolContext::new(
        Arc::clone(conversation),
        call.id.clone(),
        call_cancel.clone(),
        inner.state.clone(),
        inner.notifier.clone(),
    )
    .with_caller(Arc::clone(scope) as Arc<dyn std::any::Any + Send + Sync>);
    let limit = tool.timeout().unwrap_or(inner.tool_timeout);
    // Inside the future, so a panic while the tool builds its future is
    // caught as well as one while it runs.
    let running = AssertUnwindSafe(async { tool.call(arguments, ctx).await }).catch_unwind();
    let outcome = tokio::select! {
        // The tool first: one that is done at once never has the turn's
        // token watched.
        biased;
        outcome = tokio::time::timeout(limit, running) => outcome,
        () = cancel.cancelled() => return interrupted(),
    };
    // Tell the tool's own tasks to stop, whatever happened.
    call_cancel.cancel();
    match outcome {
        Ok(Ok(Ok(output))) => (ToolOutcome::Ok, output),
        // A tool that stopped with an error because the turn was cancelled
        // (it watched its cancellation, as a sub-agent's turn does) was
        // interrupted, whichever of the two the select saw first.
        Ok(Ok(Err(_))) if cancel.is_cancelled() => interrupted(),
        Ok(Ok(Err(error))) if error.is_invalid_arguments() => {
            (ToolOutcome::InvalidArguments, error.to_string().into())
        }
        Ok(Ok(Err(error))) => (ToolOutcome::Failed, format!("Error: {error}").into()),
        Ok(Err(panic)) => (ToolOutcome::Panicked, crashed(&*panic).into()),
        Err(_) => (
            ToolOutcome::TimedOut,
            format!("Error: the tool did not finish within {}.", human(limit)).into(),
        ),
    }
}

#[allow(dead_code, reason = "the guards are held for their drop")]
enum Lock<'a> {
    Exclusive(tokio::sync::RwLockWriteGuard<'a, ()>),
    Shared(tokio::sync::RwLockReadGuard<'a, ()>),
}

/// How a call ended: its outcome, and what the model is given.
type Ended = (ToolOutcome, ToolOutput);

fn interrupted() -> Ended {
    (
        ToolOutcome::Interrupted,
        "Interrupted: the user cancelled the turn.".into(),
    )
}

/// A result and record for a call that was never run.
pub(crate) fn not_run(
    call: &ToolCall,
    outcome: ToolOutcome,
    content: String,
) -> (ToolResult, ToolCallRecord) {
    finished(call, outcome, content.into(), Duration::ZERO)
}

fn finished(
    call: &ToolCall,
    outcome: ToolOutcome,
    output: ToolOutput,
    duration: Duration,
) -> (ToolResult, ToolCallRecord) {
    let ToolOutput { mut text, images } = output;
    cap(&mut text);
    let result = if outcome.is_ok() {
        ToolResult::ok(&call.id, text.clone())
    } else {
        ToolResult::error(&call.id, text.clone())
    }
    .with_images(images.clone());
    let record = ToolCallRecord {
        call: call.clone(),
        outcome,
        content: text,
        images,
        duration,
        verdict: None,
        decision: None,
        approver: None,
    };
    (result, record)
}

/// Cuts a result longer than [`MAX_TOOL_RESULT`](crate::tool::MAX_TOOL_RESULT)
/// at a character boundary, saying how long it was.
fn cap(text: &mut String) {
    let max = crate::tool::MAX_TOOL_RESULT;
    if text.len() <= max {
        return;
    }
    let whole = text.len();
    let cut = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    text.truncate(cut);
    text.push_str(&format!(
        "\n[output cut: {whole} bytes in all, the first {cut} kept. Ask for less, or for a part.]"
    ));
}

/// What the model reads when a tool panicked.
fn crashed(panic: &(dyn std::any::Any + Send)) -> String {
    format!("Error: the tool crashed ({}).", panic_message(panic))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("panic")
}

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{d:?}")
    }
}
