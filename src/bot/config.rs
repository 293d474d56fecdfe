//! The configuration every bot binary reads.

use std::fmt;
use std::path::PathBuf;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::magic::RelativePathBuf;
use figment::{Figment, Profile};
use serde::{Deserialize, Serialize};

/// The dialects a config may name in `llm.provider`.
pub const PROVIDERS: [&str; 5] = ["openai", "ollama", "anthropic", "gemini", "responses"];

/// A bot's settings, layered: built-in defaults, then a config file (`-c
/// FILE`, else `./ferrobot.toml`, else the per-user config dir), then
/// `FERROBOT_…` environment variables (`__` nests: `FERROBOT_LLM__MODEL`),
/// then command-line flags. Unknown keys and bad values are errors naming
/// the key and where it came from.
///
/// # Examples
/// ```
/// use ferrobot::bot::{Config, ConfigSource};
/// let loaded = Config::load(&ConfigSource::defaults_only().model("llama3.2")).unwrap();
/// assert_eq!(loaded.config.llm.model, "llama3.2");
/// assert_eq!(loaded.config.agent.max_tool_rounds, 10);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// The model endpoint.
    pub llm: LlmConfig,
    /// The agent's behaviour.
    pub agent: AgentConfig,
    /// Where conversations are kept.
    pub history: HistoryConfig,
    /// Tool enable/disable state.
    pub tools: ToolsConfig,
    /// The Telegram bot.
    pub telegram: TelegramConfig,
    /// The Discord bot.
    pub discord: DiscordConfig,
}

/// `[llm]`: the model endpoint.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LlmConfig {
    /// The dialect, one of [`PROVIDERS`]. By default, `openai` (any
    /// OpenAI-compatible server).
    pub provider: String,
    /// The server. By default, Ollama at `http://localhost:11434/v1`.
    pub base_url: String,
    /// The model. By default, `qwen3:8b`.
    pub model: String,
    /// The API key itself; prefer `api_key_env`. Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    /// The environment variable holding the API key, e.g. `OPENAI_API_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Sampling temperature. By default, the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Whether to stream answers. By default, `true`.
    pub streaming: bool,
    /// How long to wait for a connection to the server, in seconds (1 to
    /// 86,400). By default, 10.
    pub connect_timeout_secs: u64,
    /// How long to wait for each next piece of an answer, in seconds (1 to
    /// 86,400). By default, 300 (a local model can take minutes to read a
    /// long prompt).
    pub read_timeout_secs: u64,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

/// `[agent]`: the agent's behaviour.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Sent before every conversation.
    pub system_prompt: String,
    /// Rounds of tool calls per turn. By default, 10.
    pub max_tool_rounds: u32,
    /// Seconds a tool may run. By default, 60.
    pub tool_timeout_secs: u64,
    /// Seconds a turn may go on calling tools before the model must answer
    /// from what it has (not 0). By default, no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_wall_time_secs: Option<u64>,
    /// Bytes of tool output a turn may give the model (not 0). By default,
    /// no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tool_output_bytes: Option<usize>,
    /// Tokens the model may write in a turn (not 0). By default, no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_output_tokens: Option<u64>,
}

/// `[history]`: where conversations are kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// The SQLite file, relative to the config file's directory. By default,
    /// `history.db` in the per-user data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<RelativePathBuf>,
}

/// `[tools]`: tool settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolsConfig {
    /// Which tools are disabled, a JSON file relative to the config file's
    /// directory. By default, `tool_state.json` in the per-user data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_file: Option<RelativePathBuf>,
    /// Command tools, a TOML file relative to the config file's directory
    /// (see `ferrobot::tools::CommandTool::load_file`). By default,
    /// `tools.toml` in the per-user config directory, if it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<RelativePathBuf>,
}

/// `[telegram]`: the Telegram bot (`ferrobot-telegram`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TelegramConfig {
    /// The bot's token from `@BotFather`; prefer the environment
    /// (`FERROBOT_TELEGRAM__TOKEN`). Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// The Bot API server. By default, `https://api.telegram.org`.
    pub api_url: String,
    /// The Telegram user ids allowed to talk to the bot; everyone else is
    /// refused. Empty (the default) refuses everyone.
    pub allowed_user_ids: Vec<u64>,
    /// Whether to send a short system report once connected. By default, yes.
    pub startup_notice: bool,
    /// Where the start-up report goes. By default, the first allowed user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_chat_id: Option<i64>,
    /// Seconds a confirmation waits for a button press before declining.
    /// By default, 300.
    pub confirm_timeout_secs: u64,
    /// Milliseconds between edits of a reply being written. By default,
    /// 1,500 (Telegram limits how often a bot may edit).
    pub edit_interval_ms: u64,
}

impl fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("token", &self.token)
            .field("api_url", &self.api_url)
            .field("allowed_user_ids", &self.allowed_user_ids)
            .finish_non_exhaustive()
    }
}

/// `[discord]`: the Discord bot (`ferrobot-discord`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DiscordConfig {
    /// The bot's token from the Developer Portal; prefer the environment
    /// (`FERROBOT_DISCORD__TOKEN`). Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// The REST API. By default, `https://discord.com`.
    pub api_url: String,
    /// The gateway. By default, `wss://gateway.discord.gg`.
    pub gateway_url: String,
    /// The Discord user ids allowed to talk to the bot; everyone else is
    /// refused. Empty (the default) refuses everyone.
    pub allowed_user_ids: Vec<u64>,
    /// The servers (guilds) the bot answers in; DMs are always answered
    /// (to allowed users). Empty (the default): any server.
    pub allowed_guild_ids: Vec<u64>,
    /// Whether to send a short system report once connected. By default, yes.
    pub startup_notice: bool,
    /// The channel the start-up report goes to. By default, a DM to the
    /// first allowed user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_channel_id: Option<u64>,
    /// Seconds a confirmation waits for a button press before declining.
    /// By default, 300.
    pub confirm_timeout_secs: u64,
    /// Milliseconds between edits of a reply being written. By default, 1,200.
    pub edit_interval_ms: u64,
}

impl fmt::Debug for DiscordConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscordConfig")
            .field("token", &self.token)
            .field("api_url", &self.api_url)
            .field("gateway_url", &self.gateway_url)
            .field("allowed_user_ids", &self.allowed_user_ids)
            .finish_non_exhaustive()
    }
}

/// A secret from config or environment: never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            llm: LlmConfig {
                provider: "openai".into(),
                base_url: "http://localhost:11434/v1".into(),
                model: "qwen3:8b".into(),
                api_key: None,
                api_key_env: None,
                temperature: None,
                streaming: true,
                connect_timeout_secs: 10,
                read_timeout_secs: 300,
            },
            agent: AgentConfig {
                system_prompt: "You are a careful system administration assistant running on the user's machine. \
                                Use the tools to look things up instead of guessing, and say what you did."
                    .into(),
                max_tool_rounds: 10,
                tool_timeout_secs: 60,
                budget_wall_time_secs: None,
                budget_tool_output_bytes: None,
                budget_output_tokens: None,
            },
            history: HistoryConfig { path: None },
            tools: ToolsConfig { state_file: None, file: None },
            telegram: TelegramConfig {
                token: None,
                api_url: "https://api.telegram.org".into(),
                allowed_user_ids: Vec::new(),
                startup_notice: true,
                notify_chat_id: None,
                confirm_timeout_secs: 300,
                edit_interval_ms: 1500,
            },
            discord: DiscordConfig {
                token: None,
                api_url: "https://discord.com".into(),
                gateway_url: "wss://gateway.discord.gg".into(),
                allowed_user_ids: Vec::new(),
                allowed_guild_ids: Vec::new(),
                startup_notice: true,
                notify_channel_id: None,
                confirm_timeout_secs: 300,
                edit_interval_ms: 1200,
            },
        }
    }
}

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
#[derive(Debug)]
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

    fn validate(&self) -> Result<(), ConfigError> {
        if !PROVIDERS.contains(&self.llm.provider.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "`llm.provider` is `{}`; accepted values: {}",
                self.llm.provider,
                PROVIDERS.join(", ")
            )));
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
        if self.llm.model.trim().is_empty() {
            return Err(ConfigError::Invalid(
                "`llm.model` is empty; name a model, e.g. qwen3:8b".into(),
            ));
        }
        Ok(())
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
    /// Every effective value with where it came from, secrets hidden, for
    /// `config check`.
    pub fn explain(&self) -> Vec<(String, String, String)> {
        let mut rows = Vec::new();
        let value = serde_json::to_value(&self.config).unwrap_or_default();
        flatten("", &value, &mut rows);
        rows.into_iter()
            .map(|(key, shown)| {
                let shown = if key.ends_with("api_key") || key.ends_with("token") {
                    "[set]".to_owned()
                } else {
                    shown
                };
                let source = self
                    .figment
                    .find_metadata(&key)
                    .map(|m| match &m.source {
                        Some(source) => format!("{} ({source})", m.name),
                        None => m.name.to_string(),
                    })
                    .unwrap_or_else(|| "default".into());
                (key, shown, source)
            })
            .collect()
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
}

impl LoadedConfig {
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

#[cfg(feature = "openai")]
impl LoadedConfig {
    /// The provider the `[llm]` section describes: `openai` (any
    /// OpenAI-compatible server), `ollama` (Ollama's native API; a base URL
    /// ending in `/v1` is taken as the server's root), `responses` (OpenAI's
    /// Responses API, at the same base URL as `openai`), `anthropic`
    /// (Anthropic's Messages API) or `gemini` (Google's Gemini API); for
    /// these two, the default base URL (a local Ollama) is taken as the
    /// vendor's own. The API key comes from `llm.api_key`, else from the
    /// variable `llm.api_key_env` names.
    pub fn provider(&self) -> std::sync::Arc<dyn crate::provider::Provider> {
        let llm = &self.config.llm;
        // Anthropic and Gemini take the default base URL (a local Ollama)
        // as their vendor's own.
        #[cfg(any(feature = "anthropic", feature = "gemini"))]
        let vendors = llm.base_url == Config::default().llm.base_url;
        #[cfg(feature = "ollama")]
        if llm.provider == "ollama" {
            let root = llm.base_url.trim_end_matches('/').trim_end_matches("/v1");
            return self.configured(crate::provider::Ollama::new(root));
        }
        #[cfg(feature = "anthropic")]
        if llm.provider == "anthropic" {
            return self.configured(if vendors {
                crate::provider::Anthropic::new()
            } else {
                crate::provider::Anthropic::with_base_url(&llm.base_url)
            });
        }
        #[cfg(feature = "gemini")]
        if llm.provider == "gemini" {
            return self.configured(if vendors {
                crate::provider::Gemini::new()
            } else {
                crate::provider::Gemini::with_base_url(&llm.base_url)
            });
        }
        #[cfg(feature = "responses")]
        if llm.provider == "responses" {
            return self.configured(crate::provider::OpenAiResponses::new(&llm.base_url));
        }
        self.configured(
            crate::provider::OpenAiCompatible::new(&llm.base_url).streaming(llm.streaming),
        )
    }

    /// `provider` with what `[llm]` says of every dialect: the model, the
    /// time-outs, the temperature and the key.
    fn configured<P: Configure>(
        &self,
        provider: P,
    ) -> std::sync::Arc<dyn crate::provider::Provider> {
        let llm = &self.config.llm;
        let mut provider = provider.model(&llm.model).timeouts(
            std::time::Duration::from_secs(llm.connect_timeout_secs),
            std::time::Duration::from_secs(llm.read_timeout_secs),
        );
        if let Some(temperature) = llm.temperature {
            provider = provider.temperature(temperature);
        }
        if let Some(key) = self.api_key() {
            provider = provider.api_key(key);
        }
        std::sync::Arc::new(provider)
    }

    /// `llm.api_key`, else the value of the variable `llm.api_key_env` names.
    fn api_key(&self) -> Option<String> {
        let llm = &self.config.llm;
        match (&llm.api_key, &llm.api_key_env) {
            (Some(key), _) => Some(key.expose().to_owned()),
            (None, Some(variable)) => std::env::var(variable).ok(),
            (None, None) => None,
        }
    }
}

/// The settings `[llm]` gives every dialect (the bots build their provider
/// only with the default `openai` feature on).
#[cfg(feature = "openai")]
mod configure {
    /// The settings `[llm]` gives every dialect, whatever its builder calls
    /// them.
    pub(super) trait Configure: crate::provider::Provider + Sized + 'static {
        fn model(self, model: &str) -> Self;
        fn timeouts(self, connect: std::time::Duration, read: std::time::Duration) -> Self;
        fn temperature(self, temperature: f32) -> Self;
        fn api_key(self, key: String) -> Self;
    }

    /// `Configure` through the builder's own methods of the same names.
    macro_rules! configure_by_builder {
        ($($(#[$cfg:meta])* $provider:ty),*) => {$(
            $(#[$cfg])*
            impl Configure for $provider {
                fn model(self, model: &str) -> Self {
                    <$provider>::model(self, model)
                }
                fn timeouts(self, connect: std::time::Duration, read: std::time::Duration) -> Self {
                    <$provider>::timeouts(self, connect, read)
                }
                fn temperature(self, temperature: f32) -> Self {
                    <$provider>::temperature(self, temperature)
                }
                fn api_key(self, key: String) -> Self {
                    <$provider>::api_key(self, key)
                }
            }
        )*};
    }

    configure_by_builder!(
        crate::provider::OpenAiCompatible,
        #[cfg(feature = "anthropic")]
        crate::provider::Anthropic,
        #[cfg(feature = "gemini")]
        crate::provider::Gemini,
        #[cfg(feature = "responses")]
        crate::provider::OpenAiResponses
    );

    /// Ollama takes the temperature as a model option, and no key.
    #[cfg(feature = "ollama")]
    impl Configure for crate::provider::Ollama {
        fn model(self, model: &str) -> Self {
            Self::model(self, model)
        }
        fn timeouts(self, connect: std::time::Duration, read: std::time::Duration) -> Self {
            Self::timeouts(self, connect, read)
        }
        fn temperature(self, temperature: f32) -> Self {
            self.option("temperature", serde_json::json!(temperature))
        }
        fn api_key(self, _: String) -> Self {
            self
        }
    }
}
#[cfg(feature = "openai")]
use configure::Configure;
