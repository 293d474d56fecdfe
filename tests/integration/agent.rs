//! The turn loop.
