//! ferrobot's integration tests: one binary, real HTTP over loopback.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

// `Anthropic`, the Messages API: corpus replay, thinking sent back, retries.
#[cfg(all(feature = "anthropic", feature = "openai"))]
mod anthropic;
// `Gemini`: corpus replay, thought signatures, errors, switching dialects.
#[cfg(all(feature = "gemini", feature = "openai"))]
mod gemini;
// Typed answers through Anthropic's output tool, over loopback.
#[cfg(all(feature = "anthropic", feature = "openai"))]
mod typed_wire;
// `OpenAiResponses`: corpus replay, reasoning items sent back, failures.
#[cfg(all(feature = "responses", feature = "openai"))]
mod responses;
// The turn loop against `MockProvider`, one module per area (agent/mod.rs):
// tools, confirmation, slash commands, budgets, cancellation, events, undo,
// images.
mod agent;
// Arguments checked before confirmation (schema constraints, `check = …`);
// state as an `Arc`, read back, checked at `build()`.
#[cfg(feature = "macros")]
mod arguments;
// Tools written with `#[tool]` and `#[toolbox]`, end to end.
#[cfg(feature = "macros")]
mod macros;
// The schemas of many `#[tool]` signatures in every provider's form.
#[cfg(feature = "macros")]
mod schemas;
// Scheduled prompts and later messages: stores, claims, restarts, retries,
// the tools as slash commands, all on an injected clock.
#[cfg(all(feature = "schedule", feature = "sqlite"))]
mod schedule;
// The built-in commands: `/help`, `/undo`, `/new`, and the tools they shadow.
mod builtins;
// The shared bot runtime: a channel joined to an agent.
#[cfg(feature = "bot")]
mod bot;
// `confirm::channel`: questions answered from another task.
mod confirm_channel;
// MCP servers' tools: a server written here for faults, npm's reference
// servers over stdio and streamable HTTP.
#[cfg(feature = "mcp")]
mod mcp;
// The permission rules: every row of the guide's table, patterns, paths,
// the shell reader's tricks, and properties no combination may break.
mod policy;
// The endpoint every HTTP dialect shares: observers, headers, keys kept out
// of sight, and context windows read from each kind of server's metadata.
#[cfg(all(
    feature = "openai",
    feature = "ollama",
    feature = "anthropic",
    feature = "gemini",
    feature = "responses"
))]
mod endpoint;
// Trimming long conversations: a proptest that calls stay with their results.
mod context;
// Replays the recorded provider traffic in ../shared/corpus through a
// loopback server and compares the assembled message with `expected.json`.
#[cfg(feature = "openai")]
mod conformance;
// `Ollama`, the native dialect: corpus replay, a tool round, errors, health.
#[cfg(all(feature = "ollama", feature = "openai"))]
mod ollama;
// `OpenAiCompatible` over wiremock: server quirks, errors, retries, the
// request bodies sent (insta snapshots), health.
#[cfg(feature = "openai")]
mod openai;
// A tool round against the real llama.cpp server of ../shared/realserver.
#[cfg(feature = "openai")]
mod realserver;
// The turn journal and the recovery of what a crash interrupted, on real
// SQLite files.
#[cfg(all(feature = "bot", feature = "sqlite"))]
mod journal;
// `SqliteHistory` against real files: restart, search, migration, refusals.
#[cfg(feature = "sqlite")]
mod sqlite;
// `PostgresHistory` against a real server (FERROBOT_TEST_POSTGRES_URL, a
// database per test): every method, races between two stores, migrations,
// passwords kept out of errors.
#[cfg(feature = "postgres")]
mod postgres;
// Wire cassettes: each dialect's bytes recorded and replayed through its decoder.
#[cfg(all(
    feature = "cassette",
    feature = "openai",
    feature = "anthropic",
    feature = "gemini",
    feature = "ollama",
    feature = "responses",
    feature = "sqlite"
))]
mod wire_cassette;
// The conformance check: the real llama.cpp server, and scripted faults.
#[cfg(all(feature = "conformance", feature = "openai"))]
mod conformance_check;
// Fault-matrix rows over a raw socket, asserted at the agent.
#[cfg(feature = "openai")]
mod faults;
// Nothing quadratic in the stream decoders, checked by ratio.
#[cfg(all(
    feature = "cassette",
    feature = "openai",
    feature = "anthropic",
    feature = "ollama"
))]
mod scaling;
// Bot sessions recorded at the `Channel` trait and replayed, the model in a
// cassette: questions answered as recorded, differences named, the clock.
#[cfg(all(feature = "cassette", feature = "bot", feature = "sqlite"))]
mod session;
// Cassettes: recorded over loopback, replayed offline, mismatches named.
#[cfg(all(feature = "cassette", feature = "openai", feature = "sqlite"))]
mod cassette;
// The batteries-included system tools, reading this machine.
#[cfg(feature = "tools")]
mod system_tools;
// The power tools: planned, announced, withdrawn after a restart,
// `/cancel_shutdown` mid-turn, the system's command line.
#[cfg(all(feature = "tools", feature = "schedule", feature = "sqlite"))]
mod power;
// proptest: any split of a stream into network reads gives the same events.
#[cfg(feature = "openai")]
mod split;

// HTTPS with the library's TLS set-up.
#[cfg(feature = "openai")]
mod tls;
// Proxies named by the environment: a tunnel, an absolute URL, NO_PROXY.
#[cfg(feature = "openai")]
mod proxy;
// What several modules build the same way: a message of every part type,
// a slow echoing model.
mod fixtures;
// Shared helpers: loopback servers, event collection, and the rule for
// outside parts such as the corpus (fail under CI, skip loudly elsewhere).
#[cfg(feature = "openai")]
mod support;
