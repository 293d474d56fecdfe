//! The built-in commands: one list, and a built-in wins over a tool of the
//! same name.

use ferrobot::Agent;
use ferrobot::agent::Builtin;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use serde_json::{Value, json};

#[tokio::test]
async fn help_lists_every_builtin_and_says_which_tool_one_shadows() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(from_fn(
            "undo",
            "Undo the last deployment.",
            |_: Value, _| async { "rolled back" },
        ))
        .tool(from_fn(
            "uptime",
            "How long the machine has run.",
            |_: Value, _| async { "3 days" },
        ))
        .build();
    let help = agent.handle("a", "/help").await.unwrap().text;
    for builtin in Builtin::ALL {
        let line = format!("/{} — {}\n", builtin.name(), builtin.description());
        assert!(help.contains(&line), "{line:?} missing from {help}");
    }
    assert!(
        help.contains("/uptime — How long the machine has run."),
        "{help}"
    );
    assert!(
        !help.contains("Undo the last deployment"),
        "a shadowed tool is not offered as a command: {help}"
    );
    assert!(
        help.contains("The tool undo is not a command: /undo is built in"),
        "{help}"
    );
    // The built-in runs, not the tool.
    assert_eq!(
        agent.handle("a", "/undo").await.unwrap().text,
        "Nothing to undo."
    );
}

#[tokio::test]
async fn the_model_can_still_call_a_tool_a_builtin_shadows() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("undo", json!({})))
        .then(MockTurn::new().text("Rolled back."));
    let agent = Agent::builder()
        .provider(mock)
        .tool(from_fn(
            "undo",
            "Undo the last deployment.",
            |_: Value, _| async { "rolled back" },
        ))
        .build();
    let reply = agent.handle("a", "undo the deployment").await.unwrap();
    assert_eq!(reply.tool_calls[0].content, "rolled back");
    assert_eq!(reply.text, "Rolled back.");
}

#[tokio::test]
async fn new_sent_to_an_agent_says_the_front_end_owns_it() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let reply = agent.handle("a", "/new").await.unwrap();
    assert!(
        reply.text.contains("/new is not offered here"),
        "{}",
        reply.text
    );
    assert!(agent.history().load("a").await.unwrap().is_empty());
}
