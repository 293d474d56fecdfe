//! The `ferrobot-telegram` binary, configured from the environment alone:
//! serving, a schedule it runs, a revoked token, no token, nobody allowed, and a failed
//! download (whose URL holds the token) kept out of the log.

use ferrobot_testkit::{Home, llm, text_answer};
use serde_json::{Value, json};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::images::photo;
use crate::support::{ANN, BIN, FakeBotApi, TOKEN};

#[tokio::test]
async fn the_binary_runs_from_the_environment_alone() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("All good.")]).await;
    let home = Home::new("telegram-env");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
            ],
        )
        .spawn()
        .unwrap();
    // Once connected, the start-up report goes to the first allowed user.
    let notice = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("ferrobot is online"))
        })
        .await;
    assert_eq!(notice["chat_id"], json!(ANN));
    assert!(
        notice["text"].as_str().unwrap().contains("Memory"),
        "{notice}"
    );
    api.text(ANN, ANN as i64, "all good?");
    api.wait_for_reply(0, |c| c["text"] == r"All good\.").await;
    let asked = &ferrobot_testkit::chat_requests(&model).await[0];
    let body: Value = serde_json::from_slice(&asked.body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert!(body["messages"].to_string().contains("all good?"));
    // The prompt ends with today's facts: the date, the machine, and the
    // user's name as Telegram gives it.
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Today is "), "{system}");
    assert!(system.ends_with("The user is Ann."), "{system}");
    // The system tools are offered, and the history is kept on disk.
    assert!(body["tools"].to_string().contains("disk_usage"));
    assert!(home.path().join("data/ferrobot/history.db").is_file());
    // Each turn is traced, and the log is kept in a file too, beside it.
    let traces = std::fs::read_to_string(home.path().join("data/ferrobot/traces.jsonl")).unwrap();
    let trace: Value = serde_json::from_str(traces.lines().next().unwrap()).unwrap();
    assert_eq!(trace["prompt"], "all good?");
    assert_eq!(trace["reply"], "All good.");
    assert_eq!(trace["conversation"], ANN.to_string());
    let logs: Vec<_> = std::fs::read_dir(home.path().join("data/ferrobot/logs"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    assert!(
        logs.iter().any(|log| log.contains("connected to Telegram")),
        "{logs:?}"
    );
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("connected to Telegram"), "{log}");
    assert!(
        !log.contains(TOKEN) && !log.contains("TEST-token"),
        "the token stays out of the log"
    );
}

#[tokio::test]
async fn a_revoked_token_stops_the_bot_with_a_clear_message() {
    let server = MockServer::start().await;
    Mock::given(path_regex(r"^/bot[^/]+/GetMe$"))
        .respond_with(
            ResponseTemplate::new(401).set_body_json(
                json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
            ),
        )
        .mount(&server)
        .await;
    let home = Home::new("telegram-revoked");
    let output = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
            ],
        )
        .output()
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("Telegram refused the bot token"), "{log}");
    assert!(!log.contains(TOKEN), "{log}");
}

#[tokio::test]
async fn without_a_token_the_bot_says_where_to_put_one() {
    let home = Home::new("telegram-no-token");
    let output = home.command(BIN, &[]).output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("FERROBOT_TELEGRAM__TOKEN"), "{log}");
}

#[tokio::test]
async fn with_nobody_allowed_the_bot_refuses_everyone_and_says_so() {
    let (api, server) = FakeBotApi::start().await;
    let home = Home::new("telegram-nobody");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
            ],
        )
        .spawn()
        .unwrap();
    // Nobody to show the menu to: it is only taken down for everyone.
    api.wait_for("DeleteMyCommands", |_| true).await;
    api.text(ANN, ANN as i64, "hello");
    let refusal = api.wait_for("SendMessage", |_| true).await;
    assert!(refusal["text"].as_str().unwrap().contains("private bot"));
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("allowed_user_ids is empty"), "{log}");
    assert!(log.contains(&format!("user_id={ANN}")), "{log}");
}

#[tokio::test]
async fn a_failed_download_is_named_and_the_token_stays_out_of_log_and_chat() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("I only got your words.")]).await;
    let home = Home::new("telegram-download");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
                // Everything the bot and its libraries log.
                ("FERROBOT_LOG", "trace".into()),
            ],
        )
        .spawn()
        .unwrap();
    api.wait_for("SetMyCommands", |_| true).await;
    // `getFile` answers; the download from /file/bot<TOKEN>/… fails.
    api.file("gone", None);
    api.media(
        ANN,
        ANN as i64,
        json!({"photo": photo(&[("gone", 800, 40_000)]), "caption": "what is this?"}),
    );
    api.wait_for_reply(0, |c| c["text"] == r"I only got your words\.")
        .await;
    assert_eq!(api.0.lock().unwrap().downloads, ["photos/gone.jpg"]);
    let said: Vec<String> = api
        .calls("SendMessage")
        .iter()
        .chain(&api.calls("EditMessageText"))
        .map(|c| c["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        said.iter()
            .any(|t| t.starts_with("This didn't reach me: photo \\(could not be downloaded\\)")),
        "{said:?}"
    );
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("could not download an image"), "{log}");
    let secret = TOKEN.split_once(':').unwrap().1;
    for text in said.iter().map(String::as_str).chain([&*log]) {
        assert!(!text.contains(secret), "the token shows in: {text}");
    }
    // The model got the caption, and nothing of the token either.
    let asked = &ferrobot_testkit::chat_requests(&model).await[0];
    let body = String::from_utf8_lossy(&asked.body);
    assert!(body.contains("what is this?") && !body.contains(secret));
}

#[tokio::test]
async fn the_binary_runs_a_schedule_made_by_a_slash_command() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("Backups are current.")]).await;
    let home = Home::new("telegram-schedule");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
                ("FERROBOT_SCHEDULE__TIME_ZONE", "UTC".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
            ],
        )
        .spawn()
        .unwrap();
    api.wait_for("SetMyCommands", |c| {
        c.to_string().contains("schedule_prompt")
    })
    .await;
    // Whole seconds: the store keeps seconds.
    let at = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 6).unwrap();
    api.text(
        ANN,
        ANN as i64,
        &format!(r#"/schedule_prompt at={at} prompt="are the backups current?""#),
    );
    api.wait_for("SendMessage", |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.contains("Scheduled 1: “are the backups current?”, once at "))
    })
    .await;
    // The scheduler, run by the binary on the system clock, asks the model
    // when the time comes and posts the answer in the chat.
    let answer = api
        .wait_for_reply(0, |c| c["text"] == r"Backups are current\.")
        .await;
    assert_eq!(answer["chat_id"], json!(ANN));
    let asked = &ferrobot_testkit::chat_requests(&model).await[0];
    assert!(String::from_utf8_lossy(&asked.body).contains("are the backups current?"));
    bot.start_kill().unwrap();
    let _ = bot.wait().await;
}

/// An MCP server of the config (npm's `server-everything`, over stdio)
/// starts with the bot: its tools join the command menu once it connects,
/// and the model's call of one is answered by it.
#[tokio::test]
async fn the_binary_offers_the_tools_of_its_mcp_servers() {
    let Some(entry) = ferrobot_testkit::outside::mcp_server("server-everything") else {
        return;
    };
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![
        ferrobot::testing::tool_call_sse("c1", "everything__echo", &json!({"message": "hi"})),
        text_answer("It said hi."),
    ])
    .await;
    let home = Home::new("telegram-mcp");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_TELEGRAM__STARTUP_NOTICE", "false".into()),
                ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
                ("FERROBOT_MCP__SERVERS__EVERYTHING__COMMAND", "node".into()),
                (
                    "FERROBOT_MCP__SERVERS__EVERYTHING__ARGS",
                    format!("[\"{}\", \"stdio\"]", entry.display()),
                ),
            ],
        )
        .spawn()
        .unwrap();
    api.wait_for("SetMyCommands", |m| {
        m.to_string().contains("everything__echo")
    })
    .await;
    api.text(ANN, ANN as i64, "say hi through echo");
    api.wait_for_reply(0, |c| c["text"] == r"It said hi\.")
        .await;
    let requests = ferrobot_testkit::chat_requests(&model).await;
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert!(
        second["messages"].to_string().contains("Echo: hi"),
        "{second}"
    );
    bot.start_kill().unwrap();
    let _ = bot.wait().await;
}
