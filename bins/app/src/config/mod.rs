//! The configuration the CLI and the bots read: its schema here, loading
//! and checking in `load`, the provider `[llm]` describes in `dialect`.

mod dialect;
mod load;
mod mcp;
mod secret;

use std::collections::BTreeMap;
use std::fmt;

use ferrobot::policy::Rule;
use figment::value::magic::RelativePathBuf;
use serde::{Deserialize, Serialize};

pub use dialect::Dialect;
pub use load::{ConfigError, ConfigSource, LoadedConfig, user_config_file, user_data_dir};
pub use mcp::{McpConfig, McpServerConfig};
pub use secret::{DatabaseUrl, Secret};

/// A bot's settings, layered: built-in defaults, then a config file (`-c
/// FILE`, else `./ferrobot.toml`, else the per-user config dir), then
/// `FERROBOT_…` environment variables (`__` nests: `FERROBOT_LLM__MODEL`),
/// then command-line flags. Unknown keys and bad values are errors naming
/// the key and where it came from.
///
/// # Examples
/// ```
/// use ferrobot_app::{Config, ConfigSource};
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
    /// Which tool calls run, are asked about first, or never run.
    pub permissions: PermissionsConfig,
    /// Scheduled prompts: their time zone and retries.
    #[serde(default)]
    pub schedule: ScheduleConfig,
    /// Specialists the bot hands long jobs to, in the background.
    pub delegate: DelegateConfig,
    /// MCP servers whose tools join the bots' own.
    #[serde(default)]
    pub mcp: McpConfig,
    /// How much of a long conversation each turn sends to the model.
    #[serde(default)]
    pub context: ContextConfig,
    /// The log file and the turn traces.
    #[serde(default)]
    pub logging: LoggingConfig,
    /// The control panel each bot serves on loopback.
    #[serde(default)]
    pub panel: PanelConfig,
}

/// `[panel]`: the control panel each bot process serves on 127.0.0.1 (see
/// `ferrobot_app::panel`): its status, its tools switched on and off live,
/// its config viewed and edited. Every call needs the process's token,
/// kept in its runtime file (`ferrobot status` shows the address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PanelConfig {
    /// Whether the bots serve it. By default, yes.
    pub enabled: bool,
    /// The loopback port; 0 for any free one. A port another process holds
    /// is logged and the panel skipped. By default, 8750.
    pub port: u16,
}

impl Default for PanelConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            port: 8750,
        }
    }
}

/// `[logging]`: the log file every binary writes besides the terminal, and
/// `traces.jsonl`, one line per turn (see `ferrobot_app::logging`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LoggingConfig {
    /// The folder of `logs/` and `traces.jsonl`, relative to the config
    /// file's directory. By default, the history file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<RelativePathBuf>,
    /// What the log file keeps: `error`, `warn`, `info`, `debug`, `trace`,
    /// or a filter such as `info,ferrobot=debug`. By default, `info`. (The
    /// terminal follows `FERROBOT_LOG`.)
    pub level: String,
    /// How often a new log file starts: `daily`, `hourly` or `never`. By
    /// default, daily.
    pub rotation: Rotation,
    /// How many log files are kept; older ones are deleted. By default, 14.
    pub keep_files: usize,
    /// Whether each turn is written to `traces.jsonl` (the prompt, each
    /// model call, each tool call with its arguments — secrets redacted —,
    /// the answer or error). By default, yes.
    pub traces: bool,
    /// An OpenTelemetry collector to export spans to over OTLP/HTTP (the
    /// turn, each model call and each tool call, with the GenAI semantic
    /// conventions' attributes), e.g. `http://localhost:4318`; spans go to
    /// its `/v1/traces`. Needs a build with the `otel` feature. By default,
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            folder: None,
            level: "info".into(),
            rotation: Rotation::Daily,
            keep_files: 14,
            traces: true,
            otlp_endpoint: None,
        }
    }
}

/// How often a new log file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rotation {
    /// Every hour.
    Hourly,
    /// Every day.
    Daily,
    /// Never: one file.
    Never,
}

/// `[context]`: how much of a long conversation each turn sends, so that a
/// chat that goes on for weeks never outgrows the model's context window
/// (the history keeps everything; see `ferrobot_app::context`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ContextConfig {
    /// The model's context window, in tokens. By default, what the model
    /// server says (vLLM, llama.cpp, Ollama, LM Studio, `OpenRouter`,
    /// Gemini), else 8,192.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Send at most this many messages of a conversation. By default, 200.
    pub max_messages: usize,
    /// Summarise the older part of a conversation when it nears the window
    /// (one extra model call; the summary is stored, the messages kept).
    /// Off, the oldest messages are left out instead. By default, on.
    pub compaction: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            window: None,
            max_messages: 200,
            compaction: true,
        }
    }
}

/// `[schedule]`: scheduled prompts (the `schedule_prompt` tool, or
/// `/schedule_prompt every=1d prompt="…"`), run by the Telegram and Discord
/// bots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ScheduleConfig {
    /// The IANA time zone cron expressions and times are read in, e.g.
    /// `Europe/Paris`. By default, the system's (UTC when it has no name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Minutes before each retry of a run the model missed (out of reach);
    /// after the last, a note goes to the chat. By default, `[1, 5, 15]`.
    pub retry_minutes: Vec<u64>,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            time_zone: None,
            retry_minutes: vec![1, 5, 15],
        }
    }
}

/// `[delegate]`: specialist agents the bot hands long jobs to with its
/// `delegate` tool ([`Delegate`](ferrobot::agent::Delegate)); each answers
/// later in the chat, as a message of its own. Without
/// `[delegate.agents.NAME]` sections (the default), the bot has no such
/// tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DelegateConfig {
    /// Tasks that run at once. By default, 2.
    pub max_running: usize,
    /// Tasks that may wait for a running one; one more is refused. By
    /// default, 8.
    pub max_waiting: usize,
    /// Minutes one task may run before it is stopped. By default, 30.
    pub timeout_mins: u64,
    /// `[delegate.agents.NAME]`: the specialists, by the name the model
    /// writes. By default, none.
    pub agents: BTreeMap<String, SpecialistConfig>,
}

/// `[delegate.agents.NAME]`: one specialist. It talks to the `[llm]`
/// server, under the bot's `[[permissions.rules]]` (and its own tools'
/// defaults), with a fresh conversation per task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SpecialistConfig {
    /// What it is good at, for the model choosing one. Required.
    pub description: String,
    /// Its system prompt. By default, none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Its model on the `[llm]` server. By default, `llm.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The bot's tools it may use, by name (`ferrobot tools` lists them);
    /// an unknown name is an error. By default, none.
    #[serde(default)]
    pub tools: Vec<String>,
}

/// `[permissions]`: which tool calls run, are asked about first, or never
/// run (see `ferrobot::policy`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PermissionsConfig {
    /// `[[permissions.rules]]`, numbered from 1 in file order; for a call,
    /// the last rule that matches decides, and a deny is final. By default,
    /// none: each tool's defaults decide (`ferrobot permissions` lists them).
    pub rules: Vec<Rule>,
}

/// `[llm]`: the model endpoint.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LlmConfig {
    /// The dialect. By default, `openai` (any OpenAI-compatible server).
    pub provider: Dialect,
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
    /// What a message does when it arrives while a turn of its chat runs:
    /// `queue` (wait for it), `steer` (be read by it after its current
    /// step) or `interrupt` (stop it, then run). By default, `queue`.
    #[serde(default)]
    pub while_busy: WhileBusyMode,
    /// Instruction files (`AGENTS.md`-style), relative to the config
    /// file's directory, read at start and sent after the system prompt in
    /// this order. A file that can't be read is logged and left out. By
    /// default, none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instruction_files: Vec<RelativePathBuf>,
    /// Whether the end of the system prompt tells the model the date, the
    /// machine it runs on and who is asking (the user's name on the
    /// platform), at the day's grain so that it changes once a day. By
    /// default, yes.
    pub prompt_facts: bool,
}

/// `agent.while_busy`, as the config names the agent's
/// [`WhileBusy`](ferrobot::agent::WhileBusy) modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WhileBusyMode {
    /// `queue`: the message waits for the running turn to end.
    #[default]
    Queue,
    /// `steer`: the running turn reads it after its current step.
    Steer,
    /// `interrupt`: it stops the running turn, then runs.
    Interrupt,
}

impl From<WhileBusyMode> for ferrobot::agent::WhileBusy {
    fn from(mode: WhileBusyMode) -> Self {
        match mode {
            WhileBusyMode::Queue => Self::Queue,
            WhileBusyMode::Steer => Self::Steer,
            WhileBusyMode::Interrupt => Self::Interrupt,
        }
    }
}

/// `[history]`: where conversations are kept: a SQLite file (one bot
/// process), or a PostgreSQL database several replicas share.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// The SQLite file, relative to the config file's directory. By default,
    /// `history.db` in the per-user data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<RelativePathBuf>,
    /// A PostgreSQL database instead of the file (builds with the
    /// `postgres` feature), e.g.
    /// `postgres://bot:PASSWORD@db.example.com/ferrobot?sslmode=verify-full`;
    /// prefer the environment for it (`FERROBOT_HISTORY__URL`). Its password
    /// is never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<DatabaseUrl>,
    /// Connections each process keeps open to the database at most. By
    /// default, 8; every replica's count must fit the server's
    /// `max_connections`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<usize>,
}

/// The error for `[history] url` in a build without PostgreSQL.
pub(crate) fn no_postgres() -> ConfigError {
    ConfigError::Invalid(
        "`history.url` names a PostgreSQL database, and this build has no PostgreSQL; \
         build with the `postgres` feature, or keep the history in a file (`history.path`)"
            .into(),
    )
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
    /// Offers the power tools: `shutdown` and `reboot` (asked first, the
    /// user told just before) and `cancel_shutdown` (also
    /// `/cancel_shutdown`). By default, `false`.
    #[serde(default)]
    pub power: bool,
    /// The command the power tools run, a program and its first
    /// arguments, e.g. `["sudo", "-n", "shutdown"]`. By default,
    /// `["shutdown"]`.
    #[serde(default = "default_power_command")]
    pub power_command: Vec<String>,
}

fn default_power_command() -> Vec<String> {
    vec!["shutdown".to_owned()]
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
    /// The public HTTPS URL Telegram posts updates to, e.g.
    /// `https://bot.example.com/telegram`: set, the bot takes updates by
    /// webhook instead of polling, and any number of replicas sharing a
    /// `[history] url` may serve it behind a load balancer. Unset (the
    /// default): long polling, one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Where the webhook endpoint listens (the load balancer or reverse
    /// proxy forwards `webhook_url` to it, same path). By default,
    /// `127.0.0.1:8080`.
    pub webhook_listen: String,
    /// The secret Telegram sends with each webhook request
    /// (`X-Telegram-Bot-Api-Secret-Token`); requests without it are
    /// refused. Required with `webhook_url`, the same on every replica:
    /// 1 to 256 letters, digits, `_` or `-`. Prefer the environment
    /// (`FERROBOT_TELEGRAM__WEBHOOK_SECRET`). Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<Secret>,
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

impl TelegramConfig {
    /// With `webhook_url`: an HTTPS URL (Telegram posts to no other), a
    /// secret Telegram accepts, and
    /// an address to listen on.
    fn validate_webhook(&self) -> Result<(), ConfigError> {
        let Some(url) = &self.webhook_url else {
            return Ok(());
        };
        if !url.starts_with("https://") {
            return Err(ConfigError::Invalid(format!(
                "`telegram.webhook_url` is `{url}`; give the public HTTPS URL Telegram posts updates to, e.g. https://bot.example.com/telegram"
            )));
        }
        let good = |secret: &str| {
            (1..=256).contains(&secret.len())
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        match &self.webhook_secret {
            None => {
                return Err(ConfigError::Invalid(
                    "`telegram.webhook_url` is set but `telegram.webhook_secret` is not: give every replica the same secret of 1 to 256 letters, digits, `_` or `-` (FERROBOT_TELEGRAM__WEBHOOK_SECRET), e.g. from `openssl rand -hex 32`".into(),
                ));
            }
            Some(secret) if !good(secret.expose()) => {
                return Err(ConfigError::Invalid(
                    "`telegram.webhook_secret` must be 1 to 256 letters, digits, `_` or `-` (Telegram refuses others), e.g. from `openssl rand -hex 32`".into(),
                ));
            }
            Some(_) => {}
        }
        if self.webhook_listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(ConfigError::Invalid(format!(
                "`telegram.webhook_listen` is `{}`; give an address and port to listen on, e.g. 127.0.0.1:8080 (or 0.0.0.0:8080 for a load balancer on another host)",
                self.webhook_listen
            )));
        }
        Ok(())
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

impl Default for Config {
    fn default() -> Self {
        Self {
            llm: LlmConfig {
                provider: Dialect::OpenAi,
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
                while_busy: WhileBusyMode::Queue,
                instruction_files: Vec::new(),
                prompt_facts: true,
            },
            history: HistoryConfig {
                path: None,
                url: None,
                pool_size: None,
            },
            tools: ToolsConfig {
                state_file: None,
                file: None,
                power: false,
                power_command: default_power_command(),
            },
            telegram: TelegramConfig {
                token: None,
                api_url: "https://api.telegram.org".into(),
                allowed_user_ids: Vec::new(),
                startup_notice: true,
                notify_chat_id: None,
                confirm_timeout_secs: 300,
                edit_interval_ms: 1500,
                webhook_url: None,
                webhook_listen: "127.0.0.1:8080".into(),
                webhook_secret: None,
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
            permissions: PermissionsConfig::default(),
            schedule: ScheduleConfig::default(),
            delegate: DelegateConfig {
                max_running: 2,
                max_waiting: 8,
                timeout_mins: 30,
                agents: BTreeMap::new(),
            },
            mcp: McpConfig::default(),
            context: ContextConfig::default(),
            logging: LoggingConfig::default(),
            panel: PanelConfig::default(),
        }
    }
}
