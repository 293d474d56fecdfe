//! The model's arguments on their way to a tool, the same way for every
//! kind of tool: made an object ([`normalize`]), read into the tool's types
//! naming every bad field ([`parse_fields`], [`parse_whole`]), then held to
//! the constraints of the schema the model was shown ([`Constraints`]) —
//! all in [`Tool::check_arguments`](super::Tool::check_arguments), so a call
//! that would be refused is turned back before the user is asked to
//! confirm it.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolError;
use super::validate::{Kind, Schema};

/// Arguments as a model may send them for a tool without any: `""` or
/// `null` mean `{}`.
///
/// Object members that are `null` are dropped, so a model writing
/// `"depth": null` for an argument it leaves out (as `OpenAI`'s strict mode
/// makes it do) gets the argument's default rather than a type error.
pub(crate) fn normalize(arguments: Value) -> Value {
    fn drop_nulls(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|_, v| !v.is_null());
                map.values_mut().for_each(drop_nulls);
            }
            Value::Array(items) => items.iter_mut().for_each(drop_nulls),
            _ => {}
        }
    }
    let mut arguments = match arguments {
        Value::Null => Value::Object(Default::default()),
        Value::String(s) if s.trim().is_empty() => Value::Object(Default::default()),
        other => other,
    };
    drop_nulls(&mut arguments);
    arguments
}

/// How to check one argument on its own, to name each bad one.
#[derive(Debug)]
pub struct FieldCheck {
    name: &'static str,
    optional: bool,
    check: fn(&Value) -> Result<(), String>,
}

impl FieldCheck {
    /// The argument `name`, read by a function of the tool's own
    /// (`#[serde(with = …)]`): checked alone only for being there.
    pub fn presence(name: &'static str, optional: bool) -> Self {
        Self {
            name,
            optional,
            check: |_| Ok(()),
        }
    }

    /// The argument `name` (as the model writes it), of type `T`.
    pub fn new<T: DeserializeOwned>(name: &'static str, optional: bool) -> Self {
        Self {
            name,
            optional,
            check: |value| {
                serde_path_to_error::deserialize::<_, T>(value)
                    .map(drop)
                    .map_err(|e| {
                        let path = e.path().to_string();
                        let inner = e.into_inner();
                        if path == "." {
                            inner.to_string()
                        } else {
                            format!("at `{path}`: {inner}")
                        }
                    })
            },
        }
    }
}

/// Reads the arguments struct of a tool whose arguments are known one by
/// one (`#[tool]`). On failure, checks each argument on its own and tells
/// the model every bad one: where, what was expected, what came.
pub(crate) fn parse_fields<T: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
    fields: &[FieldCheck],
) -> Result<T, ToolError> {
    let whole = match T::deserialize(arguments) {
        Ok(args) => return Ok(args),
        Err(e) => e,
    };
    let mut problems = Vec::new();
    if !arguments.is_object() {
        problems.push(format!(
            "the arguments must be a JSON object, not `{arguments}`"
        ));
    } else {
        for field in fields {
            match arguments.get(field.name) {
                None | Some(Value::Null) if field.optional => {}
                None => problems.push(format!("`{}` is missing", field.name)),
                Some(value) => {
                    if let Err(why) = (field.check)(value) {
                        problems.push(format!("`{}`: {why}", field.name));
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        problems.push(whole.to_string());
    }
    Err(ToolError::arguments_mismatch(tool, problems))
}

/// Reads an arguments type known only as a whole (`from_fn`): the first
/// problem, and where it is.
pub(crate) fn parse_whole<A: DeserializeOwned>(
    tool: &str,
    arguments: &Value,
) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let problem = match e.path().to_string() {
            path if path == "." => e.inner().to_string(),
            path => format!("`{path}`: {}", e.inner()),
        };
        ToolError::arguments_mismatch(tool, [problem])
    })
}

/// The model's arguments as `A`, held to the schema's constraints, or
/// everything wrong with them in the wording every tool uses
/// ([`ToolError::arguments_mismatch`]).
pub(crate) fn parse_checked<A: DeserializeOwned>(
    tool: &str,
    arguments: Value,
    constraints: &Constraints,
) -> Result<A, ToolError> {
    let arguments = normalize(arguments);
    let parsed = parse_whole(tool, &arguments)?;
    constraints.check(tool, &arguments)?;
    Ok(parsed)
}

/// A tool's JSON Schema, compiled once and held against each call's
/// arguments: for a tool with a Rust type, its constraints (the type already
/// holds the shape); for a tool that has only a schema (a command tool, a
/// remote tool), everything: types, required properties, and the constraints:
/// ranges (`minimum`, `maximum`, exclusive bounds,
/// `multipleOf`), lengths (`minLength`, `maxLength`, `minItems`,
/// `maxItems`), `pattern`, `enum`, `const`, `uniqueItems`, the standard
/// `format`s (`email`, `uri`, `date-time`, `uuid`, `ipv4`, …; others, such
/// as schemars' `uint8`, are left to the type), `anyOf`/`oneOf`/`allOf`/`not`
/// and local `$ref`s. Keywords beyond those are left alone, as JSON Schema
/// does with keywords it doesn't know.
///
/// `#[tool]` and [`from_fn`](super::from_fn) tools use it in
/// [`check_arguments`](super::Tool::check_arguments) and in `call`, so a
/// `#[schemars(range(min = 5, max = 30))]` on a parameter is enforced before
/// the user is asked to confirm a call. A hand-written [`Tool`](super::Tool)
/// can keep one beside its spec and call [`check`](Self::check) in its own
/// `check_arguments`.
///
/// # Examples
/// ```
/// use ferrobot::tool::Constraints;
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {
///     "pct": {"type": "integer", "minimum": 0, "maximum": 100}
/// }});
/// let constraints = Constraints::new(&schema);
/// assert!(constraints.check("dim", &json!({"pct": 40})).is_ok());
/// let error = constraints.check("dim", &json!({"pct": 500})).unwrap_err();
/// assert!(error.is_invalid_arguments());
/// assert_eq!(
///     error.message(),
///     "Invalid arguments for `dim`:\n- `pct`: 500 is greater than the maximum of 100\n\
///      Call `dim` again with arguments that match its schema."
/// );
/// ```
pub struct Constraints {
    /// `Err` when the schema itself is broken (a bad `pattern`, say): the
    /// developer's mistake, told to whoever calls the tool.
    /// `Ok(None)`: nothing to check beyond what the arguments' type holds.
    validator: Result<Option<Schema>, String>,
}

impl fmt::Debug for Constraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Constraints")
            .field("schema_error", &self.validator.as_ref().err())
            .finish_non_exhaustive()
    }
}

impl Constraints {
    /// Compiles `schema`. A schema that can't be compiled (say, a `pattern`
    /// that is no regular expression) gives constraints that refuse every
    /// call, saying why, rather than constraints that hold nothing.
    pub fn new(schema: &Value) -> Self {
        let validator = Schema::new(schema).map(Some);
        if let Err(error) = &validator {
            tracing::error!(%error, "a tool's argument schema is not a valid JSON Schema; its calls will be refused");
        }
        Self { validator }
    }

    /// The constraints of a tool whose arguments have a Rust type, which
    /// already holds their shape: nothing to check (and nothing to pay for
    /// a call) unless the schema says more than types.
    pub(crate) fn for_typed(schema: &Value) -> Self {
        if super::validate::constrains(schema) {
            Self::new(schema)
        } else {
            Self {
                validator: Ok(None),
            }
        }
    }

    /// Every way `arguments` breaks the schema, each as "`where`: what".
    ///
    /// # Errors
    /// When the schema itself could not be compiled: a message for the
    /// developer, saying what is wrong with it.
    pub fn problems(&self, arguments: &Value) -> Result<Vec<String>, String> {
        let Some(validator) = self.validator.as_ref().map_err(Clone::clone)? else {
            return Ok(Vec::new());
        };
        Ok(validator
            .problems(arguments)
            .into_iter()
            .map(|problem| match (problem.kind, problem.path.as_str()) {
                // A missing property in the words a typed tool uses.
                (Kind::Missing(name), "") => format!("`{name}` is missing"),
                (Kind::Missing(name), path) => format!("`{path}.{name}` is missing"),
                (Kind::Other(what), "") => what,
                (Kind::Other(what), path) => format!("`{path}`: {what}"),
            })
            .collect())
    }

    /// Checks `arguments` for the tool called `tool`.
    ///
    /// # Errors
    /// [`ToolError::arguments_mismatch`] listing every broken constraint;
    /// or, when the schema itself is broken, an error (not the model's
    /// fault, so not counted as invalid arguments) that says so.
    pub fn check(&self, tool: &str, arguments: &Value) -> Result<(), ToolError> {
        match self.problems(arguments) {
            Ok(problems) if problems.is_empty() => Ok(()),
            Ok(problems) => Err(ToolError::arguments_mismatch(tool, problems)),
            Err(broken) => Err(ToolError::new(format!(
                "`{tool}` can't be called: its argument schema is invalid ({broken}). \
                 (Developer: fix the schema attributes of its parameters.)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: &Value, arguments: &Value) -> Vec<String> {
        Constraints::new(schema).problems(arguments).unwrap()
    }

    #[test]
    fn every_broken_constraint_is_named_with_its_place() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "rooms": {"type": "array", "items": {"type": "object", "properties": {
                "size": {"type": "number", "exclusiveMinimum": 0}
            }}}
        }});
        let got = problems(
            &schema,
            &json!({"name": "ABCD", "rooms": [{"size": 3}, {"size": 0}]}),
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.contains(&"`name`: \"ABCD\" is longer than 3 characters".to_owned()));
        assert!(got.iter().any(|p| p.starts_with("`rooms[1].size`: 0 ")));
    }

    #[test]
    fn standard_formats_are_checked_and_others_left_to_the_type() {
        let schema = json!({"type": "object", "properties": {
            "to": {"type": "string", "format": "email"},
            "n": {"type": "integer", "format": "uint8"}
        }});
        assert_eq!(
            problems(&schema, &json!({"to": "me@example.com", "n": 3})),
            Vec::<String>::new()
        );
        assert_eq!(
            problems(&schema, &json!({"to": "nobody"})),
            ["`to`: \"nobody\" is not a \"email\""]
        );
    }

    #[test]
    fn a_schema_alone_checks_types_and_names_what_is_missing() {
        let schema = json!({"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer"},
            "at": {"type": "object", "required": ["x"], "properties": {"x": {"type": "number"}}}
        }});
        assert_eq!(
            problems(&schema, &json!({"at": {}})),
            ["`n` is missing", "`at.x` is missing"]
        );
        assert_eq!(
            problems(&schema, &json!({"n": "3; ls"})),
            ["`n`: \"3; ls\" is not of type \"integer\""]
        );
    }

    #[test]
    fn a_broken_schema_refuses_calls_and_says_why() {
        let constraints = Constraints::new(&json!({"type": "string", "pattern": "(["}));
        let error = constraints.check("t", &json!("x")).unwrap_err();
        assert!(!error.is_invalid_arguments());
        assert!(
            error
                .message()
                .starts_with("`t` can't be called: its argument schema is invalid"),
            "{error}"
        );
    }
}
