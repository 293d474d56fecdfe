//! What several test modules build the same way: a message of every part
//! type, and a model that answers slowly, echoing the question.

use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::{Message, Part, Reasoning, Role, ToolCall, ToolResult};
use serde_json::json;

/// A conversation holding every part type, for the stores' round trips.
pub(crate) fn every_part() -> Vec<Message> {
    vec![
        Message::user("Check the disk, please."),
        Message::new(
            Role::Assistant,
            vec![
                Part::Reasoning(Reasoning {
                    text: "use du".into(),
                    signature: Some("sig==".into()),
                    provider: Some("anthropic".into()),
                }),
                Part::text("Checking."),
                Part::ToolCall(ToolCall::new(
                    "c1",
                    "disk",
                    json!({"path": "/", "deep": [1, 2]}),
                )),
            ],
        ),
        Message::tool_results([
            ToolResult::ok("c1", "42 GB free"),
            ToolResult::error("c2", "boom"),
        ]),
        Message::new(
            Role::Assistant,
            vec![Part::Refusal {
                text: "I won't delete it.".into(),
            }],
        )
        .with_interrupted(true),
        Message::system("Be brief."),
    ]
}

/// A model answering `re: QUESTION` to the last message, after `delay`:
/// long enough for two turns to overlap if nothing keeps them apart.
pub(crate) fn slow_echo(delay: Duration) -> MockProvider {
    MockProvider::from_fn(move |request| {
        let last = request
            .messages
            .last()
            .map(Message::text)
            .unwrap_or_default();
        MockTurn::new().text(format!("re: {last}")).delay(delay)
    })
}
