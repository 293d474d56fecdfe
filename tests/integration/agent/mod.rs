//! The turn loop against `MockProvider`, one module per area. The helpers
//! here build the tools several areas share.
//!
//! Tests that wait on timers (a tool's sleep, a `MockTurn` delay, a time-out)
//! start with Tokio's clock paused: it jumps ahead whenever every task is
//! idle, so they take no real time and no machine is too slow for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::tool::{FnTool, from_fn};
use serde_json::Value;

// Background work (`Delegate`): tasks posted later, `/tasks`, `/cancel`, the queue.
mod background;
// The round cap and turn budgets: tools withdrawn, the model told why.
mod budgets;
// Cancelled turns: waiting for a lock, mid-answer, mid-tool.
mod cancellation;
// What runs at once: the calls of a round, exclusive tools, conversations.
mod concurrency;
// Tools that ask first: declined, approved, unanswered, failing to ask.
mod confirmation;
// The events a turn streams, in order, and its tracing spans.
mod events;
// What a turn answers and stores: text, refusals, provider failures.
mod replies;
// Images: sent again for recent turns, described after, loaded from the store.
mod images;
// The policy in the turn: rules, effects, decisions, deferred calls resumed.
mod permissions;
// Slash commands: tools run without the model or the history.
mod slash;
// A running turn stopped, and messages said while it runs: steered, interrupting, queued.
mod steering;
// Sub-agents: an agent as a tool; rules, budgets, cancellation and events
// flowing down; depth and fan-out limits.
mod sub_agents;
// Tool rounds: results sent back, failures as results, disabled tools, state.
mod tools;
// Typed answers: the modes' round order, retries, partial values, refusals.
mod typed;
// `/undo` and `Agent::undo`: the last turn taken back.
mod undo;

/// A tool that answers with its arguments.
fn echo_tool(name: &str) -> FnTool {
    from_fn(name, "Echo the arguments.", |v: Value, _| async move {
        v.to_string()
    })
}

/// A tool that records how many calls run at once.
fn counting_tool(name: &str, running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> FnTool {
    from_fn(name, "Count.", move |_: Value, _| {
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(30)).await;
            running.fetch_sub(1, Ordering::SeqCst);
        }
    })
}

/// A tool that does nothing but count its runs.
fn counted(name: &str) -> (FnTool, Arc<AtomicUsize>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let tool = from_fn(name, "Count.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {}
    });
    (tool, ran)
}

pub(crate) fn results_of(request: &ferrobot::testing::RecordedRequest) -> Vec<(String, bool)> {
    request
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .map(|r| (r.content.clone(), r.is_error))
        .collect()
}
