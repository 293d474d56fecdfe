//! What the tests share: the ids they use, the fakes (`Gateway`, `Rest`),
//! and `start`, which serves an agent on Discord pointed at fresh fakes.

mod gateway;
mod rest;

use std::sync::Arc;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::bot::{Channel, serve};
use ferrobot_app::{Config, ConfigSource};
use ferrobot_discord::Discord;
use wiremock::MockServer;

pub(crate) use gateway::Gateway;
pub(crate) use rest::Rest;

pub(crate) const TOKEN: &str = "MTA5.TEST.discord-token_secret";
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_ferrobot-discord");
pub(crate) const APP: &str = "910254320740610069";
pub(crate) const BOT: &str = "714902836760019017";
pub(crate) const ANN: u64 = 111_111_111_111;
pub(crate) const BOB: u64 = 222_222_222_222;
pub(crate) const STRANGER: u64 = 999_999_999_999;
pub(crate) const DM: &str = "500000000000000001";
pub(crate) const GUILD: &str = "600000000000000001";
pub(crate) const GUILD_CHANNEL: &str = "600000000000000002";

fn settings(rest: &MockServer, gateway: &Gateway, allowed: &[u64]) -> ferrobot_app::DiscordConfig {
    let mut settings = Config::load(&ConfigSource::defaults_only())
        .unwrap()
        .config
        .discord;
    settings.api_url = rest.uri();
    settings.gateway_url = gateway.url.clone();
    settings.allowed_user_ids = allowed.to_vec();
    settings.edit_interval_ms = 40;
    settings.confirm_timeout_secs = 5;
    settings
}

/// Starts the bot on fresh fakes; returns them once READY is through.
pub(crate) async fn start(
    allowed: &[u64],
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> (Gateway, Rest, MockServer) {
    start_with(allowed, |_| {}, build).await
}

/// [`start`], with the settings changed by `adjust` first.
pub(crate) async fn start_with(
    allowed: &[u64],
    adjust: impl FnOnce(&mut ferrobot_app::DiscordConfig),
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> (Gateway, Rest, MockServer) {
    install_crypto();
    let gateway = Gateway::start().await;
    let (rest, server) = Rest::start().await;
    let mut settings = settings(&server, &gateway, allowed);
    adjust(&mut settings);
    let discord = Discord::new(&settings, TOKEN).unwrap();
    let channel: Arc<dyn Channel> = Arc::new(discord.clone());
    let agent = build(Arc::clone(&channel));
    tokio::spawn(async move { serve(agent, channel).await.unwrap() });
    tokio::time::timeout(Duration::from_secs(10), discord.connected())
        .await
        .unwrap();
    (gateway, rest, server)
}

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub(crate) fn messages_to(channel: &str) -> String {
    format!("POST /api/v10/channels/{channel}/messages")
}
