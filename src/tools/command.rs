//! Tools that run a program: a command template with named, typed parameters.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::message::ToolSpec;
use crate::tool::arguments::normalize;
use crate::tool::{
    Constraints, Effects, Tool, ToolContext, ToolError, ToolOutput, fill_placeholders,
};

/// A tool that runs a program with arguments filled from the model's.
///
/// The command is an argv, never a shell line: a parameter such as
/// `"; rm -rf /"` stays one argument. The run is bounded by a time-out, its
/// output (stdout then stderr) is capped, and the exit status is reported;
/// a non-zero status is an error result.
///
/// # Examples
/// ```
/// use ferrobot::tools::{CommandTool, ParamKind};
/// let ping = CommandTool::new("ping_host", "Ping a host three times.", ["ping", "-c", "3", "{host}"])
///     .param("host", ParamKind::String, "Host name or address.", true)
///     .confirm("Ping {host}?");
/// # let _ = ping;
/// ```
#[derive(Debug, Clone)]
pub struct CommandTool {
    spec: ToolSpec,
    /// The schema compiled at the first call, once the params are known.
    checks: Arc<OnceLock<Constraints>>,
    command: Vec<String>,
    /// The params' names, in order.
    params: Vec<String>,
    timeout: Duration,
    max_output: usize,
    confirm: Option<String>,
    effects: Effects,
}

/// The type of a command tool's parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ParamKind {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// A number.
    Number,
    /// True or false.
    Boolean,
}

impl ParamKind {
    fn json_type(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Integer => "integer",
            ParamKind::Number => "number",
            ParamKind::Boolean => "boolean",
        }
    }
}

impl CommandTool {
    /// A tool running `command`, whose elements may hold `{param}` placeholders.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        command: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            spec: ToolSpec::new(
                name,
                description,
                json!({"type": "object", "properties": {}, "required": []}),
            ),
            checks: Arc::default(),
            command: command.into_iter().map(Into::into).collect(),
            params: Vec::new(),
            timeout: Duration::from_secs(30),
            max_output: 8_000,
            confirm: None,
            effects: Effects::NONE,
        }
    }

    /// Declares a parameter.
    #[must_use]
    pub fn param(mut self, name: &str, kind: ParamKind, description: &str, required: bool) -> Self {
        let schema = &mut self.spec.parameters;
        schema["properties"][name] = json!({"type": kind.json_type(), "description": description});
        if required && let Some(list) = schema["required"].as_array_mut() {
            list.push(json!(name));
        }
        self.params.push(name.to_owned());
        self.checks = Arc::default();
        self
    }

    /// Stops the program after this long. By default, 30 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Keeps at most this many characters of output. By default, 8,000.
    #[must_use]
    pub fn max_output(mut self, chars: usize) -> Self {
        self.max_output = chars;
        self
    }

    /// Asks before each run; `{param}` placeholders are filled in.
    #[must_use]
    pub fn confirm(mut self, prompt: impl Into<String>) -> Self {
        self.confirm = Some(prompt.into());
        self
    }

    /// Declares what its runs do, for the
    /// [`Policy`](crate::policy::Policy)'s defaults: a destructive command
    /// is asked about unless a rule allows it. By default, nothing
    /// declared ([`Effects::NONE`]).
    ///
    /// # Examples
    /// ```
    /// use ferrobot::tool::{Effects, Tool};
    /// use ferrobot::tools::CommandTool;
    /// let df = CommandTool::new("disk_free", "Free disk space.", ["df", "-h"])
    ///     .effects(Effects::READ_ONLY.idempotent());
    /// // This setter shadows the trait's getter, as `timeout` does.
    /// assert!(Tool::effects(&df).read_only);
    /// ```
    #[must_use]
    pub fn effects(mut self, effects: Effects) -> Self {
        self.effects = effects;
        self
    }

    /// Checks that every placeholder names a declared parameter.
    fn check(&self) -> Result<(), String> {
        for element in &self.command {
            let mut rest = element.as_str();
            while let Some(open) = rest.find('{') {
                let Some(close) = rest[open..].find('}') else {
                    break;
                };
                let key = &rest[open + 1..open + close];
                if !self.params.iter().any(|p| p == key) {
                    return Err(format!(
                        "`{{{key}}}` in the command of `{}` is not one of its params",
                        self.spec.name
                    ));
                }
                rest = &rest[open + close + 1..];
            }
        }
        if self.command.is_empty() {
            return Err(format!("`{}` has an empty command", self.spec.name));
        }
        Ok(())
    }

    /// The arguments as text, once they hold to the schema (the same
    /// check, and the same words, as every other tool's).
    fn values(&self, arguments: &Value) -> Result<Map<String, Value>, ToolError> {
        let arguments = normalize(arguments.clone());
        self.checks
            .get_or_init(|| Constraints::new(&self.spec.parameters))
            .check(&self.spec.name, &arguments)?;
        Ok(self
            .params
            .iter()
            .map(|param| {
                let text = match arguments.get(param) {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                (param.clone(), Value::String(text))
            })
            .collect())
    }

    /// The command with its placeholders filled from `values`.
    fn fill(&self, values: &Value) -> Vec<String> {
        self.command
            .iter()
            .map(|element| fill_placeholders(element, values))
            .collect()
    }

    /// The argv a call with `arguments` runs, once they hold to the schema:
    /// what `call` runs and what the policy reads, from one place.
    fn argv(&self, arguments: &Value) -> Result<Vec<String>, ToolError> {
        Ok(self.fill(&Value::Object(self.values(arguments)?)))
    }

    async fn run(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let argv = self.argv(&arguments)?;
        let child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ToolError::new(format!("could not start `{}`: {e}", argv[0])))?;
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(output) => {
                output.map_err(|e| ToolError::new(format!("`{}` failed: {e}", argv[0])))?
            }
            Err(_) => {
                return Err(ToolError::new(format!(
                    "`{}` did not finish within {:?} and was stopped",
                    argv[0], self.timeout
                )));
            }
        };
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !stderr.trim().is_empty() {
            text.push_str("\n[stderr]\n");
            text.push_str(&stderr);
        }
        let length = text.chars().count();
        if length > self.max_output {
            let cut = text
                .char_indices()
                .nth(self.max_output)
                .map_or(text.len(), |(i, _)| i);
            text.truncate(cut);
            text.push_str(&format!("\n[output cut: {length} characters in all]"));
        }
        let status = output.status.code().map_or_else(
            || "killed by a signal".to_owned(),
            |c| format!("exit status {c}"),
        );
        if output.status.success() {
            Ok(format!("{status}\n{text}").into())
        } else {
            Err(ToolError::new(format!("{status}\n{text}")))
        }
    }

    /// Reads command tools from a TOML file:
    ///
    /// ```toml
    /// [[tool]]
    /// name = "ping_host"
    /// description = "Ping a host three times."
    /// command = ["ping", "-c", "3", "{host}"]
    /// timeout = "10s"            # optional; ms, s, m
    /// max_output = 4000          # optional, characters
    /// confirm = "Ping {host}?"   # optional; or true
    /// read_only = true           # optional effects, for the permission
    /// destructive = false        #   rules' defaults (all false by default)
    /// idempotent = true
    /// open_world = true
    /// [tool.params.host]
    /// type = "string"            # string, integer, number, boolean
    /// description = "Host name or address."
    /// required = true
    /// ```
    ///
    /// # Errors
    /// A message naming the file and what is wrong in it.
    pub fn load_file(path: &Path) -> Result<Vec<CommandTool>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("can't read the tools file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads command tools from TOML text, as [`load_file`](Self::load_file).
    ///
    /// # Errors
    /// What is wrong in the text.
    pub fn parse(text: &str) -> Result<Vec<CommandTool>, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            tool: Vec<Entry>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Entry {
            name: String,
            description: String,
            command: Vec<String>,
            timeout: Option<String>,
            max_output: Option<usize>,
            confirm: Option<Confirm>,
            #[serde(default)]
            read_only: bool,
            #[serde(default)]
            destructive: bool,
            #[serde(default)]
            idempotent: bool,
            #[serde(default)]
            open_world: bool,
            #[serde(default)]
            params: BTreeMap<String, ParamEntry>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Confirm {
            Ask(bool),
            Prompt(String),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ParamEntry {
            #[serde(rename = "type")]
            kind: ParamKind,
            #[serde(default)]
            description: String,
            #[serde(default)]
            required: bool,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        file.tool
            .into_iter()
            .map(|entry| {
                let mut tool = CommandTool::new(&entry.name, entry.description, entry.command);
                for (name, param) in &entry.params {
                    tool = tool.param(name, param.kind, &param.description, param.required);
                }
                if let Some(timeout) = &entry.timeout {
                    tool = tool.timeout(parse_duration(timeout).ok_or_else(|| {
                        format!("`timeout = \"{timeout}\"` of `{}`: write e.g. \"500ms\", \"10s\" or \"2m\"", entry.name)
                    })?);
                }
                if let Some(max) = entry.max_output {
                    tool = tool.max_output(max);
                }
                match entry.confirm {
                    Some(Confirm::Ask(true)) => tool = tool.confirm(format!("Run `{}`?", entry.name)),
                    Some(Confirm::Prompt(prompt)) => tool = tool.confirm(prompt),
                    Some(Confirm::Ask(false)) | None => {}
                }
                let mut effects = Effects::NONE;
                effects.read_only = entry.read_only;
                effects.destructive = entry.destructive;
                effects.idempotent = entry.idempotent;
                effects.open_world = entry.open_world;
                tool = tool.effects(effects);
                tool.check()?;
                Ok(tool)
            })
            .collect()
    }
}

fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let number: u64 = text[..split].parse().ok()?;
    match text[split..].trim() {
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        "m" | "min" => Some(Duration::from_secs(number * 60)),
        _ => None,
    }
}

impl Tool for CommandTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        arguments: Value,
        _ctx: ToolContext,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(arguments))
    }

    fn confirmation(&self, arguments: &Value) -> Option<String> {
        self.confirm
            .as_deref()
            .map(|t| fill_placeholders(t, arguments))
    }

    fn effects(&self) -> Effects {
        self.effects
    }

    fn command_line(&self, arguments: &Value) -> Option<Vec<String>> {
        // Arguments that fail the checks never run; read them as given all
        // the same, so the call is still judged as a command, never as a
        // tool that runs nothing.
        Some(
            self.argv(arguments)
                .unwrap_or_else(|_| self.fill(arguments)),
        )
    }

    fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        self.values(arguments).map(drop)
    }

    fn timeout(&self) -> Option<Duration> {
        // The command's own time-out reports better; give it a moment more.
        Some(self.timeout + Duration::from_secs(1))
    }

    fn availability(&self) -> Result<(), String> {
        let program = &self.command[0];
        if program.contains('/') || crate::private::on_path(program) {
            Ok(())
        } else {
            Err(format!("needs `{program}`, which is not on PATH here"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_the_argv_the_call_runs() {
        let tool = CommandTool::new(
            "commit",
            "Commit.",
            ["git", "commit", "-m", "{message}", "-n{count}"],
        )
        .param("message", ParamKind::String, "Message.", true)
        .param("count", ParamKind::Integer, "Count.", false);
        let line = tool.command_line(&json!({"message": "a b; rm -rf /", "count": 3}));
        assert_eq!(
            line.unwrap(),
            ["git", "commit", "-m", "a b; rm -rf /", "-n3"]
        );
        // An optional parameter left out is filled as `call` fills it.
        assert_eq!(
            tool.command_line(&json!({"message": "x"})).unwrap()[4],
            "-n"
        );
        // Arguments that fail the checks are still a command line.
        assert!(tool.command_line(&json!({"message": 5})).is_some());
    }

    #[test]
    fn effects_come_from_the_builder_and_the_tools_file() {
        let tool = CommandTool::new("df", "Free space.", ["df"]).effects(Effects::READ_ONLY);
        assert_eq!(Tool::effects(&tool), Effects::READ_ONLY);
        let tools = CommandTool::parse(
            "[[tool]]\nname = \"wipe\"\ndescription = \"Wipe.\"\ncommand = [\"shred\", \"x\"]\n\
             destructive = true\nidempotent = true\n",
        )
        .unwrap();
        assert_eq!(Tool::effects(&tools[0]), Effects::DESTRUCTIVE.idempotent());
        let tools = CommandTool::parse(
            "[[tool]]\nname = \"df\"\ndescription = \"Df.\"\ncommand = [\"df\"]\nread_only = true\nopen_world = false\n",
        )
        .unwrap();
        assert_eq!(Tool::effects(&tools[0]), Effects::READ_ONLY);
        let error = CommandTool::parse(
            "[[tool]]\nname = \"df\"\ndescription = \"Df.\"\ncommand = [\"df\"]\nread_only = \"yes\"\n",
        )
        .err()
        .unwrap();
        assert!(error.contains("read_only"), "{error}");
    }
}
