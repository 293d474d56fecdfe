//! Slash commands: `/name key=value …` runs a tool directly; `/help` lists them.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::builtin::command_name;
use super::event::Reply;
use super::{Builtin, EventSink, Inner, exec};
use crate::message::ToolCall;
use crate::provider::assemble::generate_call_id;

/// Runs a slash command (the text after `/`). The model is never called and
/// nothing enters history (`/undo` only takes out); the reply's text is the
/// tool's output.
pub(super) async fn run(
    inner: &Inner,
    conversation: &Arc<str>,
    user: Option<&str>,
    command: &str,
    sink: &impl EventSink,
    cancel: &CancellationToken,
) -> Reply {
    let (name, args) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    let name = command_name(name);
    // A built-in wins over a tool of the same name; a bare `/` is help too.
    match Builtin::named(name) {
        Some(Builtin::Help) => return text_reply(help(inner)),
        None if name.is_empty() => return text_reply(help(inner)),
        Some(Builtin::Undo) => {
            return text_reply(super::undo::reply(inner, conversation, cancel).await);
        }
        Some(Builtin::New) => return text_reply(NEW_ELSEWHERE.to_owned()),
        Some(Builtin::Stop) => {
            let stopped = inner.turns.stop(conversation);
            return text_reply(if stopped { STOPPED } else { NOTHING_RUNNING }.to_owned());
        }
        Some(Builtin::Tasks) => return text_reply(inner.tasks.list(conversation)),
        Some(Builtin::Cancel) => return text_reply(inner.tasks.cancel(conversation, args)),
        None => {}
    }
    let Some(tool) = inner.tools.get(name) else {
        return text_reply(format!("Unknown command /{name}. Type /help for the list."));
    };
    let arguments = match parse_arguments(args, &tool.spec().parameters) {
        Ok(arguments) => arguments,
        Err(message) => return text_reply(format!("/{name}: {message}")),
    };
    let call = ToolCall::new(generate_call_id(), name, arguments);
    let scope = super::sub::TurnScope::new(
        inner,
        conversation,
        user,
        None,
        sink.forwarder(),
        tokio::time::Instant::now(),
    );
    let mut results = exec::run_calls(
        inner,
        conversation,
        user,
        exec::Round {
            calls: std::slice::from_ref(&call),
            recent: &[],
            bad_arguments: &Default::default(),
            answers: &Default::default(),
            scope: &scope,
            interrupted: &[],
        },
        sink,
        cancel,
    )
    .await;
    let (_, record) = results.pop().expect("one call gives one result");
    Reply {
        text: record.content.clone(),
        usage: scope.take_spent(),
        tool_calls: vec![record],
        ..Reply::default()
    }
}

/// `/new` reached the agent: the front end owns which conversation a chat
/// is in, and this one doesn't offer a fresh one.
const NEW_ELSEWHERE: &str =
    "/new is not offered here: this program keeps its conversations itself.";

/// What `/stop` answers when it stopped a turn, and when none was running.
pub(crate) const STOPPED: &str = "Stopped.";
pub(crate) const NOTHING_RUNNING: &str = "Nothing is running.";

fn text_reply(text: String) -> Reply {
    Reply {
        text,
        ..Reply::default()
    }
}

/// The enabled tools, one per line, with their parameters; then the
/// built-ins, and the tools they shadow.
fn help(inner: &Inner) -> String {
    let mut out = String::from("Commands (the model is not involved):\n");
    let mut shadowed = Vec::new();
    for tool in inner.tools.tools() {
        if !inner.tools.is_enabled(tool.name()) {
            continue;
        }
        if let Some(builtin) = Builtin::named(tool.name()) {
            shadowed.push(builtin);
            continue;
        }
        let spec = tool.spec();
        out.push_str(&format!("/{}", spec.name));
        if let Some(props) = spec.parameters.get("properties").and_then(Value::as_object) {
            for key in props.keys() {
                out.push_str(&format!(" {key}=…"));
            }
        }
        let summary = spec.description.lines().next().unwrap_or_default();
        out.push_str(&format!(" — {summary}"));
        if let Err(reason) = tool.availability() {
            out.push_str(&format!(" (unavailable here: {reason})"));
        }
        out.push('\n');
    }
    for builtin in Builtin::ALL {
        out.push_str(&format!(
            "/{} — {}\n",
            builtin.name(),
            builtin.description()
        ));
    }
    for builtin in shadowed {
        out.push_str(&format!(
            "(The tool {name} is not a command: /{name} is built in. The model can still call it.)\n",
            name = builtin.name()
        ));
    }
    out.pop();
    out
}

/// Parses `key=value` pairs (values may be quoted with `"` or `'`, and `\`
/// escapes the next character) into an arguments object, typing each value
/// by the parameter's schema: numbers, booleans, arrays and objects are
/// parsed as JSON; strings stay strings. What a slash command's arguments
/// go through, for front ends that take arguments the same way.
///
/// # Errors
/// What is wrong, for the user: a token that isn't `key=value`, a parameter
/// the schema doesn't have, an unclosed quote.
///
/// # Examples
/// ```
/// use serde_json::json;
/// let schema = json!({"properties": {"path": {"type": "string"}, "depth": {"type": "integer"}}});
/// let arguments = ferrobot::agent::parse_arguments(r#"path="/my dir" depth=2"#, &schema).unwrap();
/// assert_eq!(arguments, json!({"path": "/my dir", "depth": 2}));
/// ```
pub fn parse_arguments(input: &str, schema: &Value) -> Result<Value, String> {
    let mut arguments = Map::new();
    for token in tokenize(input)? {
        let Some((key, raw)) = token.split_once('=') else {
            return Err(format!(
                "expected key=value, got `{token}` (quote values that contain spaces)"
            ));
        };
        let property = schema.get("properties").map(|p| p.get(key));
        if property == Some(None) && schema.get("additionalProperties") != Some(&Value::Bool(true))
        {
            return Err(format!(
                "unknown parameter `{key}`; type /help for the parameters"
            ));
        }
        let as_string = || Value::String(raw.to_owned());
        let value = match property
            .flatten()
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
        {
            Some("string") => as_string(),
            // Numbers, booleans, arrays, objects, and untyped values read as
            // JSON when they are JSON; anything else stays text.
            _ => serde_json::from_str(raw).unwrap_or_else(|_| as_string()),
        };
        arguments.insert(key.to_owned(), value);
    }
    Ok(Value::Object(arguments))
}

/// Splits on whitespace outside quotes.
fn tokenize(input: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_token = false;
    let mut quote: Option<char> = None;
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        match (c, quote) {
            ('\\', _) => {
                current.extend(chars.next());
                in_token = true;
            }
            ('"' | '\'', None) => {
                quote = Some(c);
                in_token = true;
            }
            (c, Some(q)) if c == q => quote = None,
            (c, None) if c.is_whitespace() => {
                if in_token {
                    tokens.push(std::mem::take(&mut current));
                    in_token = false;
                }
            }
            (c, _) => {
                current.push(c);
                in_token = true;
            }
        }
    }
    if let Some(q) = quote {
        return Err(format!("unclosed {q} quote"));
    }
    if in_token {
        tokens.push(current);
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"}, "depth": {"type": "integer"}, "human": {"type": "boolean"}, "any": {}
        }})
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let args =
            parse_arguments(r#"path="/my dir" depth=2 human=true any=3 "#, &schema()).unwrap();
        assert_eq!(
            args,
            json!({"path": "/my dir", "depth": 2, "human": true, "any": 3})
        );
        let args = parse_arguments("path=42", &schema()).unwrap();
        assert_eq!(args, json!({"path": "42"}));
    }

    #[test]
    fn mistakes_are_explained() {
        assert!(
            parse_arguments("path", &schema())
                .unwrap_err()
                .contains("key=value")
        );
        assert!(
            parse_arguments("nope=1", &schema())
                .unwrap_err()
                .contains("unknown parameter `nope`")
        );
        assert!(
            parse_arguments("path='x", &schema())
                .unwrap_err()
                .contains("unclosed")
        );
    }

    #[test]
    fn escapes_and_single_quotes_work() {
        let args = parse_arguments(r"path='a b' any=x\ y", &schema()).unwrap();
        assert_eq!(args, json!({"path": "a b", "any": "x y"}));
    }
}
