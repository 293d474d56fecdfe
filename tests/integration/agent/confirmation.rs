//! Tools that ask first: declined, approved, unanswered, and panics on the
//! way to the question.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::agent::ToolOutcome;
use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{ToolError, from_fn};
use serde_json::{Value, json};

use super::{counted, results_of};

#[tokio::test]
async fn without_a_confirmation_handler_a_confirming_tool_is_refused() {
    let (tool, ran) = counted("rm");
    let tool = tool.confirm("Delete {path}?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("rm", json!({"path": "/etc"})))
        .then(MockTurn::new().text("I could not."));
    let agent = Agent::builder().provider(mock.clone()).tool(tool).build();
    let reply = agent.handle("a", "delete /etc").await.unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    let (content, is_error) = &results_of(&mock.requests()[1])[0];
    assert!(is_error);
    assert!(
        content.contains("needs the user's confirmation")
            && content.contains("Agent::builder().confirm"),
        "{content}"
    );
}

#[tokio::test]
async fn a_declined_call_returns_cancelled_by_user_and_an_approved_one_runs() {
    let asked = Arc::new(std::sync::Mutex::new(Vec::<ConfirmRequest>::new()));
    let log = Arc::clone(&asked);
    let tool = from_fn("rm", "Delete.", |v: Value, _| async move {
        format!("deleted {}", v["path"].as_str().unwrap_or(""))
    })
    .confirm("Delete {path}?");
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("rm", json!({"path": "/keep"}))
                .tool_call("rm", json!({"path": "/tmp/x"})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(tool)
        .confirm(move |request: ConfirmRequest| {
            let approve = request.arguments["path"] != "/keep";
            log.lock().unwrap().push(request);
            async move { approve }
        })
        .build();
    agent.handle("bob", "clean up").await.unwrap();
    assert_eq!(
        results_of(&mock.requests()[1]),
        [
            ("Cancelled by user.".to_owned(), true),
            ("deleted /tmp/x".to_owned(), false)
        ]
    );
    let asked = asked.lock().unwrap();
    assert_eq!(asked[0].prompt, "Delete /keep?");
    assert_eq!(asked[0].conversation, "bob");
}

#[tokio::test]
async fn a_call_with_bad_arguments_is_turned_back_before_anyone_is_asked() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Rm {
        #[allow(dead_code)]
        path: String,
    }
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let tool = from_fn("rm", "Delete.", |_: Rm, _| async {}).confirm("Delete {path}?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("rm", json!({"file": "/tmp/x"})))
        .then(MockTurn::new().text("Which file?"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(tool)
        .confirm(move |_: ConfirmRequest| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { true }
        })
        .build();
    let reply = agent.handle("a", "delete it").await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 0, "no \"Delete {{path}}?\"");
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    let (content, is_error) = &results_of(&mock.requests()[1])[0];
    assert!(
        *is_error && content.contains("missing field `path`"),
        "{content}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_confirmation_nobody_answers_in_time_is_declined() {
    let (tool, ran) = counted("rm");
    let tool = tool.confirm("Delete it?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("rm", json!({})))
        .then(MockTurn::new().text("Left it."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(tool)
        .confirm(|_: ConfirmRequest| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            true
        })
        .confirm_timeout(Duration::from_millis(100))
        .build();
    let reply = agent.handle("a", "delete it").await.unwrap();
    assert_eq!(reply.text, "Left it.");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    assert_eq!(
        results_of(&mock.requests()[1])[0].0,
        "Not run: the user did not answer the confirmation within 100ms."
    );
}

/// A hand-written tool that panics in its own checks or before its future
/// exists, each in one of the places the agent calls it.
struct Fragile {
    spec: ferrobot::ToolSpec,
}

impl Fragile {
    fn new(name: &str) -> Self {
        Self {
            spec: ferrobot::ToolSpec::new(name, "Fragile.", json!({"type": "object"})),
        }
    }
}

impl ferrobot::tool::Tool for Fragile {
    fn spec(&self) -> &ferrobot::ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        _: Value,
        _: ferrobot::ToolContext,
    ) -> futures_util::future::BoxFuture<'_, Result<ferrobot::tool::ToolOutput, ToolError>> {
        assert!(self.spec.name != "builds", "could not build the future");
        Box::pin(async { Ok("fine".into()) })
    }

    fn confirmation(&self, _: &Value) -> Option<String> {
        assert!(self.spec.name != "asks", "could not word the question");
        (self.spec.name == "confirms").then(|| "Sure?".to_owned())
    }
}

#[tokio::test]
async fn panics_in_a_tools_checks_or_the_confirmation_handler_fail_only_that_call() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("builds", json!({}))
                .tool_call("asks", json!({}))
                .tool_call("confirms", json!({})),
        )
        .then(MockTurn::new().text("Nothing worked."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(Fragile::new("builds"))
        .tool(Fragile::new("asks"))
        .tool(Fragile::new("confirms"))
        .confirm(|request: ConfirmRequest| async move {
            assert!(request.tool.is_empty(), "the prompt window is gone");
            true
        })
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(reply.text, "Nothing worked.");
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ToolOutcome::Panicked,
            ToolOutcome::Panicked,
            ToolOutcome::Declined
        ]
    );
    let results = results_of(&mock.requests()[1]);
    assert_eq!(
        results[0].0,
        "Error: the tool crashed (could not build the future)."
    );
    assert_eq!(
        results[1].0,
        "Error: the tool crashed (could not word the question)."
    );
    assert_eq!(
        results[2].0,
        "Not run: asking the user for confirmation failed."
    );
}
