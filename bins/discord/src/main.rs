//! `ferrobot-discord`: your machine's assistant on Discord.
//!
//! Exit codes: 0 stopped; 1 the bot failed while running; 2 bad
//! configuration or a token Discord refuses.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let bin = ferrobot_app::Bin {
        name: "ferrobot-discord",
        version: env!("CARGO_PKG_VERSION"),
        about: "Your machine's assistant on Discord.",
        env: "FERROBOT_DISCORD__TOKEN, FERROBOT_DISCORD__ALLOWED_USER_IDS=[111], FERROBOT_LLM__BASE_URL, FERROBOT_LLM__MODEL… See docs/discord.md.",
    };
    ferrobot_app::main(
        bin,
        |loaded| async move { ferrobot_discord::run(&loaded).await },
    )
    .await
}
