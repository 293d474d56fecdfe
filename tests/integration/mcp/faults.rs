//! Against the server written here: calls, images, errors, schemas, names,
//! trust, instructions, list changes, hangs, cancellation, crashes.

use std::time::Duration;

use ferrobot::Agent;
use ferrobot::agent::ToolOutcome;
use ferrobot::mcp::{Mcp, McpServer, ServerState, Trust};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use serde_json::json;

use super::fake::{Fake, annotated, tool};
use super::{eventually, results, tool_names};

const WAIT: Duration = Duration::from_secs(10);

fn echo() -> rmcp::model::Tool {
    annotated("echo", Some(true), None)
}

/// A model that calls `name` with `arguments`, then answers "done".
fn calling(name: &str, arguments: serde_json::Value) -> MockProvider {
    MockProvider::new()
        .then(MockTurn::new().tool_call(name, arguments))
        .then(MockTurn::new().text("done"))
}

#[tokio::test]
async fn a_servers_tool_runs_through_the_agent_and_the_model_reads_its_answer() {
    let fake = Fake::new(vec![echo()]);
    let mock = calling("fake__echo", json!({"text": "hi"}));
    let agent = Agent::builder().provider(mock.clone()).build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    assert_eq!(mcp.status()[0].tools, ["fake__echo"]);

    let reply = agent.handle("alice", "echo hi").await.unwrap();
    assert_eq!(reply.text, "done");
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    let sent = results(&mock.requests()[1]);
    assert_eq!(sent[0].content, r#"echo got {"text":"hi"}"#);
    assert!(!sent[0].is_error);
}

#[tokio::test]
async fn images_reach_the_model_and_error_results_are_errors_it_reads() {
    let fake = Fake::new(vec![
        annotated("image", Some(true), None),
        annotated("fail", Some(true), None),
    ]);
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("fake__image", json!({}))
                .tool_call("fake__fail", json!({})),
        )
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder().provider(mock.clone()).build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    agent.handle("alice", "go").await.unwrap();
    let sent = results(&mock.requests()[1]);
    assert_eq!(sent[0].content, "A dot:");
    assert_eq!(sent[0].images.len(), 1);
    assert_eq!(sent[0].images[0].media_type(), Some("image/png"));
    assert!(sent[1].is_error);
    assert!(
        sent[1].content.contains("the disk is on fire"),
        "{}",
        sent[1].content
    );
}

#[tokio::test]
async fn a_tool_with_a_schema_ferrobot_cant_use_is_refused_alone() {
    let fake = Fake::new(vec![
        tool(
            "good",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ),
        tool(
            "bad_pattern",
            json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}),
        ),
        tool("not_object", json!({"type": "string"})),
    ]);
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    let status = &mcp.status()[0];
    assert_eq!(status.tools, ["fake__good"]);
    assert_eq!(status.refused.len(), 2, "{:?}", status.refused);
    assert!(
        status.refused[0].starts_with("bad_pattern: its input schema can't be used"),
        "{:?}",
        status.refused
    );
    assert_eq!(
        status.refused[1],
        r#"not_object: its input schema is of type "string", not "object""#
    );
    assert_eq!(tool_names(&agent), ["fake__good"]);
}

#[tokio::test]
async fn arguments_are_checked_against_the_servers_schema_before_the_call() {
    let fake = Fake::new(vec![tool(
        "count",
        json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]}),
    )
    .with_annotations(rmcp::model::ToolAnnotations::from_raw(None, Some(true), None, None, None))]);
    let mock = calling("fake__count", json!({"n": 7}));
    let agent = Agent::builder().provider(mock.clone()).build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    let reply = agent.handle("alice", "count").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert_eq!(
        results(&mock.requests()[1])[0].content,
        "Invalid arguments for `fake__count`:\n- `n`: 7 is greater than the maximum of 3\n\
         Call `fake__count` again with arguments that match its schema."
    );
}

#[tokio::test]
async fn long_and_odd_names_are_fitted_and_a_taken_name_is_refused_clearly() {
    let long = "x".repeat(80);
    let fake = Fake::new(vec![
        echo(),
        tool(&long, json!({"type": "object"})),
        tool("repo.status", json!({"type": "object"})),
    ]);
    let native = from_fn(
        "fake__echo",
        "A native tool.",
        |_: serde_json::Value, _| async { "native" },
    );
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(native)
        .build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    let status = &mcp.status()[0];
    assert_eq!(
        status.refused,
        ["fake__echo: the agent already has a tool named `fake__echo`"]
    );
    assert_eq!(status.tools.len(), 2);
    for name in &status.tools {
        assert!(name.len() <= 64 && name.starts_with("fake__"), "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{name}"
        );
    }
    assert!(status.tools[1].starts_with("fake__repo_status_"));
    // The native tool is untouched.
    assert_eq!(
        agent.tools().get("fake__echo").unwrap().spec().description,
        "A native tool."
    );
}

#[test]
fn server_names_that_cant_prefix_tools_are_refused_before_anything_starts() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let error = Mcp::start(&agent, [McpServer::stdio("my files", "true")]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("\"my files\" can't prefix tool names"),
        "{error}"
    );
    let twice = [
        McpServer::stdio("a", "true"),
        McpServer::http("a", "http://localhost:1/mcp"),
    ];
    let error = Mcp::start(&agent, twice).unwrap_err();
    assert_eq!(
        error.to_string(),
        "two MCP servers are named \"a\"; give each its own name"
    );
}

#[tokio::test]
async fn trust_decides_which_calls_run_headless() {
    let tools = || {
        vec![
            annotated("reader", Some(true), None),
            annotated("plain", None, None),
            annotated("wiper", Some(false), Some(true)),
        ]
    };
    let calls = || {
        MockProvider::new()
            .then(
                MockTurn::new()
                    .tool_call("fake__reader", json!({}))
                    .tool_call("fake__plain", json!({}))
                    .tool_call("fake__wiper", json!({})),
            )
            .then(MockTurn::new().text("done"))
    };
    let mut ran = Vec::new();
    for trust in [Trust::Ask, Trust::ReadOnlyHints, Trust::All] {
        let fake = Fake::new(tools());
        // No confirmation handler: a call that asks is declined.
        let agent = Agent::builder().provider(calls()).build();
        let mcp = Mcp::start(&agent, [fake.server("fake").trust(trust)]).unwrap();
        assert!(mcp.wait_connected(WAIT).await);
        let reply = agent.handle("alice", "go").await.unwrap();
        let outcomes: Vec<bool> = reply
            .tool_calls
            .iter()
            .map(|c| c.outcome == ToolOutcome::Ok)
            .collect();
        ran.push((trust, outcomes));
    }
    assert_eq!(
        ran,
        [
            (Trust::Ask, vec![false, false, false]),
            (Trust::ReadOnlyHints, vec![true, false, false]),
            (Trust::All, vec![true, true, false]),
        ]
    );
}

#[tokio::test]
async fn instructions_join_the_system_prompt_and_leave_with_the_server() {
    let fake = Fake::new(vec![echo()]).instructions("Fake tools answer in French.");
    let mock = MockProvider::replying("ok");
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Be terse.")
        .build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    agent.handle("alice", "hi").await.unwrap();
    assert_eq!(
        mock.requests()[0].system.as_deref(),
        Some("Be terse.\n\nFake tools answer in French.")
    );
    drop(mcp);
    assert!(tool_names(&agent).is_empty());
    agent.handle("alice", "hi").await.unwrap();
    assert_eq!(mock.requests()[1].system.as_deref(), Some("Be terse."));
}

#[tokio::test]
async fn a_changed_tool_list_is_followed() {
    let fake = Fake::new(vec![echo()]);
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let mut changes = agent.tools().changes();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    changes.borrow_and_update();
    fake.add_tool(annotated("later", Some(true), None)).await;
    assert!(
        eventually(WAIT, || tool_names(&agent) == ["fake__echo", "fake__later"]).await,
        "{:?}",
        tool_names(&agent)
    );
    assert!(changes.has_changed().unwrap(), "menus hear of it");
}

#[tokio::test]
async fn a_hanging_call_times_out_and_is_cancelled_on_the_server() {
    let fake = Fake::new(vec![annotated("hang", Some(true), None)]);
    let mock = calling("fake__hang", json!({}));
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = fake.server("fake").timeout(Duration::from_millis(300));
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    let reply = agent.handle("alice", "hang").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::TimedOut);
    assert_eq!(
        results(&mock.requests()[1])[0].content,
        "Error: the tool did not finish within 300ms."
    );
    assert!(
        eventually(WAIT, || fake.cancelled() == ["hang"]).await,
        "notifications/cancelled reached the server"
    );
    // The server is still connected and usable.
    assert_eq!(mcp.status()[0].state, ServerState::Connected);
}

#[tokio::test]
async fn a_cancelled_turn_cancels_the_call_on_the_server() {
    let fake = Fake::new(vec![annotated("hang", Some(true), None)]);
    let mock = calling("fake__hang", json!({}));
    let agent = Agent::builder().provider(mock.clone()).build();
    let mcp = Mcp::start(&agent, [fake.server("fake")]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);
    let events = agent.stream("alice", "hang");
    assert!(eventually(WAIT, || fake.started() == ["hang"]).await);
    assert!(fake.cancelled().is_empty());
    events.cancellation().cancel();
    let end = events.into_reply().await;
    assert!(matches!(end, Err(ferrobot::Error::Cancelled)), "{end:?}");
    assert!(
        eventually(WAIT, || fake.cancelled() == ["hang"]).await,
        "notifications/cancelled reached the server"
    );
}

#[tokio::test]
async fn a_crashed_server_is_unavailable_then_reconnected_with_back_off() {
    let fake = Fake::new(vec![echo()]);
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("fake__echo", json!({"text": "1"})))
        .then(MockTurn::new().text("first"))
        .then(MockTurn::new().tool_call("fake__echo", json!({"text": "2"})))
        .then(MockTurn::new().text("second"));
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = fake
        .server("fake")
        .reconnect_delay(Duration::from_millis(50), Duration::from_millis(200));
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await);

    fake.crash(true);
    assert!(
        eventually(WAIT, || matches!(
            mcp.status()[0].state,
            ServerState::Reconnecting(_)
        ))
        .await,
        "{:?}",
        mcp.status()
    );
    let tool = agent.tools().get("fake__echo").expect("still listed");
    let reason = tool.availability().unwrap_err();
    assert!(
        reason.starts_with("the MCP server `fake` is reconnecting"),
        "{reason}"
    );
    agent.handle("alice", "echo 1").await.unwrap();
    let sent = results(&mock.requests()[1]);
    assert!(
        sent[0].content.starts_with(
            "Tool `fake__echo` is unavailable here: the MCP server `fake` is reconnecting"
        ),
        "{}",
        sent[0].content
    );

    // Several attempts fail meanwhile; once it is back, the next turn uses it.
    fake.revive();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    assert!(fake.connections() >= 2);
    let reply = agent.handle("alice", "echo 2").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(
        results(&mock.requests()[3])[0].content,
        r#"echo got {"text":"2"}"#
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_without_blocking_the_agent() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("still here"))
        .build();
    let never = McpServer::stream("never", || tokio::io::duplex(64).0)
        .connect_timeout(Duration::from_millis(200))
        .reconnect_delay(Duration::from_secs(60), Duration::from_secs(60));
    let mcp = Mcp::start(&agent, [never]).unwrap();
    // A turn runs at once, whatever the server does.
    assert_eq!(
        agent.handle("alice", "hi").await.unwrap().text,
        "still here"
    );
    assert!(mcp.wait_settled(WAIT).await);
    assert!(
        matches!(&mcp.status()[0].state, ServerState::Failed(_)),
        "{:?}",
        mcp.status()
    );
    assert!(!mcp.wait_connected(Duration::from_millis(50)).await);
}
