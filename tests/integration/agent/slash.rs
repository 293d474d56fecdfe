//! Slash commands: tools run without the model, confirmation, during a turn.

use std::sync::Arc;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use serde_json::{Value, json};

use super::echo_tool;

#[tokio::test]
async fn slash_commands_run_tools_without_the_model_or_history() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Add {
        a: i64,
        b: i64,
    }
    let mock = MockProvider::new();
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(from_fn(
            "add",
            "Add two integers.\nMore text.",
            |x: Add, _| async move { x.a + x.b },
        ))
        .tool(echo_tool("echo"))
        .build();
    assert_eq!(agent.handle("a", "/add a=2 b=3").await.unwrap().text, "5");
    assert_eq!(
        agent
            .handle("a", r#"/echo msg="hello world""#)
            .await
            .unwrap()
            .text,
        r#"{"msg":"hello world"}"#
    );
    let help = agent.handle("a", "/help").await.unwrap().text;
    assert!(
        help.contains("/add a=… b=… — Add two integers.\n"),
        "{help}"
    );
    assert!(
        agent
            .handle("a", "/nope")
            .await
            .unwrap()
            .text
            .contains("Unknown command /nope")
    );
    assert!(
        agent
            .handle("a", "/add a=x b=1")
            .await
            .unwrap()
            .text
            .starts_with("Invalid arguments for `add`:\n- `a`: ")
    );
    assert!(mock.requests().is_empty(), "the model was called");
    assert!(agent.history().load("a").await.unwrap().is_empty());
}

#[tokio::test]
async fn slash_commands_still_ask_for_confirmation() {
    let tool =
        from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooting" }).confirm("Reboot now?");
    let agent = Agent::builder()
        .provider(MockProvider::new())
        .tool(tool)
        .confirm(|_: ConfirmRequest| async { false })
        .build();
    assert_eq!(
        agent.handle("a", "/reboot").await.unwrap().text,
        "Cancelled by user."
    );
}

#[tokio::test]
async fn slash_commands_stay_answerable_during_a_turn() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let wait = Arc::clone(&gate);
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("wait", json!({})))
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(from_fn("wait", "Wait.", move |_: Value, _| {
            let wait = Arc::clone(&wait);
            async move { wait.notified().await }
        }))
        .tool(echo_tool("echo"))
        .build();
    let turn = agent.stream("a", "wait for it");
    // The turn holds the lock while its tool waits; the slash command does not need it.
    let slash = tokio::time::timeout(Duration::from_secs(5), agent.handle("a", "/echo")).await;
    assert_eq!(slash.unwrap().unwrap().text, "{}");
    gate.notify_one();
    assert_eq!(turn.into_reply().await.unwrap().text, "done");
}
