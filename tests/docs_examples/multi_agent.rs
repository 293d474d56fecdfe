//! The examples of `docs/multi-agent.md`.

/// "An agent as a tool".
mod as_a_tool {
use ferrobot::Agent;
use ferrobot::testing::{MockProvider, MockTurn};
use serde_json::json;

#[tokio::test]
async fn the_lead_delegates_research() -> ferrobot::Result<()> {
    let researcher = Agent::builder()
        .provider(MockProvider::replying("Paris has 2.1 million inhabitants."))
        .system_prompt("You look things up. Answer in one sentence.")
        .build();

    let lead_model = MockProvider::new()
        .then(MockTurn::new().tool_call("research", json!({"task": "Population of Paris?"})))
        .then(MockTurn::new().text("About 2.1 million people live in Paris."));
    let lead = Agent::builder()
        .provider(lead_model)
        .tool(researcher.as_tool("research", "Look things up."))
        .build();

    let reply = lead.handle("alice", "How many people live in Paris?").await?;
    assert_eq!(reply.text, "About 2.1 million people live in Paris.");
    assert_eq!(reply.tool_calls[0].content, "Paris has 2.1 million inhabitants.");
    Ok(())
}
}

/// "Typed input".
mod typed_input {
use ferrobot::Agent;
use ferrobot::testing::MockProvider;

/// What to look up.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Query {
    /// The question.
    question: String,
    /// How many sources to read.
    #[schemars(range(min = 1, max = 5))]
    sources: u8,
}

fn tools(researcher: &Agent) -> Vec<ferrobot::agent::AgentTool> {
    vec![
        researcher.as_tool("research", "Look a question up.").input::<Query>(),
        researcher
            .as_tool("quick_research", "Look a question up in one source.")
            .input_with(|q: Query| format!("{} (read at most {} sources)", q.question, q.sources)),
    ]
}

#[tokio::test]
async fn both_tools_write_the_query() {
    let model = MockProvider::replying("found");
    let researcher = Agent::builder().provider(model.clone()).build();
    let lead_model = ferrobot::testing::MockProvider::new()
        .then(
            ferrobot::testing::MockTurn::new()
                .tool_call("research", serde_json::json!({"question": "Why?", "sources": 2}))
                .tool_call("quick_research", serde_json::json!({"question": "How?", "sources": 3})),
        )
        .then(ferrobot::testing::MockTurn::new().text("done"));
    let lead = Agent::builder().provider(lead_model).tools(tools(&researcher)).build();
    lead.handle("alice", "go").await.unwrap();
    let tasks: Vec<String> = model.requests().iter().map(|r| r.messages[0].text()).collect();
    assert!(tasks.contains(&"{\n  \"question\": \"Why?\",\n  \"sources\": 2\n}".to_owned()));
    assert!(tasks.contains(&"How? (read at most 3 sources)".to_owned()));
}
}

/// "Permissions only get stricter".
mod permissions {
use ferrobot::Agent;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::policy::{Policy, Rule};

fn lead(provider: ferrobot::testing::MockProvider, cleaner: &Agent) -> Agent {
    Agent::builder()
        .provider(provider)
        .tool(cleaner.as_tool("cleaner", "Free disk space."))
        // Holds in the cleaner too, whatever its own rules say.
        .policy(Policy::new().rule(Rule::ask("delete_file")).rule(Rule::deny("format_disk")))
        // The cleaner has no handler of its own: it asks through this one.
        .confirm(|request: ConfirmRequest| async move {
            println!("{} asks: {}", request.conversation, request.prompt);
            Decision::Approve
        })
        .build()
}

#[tokio::test]
async fn the_leads_rules_hold_in_the_cleaner() {
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::from_fn;
    use serde_json::json;
    let format = from_fn("format_disk", "Format.", |_: serde_json::Value, _| async { "formatted" });
    let delete = from_fn("delete_file", "Delete.", |_: serde_json::Value, _| async { "deleted" });
    let cleaner_model = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("format_disk", json!({}))
                .tool_call("delete_file", json!({"path": "/tmp/x"})),
        )
        .then(MockTurn::new().text("cleaned"));
    let cleaner = Agent::builder()
        .provider(cleaner_model.clone())
        .tool(format)
        .tool(delete)
        .policy(Policy::new().rule(Rule::allow("*")))
        .build();
    let lead_model = MockProvider::new()
        .then(MockTurn::new().tool_call("cleaner", json!({"task": "free space"})))
        .then(MockTurn::new().text("done"));
    let lead = lead(lead_model, &cleaner);
    lead.handle("alice", "free some space").await.unwrap();
    let results: Vec<(String, bool)> = cleaner_model.requests()[1]
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .map(|r| (r.content.clone(), r.is_error))
        .collect();
    assert!(results[0].0.starts_with("Not run: denied"), "{results:?}");
    assert_eq!(results[1], ("deleted".to_owned(), false));
}
}

/// "Budgets, time-outs and cancellation".
mod budgets {
use std::time::Duration;
use ferrobot::Agent;
use ferrobot::agent::TurnBudget;

fn budgeted(provider: ferrobot::testing::MockProvider, researcher: &Agent) -> Agent {
    Agent::builder()
        .provider(provider)
        .tool(researcher.as_tool("research", "Look things up.").timeout(Duration::from_secs(120)))
        // The researcher's turns share these: they stop when the lead's turn would.
        .budget(TurnBudget::builder().wall_time(Duration::from_secs(180)).output_tokens(20_000).build())
        .build()
}

#[tokio::test]
async fn builds() {
    let researcher = Agent::builder().provider(ferrobot::testing::MockProvider::replying("…")).build();
    let lead = budgeted(ferrobot::testing::MockProvider::replying("ok"), &researcher);
    assert_eq!(lead.handle("alice", "hi").await.unwrap().text, "ok");
}
}

/// "Events".
mod events {
use ferrobot::{Agent, AgentEvent, tool::from_fn};
use ferrobot::testing::{MockProvider, MockTurn};
use serde_json::json;

#[tokio::test]
async fn the_researchers_events_in_the_leads_stream() {
    let weather = from_fn("get_weather", "Weather.", |_: serde_json::Value, _| async { "18 °C" });
    let researcher_model = MockProvider::new()
        .then(MockTurn::new().tool_call("get_weather", json!({"city": "Paris"})))
        .then(MockTurn::new().text("18 °C in Paris."));
    let researcher = Agent::builder().provider(researcher_model).tool(weather).build();
    let lead_model = MockProvider::new()
        .then(MockTurn::new().tool_call("research", json!({"task": "Weather in Paris?"})))
        .then(MockTurn::new().text("It is 18 °C."));
    let lead = Agent::builder()
        .provider(lead_model)
        .tool(researcher.as_tool("research", "Look things up."))
        .build();

    let transcript = lead.stream("alice", "Weather in Paris?").transcript().await;
    assert_eq!(
        transcript.lines(),
        [
            "thinking",
            r#"tool call delta #0 id=call_1 name=research "{\"task\":\"Weather in Paris?\"}""#,
            r#"tool call call_1 research {"task":"Weather in Paris?"}"#,
            "running research",
            "[research call_1] thinking",
            r#"[research call_1] tool call delta #0 id=call_1 name=get_weather "{\"city\":\"Paris\"}""#,
            r#"[research call_1] tool call call_1 get_weather {"city":"Paris"}"#,
            "[research call_1] running get_weather",
            "[research call_1] tool result call_1 get_weather ok: 18 °C",
            "[research call_1] thinking",
            r#"[research call_1] text "18 °C in Paris.""#,
            r#"[research call_1] done "18 °C in Paris.""#,
            "tool result call_1 research ok: 18 °C in Paris.",
            "thinking",
            r#"text "It is 18 °C.""#,
            r#"done "It is 18 °C.""#,
        ]
    );
    // A front end that shows only what the sub-agent runs:
    for event in &transcript.events {
        if let AgentEvent::SubAgent(sub) = event
            && let AgentEvent::ToolCallStarted(call) = sub.innermost()
        {
            println!("{}: running {}", sub.tool, call.name);
        }
    }
}
}

/// "Background work".
mod background_work {
use std::time::Duration;
use ferrobot::Agent;
use ferrobot::agent::Delegate;
use ferrobot::testing::{MockProvider, MockTurn};
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn a_long_job_answers_later() -> ferrobot::Result<()> {
    let researcher = Agent::builder()
        .provider(MockProvider::new().then(
            MockTurn::new().text("Paris has 2.1 million inhabitants.").delay(Duration::from_secs(60)),
        ))
        .system_prompt("You look things up. Take your time.")
        .build();
    let delegate = Delegate::new()
        .agent("researcher", "Looks things up on the web.", researcher)
        .max_running(2)
        .max_waiting(8);

    let lead_model = MockProvider::new()
        .then(MockTurn::new().tool_call("delegate", json!({"agent": "researcher", "task": "Population of Paris?"})))
        .then(MockTurn::new().text("I asked the researcher; the answer will follow here."));
    let (tx, mut chat) = tokio::sync::mpsc::unbounded_channel();
    let lead = Agent::builder()
        .provider(lead_model)
        .tool(delegate)
        // Where results go: a bot's `ChannelNotifier`, here a channel.
        .notifier(move |conversation: String, text: String| {
            let tx = tx.clone();
            async move { tx.send((conversation, text)).unwrap(); }
        })
        .build();

    // The turn ends at once…
    let reply = lead.handle("alice", "How many people live in Paris?").await?;
    assert_eq!(reply.text, "I asked the researcher; the answer will follow here.");
    assert!(reply.tool_calls[0].content.starts_with("Started task 1 (researcher)."));
    let tasks = lead.handle("alice", "/tasks").await?.text;
    assert!(tasks.starts_with("Background tasks:\n1 "));

    // …and the answer arrives a minute later, as a message of its own…
    let (conversation, text) = chat.recv().await.unwrap();
    assert_eq!(conversation, "alice");
    assert_eq!(text, "Task 1 (researcher) finished:\n\nParis has 2.1 million inhabitants.");
    // …that the lead's model reads next turn.
    let history = lead.history().load("alice").await?;
    assert_eq!(history.last().unwrap().text(), text);
    Ok(())
}
}
