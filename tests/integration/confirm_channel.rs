//! `confirm::channel`: questions answered from another task.

use ferrobot::agent::ToolOutcome;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, confirm};
use serde_json::{Value, json};

fn agent(handler: confirm::ConfirmSender) -> Agent {
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooting" })
        .confirm("Reboot this machine?");
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Done."));
    Agent::builder()
        .provider(model)
        .tool(reboot)
        .confirm(handler)
        .build()
}

#[tokio::test]
async fn a_question_is_answered_from_another_task() {
    let (handler, mut questions) = confirm::channel(1);
    let agent = agent(handler);
    let asker = tokio::spawn(async move {
        let question = questions.recv().await.unwrap();
        let asked = (
            question.request().tool.clone(),
            question.request().conversation.clone(),
        );
        question.decline();
        asked
    });
    let reply = agent.handle("ops", "reboot it").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    assert_eq!(reply.tool_calls[0].content, "Cancelled by user.");
    assert_eq!(
        asker.await.unwrap(),
        ("reboot".to_owned(), "ops".to_owned())
    );
}

#[tokio::test]
async fn a_dropped_question_or_a_gone_receiver_declines() {
    let (handler, mut questions) = confirm::channel(1);
    let agent = agent(handler);
    tokio::spawn(async move {
        while let Some(question) = questions.recv().await {
            drop(question);
        }
    });
    let reply = agent.handle("ops", "reboot it").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);

    let (handler, questions) = confirm::channel(1);
    drop(questions);
    let reply = agent_with_gone_receiver(handler).await;
    assert_eq!(reply, ToolOutcome::Declined);
}

async fn agent_with_gone_receiver(handler: confirm::ConfirmSender) -> ToolOutcome {
    agent(handler)
        .handle("ops", "reboot it")
        .await
        .unwrap()
        .tool_calls[0]
        .outcome
}
