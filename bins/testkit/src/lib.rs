//! What the tests share. Always: [`fault`], a raw-TCP server that
//! misbehaves on cue; [`outside`], the rule for parts a test needs from
//! outside the repository (skip loudly locally, fail under CI); and
//! [`realserver`], the real llama.cpp server started once per test process.
//! With `postgres`, a database of its own per test ([`postgres`]).
//! With the default feature `bots`, the binaries' end-to-end helpers
//! ([`bots`]); the library's own tests use this crate without it, so it never
//! turns on a library feature they test without.

// Helpers panic on setup failures, as the tests that call them would.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

#[cfg(feature = "bots")]
pub mod bots;
pub mod fault;
pub mod outside;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod realserver;

#[cfg(feature = "bots")]
pub use bots::*;
