//! Run with: cargo run --example cassette --features cassette
//!
//! A turn with a tool round, recorded once against a real server and
//! replayed offline for ever after. The repository keeps a recording made
//! against llama.cpp (`examples/cassettes/weather.json`), so as it comes
//! this replays it, no server needed, and prints the answer.
//!
//! To record again, against your own server:
//! `FERROBOT_RECORD=all FERROBOT_BASE_URL=http://localhost:8080/v1 FERROBOT_MODEL=qwen3:8b
//! cargo run --example cassette --features cassette`. `FERROBOT_CASSETTE`
//! names another file.
//!
//! Exits with 1 when the turn fails: a server out of reach while recording,
//! or a request that no longer matches the recording (the message says
//! which field).

use std::process::ExitCode;

use ferrobot::provider::OpenAiCompatible;
use ferrobot::testing::Cassette;
use ferrobot::{Agent, tool};

/// The weather in a city.
#[tool]
async fn get_weather(
    /// The city, e.g. Paris.
    city: String,
) -> String {
    format!("Sunny in {city}, 21 °C.")
}

#[tokio::main]
async fn main() -> ExitCode {
    let file = std::env::var("FERROBOT_CASSETTE")
        .unwrap_or_else(|_| "examples/cassettes/weather.json".into());
    let url =
        std::env::var("FERROBOT_BASE_URL").unwrap_or_else(|_| "http://localhost:8080/v1".into());
    let model = std::env::var("FERROBOT_MODEL").unwrap_or_else(|_| "tiny".into());
    // Recording asks the real server; replaying never does.
    let server = OpenAiCompatible::new(url).model(model).temperature(0.0);
    let agent = Agent::builder()
        .provider(Cassette::new(&file, server))
        .system_prompt("Answer weather questions with the get_weather tool.")
        .tool(get_weather)
        .build();
    match agent
        .handle("example", "What is the weather in Paris?")
        .await
    {
        Ok(reply) => {
            for call in &reply.tool_calls {
                eprintln!(
                    "{}({}) → {}",
                    call.call.name, call.call.arguments, call.content
                );
            }
            println!("{}", reply.text.trim());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{}", ferrobot::error_chain(&error));
            ExitCode::from(1)
        }
    }
}
