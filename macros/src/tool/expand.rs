//! Writing the code for a parsed tool.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ImplItem, ItemImpl, ReturnType, Type};

use super::parse::{
    Arg, Confirm, Errors, Param, ToolAttrs, ToolFn, ToolStruct, last_segment, mentions,
};

/// A free function: a unit struct named like the function (the value given
/// to `.tool(…)`), the function itself as `name::run`, and the `Tool` impl.
pub(crate) fn free_fn(tool: &ToolFn) -> TokenStream {
    let func = &tool.func;
    let vis = &func.vis;
    let ident = &func.sig.ident;
    let doc_attrs = func.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let other_attrs = func.attrs.iter().filter(|a| !a.path().is_ident("doc"));
    let mut run = func.sig.clone();
    run.ident = format_ident!("run");
    let block = &func.block;
    let call = quote!(#ident::run);
    let tool_impl = tool_impl(tool, &quote!(#ident), &call);
    quote! {
        #(#doc_attrs)*
        ///
        /// A ferrobot tool, made by `#[tool]`: register it with
        /// `Agent::builder().tool(…)`, or call the function directly with `run`.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #ident;

        impl #ident {
            /// The function behind the tool, unchanged, for calling directly
            /// (e.g. in unit tests).
            #(#other_attrs)*
            // Arguments arrive owned from the model's JSON, whether or not
            // the body needs them owned.
            #[allow(clippy::needless_pass_by_value)]
            #vis #run #block
        }

        #tool_impl
    }
}

/// Whether a stand-in can be emitted where the function was: not for a
/// method (no unit struct in an `impl`), nor when a parameter is named like
/// the tool (the unit struct would capture the pattern).
pub(crate) fn can_stand_in(func: &syn::ItemFn) -> bool {
    let tool = &func.sig.ident;
    func.sig.inputs.iter().all(|input| match input {
        syn::FnArg::Receiver(_) => false,
        syn::FnArg::Typed(typed) => !mentions(&typed.pat, tool),
    })
}

/// What stands for a tool whose attribute has errors (already reported):
/// the same value and `run` function, and a `Tool` impl that is never
/// called, since the program doesn't compile.
pub(crate) fn stand_in(mut func: syn::ItemFn) -> TokenStream {
    super::strip(&mut func.sig);
    let vis = &func.vis;
    let ident = &func.sig.ident;
    let mut run = func.sig.clone();
    run.ident = format_ident!("run");
    let block = &func.block;
    quote! {
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #ident;

        impl #ident {
            #[allow(dead_code, clippy::needless_pass_by_value)]
            #vis #run #block
        }

        impl ::ferrobot::tool::Tool for #ident {
            fn spec(&self) -> &::ferrobot::ToolSpec {
                ::std::unreachable!("`#[tool]` reported an error")
            }

            fn call(
                &self,
                _: ::ferrobot::__private::Value,
                _: ::ferrobot::ToolContext,
            ) -> ::ferrobot::__private::BoxFuture<'_, ::std::result::Result<::ferrobot::tool::ToolOutput, ::ferrobot::tool::ToolError>> {
                ::std::unreachable!("`#[tool]` reported an error")
            }
        }
    }
}

/// A struct deriving `Tool`: the same hidden items as a `#[tool]`
/// function's, a hidden unit struct implementing `Tool` by reading the
/// arguments into the struct and calling its `TypedTool::call`, and
/// `Name::tool()` to register it.
pub(crate) fn derive(tool: &ToolStruct) -> TokenStream {
    let (ident, vis, name) = (&tool.ident, &tool.vis, &tool.name);
    let args: Vec<&Arg> = tool.args.iter().collect();
    let pipeline = arguments_pipeline(name, &tool.description, &args, &tool.container_attrs);
    let args_type = args_type(&args);
    let fields: Vec<&Ident> = args.iter().map(|a| &a.ident).collect();
    let construct = if tool.braced {
        quote!(#ident { #(#fields: __args.#fields),* })
    } else {
        quote!(#ident)
    };
    let check = tool.attrs.check.as_ref().map(|path| {
        quote_spanned! {path.span()=>
            ::ferrobot::__private::checked(#name, #path(&__value))?;
        }
    });
    let typed_call = quote_spanned! {ident.span()=>
        <#ident as ::ferrobot::tool::TypedTool>::call(__value, ctx)
    };
    let convert = convert_output(ident.span());
    let tool_impl = tool_trait_impl(
        &quote!(__ferrobot_tool),
        &quote! {
            let __value = __ferrobot_parse(arguments)?;
            let __value = #typed_call.await;
            #convert
        },
        &options(&tool.attrs, name),
    );
    let holder = tool_holder(ident);
    quote! {
        const _: () = {
            #pipeline

            /// The model's arguments as the struct, or every problem with them.
            fn __ferrobot_parse(
                arguments: ::ferrobot::__private::Value,
            ) -> ::std::result::Result<#ident, ::ferrobot::tool::ToolError> {
                let __args: #args_type = (__ferrobot_kit().parse)(arguments)?;
                let __value = #construct;
                #check
                ::std::result::Result::Ok(__value)
            }

            #holder

            #tool_impl

            impl #ident {
                /// The tool whose arguments are this struct, made by
                /// `#[derive(Tool)]`: register it with
                /// `Agent::builder().tool(…)`. It reads the model's
                /// arguments into the struct and runs its `TypedTool::call`.
                #[allow(dead_code)]
                #vis fn tool() -> impl ::ferrobot::tool::Tool + ::std::marker::Copy + ::std::fmt::Debug {
                    __ferrobot_tool
                }
            }
        };
    }
}

/// `impl Tool for holder`, the same for every kind of tool: the spec, a
/// `call` running `call_body` (which reads `arguments` through
/// `__ferrobot_parse` and may use `ctx`), `check_arguments` running the same
/// parse, and the kind's own `methods`.
fn tool_trait_impl(
    holder: &TokenStream,
    call_body: &TokenStream,
    methods: &TokenStream,
) -> TokenStream {
    quote! {
        impl ::ferrobot::tool::Tool for #holder {
            fn spec(&self) -> &::ferrobot::ToolSpec {
                &SPEC
            }

            fn call(
                &self,
                arguments: ::ferrobot::__private::Value,
                ctx: ::ferrobot::ToolContext,
            ) -> ::ferrobot::__private::BoxFuture<'_, ::std::result::Result<::ferrobot::tool::ToolOutput, ::ferrobot::tool::ToolError>> {
                ::std::boxed::Box::pin(async move {
                    #call_body
                })
            }

            fn check_arguments(
                &self,
                arguments: &::ferrobot::__private::Value,
            ) -> ::std::result::Result<(), ::ferrobot::tool::ToolError> {
                __ferrobot_parse(::std::clone::Clone::clone(arguments)).map(drop)
            }

            #methods
        }
    }
}

/// The hidden unit struct a derived tool is.
fn tool_holder(ident: &Ident) -> TokenStream {
    let doc = format!("The tool `{ident}::tool()` returns.");
    quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, Copy, Default)]
        #[allow(non_camel_case_types)]
        struct __ferrobot_tool;
    }
}

/// What stands for a derived tool whose attribute has errors (already
/// reported): `Name::tool()`, returning a tool that is never called, so
/// that its uses raise no errors of their own.
pub(crate) fn derive_stand_in(input: &syn::DeriveInput) -> TokenStream {
    if !input.generics.params.is_empty() {
        return TokenStream::new();
    }
    let (ident, vis) = (&input.ident, &input.vis);
    let holder = tool_holder(ident);
    quote! {
        const _: () = {
            #holder

            impl ::ferrobot::tool::Tool for __ferrobot_tool {
                fn spec(&self) -> &::ferrobot::ToolSpec {
                    ::std::unreachable!("`#[derive(Tool)]` reported an error")
                }

                fn call(
                    &self,
                    _: ::ferrobot::__private::Value,
                    _: ::ferrobot::ToolContext,
                ) -> ::ferrobot::__private::BoxFuture<'_, ::std::result::Result<::ferrobot::tool::ToolOutput, ::ferrobot::tool::ToolError>> {
                    ::std::unreachable!("`#[derive(Tool)]` reported an error")
                }
            }

            impl #ident {
                #[allow(dead_code)]
                #vis fn tool() -> impl ::ferrobot::tool::Tool + ::std::marker::Copy + ::std::fmt::Debug {
                    __ferrobot_tool
                }
            }
        };
    }
}

/// An `impl` block whose `#[tool]` methods become tools sharing the value.
pub(crate) fn toolbox(mut block: ItemImpl) -> syn::Result<TokenStream> {
    if !block.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &block.generics,
            "a toolbox can't be generic: name a concrete type",
        ));
    }
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new_spanned(
            path,
            "`#[toolbox]` goes on an inherent `impl Type` block, not a trait impl",
        ));
    }
    let self_ty = block.self_ty.clone();
    let mut errors = Errors::default();
    let mut tools = Vec::new();
    let mut marked = 0;
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else { continue };
        let Some(position) = method.attrs.iter().position(|a| a.path().is_ident("tool")) else {
            continue;
        };
        let attr = method.attrs.remove(position);
        marked += 1;
        let args = match &attr.meta {
            syn::Meta::Path(_) => TokenStream::new(),
            syn::Meta::List(list) => list.tokens.clone(),
            syn::Meta::NameValue(nv) => {
                errors.push(syn::Error::new_spanned(
                    nv,
                    "write `#[tool]` or `#[tool(…)]`",
                ));
                continue;
            }
        };
        let func = syn::ItemFn {
            attrs: method.attrs.clone(),
            vis: method.vis.clone(),
            sig: method.sig.clone(),
            block: Box::new(method.block.clone()),
        };
        if let Some(tool) = errors.take(ToolFn::parse(args, func, Some(()))) {
            if !tool.has_self {
                errors.push(syn::Error::new_spanned(
                    &method.sig,
                    "toolbox tools take `&self`; a tool without state can be a free `#[tool]` function",
                ));
            }
            // The method keeps its name and body; only the parameter docs
            // (which don't compile there) go.
            method.sig = tool.func.sig.clone();
            tools.push(tool);
        }
    }
    if marked == 0 {
        errors.push(syn::Error::new_spanned(
            &block.self_ty,
            "this toolbox has no `#[tool]` methods",
        ));
    }
    errors.finish()?;
    let type_name = match &*self_ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let mut impls = Vec::new();
    let mut structs = Vec::new();
    for tool in &tools {
        let method = &tool.func.sig.ident;
        let holder = format_ident!("__ferrobot_{}_{}", type_name, method);
        let call = quote!(self.0.#method);
        let tool_impl = tool_impl(tool, &quote!(#holder), &call);
        impls.push(quote! {
            #[allow(non_camel_case_types)]
            struct #holder(::std::sync::Arc<#self_ty>);
            #tool_impl
        });
        structs.push(holder);
    }
    Ok(quote! {
        #block

        const _: () = {
            #(#impls)*

            impl ::std::iter::IntoIterator for #self_ty {
                type Item = ::std::sync::Arc<dyn ::ferrobot::tool::Tool>;
                type IntoIter = ::std::vec::IntoIter<Self::Item>;

                fn into_iter(self) -> Self::IntoIter {
                    let shared = ::std::sync::Arc::new(self);
                    ::std::vec![#(
                        ::std::sync::Arc::new(#structs(::std::sync::Arc::clone(&shared)))
                            as ::std::sync::Arc<dyn ::ferrobot::tool::Tool>
                    ),*]
                    .into_iter()
                }
            }
        };
    })
}

/// The arguments struct and the `Tool` impl for `holder`, calling `call`.
fn tool_impl(tool: &ToolFn, holder: &TokenStream, call: &TokenStream) -> TokenStream {
    let name = &tool.name;
    let args: Vec<&Arg> = tool.args().collect();
    let pipeline = arguments_pipeline(name, &tool.description, &args, &[]);
    let args_type = args_type(&args);
    let mut states = Vec::new();
    let call_args: Vec<TokenStream> = tool
        .params
        .iter()
        .map(|param| match param {
            Param::Context {
                by_ref: true, ty, ..
            } => quote_spanned! {ty.span()=>
                <#ty as ::ferrobot::__private::BorrowedContext>::borrow(&ctx)
            },
            Param::Context {
                by_ref: false,
                ty,
                marked,
            }
            | Param::State { ty, marked } => {
                let injected = format_ident!("__ferrobot_injected{}", states.len());
                let how = injection_trait(*marked);
                let from_context = quote_spanned! {ty.span()=>
                    <#ty as #how>::from_context(&ctx)?
                };
                states.push(quote! { let #injected = #from_context; });
                quote!(#injected)
            }
            Param::Arg(arg) => {
                let ident = &arg.ident;
                quote!(__args.#ident)
            }
        })
        .collect();
    let state_types = tool.params.iter().filter_map(|param| match param {
        Param::Context {
            by_ref: false,
            ty,
            marked,
        }
        | Param::State { ty, marked } => {
            let how = injection_trait(*marked);
            Some(quote_spanned! {ty.span()=> <#ty as #how>::state_type() })
        }
        _ => None,
    });
    // The tool's own check, last: it sees arguments that fit the schema.
    // Spanned at the path and the parameters, so a signature that doesn't
    // fit is shown there.
    let check = tool.attrs.check.as_ref().map(|path| {
        let refs = args.iter().map(|arg| {
            let ident = &arg.ident;
            quote_spanned!(ident.span()=> &__args.#ident)
        });
        quote_spanned! {path.span()=>
            ::ferrobot::__private::checked(#name, #path(#(#refs),*))?;
        }
    });
    let awaited = if tool.func.sig.asyncness.is_some() {
        quote!(.await)
    } else {
        quote!()
    };
    let convert = output_conversion(&tool.func.sig.output);
    let options = options(&tool.attrs, name);
    let tool_impl = tool_trait_impl(
        holder,
        &quote! {
            let __args = __ferrobot_parse(arguments)?;
            #(#states)*
            let __out = #call(#(#call_args),*) #awaited;
            #convert
        },
        &quote! {
            fn state_types(&self) -> ::std::vec::Vec<::ferrobot::tool::StateType> {
                ::ferrobot::__private::state_types(&[#(#state_types),*])
            }

            #options
        },
    );
    quote! {
        const _: () = {
            #pipeline

            /// The model's arguments, or every problem with them.
            fn __ferrobot_parse(
                arguments: ::ferrobot::__private::Value,
            ) -> ::std::result::Result<#args_type, ::ferrobot::tool::ToolError> {
                let __args = (__ferrobot_kit().parse)(arguments)?;
                #check
                ::std::result::Result::Ok(__args)
            }

            #tool_impl
        };
    }
}

/// The trait an injected parameter's type is held to: one whose message
/// speaks of the type's name, or of the `#[ctx]`/`#[state]` mark.
fn injection_trait(marked: bool) -> TokenStream {
    if marked {
        quote!(::ferrobot::__private::Marked)
    } else {
        quote!(::ferrobot::__private::Injected)
    }
}

/// The hidden arguments struct with the types written in the tool,
/// `__ferrobot_args<A, B, …>`.
fn args_type(args: &[&Arg]) -> TokenStream {
    let types = args.iter().filter(|a| a.generic).map(|a| &a.ty);
    quote!(__ferrobot_args<#(#types),*>)
}

/// The hidden items that read the model's arguments, the same for every
/// kind of tool: `__ferrobot_args` (one field per argument, deriving
/// `Deserialize` and `JsonSchema`), `SPEC`, `CONSTRAINTS`, and
/// `__ferrobot_kit()`, whose `parse` runs the pipeline of
/// `__private::parse_arguments` (normalized, read field by field, held to
/// the schema's constraints).
///
/// The struct is generic over the arguments' types, and made concrete in
/// one place, `__ferrobot_kit()`, where each type is asked with a
/// `__private::Probe` (spanned at the type) whether it is `Deserialize` and
/// `JsonSchema`. A type that isn't gets one error there, naming the derives,
/// and the rest of the code goes on with a stand-in type, so that the
/// derives add no errors of their own (issue 13: 7 errors and 200 lines
/// naming serde's internals before). An argument with a serde or schemars
/// attribute that names code (`with`, `default`, …) keeps its type in the
/// struct, since that code is written for the type.
fn arguments_pipeline(
    name: &str,
    description: &str,
    args: &[&Arg],
    container_attrs: &[syn::Attribute],
) -> TokenStream {
    let generic: Vec<&&Arg> = args.iter().filter(|a| a.generic).collect();
    let params: Vec<Ident> = (0..generic.len())
        .map(|i| format_ident!("__ferrobot_T{}", i))
        .collect();
    let answers: Vec<Ident> = (0..generic.len())
        .map(|i| format_ident!("__ferrobot_S{}", i))
        .collect();
    let mut next = 0;
    let mut field_types = Vec::new();
    let mut answer_types = Vec::new();
    for arg in args {
        if arg.generic {
            field_types.push(params[next].to_token_stream());
            answer_types.push(answers[next].to_token_stream());
            next += 1;
        } else {
            field_types.push(arg.ty.to_token_stream());
            answer_types.push(arg.ty.to_token_stream());
        }
    }
    let fields = args.iter().zip(&field_types).map(|(arg, ty)| {
        let (ident, attrs) = (&arg.ident, &arg.field_attrs);
        quote! { #(#attrs)* #ident: #ty }
    });
    let written = generic.iter().map(|a| &a.ty);
    let bounds = generic.iter().zip(&answers).map(|(arg, answer)| {
        let ty = &arg.ty;
        quote! {
            #answer: ::ferrobot::__private::serde::de::DeserializeOwned
                + ::ferrobot::__private::schemars::JsonSchema
                + ::ferrobot::__private::Take<#ty>
        }
    });
    let probes = generic.iter().map(|arg| {
        let ty = &arg.ty;
        quote_spanned! {ty.span()=>
            (&&::ferrobot::__private::Probe::<#ty>::new()).__ferrobot_argument()
        }
    });
    let field_checks = args.iter().zip(&answer_types).map(|(arg, ty)| {
        let (wire, optional) = (&arg.wire_name, arg.optional);
        if arg.custom_read {
            quote!(::ferrobot::__private::FieldCheck::presence(#wire, #optional))
        } else {
            quote!(::ferrobot::__private::FieldCheck::new::<#ty>(#wire, #optional))
        }
    });
    let takes = args.iter().map(|arg| {
        let ident = &arg.ident;
        if arg.generic {
            quote!(#ident: ::ferrobot::__private::Take::__ferrobot_take(__args.#ident))
        } else {
            quote!(#ident: __args.#ident)
        }
    });
    let args_type = quote!(__ferrobot_args<#(#written),*>);
    quote! {
        #[derive(::ferrobot::__private::serde::Deserialize, ::ferrobot::__private::schemars::JsonSchema)]
        #[serde(crate = "::ferrobot::__private::serde")]
        #[schemars(crate = "::ferrobot::__private::schemars")]
        #(#container_attrs)*
        #[allow(non_camel_case_types, dead_code)]
        struct __ferrobot_args<#(#params),*> { #(#fields),* }

        #[allow(clippy::type_complexity)]
        fn __ferrobot_kit_for<#(#bounds),*>(
            _: (#(::ferrobot::__private::Probe<#answers>,)*),
        ) -> ::ferrobot::__private::Kit<#args_type> {
            ::ferrobot::__private::Kit {
                schema: ::ferrobot::tool::schema::for_type::<__ferrobot_args<#(#answers),*>>,
                parse: |arguments| {
                    let __args: __ferrobot_args<#(#answers),*> = ::ferrobot::__private::parse_arguments(
                        #name,
                        arguments,
                        &[#(#field_checks),*],
                        &CONSTRAINTS,
                    )?;
                    ::std::result::Result::Ok(__ferrobot_args { #(#takes),* })
                },
            }
        }

        /// How this tool's arguments are read: the one place their types
        /// are asked whether they can be.
        fn __ferrobot_kit() -> ::ferrobot::__private::Kit<#args_type> {
            #[allow(unused_imports)]
            use ::ferrobot::__private::{ViaArgument as _, ViaNoArgument as _};
            __ferrobot_kit_for((#(#probes,)*))
        }

        static SPEC: ::std::sync::LazyLock<::ferrobot::ToolSpec> = ::std::sync::LazyLock::new(|| {
            ::ferrobot::ToolSpec::new(#name, #description, (__ferrobot_kit().schema)())
        });
        static CONSTRAINTS: ::std::sync::LazyLock<::ferrobot::tool::Constraints> =
            ::std::sync::LazyLock::new(|| ::ferrobot::__private::typed_constraints(&SPEC.parameters));
    }
}

/// The `Tool` methods that come from `#[tool(…)]`'s options.
fn options(attrs: &ToolAttrs, name: &str) -> TokenStream {
    let confirmation = match &attrs.confirm {
        None => quote!(::std::option::Option::None),
        Some(Confirm::Default) => quote!(::std::option::Option::Some(
            ::ferrobot::__private::default_confirmation(#name, arguments)
        )),
        Some(Confirm::Template(template)) => quote!(::std::option::Option::Some(
            ::ferrobot::tool::fill_placeholders(#template, arguments)
        )),
    };
    let exclusive = attrs.exclusive;
    let effects = if attrs.effects.is_empty() {
        quote!()
    } else {
        let flags = &attrs.effects;
        quote! {
            fn effects(&self) -> ::ferrobot::tool::Effects {
                ::ferrobot::tool::Effects::NONE #(.#flags())*
            }
        }
    };
    let timeout = match attrs.timeout_ms {
        Some(ms) => quote!(::std::option::Option::Some(::std::time::Duration::from_millis(#ms))),
        None => quote!(::std::option::Option::None),
    };
    let retries = match attrs.retries {
        Some(n) => quote! {
            fn argument_retries(&self) -> u32 {
                #n
            }
        },
        None => quote!(),
    };
    let platforms = &attrs.platforms;
    let requires = &attrs.requires;
    let availability = if platforms.is_empty() && requires.is_empty() {
        quote!(::std::result::Result::Ok(()))
    } else {
        quote! {
            static AVAILABLE: ::std::sync::OnceLock<::std::result::Result<(), ::std::string::String>> =
                ::std::sync::OnceLock::new();
            ::std::clone::Clone::clone(AVAILABLE.get_or_init(|| {
                ::ferrobot::__private::availability(&[#(#platforms),*], &[#(#requires),*])
            }))
        }
    };
    quote! {
        fn confirmation(&self, arguments: &::ferrobot::__private::Value) -> ::std::option::Option<::std::string::String> {
            let _ = arguments;
            #confirmation
        }

        fn is_exclusive(&self) -> bool {
            #exclusive
        }

        fn timeout(&self) -> ::std::option::Option<::std::time::Duration> {
            #timeout
        }

        fn availability(&self) -> ::std::result::Result<(), ::std::string::String> {
            #availability
        }

        #retries

        #effects
    }
}

/// How the function's return value becomes the text the model reads: a
/// `Result`'s error goes to the model as an error result; a success value
/// (or a plain return value) is taken as is when it is text, `()` or a
/// number, and as JSON when it is any other `Serialize`.
fn output_conversion(output: &ReturnType) -> TokenStream {
    // Spanned at the return type: a type that can't be converted is
    // reported there, with one message.
    let span = match output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => proc_macro2::Span::call_site(),
    };
    let success = convert_output(span);
    let is_result = match output {
        ReturnType::Type(_, ty) => last_segment(ty).is_some_and(|s| s.ident == "Result"),
        ReturnType::Default => false,
    };
    if is_result {
        quote! {
            match __out {
                ::std::result::Result::Ok(__value) => #success,
                ::std::result::Result::Err(__error) => ::std::result::Result::Err(::ferrobot::tool::ToolError::new(__error)),
            }
        }
    } else {
        quote! {{
            let __value = __out;
            #success
        }}
    }
}

/// `__value` as the text the model reads, by the rules of
/// `output_conversion`; a type that can't become text is reported at
/// `span`.
fn convert_output(span: proc_macro2::Span) -> TokenStream {
    quote_spanned! {span=> {
        #[allow(unused_imports)]
        use ::ferrobot::__private::{
            ViaIntoToolOutput as _, ViaNothing as _, ViaSerialize as _, ViaSerializeResult as _,
        };
        (&&&&::ferrobot::__private::Out::new(__value)).__ferrobot_output()
    }}
}
