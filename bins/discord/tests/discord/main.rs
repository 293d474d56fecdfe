//! The Discord bot end to end: a fake gateway (a WebSocket server speaking
//! HELLO, IDENTIFY, READY, RESUME and heartbeats) and a fake REST API
//! (wiremock) over loopback, real payloads, and assertions on the REST calls
//! the bot makes.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]
// Payload builders take JSON by value, so call sites read as the payload.
#![allow(clippy::needless_pass_by_value)]

// The fake gateway and REST API, the ids the tests use, and starting the bot on them.
mod support;
// Replies: DMs and mentions answered, streamed by edits, split at 2,000 characters.
mod replies;
// Attachments: images to the model with the text, the rest named in the answer.
mod images;
// The allow-lists: strangers and other servers refused once, reaching nothing.
mod access;
// Confirmations: ✅ / ❌ buttons, the asker's to answer, declined after the time-out.
mod confirmations;
// Stopping a running turn (the Stop button, `/stop`) and steering it.
mod steering;
// Slash commands: registered from the tools, answered through the interaction.
mod slash_commands;
// Errors and retries: a dropped connection resumed, rate limits waited out.
mod retries;
// The recorded dispatches in ../shared/corpus, replayed.
mod corpus;
// The binary, configured from the environment alone, and its start-up errors.
mod binary;
