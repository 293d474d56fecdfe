//! A turn against a real llama.cpp server (`../shared/realserver`), which
//! nobody here wrote: its tiny model calls the offered tool once, then
//! answers " The weather is sunny." once the result is in.

use ferrobot::agent::ToolOutcome;
use ferrobot::provider::{OpenAiCompatible, Provider};
use ferrobot::{Agent, Role};
use ferrobot_testkit::realserver::RealServer;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Place {
    /// The city.
    city: String,
}

/// The real server's model, answering the same every time.
fn provider(server: &RealServer) -> OpenAiCompatible {
    OpenAiCompatible::new(server.base_url())
        .model(server.model())
        .temperature(0.0)
}

/// A weather tool the tiny model calls.
fn weather() -> ferrobot::tool::FnTool {
    ferrobot::tool::from_fn(
        "get_weather",
        "The weather in a city.",
        |place: Place, _| async move { format!("Sunny in {}.", place.city) },
    )
}

#[tokio::test]
async fn a_tool_round_against_a_real_llama_cpp_server() {
    let Some(server) = RealServer::shared() else {
        return;
    };
    let provider = provider(server);
    assert!(
        provider.health().await.is_ok(),
        "{:?}",
        provider.health().await
    );
    let agent = Agent::builder().provider(provider).tool(weather()).build();
    let reply = agent
        .handle("real", "What is the weather in Paris?")
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 1, "{:?}", reply.tool_calls);
    let call = &reply.tool_calls[0];
    assert_eq!(call.call.name, "get_weather");
    assert_eq!(call.outcome, ToolOutcome::Ok, "{}", call.content);
    assert!(call.content.starts_with("Sunny in "), "{}", call.content);
    assert_eq!(reply.text.trim(), "The weather is sunny.");
    // Stored as sent: the question, the call, its result, the answer.
    let stored = agent.history().load("real").await.unwrap();
    let roles: Vec<Role> = stored.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
        "{stored:?}"
    );
}

/// The server runs with a 4,096-token context (`/props`), though the model
/// was made for more (`meta.n_ctx_train` in `/v1/models`): the window is the
/// one it runs with.
#[tokio::test]
async fn the_real_servers_context_window_is_read() {
    let Some(server) = RealServer::shared() else {
        return;
    };
    let provider = OpenAiCompatible::new(server.base_url()).model(server.model());
    let window = provider.context_window().await.unwrap();
    assert_eq!(window, Some(ferrobot::provider::ContextWindow::new(4096)));
}

/// A forecast: nested objects, arrays, enums and integer ranges. Reading
/// the answer into it is the check; not every field is looked at after.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Forecast {
    city: String,
    #[schemars(length(min = 1, max = 3))]
    days: Vec<Day>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Day {
    sky: Sky,
    #[schemars(range(min = -30, max = 45))]
    celsius: i32,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Sky {
    Sunny,
    Cloudy,
    Rain,
}

/// A typed answer through llama.cpp's grammar (`response_format`), after
/// the tool round: the tiny model writes nonsense, but the grammar keeps it
/// inside the schema, and the answer is read into the type.
#[tokio::test]
async fn a_typed_answer_from_a_real_llama_cpp_server_after_its_tool_round() {
    let Some(server) = RealServer::shared() else {
        return;
    };
    let agent = Agent::builder()
        .provider(provider(server))
        .tool(weather())
        .build();
    let reply = agent
        .handle(
            "typed",
            ferrobot::agent::TurnRequest::new("The forecast for Paris?")
                .output(ferrobot::agent::Output::of::<Forecast>()),
        )
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 1, "the tool round came first");
    let forecast: Forecast = serde_json::from_value(reply.output.unwrap()).unwrap();
    assert!((1..=3).contains(&forecast.days.len()), "{forecast:?}");
    assert!(
        forecast
            .days
            .iter()
            .all(|d| (-30..=45).contains(&d.celsius)),
        "{forecast:?}"
    );
}
