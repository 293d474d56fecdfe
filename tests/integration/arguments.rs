//! Arguments checked before a call is confirmed: the schema's constraints
//! (`#[schemars(range, length, regex)]`), a `#[tool(check = …)]` function,
//! and the same for `from_fn`; and state given as an `Arc`, read back by the
//! program, checked at `build()`.

use std::sync::{Arc, Mutex};

use ferrobot::agent::ToolOutcome;
use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{State, Tool, ToolContext, from_fn};
use ferrobot::{Agent, tool};
use serde::Deserialize;
use serde_json::json;

use super::agent::results_of;

/// The house's thermostat, shared by the tools and the program.
#[derive(Debug)]
pub(crate) struct Thermostat {
    celsius: Mutex<f64>,
}

/// Rooms only ever have lower-case names; "attic" is not heated.
fn heated_room(_celsius: &f64, room: &str) -> Result<(), String> {
    if room == "attic" {
        return Err("the attic has no radiator; pick another room".to_owned());
    }
    Ok(())
}

/// Set the thermostat of a room.
#[tool(confirm = "Set {room} to {celsius} °C?", check = heated_room)]
async fn set_thermostat(
    State(thermostat): State<Thermostat>,
    /// Degrees Celsius.
    #[schemars(range(min = 5, max = 30))]
    celsius: f64,
    /// The room, e.g. "kitchen".
    #[schemars(length(min = 1, max = 20), regex(pattern = r"^[a-z]+$"))]
    room: String,
) -> String {
    *thermostat.celsius.lock().unwrap() = celsius;
    format!("{room} set to {celsius} °C")
}

/// An agent with `set_thermostat`, the state as an `Arc` the test keeps,
/// and a confirmation handler that approves and records each question.
fn house(mock: &MockProvider) -> (Agent, Arc<Thermostat>, Arc<Mutex<Vec<String>>>) {
    let thermostat = Arc::new(Thermostat {
        celsius: Mutex::new(19.0),
    });
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&asked);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(set_thermostat)
        .state(Arc::clone(&thermostat))
        .confirm(move |request: ConfirmRequest| {
            log.lock().unwrap().push(request.prompt);
            async { true }
        })
        .build();
    (agent, thermostat, asked)
}

fn one_call(arguments: serde_json::Value) -> MockProvider {
    MockProvider::new()
        .then(MockTurn::new().tool_call("set_thermostat", arguments))
        .then(MockTurn::new().text("done"))
}

#[tokio::test]
async fn a_value_out_of_range_is_turned_back_before_the_user_is_asked() {
    let mock = one_call(json!({"celsius": 4, "room": "kitchen"}));
    let (agent, thermostat, asked) = house(&mock);
    let reply = agent.handle("home", "make it 4 degrees").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert!(asked.lock().unwrap().is_empty(), "nobody is asked");
    assert_eq!(*thermostat.celsius.lock().unwrap(), 19.0, "nothing ran");
    let (content, is_error) = &results_of(&mock.requests()[1])[0];
    assert!(is_error);
    assert_eq!(
        content,
        "Invalid arguments for `set_thermostat`:\n- `celsius`: 4 is less than the minimum of 5\n\
         Call `set_thermostat` again with arguments that match its schema."
    );
}

#[tokio::test]
async fn every_broken_constraint_is_named() {
    let mock = one_call(json!({"celsius": 500, "room": "Living Room, the big one"}));
    let (agent, _, asked) = house(&mock);
    agent.handle("home", "heat").await.unwrap();
    assert!(asked.lock().unwrap().is_empty());
    let (content, _) = &results_of(&mock.requests()[1])[0];
    for problem in [
        "`celsius`: 500 is greater than the maximum of 30",
        "`room`: \"Living Room, the big one\" is longer than 20 characters",
        "`room`: \"Living Room, the big one\" does not match \"^[a-z]+$\"",
    ] {
        assert!(content.contains(problem), "{problem} in {content}");
    }
}

#[tokio::test]
async fn the_tools_own_check_runs_before_the_question_too() {
    let mock = one_call(json!({"celsius": 20, "room": "attic"}));
    let (agent, thermostat, asked) = house(&mock);
    let reply = agent.handle("home", "heat the attic").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert!(asked.lock().unwrap().is_empty());
    assert_eq!(*thermostat.celsius.lock().unwrap(), 19.0);
    let (content, _) = &results_of(&mock.requests()[1])[0];
    assert_eq!(
        content,
        "Invalid arguments for `set_thermostat`:\n- the attic has no radiator; pick another room\n\
         Call `set_thermostat` again with arguments that match its schema."
    );
}

#[tokio::test]
async fn good_arguments_are_asked_about_and_the_program_sees_the_state_change() {
    let mock = one_call(json!({"celsius": 21.5, "room": "kitchen"}));
    let (agent, thermostat, asked) = house(&mock);
    let reply = agent.handle("home", "21.5 in the kitchen").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(*asked.lock().unwrap(), ["Set kitchen to 21.5 °C?"]);
    assert_eq!(*thermostat.celsius.lock().unwrap(), 21.5);
    let seen = agent.state::<Thermostat>().expect("the agent has it");
    assert!(Arc::ptr_eq(&seen, &thermostat), "the very Arc given");
}

#[tokio::test]
async fn a_tool_checks_its_constraints_when_called_directly_too() {
    let ctx = ToolContext::for_test("t").with_state(Thermostat {
        celsius: Mutex::new(19.0),
    });
    let bad = set_thermostat.check_arguments(&json!({"celsius": 31, "room": "hall"}));
    assert!(bad.unwrap_err().is_invalid_arguments());
    let error = set_thermostat
        .call(json!({"celsius": 31, "room": "hall"}), ctx.clone())
        .await
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("31 is greater than the maximum of 30")
    );
    let ok = set_thermostat
        .call(json!({"celsius": 20, "room": "hall"}), ctx)
        .await;
    assert_eq!(ok.unwrap(), "hall set to 20 °C");
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Dim {
    /// Brightness in percent.
    #[schemars(range(max = 100))]
    pct: u8,
}

#[tokio::test]
async fn from_fn_tools_hold_their_constraints_before_confirmation() {
    let dim = from_fn("dim", "Dim the lights.", |args: Dim, _| async move {
        format!("dimmed to {}%", args.pct)
    })
    .confirm("Dim to {pct}%?");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("dim", json!({"pct": 150})))
        .then(MockTurn::new().text("ok"));
    let asked = Arc::new(Mutex::new(0));
    let count = Arc::clone(&asked);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(dim)
        .confirm(move |_: ConfirmRequest| {
            *count.lock().unwrap() += 1;
            async { true }
        })
        .build();
    let reply = agent.handle("home", "dim").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::InvalidArguments);
    assert_eq!(*asked.lock().unwrap(), 0);
    let (content, _) = &results_of(&mock.requests()[1])[0];
    assert!(
        content.contains("`pct`: 150 is greater than the maximum of 100"),
        "{content}"
    );
}

#[test]
fn building_without_a_tools_state_names_the_tool_the_type_and_what_is_there() {
    struct Lights;
    let built = std::panic::catch_unwind(|| {
        Agent::builder()
            .provider(MockProvider::replying("ok"))
            .tool(set_thermostat)
            .state(Lights)
            .build()
    });
    let panic = built.expect_err("build() refuses");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("`set_thermostat` needs `integration::arguments::Thermostat`")
            && message.contains("Agent::builder().state(value)")
            && message.contains("the state it has: `")
            && message.contains("Lights`"),
        "{message}"
    );
}

#[tokio::test]
async fn state_given_plainly_or_as_an_arc_reads_the_same() {
    let plain = ToolContext::for_test("t").with_state(7_u32);
    let shared = ToolContext::for_test("t").with_state(Arc::new(7_u32));
    assert_eq!(plain.state::<u32>(), Some(&7));
    assert_eq!(shared.state::<u32>(), Some(&7));
    assert_eq!(shared.state_handle::<u32>().as_deref(), Some(&7));
    let missing = State::<String>::from_context(&shared).unwrap_err();
    assert!(
        missing
            .message()
            .contains("the state it has: `alloc::sync::Arc<u32>`"),
        "{missing}"
    );
}

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code, reason = "only its schema and parsing are used")]
struct Invite {
    /// Whom to invite.
    #[schemars(email)]
    to: String,
    /// The meeting's page.
    #[schemars(url)]
    link: Option<String>,
    /// How warm the room should be.
    #[schemars(extend("enum" = ["eco", "comfort"]))]
    mode: String,
    /// Guests' names.
    #[schemars(length(max = 2), inner(length(min = 2)))]
    guests: Vec<String>,
}

#[test]
fn the_documented_schemars_attributes_are_all_enforced() {
    let invite = from_fn("invite", "Invite someone.", |_: Invite, _| async {});
    let fine = json!({"to": "ann@example.com", "link": "https://example.com/m", "mode": "eco", "guests": ["bo"]});
    assert!(invite.check_arguments(&fine).is_ok());
    let bad = json!({"to": "ann", "link": "not a url", "mode": "hot", "guests": ["b", "cy", "di"]});
    let message = invite
        .check_arguments(&bad)
        .unwrap_err()
        .message()
        .to_owned();
    for place in ["`to`", "`link`", "`mode`", "`guests`", "`guests[0]`"] {
        assert!(
            message.contains(&format!("\n- {place}: ")),
            "{place} in {message}"
        );
    }
}
