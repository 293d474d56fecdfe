//! Tool rounds: results sent back, every kind of failure, disabled tools,
//! shared state and the tool context.

use std::time::Duration;

use ferrobot::agent::ToolOutcome;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{ToolError, from_fn};
use ferrobot::{Agent, Role};
use serde_json::{Value, json};

use super::{echo_tool, results_of};

#[tokio::test]
async fn a_tool_round_runs_the_tool_and_sends_its_result_back() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .text("Let me check.")
                .tool_call("echo", json!({"x": 1})),
        )
        .then(MockTurn::new().text("It echoed."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .build();
    let reply = agent.handle("alice", "go").await.unwrap();
    assert_eq!(reply.text, "It echoed.");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    let second = &mock.requests()[1];
    assert_eq!(second.tool_names(), ["echo"]);
    assert_eq!(results_of(second), [(r#"{"x":1}"#.to_owned(), false)]);
    // Stored: user, assistant with the call, the result, the final answer.
    let roles: Vec<Role> = agent
        .history()
        .load("alice")
        .await
        .unwrap()
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
}

#[tokio::test(start_paused = true)]
async fn every_failure_becomes_a_result_the_model_can_read() {
    let failing = from_fn("fail", "Fails.", |_: Value, _| async {
        Err::<String, _>(ToolError::new("disk not mounted"))
    });
    let panicking = from_fn("boom", "Panics.", |_: Value, _| async {
        if true {
            panic!("index out of bounds");
        }
    });
    let slow = from_fn("slow", "Sleeps.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await
    })
    .timeout(Duration::from_millis(50));
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Typed {
        #[allow(dead_code)]
        n: u32,
    }
    let typed = from_fn("typed", "Typed.", |_: Typed, _| async {});
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("fail", json!({}))
                .tool_call("boom", json!({}))
                .tool_call("slow", json!({}))
                .tool_call("nope", json!({}))
                .raw_tool_call("c5", "typed", "{\"n\": ")
                .tool_call("typed", json!({"n": "many"})),
        )
        .then(MockTurn::new().text("Some tools failed."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tools([failing, panicking, slow, typed])
        .build();
    let reply = agent.handle("a", "try everything").await.unwrap();
    assert_eq!(reply.text, "Some tools failed.");
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ToolOutcome::Failed,
            ToolOutcome::Panicked,
            ToolOutcome::TimedOut,
            ToolOutcome::Rejected,
            ToolOutcome::InvalidArguments,
            ToolOutcome::InvalidArguments
        ]
    );
    let results = results_of(&mock.requests()[1]);
    assert!(results.iter().all(|(_, is_error)| *is_error));
    assert_eq!(results[0].0, "Error: disk not mounted");
    assert_eq!(
        results[1].0,
        "Error: the tool crashed (index out of bounds)."
    );
    assert_eq!(results[2].0, "Error: the tool did not finish within 50ms.");
    assert_eq!(
        results[3].0,
        "Unknown tool `nope`. Available tools: fail, boom, slow, typed."
    );
    assert!(
        results[4].0.starts_with("The arguments are not valid JSON"),
        "{}",
        results[4].0
    );
    assert!(
        results[5].0.contains("invalid type: string \"many\""),
        "{}",
        results[5].0
    );
}

#[tokio::test]
async fn disabled_tools_are_hidden_and_refuse_calls() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("echo", json!({})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .tool(echo_tool("other"))
        .build();
    agent.tools().set_enabled("echo", false);
    agent.handle("a", "go").await.unwrap();
    assert_eq!(mock.requests()[0].tool_names(), ["other"]);
    assert_eq!(
        results_of(&mock.requests()[1]),
        [("Tool `echo` is disabled.".to_owned(), true)]
    );
    assert_eq!(
        agent.handle("a", "/echo").await.unwrap().text,
        "Tool `echo` is disabled."
    );
}

#[tokio::test]
async fn tools_read_shared_state_and_their_context() {
    struct Inventory(Vec<&'static str>);
    let tool = from_fn("stock", "Stock.", |_: Value, ctx| async move {
        let inventory = ctx
            .state::<Inventory>()
            .map(|i| i.0.join(","))
            .unwrap_or_default();
        format!("{} for {}", inventory, ctx.conversation())
    });
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("stock", json!({})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(tool)
        .state(Inventory(vec!["nuts", "bolts"]))
        .build();
    agent.handle("carol", "stock?").await.unwrap();
    assert_eq!(results_of(&mock.requests()[1])[0].0, "nuts,bolts for carol");
}

#[tokio::test(start_paused = true)]
async fn notify_later_reaches_the_notifier() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tool = from_fn("remind", "Remind.", |_: Value, ctx| async move {
        ctx.notify_later("time's up", Duration::from_millis(20))
            .await
            .map(|()| "scheduled")
    });
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("remind", json!({})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(tool.clone())
        .notifier(move |conversation: String, text: String| {
            let tx = tx.clone();
            async move {
                tx.send((conversation, text)).unwrap();
            }
        })
        .build();
    agent.handle("dave", "remind me").await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, ("dave".to_owned(), "time's up".to_owned()));

    // Without a notifier the tool learns it could not schedule the message.
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("remind", json!({})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder().provider(mock.clone()).tool(tool).build();
    agent.handle("dave", "remind me").await.unwrap();
    assert!(
        results_of(&mock.requests()[1])[0]
            .0
            .contains("without a notifier")
    );
}
