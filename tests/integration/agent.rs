//! The turn loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::agent::{Status, ToolOutcome};
use ferrobot::confirm::ConfirmRequest;
use ferrobot::provider::{ProviderError, ToolChoice};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{FnTool, ToolError, from_fn};
use ferrobot::{Agent, AgentEvent, Error, Message, Part, Role, Usage};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Barrier;

fn echo_tool(name: &str) -> FnTool {
    from_fn(name, "Echo the arguments.", |v: Value, _| async move {
        v.to_string()
    })
}

/// A tool that records how many calls run at once.
fn counting_tool(name: &str, running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> FnTool {
    from_fn(name, "Count.", move |_: Value, _| {
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(30)).await;
            running.fetch_sub(1, Ordering::SeqCst);
        }
    })
}

/// A tool that does nothing but count its runs.
fn counted(name: &str) -> (FnTool, Arc<AtomicUsize>) {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let tool = from_fn(name, "Count.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {}
    });
    (tool, ran)
}

fn results_of(request: &ferrobot::testing::RecordedRequest) -> Vec<(String, bool)> {
    request
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .map(|r| (r.content.clone(), r.is_error))
        .collect()
}

#[tokio::test]
async fn a_text_reply_is_returned_and_stored() {
    let mock = MockProvider::new().then(MockTurn::new().text("Hello!").usage(Usage {
        input_tokens: 3,
        output_tokens: 2,
        ..Default::default()
    }));
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Be brief.")
        .build();
    let reply = agent.handle("alice", "hi").await.unwrap();
    assert_eq!(reply.text, "Hello!");
    assert_eq!(reply.usage.input_tokens, 3);
    assert_eq!(mock.requests()[0].system.as_deref(), Some("Be brief."));
    let stored = agent.history().load("alice").await.unwrap();
    assert_eq!(stored, [Message::user("hi"), Message::assistant("Hello!")]);
}

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

#[tokio::test]
async fn calls_of_one_round_run_concurrently_up_to_the_limit() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut turn = MockTurn::new();
    for _ in 0..6 {
        turn = turn.tool_call("count", json!({}));
    }
    let mock = MockProvider::new()
        .then(turn)
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool(
            "count",
            Arc::clone(&running),
            Arc::clone(&peak),
        ))
        .max_concurrent_tools(4)
        .build();
    agent.handle("a", "count").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn two_calls_wait_for_each_other_without_deadlock() {
    // Each call waits until the other has started: only concurrent calls finish.
    let barrier = Arc::new(Barrier::new(2));
    let tool = from_fn("meet", "Meet.", move |_: Value, _| {
        let barrier = Arc::clone(&barrier);
        async move {
            tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                .await
                .map(|_| "met")
                .map_err(|_| "alone")
        }
    });
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("meet", json!({}))
                .tool_call("meet", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder().provider(mock.clone()).tool(tool).build();
    agent.handle("a", "meet").await.unwrap();
    assert_eq!(
        results_of(&mock.requests()[1]),
        [("met".to_owned(), false), ("met".to_owned(), false)]
    );
}

#[tokio::test]
async fn exclusive_tools_run_alone() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("solo", json!({}))
                .tool_call("solo", json!({}))
                .tool_call("solo", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool("solo", Arc::clone(&running), Arc::clone(&peak)).exclusive(true))
        .build();
    agent.handle("a", "go").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

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
    ) -> futures_util::future::BoxFuture<'_, Result<String, ToolError>> {
        assert!(self.spec.name != "builds", "could not build the future");
        Box::pin(async { Ok("fine".to_owned()) })
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

#[tokio::test]
async fn a_turn_cancelled_as_the_tools_lock_comes_free_does_not_start_its_tool() {
    // Ten times: without the check after the lock, the tool would start
    // about every other time.
    for _ in 0..10 {
        let release = Arc::new(tokio::sync::Notify::new());
        let hold = Arc::clone(&release);
        let solo = from_fn("solo", "Solo.", move |_: Value, _| {
            let hold = Arc::clone(&hold);
            async move { hold.notified().await }
        })
        .exclusive(true);
        let (count, ran) = counted("count");
        let mock = MockProvider::from_fn(|request| {
            let first = &request.messages[0];
            match (request.messages.len(), first.text().as_str()) {
                (1, "hold") => MockTurn::new().tool_call("solo", json!({})),
                (1, _) => MockTurn::new().tool_call("count", json!({})),
                _ => MockTurn::new().text("done"),
            }
        });
        let agent = Agent::builder()
            .provider(mock)
            .tool(solo)
            .tool(count)
            .build();
        let holding = tokio::spawn(agent.stream("a", "hold").into_reply());
        tokio::time::sleep(Duration::from_millis(30)).await;
        let waiting = agent.stream("b", "count");
        let stop = waiting.cancellation();
        let waiting = tokio::spawn(waiting.into_reply());
        tokio::time::sleep(Duration::from_millis(30)).await;
        // The lock comes free first, then the turn is cancelled, before
        // either task runs again.
        release.notify_one();
        stop.cancel();
        assert!(matches!(waiting.await.unwrap(), Err(Error::Cancelled)));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "the cancelled turn's tool never ran"
        );
        holding.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_turn_waiting_for_another_conversations_exclusive_tool_can_be_cancelled() {
    let release = Arc::new(tokio::sync::Notify::new());
    let hold = Arc::clone(&release);
    let solo = from_fn("solo", "Solo.", move |_: Value, _| {
        let hold = Arc::clone(&hold);
        async move { hold.notified().await }
    })
    .exclusive(true);
    let mock = MockProvider::from_fn(|request| {
        if request
            .messages
            .last()
            .is_some_and(|m| m.role == Role::User)
        {
            let tool = if request.messages[0].text() == "hold" {
                "solo"
            } else {
                "echo"
            };
            MockTurn::new().tool_call(tool, json!({}))
        } else {
            MockTurn::new().text("done")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(solo)
        .tool(echo_tool("echo"))
        .build();
    let holding = agent.stream("a", "hold");
    let holding = tokio::spawn(holding.into_reply());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiting = agent.stream("b", "wait");
    let stop = waiting.cancellation();
    let waiting = tokio::spawn(waiting.into_reply());
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the cancelled turn ends without waiting for `solo`")
        .unwrap();
    assert!(matches!(ended, Err(Error::Cancelled)), "{ended:?}");
    release.notify_one();
    assert_eq!(holding.await.unwrap().unwrap().text, "done");
}

#[tokio::test]
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

#[tokio::test]
async fn calls_run_one_at_a_time_when_one_needs_confirmation() {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("count", json!({}))
                .tool_call("ask", json!({}))
                .tool_call("count", json!({})),
        )
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(counting_tool(
            "count",
            Arc::clone(&running),
            Arc::clone(&peak),
        ))
        .tool(counting_tool("ask", Arc::clone(&running), Arc::clone(&peak)).confirm("Sure?"))
        .confirm(|_: ConfirmRequest| async { true })
        .build();
    agent.handle("a", "go").await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test]
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

#[tokio::test]
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

#[tokio::test]
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
            .contains("invalid arguments")
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

#[tokio::test]
async fn turns_of_one_conversation_never_interleave() {
    let mock = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        if last.role == Role::User {
            MockTurn::new()
                .tool_call("echo", json!({}))
                .delay(Duration::from_millis(5))
        } else {
            MockTurn::new().text("ok")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    let (a, b) = tokio::join!(agent.handle("same", "one"), agent.handle("same", "two"));
    a.unwrap();
    b.unwrap();
    let roles: Vec<Role> = agent
        .history()
        .load("same")
        .await
        .unwrap()
        .iter()
        .map(|m| m.role)
        .collect();
    let turn = [Role::User, Role::Assistant, Role::Tool, Role::Assistant];
    assert_eq!(roles, [turn, turn].concat());
}

#[tokio::test]
async fn different_conversations_do_not_wait_for_each_other() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let wait = Arc::clone(&gate);
    let mock = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        match (last.role, last.text().as_str()) {
            (Role::User, "block") => MockTurn::new().tool_call("wait", json!({})),
            _ => MockTurn::new().text("ok"),
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .tool(from_fn("wait", "Wait.", move |_: Value, _| {
            let wait = Arc::clone(&wait);
            async move { wait.notified().await }
        }))
        .build();
    let blocked = agent.stream("alice", "block");
    let other = tokio::time::timeout(Duration::from_secs(5), agent.handle("bob", "hi")).await;
    assert_eq!(other.expect("bob waited for alice").unwrap().text, "ok");
    gate.notify_one();
    blocked.into_reply().await.unwrap();
}

#[tokio::test]
async fn events_arrive_in_the_order_things_happen() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .reasoning("hmm")
                .tool_call("echo", json!({"a": 1}))
                .usage(Usage {
                    input_tokens: 1,
                    output_tokens: 1,
                    ..Default::default()
                }),
        )
        .then(MockTurn::new().text("Hello world").chunked(6));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    let events: Vec<AgentEvent> = agent.stream("a", "hi").map(Result::unwrap).collect().await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            AgentEvent::Status(Status::Thinking) => "thinking".into(),
            AgentEvent::Status(Status::RunningTool { tool }) => format!("running {tool}"),
            AgentEvent::ReasoningDelta(t) => format!("reasoning {t}"),
            AgentEvent::ToolCallDelta(_) => "call delta".into(),
            AgentEvent::ToolCallStarted(call) => format!("started {}", call.name),
            AgentEvent::ToolCallFinished(record) => {
                format!("finished {} {:?}", record.call.name, record.outcome)
            }
            AgentEvent::TextDelta(t) => format!("text {t}"),
            AgentEvent::Usage(_) => "usage".into(),
            AgentEvent::Done(reply) => format!("done {}", reply.text),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "thinking",
            "reasoning hmm",
            "call delta",
            "usage",
            "started echo",
            "running echo",
            "finished echo Ok",
            "thinking",
            "text Hello ",
            "text world",
            "done Hello world"
        ]
    );
}

#[tokio::test]
async fn a_cancelled_turn_keeps_what_streamed_marked_interrupted() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text("one two three four five")
            .chunked(4)
            .delay(Duration::from_millis(20)),
    );
    let agent = Agent::builder().provider(mock).build();
    let mut stream = agent.stream("a", "count");
    let cancel = stream.cancellation();
    let mut seen = String::new();
    let end = loop {
        match stream.next().await.unwrap() {
            Ok(AgentEvent::TextDelta(t)) => {
                seen.push_str(&t);
                cancel.cancel();
            }
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(matches!(end, Error::Cancelled));
    let stored = agent.history().load("a").await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored[1].interrupted);
    assert_eq!(stored[1].text(), seen);
}

#[tokio::test]
async fn cancelling_during_a_tool_keeps_call_and_result_paired() {
    let mock = MockProvider::new().then(MockTurn::new().tool_call("slow", json!({})));
    let slow = from_fn("slow", "Sleeps.", |_: Value, _| async {
        tokio::time::sleep(Duration::from_secs(30)).await
    });
    let agent = Agent::builder().provider(mock).tool(slow).build();
    let mut stream = agent.stream("a", "go");
    let cancel = stream.cancellation();
    while let Some(event) = stream.next().await {
        match event {
            Ok(AgentEvent::Status(Status::RunningTool { .. })) => cancel.cancel(),
            Ok(_) => {}
            Err(e) => {
                assert!(matches!(e, Error::Cancelled));
                break;
            }
        }
    }
    let stored = agent.history().load("a").await.unwrap();
    let result = stored
        .last()
        .unwrap()
        .tool_results_iter()
        .next()
        .unwrap()
        .clone();
    assert_eq!(result.call_id, stored[1].tool_calls().next().unwrap().id);
    assert!(result.is_error && result.content.starts_with("Interrupted"));
}

#[tokio::test]
async fn a_provider_failure_is_a_typed_error_with_a_message_to_show() {
    let mock = MockProvider::new().then(MockTurn::failing(ProviderError::Status {
        status: 503,
        message: "model is loading".into(),
        retry_after: None,
    }));
    let agent = Agent::builder().provider(mock).build();
    let error = agent.handle("a", "hi").await.unwrap_err();
    assert!(matches!(error, Error::Provider(_)));
    assert_eq!(
        error.user_message(),
        "LLM unavailable: server answered 503: model is loading — slash commands still work"
    );
    // The user's message is kept; the next turn will see it.
    assert_eq!(
        agent.history().load("a").await.unwrap(),
        [Message::user("hi")]
    );
}

#[tokio::test]
async fn a_failure_mid_answer_keeps_the_partial_text_and_drops_the_unrun_call() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text("Partial")
            .tool_call("echo", json!({}))
            .error(ProviderError::Stream {
                message: "reset".into(),
            }),
    );
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    assert!(agent.handle("a", "hi").await.is_err());
    let stored = agent.history().load("a").await.unwrap();
    assert_eq!(stored[1].parts, [Part::text("Partial")]);
    assert!(stored[1].interrupted);
}

#[tokio::test]
async fn a_refusal_is_the_reply_text() {
    let agent = Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().refusal("I can't help with that.")))
        .build();
    let reply = agent.handle("a", "something bad").await.unwrap();
    assert!(reply.is_refusal);
    assert_eq!(reply.text, "I can't help with that.");
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

#[tokio::test]
async fn notify_later_reaches_the_notifier() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tool = from_fn("remind", "Remind.", |_: Value, ctx| async move {
        ctx.notify_later("time's up", Duration::from_millis(20))
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

#[tokio::test]
async fn ten_thousand_conversations_run_side_by_side() {
    let mock = MockProvider::from_fn(|request| match request.messages.last().unwrap().role {
        Role::User => MockTurn::new().tool_call("echo", json!({"n": 1})),
        _ => MockTurn::new().text("done"),
    });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(echo_tool("echo"))
        .build();
    let turns = (0..10_000).map(|i| {
        let agent = agent.clone();
        tokio::spawn(async move { agent.handle(&format!("user-{i}"), "go").await })
    });
    for turn in futures_util::future::join_all(turns).await {
        assert_eq!(turn.unwrap().unwrap().text, "done");
    }
    assert_eq!(mock.requests().len(), 20_000);
}

/// Records every span's name and fields.
#[derive(Clone, Default)]
struct SpanLog(Arc<std::sync::Mutex<Vec<LoggedSpan>>>);

/// A span's id, name and fields.
type LoggedSpan = (u64, String, std::collections::BTreeMap<String, String>);

struct FieldVisitor<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>>
    tracing_subscriber::Layer<S> for SpanLog
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if !RECORDING.get() {
            return;
        }
        let mut fields = std::collections::BTreeMap::new();
        attrs.record(&mut FieldVisitor(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((id.into_u64(), attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if !RECORDING.get() {
            return;
        }
        let mut log = self.0.lock().unwrap();
        if let Some((_, _, fields)) = log.iter_mut().rev().find(|(i, _, _)| *i == id.into_u64()) {
            values.record(&mut FieldVisitor(fields));
        }
    }
}

thread_local! {
    /// Whether spans made on this thread are logged: the traced test's only.
    static RECORDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The spans of recording threads. One subscriber for the whole test
/// binary, set globally: tracing decides once per span site whether anyone
/// listens, on whichever thread reaches it first, so a subscriber scoped to
/// one test would miss the sites another test's thread reached first.
fn span_log() -> &'static SpanLog {
    use tracing_subscriber::layer::SubscriberExt;
    static LOG: std::sync::OnceLock<SpanLog> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log = SpanLog::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(log.clone()))
            .expect("no other global subscriber in these tests");
        log
    })
}

#[tokio::test]
async fn turns_model_calls_and_tool_calls_are_traced_with_gen_ai_fields() {
    let log = span_log();
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("echo", json!({})).usage(Usage {
            input_tokens: 11,
            output_tokens: 7,
            ..Default::default()
        }))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    // A current-thread runtime: the turn and its tools run on this thread.
    RECORDING.set(true);
    agent.handle("erin", "hi").await.unwrap();
    RECORDING.set(false);
    let spans = log.0.lock().unwrap().clone();
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, n, _)| n == name)
            .map(|(_, _, f)| f.clone())
            .unwrap_or_else(|| panic!("no `{name}` span"))
    };
    assert_eq!(
        find("turn")
            .get("gen_ai.conversation.id")
            .map(String::as_str),
        Some("erin"),
        "{spans:#?}"
    );
    let chat = find("chat");
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.request.model"], "mock");
    assert_eq!(chat["gen_ai.usage.input_tokens"], "11");
    assert_eq!(chat["gen_ai.usage.output_tokens"], "7");
    assert_eq!(chat["gen_ai.response.finish_reasons"], "tool_calls");
    let tool = find("execute_tool");
    assert_eq!(tool["gen_ai.tool.name"], "echo");
    assert_eq!(tool["gen_ai.tool.call.id"], "call_1");
}

#[tokio::test]
async fn undo_takes_back_the_last_turn_and_says_what_it_took() {
    let mock = MockProvider::new()
        .then(MockTurn::new().text("Noted."))
        .then(MockTurn::new().tool_call("echo", json!({"n": 1})))
        .then(MockTurn::new().text("Echoed."));
    let agent = Agent::builder()
        .provider(mock)
        .tool(echo_tool("echo"))
        .build();
    agent.handle("a", "remember the backup host").await.unwrap();
    agent.handle("a", "echo one").await.unwrap();
    assert_eq!(agent.history().load("a").await.unwrap().len(), 6);
    // `/undo` takes back the turn with its tool call and result.
    let reply = agent.handle("a", "/undo").await.unwrap();
    assert_eq!(
        reply.text,
        "Took back the last message (\u{201c}echo one\u{201d}) and its answer. What its tools did is not undone."
    );
    let left = agent.history().load("a").await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(left[0].text(), "remember the backup host");
    assert_eq!(
        agent.undo("a").await.unwrap().as_deref(),
        Some("remember the backup host")
    );
    assert_eq!(
        agent.handle("a", "/undo").await.unwrap().text,
        "Nothing to undo."
    );
    assert!(
        agent
            .handle("a", "/help")
            .await
            .unwrap()
            .text
            .contains("/undo")
    );
}

#[tokio::test]
async fn undo_after_a_compacted_turn_takes_back_the_original_and_the_summary() {
    use ferrobot::history::{Compaction, ContextPolicy};
    let compaction = Compaction::builder().context_window(600).build();
    let instructions = compaction.instructions.clone();
    let mock = MockProvider::from_fn(move |request| {
        if request.system.as_deref() == Some(instructions.as_str()) {
            MockTurn::new().text("They talked at length.")
        } else {
            MockTurn::new().text("ok")
        }
    });
    let agent = Agent::builder()
        .provider(mock)
        .context(ContextPolicy::builder().compaction(compaction).build())
        .build();
    for topic in ["alpha", "beta"] {
        agent
            .handle("a", &format!("{topic} {}", "w ".repeat(500)))
            .await
            .unwrap();
    }
    let before = agent.history().load("a").await.unwrap();
    agent
        .handle("a", &format!("gamma {}", "w ".repeat(500)))
        .await
        .unwrap();
    let stored = agent.history().load("a").await.unwrap();
    let summaries = |messages: &[Message]| messages.iter().filter(|m| m.summary).count();
    assert!(
        summaries(&stored) > summaries(&before),
        "the last turn compacted"
    );
    let taken = agent.undo("a").await.unwrap().unwrap();
    assert!(taken.starts_with("gamma"), "{taken}");
    let left = agent.history().load("a").await.unwrap();
    assert_eq!(left, before, "back to just before the turn");
}

/// A store that can't truncate.
#[derive(Debug, Default)]
struct AppendOnly(ferrobot::history::MemoryHistory);

impl ferrobot::history::HistoryStore for AppendOnly {
    fn load<'a>(
        &'a self,
        c: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<Message>, ferrobot::history::HistoryError>>
    {
        self.0.load(c)
    }
    fn append<'a>(
        &'a self,
        c: &'a str,
        m: &'a [Message],
    ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.0.append(c, m)
    }
    fn clear<'a>(
        &'a self,
        c: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>> {
        self.0.clear(c)
    }
    fn list(
        &self,
    ) -> futures_util::future::BoxFuture<
        '_,
        Result<Vec<ferrobot::history::ConversationInfo>, ferrobot::history::HistoryError>,
    > {
        self.0.list()
    }
}

#[tokio::test]
async fn undo_on_a_store_that_cannot_truncate_says_so() {
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .history(AppendOnly::default())
        .build();
    agent.handle("a", "hi").await.unwrap();
    assert_eq!(
        agent.handle("a", "/undo").await.unwrap().text,
        "This conversation's history can't take messages back."
    );
    assert_eq!(
        agent.history().load("a").await.unwrap().len(),
        2,
        "nothing lost"
    );
}
