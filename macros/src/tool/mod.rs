//! `#[tool]` and `#[toolbox]`: parse, then expand. On error, the original
//! item is emitted beside the errors so the IDE keeps working.

mod expand;
mod parse;

use proc_macro2::TokenStream;
use quote::quote;

/// Expands `#[tool]` on a free function.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let result = syn::parse2::<syn::ItemFn>(item.clone())
        .and_then(|func| parse::ToolFn::parse(attr, func, None))
        .map(|tool| expand::free_fn(&tool));
    finish(result, item)
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
    fn strip(sig: &mut syn::Signature) {
        for input in &mut sig.inputs {
            if let syn::FnArg::Typed(typed) = input {
                typed.attrs.retain(|a| !a.path().is_ident("doc"));
            }
        }
    }
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
