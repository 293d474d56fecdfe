//! The `/` command menu: the tools Telegram can name, run as typed slash
//! commands, and updated when a tool is switched off.

use ferrobot::agent::Builtin;
use ferrobot::testing::MockProvider;
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, FakeBotApi, start};

#[tokio::test]
async fn the_command_menu_lists_the_tools_telegram_can_name() {
    let (api, server) = FakeBotApi::start().await;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        /// How many lines.
        #[allow(dead_code)]
        lines: u32,
    }
    let tools = vec![
        from_fn(
            "tail_log",
            "Show the end of the log.\nMore detail.",
            |_: Args, _| async { "" },
        )
        .into_tool(),
        from_fn(
            "Reboot-Now",
            "Not a Telegram command name.",
            |_: Value, _| async { "" },
        )
        .into_tool(),
    ];
    let mut running = None;
    let _bot = start(&server, &[ANN], |channel| {
        let agent = agent(MockProvider::replying("ok"), &channel, tools);
        running = Some(agent.clone());
        agent
    });
    let menu = api.wait_for("SetMyCommands", |_| true).await;
    assert_eq!(
        menu["commands"],
        json!([
            {"command": "new", "description": "Start a fresh conversation"},
            {"command": "stop", "description": "Stop the running turn"},
            {"command": "undo", "description": "Take back your last message and its answer"},
            {"command": "tasks", "description": "List the background tasks"},
            {"command": "cancel", "description": "Cancel a background task: /cancel ID"},
            {"command": "help", "description": "List the commands"},
            {"command": "tail_log", "description": "Show the end of the log."},
        ])
    );
    // A menu command runs the tool directly, as a typed slash command would.
    api.text(ANN, ANN as i64, "/tail_log lines=x");
    let answer = api.wait_for("SendMessage", |_| true).await;
    assert!(
        answer["text"].as_str().unwrap().contains("expected u32"),
        "{answer}"
    );
    // /start greets with the command list.
    api.text(ANN, ANN as i64, "/start");
    api.wait_for("SendMessage", |c| {
        c["text"].as_str().unwrap().contains("tail\\_log")
    })
    .await;
    // A tool switched off while the bot runs leaves the menu.
    running.unwrap().tools().set_enabled("tail_log", false);
    let menu = api
        .wait_for("SetMyCommands", |m| {
            m["commands"].as_array().unwrap().len() == Builtin::ALL.len()
        })
        .await;
    assert!(!menu.to_string().contains("tail_log"), "{menu}");
}
