//! A full turn over loopback HTTP, beside a floor: the same exchange done by
//! a plain reqwest + serde client. Two cases: a 200-chunk streamed text
//! answer, and a streamed tool round trip (tool call, then text).
//!
//! Run with: `cargo bench --bench loopback`
//!
//! Each case is one criterion group with `agent` and `floor` in it, so the
//! ratio reads straight off the report. The target is the agent within 1.15x
//! of the floor.

#[path = "common/add.rs"]
mod add;
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use ferrobot::Agent;
use ferrobot::provider::OpenAiCompatible;
use ferrobot::testing::OpenAiStream;
use ferrobot::tool::Tool;
use serde_json::json;

use add::{AddArgs, add_tool};
use common::floor::{Floor, OutCall, OutFunction, OutMessage};

const QUESTION: &str = "what is 2 + 3?";
const ANSWER: &str = "2 + 3 = 5";

/// 200 text chunks, one word each, then the finish reason and usage.
fn long_text() -> (String, String) {
    let mut stream = OpenAiStream::new();
    let mut text = String::new();
    for i in 0..200 {
        let word = format!("word{i} ");
        stream = stream.text(&word);
        text.push_str(&word);
    }
    (stream.finish("stop").usage(40, 200).into_sse(), text)
}

/// A tool call streamed as a model does: id and name first, then the
/// arguments in pieces.
fn tool_call() -> String {
    let mut stream = OpenAiStream::new().tool_call_fragment(json!({
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": "add", "arguments": ""}
    }));
    for piece in ["{\"a\"", ": 2", ", \"b\"", ": 3}"] {
        stream = stream.tool_call_fragment(json!({"index": 0, "function": {"arguments": piece}}));
    }
    stream.finish("tool_calls").usage(60, 20).into_sse()
}

/// The answer after the tool result, a few chunks long.
fn short_answer() -> String {
    let mut stream = OpenAiStream::new();
    for word in ANSWER.split_inclusive(' ') {
        stream = stream.text(word);
    }
    stream.finish("stop").usage(80, 6).into_sse()
}

// ---- the floor's turns ----------------------------------------------------------

/// The text answer: one request.
async fn floor_text_turn(floor: &Floor) -> String {
    floor.call(&[Floor::user(QUESTION)]).await.0
}

/// The tool round trip: the call, the tool, the answer.
async fn floor_tool_turn(floor: &Floor) -> String {
    let user = Floor::user(QUESTION);
    let (_, calls) = floor.call(std::slice::from_ref(&user)).await;
    let results: Vec<String> = calls
        .iter()
        .map(|call| {
            assert_eq!(call.name, "add");
            let args: AddArgs = serde_json::from_str(&call.arguments).expect("arguments");
            (args.a + args.b).to_string()
        })
        .collect();
    let mut messages = vec![
        user,
        OutMessage {
            role: "assistant",
            content: None,
            tool_calls: Some(
                calls
                    .iter()
                    .map(|call| OutCall {
                        id: &call.id,
                        kind: "function",
                        function: OutFunction {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
            ),
            tool_call_id: None,
        },
    ];
    messages.extend(calls.iter().zip(&results).map(|(call, result)| OutMessage {
        role: "tool",
        content: Some(result),
        tool_calls: None,
        tool_call_id: Some(&call.id),
    }));
    floor.call(&messages).await.0
}

// ---- the benchmarks ------------------------------------------------------------

/// Times `turn` per call; `reset` runs untimed after each (clearing history).
async fn timed<T, F, R>(
    iters: u64,
    mut turn: impl FnMut() -> F,
    mut reset: impl FnMut() -> R,
) -> Duration
where
    F: Future<Output = T>,
    R: Future<Output = ()>,
{
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let started = Instant::now();
        black_box(turn().await);
        total += started.elapsed();
        reset().await;
    }
    total
}

fn loopback(c: &mut Criterion) {
    // Current-thread for the client side of both: one core does the turn, the
    // other serves, and neither side gets a second worker the other lacks.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");

    let (text_body, text) = long_text();
    let text_response = common::sse_response(&text_body);
    let text_server = common::serve(move |_| text_response.clone());

    let call_response = common::sse_response(&tool_call());
    let answer_response = common::sse_response(&short_answer());
    let tool_server = common::serve(move |request| {
        if common::find(request, br#""role":"tool""#).is_some() {
            answer_response.clone()
        } else {
            call_response.clone()
        }
    });

    let tool = add_tool();
    let tools_json = json!([{"type": "function", "function": tool.spec()}]);
    let text_agent = Agent::builder()
        .provider(OpenAiCompatible::new(format!("http://{}/v1", text_server.addr)).model("test"))
        .build();
    let tool_agent = Agent::builder()
        .provider(OpenAiCompatible::new(format!("http://{}/v1", tool_server.addr)).model("test"))
        .tool(tool)
        .build();
    let text_floor = Floor::new(text_server.addr, None);
    let tool_floor = Floor::new(tool_server.addr, Some(tools_json));

    runtime.block_on(async {
        let reply = text_agent
            .handle("check", QUESTION)
            .await
            .expect("agent turn");
        assert_eq!(reply.text, text);
        assert_eq!(floor_text_turn(&text_floor).await, text);
        let reply = tool_agent
            .handle("check", QUESTION)
            .await
            .expect("agent turn");
        assert_eq!(reply.text, ANSWER);
        assert_eq!(reply.tool_calls[0].content, "5");
        assert_eq!(floor_tool_turn(&tool_floor).await, ANSWER);
    });

    let cases: [(&str, &Agent, &Floor, bool); 2] = [
        ("loopback_text_200_chunks", &text_agent, &text_floor, false),
        ("loopback_tool_round_trip", &tool_agent, &tool_floor, true),
    ];
    for (name, agent, floor, with_tool) in cases {
        let mut group = c.benchmark_group(name);
        group
            .sample_size(40)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5));
        group.bench_function("agent", |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                timed(
                    iters,
                    || agent.handle("bench", QUESTION),
                    || async {
                        agent.history().clear("bench").await.expect("clear history");
                    },
                )
            });
        });
        group.bench_function("floor", |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                timed(
                    iters,
                    || async {
                        if with_tool {
                            floor_tool_turn(floor).await
                        } else {
                            floor_text_turn(floor).await
                        }
                    },
                    || async {},
                )
            });
        });
        group.finish();
    }
}

criterion_group!(benches, loopback);
criterion_main!(benches);
