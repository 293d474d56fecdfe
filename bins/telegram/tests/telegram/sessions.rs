//! A Telegram conversation pinned as a regression test: recorded by the
//! binary with `FERROBOT_SESSION`, replayed offline against the config's
//! agent, and a changed config named.

use ferrobot::testing::{OpenAiStream, SessionError};
use ferrobot_app::{Config, ConfigSource, LoadedConfig};
use ferrobot_testkit::{Home, llm, text_answer};
use serde_json::json;

use crate::support::{ANN, BIN, FakeBotApi, TOKEN};

/// Where tools' results are in the model's requests.
const OUTPUT: &str = "messages.*.parts.*.content";

/// The home's config: the model server at `model`, every file in the home.
fn config(model: &str, system_prompt: &str) -> String {
    format!(
        r#"
[llm]
base_url = "{model}/v1"
model = "test-model"

[agent]
system_prompt = "{system_prompt}"

[context]
window = 32768

[tools]
file = "tools.toml"
state_file = "tool_state.json"

[history]
path = "history.db"
"#
    )
}

fn load(home: &Home) -> LoadedConfig {
    let mut source = ConfigSource::defaults_only();
    source.file = Some(home.path().join("ferrobot.toml"));
    Config::load(&source).unwrap()
}

async fn replay(loaded: &LoadedConfig, home: &Home, ignored: &[&str]) -> Result<(), String> {
    let ignored: Vec<String> = ignored.iter().map(|p| (*p).to_owned()).collect();
    match loaded
        .replay_session(&home.path().join("session.json"), &ignored)
        .await
    {
        Ok(()) => Ok(()),
        Err(error) => match error.downcast::<SessionError>() {
            Ok(error) if matches!(*error, SessionError::Differs { .. }) => Err(error.to_string()),
            other => panic!("{other:?}"),
        },
    }
}

#[tokio::test]
async fn a_recorded_telegram_conversation_replays_and_names_what_changed() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "uptime", &json!({}))
            .into_sse(),
        text_answer("Up for a while."),
        text_answer("All *good*."),
    ])
    .await;
    let home = Home::new("telegram-session");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        config(&model.uri(), "Be brief."),
    )
    .unwrap();
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_TELEGRAM__TOKEN", TOKEN.into()),
                ("FERROBOT_TELEGRAM__API_URL", server.uri()),
                ("FERROBOT_TELEGRAM__ALLOWED_USER_IDS", format!("[{ANN}]")),
                // The start-up notice goes out, unrecorded: a replay sends none.
                ("FERROBOT_TELEGRAM__EDIT_INTERVAL_MS", "50".into()),
                (
                    "FERROBOT_SESSION",
                    home.path().join("session.json").display().to_string(),
                ),
            ],
        )
        .spawn()
        .unwrap();
    api.wait_for("SendMessage", |c| {
        c["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("ferrobot is online"))
    })
    .await;
    api.text(ANN, ANN as i64, "how long have you been up?");
    api.wait_for_reply(0, |c| c["text"] == r"Up for a while\.")
        .await;
    api.text(ANN, ANN as i64, "thanks");
    api.wait_for_reply(0, |c| c["text"] == r"All _good_\.")
        .await;
    bot.start_kill().unwrap();
    bot.wait().await.unwrap();
    let session = std::fs::read_to_string(home.path().join("session.json")).unwrap();
    assert!(
        session.contains("\"text\": \"All *good*.\""),
        "the text before Telegram's escaping: {session}"
    );
    assert!(!session.contains(TOKEN), "{session}");
    assert!(!session.contains("ferrobot is online"), "{session}");
    assert!(home.path().join("session.model.json").is_file());

    // Offline: the model server is gone.
    drop(model);
    let loaded = load(&home);
    // The tool runs again, and the uptime it reads a second later is not
    // the recorded one: named, then left out.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let report = replay(&loaded, &home, &[]).await.unwrap_err();
    assert!(
        report.contains("messages.2.parts.0.content: recorded \"up "),
        "{report}"
    );
    assert!(
        report
            .contains(r#"in 111, after the message "how long have you been up?" (its message 1)"#),
        "{report}"
    );
    replay(&loaded, &home, &[OUTPUT]).await.unwrap();

    // A changed system prompt is named.
    std::fs::write(
        home.path().join("ferrobot.toml"),
        config("http://127.0.0.1:9", "Be verbose."),
    )
    .unwrap();
    let report = replay(&load(&home), &home, &["messages.2.parts.0.output"])
        .await
        .unwrap_err();
    assert!(
        report.contains(r#"system: recorded "Be brief."#),
        "{report}"
    );
}
