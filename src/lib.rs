#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! - [`agent`]: [`Agent`], its builder, the turn loop and its [`AgentEvent`]s.
//! - [`provider`]: the [`Provider`](provider::Provider) trait, stream events,
//!   the retry rule and [`OpenAiCompatible`](provider::OpenAiCompatible).
//! - [`tool`]: the [`Tool`] trait, [`ToolContext`], closures as tools.
//! - [`history`]: where conversations are kept between turns.
//! - [`confirm`]: asking the user before a tool runs.
//! - [`testing`]: [`MockProvider`](testing::MockProvider) and wire helpers.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::print_stderr))]
#![doc(test(attr(deny(warnings))))]

pub mod agent;
pub mod confirm;
mod error;
pub mod history;
pub mod message;
pub mod provider;
pub mod testing;
pub mod tool;

pub use agent::{Agent, AgentEvent, Reply, TurnStream};
pub use error::{BoxError, Error, Result};
pub use message::{Message, Part, Reasoning, Role, ToolCall, ToolResult, ToolSpec, Usage};
pub use tool::{Tool, ToolContext};
