//! Loading a config: the layers (defaults, file, environment, flags), the
//! checks, and where each value came from.

use std::path::PathBuf;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::magic::RelativePathBuf;
use figment::{Figment, Profile};

use ferrobot::policy::{Policy, Rule};

use super::Config;

/// Where a config is read from, and the command-line flags on top.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConfigSource {
    /// `-c FILE`: this file, which must exist.
    pub file: Option<PathBuf>,
    /// Whether to look for `./ferrobot.toml` and the per-user config file
    /// when no `file` is given. By default, yes.
    pub skip_search: bool,
    /// Whether to read `FERROBOT_…` environment variables. By default, yes.
    pub skip_env: bool,
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
}

impl ConfigSource {
    /// The usual search: `./ferrobot.toml`, then the per-user config file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Built-in defaults and flags only: no files, no environment (for tests).
    pub fn defaults_only() -> Self {
        Self {
            skip_search: true,
            skip_env: true,
            ..Self::default()
        }
    }

    /// Reads this file (`-c FILE`).
    #[must_use]
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.file = Some(path.into());
        self
    }

    /// `--provider`.
    #[must_use]
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// `--model`.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// `--base-url`.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }
}

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `-c FILE` names a file that does not exist.
    #[error("config file {} does not exist", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A key is unknown or a value is wrong; the message names the key, the
    /// expected values and where the value came from.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// A loaded config, and where each value came from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedConfig {
    /// The effective settings.
    pub config: Config,
    /// The config file read, if any; relative paths resolve against its directory.
    pub file: Option<PathBuf>,
    figment: Figment,
}

/// The per-user config file: `$XDG_CONFIG_HOME/ferrobot/config.toml`, or the
/// platform's equivalent.
pub fn user_config_file() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "ferrobot").map(|d| d.config_dir().join("config.toml"))
}

/// The per-user data directory, where the history and tool state live by default.
pub fn user_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "ferrobot").map(|d| d.data_dir().to_owned())
}

impl Config {
    /// Loads the layered config.
    ///
    /// # Errors
    /// [`ConfigError::Missing`] for a `-c` file that doesn't exist;
    /// [`ConfigError::Invalid`] for unknown keys and bad values.
    pub fn load(source: &ConfigSource) -> Result<LoadedConfig, ConfigError> {
        let file = match &source.file {
            Some(path) if !path.is_file() => {
                return Err(ConfigError::Missing { path: path.clone() });
            }
            Some(path) => Some(path.clone()),
            None if source.skip_search => None,
            None => [Some(PathBuf::from("ferrobot.toml")), user_config_file()]
                .into_iter()
                .flatten()
                .find(|p| p.is_file()),
        };
        // An absolute path, so paths in the file resolve to absolute paths.
        let file = file.map(|f| std::fs::canonicalize(&f).unwrap_or(f));
        let mut figment = Figment::from(Named(
            "built-in default",
            Serialized::defaults(Config::default()),
        ));
        if let Some(file) = &file {
            figment = figment.merge(Toml::file_exact(file));
        }
        if !source.skip_env {
            // Only nested keys (`FERROBOT_LLM__MODEL`): a bare `FERROBOT_X`
            // belongs to something else, such as the examples.
            figment = figment.merge(
                Env::prefixed("FERROBOT_")
                    .filter(|key| key.as_str().contains("__"))
                    .split("__"),
            );
        }
        for (key, value) in [
            ("llm.provider", &source.provider),
            ("llm.model", &source.model),
            ("llm.base_url", &source.base_url),
        ] {
            if let Some(value) = value {
                figment = figment.merge(Named(
                    "command-line flag",
                    Serialized::default(key, value).profile(Profile::Default),
                ));
            }
        }
        check_rules(&figment)?;
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Invalid(describe(&e)))?;
        config.validate()?;
        Ok(LoadedConfig {
            config,
            file,
            figment,
        })
    }

    /// Checks `text` as the binaries would load it as their config file
    /// (over the built-in defaults; no environment, no flags), without
    /// writing it anywhere: what the control panel does before it writes
    /// an edit. Relative paths in it are not resolved.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for unknown keys and bad values.
    pub fn check_toml(text: &str) -> Result<(), ConfigError> {
        let figment = Figment::from(Named(
            "built-in default",
            Serialized::defaults(Config::default()),
        ))
        .merge(Toml::string(text));
        check_rules(&figment)?;
        let config: Config = figment
            .extract()
            .map_err(|e| ConfigError::Invalid(describe(&e)))?;
        config.validate()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !self.llm.provider.is_built() {
            return Err(self.llm.provider.not_built());
        }
        if !(self.llm.base_url.starts_with("http://") || self.llm.base_url.starts_with("https://"))
        {
            return Err(ConfigError::Invalid(format!(
                "`llm.base_url` is `{}`; it must be an http:// or https:// URL, e.g. http://localhost:11434/v1",
                self.llm.base_url
            )));
        }
        for (key, url, schemes, example) in [
            (
                "telegram.api_url",
                &self.telegram.api_url,
                ["http://", "https://"],
                "https://api.telegram.org",
            ),
            (
                "discord.api_url",
                &self.discord.api_url,
                ["http://", "https://"],
                "https://discord.com",
            ),
            (
                "discord.gateway_url",
                &self.discord.gateway_url,
                ["ws://", "wss://"],
                "wss://gateway.discord.gg",
            ),
        ] {
            if !schemes.iter().any(|scheme| url.starts_with(scheme)) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` is `{url}`; it must be a {} or {} URL, e.g. {example}",
                    schemes[0], schemes[1]
                )));
            }
        }
        for (key, secs) in [
            ("llm.connect_timeout_secs", self.llm.connect_timeout_secs),
            ("llm.read_timeout_secs", self.llm.read_timeout_secs),
        ] {
            if !(1..=86_400).contains(&secs) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}` is {secs}; give a number of seconds from 1 to 86400 (a day), e.g. 10 to connect and 300 to read"
                )));
            }
        }
        let budgets = [
            (
                "agent.budget_wall_time_secs",
                self.agent.budget_wall_time_secs,
            ),
            (
                "agent.budget_output_tokens",
                self.agent.budget_output_tokens,
            ),
            (
                "agent.budget_tool_output_bytes",
                self.agent.budget_tool_output_bytes.map(|b| b as u64),
            ),
        ];
        if let Some((key, _)) = budgets.iter().find(|(_, value)| *value == Some(0)) {
            return Err(ConfigError::Invalid(format!(
                "`{key}` is 0, which would leave no turn any tools; leave it out for no limit"
            )));
        }
        if let Some(zone) = &self.schedule.time_zone {
            ferrobot::schedule::Scheduler::new()
                .time_zone(zone)
                .map_err(|e| ConfigError::Invalid(format!("`schedule.time_zone`: {e}")))?;
        }
        if let Some(minutes) = self.schedule.retry_minutes.iter().find(|m| **m == 0) {
            return Err(ConfigError::Invalid(format!(
                "`schedule.retry_minutes` holds {minutes}; give minutes from 1, e.g. [1, 5, 15], or [] for no retries"
            )));
        }
        self.mcp.validate()?;
        self.telegram.validate_webhook()?;
        if self.context.window.is_some_and(|w| w < 1024) {
            return Err(ConfigError::Invalid(format!(
                "`context.window` is {}; a model's context window is at least 1024 tokens (often 8192 to 131072): give the one your server runs with, or leave it out to ask the server",
                self.context.window.unwrap_or_default()
            )));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.logging.level).is_err() {
            return Err(ConfigError::Invalid(format!(
                "`logging.level` is `{}`; give error, warn, info, debug or trace, or a filter such as info,ferrobot=debug",
                self.logging.level
            )));
        }
        if let Some(endpoint) = &self.logging.otlp_endpoint {
            if !cfg!(feature = "otel") {
                return Err(ConfigError::Invalid(
                    "`logging.otlp_endpoint` is set, but this build has no OpenTelemetry export: build it with the `otel` feature (cargo install … --features otel), or leave the key out".into(),
                ));
            }
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(ConfigError::Invalid(format!(
                    "`logging.otlp_endpoint` is `{endpoint}`; give the collector's OTLP/HTTP address, e.g. http://localhost:4318"
                )));
            }
        }
        if self.logging.keep_files == 0 {
            return Err(ConfigError::Invalid(
                "`logging.keep_files` is 0; give how many log files to keep, e.g. 14".into(),
            ));
        }
        if self.context.max_messages < 2 {
            return Err(ConfigError::Invalid(format!(
                "`context.max_messages` is {}; give at least 2 (a question and its answer), e.g. 200",
                self.context.max_messages
            )));
        }
        if self.history.url.is_some() {
            if self.history.path.is_some() {
                return Err(ConfigError::Invalid(
                    "`history.path` and `history.url` are both set; keep the file (`path`) or the database (`url`), not both".into(),
                ));
            }
            if !cfg!(feature = "postgres") {
                return Err(super::no_postgres());
            }
        }
        if self.history.pool_size == Some(0) {
            return Err(ConfigError::Invalid(
                "`history.pool_size` is 0; give the connections each process may open, e.g. 8"
                    .into(),
            ));
        }
        if self.llm.model.trim().is_empty() {
            return Err(ConfigError::Invalid(
                "`llm.model` is empty; name a model, e.g. qwen3:8b".into(),
            ));
        }
        Ok(())
    }
}

/// Checks each `[[permissions.rules]]` entry on its own, so a mistake is
/// reported with the rule's number (`permissions.rules[3].permission`), as
/// `ferrobot permissions` numbers them; figment would name the whole list.
/// Serde decides what a rule may hold; this only says where it went wrong.
fn check_rules(figment: &Figment) -> Result<(), ConfigError> {
    let Ok(value) = figment.find_value("permissions.rules") else {
        return Ok(());
    };
    let within = origin(figment, "permissions.rules")
        .map(|origin| format!(" (from {origin})"))
        .unwrap_or_default();
    let Some(rules) = value.as_array() else {
        return Err(ConfigError::Invalid(format!(
            "`permissions.rules` must be a list of `[[permissions.rules]]` tables{within}"
        )));
    };
    for (index, rule) in rules.iter().enumerate() {
        let key = format!("permissions.rules[{}]", index + 1);
        match rule.deserialize::<Rule>() {
            Err(error) => {
                return Err(ConfigError::Invalid(format!(
                    "{}{within}",
                    rule_error(&key, &error)
                )));
            }
            Ok(rule) if rule.tool.trim().is_empty() => {
                return Err(ConfigError::Invalid(format!(
                    "`{key}.tool` is empty; name a tool, or a glob such as \"*\" for every tool{within}"
                )));
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// One rule's mistake, naming its key: what was expected, what was found.
fn rule_error(key: &str, error: &figment::Error) -> String {
    use figment::error::Kind;
    let quoted = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    };
    let at = |field: &str| {
        let mut path = vec![key.to_owned()];
        path.extend(error.path.iter().cloned());
        if !field.is_empty() && error.path.last().map(String::as_str) != Some(field) {
            path.push(field.to_owned());
        }
        format!("`{}`", path.join("."))
    };
    match &error.kind {
        Kind::UnknownVariant(found, expected) => {
            format!("{}: expected {}, got \"{found}\"", at(""), quoted(expected))
        }
        Kind::UnknownField(found, expected) => format!(
            "{}: unknown key; a rule takes {}",
            at(found),
            quoted(expected)
        ),
        Kind::MissingField(field) => format!(
            "{}: missing; every rule names a `tool` and a `permission`",
            at(field)
        ),
        Kind::InvalidType(found, expected) => {
            format!("{}: expected {expected}, got {found}", at(""))
        }
        other => format!("{}: {other}", at("")),
    }
}

/// A provider shown under a plain name in `config check` (figment would name
/// the Rust type and source line).
struct Named<P>(&'static str, P);

impl<P: figment::Provider> figment::Provider for Named<P> {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named(self.0)
    }

    fn data(&self) -> Result<figment::value::Map<Profile, figment::value::Dict>, figment::Error> {
        self.1.data()
    }
}

/// Where `key`'s value came from: "TOML file (/path/ferrobot.toml)",
/// "command-line flag".
fn origin(figment: &Figment, key: &str) -> Option<String> {
    figment.find_metadata(key).map(|m| match &m.source {
        Some(source) => format!("{} ({source})", m.name),
        None => m.name.to_string(),
    })
}

/// Figment's errors, each with its key and source, on one line each.
fn describe(error: &figment::Error) -> String {
    error
        .clone()
        .into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl LoadedConfig {
    /// Every effective value with where it came from, for `config check`:
    /// (key, value, source). A [`Secret`](super::Secret) shows as
    /// `[redacted]`, whatever its key is called.
    pub fn explain(&self) -> Vec<(String, String, String)> {
        let mut rows = Vec::new();
        let mut value = serde_json::to_value(&self.config).unwrap_or_default();
        // Rules read best one to a line, as `ferrobot permissions` shows
        // them, rather than as a JSON list.
        let rules = &self.config.permissions.rules;
        if !rules.is_empty() {
            value["permissions"]["rules"].take();
            for (index, rule) in rules.iter().enumerate() {
                rows.push((
                    format!("permissions.rules[{}]", index + 1),
                    rule.to_string(),
                ));
            }
        }
        flatten("", &value, &mut rows);
        rows.retain(|(key, shown)| !(key == "permissions.rules" && shown == "null"));
        rows.into_iter()
            .map(|(key, shown)| {
                // A rule's source is the list's: figment keeps no metadata
                // per element.
                let list = key.split('[').next().unwrap_or(&key);
                let source = origin(&self.figment, list).unwrap_or_else(|| "default".into());
                (key, shown, source)
            })
            .collect()
    }

    /// The `[[permissions.rules]]`, in file order, as the policy every
    /// agent built from this config follows.
    pub fn policy(&self) -> Policy {
        Policy::new().rules(self.config.permissions.rules.iter().cloned())
    }

    /// Where the `[[permissions.rules]]` came from, for `ferrobot
    /// permissions`: "TOML file (/path/ferrobot.toml)", or the environment.
    pub fn rules_source(&self) -> String {
        origin(&self.figment, "permissions.rules").unwrap_or_else(|| "built-in default".into())
    }

    /// The history file: the configured path, else `history.db` in the
    /// per-user data directory.
    pub fn history_path(&self) -> PathBuf {
        resolve(self.config.history.path.as_ref(), "history.db")
    }

    /// The tool state file: the configured path, else `tool_state.json` in
    /// the per-user data directory.
    pub fn tool_state_path(&self) -> PathBuf {
        resolve(self.config.tools.state_file.as_ref(), "tool_state.json")
    }

    /// The command tools file: the configured path, else `tools.toml` beside
    /// the per-user config file.
    pub fn tools_file_path(&self) -> PathBuf {
        self.config.tools.file.as_ref().map_or_else(
            || {
                user_config_file()
                    .and_then(|f| f.parent().map(|d| d.join("tools.toml")))
                    .unwrap_or_else(|| "tools.toml".into())
            },
            RelativePathBuf::relative,
        )
    }
}

fn resolve(configured: Option<&RelativePathBuf>, default: &str) -> PathBuf {
    configured.map_or_else(
        || {
            user_data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join(default)
        },
        RelativePathBuf::relative,
    )
}

fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, inner, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}
