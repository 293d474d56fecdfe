//! The `#[tool]` and `#[toolbox]` attributes and `#[derive(Tool)]` of
//! [ferrobot](https://docs.rs/ferrobot). Use them as
//! [`ferrobot::tool`](https://docs.rs/ferrobot/latest/ferrobot/attr.tool.html) and
//! [`ferrobot::toolbox`](https://docs.rs/ferrobot/latest/ferrobot/attr.toolbox.html),
//! whose pages are their reference; this crate's paths are not a public
//! interface.
//!
//! This file only dispatches: `tool/parse.rs` reads the function into a
//! model, `tool/expand.rs` writes the code.

mod tool;

use proc_macro::TokenStream;

// The reference for both attributes is on their re-exports in `ferrobot`
// (`src/docs/tool.md`, `src/docs/toolbox.md`): its examples need `ferrobot`,
// so only there can they run as doc tests. Rustdoc appends these docs to the
// re-export's, read from this crate as compiled, where `doc` is not set; so
// the note below shows only on this crate's own page, and a normal build
// allows what `missing_docs` would otherwise report.
#[cfg_attr(
    doc,
    doc = "Makes a ferrobot tool out of a documented function.\n\n\
           Use it as [`ferrobot::tool`](https://docs.rs/ferrobot/latest/ferrobot/attr.tool.html), \
           whose page is the reference: every option, the parameters, the return \
           types and what is generated. Depend on `ferrobot` only; this crate's \
           paths are not a public interface."
)]
#[cfg_attr(not(doc), allow(missing_docs))]
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand(attr.into(), item.into()).into()
}

#[cfg_attr(
    doc,
    doc = "Makes the `#[tool]` methods of an `impl` block tools sharing one value.\n\n\
           Use it as [`ferrobot::toolbox`](https://docs.rs/ferrobot/latest/ferrobot/attr.toolbox.html), \
           whose page is the reference."
)]
#[cfg_attr(not(doc), allow(missing_docs))]
#[proc_macro_attribute]
pub fn toolbox(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand_toolbox(attr.into(), item.into()).into()
}

#[cfg_attr(
    doc,
    doc = "Makes a ferrobot tool out of a documented arguments struct.\n\n\
           Use it as [`ferrobot::Tool`](https://docs.rs/ferrobot/latest/ferrobot/derive.Tool.html), \
           whose page is the reference."
)]
#[cfg_attr(not(doc), allow(missing_docs))]
#[proc_macro_derive(Tool, attributes(tool, serde, schemars))]
pub fn derive_tool(item: TokenStream) -> TokenStream {
    tool::expand_derive(item.into()).into()
}
