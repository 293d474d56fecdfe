//! Run with: cargo run --example tools
//!
//! Tools written with `#[tool]` and `#[toolbox]`, driven offline by a
//! scripted `MockProvider` so it runs anywhere: a plain function, one asking
//! for confirmation, one reading shared state, a toolbox, and what the model
//! reads when its arguments don't fit.

use std::sync::Mutex;

use ferrobot::confirm::ConfirmRequest;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::State;
use ferrobot::{Agent, AgentEvent, tool, toolbox};
use futures_util::StreamExt;
use serde_json::json;

/// Convert a temperature from Celsius to Fahrenheit.
#[tool]
async fn to_fahrenheit(
    /** Degrees Celsius. */
    celsius: f64,
) -> f64 {
    celsius * 9.0 / 5.0 + 32.0
}

/// Remove a file from the scratch directory.
#[tool(confirm = "Remove {name} from scratch?")]
async fn remove_scratch(
    /** The file's name. */
    name: String,
) -> String {
    format!("(pretending to remove {name})")
}

/// Where this machine is.
struct Site(&'static str);

/// The name of the site this machine is at.
#[tool]
async fn site(State(here): State<Site>) -> String {
    here.0.to_owned()
}

/// A shopping list the model can add to and read.
struct Shopping {
    items: Mutex<Vec<String>>,
}

#[toolbox]
impl Shopping {
    /// Add an item to the shopping list.
    #[tool]
    fn add_item(
        &self,
        /** What to buy. */
        item: String,
    ) -> usize {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        items.push(item);
        items.len()
    }

    /// The shopping list.
    #[tool]
    fn list_items(&self) -> Vec<String> {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ferrobot::Result<()> {
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("to_fahrenheit", json!({"celsius": "hot"})))
        .then(MockTurn::new().tool_call("to_fahrenheit", json!({"celsius": 21.5})))
        .then(MockTurn::new().tool_call("remove_scratch", json!({"name": "notes.txt"})))
        .then(MockTurn::new().tool_call("site", json!({})))
        .then(
            MockTurn::new()
                .tool_call("add_item", json!({"item": "milk"}))
                .tool_call("list_items", json!({})),
        )
        .then(
            MockTurn::new()
                .text("21.5 °C is 70.7 °F; scratch is clean; you're in Lyon; milk is on the list."),
        );
    let agent = Agent::builder()
        .provider(model)
        .tool(to_fahrenheit)
        .tool(remove_scratch)
        .tool(site)
        .tools(Shopping {
            items: Mutex::new(Vec::new()),
        })
        .state(Site("Lyon"))
        .confirm(|request: ConfirmRequest| async move {
            println!("? {} (answering yes)", request.prompt);
            true
        })
        .build();

    let mut events = agent.stream("demo", "Do a few things for me.");
    while let Some(event) = events.next().await {
        match event? {
            AgentEvent::ToolCallFinished(record) => {
                println!(
                    "{}({}) -> {:?}:\n  {}",
                    record.call.name,
                    record.call.arguments,
                    record.outcome,
                    record.content.replace('\n', "\n  ")
                );
            }
            AgentEvent::Done(reply) => println!("reply: {}", reply.text),
            _ => {}
        }
    }
    // The functions stay callable directly, e.g. in unit tests.
    assert_eq!(to_fahrenheit::run(100.0).await, 212.0);
    Ok(())
}
