//! The `ferrobot-discord` binary, configured from the environment alone:
//! serving, a refused token, and no token.

use std::time::Duration;

use ferrobot_testkit::{Home, llm, text_answer};
use serde_json::Value;

use crate::support::{ANN, BIN, DM, Gateway, Rest, TOKEN, messages_to};

#[tokio::test]
async fn the_binary_runs_from_the_environment_alone() {
    let gateway = Gateway::start().await;
    let (rest, server) = Rest::start().await;
    let model = llm(vec![text_answer("All good.")]).await;
    let home = Home::new("discord-env");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_DISCORD__TOKEN", TOKEN.into()),
                ("FERROBOT_DISCORD__API_URL", server.uri()),
                ("FERROBOT_DISCORD__GATEWAY_URL", gateway.url.clone()),
                ("FERROBOT_DISCORD__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_DISCORD__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
            ],
        )
        .spawn()
        .unwrap();
    // Once connected, the start-up report goes to a DM with the first allowed user.
    let dm = rest
        .wait_for("POST /api/v10/users/@me/channels", |_| true)
        .await;
    assert_eq!(dm["recipient_id"], ANN.to_string());
    let notice = rest
        .wait_for(&messages_to(DM), |b| {
            b["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("ferrobot is online"))
        })
        .await;
    assert!(
        notice["content"].as_str().unwrap().contains("Memory"),
        "{notice}"
    );
    // The system tools are offered as slash commands.
    let menu = rest.wait_for("/commands", |_| true).await;
    assert!(menu.to_string().contains("\"disk_usage\""), "{menu}");
    gateway.message(ANN, DM, None, "all good?", false);
    rest.wait_for("", |b| b["content"] == "All good.").await;
    let asked = &ferrobot_testkit::chat_requests(&model).await[0];
    let body: Value = serde_json::from_slice(&asked.body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert!(body["messages"].to_string().contains("all good?"));
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("connected to Discord"), "{log}");
    assert!(
        !log.contains(TOKEN) && !log.contains("discord-token_secret"),
        "the token stays out of the log"
    );
}

#[tokio::test]
async fn a_refused_token_stops_the_bot_with_a_clear_message() {
    let gateway = Gateway::start().await;
    let (_rest, server) = Rest::start().await;
    let home = Home::new("discord-refused");
    let output = home
        .command(
            BIN,
            &[
                ("FERROBOT_DISCORD__TOKEN", "not-the-token".into()),
                ("FERROBOT_DISCORD__API_URL", server.uri()),
                ("FERROBOT_DISCORD__GATEWAY_URL", gateway.url.clone()),
                ("FERROBOT_DISCORD__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_DISCORD__STARTUP_NOTICE", "false".into()),
            ],
        )
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), output)
        .await
        .unwrap()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("Discord refused the bot token"), "{log}");
    assert!(!log.contains("not-the-token"), "{log}");
}

#[tokio::test]
async fn without_a_token_the_bot_says_where_to_put_one() {
    let home = Home::new("discord-no-token");
    let output = home.command(BIN, &[]).output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("FERROBOT_DISCORD__TOKEN"), "{log}");
}
