//! Typed answers over loopback HTTP, through a dialect without native
//! structured output (Anthropic's): the output tool offered beside the
//! others under a forced tool choice, an answer that doesn't fit sent back
//! as the tool's error result, and the fitting one read.

use std::sync::atomic::{AtomicUsize, Ordering};

use ferrobot::Agent;
use ferrobot::provider::{Anthropic, RetryPolicy};
use ferrobot::tool::from_fn;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::anthropic::sse;
use crate::support::bodies;

/// A city, as the model must describe it.
#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct City {
    name: String,
    population: u64,
}

/// An Anthropic stream of one `tool_use` block.
fn tool_use(id: &str, name: &str, input: &Value) -> ResponseTemplate {
    let events = [
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    sse(&events)
}

#[tokio::test]
async fn tool_mode_over_the_wire_runs_the_tools_retries_and_reads_the_answer() {
    let server = MockServer::start().await;
    let call = AtomicUsize::new(0);
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            move |_: &Request| match call.fetch_add(1, Ordering::SeqCst) {
                0 => tool_use("toolu_1", "lookup", &json!({"city": "Lyon"})),
                1 => tool_use("toolu_2", "final_city", &json!({"name": "Lyon"})),
                _ => tool_use(
                    "toolu_3",
                    "final_city",
                    &json!({"name": "Lyon", "population": 522_000}),
                ),
            },
        )
        .mount(&server)
        .await;
    let lookup = from_fn("lookup", "Look a city up.", |_: Value, _| async {
        "522,000 people"
    });
    let provider = Anthropic::with_base_url(server.uri())
        .model("claude-test")
        .api_key("sk-ant-test")
        .retry(RetryPolicy::none());
    let agent = Agent::builder().provider(provider).tool(lookup).build();
    let city: City = agent.extract("alice", "Lyon?").await.unwrap();
    assert_eq!(
        city,
        City {
            name: "Lyon".into(),
            population: 522_000
        }
    );

    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    for body in &bodies {
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["lookup", "final_city"]);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
    }
    // The lookup's result went back, then the answer's problems.
    let told =
        |body: &Value| body["messages"].as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(told(&bodies[1])["content"], "522,000 people");
    let error = told(&bodies[2]);
    assert_eq!(error["is_error"], true);
    assert!(
        error["content"]
            .as_str()
            .unwrap()
            .contains("`population` is missing"),
        "{error}"
    );
}
