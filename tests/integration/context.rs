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

mod compaction {
    use ferrobot::history::{Compaction, ContextPolicy};
    use ferrobot::provider::ToolChoice;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::from_fn;
    use ferrobot::{Agent, Message, Role};
    use serde_json::{Value, json};

    fn policy(window: usize) -> ContextPolicy {
        ContextPolicy::builder()
            .compaction(Compaction::builder().context_window(window).build())
            .build()
    }

    #[tokio::test]
    async fn old_tool_outputs_are_shortened_first() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("dump", json!({})))
            .then(MockTurn::new().text("done"))
            .then(MockTurn::new().text("ok"));
        let agent = Agent::builder()
            .provider(mock.clone())
            .tool(from_fn("dump", "Dump.", |_: Value, _| async {
                "z".repeat(3000)
            }))
            .context(policy(600))
            .build();
        agent.handle("a", "dump it").await.unwrap();
        agent.handle("a", "thanks").await.unwrap();
        let sent = &mock.requests()[2];
        let output = sent.messages[2]
            .tool_results_iter()
            .next()
            .unwrap()
            .content
            .clone();
        assert!(
            output.ends_with("[shortened to save context: it was 3000 characters]"),
            "{output}"
        );
        assert!(output.len() < 500);
        assert!(
            !sent.messages.iter().any(|m| m.summary),
            "shortening was enough"
        );
        // The store keeps the full output.
        let stored = agent.history().load("a").await.unwrap();
        assert_eq!(
            stored[2].tool_results_iter().next().unwrap().content.len(),
            3000
        );
    }

    #[tokio::test]
    async fn then_the_older_part_is_summarised_and_the_current_turn_kept_verbatim() {
        let compaction = Compaction::builder().context_window(600).build();
        let instructions = compaction.instructions.clone();
        let compaction_instructions = instructions.clone();
        let mock = MockProvider::from_fn(move |request| {
            if request.system.as_deref() == Some(instructions.as_str()) {
                MockTurn::new().text("They discussed three long topics.")
            } else {
                MockTurn::new().text("ok")
            }
        });
        let agent = Agent::builder()
            .provider(mock.clone())
            .tool(from_fn("ping", "Ping.", |_: Value, _| async { "pong" }))
            .context(ContextPolicy::builder().compaction(compaction).build())
            .build();
        for topic in ["alpha", "beta", "gamma"] {
            agent
                .handle("a", &format!("{topic} {}", "w ".repeat(500)))
                .await
                .unwrap();
        }
        agent.handle("a", "short question").await.unwrap();
        let requests = mock.requests();
        // The summary is asked for with the tools described (the history may
        // hold calls of them) but not callable.
        let summarising = requests
            .iter()
            .find(|r| r.system.as_deref() == Some(compaction_instructions.as_str()))
            .expect("a summary was asked for");
        assert_eq!(summarising.tool_choice, ToolChoice::None);
        assert_eq!(summarising.tool_names(), ["ping"]);
        let last = requests.last().unwrap();
        assert!(
            last.messages[0].summary,
            "the request starts from the summary"
        );
        assert_eq!(
            last.messages[0].text(),
            "Summary of the earlier conversation:\nThey discussed three long topics."
        );
        assert_eq!(last.messages.last().unwrap().text(), "short question");
        // The store shows what was summarised, the summary, and the turn again.
        let stored = agent.history().load("a").await.unwrap();
        let at = stored
            .iter()
            .position(|m| m.summary)
            .expect("a summary is stored");
        assert!(at >= 2, "the summarised messages stay in the store");
        assert_eq!(stored[at + 1].role, Role::User);
        // A new agent on the same store starts from the summary too.
        let _ = Message::summary("x");
    }
}
