//! Testing agents without a network or a model.
//!
//! [`MockProvider`] answers model calls from a script of [`MockTurn`]s (or a
//! function of the request) and records every [`RecordedRequest`], so a test
//! can assert both what the agent replied and what the model was sent.
//! [`OpenAiStream`], [`text_sse`] and [`tool_call_sse`] build OpenAI-format
//! response bodies for tests that serve a real HTTP endpoint instead.
//! [`Cassette`] (feature `cassette`) records a real provider's answers once
//! and replays them offline; [`conformance`] (feature `conformance`) asks a
//! server and model whether they handle tool calling properly.

#[cfg(feature = "cassette")]
mod cassette;
#[cfg(feature = "conformance")]
pub mod conformance;
mod mock;
mod openai;
#[cfg(feature = "cassette")]
mod redact;
#[cfg(any(feature = "cassette", feature = "conformance"))]
mod request;
#[cfg(all(feature = "cassette", feature = "bot"))]
mod session;

#[cfg(all(feature = "cassette", feature = "__http"))]
mod wire;

#[cfg(feature = "cassette")]
pub use cassette::{Cassette, Mode, RECORD_VAR};
#[cfg(all(feature = "cassette", feature = "bot"))]
pub use session::{Session, SessionError, SessionRecorder};
#[cfg(all(feature = "cassette", feature = "__http"))]
pub use wire::WireCassette;

pub use mock::{MockProvider, MockTurn, RecordedRequest};
pub use openai::{OpenAiStream, sse_body, text_sse, tool_call_sse};
