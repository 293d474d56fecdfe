//! The examples of `docs/getting-started.md`.

/// Needs a model server: compiled, not run.
#[allow(dead_code)]
async fn first_turn() -> ferrobot::Result<()> {
    use ferrobot::{Agent, provider::OpenAiCompatible};

    let agent = Agent::builder()
        .provider(OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b"))
        .system_prompt("You are a friendly assistant. Answer in one sentence.")
        .build();
    let reply = agent.handle("me", "Why is the sky blue?").await?;
    println!("{}", reply.text);
    Ok(())
}

/// Needs a model server: compiled, not run.
#[allow(dead_code)]
async fn a_tool_and_streaming() -> ferrobot::Result<()> {
    use ferrobot::{Agent, provider::OpenAiCompatible, tool};

    /// Current weather in a city.
    #[tool]
    async fn weather(
        /// City name, e.g. "Lisbon".
        city: String,
    ) -> String {
        // Call a real weather API here.
        format!("Sunny and 24 °C in {city}.")
    }

    let agent = Agent::builder()
        .provider(OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b"))
        .tool(weather)
        .build();
    let reply = agent.handle("me", "Should I take an umbrella in Lisbon today?").await?;
    for call in &reply.tool_calls {
        eprintln!("called {} with {}: {}", call.call.name, call.call.arguments, call.content);
    }
    println!("{}", reply.text);
    use ferrobot::AgentEvent;
    use futures_util::StreamExt;
    use std::io::Write;

    let mut events = agent.stream("me", "And in Porto?");
    while let Some(event) = events.next().await {
        match event? {
            AgentEvent::TextDelta(text) => {
                print!("{text}");
                std::io::stdout().flush().ok();
            }
            AgentEvent::ToolCallStarted(call) => eprintln!("\n[calling {}]", call.name),
            AgentEvent::Done(_) => println!(),
            _ => {}
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_test() -> ferrobot::Result<()> {
    use ferrobot::{Agent, testing::MockProvider};

    let agent = Agent::builder().provider(MockProvider::replying("Bring a hat.")).build();
    assert_eq!(agent.handle("me", "Umbrella?").await?.text, "Bring a hat.");
    Ok(())
}
