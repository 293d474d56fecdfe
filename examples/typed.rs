//! A typed answer: the model's reply read into a Rust struct, checked, and
//! sent back with what was wrong when it doesn't fit. Offline: the model is
//! a `MockProvider` whose first answer breaks the schema.
//!
//! ```sh
//! cargo run --example typed
//! ```

use ferrobot::Agent;
use ferrobot::testing::{MockProvider, MockTurn};
use serde_json::json;

/// A city, as the model must describe it.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    /// Its name in English.
    name: String,
    /// How many people live there.
    population: u64,
    /// The country it is in.
    country: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ferrobot::Result<()> {
    let mock = MockProvider::new()
        // A first answer without the country…
        .then(MockTurn::new().output(json!({"name": "Lyon", "population": 522_000})))
        // …and a second one that fits, once the model was told so.
        .then(
            MockTurn::new()
                .output(json!({"name": "Lyon", "population": 522_000, "country": "France"})),
        );
    let agent = Agent::builder().provider(mock.clone()).build();

    let city: City = agent.extract("demo", "Tell me about Lyon.").await?;
    println!(
        "{} ({}) has {} people.",
        city.name, city.country, city.population
    );

    // What the model was told after its first answer: the second request's
    // last message, the output tool's result.
    let second = &mock.requests()[1];
    if let Some(told) = second
        .messages
        .last()
        .and_then(|m| m.tool_results_iter().next())
    {
        println!(
            "After the first answer, the model was told:\n{}",
            told.content
        );
    }
    Ok(())
}
