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

/// Where a heating should be set.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    /// Warm.
    Comfort,
    /// Cool, to save energy.
    Eco,
}

/// The heating of the house, shared by the tools.
struct Heating {
    celsius: std::sync::Mutex<f64>,
}

/// Rooms that can be heated.
fn heatable(args: &SetHeating) -> Result<(), String> {
    if args.room == "attic" {
        return Err("the attic has no radiator; pick another room".into());
    }
    Ok(())
}

/// Set the heating of a room.
#[derive(ferrobot::Tool)]
#[serde(rename_all = "camelCase")]
#[tool(confirm = "Heat {roomName}?", check = heatable, timeout = "1s", retries = 1)]
struct SetHeating {
    /// The room.
    #[serde(rename = "roomName")]
    room: String,
    /// Degrees Celsius.
    #[schemars(range(min = 5, max = 30))]
    target_celsius: f64,
    /// The mode; comfort if not given.
    mode: Option<Mode>,
}

impl ferrobot::tool::TypedTool for SetHeating {
    type Output = Result<DiskReport, std::io::Error>;

    async fn call(self, ctx: ToolContext) -> Self::Output {
        let State(heating) = State::<Heating>::from_context(&ctx)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        *heating.celsius.lock().unwrap() = self.target_celsius;
        let unit = match self.mode.unwrap_or(Mode::Comfort) {
            Mode::Comfort => Unit::Gigabytes,
            Mode::Eco => Unit::Bytes,
        };
        Ok(DiskReport {
            path: self.room,
            free: self.target_celsius as u64,
            unit,
        })
    }
}

#[test]
fn a_derived_tool_has_the_schema_and_options_of_its_struct() {
    let tool = SetHeating::tool();
    let spec = tool.spec();
    assert_eq!(spec.name, "set_heating");
    assert_eq!(spec.description, "Set the heating of a room.");
    let properties = &spec.parameters["properties"];
    assert_eq!(properties["roomName"]["description"], "The room.");
    assert_eq!(properties["targetCelsius"]["maximum"], 30.0);
    assert_eq!(
        spec.parameters["required"],
        json!(["roomName", "targetCelsius"])
    );
    assert_eq!(
        tool.confirmation(&json!({"roomName": "hall"})).as_deref(),
        Some("Heat hall?")
    );
    assert_eq!(tool.timeout(), Some(Duration::from_secs(1)));
    assert_eq!(tool.argument_retries(), 1);
    assert!(!tool.is_exclusive());
}

#[tokio::test]
async fn a_derived_tool_runs_through_the_agent_with_checked_arguments() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call(
            "set_heating",
            json!({"roomName": "attic", "targetCelsius": 50, "mode": "tropical"}),
        ))
        .then(MockTurn::new().tool_call(
            "set_heating",
            json!({"roomName": "hall", "targetCelsius": 21, "mode": "eco"}),
        ))
        .then(MockTurn::new().text("The hall is at 21 °C."));
    let heating = Arc::new(Heating {
        celsius: std::sync::Mutex::new(19.0),
    });
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(SetHeating::tool())
        .state(Arc::clone(&heating))
        .confirm(move |_: ferrobot::confirm::ConfirmRequest| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { true }
        })
        .build();
    let reply = agent.handle("a", "warm the hall").await.unwrap();
    assert_eq!(reply.text, "The hall is at 21 °C.");
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [ToolOutcome::InvalidArguments, ToolOutcome::Ok]);
    // The first call was turned back before anyone was asked.
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let first = &reply.tool_calls[0].content;
    assert!(
        first.starts_with("Invalid arguments for `set_heating`:"),
        "{first}"
    );
    assert!(
        first.contains("- `mode`: unknown variant `tropical`"),
        "{first}"
    );
    assert_eq!(
        reply.tool_calls[1].content,
        r#"{"path":"hall","free":21,"unit":"bytes"}"#
    );
    assert_eq!(*heating.celsius.lock().unwrap(), 21.0);
    // Schema constraints, then the tool's own check, once the types fit.
    let tool = SetHeating::tool();
    let hot = tool
        .check_arguments(&json!({"roomName": "hall", "targetCelsius": 50}))
        .unwrap_err();
    assert!(
        hot.message()
            .contains("- `targetCelsius`: 50 is greater than the maximum of 30"),
        "{}",
        hot.message()
    );
    let attic = tool
        .check_arguments(&json!({"roomName": "attic", "targetCelsius": 20}))
        .unwrap_err();
    assert!(attic.message().contains("- the attic has no radiator"));
}

#[tokio::test]
async fn a_derived_tool_reports_its_own_failure_to_the_model() {
    let error = SetHeating::tool()
        .call(
            json!({"roomName": "hall", "targetCelsius": 20}),
            ToolContext::for_test("t"),
        )
        .await
        .unwrap_err();
    assert!(
        error.message().contains("needs shared state of type"),
        "{}",
        error.message()
    );
    // The struct stays the user's, callable directly.
    let ctx = ToolContext::for_test("t").with_state(Heating {
        celsius: std::sync::Mutex::new(19.0),
    });
    let direct = SetHeating {
        room: "hall".into(),
        target_celsius: 22.0,
        mode: None,
    };
    let report = ferrobot::tool::TypedTool::call(direct, ctx).await.unwrap();
    assert_eq!(report.free, 22);
    assert_eq!(report.unit, Unit::Gigabytes);
}
