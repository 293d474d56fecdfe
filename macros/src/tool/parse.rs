//! Reading a `#[tool]` function into a model of what to generate.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::{Attribute, Expr, ExprArray, FnArg, Ident, ItemFn, Lit, LitStr, Pat, Type};

/// A `#[tool]` function, understood.
pub(crate) struct ToolFn {
    pub(crate) attrs: ToolAttrs,
    /// The function with parameter doc comments and `#[tool]` removed.
    pub(crate) func: ItemFn,
    /// What the model is told the tool does.
    pub(crate) description: String,
    pub(crate) name: String,
    pub(crate) params: Vec<Param>,
    /// Whether the function takes `&self` (a toolbox method).
    pub(crate) has_self: bool,
}

/// The options inside `#[tool(…)]`.
#[derive(Default)]
pub(crate) struct ToolAttrs {
    pub(crate) name: Option<LitStr>,
    pub(crate) description: Option<LitStr>,
    pub(crate) confirm: Option<Confirm>,
    pub(crate) exclusive: bool,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) platforms: Vec<LitStr>,
    pub(crate) requires: Vec<LitStr>,
    pub(crate) retries: Option<u32>,
    /// `check = path`: a function that takes the model's arguments by
    /// reference and says whether they make sense.
    pub(crate) check: Option<syn::Path>,
}

pub(crate) enum Confirm {
    /// `confirm`: ask with a generated question.
    Default,
    /// `confirm = "Delete {path}?"`.
    Template(LitStr),
}

/// One parameter of the function.
pub(crate) enum Param {
    /// `ctx: ToolContext` (or `&ToolContext`): injected.
    Context { by_ref: bool },
    /// `State(x): State<T>`: injected from the agent's shared state.
    State(Box<Type>),
    /// An argument the model provides.
    Arg(Box<Arg>),
}

pub(crate) struct Arg {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    /// `///` comments and `#[serde]`/`#[schemars]` attributes, moved onto
    /// the arguments struct's field.
    pub(crate) field_attrs: Vec<Attribute>,
    /// The JSON key, after `#[serde(rename = "…")]`.
    pub(crate) wire_name: String,
    /// Whether a missing key is fine (`Option` or `#[serde(default)]`).
    pub(crate) optional: bool,
}

impl ToolFn {
    /// Parses the function and its `#[tool]` arguments, reporting every
    /// mistake at once.
    pub(crate) fn parse(
        attr: TokenStream,
        mut func: ItemFn,
        receiver_ok: Option<()>,
    ) -> syn::Result<Self> {
        let mut errors = Errors::default();
        let attrs = errors.take(ToolAttrs::parse(attr)).unwrap_or_default();
        if let Some(generics) = Some(&func.sig.generics).filter(|g| !g.params.is_empty()) {
            errors.push(syn::Error::new_spanned(
                generics,
                "tools can't be generic: the model's arguments are read into one concrete type; \
                 use a concrete type (or an enum of the alternatives)",
            ));
        }
        let mut params = Vec::new();
        let mut has_self = false;
        let tool_ident = func.sig.ident.clone();
        for input in &mut func.sig.inputs {
            match input {
                FnArg::Receiver(receiver) => {
                    if receiver_ok.is_none() {
                        errors.push(syn::Error::new_spanned(
                            &*receiver,
                            "`self` is only allowed in a `#[toolbox]` impl block; \
                             put `#[ferrobot::toolbox]` on the impl",
                        ));
                    } else if receiver.reference.is_none() || receiver.mutability.is_some() {
                        errors.push(syn::Error::new_spanned(
                            &*receiver,
                            "toolbox tools take `&self`: the toolbox is shared by all its tools, \
                             and calls may run at the same time",
                        ));
                    }
                    has_self = true;
                }
                FnArg::Typed(typed) => {
                    let docs_and_serde: Vec<Attribute> = typed
                        .attrs
                        .iter()
                        .filter(|a| {
                            a.path().is_ident("doc")
                                || a.path().is_ident("serde")
                                || a.path().is_ident("schemars")
                        })
                        .cloned()
                        .collect();
                    typed.attrs.retain(|a| {
                        !(a.path().is_ident("doc")
                            || a.path().is_ident("serde")
                            || a.path().is_ident("schemars"))
                    });
                    if let Some(param) =
                        errors.take(Param::parse(typed, docs_and_serde, &tool_ident))
                    {
                        params.push(param);
                    }
                }
            }
        }
        if params
            .iter()
            .filter(|p| matches!(p, Param::Context { .. }))
            .count()
            > 1
        {
            errors.push(syn::Error::new_spanned(
                &func.sig.inputs,
                "take `ToolContext` once",
            ));
        }
        let doc = doc_text(&func.attrs);
        let description = match (&attrs.description, doc) {
            (Some(description), _) => description.value(),
            (None, Some(doc)) => doc,
            (None, None) => {
                errors.push(syn::Error::new_spanned(
                    &func.sig.ident,
                    "add a `///` doc comment saying what the tool does (the model reads it to decide \
                     when to call the tool), or set `#[tool(description = \"…\")]`",
                ));
                String::new()
            }
        };
        let name = attrs
            .name
            .as_ref()
            .map_or_else(|| func.sig.ident.to_string(), LitStr::value);
        if let Some(Confirm::Template(template)) = &attrs.confirm {
            check_placeholders(template, &params, &mut errors);
        }
        func.attrs.retain(|a| !a.path().is_ident("tool"));
        errors.finish()?;
        Ok(Self {
            attrs,
            func,
            description,
            name,
            params,
            has_self,
        })
    }

    /// The model's arguments.
    pub(crate) fn args(&self) -> impl Iterator<Item = &Arg> {
        self.params.iter().filter_map(|p| match p {
            Param::Arg(arg) => Some(&**arg),
            _ => None,
        })
    }
}

impl ToolAttrs {
    fn parse(attr: TokenStream) -> syn::Result<Self> {
        let mut attrs = ToolAttrs::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("name") {
                attrs.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("description") {
                attrs.description = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("confirm") {
                attrs.confirm = Some(if meta.input.peek(syn::Token![=]) {
                    Confirm::Template(meta.value()?.parse()?)
                } else {
                    Confirm::Default
                });
            } else if meta.path.is_ident("exclusive") {
                attrs.exclusive = true;
            } else if meta.path.is_ident("timeout") {
                let lit: LitStr = meta.value()?.parse()?;
                attrs.timeout_ms = Some(parse_duration(&lit)?);
            } else if meta.path.is_ident("platforms") {
                attrs.platforms = string_list(&meta.value()?.parse()?)?;
            } else if meta.path.is_ident("requires") {
                attrs.requires = string_list(&meta.value()?.parse()?)?;
            } else if meta.path.is_ident("retries") {
                let lit: syn::LitInt = meta.value()?.parse()?;
                attrs.retries = Some(lit.base10_parse()?);
            } else if meta.path.is_ident("check") {
                attrs.check = Some(meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "expected the path of a function, e.g. `check = sane_temperature`",
                    )
                })?);
            } else {
                return Err(meta.error(
                    "unknown `#[tool]` option; expected `name`, `description`, `confirm`, \
                     `check`, `exclusive`, `timeout`, `retries`, `platforms` or `requires`",
                ));
            }
            Ok(())
        });
        parser.parse2(attr)?;
        Ok(attrs)
    }
}

impl Param {
    fn parse(
        typed: &mut syn::PatType,
        field_attrs: Vec<Attribute>,
        tool_ident: &Ident,
    ) -> syn::Result<Self> {
        let ty = &*typed.ty;
        if is_context(ty) {
            return Ok(Param::Context {
                by_ref: matches!(ty, Type::Reference(_)),
            });
        }
        if last_segment(ty).is_some_and(|s| s.ident == "State") {
            if mentions(&typed.pat, tool_ident) {
                return Err(shadowing(&typed.pat, tool_ident));
            }
            return Ok(Param::State(Box::new(ty.clone())));
        }
        match ty {
            Type::ImplTrait(_) => {
                return Err(syn::Error::new_spanned(
                    ty,
                    "`impl Trait` arguments are not supported: arguments are read from JSON into a \
                     concrete type; name a type that implements `Deserialize` and `JsonSchema`",
                ));
            }
            Type::Reference(_) => {
                return Err(syn::Error::new_spanned(
                    ty,
                    "tool arguments are owned values read from the model's JSON: take `String` \
                     instead of `&str`, `Vec<T>` instead of `&[T]` (only `&ToolContext` may be borrowed)",
                ));
            }
            _ => {}
        }
        let ident = match &*typed.pat {
            Pat::Ident(pat) => pat.ident.clone(),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "name the argument (e.g. `point: Point`): its name is the JSON key the model writes",
                ));
            }
        };
        let serde = serde_options(&field_attrs)?;
        if tool_ident == &ident {
            return Err(shadowing(&ident, tool_ident));
        }
        let optional = serde.default || last_segment(ty).is_some_and(|s| s.ident == "Option");
        Ok(Param::Arg(Box::new(Arg {
            wire_name: serde.rename.unwrap_or_else(|| ident.to_string()),
            ident,
            ty: ty.clone(),
            field_attrs,
            optional,
        })))
    }
}

/// Whether `ident` appears anywhere in a parameter's pattern, e.g. the
/// `walk` of `State(walk)`.
pub(crate) fn mentions(pat: &Pat, ident: &Ident) -> bool {
    fn within(tokens: TokenStream, ident: &Ident) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(i) => &i == ident,
            proc_macro2::TokenTree::Group(g) => within(g.stream(), ident),
            _ => false,
        })
    }
    within(quote::ToTokens::to_token_stream(pat), ident)
}

/// A parameter named like the tool would shadow the value `#[tool]` makes.
fn shadowing(at: &impl quote::ToTokens, tool: &Ident) -> syn::Error {
    syn::Error::new_spanned(
        at,
        format!(
            "a parameter can't be named like its tool: `#[tool]` turns `{tool}` into a value, \
             which this name would shadow; rename it (an argument's JSON key can stay `{tool}` \
             with `#[serde(rename = \"{tool}\")]`)"
        ),
    )
}

#[derive(Default)]
struct SerdeOptions {
    rename: Option<String>,
    default: bool,
}

/// The `rename` and `default` of `#[serde(…)]` on a parameter; other serde
/// options pass through to the arguments struct untouched.
fn serde_options(attrs: &[Attribute]) -> syn::Result<SerdeOptions> {
    let mut options = SerdeOptions::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                let lit: LitStr = meta.value()?.parse()?;
                options.rename = Some(lit.value());
            } else if meta.path.is_ident("default") {
                options.default = true;
                if meta.input.peek(syn::Token![=]) {
                    let _: LitStr = meta.value()?.parse()?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _: Expr = meta.value()?.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(options)
}

fn is_context(ty: &Type) -> bool {
    let ty = match ty {
        Type::Reference(r) => &*r.elem,
        other => other,
    };
    last_segment(ty).is_some_and(|s| s.ident == "ToolContext")
}

pub(crate) fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// The concatenated `///` lines, trimmed; `None` when there are none.
pub(crate) fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn string_list(array: &ExprArray) -> syn::Result<Vec<LitStr>> {
    array
        .elems
        .iter()
        .map(|e| match e {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s.clone()),
            other => Err(syn::Error::new_spanned(
                other,
                "expected a string, e.g. \"linux\"",
            )),
        })
        .collect()
}

/// `"30s"`, `"500ms"`, `"2m"`, `"1h"` in milliseconds.
fn parse_duration(lit: &LitStr) -> syn::Result<u64> {
    let text = lit.value();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if scale > 0 && n > 0 => Ok(n * scale),
        _ => Err(syn::Error::new_spanned(
            lit,
            "expected a duration such as \"500ms\", \"30s\", \"2m\" or \"1h\"",
        )),
    }
}

/// Every `{name}` in a confirmation template must name an argument.
fn check_placeholders(template: &LitStr, params: &[Param], errors: &mut Errors) {
    let text = template.value();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let key = &rest[open + 1..open + close];
        let known = params
            .iter()
            .any(|p| matches!(p, Param::Arg(a) if a.wire_name == key));
        if !known {
            let names: Vec<String> = params
                .iter()
                .filter_map(|p| match p {
                    Param::Arg(a) => Some(format!("{{{}}}", a.wire_name)),
                    _ => None,
                })
                .collect();
            errors.push(syn::Error::new_spanned(
                template,
                format!(
                    "`{{{key}}}` names no argument of this tool; placeholders can be {}",
                    if names.is_empty() {
                        "none (it takes no arguments)".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        rest = &rest[open + close + 1..];
    }
}

/// Collects errors so all are reported at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
