//! Native command menus (Telegram's `/` menu, Discord's slash commands) from
//! the agent's tools.

use std::future::Future;
use std::sync::Mutex;

use serde_json::Value;

use crate::agent::Builtin;
use crate::tool::ToolRegistry;

/// A channel's command menu as last given to
/// [`Channel::publish`](super::Channel::publish), sent to the platform one
/// request at a time, each with the menu as it is when its turn comes: an
/// older menu never lands after a newer one.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ferrobot::bot::LatestMenu;
/// let menu = LatestMenu::default();
/// menu.set(Vec::new());
/// menu.send(|commands| async move { assert!(commands.is_empty()) }).await;
/// # }
/// ```
#[derive(Debug, Default)]
pub struct LatestMenu {
    latest: Mutex<Vec<CommandSpec>>,
    sending: tokio::sync::Mutex<()>,
}

impl LatestMenu {
    /// Keeps `commands` as the menu to send.
    pub fn set(&self, commands: Vec<CommandSpec>) {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = commands;
    }

    /// Sends the latest menu with `send`, once any send under way is done.
    pub async fn send<F: Future<Output = ()>>(&self, send: impl FnOnce(Vec<CommandSpec>) -> F) {
        let _one_at_a_time = self.sending.lock().await;
        let commands = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        send(commands).await;
    }
}

/// A platform command: a built-in, or a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandSpec {
    /// The command, as the built-in or the tool is named.
    pub name: String,
    /// The built-in's description, or the first line of the tool's.
    pub description: String,
    /// Its arguments, required ones first.
    pub options: Vec<CommandOption>,
    /// Which built-in this is; `None` for a tool.
    pub builtin: Option<Builtin>,
}

/// One argument of a [`CommandSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandOption {
    /// The argument's name.
    pub name: String,
    /// Its description, or its name when it has none.
    pub description: String,
    /// What values it takes.
    pub kind: OptionKind,
    /// Whether the tool needs it.
    pub required: bool,
}

/// The value types platforms offer for command options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionKind {
    /// Text (also the fallback for lists, objects and untyped values, given as JSON).
    String,
    /// A whole number.
    Integer,
    /// A number.
    Number,
    /// True or false.
    Boolean,
}

/// A chat's command menu, what [`serve`](super::serve) hands
/// [`Channel::publish`](super::Channel::publish): the built-ins
/// ([`Builtin::ALL`]) first, then the enabled tools as [`command_specs`]
/// gives them, less any a built-in shadows (the built-in wins).
///
/// # Examples
/// ```
/// use ferrobot::bot::menu;
/// use ferrobot::tool::{ToolRegistry, from_fn};
/// let registry = ToolRegistry::new();
/// registry.register(from_fn("uptime", "How long the machine has run.", |_: serde_json::Value, _| async { "3 days" }));
/// registry.register(from_fn("help", "A tool the built-in /help shadows.", |_: serde_json::Value, _| async { "" }));
/// let names: Vec<String> = menu(&registry).into_iter().map(|c| c.name).collect();
/// assert_eq!(names, ["new", "stop", "undo", "tasks", "cancel", "help", "uptime"]);
/// ```
pub fn menu(tools: &ToolRegistry) -> Vec<CommandSpec> {
    Builtin::ALL
        .into_iter()
        .map(|builtin| CommandSpec {
            name: builtin.name().to_owned(),
            description: builtin.description().to_owned(),
            options: builtin_options(builtin),
            builtin: Some(builtin),
        })
        .chain(
            command_specs(tools)
                .into_iter()
                .filter(|spec| Builtin::named(&spec.name).is_none()),
        )
        .collect()
}

/// A built-in's arguments, for a platform that asks for them in its menu
/// (Discord): `/cancel`'s task id, sent as `/cancel id=3`.
fn builtin_options(builtin: Builtin) -> Vec<CommandOption> {
    match builtin {
        Builtin::Cancel => vec![CommandOption {
            name: "id".to_owned(),
            description: "The task's id (/tasks lists them)".to_owned(),
            kind: OptionKind::Integer,
            required: true,
        }],
        _ => Vec::new(),
    }
}

/// The enabled tools as commands, in registration order (built-ins not
/// included: see [`menu`]).
///
/// # Examples
/// ```
/// use ferrobot::bot::{OptionKind, command_specs};
/// use ferrobot::tool::{ToolRegistry, from_fn};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args {
///     /// How many lines.
///     lines: u32,
/// }
/// let registry = ToolRegistry::new();
/// registry.register(from_fn("tail_log", "Show the end of the log.\nMore.", |a: Args, _| async move { a.lines }));
/// let specs = command_specs(&registry);
/// assert_eq!(specs[0].description, "Show the end of the log.");
/// assert_eq!(specs[0].options[0].kind, OptionKind::Integer);
/// assert!(specs[0].options[0].required);
/// ```
pub fn command_specs(tools: &ToolRegistry) -> Vec<CommandSpec> {
    tools
        .tools()
        .iter()
        .filter(|tool| tools.is_enabled(tool.name()))
        .map(|tool| {
            let spec = tool.spec();
            let required: Vec<&str> = spec
                .parameters
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut options: Vec<CommandOption> = spec
                .parameters
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, schema)| CommandOption {
                    name: name.clone(),
                    description: schema
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or(name)
                        .to_owned(),
                    kind: option_kind(schema),
                    required: required.contains(&name.as_str()),
                })
                .collect();
            options.sort_by_key(|o| !o.required);
            CommandSpec {
                name: spec.name.clone(),
                description: spec
                    .description
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                options,
                builtin: None,
            }
        })
        .collect()
}

fn option_kind(schema: &Value) -> OptionKind {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    match types.as_slice() {
        ["integer"] => OptionKind::Integer,
        ["number"] => OptionKind::Number,
        ["boolean"] => OptionKind::Boolean,
        _ => OptionKind::String,
    }
}

impl CommandSpec {
    /// The slash-command text for a platform command's values, so the agent
    /// runs it the same way as a typed `/name key=value …`: the one place a
    /// tool call is dispatched.
    ///
    /// # Examples
    /// ```
    /// # use ferrobot::bot::command_specs;
    /// # use ferrobot::tool::{ToolRegistry, from_fn};
    /// # let registry = ToolRegistry::new();
    /// # registry.register(from_fn("grep", "Search.", |_: serde_json::Value, _| async {}));
    /// let spec = &command_specs(&registry)[0];
    /// let text = spec.slash_text([("pattern", "disk full"), ("path", "/var/log")]);
    /// assert_eq!(text, r#"/grep pattern="disk full" path=/var/log"#);
    /// ```
    pub fn slash_text<'a>(&self, values: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
        slash_text(&self.name, values)
    }
}

/// The slash-command text `/name key=value …`, values quoted where they
/// hold spaces or quotes; what [`CommandSpec::slash_text`] gives for a
/// command that has no spec (one the platform knows but the agent doesn't).
///
/// # Examples
/// ```
/// let text = ferrobot::bot::slash_text("grep", [("pattern", "it's")]);
/// assert_eq!(text, r#"/grep pattern="it's""#);
/// ```
pub fn slash_text<'a>(name: &str, values: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut text = format!("/{name}");
    for (key, value) in values {
        text.push(' ');
        text.push_str(key);
        text.push('=');
        if value.is_empty()
            || value.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
        {
            text.push('"');
            for c in value.chars() {
                if c == '"' || c == '\\' {
                    text.push('\\');
                }
                text.push(c);
            }
            text.push('"');
        } else {
            text.push_str(value);
        }
    }
    text
}
