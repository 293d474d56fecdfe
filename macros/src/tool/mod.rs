//! `#[tool]` and `#[toolbox]`: parse, then expand. On error, the item is
//! still emitted beside the errors (a `#[tool]` function as a tool that
//! can't run), so the IDE keeps working and uses of it raise no errors of
//! their own.

mod expand;
mod parse;

use proc_macro2::TokenStream;
use quote::quote;

/// Expands `#[tool]` on a free function.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(error) => return finish(Err(error), item),
    };
    let expanded = match parse::ToolFn::parse(attr, func.clone(), None) {
        Ok(tool) => expand::free_fn(&tool),
        // The tool still exists, as one that can't run, so that
        // `.tool(name)` and `name::run(…)` raise no errors of their own —
        // unless the mistake is one a stand-in would repeat (a method, a
        // parameter named like the tool): then the function, as written.
        Err(error) if expand::can_stand_in(&func) => {
            let errors = error.into_compile_error();
            let stand_in = expand::stand_in(func);
            quote! { #errors #stand_in }
        }
        Err(error) => return finish(Err(error), item),
    };
    finish(Ok(expanded), item)
}

/// Expands `#[derive(Tool)]` on an arguments struct. On error, the errors
/// and a stand-in `Name::tool()`, so that its uses raise none of their own.
pub(crate) fn expand_derive(item: TokenStream) -> TokenStream {
    let input = match syn::parse2::<syn::DeriveInput>(item) {
        Ok(input) => input,
        Err(error) => return error.into_compile_error(),
    };
    let expanded = match parse::ToolStruct::parse(input.clone()) {
        Ok(tool) => expand::derive(&tool),
        Err(error) => {
            let errors = error.into_compile_error();
            let stand_in = expand::derive_stand_in(&input);
            quote! { #errors #stand_in }
        }
    };
    if std::env::var_os("FERROBOT_MACROS_DEBUG").is_some() {
        eprintln!("{expanded}");
    }
    expanded
}

/// Expands `#[toolbox]` on an `impl` block.
pub(crate) fn expand_toolbox(attr: TokenStream, item: TokenStream) -> TokenStream {
    let result = if attr.is_empty() {
        syn::parse2::<syn::ItemImpl>(item.clone()).and_then(expand::toolbox)
    } else {
        Err(syn::Error::new_spanned(
            attr,
            "`#[toolbox]` takes no arguments; put them on each `#[tool]` method",
        ))
    };
    finish(result, item)
}

fn finish(result: syn::Result<TokenStream>, item: TokenStream) -> TokenStream {
    let expanded = result.unwrap_or_else(|error| {
        let errors = error.into_compile_error();
        let item = fallback(item);
        quote! { #errors #item }
    });
    if std::env::var_os("FERROBOT_MACROS_DEBUG").is_some() {
        eprintln!("{expanded}");
    }
    expanded
}

/// The item as written, minus what only the macro understands (parameter
/// doc comments, `#[tool]` on methods), so it still compiles beside the
/// errors and the IDE keeps working.
fn fallback(item: TokenStream) -> TokenStream {
    if let Ok(mut func) = syn::parse2::<syn::ItemFn>(item.clone()) {
        strip(&mut func.sig);
        return quote!(#func);
    }
    if let Ok(mut block) = syn::parse2::<syn::ItemImpl>(item.clone()) {
        for inner in &mut block.items {
            if let syn::ImplItem::Fn(method) = inner {
                method.attrs.retain(|a| !a.path().is_ident("tool"));
                strip(&mut method.sig);
            }
        }
        return quote!(#block);
    }
    item
}

/// Takes off a signature's parameter attributes that only the macro
/// understands (doc comments, `#[serde]`, `#[schemars]`, `#[ctx]`,
/// `#[state]`).
fn strip(sig: &mut syn::Signature) {
    for input in &mut sig.inputs {
        if let syn::FnArg::Typed(typed) = input {
            typed
                .attrs
                .retain(|a| !(parse::is_field_attr(a) || parse::is_marker(a)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expansion, pretty-printed.
    fn expand_pretty(expanded: TokenStream) -> String {
        prettyplease::unparse(&syn::parse2(expanded).expect("the expansion is a file"))
    }

    #[test]
    fn a_free_function_expands_to_a_value_a_run_function_and_a_tool_impl() {
        let item = quote! {
            /// Show disk usage for a mount point.
            async fn disk_usage(
                ctx: ToolContext,
                State(db): State<Db>,
                /// Mount point to inspect.
                path: String,
                /// Report in human units.
                human: Option<bool>,
            ) -> Result<DiskReport, std::io::Error> {
                todo!()
            }
        };
        let attr = quote!(
            confirm = "Inspect {path}?",
            check = mounted,
            timeout = "30s",
            exclusive,
            requires = ["df"]
        );
        insta::assert_snapshot!("free_fn", expand_pretty(expand(attr, item)));
    }

    #[test]
    fn a_derived_struct_expands_to_a_tool_function_and_a_hidden_tool() {
        let item = quote! {
            /// Set the target temperature.
            #[derive(Tool)]
            #[serde(rename_all = "camelCase")]
            #[tool(confirm = "Set {targetCelsius} °C?", check = sane, exclusive)]
            pub struct SetThermostat {
                /// Degrees Celsius.
                #[schemars(range(min = 5, max = 30))]
                target_celsius: f64,
                /// The room; the living room if not given.
                #[serde(default)]
                room: String,
            }
        };
        insta::assert_snapshot!("derive", expand_pretty(expand_derive(item)));
    }

    #[test]
    fn a_toolbox_expands_to_one_holder_per_tool_and_into_iterator() {
        let item = quote! {
            impl Notes {
                /// Remember a note.
                #[tool]
                async fn add_note(&self, /** The note. */ text: String) {}

                fn helper(&self) {}
            }
        };
        insta::assert_snapshot!(
            "toolbox",
            expand_pretty(expand_toolbox(TokenStream::new(), item))
        );
    }
}
