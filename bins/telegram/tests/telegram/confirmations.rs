//! Confirmations: a tool asks with ✅ / ❌ / Always buttons, runs only on
//! the asker's yes or "always", and is declined when nobody answers in time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::ToolContext;
use ferrobot::testing::{MockProvider, MockTurn, OpenAiStream};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::{agent, llm, openai, text_answer};
use serde_json::{Value, json};

use crate::support::{ANN, BOB, FakeBotApi, start, start_with};

#[tokio::test]
async fn a_tool_asks_with_buttons_and_runs_only_after_the_asker_says_yes() {
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "reboot", &json!({"delay": 1}))
            .into_sse(),
        text_answer("Rebooting in a minute."),
    ])
    .await;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let reboot = from_fn(
        "reboot",
        "Reboot this machine.",
        move |_: Value, ctx: ToolContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                ctx.notify_later("Rebooting now.", Duration::from_millis(50))
                    .await
                    .map(|()| "scheduled")
            }
        },
    )
    .confirm("Reboot this machine?");
    let _bot = start(&server, &[ANN, BOB], |channel| {
        agent(openai(&model), &channel, vec![reboot.into_tool()])
    });
    api.text(ANN, ANN as i64, "please reboot");
    let question = api
        .wait_for("SendMessage", |c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Reboot this machine?"))
        })
        .await;
    assert_eq!(
        question["text"],
        "Reboot this machine?\n\nWhy: default: the tool asks first\n\nAlways: allow every call of `reboot` in this conversation"
    );
    let buttons = &question["reply_markup"]["inline_keyboard"][0];
    assert_eq!(buttons[0]["text"], "✅ Yes");
    assert_eq!(buttons[1]["text"], "❌ No");
    let yes = buttons[0]["callback_data"].as_str().unwrap().to_owned();
    // Bob is allowed to use the bot, but it isn't his question.
    api.press(BOB, ANN as i64, &yes);
    let refused = api
        .wait_for("AnswerCallbackQuery", |c| {
            c["callback_query_id"] == format!("press-{BOB}-{yes}")
        })
        .await;
    assert_eq!(
        refused["text"],
        "Only the person who asked can answer this."
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "not run before the asker's yes"
    );
    api.press(ANN, ANN as i64, &yes);
    api.wait_for("EditMessageText", |c| {
        c["text"] == "Reboot this machine?\n\n✅ Approved"
    })
    .await;
    api.wait_for_reply(0, |c| c["text"] == r"Rebooting in a minute\.")
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    // The tool's later message reaches the chat that asked.
    api.wait_for("SendMessage", |c| {
        c["text"] == r"Rebooting now\." && c["chat_id"] == json!(ANN)
    })
    .await;
}

#[tokio::test]
async fn a_question_nobody_answers_is_declined_after_the_time_out() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let recorded = model.clone();
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooted" })
        .confirm("Reboot this machine?");
    let _bot = start_with(
        &server,
        &[ANN],
        |settings| settings.confirm_timeout_secs = 1,
        |channel| agent(model, &channel, vec![reboot.into_tool()]),
    );
    api.text(ANN, ANN as i64, "reboot");
    api.wait_for("EditMessageText", |c| {
        c["text"] == "Reboot this machine?\n\n⌛ No answer within 1 s: declined"
    })
    .await;
    api.wait_for_reply(0, |c| c["text"] == r"Left it running\.")
        .await;
    let results = &recorded.requests()[1].messages;
    assert!(format!("{results:?}").contains("Cancelled by user."));
}

#[tokio::test]
async fn always_allows_the_call_and_says_what_it_covers() {
    let (api, server) = FakeBotApi::start().await;
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Rebooted."));
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let reboot = from_fn("reboot", "Reboot.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "rebooted" }
    })
    .confirm("Reboot this machine?");
    let _bot = start(&server, &[ANN, BOB], |channel| {
        agent(model, &channel, vec![reboot.into_tool()])
    });
    api.text(ANN, ANN as i64, "reboot");
    let question = api
        .wait_for("SendMessage", |c| c["reply_markup"].is_object())
        .await;
    let buttons = &question["reply_markup"]["inline_keyboard"][0];
    assert_eq!(buttons[2]["text"], "🔁 Always");
    let always = buttons[2]["callback_data"].as_str().unwrap().to_owned();
    // Only the asker may allow it for good, as for a yes.
    api.press(BOB, ANN as i64, &always);
    api.wait_for("AnswerCallbackQuery", |c| {
        c["text"] == "Only the person who asked can answer this."
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    api.press(ANN, ANN as i64, &always);
    api.wait_for("EditMessageText", |c| {
        c["text"]
            == "Reboot this machine?\n\n✅ Always allowed: every call of `reboot` in this conversation"
    })
    .await;
    api.wait_for_reply(0, |c| c["text"] == r"Rebooted\.").await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}
