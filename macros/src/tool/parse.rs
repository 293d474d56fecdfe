//! Reading a `#[tool]` function into a model of what to generate.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::spanned::Spanned;
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
    /// `read_only`, `destructive`, `idempotent`, `open_world`: the tool's
    /// effects, for the permission policy's defaults.
    pub(crate) effects: Vec<syn::Ident>,
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
    /// `ctx: ToolContext` (or `&ToolContext`, or marked `#[ctx]`):
    /// injected. `ty` is the type written, or the referenced type when
    /// borrowed.
    Context {
        by_ref: bool,
        ty: Box<Type>,
        marked: bool,
    },
    /// `State(x): State<T>` (or marked `#[state]`): injected from the
    /// agent's shared state.
    State { ty: Box<Type>, marked: bool },
    /// An argument the model provides.
    Arg(Box<Arg>),
}

/// What a parameter's type, as written, says it is. A proc macro sees
/// names, not types: the guess is checked in the generated code
/// (`__private::Injected`), so a type of the user's own that shares a name
/// is a clear error rather than a misreading, and a type ferrobot's `State`
/// can't be (a bare `State`, with no type parameter) is an argument.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Injectable {
    Context,
    State,
}

/// `ToolContext` or `State<…>`, alone or through a path that starts with
/// `ferrobot` or is `tool::` (`use ferrobot::tool;`). Any other path
/// (`self::State<…>`, `home::State<…>`) names a type of the user's own.
fn injectable_by_name(ty: &Type) -> Option<Injectable> {
    let Type::Path(path) = ty else { return None };
    if path.qself.is_some() {
        return None;
    }
    let segments: Vec<&syn::PathSegment> = path.path.segments.iter().collect();
    let (last, prefix) = segments.split_last()?;
    let ours = match prefix {
        [] => path.path.leading_colon.is_none(),
        [only] => only.ident == "ferrobot" || only.ident == "tool",
        [first, ..] => first.ident == "ferrobot",
    };
    if !ours || prefix.iter().any(|s| !s.arguments.is_none()) {
        return None;
    }
    if last.ident == "ToolContext" && last.arguments.is_none() {
        Some(Injectable::Context)
    } else if last.ident == "State"
        && matches!(last.arguments, syn::PathArguments::AngleBracketed(_))
    {
        Some(Injectable::State)
    } else {
        None
    }
}

/// Takes `#[ctx]` or `#[state]` off a parameter, saying which it was.
fn take_marker(attrs: &mut Vec<Attribute>) -> syn::Result<Option<Injectable>> {
    let mut found: Option<(Injectable, &Attribute)> = None;
    for attr in attrs.iter() {
        let kind = if attr.path().is_ident("ctx") {
            Injectable::Context
        } else if attr.path().is_ident("state") {
            Injectable::State
        } else {
            continue;
        };
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            return Err(syn::Error::new_spanned(
                attr,
                "write `#[ctx]` or `#[state]` alone, without arguments",
            ));
        }
        if found.is_some() {
            return Err(syn::Error::new_spanned(
                attr,
                "mark a parameter `#[ctx]` or `#[state]`, not both",
            ));
        }
        found = Some((kind, attr));
    }
    let kind = found.map(|(kind, _)| kind);
    attrs.retain(|a| !is_marker(a));
    Ok(kind)
}

/// `#[ctx]` or `#[state]`, which only `#[tool]` understands.
pub(crate) fn is_marker(attr: &Attribute) -> bool {
    attr.path().is_ident("ctx") || attr.path().is_ident("state")
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
    /// Whether the arguments struct holds the field as a type parameter
    /// (see `expand::arguments_pipeline`); not when a serde or schemars
    /// option names code written for the type.
    pub(crate) generic: bool,
    /// Read by a function of the user's (`#[serde(with = …)]`), so checked
    /// alone only for presence.
    pub(crate) custom_read: bool,
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
                        .filter(|a| is_field_attr(a))
                        .cloned()
                        .collect();
                    typed.attrs.retain(|a| !is_field_attr(a));
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
        let description = description(&attrs, &func.attrs, &func.sig.ident, &mut errors);
        let name = attrs
            .name
            .as_ref()
            .map_or_else(|| func.sig.ident.to_string(), LitStr::value);
        if let Some(Confirm::Template(template)) = &attrs.confirm {
            let args: Vec<&Arg> = params
                .iter()
                .filter_map(|p| match p {
                    Param::Arg(arg) => Some(&**arg),
                    _ => None,
                })
                .collect();
            check_placeholders(template, &args, &mut errors);
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

/// A struct deriving `Tool`, understood: its fields are the model's
/// arguments.
pub(crate) struct ToolStruct {
    pub(crate) attrs: ToolAttrs,
    pub(crate) ident: Ident,
    pub(crate) vis: syn::Visibility,
    pub(crate) description: String,
    pub(crate) name: String,
    pub(crate) args: Vec<Arg>,
    /// `#[serde(…)]` and `#[schemars(…)]` on the struct, for the arguments
    /// struct (`rename_all`, `deny_unknown_fields`, …).
    pub(crate) container_attrs: Vec<Attribute>,
    /// `struct Name;`, `struct Name {…}`: how to build one.
    pub(crate) braced: bool,
}

impl ToolStruct {
    /// Reads `#[derive(Tool)]`'s input, reporting every mistake at once.
    pub(crate) fn parse(input: syn::DeriveInput) -> syn::Result<Self> {
        let mut errors = Errors::default();
        let mut attrs = ToolAttrs::default();
        let mut seen_options = false;
        for attr in input.attrs.iter().filter(|a| a.path().is_ident("tool")) {
            match &attr.meta {
                syn::Meta::Path(_) => {}
                syn::Meta::List(list) if !seen_options => {
                    seen_options = true;
                    if let Some(parsed) = errors.take(ToolAttrs::parse(list.tokens.clone())) {
                        attrs = parsed;
                    }
                }
                syn::Meta::List(list) => errors.push(syn::Error::new_spanned(
                    list,
                    "put every option in one `#[tool(…)]`",
                )),
                syn::Meta::NameValue(nv) => errors.push(syn::Error::new_spanned(
                    nv,
                    "write `#[tool(…)]`, e.g. `#[tool(name = \"set_thermostat\")]`",
                )),
            }
        }
        if !input.generics.params.is_empty() {
            errors.push(syn::Error::new_spanned(
                &input.generics,
                "a tool's arguments struct can't be generic: the model's arguments are read into \
                 one concrete type",
            ));
        }
        let container_attrs: Vec<Attribute> = input
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("serde") || a.path().is_ident("schemars"))
            .cloned()
            .collect();
        let rename_all = rename_all(&container_attrs);
        let mut args = Vec::new();
        let mut braced = true;
        match &input.data {
            syn::Data::Struct(data) => match &data.fields {
                syn::Fields::Named(named) => {
                    for field in &named.named {
                        let field_attrs: Vec<Attribute> = field
                            .attrs
                            .iter()
                            .filter(|a| is_field_attr(a))
                            .cloned()
                            .collect();
                        let ident = field.ident.clone().expect("named fields have names");
                        if let Some(arg) = errors.take(Arg::new(
                            ident,
                            field.ty.clone(),
                            field_attrs,
                            rename_all.as_deref(),
                        )) {
                            args.push(arg);
                        }
                    }
                }
                syn::Fields::Unit => braced = false,
                syn::Fields::Unnamed(unnamed) => errors.push(syn::Error::new_spanned(
                    unnamed,
                    "name the fields (e.g. `struct SetThermostat { celsius: f64 }`): each name is \
                     the JSON key the model writes",
                )),
            },
            _ => errors.push(syn::Error::new_spanned(
                &input.ident,
                "`#[derive(Tool)]` goes on a struct whose fields are the model's arguments; for \
                 alternatives, make an enum one of its fields",
            )),
        }
        let description = description(&attrs, &input.attrs, &input.ident, &mut errors);
        let name = attrs
            .name
            .as_ref()
            .map_or_else(|| snake_case(&input.ident.to_string()), LitStr::value);
        if let Some(Confirm::Template(template)) = &attrs.confirm {
            check_placeholders(template, &args.iter().collect::<Vec<_>>(), &mut errors);
        }
        errors.finish()?;
        Ok(Self {
            attrs,
            ident: input.ident,
            vis: input.vis,
            description,
            name,
            args,
            container_attrs,
            braced,
        })
    }
}

/// `SetThermostat` → `set_thermostat`, the default name of a derived tool.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let after_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let before_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let after_upper = i > 0 && chars[i - 1].is_uppercase();
            if after_lower || (after_upper && before_lower) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The struct's `#[serde(rename_all = "…")]`, which renames its fields'
/// JSON keys.
fn rename_all(attrs: &[Attribute]) -> Option<String> {
    let mut rule = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename_all") && meta.input.peek(syn::Token![=]) {
                let lit: LitStr = meta.value()?.parse()?;
                rule = Some(lit.value());
                Ok(())
            } else {
                skip_meta_value(&meta)
            }
        });
    }
    rule
}

/// The effect flags, named as `ferrobot::tool::Effects`' fields.
const EFFECTS: [&str; 4] = ["read_only", "destructive", "idempotent", "open_world"];

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
            } else if let Some(effect) = EFFECTS.iter().find(|e| meta.path.is_ident(e)) {
                let ident = syn::Ident::new(effect, meta.path.span());
                if attrs.effects.contains(&ident) {
                    return Err(meta.error(format!("`{effect}` is given twice")));
                }
                attrs.effects.push(ident);
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
                     `check`, `exclusive`, `read_only`, `destructive`, `idempotent`, \
                     `open_world`, `timeout`, `retries`, `platforms` or `requires`",
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
        let marker = take_marker(&mut typed.attrs)?;
        let ty = &*typed.ty;
        let (referent, by_ref) = match ty {
            Type::Reference(r) if r.mutability.is_none() => (&*r.elem, true),
            other => (other, false),
        };
        match marker.or_else(|| injectable_by_name(referent)) {
            Some(Injectable::Context) => {
                if matches!(ty, Type::Reference(r) if r.mutability.is_some()) {
                    return Err(syn::Error::new_spanned(
                        ty,
                        "take the `ToolContext` by value or as `&ToolContext`, not `&mut`",
                    ));
                }
                return Ok(Param::Context {
                    by_ref,
                    ty: Box::new(referent.clone()),
                    marked: marker.is_some(),
                });
            }
            Some(Injectable::State) => {
                if matches!(ty, Type::Reference(_)) {
                    return Err(syn::Error::new_spanned(
                        ty,
                        "take `State<T>` by value: it is a cheap handle (an `Arc<T>`) on the agent's shared value",
                    ));
                }
                if mentions(&typed.pat, tool_ident) {
                    return Err(shadowing(&typed.pat, tool_ident));
                }
                return Ok(Param::State {
                    ty: Box::new(ty.clone()),
                    marked: marker.is_some(),
                });
            }
            None => {}
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
        if tool_ident == &ident {
            return Err(shadowing(&ident, tool_ident));
        }
        Arg::new(ident, ty.clone(), field_attrs, None).map(|arg| Param::Arg(Box::new(arg)))
    }
}

impl Arg {
    /// An argument named `ident` of type `ty`, with its doc comments and
    /// serde and schemars attributes; `rename_all` is the container's
    /// `#[serde(rename_all = "…")]`, for a struct's fields.
    pub(crate) fn new(
        ident: Ident,
        ty: Type,
        field_attrs: Vec<Attribute>,
        rename_all: Option<&str>,
    ) -> syn::Result<Self> {
        let serde = serde_options(&field_attrs)?;
        let optional = serde.default || last_segment(&ty).is_some_and(|s| s.ident == "Option");
        let name = ident.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name);
        let wire_name = match (serde.rename, rename_all) {
            (Some(rename), _) => rename,
            (None, Some(rule)) => rename_field(name, rule),
            (None, None) => name.to_owned(),
        };
        Ok(Arg {
            wire_name,
            generic: !serde.names_code,
            custom_read: serde.custom_read,
            ident,
            ty,
            field_attrs,
            optional,
        })
    }
}

/// A field's JSON key under serde's `rename_all` rule.
fn rename_field(name: &str, rule: &str) -> String {
    let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let capitalized = |w: &str| {
        let mut chars = w.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match rule {
        "lowercase" => name.to_lowercase(),
        "UPPERCASE" => name.to_uppercase(),
        "PascalCase" => words.iter().map(|w| capitalized(w)).collect(),
        "camelCase" => words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    (*w).to_owned()
                } else {
                    capitalized(w)
                }
            })
            .collect(),
        "SCREAMING_SNAKE_CASE" => name.to_uppercase(),
        "kebab-case" => name.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => name.replace('_', "-").to_uppercase(),
        _ => name.to_owned(),
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
    /// An option that names code written for the field's type (`with`,
    /// `default = "…"`, `skip`, …): the field keeps its type in the
    /// arguments struct.
    names_code: bool,
    /// `with` or `deserialize_with`: the field is read by code of the
    /// user's, not by its type's `Deserialize`.
    custom_read: bool,
}

/// What `#[serde(…)]` and `#[schemars(…)]` on an argument say about
/// reading it; the attributes themselves pass through to the arguments
/// struct's field untouched.
fn serde_options(attrs: &[Attribute]) -> syn::Result<SerdeOptions> {
    let mut options = SerdeOptions::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match key.as_str() {
                "rename" if meta.input.peek(syn::Token![=]) => {
                    let lit: LitStr = meta.value()?.parse()?;
                    options.rename = Some(lit.value());
                    return Ok(());
                }
                "alias" => {}
                "default" => {
                    options.default = true;
                    options.names_code = true;
                }
                "with" | "deserialize_with" => {
                    options.custom_read = true;
                    options.names_code = true;
                }
                _ => options.names_code = true,
            }
            skip_meta_value(&meta)
        })?;
    }
    for attr in attrs.iter().filter(|a| a.path().is_ident("schemars")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("with")
                || meta.path.is_ident("schema_with")
                || meta.path.is_ident("default")
            {
                options.names_code = true;
            }
            skip_meta_value(&meta)
        })?;
    }
    Ok(options)
}

/// Steps over an option's `= value` or `(…)`.
fn skip_meta_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _: proc_macro2::Group = meta.input.parse()?;
    }
    Ok(())
}

pub(crate) fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// Whether an argument's attribute belongs on the hidden arguments
/// struct's field: its doc comment, `#[serde]`, `#[schemars]`.
pub(crate) fn is_field_attr(attr: &Attribute) -> bool {
    ["doc", "serde", "schemars"]
        .iter()
        .any(|name| attr.path().is_ident(name))
}

/// What the model is told the tool does: `#[tool(description = …)]`, else
/// the doc comment of the item named `ident`; an error when there is neither.
fn description(
    attrs: &ToolAttrs,
    item_attrs: &[Attribute],
    ident: &Ident,
    errors: &mut Errors,
) -> String {
    match (&attrs.description, doc_text(item_attrs)) {
        (Some(description), _) => description.value(),
        (None, Some(doc)) => doc,
        (None, None) => {
            errors.push(syn::Error::new_spanned(
                ident,
                "add a `///` doc comment saying what the tool does (the model reads it to decide \
                 when to call the tool), or set `#[tool(description = \"…\")]`",
            ));
            String::new()
        }
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
fn check_placeholders(template: &LitStr, args: &[&Arg], errors: &mut Errors) {
    let text = template.value();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let key = &rest[open + 1..open + close];
        let known = args.iter().any(|a| a.wire_name == key);
        if !known {
            let names: Vec<String> = args
                .iter()
                .map(|a| format!("{{{}}}", a.wire_name))
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
