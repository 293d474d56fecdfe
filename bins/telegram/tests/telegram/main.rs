//! The Telegram bot end to end: a fake Bot API over loopback (wiremock)
//! feeding real update payloads, a model behind a fake OpenAI-compatible
//! endpoint or a `MockProvider`, and assertions on the calls the bot makes.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

// The fake Bot API, the bot's test settings, and starting the bot on them.
mod support;
// Replies: streamed by edits, split at the limit, MarkdownV2 or plain text.
mod replies;
// Photos and files: images to the model with the caption, the rest named in the answer.
mod images;
// The allow-list: strangers refused once, reaching neither model nor tools.
mod access;
// Confirmations: ✅ / ❌ buttons, the asker's to answer, declined after the time-out.
mod confirmations;
// Scheduled prompts: made in a chat, answered there when due, across a restart.
mod schedules;
// Stopping a running turn (the Stop button, `/stop`) and steering it.
mod steering;
// Background work: `[delegate]` specialists answering later in the chat, `/tasks`, `/cancel`.
mod delegate;
// Groups and forum topics: each topic its own conversation, answers threaded.
mod topics;
// The command menu: the tools Telegram can name, kept up to date.
mod menu;
// Errors and retries: flood control, a Bot API out of reach at start.
mod retries;
// The recorded updates in ../shared/corpus, replayed.
mod corpus;
// The binary, configured from the environment alone, and its start-up errors.
mod binary;
// The binary killed at random moments: every message answered exactly once.
mod crash;
// Replicas on one PostgreSQL database behind a webhook, one killed mid-run.
mod scale;
// Webhook mode: the secret checked, each update answered once, albums gathered.
mod webhook;
// The power tools: confirmed, planned through the configured command,
// `/cancel_shutdown` mid-turn and after.
#[cfg(unix)]
mod power;
// The control panel in headless Chromium: a tool switched off is no longer offered.
mod panel;
// A conversation recorded with FERROBOT_SESSION and replayed offline.
mod sessions;
// A whole session searched for the API key and the bot token: nowhere.
mod secrets;
