//! What every bot binary shares (feature `bot`): splitting long replies for
//! chat platforms.

mod split;

pub use split::{Length, split_message};
