//! The power tools in the binary (`[tools] power`): a shutdown asked with
//! buttons, planned through the configured command, its announcement kept
//! in the history file, and `/cancel_shutdown` answering while the chat's
//! turn waits for the yes and withdrawing the announcement afterwards.

use std::time::{Duration, UNIX_EPOCH};

use ferrobot::history::{HistoryStore as _, SqliteHistory};
use ferrobot::testing::OpenAiStream;
use ferrobot_testkit::{Home, llm, text_answer};
use serde_json::json;

use crate::support::{ANN, BIN, FakeBotApi, binary_env};

#[tokio::test]
async fn a_shutdown_is_confirmed_planned_announced_and_cancelled() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "shutdown", &json!({"minutes": 2}))
            .into_sse(),
        text_answer("Powering off in 2 minutes."),
    ])
    .await;
    let home = Home::new("telegram-power");
    // The system's `shutdown`, as a script that writes down its arguments
    // (run by `sh`: a file just written can't be executed while another
    // test's fork may hold it open).
    let calls = home.path().join("shutdown-calls");
    let script = home.path().join("shutdown");
    std::fs::write(&script, format!("echo \"$@\" >> '{}'\n", calls.display())).unwrap();
    let mut env = binary_env(&server, &model);
    env.push(("FERROBOT_TOOLS__POWER", "true".into()));
    env.push((
        "FERROBOT_TOOLS__POWER_COMMAND",
        format!("[\"/bin/sh\", \"{}\"]", script.display()),
    ));
    let mut bot = home.command(BIN, &env).spawn().unwrap();
    // The command is in the chat's menu.
    let menu = api.wait_for("SetMyCommands", |_| true).await;
    assert!(menu.to_string().contains("cancel_shutdown"), "{menu}");
    api.text(ANN, ANN as i64, "power off in 2 minutes");
    let question = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Power this machine off in 2 minute(s)?"))
        })
        .await;
    // While the turn waits for the yes, the command answers at once.
    api.text(ANN, ANN as i64, "/cancel_shutdown");
    // (A command's output is shown as it came, in a code block.)
    api.wait_for("SendMessage", |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.contains("No shutdown or reboot was announced"))
    })
    .await;
    let yes = question["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    api.press(ANN, ANN as i64, &yes);
    api.wait_for_reply(0, |c| c["text"] == r"Powering off in 2 minutes\.")
        .await;
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "-c\n-P +2\n");
    // The announcement waits in the history file: a restart keeps it.
    let history = SqliteHistory::open(home.path().join("data/ferrobot/history.db"))
        .await
        .unwrap();
    let far = UNIX_EPOCH + Duration::from_secs(u32::MAX.into());
    let pending = history.due_later_messages(far).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].text, "Powering off now.");
    assert_eq!(pending[0].conversation, ANN.to_string());
    api.text(ANN, ANN as i64, "/cancel_shutdown");
    api.wait_for("SendMessage", |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.contains("Cancelled: the machine stays on."))
    })
    .await;
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "-c\n-P +2\n-c\n");
    assert!(history.due_later_messages(far).await.unwrap().is_empty());
    bot.start_kill().unwrap();
    bot.wait().await.unwrap();
}
