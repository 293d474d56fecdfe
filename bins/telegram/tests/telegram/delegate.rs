//! Background work end to end: a bot configured with a `[delegate]`
//! specialist, a scripted model that delegates, the bot's answer at once,
//! the task's result later as a message of its own in that chat, and
//! `/tasks` and `/cancel` from the chat.

use std::time::Duration;

use ferrobot::testing::OpenAiStream;
use ferrobot_app::{Config, ConfigSource};
use ferrobot_testkit::Home;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{ANN, FakeBotApi, channel};

/// An OpenAI-compatible endpoint for the bot (model `lead-model`) and its
/// researcher (`research-model`): the lead delegates what the user asks,
/// then says it started; the researcher answers about Paris at once, and
/// takes a minute over every book.
async fn models() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(|request: &Request| {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            let last = body["messages"].as_array().unwrap().last().unwrap().clone();
            let said = last["content"].to_string();
            let sse = |stream: OpenAiStream| {
                ResponseTemplate::new(200).set_body_raw(stream.into_sse(), "text/event-stream")
            };
            if body["model"] == "research-model" {
                return if said.contains("every book") {
                    sse(OpenAiStream::new().text("never")).set_delay(Duration::from_secs(60))
                } else {
                    // Later than the lead's answer, which the chat sees first.
                    sse(OpenAiStream::new().text("Paris has 2.1 million inhabitants."))
                        .set_delay(Duration::from_millis(300))
                };
            }
            let delegate = |task: &str| {
                sse(OpenAiStream::new().tool_call(
                    "call_1",
                    "delegate",
                    &json!({"agent": "researcher", "task": task}),
                ))
            };
            match last["role"].as_str() {
                Some("tool") => sse(OpenAiStream::new().text("On it.")),
                _ if said.contains("Paris") => delegate("Population of Paris?"),
                _ if said.contains("read everything") => delegate("Read every book."),
                _ => sse(OpenAiStream::new().text("ok")),
            }
        })
        .mount(&server)
        .await;
    server
}

/// A sent message's text without MarkdownV2's escapes.
fn plain(call: &Value) -> String {
    call["text"].as_str().unwrap_or_default().replace('\\', "")
}

#[tokio::test]
async fn a_delegated_task_answers_later_in_the_chat_and_can_be_listed_and_cancelled() {
    let (api, server) = FakeBotApi::start().await;
    let model = models().await;
    let home = Home::new("telegram-delegate");
    let file = home.path().join("ferrobot.toml");
    std::fs::write(
        &file,
        format!(
            r#"
                [llm]
                base_url = "{}/v1"
                model = "lead-model"
                [history]
                path = "history.db"
                [tools]
                state_file = "tool_state.json"
                file = "tools.toml"
                [delegate.agents.researcher]
                description = "Looks things up."
                model = "research-model"
                tools = ["disk_usage"]
            "#,
            model.uri()
        ),
    )
    .unwrap();
    let loaded = Config::load(&ConfigSource::new().file(&file)).unwrap();
    let bot = tokio::spawn(async move {
        let channel = channel(&server, &[ANN]);
        loaded
            .serve(channel, None::<std::future::Ready<Option<String>>>)
            .await
    });

    api.text(ANN, ANN as i64, "How many people live in Paris?");
    api.wait_for_reply(0, |c| plain(c) == "On it.").await;
    let result = api
        .wait_for("SendMessage", |c| plain(c).starts_with("Task 1"))
        .await;
    assert_eq!(result["chat_id"], json!(ANN));
    assert_eq!(
        plain(&result),
        "Task 1 (researcher) finished:\n\nParis has 2.1 million inhabitants."
    );
    // The researcher had its own model, the task alone, and only its tools.
    let requests = ferrobot_testkit::chat_requests(&model).await;
    let researcher: Value = requests
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .find(|b| b["model"] == "research-model")
        .unwrap();
    assert_eq!(researcher["messages"].as_array().unwrap().len(), 1);
    assert!(
        researcher["messages"]
            .to_string()
            .contains("Population of Paris?")
    );
    let tools: Vec<&str> = researcher["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["disk_usage"]);

    let mark = api.mark();
    api.text(ANN, ANN as i64, "Now read everything, please.");
    api.wait_for_reply(mark, |c| plain(c) == "On it.").await;
    let mark = api.mark();
    api.text(ANN, ANN as i64, "/tasks");
    let listed = api
        .wait_until("the task list", || {
            api.calls("SendMessage")
                .into_iter()
                .chain(api.calls("EditMessageText"))
                .map(|c| plain(&c))
                .find(|t| t.contains("Background tasks:"))
        })
        .await;
    assert!(
        listed.contains("2 running (researcher, started "),
        "{listed}"
    );
    assert!(listed.contains("): Read every book."), "{listed}");
    assert!(
        listed.contains("1 finished (researcher, ended "),
        "{listed}"
    );

    api.text(ANN, ANN as i64, "/cancel 2");
    api.wait_for("SendMessage", |c| {
        plain(c) == "Cancelling task 2 (researcher); this chat will be told when it has stopped."
    })
    .await;
    let cancelled = api
        .wait_for("SendMessage", |c| {
            plain(c) == "Task 2 (researcher) was cancelled."
        })
        .await;
    assert_eq!(cancelled["chat_id"], json!(ANN));
    assert!(api.mark() > mark);
    bot.abort();
}
