//! The examples of `docs/permissions.md`.

#[test]
fn rules_in_rust() {
    use ferrobot::policy::{Policy, Rule};

    let policy = Policy::new()
        .rule(Rule::ask("*"))                                          // 1: ask about everything
        .rule(Rule::allow("read_file").argument("path", "/srv/notes/**")) // 2: but read notes freely
        .rule(Rule::deny("read_file").argument("path", "~/.ssh/**"))      // 3: never keys
        .rule(Rule::allow("run_shell").command("git status*"));           // 4
    policy.check().expect("the rules are well written");
    assert_eq!(policy.list().len(), 4);
}

#[tokio::test]
async fn a_deferred_call_resumed() -> ferrobot::Result<()> {
    use ferrobot::confirm::{ConfirmRequest, Decision};
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::{Agent, tool::from_fn};

    let clean = from_fn("clean_logs", "Delete old logs.", |_: serde_json::Value, _| async { "deleted 3 files" })
        .confirm("Delete the old logs?");
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("clean_logs", serde_json::json!({})))
        .then(MockTurn::new().text("Done: 3 files deleted."));
    let agent = Agent::builder()
        .provider(model)
        .tool(clean)
        .confirm(|_: ConfirmRequest| async { Decision::Defer })
        .build();

    let waiting = agent.handle("alice", "clean the logs").await?;
    let id = waiting.pending[0].call_id.clone();
    // … a reviewer approves, maybe tomorrow, maybe in another process …
    let reply = agent.resume("alice", [(id, Decision::Approve)]).await?;
    assert_eq!(reply.text, "Done: 3 files deleted.");
    Ok(())
}
