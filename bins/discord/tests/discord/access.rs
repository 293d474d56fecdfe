//! The allow-lists of users and servers: strangers and other servers are
//! refused once and reach nothing — no reply, no tool, no model, no button
//! press — wherever they write.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::IntoTool as _;
use ferrobot_testkit::{agent, counted};
use serde_json::json;

use crate::support::{ANN, BOT, DM, GUILD, GUILD_CHANNEL, STRANGER, messages_to, start_with};

#[tokio::test]
async fn strangers_and_other_servers_are_refused_once_and_reach_nothing() {
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let (ping, ran) = counted("ping", "pong");
    let (gateway, rest, _server) = start_with(
        &[ANN],
        |settings| settings.allowed_guild_ids = vec![1234],
        |channel| agent(model, &channel, vec![ping.into_tool()]),
    )
    .await;
    gateway.message(STRANGER, DM, None, "hello", false);
    gateway.message(STRANGER, DM, None, "/ping", false);
    gateway.slash(STRANGER, "900000000000000001", "ping", json!([]));
    // Ann, but in a server that isn't allowed.
    gateway.message(
        ANN,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> /ping"),
        true,
    );
    let refusal = rest
        .wait_for(
            "/interactions/900000000000000001/token-900000000000000001/callback",
            |_| true,
        )
        .await;
    assert_eq!(refusal["type"], 4);
    assert_eq!(refusal["data"]["flags"], 64, "only the stranger sees it");
    rest.wait_for(&messages_to(GUILD_CHANNEL), |b| {
        b["content"].as_str().unwrap().contains("private bot")
    })
    .await;
    rest.wait_for(&messages_to(DM), |_| true).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let to_dm = rest.bodies(&messages_to(DM));
    assert_eq!(to_dm.len(), 1, "one refusal for the stranger: {to_dm:?}");
    assert!(
        to_dm[0]["content"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(recorded.requests().is_empty());
}

#[tokio::test]
async fn a_stranger_reaches_nothing_in_an_allowed_server_by_edits_or_button_presses() {
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let recorded = model.clone();
    let (reboot, ran) = counted("reboot", "rebooted");
    let reboot = reboot.confirm("Reboot this machine?");
    let guild: u64 = GUILD.parse().unwrap();
    let (gateway, rest, _server) = start_with(
        &[ANN],
        |settings| settings.allowed_guild_ids = vec![guild],
        |channel| agent(model, &channel, vec![reboot.into_tool()]),
    )
    .await;
    // In a server the bot is allowed in, mentioning it; then the same
    // message edited, in the server and in a DM.
    gateway.message(
        STRANGER,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> /reboot"),
        true,
    );
    let edited = gateway.message_data(
        STRANGER,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> reboot now"),
        true,
    );
    gateway.dispatch("MESSAGE_UPDATE", edited);
    let edited = gateway.message_data(STRANGER, DM, None, "reboot now", false);
    gateway.dispatch("MESSAGE_UPDATE", edited);
    // Ann asks; the stranger presses her question's buttons and Stop.
    gateway.message(ANN, DM, None, "reboot", false);
    let question = rest
        .wait_for(&messages_to(DM), |b| {
            b["components"][0]["components"][0]["label"] == "✅ Yes"
        })
        .await;
    let buttons = &question["components"][0]["components"];
    for (i, button) in [&buttons[0], &buttons[2]].into_iter().enumerate() {
        let id = format!("90000000000000010{i}");
        gateway.press(STRANGER, &id, button["custom_id"].as_str().unwrap());
        let refused = rest
            .wait_for(&format!("/interactions/{id}/token-{id}/callback"), |_| true)
            .await;
        assert_eq!(
            refused["data"]["content"],
            "Only the person who asked can answer this."
        );
        assert_eq!(refused["data"]["flags"], 64, "only the stranger sees it");
    }
    gateway.press(STRANGER, "900000000000000109", "stop");
    let refused = rest
        .wait_for(
            "/interactions/900000000000000109/token-900000000000000109/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        refused["data"]["content"],
        "Only the people this bot answers can stop it."
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "nothing ran");
    // Still Ann's question, and her turn still running.
    gateway.press(
        ANN,
        "900000000000000110",
        buttons[1]["custom_id"].as_str().unwrap(),
    );
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Left it running.")
        .await;
    let to_server = rest.bodies(&messages_to(GUILD_CHANNEL));
    assert_eq!(to_server.len(), 1, "one refusal in all: {to_server:?}");
    assert!(
        to_server[0]["content"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let requests = recorded.requests();
    assert_eq!(requests.len(), 2, "only Ann's turn reached the model");
    assert!(!format!("{requests:?}").contains("reboot now"));
}
