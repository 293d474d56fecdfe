//! The tool-argument pipeline on what a model may write: arbitrary text as
//! the arguments of a typed `#[tool]` (nested objects, enums, options,
//! bounds, patterns) and of a schema-only tool, run through a whole turn.
//! Never a panic; the turn always ends, the bad call answered to the model.
#![no_main]

use ferrobot::Agent;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot_fuzz::block_on;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Unit {
    Celsius,
    Fahrenheit,
}

#[derive(Deserialize, JsonSchema)]
struct Place {
    /// A city.
    #[schemars(length(min = 1, max = 40), regex(pattern = r"^[\p{L} .'-]+$"))]
    city: String,
    #[schemars(range(min = -90.0, max = 90.0))]
    latitude: Option<f64>,
}

/// The weather in some places.
#[ferrobot::tool]
async fn weather(
    /// Where.
    places: Vec<Place>,
    /// In what.
    unit: Option<Unit>,
    /// Days ahead.
    #[schemars(range(min = 0, max = 14))]
    days: u8,
) -> String {
    let unit = match unit {
        Some(Unit::Fahrenheit) => "°F",
        _ => "°C",
    };
    let places: Vec<String> = places
        .iter()
        .map(|p| format!("{} ({:?})", p.city, p.latitude))
        .collect();
    format!("{} in {unit}, {days} days", places.join(", "))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(arguments) = std::str::from_utf8(data) else {
        return;
    };
    let loose = from_fn(
        "loose",
        "Anything.",
        |value: serde_json::Value, _ctx| async move { value.to_string() },
    );
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .raw_tool_call("call_1", "weather", arguments)
                .raw_tool_call("call_2", "loose", arguments),
        )
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock)
        .tool(weather)
        .tool(loose)
        .build();
    let reply = block_on(agent.handle("fuzz", "go"));
    assert_eq!(reply.expect("the turn ends").text, "done");
});
