//! Types of the user's own named `State`: a bare `State` (ferrobot's always
//! has a type parameter) and one written with its path are the model's
//! arguments; `#[state]` and `#[ctx]` mark what the agent passes, however
//! its type is written.
use ferrobot::tool::{State as Shared, Tool, ToolContext as Context};
use ferrobot::{Agent, testing::MockProvider, tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// Where a switch should be.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum State {
    On,
    Off,
}

mod home {
    /// A dimmer's level, generic like ferrobot's `State`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct State<T>(pub T);
}

struct Lights;

/// Turn the lights on or off.
#[tool]
async fn lights(
    /// Where the lights should be.
    state: State,
    /// How bright, 0 to 10.
    level: home::State<u8>,
    #[state] Shared(_lights): Shared<Lights>,
    #[ctx] ctx: &Context,
) -> String {
    let on = matches!(state, State::On);
    format!("{} {on} {}", ctx.conversation(), level.0)
}

/// Say which conversation this is.
#[tool]
async fn whoami(ctx: ferrobot::ToolContext, _lights: ferrobot::tool::State<Lights>) -> String {
    ctx.conversation().to_owned()
}

fn main() {
    let _agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(lights)
        .tool(whoami)
        .state(Lights)
        .build();
    let properties = lights.spec().parameters["properties"].clone();
    assert_eq!(
        properties.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["level", "state"]
    );
    assert_eq!(whoami.spec().parameters["properties"].as_object().unwrap().len(), 0);
    assert_eq!(whoami.state_types().len(), 1);
}
