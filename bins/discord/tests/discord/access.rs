//! The allow-lists of users and servers: strangers and other servers are
//! refused once and reach nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrobot::testing::MockProvider;
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_testkit::agent;
use serde_json::{Value, json};

use crate::support::{ANN, BOT, DM, GUILD, GUILD_CHANNEL, STRANGER, messages_to, start_with};

#[tokio::test]
async fn strangers_and_other_servers_are_refused_once_and_reach_nothing() {
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let ping = from_fn("ping", "Ping.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "pong" }
    });
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
