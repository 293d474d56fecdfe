//! The examples of `docs/agent.md`.

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use serde_json::json;

fn disk_free() -> ferrobot::tool::FnTool {
    from_fn("disk_free", "Free space.", |_: serde_json::Value, _ctx| async { "42 GiB" })
}

#[tokio::test]
async fn a_conversation() -> ferrobot::Result<()> {
    let provider = MockProvider::new()
        .then(MockTurn::new().tool_call("disk_free", json!({"mount": "/"})))
        .then(MockTurn::new().text("42 GiB are free."))
        .then(MockTurn::new().text("Also 42 GiB."));
    let disk_free = disk_free();
    use std::time::Duration;
    use ferrobot::{Agent, history::MemoryHistory, provider::ModelSettings};

    let agent = Agent::builder()
        .provider(provider) // required: any Provider
        .system_prompt("You are a careful sysadmin.") // by default, none
        .tool(disk_free) // once per tool; or .tools([…])
        .history(MemoryHistory::new()) // by default, a MemoryHistory
        .settings(ModelSettings::builder().temperature(0.2).build()) // by default, the provider's
        .max_tool_rounds(10) // by default, 10
        .max_concurrent_tools(4) // by default, 4
        .tool_timeout(Duration::from_secs(60)) // by default, 60 s
        .build();
        let reply = agent.handle("alice", "How much disk is free on /?").await?;
        println!("{}", reply.text);
    assert_eq!(reply.text, "42 GiB are free.");
    use ferrobot::AgentEvent;
    use futures_util::StreamExt;

    let mut events = agent.stream("alice", "And on /home?");
    while let Some(event) = events.next().await {
        match event? {
            AgentEvent::TextDelta(text) => print!("{text}"),
            AgentEvent::ToolCallFinished(record) => eprintln!("[{}: {:?}]", record.call.name, record.outcome),
            AgentEvent::Done(reply) => println!("\n({} tokens)", reply.usage.output_tokens),
            _ => {}
        }
    }
    let reply = agent.handle("alice", "/disk_free mount=/").await?;
    assert_eq!(reply.text, "42 GiB");
    assert!(reply.finish_reason.is_none()); // no model call
    let messages = agent.history().load("alice").await?;
    assert_eq!(messages[0].text(), "How much disk is free on /?");
    agent.history().clear("alice").await?; // start over
    assert!(agent.history().load("alice").await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn the_order_of_a_turn() -> ferrobot::Result<()> {
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::{Agent, Usage, tool::from_fn};
    use serde_json::json;

    let usage = |input_tokens, output_tokens| Usage { input_tokens, output_tokens, ..Usage::default() };
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("get_weather", json!({"city": "Paris"})).usage(usage(12, 5)))
        .then(MockTurn::new().text("It is 18 °C.").chunked(6).usage(usage(30, 4)));
    let weather = from_fn("get_weather", "Current weather.", |_: serde_json::Value, _ctx| async { "18 °C" });
    let agent = Agent::builder().provider(mock).tool(weather).build();

    let transcript = agent.stream("alice", "Weather in Paris?").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"tool call delta #0 id=call_1 name=get_weather "{\"city\":\"Paris\"}""#,
            "usage 12 in / 5 out",
            r#"tool call call_1 get_weather {"city":"Paris"}"#,
            "running get_weather",
            "tool result call_1 get_weather ok: 18 °C",
            "thinking",
            r#"text "It is ""#,
            r#"text "18 °C.""#,
            "usage 30 in / 4 out",
            r#"done "It is 18 °C.""#,
        ]
    );
    assert_eq!(transcript.reply?.usage.output_tokens, 9);
    Ok(())
}

#[tokio::test]
async fn budgets() {
    let provider = MockProvider::replying("ok");
    use ferrobot::Agent;
    use std::time::Duration;
    use ferrobot::agent::TurnBudget;

    let agent = Agent::builder()
        .provider(provider)
        .budget(
            TurnBudget::builder()
                .wall_time(Duration::from_secs(120))
                .tool_output_bytes(200_000)
                .output_tokens(8_000)
                .build(),
        )
        .build();
    assert_eq!(agent.handle("alice", "hi").await.unwrap().text, "ok");
}

#[tokio::test]
async fn cancellation() {
    let agent = ferrobot::Agent::builder()
        .provider(MockProvider::new().then(MockTurn::new().text("An essay.").delay(std::time::Duration::from_secs(5))))
        .build();
        let events = agent.stream("alice", "Write a long essay.");
        let stop = events.cancellation();
        stop.cancel(); // e.g. from a Stop button's handler
        let err = events.into_reply().await.unwrap_err();
        assert!(matches!(err, ferrobot::Error::Cancelled));
}

/// "Handing it messages": a turn request with an image; compiled, not run
/// (it reads a file).
#[allow(dead_code)]
async fn handing_it_images(agent: ferrobot::Agent) -> Result<(), Box<dyn std::error::Error>> {
use ferrobot::agent::TurnRequest;
use ferrobot::Image;

let request = TurnRequest::new("What is wrong on this screen?")
    .image(Image::read("screenshot.png")?)    // images, after the text
    .user("alice");                            // who sent it
let reply = agent.handle("support", request).await?;
    assert!(!reply.text.is_empty());
    Ok(())
}

#[tokio::test]
async fn steering() -> ferrobot::Result<()> {
    use ferrobot::Agent;
    let provider = MockProvider::replying("Switched to staging.");
    use ferrobot::agent::WhileBusy;
    let agent = Agent::builder().provider(provider).while_busy(WhileBusy::Steer).build();
    let reply = agent.handle("alice", "use the staging server instead").await?;
    if reply.steered { /* the running turn will read it */ }
    // Nothing was running: it ran as a turn of its own.
    assert!(!reply.steered);
    Ok(())
}
