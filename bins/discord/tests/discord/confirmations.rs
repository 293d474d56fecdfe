//! Confirmations: a tool asks with ✅ / ❌ / Always buttons, runs only on
//! the asker's yes or "always", and is declined when nobody answers in time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn, OpenAiStream};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::{agent, llm, openai, text_answer};
use serde_json::{Value, json};

use crate::support::{ANN, BOB, DM, messages_to, start, start_with};

#[tokio::test]
async fn a_tool_asks_with_buttons_and_runs_only_after_the_asker_says_yes() {
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "reboot", &json!({}))
            .into_sse(),
        text_answer("Rebooting in a minute."),
    ])
    .await;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let reboot = from_fn(
        "reboot",
        "Reboot this machine.",
        move |_: Value, ctx: ferrobot::ToolContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                ctx.notify_later("Rebooting now.", Duration::from_millis(50))
                    .await
                    .map(|()| "scheduled")
            }
        },
    )
    .confirm("Reboot this machine?");
    let (gateway, rest, _server) = start(&[ANN, BOB], |channel| {
        agent(openai(&model), &channel, vec![reboot.into_tool()])
    })
    .await;
    gateway.message(ANN, DM, None, "please reboot", false);
    let question = rest
        .wait_for(&messages_to(DM), |b| b["components"].is_array())
        .await;
    assert_eq!(
        question["content"],
        "Reboot this machine?\n\nWhy: default: the tool asks first\n\nAlways: allow every call of `reboot` in this conversation"
    );
    let buttons = &question["components"][0]["components"];
    assert_eq!(buttons[0]["label"], "✅ Yes");
    assert_eq!(buttons[1]["label"], "❌ No");
    let yes = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    gateway.press(BOB, "900000000000000011", &yes);
    let refused = rest
        .wait_for(
            "/interactions/900000000000000011/token-900000000000000011/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        refused["data"]["content"],
        "Only the person who asked can answer this."
    );
    assert_eq!(refused["data"]["flags"], 64);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "not run before the asker's yes"
    );
    gateway.press(ANN, "900000000000000012", &yes);
    let approved = rest
        .wait_for(
            "/interactions/900000000000000012/token-900000000000000012/callback",
            |_| true,
        )
        .await;
    assert_eq!(approved["type"], 7, "the question itself is updated");
    assert_eq!(
        approved["data"]["content"],
        "Reboot this machine?\n\n✅ Approved"
    );
    assert_eq!(approved["data"]["components"], json!([]));
    rest.wait_for(&messages_to(DM), |b| {
        b["content"] == "Rebooting in a minute."
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Rebooting now.")
        .await;
}

#[tokio::test]
async fn a_question_nobody_answers_is_declined_after_the_time_out() {
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let recorded = model.clone();
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooted" })
        .confirm("Reboot this machine?");
    let (gateway, rest, _server) = start_with(
        &[ANN],
        |settings| settings.confirm_timeout_secs = 1,
        |channel| agent(model, &channel, vec![reboot.into_tool()]),
    )
    .await;
    gateway.message(ANN, DM, None, "reboot", false);
    let shown = rest
        .wait_for("PATCH", |b| {
            b["content"] == "Reboot this machine?\n\n⌛ No answer within 1 s: declined"
        })
        .await;
    assert_eq!(shown["components"], json!([]), "the buttons go");
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Left it running.")
        .await;
    assert!(format!("{:?}", recorded.requests()[1].messages).contains("Cancelled by user."));
}

#[tokio::test]
async fn always_allows_the_call_and_says_what_it_covers() {
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
    let (gateway, rest, _server) = start(&[ANN, BOB], |channel| {
        agent(model, &channel, vec![reboot.into_tool()])
    })
    .await;
    gateway.message(ANN, DM, None, "reboot", false);
    let question = rest
        .wait_for(&messages_to(DM), |b| b["components"].is_array())
        .await;
    let buttons = &question["components"][0]["components"];
    assert_eq!(buttons[2]["label"], "🔁 Always");
    let always = buttons[2]["custom_id"].as_str().unwrap().to_owned();
    // Only the asker may allow it for good, as for a yes.
    gateway.press(BOB, "900000000000000021", &always);
    let refused = rest
        .wait_for(
            "/interactions/900000000000000021/token-900000000000000021/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        refused["data"]["content"],
        "Only the person who asked can answer this."
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    gateway.press(ANN, "900000000000000022", &always);
    let allowed = rest
        .wait_for(
            "/interactions/900000000000000022/token-900000000000000022/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        allowed["data"]["content"],
        "Reboot this machine?\n\n✅ Always allowed: every call of `reboot` in this conversation"
    );
    assert_eq!(allowed["data"]["components"], json!([]));
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Rebooted.")
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}
