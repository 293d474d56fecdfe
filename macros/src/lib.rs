//! The `#[tool]` attribute of [ferrobot](https://docs.rs/ferrobot). Use it
//! through `ferrobot::tool`; this crate's paths are not a public interface.
//!
//! This file only dispatches: `tool/parse.rs` reads the function into a
//! model, `tool/expand.rs` writes the code.

mod tool;

use proc_macro::TokenStream;

/// Turns a documented async (or plain) function into a ferrobot tool.
///
/// See `ferrobot::tool` and the tools guide for the full story; in short,
/// the function's doc comment describes the tool, each parameter's `///`
/// comment describes that argument, and the function's name becomes a value
/// to pass to `Agent::builder().tool(…)`. The original function stays
/// callable as `name::run(…)`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand(attr.into(), item.into()).into()
}

/// Makes the `#[tool]` methods of an `impl` block tools sharing one value;
/// the value then converts into all of them at once with
/// `Agent::builder().tools(value)`.
#[proc_macro_attribute]
pub fn toolbox(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand_toolbox(attr.into(), item.into()).into()
}
