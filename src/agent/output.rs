//! Typed answers: the shape a turn's answer must have ([`Output`]), how it
//! is asked of the model ([`OutputMode`]), and how an answer is read and
//! checked.

use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::provider::OutputFormat;
use crate::tool::Constraints;
use crate::tool::schema;

/// The key a non-object answer is wrapped under: strict dialects and
/// output tools take only objects.
const WRAPPER: &str = "response";

/// How a typed answer is asked of the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputMode {
    /// [`Native`](Self::Native) where the provider can
    /// ([`Provider::native_output`](crate::provider::Provider::native_output)),
    /// else [`Tool`](Self::Tool).
    #[default]
    Auto,
    /// The server constrains the answer to the schema (`OpenAI`'s
    /// `response_format`, Gemini's `responseSchema`, Ollama's `format`,
    /// llama.cpp's grammar). Tool rounds go without it; when the model is
    /// done with tools, one last request, offering none, asks for the typed
    /// answer: a constrained request would keep llama.cpp and vLLM from
    /// calling tools at all.
    Native,
    /// The answer is a call of an output tool, offered beside the others;
    /// the model must call a tool, and the turn ends when it calls that one.
    Tool,
    /// The schema is in the instructions and the answer's text is read as
    /// JSON: for servers that can do neither.
    Prompted,
}

/// The shape a turn's answer must have: a Rust type ([`Output::of`]) or a
/// JSON Schema ([`Output::schema`]). Give it to a turn with
/// [`TurnRequest::output`](super::TurnRequest::output), or to every turn
/// with [`AgentBuilder::output`](super::AgentBuilder::output);
/// [`Agent::extract`](super::Agent::extract) does it for one type.
///
/// The answer is checked against the schema, and for a Rust type read into
/// it; when that fails, the model is told what was wrong, field by field,
/// and answers again, [`retries`](Self::retries) times at most. The checked
/// value is [`Reply::output`](super::Reply::output).
///
/// # Examples
/// ```
/// use ferrobot::agent::{Output, OutputMode};
///
/// # #[allow(dead_code)]
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct City {
///     name: String,
///     population: u64,
/// }
///
/// let output = Output::of::<City>().mode(OutputMode::Tool).retries(1);
/// assert_eq!(output.name(), "City");
/// assert_eq!(output.json_schema()["required"], serde_json::json!(["name", "population"]));
/// ```
#[derive(Clone)]
pub struct Output {
    inner: Arc<Spec>,
    name: String,
    mode: OutputMode,
    retries: u32,
}

/// Reads a value into a Rust type, or says where it doesn't fit.
type ReadInto = fn(&Value) -> Result<(), String>;

struct Spec {
    /// The schema as given (or made from the type).
    schema: Value,
    /// What is sent: the schema, wrapped when it is not an object.
    sent: Value,
    description: Option<String>,
    wrapped: bool,
    /// Why the schema has no strict form, if it has none: such an output
    /// is refused when a turn uses it.
    unportable: Option<String>,
    constraints: Constraints,
    /// Reads a value into the Rust type, for `Output::of`.
    read: Option<ReadInto>,
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Output")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

/// Why an [`Output`] can't be made from a schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutputSchemaError {
    /// The schema has a construct no dialect can enforce.
    #[error(
        "the output schema can't be enforced by every provider: {0}. Describe the answer \
         with closed objects, arrays, enums and scalars (a map can be an array of key/value objects)"
    )]
    Unportable(String),
    /// The schema is not a valid JSON Schema.
    #[error("the output schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

impl Output {
    /// Answers of type `T`, described by its `JsonSchema` (doc comments
    /// become descriptions) and read with its `Deserialize`.
    ///
    /// A type whose schema no dialect can enforce (a map with free keys, a
    /// tuple, a `serde_json::Value`) is refused when a turn uses it, with
    /// [`OutputError::Unportable`](crate::OutputError::Unportable) naming the field.
    pub fn of<T: DeserializeOwned + JsonSchema>() -> Self {
        fn read<T: DeserializeOwned>(value: &Value) -> Result<(), String> {
            serde_path_to_error::deserialize::<_, T>(value)
                .map(drop)
                .map_err(|e| match e.path().to_string() {
                    path if path == "." => e.inner().to_string(),
                    path => format!("`{path}`: {}", e.inner()),
                })
        }
        let name = sanitize(&T::schema_name());
        let plain = schema::for_type::<T>();
        let unportable = schema::strict(&plain).err();
        Self::build(name, plain, unportable, Some(read::<T>))
    }

    /// Answers matching the JSON Schema `schema`, for callers without a
    /// Rust type (the CLI's `--output-schema`). The value is checked against
    /// the whole schema: types, required properties, enums, ranges, lengths,
    /// patterns and formats.
    ///
    /// # Errors
    /// [`OutputSchemaError::Unportable`] when the schema has a construct no
    /// dialect can enforce, naming it; [`OutputSchemaError::Invalid`] when
    /// it is no valid schema (a bad `pattern`, a dangling `$ref`).
    ///
    /// # Examples
    /// ```
    /// use ferrobot::agent::Output;
    /// use serde_json::json;
    /// let output = Output::schema(json!({"type": "array", "items": {"type": "string"}}))?;
    /// assert_eq!(output.name(), "answer");
    ///
    /// let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
    /// let error = Output::schema(map).unwrap_err();
    /// assert!(error.to_string().contains("a map with free keys"));
    /// # Ok::<(), ferrobot::agent::OutputSchemaError>(())
    /// ```
    pub fn schema(schema: Value) -> Result<Self, OutputSchemaError> {
        if !schema.is_object() {
            return Err(OutputSchemaError::Invalid(format!(
                "a schema is a JSON object, not `{schema}`"
            )));
        }
        let mut plain = schema;
        if let Some(map) = plain.as_object_mut() {
            for noise in ["$schema", "$id", "title"] {
                map.remove(noise);
            }
        }
        if let Err(why) = schema::strict(&plain) {
            return Err(OutputSchemaError::Unportable(why));
        }
        let output = Self::build("answer".into(), plain, None, None);
        if let Err(why) = output.inner.constraints.problems(&Value::Null) {
            return Err(OutputSchemaError::Invalid(why));
        }
        Ok(output)
    }

    fn build(
        name: String,
        schema: Value,
        unportable: Option<String>,
        read: Option<ReadInto>,
    ) -> Self {
        let wrapped = schema.get("type") != Some(&json!("object"));
        let sent = if wrapped {
            json!({
                "type": "object",
                "properties": { WRAPPER: schema.clone() },
                "required": [WRAPPER],
                "additionalProperties": false,
            })
        } else {
            schema.clone()
        };
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Self {
            inner: Arc::new(Spec {
                constraints: Constraints::new(&schema),
                schema,
                sent,
                description,
                wrapped,
                unportable,
                read,
            }),
            name,
            mode: OutputMode::Auto,
            retries: 2,
        }
    }

    /// How the answer is asked for. By default, [`OutputMode::Auto`].
    #[must_use]
    pub fn mode(mut self, mode: OutputMode) -> Self {
        self.mode = mode;
        self
    }

    /// How many times the model may answer again after an answer that
    /// doesn't fit. By default, 2.
    #[must_use]
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Names the answer's shape for the model (and `OpenAI`'s
    /// `json_schema.name`). By default, the type's name, or `answer`.
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.name = sanitize(name);
        self
    }

    /// The answer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The answer's JSON Schema, as given or made from the type.
    pub fn json_schema(&self) -> &Value {
        &self.inner.schema
    }

    /// The chosen mode.
    pub fn output_mode(&self) -> OutputMode {
        self.mode
    }

    /// How many times the model may answer again.
    pub fn max_retries(&self) -> u32 {
        self.retries
    }

    /// What is asked of a server in native mode.
    pub(crate) fn format(&self) -> OutputFormat {
        let mut format = OutputFormat::new(self.name.clone(), self.inner.sent.clone());
        format.description.clone_from(&self.inner.description);
        format
    }

    /// Why no dialect could enforce the schema, if none could.
    pub(crate) fn unportable(&self) -> Option<&str> {
        self.inner.unportable.as_deref()
    }

    /// The output tool of [`OutputMode::Tool`].
    pub(crate) fn tool(&self) -> ToolSpec {
        let mut description = String::from(
            "Give your final answer by calling this tool, once you have everything it needs.",
        );
        if let Some(about) = &self.inner.description {
            description.push(' ');
            description.push_str(about);
        }
        ToolSpec::new(self.tool_name(), description, self.inner.sent.clone())
    }

    /// `final_<name>`, within the 64 characters tool names may have.
    pub(crate) fn tool_name(&self) -> String {
        let mut name = format!("final_{}", self.name.to_lowercase());
        name.truncate(64);
        name
    }

    /// The instructions of [`OutputMode::Prompted`], after the system prompt.
    pub(crate) fn instructions(&self) -> String {
        format!(
            "Answer with one JSON value and nothing else (no prose, no code fence) \
             matching this JSON Schema:\n{}",
            self.inner.sent
        )
    }

    /// Reads an answer: the value (unwrapped), or every problem with it.
    pub(crate) fn read(&self, value: Value) -> Result<Value, Vec<String>> {
        // A model may give the bare value rather than the wrapper object:
        // either is read.
        let value = match value {
            Value::Object(mut map)
                if self.inner.wrapped && map.len() == 1 && map.contains_key(WRAPPER) =>
            {
                map.remove(WRAPPER).unwrap_or_default()
            }
            value => value,
        };
        let problems = match self.inner.constraints.problems(&value) {
            Ok(problems) => problems,
            Err(broken) => vec![format!("the schema can't be checked: {broken}")],
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        if let Some(read) = self.inner.read {
            read(&value).map_err(|why| vec![why])?;
        }
        Ok(value)
    }

    /// Reads the text of an answer as JSON, then as [`read`](Self::read)
    /// does. A code fence around it is taken off.
    pub(crate) fn read_text(&self, text: &str) -> Result<Value, Vec<String>> {
        let text = unfenced(text);
        if text.is_empty() {
            return Err(vec!["the answer was empty".into()]);
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| vec![format!("the answer is not JSON ({e})")])?;
        self.read(value)
    }

    /// The part of a partial answer worth showing: unwrapped.
    pub(crate) fn partial(&self, value: Value) -> Option<Value> {
        if self.inner.wrapped {
            value.get(WRAPPER).cloned()
        } else {
            Some(value)
        }
    }
}

/// A name `OpenAI` takes: letters, digits, `_` and `-`, at most 64.
fn sanitize(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "answer".into()
    } else {
        name
    }
}

/// `text` without a Markdown code fence around it.
fn unfenced(text: &str) -> &str {
    let text = unfenced_start(text).trim_end();
    text.strip_suffix("```").unwrap_or(text).trim_end()
}

/// What the model is told after an answer that doesn't fit.
pub(crate) fn correction(problems: &[String], how: &str) -> String {
    let mut text = String::from("Your answer does not match the required schema:\n");
    for problem in problems {
        text.push_str("- ");
        text.push_str(problem);
        text.push('\n');
    }
    text.push_str(how);
    text
}

/// The value a partial JSON text stands for so far, if any: what is open is
/// closed, and what is cut off mid-token (a key without its value, half a
/// number or literal) is left out. Strings cut off are kept as far as they
/// came.
pub(crate) fn parse_partial(text: &str) -> Option<Value> {
    let text = unfenced_start(text);
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    // Closers for what is open, and the last place where the text could be
    // cut and closed into valid JSON.
    let mut open: Vec<u8> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    // Places where the text could be cut and closed, latest last.
    let mut cuts: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, b) in text.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_string = false;
                    // A closed string that is a value (not a key) can end here.
                    cuts.push((i + 1, open.clone()));
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                open.push(if b == b'{' { b'}' } else { b']' });
                cuts.push((i + 1, open.clone()));
            }
            b'}' | b']' => {
                open.pop();
                cuts.push((i + 1, open.clone()));
            }
            b',' => cuts.push((i, open.clone())),
            b'0'..=b'9' | b'e' | b'l' | b's' => cuts.push((i + 1, open.clone())),
            _ => {}
        }
    }
    if open.is_empty() && !in_string {
        return None;
    }
    // Try the whole text with the open string closed, then the last cuts.
    let mut attempts: Vec<(String, Vec<u8>)> = Vec::new();
    if in_string && !escaped {
        attempts.push((format!("{text}\""), open.clone()));
    }
    attempts.push((text.to_owned(), open.clone()));
    // A key without its value is not a place to cut, so a few are tried.
    attempts.extend(
        cuts.into_iter()
            .rev()
            .take(4)
            .map(|(at, closers)| (text[..at].to_owned(), closers)),
    );
    attempts.into_iter().find_map(|(mut head, closers)| {
        let trimmed = head.trim_end().trim_end_matches(',').len();
        head.truncate(trimmed);
        if head.ends_with(':') {
            return None;
        }
        head.extend(closers.iter().rev().map(|&c| c as char));
        serde_json::from_str(&head).ok()
    })
}

/// The text from the start of its JSON, past an opening code fence.
fn unfenced_start(text: &str) -> &str {
    let text = text.trim_start();
    match text.strip_prefix("```") {
        Some(rest) => rest.strip_prefix("json").unwrap_or(rest).trim_start(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_json_is_closed_as_far_as_it_came() {
        let cases = [
            (r#"{"name": "Ber"#, json!({"name": "Ber"})),
            (r#"{"name": "Berlin", "pop"#, json!({"name": "Berlin"})),
            (
                r#"{"name": "Berlin", "population": 36"#,
                json!({"name": "Berlin", "population": 36}),
            ),
            (r#"{"tags": ["a", "b"#, json!({"tags": ["a", "b"]})),
            (r#"{"tags": ["a", "#, json!({"tags": ["a"]})),
            (r#"{"a": {"b": tr"#, json!({"a": {}})),
            (r#"{"a": {"b": true"#, json!({"a": {"b": true}})),
            ("```json\n{\"a\": 1", json!({"a": 1})),
            (r#"{"q": "say \"hi"#, json!({"q": "say \"hi"})),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_partial(text), Some(expected), "{text}");
        }
        assert_eq!(parse_partial(""), None);
        assert_eq!(parse_partial("Sure! Here"), None);
    }

    fn json_values() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z \"\\\\é]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Every prefix of an answer reads as something or nothing, never
        /// panics; the whole answer reads as itself.
        #[test]
        fn every_prefix_of_an_answer_is_read_without_panic(value in json_values()) {
            let text = value.to_string();
            for end in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
                let _ = parse_partial(&text[..end]);
            }
            proptest::prop_assert_eq!(parse_partial(&text), Some(value));
        }
    }

    #[test]
    fn answers_are_unwrapped_checked_and_read_into_the_type() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        enum Colour {
            Red,
            Green,
        }
        let output = Output::of::<Vec<Colour>>();
        assert_eq!(output.format().schema["required"], json!(["response"]));
        assert_eq!(
            output.read_text(r#"{"response": ["Red"]}"#),
            Ok(json!(["Red"]))
        );
        let problems = output.read_text(r#"{"response": ["Blue"]}"#).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("`[0]`"), "{problems:?}");
        assert_eq!(output.read_text("[\"Red\"]"), Ok(json!(["Red"])));
        assert!(output.read_text(r#"{"colours": ["Red"]}"#).is_err());
        assert_eq!(
            output.read_text("```json\n{\"response\": []}\n```"),
            Ok(json!([]))
        );
    }

    #[test]
    fn a_map_has_no_portable_form() {
        let output = Output::of::<std::collections::HashMap<String, u32>>();
        assert!(
            output
                .unportable()
                .unwrap()
                .contains("a map with free keys")
        );
    }
}
