use ferrobot::agent::{Output, OutputMode, TurnRequest};
use ferrobot::provider::ToolChoice;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Agent, AgentEvent, Error, OutputError, Role};
use futures_util::StreamExt;
use serde_json::json;

use super::counted;

/// A city, as the model must describe it.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct City {
    /// Its name.
    name: String,
    /// How many people live there.
    #[schemars(range(max = 50_000_000))]
    population: u64,
    /// Its kind.
    kind: Kind,
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Capital,
    Town,
}

fn berlin() -> serde_json::Value {
    json!({"name": "Berlin", "population": 3_700_000, "kind": "capital"})
}

#[tokio::test]
async fn tool_mode_runs_the_tools_first_then_takes_the_output_tools_call() {
    let (lookup, runs) = counted("lookup");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("lookup", json!({})))
        .then(MockTurn::new().tool_call("final_city", berlin()));
    let agent = Agent::builder().provider(mock.clone()).tool(lookup).build();
    let city: City = agent
        .extract("alice", "the capital of Germany?")
        .await
        .unwrap();
    assert_eq!(
        city,
        City {
            name: "Berlin".into(),
            population: 3_700_000,
            kind: Kind::Capital
        }
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        // The output tool is offered beside the others, and a call is required.
        assert_eq!(request.tool_names(), ["lookup", "final_city"]);
        assert_eq!(request.tool_choice, ToolChoice::Required);
    }
    let output_tool = &requests[0].tools[1];
    assert_eq!(
        output_tool.parameters["properties"]["kind"]["enum"],
        json!(["capital", "town"])
    );
    assert!(
        output_tool
            .description
            .starts_with("Give your final answer")
    );

    // The answer's call has its result, so the next turn's request is valid.
    let stored = agent.history().load("alice").await.unwrap();
    let last = stored.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(
        last.tool_results_iter().next().unwrap().content,
        "Answer received."
    );
}

#[tokio::test]
async fn without_other_tools_the_output_tool_is_named() {
    let mock = MockProvider::new().then(MockTurn::new().tool_call("final_city", berlin()));
    let agent = Agent::builder().provider(mock.clone()).build();
    let reply = agent
        .handle(
            "alice",
            TurnRequest::new("Berlin?").output(Output::of::<City>()),
        )
        .await
        .unwrap();
    assert_eq!(reply.output, Some(berlin()));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&reply.text).unwrap(),
        berlin()
    );
    assert_eq!(
        mock.requests()[0].tool_choice,
        ToolChoice::Tool("final_city".into())
    );
}

#[tokio::test]
async fn an_answer_that_does_not_fit_is_sent_back_with_every_problem() {
    let bad = json!({"name": "Berlin", "population": 90_000_000, "kind": "metropolis"});
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("final_city", bad))
        .then(MockTurn::new().tool_call("final_city", berlin()));
    let agent = Agent::builder().provider(mock.clone()).build();
    let city: City = agent.extract("alice", "Berlin?").await.unwrap();
    assert_eq!(city.name, "Berlin");

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let told = requests[1]
        .messages
        .last()
        .unwrap()
        .tool_results_iter()
        .next()
        .unwrap();
    assert!(told.is_error);
    assert!(
        told.content
            .contains("`population`: 90000000 is greater than the maximum of 50000000"),
        "{}",
        told.content
    );
    assert!(told.content.contains("`kind`"), "{}", told.content);
    assert!(
        told.content.contains("Call `final_city` again"),
        "{}",
        told.content
    );
}

#[tokio::test]
async fn past_the_retries_the_error_carries_the_last_answer() {
    let bad = json!({"name": "Berlin"});
    let mock = MockProvider::from_fn(move |_| {
        MockTurn::new().tool_call("final_city", json!({"name": "Berlin"}))
    });
    let agent = Agent::builder().provider(mock.clone()).build();
    let error = agent.extract::<City>("alice", "Berlin?").await.unwrap_err();
    let Error::Output(OutputError::Invalid {
        attempts,
        problems,
        answer,
    }) = &error
    else {
        panic!("{error:?}");
    };
    // The first answer and two retries.
    assert_eq!(*attempts, 3);
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(answer, &bad.to_string());
    assert!(
        problems.iter().any(|p| p == "`population` is missing"),
        "{problems:?}"
    );
    assert!(
        error
            .user_message()
            .starts_with("No answer in the required form:")
    );
}

#[tokio::test]
async fn a_text_answer_in_tool_mode_is_asked_again_as_a_call() {
    let mock = MockProvider::new()
        .then(MockTurn::new().text("It is Berlin."))
        .then(MockTurn::new().tool_call("final_city", berlin()));
    let agent = Agent::builder().provider(mock.clone()).build();
    let city: City = agent.extract("alice", "Berlin?").await.unwrap();
    assert_eq!(city.kind, Kind::Capital);
    let second = &mock.requests()[1];
    let told = second.messages.last().unwrap();
    assert_eq!(told.role, Role::User);
    assert!(
        told.text().contains("Answer by calling `final_city`"),
        "{}",
        told.text()
    );
}

#[tokio::test]
async fn prompted_mode_reads_the_text_and_puts_the_schema_in_the_instructions() {
    let mock = MockProvider::new().then(MockTurn::new().text("```json\n[\"red\", \"green\"]\n```"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("You name colours.")
        .build();
    let output =
        Output::schema(json!({"type": "array", "items": {"type": "string"}, "minItems": 2}))
            .unwrap()
            .mode(OutputMode::Prompted);
    let reply = agent
        .handle("alice", TurnRequest::new("two colours").output(output))
        .await
        .unwrap();
    assert_eq!(reply.output, Some(json!(["red", "green"])));
    let system = mock.requests()[0].system.clone().unwrap();
    assert!(
        system.starts_with("You name colours.\n\nAnswer with one JSON value"),
        "{system}"
    );
    // A non-object answer is wrapped, for dialects that take only objects.
    assert!(system.contains(r#""required":["response"]"#), "{system}");
}

#[tokio::test]
async fn prompted_mode_retries_text_that_is_not_json() {
    let mock = MockProvider::new()
        .then(MockTurn::new().text("Red and green."))
        .then(MockTurn::new().text(r#"{"response": ["red", "green"]}"#));
    let agent = Agent::builder().provider(mock.clone()).build();
    let output = Output::schema(json!({"type": "array", "items": {"type": "string"}}))
        .unwrap()
        .mode(OutputMode::Prompted);
    let reply = agent
        .handle("alice", TurnRequest::new("two colours").output(output))
        .await
        .unwrap();
    assert_eq!(reply.output, Some(json!(["red", "green"])));
    let told = mock.requests()[1].messages.last().unwrap().text();
    assert!(told.contains("the answer is not JSON"), "{told}");
}

#[tokio::test]
async fn a_typed_answer_streams_as_partial_values() {
    let mock = MockProvider::new().then(
        MockTurn::new()
            .text(r#"{"name": "Berlin", "population": 3700000, "kind": "capital"}"#)
            .chunked(5),
    );
    let agent = Agent::builder()
        .provider(mock)
        .output(Output::of::<City>().mode(OutputMode::Prompted))
        .build();
    let mut events = agent.stream("alice", "Berlin?");
    let mut partials = Vec::new();
    let mut done = None;
    while let Some(event) = events.next().await {
        match event.unwrap() {
            AgentEvent::PartialOutput(value) => partials.push(value),
            AgentEvent::Done(reply) => done = Some(reply),
            _ => {}
        }
    }
    assert!(partials.len() > 2, "{partials:?}");
    for partial in &partials {
        let name = partial.get("name").map_or("", |n| n.as_str().unwrap());
        assert!("Berlin".starts_with(name), "{partial}");
    }
    assert!(
        partials.contains(&json!({"name": "Berlin", "population": 3700000})),
        "{partials:?}"
    );
    assert_eq!(partials.last(), Some(&berlin()));
    assert_eq!(done.unwrap().output, Some(berlin()));
}

#[tokio::test]
async fn a_refusal_is_an_error_of_its_own() {
    let mock = MockProvider::new().then(MockTurn::new().refusal("I can't help with that."));
    let agent = Agent::builder().provider(mock).build();
    let error = agent.extract::<City>("alice", "Berlin?").await.unwrap_err();
    assert!(
        matches!(&error, Error::Output(OutputError::Refused(text)) if text == "I can't help with that."),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_type_no_dialect_can_enforce_is_refused_before_any_request() {
    let mock = MockProvider::replying("{}");
    let agent = Agent::builder().provider(mock.clone()).build();
    let error = agent
        .extract::<std::collections::HashMap<String, u32>>("alice", "prices?")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("required shape"));
    let Error::Output(OutputError::Unportable(why)) = &error else {
        panic!("{error:?}")
    };
    assert!(why.contains("a map with free keys"), "{why}");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn native_mode_is_refused_by_a_provider_that_cannot_constrain_answers() {
    let mock = MockProvider::replying("{}");
    let agent = Agent::builder().provider(mock.clone()).build();
    let request = TurnRequest::new("Berlin?").output(Output::of::<City>().mode(OutputMode::Native));
    let error = agent.handle("alice", request).await.unwrap_err();
    assert!(
        matches!(&error, Error::Output(OutputError::NativeUnsupported { provider }) if provider == "mock"),
        "{error:?}"
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn native_mode_runs_the_tools_first_then_asks_for_the_format_without_them() {
    let (lookup, runs) = counted("lookup");
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("lookup", json!({})))
        .then(MockTurn::new().text("Berlin, a capital of 3.7 million."))
        .then(MockTurn::new().output(berlin()))
        .with_native_output(true);
    let agent = Agent::builder().provider(mock.clone()).tool(lookup).build();
    let city: City = agent.extract("alice", "Berlin?").await.unwrap();
    assert_eq!(city.population, 3_700_000);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // The tool rounds go without the format…
    for request in &requests[..2] {
        assert_eq!(request.output, None);
        assert_eq!(request.tool_choice, ToolChoice::Auto);
    }
    // …and the typed answer is asked for with no tool to call, the draft dropped.
    let last = &requests[2];
    let format = last.output.as_ref().unwrap();
    assert_eq!(format.name, "City");
    assert_eq!(
        format.schema["required"],
        json!(["name", "population", "kind"])
    );
    assert_eq!(last.tool_choice, ToolChoice::None);
    assert_eq!(last.messages, requests[1].messages);
    let stored = agent.history().load("alice").await.unwrap();
    assert!(stored.iter().all(|m| !m.text().contains("3.7 million")));
    assert_eq!(stored.last().unwrap().text(), berlin().to_string());
}

#[tokio::test]
async fn native_mode_without_tools_asks_for_the_format_at_once() {
    let mock = MockProvider::new()
        .then(MockTurn::new().output(json!({"name": "Berlin"})))
        .then(MockTurn::new().output(berlin()))
        .with_native_output(true);
    let agent = Agent::builder().provider(mock.clone()).build();
    let city: City = agent.extract("alice", "Berlin?").await.unwrap();
    assert_eq!(city.kind, Kind::Capital);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.output.is_some()));
    let told = requests[1].messages.last().unwrap();
    assert_eq!(told.role, Role::User);
    assert!(
        told.text().contains("`population` is missing"),
        "{}",
        told.text()
    );
    assert!(
        told.text()
            .contains("Answer again with only the corrected JSON.")
    );
}

#[tokio::test]
async fn corrections_start_no_turn_of_their_own() {
    let mock = MockProvider::new()
        .then(MockTurn::new().output(json!({"name": "Berlin"})))
        .then(MockTurn::new().output(berlin()))
        .with_native_output(true);
    let agent = Agent::builder().provider(mock).build();
    let _: City = agent.extract("alice", "Berlin?").await.unwrap();
    let stored = agent.history().load("alice").await.unwrap();
    assert!(stored[2].correction && !stored[2].starts_turn());
    // `/undo` takes back the user's question, not the agent's correction.
    assert_eq!(
        agent.undo("alice").await.unwrap().as_deref(),
        Some("Berlin?")
    );
    assert!(agent.history().load("alice").await.unwrap().is_empty());
}

#[tokio::test]
async fn tools_called_past_the_round_cap_leave_no_answer() {
    let (lookup, _) = counted("lookup");
    let mock = MockProvider::from_fn(|_| MockTurn::new().tool_call("lookup", json!({})));
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(lookup)
        .max_tool_rounds(1)
        .build();
    let error = agent.extract::<City>("alice", "Berlin?").await.unwrap_err();
    assert!(
        matches!(&error, Error::Output(OutputError::NoAnswer(why)) if why.contains("past the limit")),
        "{error:?}"
    );
    // The last call named the output tool.
    assert_eq!(
        mock.requests()[1].tool_choice,
        ToolChoice::Tool("final_city".into())
    );
}

#[tokio::test]
async fn extract_keeps_the_mode_the_caller_chose() {
    let mock = MockProvider::new().then(MockTurn::new().output(berlin()));
    let agent = Agent::builder().provider(mock.clone()).build();
    let chosen = Output::of::<City>().mode(OutputMode::Prompted).retries(0);
    let city: City = agent
        .extract("alice", TurnRequest::new("Berlin?").output(chosen))
        .await
        .unwrap();
    assert_eq!(city.name, "Berlin");
    let request = &mock.requests()[0];
    assert!(request.tools.is_empty(), "no output tool in prompted mode");
    assert!(
        request
            .system
            .as_deref()
            .unwrap()
            .starts_with("Answer with one JSON value")
    );
}

#[tokio::test]
async fn an_answer_cut_off_at_the_token_limit_is_told_so() {
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .text(r#"{"name": "Berlin", "popul"#)
                .finish(ferrobot::provider::FinishReason::Length),
        )
        .then(MockTurn::new().output(berlin()))
        .with_native_output(true);
    let agent = Agent::builder().provider(mock.clone()).build();
    let _: City = agent.extract("alice", "Berlin?").await.unwrap();
    let told = mock.requests()[1].messages.last().unwrap().text();
    assert!(
        told.contains("- the answer was cut off at the token limit"),
        "{told}"
    );
}
