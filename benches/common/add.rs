//! The `add` tool both turn benches give their agent.

use ferrobot::tool::{FnTool, from_fn};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `add`.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct AddArgs {
    /// The first operand.
    pub(crate) a: i64,
    /// The second operand.
    pub(crate) b: i64,
}

/// Adds two integers.
pub(crate) fn add_tool() -> FnTool {
    from_fn(
        "add",
        "Add two integers.",
        |args: AddArgs, _ctx| async move { args.a + args.b },
    )
}
