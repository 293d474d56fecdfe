//! `ferrobot-telegram`: your machine's assistant on Telegram.
//!
//! Exit codes: 0 stopped; 1 the bot failed while running; 2 bad
//! configuration or a token Telegram refuses.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let bin = ferrobot_app::Bin {
        name: "ferrobot-telegram",
        version: env!("CARGO_PKG_VERSION"),
        about: "Your machine's assistant on Telegram.",
        env: "FERROBOT_TELEGRAM__TOKEN, FERROBOT_TELEGRAM__ALLOWED_USER_IDS=[111], FERROBOT_LLM__BASE_URL, FERROBOT_LLM__MODEL… See docs/telegram.md.",
    };
    ferrobot_app::main(bin, |loaded| async move {
        ferrobot_telegram::run(&loaded).await
    })
    .await
}
