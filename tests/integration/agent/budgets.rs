//! The round cap and turn budgets: tools withdrawn, the model told why.

use std::time::Duration;

use ferrobot::agent::ToolOutcome;
use ferrobot::provider::ToolChoice;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Role, Usage};
use serde_json::{Value, json};

use super::echo_tool;

#[tokio::test]
async fn after_the_round_cap_tools_are_withdrawn_for_a_last_answer() {
    let mock = MockProvider::from_fn(|request| {
        if request.tool_choice == ToolChoice::None {
            MockTurn::new().text("Here is what I found.")
        } else {
            MockTurn::new().tool_call("echo", json!({}))
        }
    });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .max_tool_rounds(2)
        .build();
    let reply = agent.handle("a", "loop").await.unwrap();
    assert_eq!(reply.text, "Here is what I found.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].tool_choice, ToolChoice::None);
    assert_eq!(requests[2].tool_names(), ["echo"], "still described");
    assert_eq!(reply.tool_calls.len(), 2);
}

/// A model that calls `tool` while it may, and answers once it may not.
fn calling_until_withdrawn(tool: &'static str, usage: Usage) -> MockProvider {
    MockProvider::from_fn(move |request| {
        if request.tool_choice == ToolChoice::None {
            MockTurn::new().text("From what I have: enough.")
        } else {
            MockTurn::new().tool_call(tool, json!({})).usage(usage)
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_turns_time_budget_starts_when_its_turn_does() {
    use ferrobot::agent::TurnBudget;
    let slow = from_fn("slow", "Slow.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        "done"
    });
    let mock = MockProvider::from_fn(|request| {
        let asked = request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::User);
        if asked && request.tool_choice == ToolChoice::Auto {
            MockTurn::new().tool_call("slow", json!({}))
        } else {
            MockTurn::new().text("ok")
        }
    });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(slow)
        .budget(
            TurnBudget::builder()
                .wall_time(Duration::from_millis(200))
                .build(),
        )
        .build();
    // The second message waits for the first turn (300 ms of tool) before
    // its own turn starts: that wait is not its budget.
    let (first, second) = tokio::join!(agent.handle("a", "first"), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        agent.handle("a", "second").await
    });
    assert_eq!(first.unwrap().tool_calls.len(), 1);
    assert_eq!(
        second.unwrap().tool_calls.len(),
        1,
        "the second turn kept its tools"
    );
    let asked_second = mock
        .requests()
        .into_iter()
        .find(|r| r.messages.last().unwrap().text() == "second")
        .unwrap();
    assert_eq!(asked_second.tool_choice, ToolChoice::Auto);
}

#[tokio::test(start_paused = true)]
async fn past_a_budget_the_tools_are_withdrawn_and_the_model_told_why() {
    use ferrobot::agent::TurnBudget;
    let big = from_fn("dump", "Dump.", |_: Value, _| async { "x".repeat(1000) });
    // Tool output: two results of 1,000 bytes pass a budget of 1,500.
    let mock = calling_until_withdrawn("dump", Usage::default());
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(big.clone())
        .budget(TurnBudget::builder().tool_output_bytes(1500).build())
        .build();
    let reply = agent.handle("a", "dump it all").await.unwrap();
    assert_eq!(reply.text, "From what I have: enough.");
    assert_eq!(reply.tool_calls.len(), 2);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].tool_choice, ToolChoice::Auto);
    assert_eq!(requests[2].tool_choice, ToolChoice::None);

    // Written tokens: 60 a call passes 100 after the second call.
    let usage = Usage {
        output_tokens: 60,
        ..Usage::default()
    };
    let mock = calling_until_withdrawn("echo", usage);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .budget(TurnBudget::builder().output_tokens(100).build())
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(mock.requests()[2].tool_choice, ToolChoice::None);

    // Wall time: a model that keeps calling anyway is told why it can't.
    let stubborn = MockProvider::from_fn(|_| {
        MockTurn::new()
            .tool_call("echo", json!({}))
            .delay(Duration::from_millis(60))
    });
    let agent = Agent::builder()
        .provider(stubborn.clone())
        .tool(echo_tool("echo"))
        .budget(
            TurnBudget::builder()
                .wall_time(Duration::from_millis(100))
                .build(),
        )
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    let last = reply.tool_calls.last().unwrap();
    assert_eq!(last.outcome, ToolOutcome::Rejected);
    assert_eq!(
        last.content,
        "Not run: the turn's time budget of 0.1 s is used up. Answer with what you have."
    );
    assert_eq!(
        reply.text,
        "I stopped without reaching an answer: the turn's time budget of 0.1 s is used up."
    );
}
