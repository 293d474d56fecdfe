//! Fitting long conversations into the context window.

use ferrobot::history::ContextPolicy;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, Message, Part, Reasoning, Role, ToolCall, ToolResult};
use proptest::prelude::*;
use serde_json::json;

/// A conversation of `turns`, each `(steps, calls per step, text length)`:
/// a user message, then per step an assistant message with reasoning and
/// tool calls followed by their results, then an answer.
fn conversation(turns: &[(usize, usize, usize)]) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut id = 0;
    for (t, &(steps, calls, len)) in turns.iter().enumerate() {
        messages.push(Message::user(format!("question {t} {}", "x".repeat(len))));
        for _ in 0..steps {
            let mut parts = vec![Part::Reasoning(Reasoning {
                text: "think".into(),
                signature: Some("sig".into()),
                provider: None,
            })];
            let mut results = Vec::new();
            for _ in 0..calls.max(1) {
                id += 1;
                parts.push(Part::ToolCall(ToolCall::new(
                    format!("c{id}"),
                    "tool",
                    json!({"n": id}),
                )));
                results.push(ToolResult::ok(format!("c{id}"), "y".repeat(len)));
            }
            messages.push(Message::new(Role::Assistant, parts));
            messages.push(Message::tool_results(results));
        }
        messages.push(Message::assistant(format!("answer {t}")));
    }
    messages
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn trimming_never_separates_calls_from_results(
        turns in prop::collection::vec((0usize..4, 0usize..3, 0usize..200), 1..8),
        max_messages in prop::option::of(1usize..30),
        max_tokens in prop::option::of(1usize..2000),
    ) {
        let messages = conversation(&turns);
        let policy = ContextPolicy::builder().maybe_max_messages(max_messages).maybe_max_tokens(max_tokens).build();
        let start = policy.start(&messages);
        let kept = &messages[start..];
        // The window opens on a user message and holds the whole current turn.
        prop_assert_eq!(kept[0].role, Role::User);
        let last_user = messages.iter().rposition(|m| m.role == Role::User).unwrap();
        prop_assert!(start <= last_user);
        // Every tool message answers the assistant message right before it,
        // and that one kept its reasoning.
        for (i, message) in kept.iter().enumerate() {
            if message.role == Role::Tool {
                prop_assert!(i > 0);
                let calls: Vec<&str> = kept[i - 1].tool_calls().map(|c| c.id.as_str()).collect();
                let answered: Vec<&str> = message.tool_results_iter().map(|r| r.call_id.as_str()).collect();
                prop_assert_eq!(calls, answered);
                prop_assert!(kept[i - 1].reasoning().is_some());
            }
        }
        // Within budget, unless even the current turn alone is over it.
        let cost = |from: usize| messages[from..].iter().map(|m| ferrobot::history::TokenEstimator::estimate(&ferrobot::history::CharEstimate, m)).sum::<usize>();
        let fits = |from: usize| max_messages.is_none_or(|m| messages.len() - from <= m) && max_tokens.is_none_or(|t| cost(from) <= t);
        if fits(last_user) {
            prop_assert!(fits(start));
            // And nothing more could have been kept: the previous user message did not fit.
            if let Some(earlier) = messages[..start].iter().rposition(|m| m.role == Role::User) {
                prop_assert!(!fits(earlier));
            }
        } else {
            prop_assert_eq!(start, last_user);
        }
    }
}

#[tokio::test]
async fn the_agent_sends_only_what_fits_and_keeps_everything() {
    let mock = MockProvider::replying("ok");
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Be brief.")
        .context(ContextPolicy::builder().max_messages(3).build())
        .build();
    for question in ["one", "two", "three"] {
        agent.handle("a", question).await.unwrap();
    }
    let last = mock.requests().pop().unwrap();
    let sent: Vec<String> = last.messages.iter().map(Message::text).collect();
    assert_eq!(sent, ["two", "ok", "three"]);
    assert_eq!(last.system.as_deref(), Some("Be brief."));
    assert_eq!(agent.history().load("a").await.unwrap().len(), 6);
    let _ = MockTurn::new();
}
