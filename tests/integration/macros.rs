//! Tools written with `#[tool]` and `#[toolbox]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::agent::ToolOutcome;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{State, Tool, ToolContext};
use ferrobot::{Agent, tool, toolbox};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Units to report sizes in.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Unit {
    /// Bytes.
    Bytes,
    /// Gigabytes.
    Gigabytes,
}

#[derive(Debug, Serialize)]
pub(crate) struct DiskReport {
    path: String,
    free: u64,
    unit: Unit,
}

/// Show disk usage for a mount point.
#[tool]
async fn disk_usage(
    /// Mount point to inspect, e.g. "/".
    path: String,
    /// Report in these units.
    unit: Option<Unit>,
) -> Result<DiskReport, std::io::Error> {
    if path == "/missing" {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such mount point: /missing",
        ));
    }
    Ok(DiskReport {
        path,
        free: 42,
        unit: unit.unwrap_or(Unit::Gigabytes),
    })
}

/// Say hello.
#[tool(name = "greet", confirm = "Greet {who}?", timeout = "50ms")]
fn hello(
    /// Whom to greet.
    who: String,
) -> String {
    format!("Hello, {who}!")
}

struct Greeting(&'static str);

/// Greet with the configured greeting.
#[tool(exclusive)]
async fn configured(
    ctx: ToolContext,
    State(greeting): State<Greeting>,
    /** Whom. */
    who: String,
) {
    let _ = (ctx.conversation(), greeting.0, who);
}

/// Needs a program nobody has.
#[tool(requires = ["ferrobot-no-such-program"])]
async fn exotic() -> u32 {
    7
}

/// Sleeps.
#[tool(timeout = "20ms")]
async fn sleepy() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

#[test]
fn the_schema_comes_from_the_doc_comments() {
    let spec = disk_usage.spec();
    assert_eq!(spec.name, "disk_usage");
    assert_eq!(spec.description, "Show disk usage for a mount point.");
    assert_eq!(
        spec.parameters["properties"]["path"]["description"],
        "Mount point to inspect, e.g. \"/\"."
    );
    assert_eq!(spec.parameters["required"], json!(["path"]));
    assert_eq!(hello.spec().name, "greet");
    assert!(
        configured.spec().parameters["properties"]
            .get("ctx")
            .is_none()
    );
    assert_eq!(
        configured.spec().parameters["properties"]["who"]["description"],
        "Whom."
    );
}

#[tokio::test]
async fn the_function_stays_callable() {
    assert_eq!(hello::run("Ann".into()), "Hello, Ann!");
    assert_eq!(disk_usage::run("/".into(), None).await.unwrap().free, 42);
}

#[tokio::test]
async fn outputs_follow_the_return_type() {
    let ctx = || ToolContext::for_test("t");
    let report = disk_usage
        .call(json!({"path": "/", "unit": "bytes"}), ctx())
        .await
        .unwrap();
    assert_eq!(report, r#"{"path":"/","free":42,"unit":"bytes"}"#);
    let error = disk_usage
        .call(json!({"path": "/missing"}), ctx())
        .await
        .unwrap_err();
    assert_eq!(error.message(), "no such mount point: /missing");
    assert_eq!(
        hello.call(json!({"who": "Bo"}), ctx()).await.unwrap(),
        "Hello, Bo!"
    );
    assert_eq!(exotic::run().await, 7);
}

#[test]
fn attributes_become_tool_policy() {
    assert_eq!(
        hello.confirmation(&json!({"who": "Cy"})).as_deref(),
        Some("Greet Cy?")
    );
    assert_eq!(hello.timeout(), Some(Duration::from_millis(50)));
    assert!(configured.is_exclusive());
    assert!(!hello.is_exclusive());
    assert_eq!(disk_usage.confirmation(&json!({})), None);
    // Arguments are checked without running the tool, naming every problem.
    assert!(hello.check_arguments(&json!({"who": "Cy"})).is_ok());
    let bad = hello.check_arguments(&json!({"whom": "Cy"})).unwrap_err();
    assert!(bad.is_invalid_arguments());
    assert!(
        bad.message().contains("`who` is missing"),
        "{}",
        bad.message()
    );
    let reason = exotic.availability().unwrap_err();
    assert_eq!(
        reason,
        "needs `ferrobot-no-such-program`, which is not on PATH here"
    );
}

#[tokio::test]
async fn every_bad_argument_is_named_and_a_corrected_retry_works() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("disk_usage", json!({"path": 7, "unit": "kilobytes"})))
        .then(MockTurn::new().tool_call("disk_usage", json!({"path": "/", "unit": "gigabytes"})))
        .then(MockTurn::new().text("42 GB free."));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(disk_usage)
        .build();
    let reply = agent.handle("a", "disk?").await.unwrap();
    assert_eq!(reply.text, "42 GB free.");
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [ToolOutcome::InvalidArguments, ToolOutcome::Ok]);
    let first = &reply.tool_calls[0].content;
    assert!(
        first.starts_with("Invalid arguments for `disk_usage`:"),
        "{first}"
    );
    assert!(
        first.contains("- `path`: invalid type: integer `7`, expected a string"),
        "{first}"
    );
    assert!(
        first.contains("- `unit`: unknown variant `kilobytes`, expected `bytes` or `gigabytes`"),
        "{first}"
    );
    let missing = disk_usage
        .call(json!({}), ToolContext::for_test("t"))
        .await
        .unwrap_err();
    assert!(
        missing.message().contains("- `path` is missing"),
        "{}",
        missing.message()
    );
}

#[tokio::test]
async fn zero_argument_tools_accept_empty_strings_and_null() {
    for arguments in [json!(""), json!(null), json!({})] {
        assert_eq!(
            exotic
                .call(arguments, ToolContext::for_test("t"))
                .await
                .unwrap(),
            "7"
        );
    }
}

#[tokio::test]
async fn state_and_context_are_injected() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("configured", json!({"who": "Di"})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(configured)
        .state(Greeting("Hi"))
        .build();
    agent.handle("a", "go").await.unwrap();
    let result = mock.requests()[1]
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .next()
        .unwrap()
        .clone();
    assert_eq!((result.content.as_str(), result.is_error), ("Done.", false));

    let missing = configured
        .call(json!({"who": "Di"}), ToolContext::for_test("t"))
        .await
        .unwrap_err();
    assert!(
        missing.message().contains("Agent::builder().state"),
        "{}",
        missing.message()
    );
}

#[tokio::test(start_paused = true)]
async fn timeouts_from_the_attribute_apply() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("sleepy", json!({})))
        .then(MockTurn::new().text("ok"));
    let agent = Agent::builder().provider(mock).tool(sleepy).build();
    let reply = agent.handle("a", "sleep").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::TimedOut);
}

/// A counter shared by its tools.
struct Counter {
    count: AtomicUsize,
}

#[toolbox]
impl Counter {
    /// Add to the counter.
    #[tool]
    async fn bump(
        &self,
        /// How much to add.
        by: usize,
    ) -> usize {
        self.count.fetch_add(by, Ordering::SeqCst) + by
    }

    /// Read the counter.
    #[tool(name = "read_counter")]
    fn read(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    fn reset(&self) {
        self.count.store(0, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_toolbox_registers_its_tools_sharing_the_value() {
    let counter = Counter {
        count: AtomicUsize::new(0),
    };
    counter.reset();
    assert_eq!(counter.bump(2).await, 2);
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("bump", json!({"by": 3})))
        .then(MockTurn::new().tool_call("read_counter", json!({})))
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tools(counter)
        .build();
    assert_eq!(mock.requests().len(), 0);
    let reply = agent.handle("a", "count").await.unwrap();
    let contents: Vec<&str> = reply
        .tool_calls
        .iter()
        .map(|r| r.content.as_str())
        .collect();
    assert_eq!(contents, ["5", "5"]);
    assert_eq!(mock.requests()[0].tool_names(), ["bump", "read_counter"]);
    let _: Arc<dyn Tool> = Arc::new(disk_usage);
    let _ = Value::Null;
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Walk {
    #[serde(default = "three")]
    depth: u32,
}

fn three() -> u32 {
    3
}

/// Walk a tree.
#[tool]
async fn walk(
    /** How. */
    how: Walk,
    /** Label. */
    label: Option<String>,
) -> String {
    format!("{} {}", how.depth, label.unwrap_or_default())
}

#[tokio::test]
async fn nulls_for_left_out_arguments_mean_their_defaults() {
    let out = walk
        .call(
            json!({"how": {"depth": null}, "label": null}),
            ToolContext::for_test("t"),
        )
        .await;
    assert_eq!(out.unwrap(), "3 ");
}

/// Strict about its input.
#[tool(retries = 1)]
async fn picky(
    /** A number. */
    n: u32,
) -> u32 {
    n
}

#[tokio::test]
async fn a_model_that_keeps_sending_bad_arguments_is_stopped() {
    let mock = MockProvider::from_fn(|request| {
        let last = request.messages.last().unwrap();
        match last.tool_results_iter().next() {
            Some(result) if result.content.starts_with("Not run") => {
                MockTurn::new().text("I could not.")
            }
            _ => MockTurn::new().tool_call("picky", json!({"n": "lots"})),
        }
    });
    let agent = Agent::builder().provider(mock.clone()).tool(picky).build();
    let reply = agent.handle("a", "go").await.unwrap();
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ToolOutcome::InvalidArguments,
            ToolOutcome::InvalidArguments,
            ToolOutcome::Rejected
        ]
    );
    assert!(
        reply.tool_calls[2]
            .content
            .contains("invalid arguments 2 times in this turn"),
        "{}",
        reply.tool_calls[2].content
    );
    assert_eq!(reply.text, "I could not.");
}
