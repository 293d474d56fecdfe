//! `[mcp.servers.NAME]`: the MCP servers whose tools the bots offer.

use std::collections::BTreeMap;

use ferrobot::mcp::Trust;
use figment::value::magic::RelativePathBuf;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};

/// `[mcp]`: MCP servers whose tools join the bots' own, as
/// `NAME__TOOL`. See `docs/mcp.md`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct McpConfig {
    /// `[mcp.servers.NAME]`, by name (a letter, then letters, digits, `_`
    /// or `-`). By default, none.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `[mcp.servers.NAME]`: one server, started as `command` (stdio) or
/// reached at `url` (streamable HTTP).
///
/// ```toml
/// [mcp.servers.files]
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
/// trust = "all"
///
/// [mcp.servers.search]
/// url = "https://mcp.example.com/mcp"
/// bearer_token_env = "SEARCH_TOKEN"
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct McpServerConfig {
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables of its environment, beside `PATH` and `HOME` (it gets no
    /// others). Never printed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Secret>,
    /// Variables of the bot's own environment passed on to it by name
    /// (`["GITHUB_TOKEN"]`), so secrets needn't be in the file. One that
    /// isn't set is left out, with a warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_pass: Vec<String>,
    /// Its working directory, relative to the config file's. By default,
    /// the bot's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<RelativePathBuf>,
    /// The URL of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request to it. Never printed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// The environment variable holding a bearer token for it
    /// (`Authorization: Bearer …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// How far its tool annotations are trusted: `ask` (every call asks),
    /// `read_only_hints` (tools it marks read-only run, the others ask
    /// unless marked not destructive) or `all` (its tools run as the bot's
    /// own do, unless marked destructive). By default, `read_only_hints`.
    #[serde(default)]
    pub trust: Trust,
    /// Seconds one call may take (1 to 86,400). By default, 60.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Whether to start it. By default, yes.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn default_timeout_secs() -> u64 {
    60
}

fn enabled() -> bool {
    true
}

impl McpConfig {
    /// Checks each server's settings, naming the key that is wrong.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (name, server) in &self.servers {
            let key = format!("mcp.servers.{name}");
            let invalid = |what: String| Err(ConfigError::Invalid(format!("`{key}`{what}")));
            if let Err(error) = ferrobot::mcp::check_name(name) {
                return invalid(format!(": {error}"));
            }
            match (&server.command, &server.url) {
                (Some(_), Some(_)) => {
                    return invalid(
                        " has both `command` and `url`; give `command` for a stdio server or `url` for an HTTP one"
                            .into(),
                    );
                }
                (None, None) => {
                    return invalid(
                        " needs `command` (a stdio server, e.g. \"npx\") or `url` (a streamable HTTP server)"
                            .into(),
                    );
                }
                (None, Some(url))
                    if !(url.starts_with("http://") || url.starts_with("https://")) =>
                {
                    return Err(ConfigError::Invalid(format!(
                        "`{key}.url` is `{url}`; it must be an http:// or https:// URL, e.g. http://localhost:3001/mcp"
                    )));
                }
                _ => {}
            }
            let stdio_only = !server.args.is_empty()
                || !server.env.is_empty()
                || !server.env_pass.is_empty()
                || server.cwd.is_some();
            if server.url.is_some() && stdio_only {
                return invalid(
                    ": `args`, `env`, `env_pass` and `cwd` are for stdio servers (`command`); an HTTP server takes `headers` and `bearer_token_env`"
                        .into(),
                );
            }
            if server.command.is_some()
                && (!server.headers.is_empty() || server.bearer_token_env.is_some())
            {
                return invalid(
                    ": `headers` and `bearer_token_env` are for HTTP servers (`url`); a stdio server takes `env` and `env_pass`"
                        .into(),
                );
            }
            if !(1..=86_400).contains(&server.timeout_secs) {
                return Err(ConfigError::Invalid(format!(
                    "`{key}.timeout_secs` is {}; give a number of seconds from 1 to 86400, e.g. 60",
                    server.timeout_secs
                )));
            }
        }
        Ok(())
    }
}
