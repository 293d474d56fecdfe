//! Slash commands: registered from the tools with typed options, answered
//! through the interaction, and withdrawn when a tool is switched off.

use ferrobot::testing::MockProvider;
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::json;

use crate::support::{ANN, APP, start};

#[tokio::test]
async fn slash_commands_are_registered_typed_and_answered_through_the_interaction() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        /// How many lines.
        lines: u32,
        /// Only lines containing this.
        filter: Option<String>,
    }
    let tail = from_fn(
        "tail_log",
        "Show the end of the log.\nMore.",
        |a: Args, _| async move {
            format!(
                "{} lines{}",
                a.lines,
                a.filter.map(|f| format!(" with {f}")).unwrap_or_default()
            )
        },
    );
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let mut running = None;
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        let agent = agent(model, &channel, vec![tail.into_tool()]);
        running = Some(agent.clone());
        agent
    })
    .await;
    let menu = rest
        .wait_for(&format!("PUT /api/v10/applications/{APP}/commands"), |_| {
            true
        })
        .await;
    assert_eq!(
        menu,
        json!([
            {"type": 1, "name": "new", "description": "Start a fresh conversation"},
            {"type": 1, "name": "stop", "description": "Stop the running turn"},
            {"type": 1, "name": "undo", "description": "Take back your last message and its answer"},
            {"type": 1, "name": "tasks", "description": "List the background tasks"},
            {"type": 1, "name": "cancel", "description": "Cancel a background task: /cancel ID", "options": [
                {"type": 4, "name": "id", "description": "The task's id (/tasks lists them)", "required": true},
            ]},
            {"type": 1, "name": "help", "description": "List the commands"},
            {"type": 1, "name": "tail_log", "description": "Show the end of the log.", "options": [
                {"type": 4, "name": "lines", "description": "How many lines.", "required": true},
                {"type": 3, "name": "filter", "description": "Only lines containing this.", "required": false},
            ]},
        ])
    );
    gateway.slash(
        ANN,
        "900000000000000021",
        "tail_log",
        json!([{"name": "lines", "type": 4, "value": 5}, {"name": "filter", "type": 3, "value": "disk full"}]),
    );
    let deferred = rest
        .wait_for(
            "/interactions/900000000000000021/token-900000000000000021/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        deferred["type"], 5,
        "acknowledged at once, answer to follow"
    );
    let answer = rest
        .wait_for(
            &format!("PATCH /api/v10/webhooks/{APP}/token-900000000000000021/messages/@original"),
            |_| true,
        )
        .await;
    assert_eq!(
        answer["content"], "```\n5 lines with disk full\n```",
        "tool output shown verbatim"
    );
    assert!(
        recorded.requests().is_empty(),
        "the tool ran without the model"
    );
    // A tool switched off while the bot runs leaves the commands.
    running.unwrap().tools().set_enabled("tail_log", false);
    let menu = rest
        .wait_for(&format!("PUT /api/v10/applications/{APP}/commands"), |m| {
            m.as_array().unwrap().len() == ferrobot::agent::Builtin::ALL.len()
        })
        .await;
    assert!(!menu.to_string().contains("tail_log"), "{menu}");
}
