//! Sub-agents (`Agent::as_tool`): a child's answer as a tool result, typed
//! input, kept and fresh conversations, cancellation, budgets and rules
//! flowing down, events tagged in the parent's stream, depth and fan-out
//! limits, cycles.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::agent::{AgentEvent, Status, SubAgentLimits, ToolOutcome, TurnBudget};
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::policy::{Policy, Rule};
use ferrobot::provider::ToolChoice;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{Tool, from_fn};
use ferrobot::{Agent, Error, Role, Usage};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{counted, results_of};

fn usage(output_tokens: u64) -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens,
        ..Usage::default()
    }
}

/// A model that calls `tool` with `arguments` when the user spoke last, and
/// answers with the last tool result otherwise.
fn calling(tool: &'static str, arguments: Value) -> MockProvider {
    MockProvider::from_fn(move |request| {
        let last = request.messages.last().unwrap();
        if last.role == Role::User && request.tool_choice == ToolChoice::Auto {
            MockTurn::new().tool_call(tool, arguments.clone())
        } else {
            let result = last
                .tool_results_iter()
                .next()
                .map(|r| r.content.clone())
                .unwrap_or_default();
            MockTurn::new().text(format!("got: {result}"))
        }
    })
}

#[tokio::test]
async fn the_lead_reads_the_sub_agents_answer_as_the_call_result() {
    let child_model = MockProvider::new().then(
        MockTurn::new()
            .text("Paris has 2.1 million inhabitants.")
            .usage(usage(7)),
    );
    let researcher = Agent::builder()
        .provider(child_model.clone())
        .system_prompt("You look things up.")
        .build();
    let lead_model = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("research", json!({"task": "Population of Paris?"}))
                .usage(usage(5)),
        )
        .then(MockTurn::new().text("About 2.1 million.").usage(usage(3)));
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(researcher.as_tool("research", "Look things up."))
        .build();

    let reply = lead
        .handle("alice", "How many live in Paris?")
        .await
        .unwrap();

    assert_eq!(reply.text, "About 2.1 million.");
    let asked = &child_model.requests()[0];
    assert_eq!(asked.system.as_deref(), Some("You look things up."));
    assert_eq!(asked.messages.len(), 1, "the child sees only its task");
    assert_eq!(asked.messages[0].text(), "Population of Paris?");
    assert_eq!(
        results_of(&lead_model.requests()[1]),
        [("Paris has 2.1 million inhabitants.".to_owned(), false)]
    );
    let record = &reply.tool_calls[0];
    assert_eq!(record.outcome, ToolOutcome::Ok);
    assert_eq!(
        reply.usage.output_tokens,
        5 + 7 + 3,
        "the child's tokens count in the turn"
    );
    assert!(
        researcher.history().list().await.unwrap().is_empty(),
        "a fresh call's conversation is forgotten"
    );
}

#[tokio::test]
async fn a_failing_sub_agent_is_an_error_result_not_a_failed_turn() {
    let researcher = Agent::builder().provider(MockProvider::new()).build();
    let lead_model = calling("research", json!({"task": "anything"}));
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(researcher.as_tool("research", "Look things up."))
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Failed);
    let (content, is_error) = &results_of(&lead_model.requests()[1])[0];
    assert!(is_error);
    assert!(
        content.starts_with("Error: the sub-agent `research` failed: LLM unavailable"),
        "{content}"
    );
    assert!(content.ends_with("Answer without it, or try again later."));
}

/// What to look up.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Query {
    /// The question.
    question: String,
    /// How many sources to read.
    #[schemars(range(min = 1, max = 5))]
    sources: u8,
}

#[tokio::test]
async fn typed_input_is_checked_and_written_as_the_sub_agents_message() {
    let child_model = MockProvider::replying("done");
    let researcher = Agent::builder().provider(child_model.clone()).build();
    let research = researcher
        .as_tool("research", "Look things up.")
        .input::<Query>();
    assert_eq!(
        research.spec().parameters["required"],
        json!(["question", "sources"])
    );
    let lead_model = MockProvider::new()
        .then(MockTurn::new().tool_call("research", json!({"question": "Why?", "sources": 9})))
        .then(MockTurn::new().tool_call("research", json!({"question": "Why?", "sources": 2})))
        .then(MockTurn::new().text("ok"));
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(research)
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert_eq!(reply.tool_calls[1].outcome, ToolOutcome::Ok);
    let requests = child_model.requests();
    assert_eq!(requests.len(), 1, "invalid input never reaches the child");
    assert_eq!(
        requests[0].messages[0].text(),
        "{\n  \"question\": \"Why?\",\n  \"sources\": 2\n}"
    );

    let reviewer_model = MockProvider::replying("looks fine");
    let reviewer = Agent::builder().provider(reviewer_model.clone()).build();
    let review = reviewer
        .as_tool("review", "Review.")
        .input_with(|q: Query| format!("Answer {} from {} sources.", q.question, q.sources));
    let lead = Agent::builder()
        .provider(calling("review", json!({"question": "Why?", "sources": 3})))
        .tool(review)
        .build();
    lead.handle("alice", "go").await.unwrap();
    assert_eq!(
        reviewer_model.requests()[0].messages[0].text(),
        "Answer Why? from 3 sources."
    );
}

#[tokio::test]
async fn a_kept_conversation_remembers_earlier_calls_and_a_fresh_one_does_not() {
    for keep in [false, true] {
        let child_model = MockProvider::replying("noted");
        let planner = Agent::builder().provider(child_model.clone()).build();
        let plan = planner.as_tool("plan", "Keep the plan.");
        let plan = if keep { plan.keep_conversation() } else { plan };
        let lead = Agent::builder()
            .provider(calling("plan", json!({"task": "add a step"})))
            .tool(plan)
            .build();
        lead.handle("alice", "one").await.unwrap();
        lead.handle("alice", "two").await.unwrap();
        let requests = child_model.requests();
        assert_eq!(requests.len(), 2);
        let seen: Vec<String> = requests[1].messages.iter().map(|m| m.text()).collect();
        if keep {
            assert_eq!(seen, ["add a step", "noted", "add a step"]);
            let kept = planner.history().load("alice/plan").await.unwrap();
            assert_eq!(kept.len(), 4, "under `{{conversation}}/{{tool}}`");
        } else {
            assert_eq!(seen, ["add a step"]);
            assert!(planner.history().list().await.unwrap().is_empty());
        }
    }

    // A fixed id is shared by every calling conversation.
    let child_model = MockProvider::replying("noted");
    let planner = Agent::builder().provider(child_model.clone()).build();
    let lead = Agent::builder()
        .provider(calling("plan", json!({"task": "add a step"})))
        .tool(
            planner
                .as_tool("plan", "Keep the plan.")
                .conversation("team-plan"),
        )
        .build();
    lead.handle("alice", "one").await.unwrap();
    lead.handle("bob", "two").await.unwrap();
    assert_eq!(child_model.requests()[1].messages.len(), 3);
    assert_eq!(planner.history().load("team-plan").await.unwrap().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_lead_cancels_the_sub_agent_mid_stream() {
    let (tool, ran) = counted("count");
    // A slow answer, in pieces: cancelled while it streams, the child
    // never gets to its tool.
    let child_model = MockProvider::new()
        .then(
            MockTurn::new()
                .text("Looking it up, slowly")
                .chunked(4)
                .delay(Duration::from_secs(5)),
        )
        .then(MockTurn::new().tool_call("count", json!({})));
    let researcher = Agent::builder()
        .provider(child_model.clone())
        .tool(tool)
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "slow"})))
        .tool(researcher.as_tool("research", "Look things up."))
        .build();
    let mut events = lead.stream("alice", "go");
    let stop = events.cancellation();
    // Wait for the child's first words, then cancel the lead's turn.
    loop {
        match events.next().await.unwrap().unwrap() {
            AgentEvent::SubAgent(sub) if matches!(*sub.event, AgentEvent::TextDelta(_)) => break,
            _ => {}
        }
    }
    stop.cancel();
    let mut finished = None;
    let end = loop {
        match events.next().await {
            Some(Ok(AgentEvent::ToolCallFinished(record))) => finished = Some(record),
            Some(Ok(_)) => {}
            Some(Err(error)) => break error,
            None => panic!("the stream ended without an error"),
        }
    };
    assert!(matches!(end, Error::Cancelled));
    assert_eq!(finished.unwrap().outcome, ToolOutcome::Interrupted);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        !researcher.stop("alice/research/call_1"),
        "the child's turn is over"
    );
    assert!(researcher.history().list().await.unwrap().is_empty());
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_sub_agent_stops_at_what_its_caller_has_left_of_its_tokens() {
    // The child calls `echo` while tools are offered, 5 tokens a call.
    let child_model = MockProvider::from_fn(|request| {
        if request.tool_choice == ToolChoice::None {
            MockTurn::new().text("what I found").usage(usage(1))
        } else {
            MockTurn::new().tool_call("echo", json!({})).usage(usage(5))
        }
    });
    let researcher = Agent::builder()
        .provider(child_model.clone())
        .tool(super::echo_tool("echo"))
        .build();
    let lead_model = MockProvider::from_fn(|request| {
        if request.tool_choice == ToolChoice::None {
            MockTurn::new().text("final").usage(usage(1))
        } else {
            MockTurn::new()
                .tool_call("research", json!({"task": "dig"}))
                .usage(usage(6))
        }
    });
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(researcher.as_tool("research", "Look things up."))
        .budget(TurnBudget::builder().output_tokens(10).build())
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    // The lead had 4 tokens left: the child's first call (5) uses them up,
    // and its tools are withdrawn for an answer.
    let child = child_model.requests();
    assert_eq!(child.len(), 2);
    assert_eq!(child[1].tool_choice, ToolChoice::None);
    // 6 + 5 + 1 = 12 of 10: the lead answers without tools next.
    let lead_requests = lead_model.requests();
    assert_eq!(lead_requests.len(), 2);
    assert_eq!(lead_requests[1].tool_choice, ToolChoice::None);
    assert_eq!(reply.text, "final");
    assert_eq!(reply.usage.output_tokens, 6 + 5 + 1 + 1);
}

#[tokio::test(start_paused = true)]
async fn the_sub_agent_stops_at_what_its_caller_has_left_of_its_time() {
    let slow = from_fn("slow", "Slow.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_secs(20)).await;
        "slept"
    });
    let child_model = MockProvider::from_fn(|request| {
        if request.tool_choice == ToolChoice::None {
            MockTurn::new().text("out of time")
        } else {
            MockTurn::new().tool_call("slow", json!({}))
        }
    });
    let researcher = Agent::builder()
        .provider(child_model.clone())
        .tool(slow)
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "dig"})))
        .tool(researcher.as_tool("research", "Look things up."))
        .budget(
            TurnBudget::builder()
                .wall_time(Duration::from_secs(30))
                .build(),
        )
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    let child = child_model.requests();
    // 20 s, then 40 s: past the lead's 30 s the child answers without tools.
    assert_eq!(child.len(), 3);
    assert_eq!(child[1].tool_choice, ToolChoice::Auto);
    assert_eq!(child[2].tool_choice, ToolChoice::None);
    assert_eq!(reply.text, "got: out of time");
}

/// A child that calls `wipe` once, then answers with what it read.
fn wiping_child(policy: Policy) -> (Agent, Arc<std::sync::atomic::AtomicUsize>, MockProvider) {
    let (wipe, ran) = counted("wipe");
    let model = calling("wipe", json!({}));
    let child = Agent::builder()
        .provider(model.clone())
        .tool(wipe)
        .policy(policy)
        .build();
    (child, ran, model)
}

#[tokio::test]
async fn the_parents_rules_hold_for_the_sub_agents_calls() {
    use std::sync::atomic::Ordering;
    // The child allows `wipe`; the lead denies it: denied.
    let (child, ran, child_model) = wiping_child(Policy::new().rule(Rule::allow("wipe")));
    let lead = Agent::builder()
        .provider(calling("cleaner", json!({"task": "clean up"})))
        .tool(child.as_tool("cleaner", "Clean up."))
        .policy(Policy::new().rule(Rule::deny("wipe")))
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let (content, _) = &results_of(&child_model.requests()[1])[0];
    assert_eq!(
        content,
        "Not run: denied by the permission rules (rule 1: deny wipe (of an agent above this one))."
    );
    assert!(
        reply.text.starts_with("got: got: Not run: denied"),
        "{}",
        reply.text
    );

    // The lead asks: the lead's handler is asked, naming the lead's
    // conversation, and the call runs once approved.
    let (child, ran, _) = wiping_child(Policy::new().rule(Rule::allow("wipe")));
    let asked = Arc::new(Mutex::new(Vec::<ConfirmRequest>::new()));
    let seen = Arc::clone(&asked);
    let lead = Agent::builder()
        .provider(calling("cleaner", json!({"task": "clean up"})))
        .tool(child.as_tool("cleaner", "Clean up."))
        .policy(Policy::new().rule(Rule::ask("wipe")))
        .confirm(move |request: ConfirmRequest| {
            seen.lock().unwrap().push(request);
            async { Decision::Approve }
        })
        .build();
    let request = ferrobot::agent::TurnRequest::new("go").user("ann");
    lead.handle("alice", request).await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, "wipe");
    assert_eq!(asked[0].conversation, "alice");
    assert_eq!(asked[0].user.as_deref(), Some("ann"));
}

#[tokio::test]
async fn a_sub_agent_call_that_would_wait_for_a_decision_tells_the_model() {
    let wipe = from_fn("wipe", "Wipe.", |_: Value, _| async { "wiped" }).confirm("Wipe it?");
    let child = Agent::builder()
        .provider(calling("wipe", json!({})))
        .tool(wipe)
        .confirm(|_: ConfirmRequest| async { Decision::Defer })
        .build();
    let lead_model = calling("cleaner", json!({"task": "clean up"}));
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(child.as_tool("cleaner", "Clean up.").keep_conversation())
        .build();
    lead.handle("alice", "go").await.unwrap();
    let (content, is_error) = &results_of(&lead_model.requests()[1])[0];
    assert!(is_error);
    assert_eq!(
        content,
        "Error: `cleaner` stopped before running `wipe` (Wipe it?): they wait for a person's \
         decision, and a sub-agent can't wait. Nothing of them ran. Answer with what you have, \
         or ask the user to do it."
    );
    assert!(
        child
            .history()
            .pending("alice/cleaner")
            .await
            .unwrap()
            .is_none(),
        "nothing waits in the kept conversation"
    );
}

#[tokio::test]
async fn the_sub_agents_events_come_tagged_inside_its_call() {
    let weather = from_fn("get_weather", "Weather.", |_: Value, _| async { "18 °C" });
    let child = Agent::builder()
        .provider(calling("get_weather", json!({"city": "Paris"})))
        .tool(weather)
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "Paris weather"})))
        .tool(child.as_tool("research", "Look things up."))
        .build();
    let transcript = lead.stream("alice", "weather?").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"tool call delta #0 id=call_1 name=research "{\"task\":\"Paris weather\"}""#,
            r#"tool call call_1 research {"task":"Paris weather"}"#,
            "running research",
            "[research call_1] thinking",
            r#"[research call_1] tool call delta #0 id=call_1 name=get_weather "{\"city\":\"Paris\"}""#,
            r#"[research call_1] tool call call_1 get_weather {"city":"Paris"}"#,
            "[research call_1] running get_weather",
            "[research call_1] tool result call_1 get_weather ok: 18 °C",
            "[research call_1] thinking",
            r#"[research call_1] text "got: 18 °C""#,
            r#"[research call_1] done "got: 18 °C""#,
            "tool result call_1 research ok: got: 18 °C",
            "thinking",
            r#"text "got: got: 18 °C""#,
            r#"done "got: got: 18 °C""#,
        ]
    );
    let AgentEvent::SubAgent(sub) = &transcript.events[4] else {
        panic!("a sub-agent's event");
    };
    assert_eq!(
        (sub.tool.as_str(), sub.call_id.as_str(), sub.depth),
        ("research", "call_1", 1)
    );
    assert_eq!(*sub.event, AgentEvent::Status(Status::Thinking));
}

#[tokio::test]
async fn a_grandchilds_events_are_wrapped_twice() {
    let grandchild = Agent::builder()
        .provider(MockProvider::replying("deep"))
        .build();
    let child = Agent::builder()
        .provider(calling("lookup", json!({"task": "x"})))
        .tool(grandchild.as_tool("lookup", "Look up."))
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "y"})))
        .tool(child.as_tool("research", "Research."))
        .build();
    let transcript = lead.stream("alice", "go").transcript().await;
    assert!(
        transcript
            .lines()
            .contains(&r#"[research call_1] [lookup call_1] text "deep""#.to_owned())
    );
    let nested = transcript
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::SubAgent(sub) => match &*sub.event {
                AgentEvent::SubAgent(inner) => Some(inner.clone()),
                _ => None,
            },
            _ => None,
        })
        .unwrap();
    assert_eq!(nested.depth, 2);
    assert_eq!(transcript.reply.unwrap().text, "got: got: deep");
}

#[tokio::test]
async fn past_the_depth_limit_the_model_is_told_to_answer_with_what_it_has() {
    let grandchild_model = MockProvider::replying("deep");
    let grandchild = Agent::builder().provider(grandchild_model.clone()).build();
    let child_model = calling("lookup", json!({"task": "x"}));
    let child = Agent::builder()
        .provider(child_model.clone())
        .tool(grandchild.as_tool("lookup", "Look up."))
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "y"})))
        .tool(child.as_tool("research", "Research."))
        .sub_agent_limits(SubAgentLimits::builder().max_depth(1).build())
        .build();
    lead.handle("alice", "go").await.unwrap();
    assert!(grandchild_model.requests().is_empty());
    assert_eq!(
        results_of(&child_model.requests()[1]),
        [(
            "Error: sub-agent depth limit 1 reached: `lookup` was not run. Answer with what you have."
                .to_owned(),
            true
        )]
    );
}

#[tokio::test]
async fn an_agent_that_calls_itself_stops_at_the_depth_limit() {
    let a = Agent::builder()
        .provider(calling("ask_b", json!({"task": "loop"})))
        .build();
    let b = Agent::builder()
        .provider(calling("ask_a", json!({"task": "loop"})))
        .tool(a.as_tool("ask_a", "Ask A."))
        .build();
    a.tools().register(b.as_tool("ask_b", "Ask B."));
    let reply = a.handle("alice", "go").await.unwrap();
    // B (1), A (2), B (3) ran; A at depth 4 was refused.
    assert_eq!(
        reply.text,
        "got: got: got: got: Error: sub-agent depth limit 3 reached: `ask_a` was not run. \
         Answer with what you have."
    );
}

#[tokio::test]
async fn a_turn_makes_at_most_its_limit_of_sub_agent_calls() {
    let lead_model = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("research", json!({"task": "a"}))
                .tool_call("research", json!({"task": "b"})),
        )
        .then(MockTurn::new().text("done"));
    let researcher = Agent::builder()
        .provider(MockProvider::replying("found"))
        .build();
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(researcher.as_tool("research", "Research."))
        .sub_agent_limits(SubAgentLimits::builder().max_calls(1).build())
        .build();
    lead.handle("alice", "go").await.unwrap();
    assert_eq!(
        results_of(&lead_model.requests()[1]),
        [
            ("found".to_owned(), false),
            (
                "Error: sub-agent call limit 1 reached: `research` was not run. \
                 Answer with what you have."
                    .to_owned(),
                true
            )
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_runs_at_most_its_limit_of_sub_agents_at_once() {
    let lead_model = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("research", json!({"task": "a"}))
                .tool_call("research", json!({"task": "b"})),
        )
        .then(MockTurn::new().text("done"));
    let slow =
        MockProvider::new().then(MockTurn::new().text("found").delay(Duration::from_secs(1)));
    let researcher = Agent::builder().provider(slow).build();
    let lead = Agent::builder()
        .provider(lead_model.clone())
        .tool(researcher.as_tool("research", "Research."))
        .sub_agent_limits(SubAgentLimits::builder().max_running(1).build())
        .build();
    lead.handle("alice", "go").await.unwrap();
    assert_eq!(
        results_of(&lead_model.requests()[1]),
        [
            ("found".to_owned(), false),
            (
                "Error: sub-agent limit of 1 running at once reached: `research` was not \
                 run. Call it again once the running ones have answered."
                    .to_owned(),
                true
            )
        ]
    );
}

#[tokio::test]
async fn a_task_starting_with_a_slash_is_text_for_the_sub_agent() {
    let child_model = MockProvider::replying("read it");
    let child = Agent::builder().provider(child_model.clone()).build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "/help"})))
        .tool(child.as_tool("research", "Research."))
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    assert_eq!(reply.text, "got: read it");
    assert_eq!(child_model.requests()[0].messages[0].text(), "/help");
}

#[tokio::test]
async fn an_agent_tool_can_be_called_alone_in_a_test() {
    use ferrobot::ToolContext;
    let researcher = Agent::builder()
        .provider(MockProvider::replying("found it"))
        .build();
    let research = researcher.as_tool("research", "Research.");
    let output = research
        .call(json!({"task": "look"}), ToolContext::for_test("t"))
        .await
        .unwrap();
    assert_eq!(output, "found it");
    let error = research
        .check_arguments(&json!({"topic": "look"}))
        .unwrap_err();
    assert!(error.is_invalid_arguments());
    assert!(
        error.message().contains("missing field `task`"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn a_turns_call_limit_counts_its_sub_agents_calls_too() {
    let grandchild_model = MockProvider::replying("deep");
    let grandchild = Agent::builder().provider(grandchild_model.clone()).build();
    // The child calls `lookup` twice in one round; its own limit (16)
    // allows it, the lead's (2, one already spent on `research`) doesn't.
    let child_model = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("lookup", json!({"task": "a"}))
                .tool_call("lookup", json!({"task": "b"})),
        )
        .then(MockTurn::new().text("half done"));
    let child = Agent::builder()
        .provider(child_model.clone())
        .tool(grandchild.as_tool("lookup", "Look up."))
        .build();
    let lead = Agent::builder()
        .provider(calling("research", json!({"task": "y"})))
        .tool(child.as_tool("research", "Research."))
        .sub_agent_limits(SubAgentLimits::builder().max_calls(2).build())
        .build();
    let reply = lead.handle("alice", "go").await.unwrap();
    assert_eq!(reply.text, "got: half done");
    assert_eq!(grandchild_model.requests().len(), 1);
    assert_eq!(
        results_of(&child_model.requests()[1]),
        [
            ("deep".to_owned(), false),
            (
                "Error: sub-agent call limit 2 reached: `lookup` was not run. \
                 Answer with what you have."
                    .to_owned(),
                true
            )
        ]
    );
}

#[tokio::test]
async fn a_slash_command_runs_a_sub_agent_and_counts_its_tokens() {
    let child_model = MockProvider::new().then(MockTurn::new().text("found it").usage(usage(4)));
    let researcher = Agent::builder().provider(child_model.clone()).build();
    let lead = Agent::builder()
        .provider(MockProvider::new())
        .tool(researcher.as_tool("research", "Research."))
        .build();
    let reply = lead.handle("alice", "/research task=hello").await.unwrap();
    assert_eq!(reply.text, "found it");
    assert_eq!(reply.usage.output_tokens, 4);
    assert_eq!(child_model.requests()[0].messages[0].text(), "hello");
}
