//! JSON Schemas for tool arguments, in the forms providers accept.
//!
//! [`for_type`] makes the plain form from a type's `JsonSchema`: subschemas
//! inlined (no `$ref`/`$defs`), no `$schema`, `title` or `format` noise at the
//! top. Providers differ in what else they take, so the provider modules
//! convert it:
//!
//! - [`openai_strict`]: `OpenAI`'s strict mode wants every object closed
//!   (`additionalProperties: false`) and every property required, optional
//!   ones as nullable; maps can't be expressed, so it returns `None` and the
//!   provider sends the plain form without `strict`.
//! - [`gemini`]: Gemini takes an `OpenAPI` subset: no `$ref`, `$schema`,
//!   `additionalProperties`, `const` or `type: [T, "null"]` (it says
//!   `nullable: true`), and only a few `format`s.
//!
//! Both are total functions over any schema; a keyword a provider would
//! reject is dropped or rewritten, never passed through.

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

/// The plain, portable JSON Schema of `T`.
///
/// # Examples
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Args {
///     /// The path.
///     _path: String,
/// }
/// let schema = ferrobot::tool::schema::for_type::<Args>();
/// assert_eq!(schema["properties"]["_path"]["description"], "The path.");
/// assert!(schema.get("$schema").is_none());
/// ```
pub fn for_type<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
        // A free-form arguments value (`serde_json::Value`) has an empty
        // schema; providers want an object, which here takes any keys.
        if map.is_empty() {
            map.insert("type".into(), "object".into());
            map.insert("additionalProperties".into(), Value::Bool(true));
        }
        if map.get("type") == Some(&json!("object")) && !map.contains_key("properties") {
            map.insert("properties".into(), json!({}));
        }
    }
    schema
}

/// The schema in the form `OpenAI`'s strict mode accepts, or `None` when it
/// can't be expressed there (maps with free keys).
///
/// # Examples
/// ```
/// use serde_json::json;
/// let plain = json!({"type": "object", "properties": {
///     "path": {"type": "string"}, "depth": {"type": ["integer", "null"]}
/// }, "required": ["path"]});
/// let strict = ferrobot::tool::schema::openai_strict(&plain).unwrap();
/// assert_eq!(strict["required"], json!(["depth", "path"]));
/// assert_eq!(strict["additionalProperties"], json!(false));
/// ```
pub fn openai_strict(schema: &Value) -> Option<Value> {
    strict(schema).ok()
}

/// The schema in `OpenAI`'s strict form, or what keeps it from having one:
/// the first construct that can't be expressed there, and where, e.g.
/// "`lines`: a map with free keys (`additionalProperties`)". Strict forms
/// are what every dialect can enforce, so typed answers need one.
///
/// # Errors
/// The construct with no strict form, and its place.
///
/// # Examples
/// ```
/// use serde_json::json;
/// let map = json!({"type": "object", "properties": {
///     "prices": {"type": "object", "additionalProperties": {"type": "number"}}
/// }});
/// let error = ferrobot::tool::schema::strict(&map).unwrap_err();
/// assert_eq!(error, "`prices`: a map with free keys (`additionalProperties`)");
/// ```
pub fn strict(schema: &Value) -> Result<Value, String> {
    let mut schema = schema.clone();
    strict_in_place(&mut schema, "").map(|()| schema)
}

/// [`openai_strict`]'s form where it can be expressed, else `schema` as it
/// is; and whether it's the strict one, for the `"strict"` flag that goes
/// with it.
#[cfg(any(feature = "openai", feature = "responses"))]
pub(crate) fn openai_strict_or_plain(schema: &Value) -> (std::borrow::Cow<'_, Value>, bool) {
    match openai_strict(schema) {
        Some(strict) => (std::borrow::Cow::Owned(strict), true),
        None => (std::borrow::Cow::Borrowed(schema), false),
    }
}

/// `path` is where `schema` is, for the error: "" at the top, else
/// `a.b[]`.
fn strict_in_place(schema: &mut Value, path: &str) -> Result<(), String> {
    let unportable = |what: &str| {
        Err(if path.is_empty() {
            what.to_owned()
        } else {
            format!("`{path}`: {what}")
        })
    };
    let Value::Object(map) = schema else {
        return Ok(());
    };
    map.remove("default");
    map.remove("$schema");
    // Free keys (maps, free-form objects) can't be closed, and an untyped
    // value can't be described at all.
    if matches!(
        map.get("additionalProperties"),
        Some(Value::Object(_) | Value::Bool(true))
    ) {
        return unportable("a map with free keys (`additionalProperties`)");
    }
    if !["type", "anyOf", "oneOf", "allOf", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k))
    {
        return unportable("a value of any type (no `type`)");
    }
    // Tuples have no strict form.
    if map.contains_key("prefixItems") {
        return unportable("a tuple (`prefixItems`)");
    }
    map.remove("minLength");
    map.remove("maxLength");
    // Strict mode takes only these formats, all on strings.
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STRICT_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    let required: Vec<String> = match map.get("required") {
        Some(Value::Array(r)) => r
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        let keys: Vec<Value> = props.keys().cloned().map(Value::String).collect();
        for (key, prop) in props.iter_mut() {
            let inner = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            strict_in_place(prop, &inner)?;
            if !required.contains(key) {
                make_nullable(prop);
            }
        }
        map.insert("required".into(), Value::Array(keys));
        map.insert("additionalProperties".into(), Value::Bool(false));
    } else if map.get("type") == Some(&json!("object")) {
        map.insert("properties".into(), json!({}));
        map.insert("required".into(), json!([]));
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = map.get_mut("items") {
        strict_in_place(items, &format!("{path}[]"))?;
    }
    if let Some(not) = map.get_mut("not") {
        strict_in_place(not, path)?;
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = map.get_mut(key) {
            for sub in subs {
                strict_in_place(sub, path)?;
            }
        }
    }
    // Strict mode takes `anyOf` but not `oneOf`.
    if let Some(one_of) = map.remove("oneOf") {
        map.insert("anyOf".into(), one_of);
    }
    Ok(())
}

const STRICT_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Lets `null` through: `type: T` becomes `type: [T, "null"]`; a schema
/// without a simple type is wrapped in `anyOf: [schema, {type: null}]`.
fn make_nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    // `Option<Enum>` comes as `anyOf: [Enum, {type: null}]` already.
    let takes_null = |variants: &Value| {
        variants
            .as_array()
            .is_some_and(|v| v.iter().any(|s| s.get("type") == Some(&json!("null"))))
    };
    if map.get("anyOf").is_some_and(takes_null) {
        return;
    }
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        Some(Value::Array(types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(map));
            map.insert("anyOf".into(), json!([inner, {"type": "null"}]));
        }
    }
}

/// Keywords Gemini's schema subset accepts.
const GEMINI_KEYWORDS: [&str; 16] = [
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "items",
    "properties",
    "required",
    "anyOf",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
];

/// The schema in the form Gemini accepts.
///
/// # Examples
/// ```
/// use serde_json::json;
/// let plain = json!({"type": "object", "additionalProperties": false, "properties": {
///     "depth": {"type": ["integer", "null"], "format": "uint32", "minimum": 0}
/// }});
/// let gemini = ferrobot::tool::schema::gemini(&plain);
/// assert_eq!(gemini, json!({"type": "object", "properties": {
///     "depth": {"type": "integer", "nullable": true, "minimum": 0}
/// }}));
/// ```
pub fn gemini(schema: &Value) -> Value {
    let (schema, variant_docs) = gemini_parts(schema);
    fold(schema, &variant_docs)
}

/// `schema` with the docs of its enum's variants as lines after its own
/// description.
fn fold(mut schema: Value, variant_docs: &[String]) -> Value {
    if let (false, Value::Object(map)) = (variant_docs.is_empty(), &mut schema) {
        let mut description = map
            .get("description")
            .and_then(Value::as_str)
            .map(|d| format!("{d}\n"))
            .unwrap_or_default();
        description.push_str(&variant_docs.join("\n"));
        map.insert("description".into(), description.into());
    }
    schema
}

/// The schema in Gemini's form, and the docs of enum variants it folded
/// into one `enum`, for the description of whichever schema ends up
/// holding that `enum` (this one, or the parent it is merged into).
fn gemini_parts(schema: &Value) -> (Value, Vec<String>) {
    let Value::Object(map) = schema else {
        return (schema.clone(), Vec::new());
    };
    let mut out = Map::new();
    // The docs of an enum's variants, once its constants became one `enum`.
    let mut variant_docs = Vec::new();
    // `type: [T, "null"]` → `type: T, nullable: true`; several non-null types
    // become `anyOf`.
    match map.get("type") {
        Some(Value::Array(types)) => {
            let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
            if non_null.len() < types.len() {
                out.insert("nullable".into(), Value::Bool(true));
            }
            match non_null.as_slice() {
                [one] => {
                    out.insert("type".into(), (*one).clone());
                }
                [] => {}
                many => {
                    let variants: Vec<Value> = many.iter().map(|t| json!({"type": t})).collect();
                    out.insert("anyOf".into(), Value::Array(variants));
                }
            }
        }
        Some(t) => {
            out.insert("type".into(), t.clone());
        }
        None => {}
    }
    for (key, value) in map {
        match key.as_str() {
            "type" => {}
            "const" => {
                out.insert("enum".into(), json!([value]));
            }
            "format" => {
                // Gemini takes `enum` and `date-time` for strings and the
                // sized number formats; others are dropped.
                if matches!(
                    value.as_str(),
                    Some("date-time" | "enum" | "int32" | "int64" | "float" | "double")
                ) {
                    out.insert(key.clone(), value.clone());
                }
            }
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), gemini(v))).collect())
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" => {
                out.insert(key.clone(), gemini(value));
            }
            // A tuple's positions become one item schema that takes any of them.
            "prefixItems" if !map.contains_key("items") => {
                let variants: Vec<Value> =
                    value.as_array().into_iter().flatten().map(gemini).collect();
                let items = match variants.as_slice() {
                    [one] => one.clone(),
                    _ => json!({"anyOf": variants}),
                };
                out.insert("items".into(), items);
            }
            "anyOf" | "oneOf" => {
                let variants: Vec<(Value, Vec<String>)> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(gemini_parts)
                    .collect();
                // `anyOf: [X, {type: null}]` is a nullable X.
                let (nulls, rest): (Vec<_>, Vec<_>) = variants
                    .into_iter()
                    .partition(|(v, _)| v.get("type") == Some(&json!("null")));
                if !nulls.is_empty() {
                    out.insert("nullable".into(), Value::Bool(true));
                }
                let rest: Vec<Value> = match <[_; 1]>::try_from(rest) {
                    // One schema left: it is this one, docs and all.
                    Ok([(Value::Object(only), docs)]) => {
                        for (k, v) in only {
                            out.entry(k).or_insert(v);
                        }
                        variant_docs = docs;
                        Vec::new()
                    }
                    Ok([(other, docs)]) => vec![fold(other, &docs)],
                    Err(rest) => rest.into_iter().map(|(v, docs)| fold(v, &docs)).collect(),
                };
                if let Some(constants) = Constants::of(&rest) {
                    out.insert("type".into(), constants.ty);
                    out.insert("enum".into(), Value::Array(constants.values));
                    variant_docs = constants.docs;
                } else if !rest.is_empty() {
                    out.insert("anyOf".into(), Value::Array(rest));
                }
            }
            "enum" => {
                let values: Vec<Value> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| !v.is_null())
                    .cloned()
                    .collect();
                out.insert(key.clone(), Value::Array(values));
            }
            other if GEMINI_KEYWORDS.contains(&other) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    // Gemini wants enums of strings typed as strings, and every schema
    // typed: an untyped (free-form) value is offered as an object.
    if out.contains_key("enum") && !out.contains_key("type") {
        out.insert("type".into(), "string".into());
    }
    if !out.contains_key("type") && !out.contains_key("anyOf") {
        out.insert("type".into(), "object".into());
    }
    (Value::Object(out), variant_docs)
}

/// Variants that are each one constant of one type — a unit enum whose
/// variants have doc comments — which Gemini takes only as a typed `enum`.
struct Constants {
    ty: Value,
    values: Vec<Value>,
    /// `- value: doc` for each documented variant.
    docs: Vec<String>,
}

impl Constants {
    /// `variants` in Gemini's form (a constant is a one-value `enum`), or
    /// `None` unless every one is a constant of the same type.
    fn of(variants: &[Value]) -> Option<Self> {
        let mut ty: Option<&Value> = None;
        let mut values = Vec::with_capacity(variants.len());
        let mut docs = Vec::new();
        for variant in variants {
            let map = variant.as_object()?;
            if map
                .keys()
                .any(|k| !matches!(k.as_str(), "type" | "enum" | "description"))
            {
                return None;
            }
            let [value] = map.get("enum")?.as_array()?.as_slice() else {
                return None;
            };
            let this = map.get("type")?;
            if *ty.get_or_insert(this) != this {
                return None;
            }
            if let Some(doc) = map.get("description").and_then(Value::as_str) {
                let name = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                docs.push(format!("- {name}: {doc}"));
            }
            values.push(value.clone());
        }
        Some(Self {
            ty: ty?.clone(),
            values,
            docs,
        })
    }
}
