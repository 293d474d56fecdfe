//! Choosing the server from environment variables, and checking it before
//! the first turn: what a program needs to tell its user what to fix.

use std::env::VarError;

use super::OpenAiCompatible;
use crate::provider::http::redact;
use crate::provider::{Health, Provider};

/// Ollama on this machine: the server [`OpenAiCompatible::from_env`] talks
/// to when none is named.
const DEFAULT_BASE_URL: &str = "http://localhost:11434/v1";

/// The model asked of the default server when none is named.
const DEFAULT_MODEL: &str = "qwen3:8b";

impl OpenAiCompatible {
    /// A client for the server that environment variables starting with
    /// `prefix` describe:
    ///
    /// | variable | meaning | when unset or empty |
    /// |----------|---------|---------------------|
    /// | `{prefix}_BASE_URL` | the server, an `http://` or `https://` URL such as `http://localhost:8080/v1` | Ollama on this machine, `http://localhost:11434/v1` |
    /// | `{prefix}_MODEL` | the model to ask for | `qwen3:8b` with the default server; an error once `{prefix}_BASE_URL` names another |
    /// | `{prefix}_API_KEY` | sent as `Authorization: Bearer …` | no key |
    ///
    /// ferrobot's examples read them with the prefix `FERROBOT`:
    /// `FERROBOT_BASE_URL`, `FERROBOT_MODEL`, `FERROBOT_API_KEY`. With an
    /// empty prefix, the variables are `BASE_URL`, `MODEL` and `API_KEY`.
    /// Only these three are read, so a key goes only to the server named
    /// beside it. The client remembers the prefix, so that the messages of
    /// [`check_health`](Self::check_health) can name the variables to change.
    ///
    /// # Errors
    /// [`EnvError::MissingModel`] when `{prefix}_BASE_URL` is set but
    /// `{prefix}_MODEL` is not, and [`EnvError::Invalid`] when a variable
    /// holds something unusable: a base URL that isn't `http(s)://`, a value
    /// that isn't Unicode. Their messages name the variable to set.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::provider::{OpenAiCompatible, Provider};
    /// // With none of MY_APP_BASE_URL, MY_APP_MODEL, MY_APP_API_KEY set:
    /// let provider = OpenAiCompatible::from_env("MY_APP")?;
    /// assert_eq!(provider.base_url(), "http://localhost:11434/v1");
    /// assert_eq!(provider.model_name(), "qwen3:8b");
    /// # Ok::<(), ferrobot::provider::EnvError>(())
    /// ```
    pub fn from_env(prefix: &str) -> Result<Self, EnvError> {
        Self::from_lookup(prefix, |name| std::env::var(name))
    }

    /// [`from_env`](Self::from_env), with `var` in place of
    /// [`std::env::var`], so that tests need not change the process's
    /// environment (which other tests read at the same time).
    fn from_lookup(
        prefix: &str,
        var: impl Fn(&str) -> Result<String, VarError>,
    ) -> Result<Self, EnvError> {
        let prefix = prefix.trim_end_matches('_');
        let read = |variable: &str| match var(variable) {
            Ok(value) => Ok(Some(value.trim().to_owned()).filter(|v| !v.is_empty())),
            Err(VarError::NotPresent) => Ok(None),
            Err(VarError::NotUnicode(_)) => Err(EnvError::Invalid {
                variable: variable.to_owned(),
                reason: "it is not valid Unicode".to_owned(),
            }),
        };
        let base_var = variable(prefix, "BASE_URL");
        let model_var = variable(prefix, "MODEL");
        let key_var = variable(prefix, "API_KEY");
        let base_url = read(&base_var)?;
        if let Some(url) = &base_url {
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return Err(EnvError::Invalid {
                    variable: base_var,
                    reason: format!(
                        "`{}` is not an http:// or https:// URL; write it like {DEFAULT_BASE_URL}",
                        redact(url)
                    ),
                });
            }
        }
        let model = read(&model_var)?;
        let api_key = read(&key_var)?;
        let (base_url, model) = match (base_url, model) {
            (None, model) => (
                DEFAULT_BASE_URL.to_owned(),
                model.unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            ),
            (Some(url), Some(model)) => (url, model),
            (Some(url), None) => {
                return Err(EnvError::MissingModel {
                    variable: model_var,
                    base_url: redact(&url).into_owned(),
                });
            }
        };
        let mut client = Self::new(base_url).model(model);
        if let Some(key) = api_key {
            client = client.api_key(key);
        }
        let prefix = prefix.to_owned();
        Ok(client.with(|dialect| dialect.env_prefix = Some(prefix)))
    }

    /// Probes the server as [`Provider::health`] does, and turns what is
    /// wrong into an error whose message tells the user what to do: start
    /// the server, pull the model, or set a variable. Call it before the
    /// first turn of a program that starts talking at once.
    ///
    /// ```text
    /// can't reach the model server at http://localhost:11434/v1: … — start Ollama (`ollama serve`), or set FERROBOT_BASE_URL to a running OpenAI-compatible server
    /// ```
    ///
    /// # Errors
    /// A [`HealthError`] for each way the server can be unready: not
    /// reachable, not serving the model, answering with an error (a bad
    /// key), or no model set.
    ///
    /// # Examples
    /// ```no_run
    /// use ferrobot::provider::OpenAiCompatible;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::process::ExitCode {
    /// let provider = match OpenAiCompatible::from_env("FERROBOT") {
    ///     Ok(provider) => provider,
    ///     Err(problem) => {
    ///         eprintln!("{problem}");
    ///         return std::process::ExitCode::from(2);
    ///     }
    /// };
    /// if let Err(problem) = provider.check_health().await {
    ///     eprintln!("{problem}");
    ///     return std::process::ExitCode::from(2);
    /// }
    /// # std::process::ExitCode::SUCCESS }
    /// ```
    pub async fn check_health(&self) -> Result<Health, HealthError> {
        let health = Provider::health(self).await;
        let base_url = redact(self.base_url()).into_owned();
        let env_prefix = self.dialect().env_prefix.clone();
        if !health.reachable {
            return Err(HealthError::Unreachable {
                base_url,
                detail: health.detail.unwrap_or_default(),
                env_prefix,
            });
        }
        if self.model_name().is_empty() {
            return Err(HealthError::NoModel { base_url });
        }
        if health.model_present == Some(false) {
            return Err(HealthError::ModelMissing {
                base_url,
                model: self.model_name().to_owned(),
                env_prefix,
            });
        }
        if let Some(detail) = health.detail {
            return Err(HealthError::Problem {
                base_url,
                detail,
                env_prefix,
            });
        }
        Ok(health)
    }
}

/// Why [`OpenAiCompatible::from_env`] could not make a client: a variable to
/// set or correct, named in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// The base URL names a server but no model is set: the default model
    /// goes only with the default server.
    #[error(
        "{variable} is not set: name the model to ask {base_url} for, e.g. {variable}=qwen3:8b"
    )]
    MissingModel {
        /// The variable to set, e.g. `FERROBOT_MODEL`.
        variable: String,
        /// The server the base URL names, without credentials.
        base_url: String,
    },
    /// A variable is set to something that can't be used.
    #[error("{variable} can't be used: {reason}")]
    Invalid {
        /// The variable to correct, e.g. `FERROBOT_BASE_URL`.
        variable: String,
        /// What is wrong with it; never an API key's value.
        reason: String,
    },
}

/// Why a model server is not ready for a first turn, from
/// [`OpenAiCompatible::check_health`]. Each message says what to do; for a
/// client from [`OpenAiCompatible::from_env`], it names the variable to set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    /// Nothing answered at the base URL, or not within five seconds.
    #[error(
        "can't reach the model server at {base_url}: {detail} — {}",
        unreachable_advice(.base_url, .env_prefix.as_deref())
    )]
    Unreachable {
        /// The server tried, without credentials.
        base_url: String,
        /// What went wrong, e.g. "connection refused".
        detail: String,
        /// The prefix of the variables the client was read from, if any.
        env_prefix: Option<String>,
    },
    /// The server answered, and its list of models lacks the one set.
    #[error(
        "the model server at {base_url} does not serve the model `{model}` — {}",
        missing_model_advice(.base_url, .model, .env_prefix.as_deref())
    )]
    ModelMissing {
        /// The server asked, without credentials.
        base_url: String,
        /// The model the client is set to ask for.
        model: String,
        /// The prefix of the variables the client was read from, if any.
        env_prefix: Option<String>,
    },
    /// The client has no model: it was built without `.model(…)`.
    #[error("no model set for {base_url}: call `.model(\"…\")`, e.g. `.model(\"qwen3:8b\")`")]
    NoModel {
        /// The server, without credentials.
        base_url: String,
    },
    /// The server answered, but with an error: a missing or wrong API key,
    /// a proxy's page, a server without `/models`.
    #[error(
        "the model server at {base_url} answered, but: {detail}{}",
        problem_advice(.env_prefix.as_deref())
    )]
    Problem {
        /// The server asked, without credentials.
        base_url: String,
        /// What it answered, e.g. "…/models: server answered 401: Invalid API key".
        detail: String,
        /// The prefix of the variables the client was read from, if any.
        env_prefix: Option<String>,
    },
}

/// The name of variable `suffix` under `prefix`, as `from_env` reads it.
fn variable(prefix: &str, suffix: &str) -> String {
    if prefix.is_empty() {
        suffix.to_owned()
    } else {
        format!("{prefix}_{suffix}")
    }
}

/// Whether the URL is Ollama's usual address, so its commands can be named.
fn is_ollama(base_url: &str) -> bool {
    base_url.contains(":11434")
}

fn unreachable_advice(base_url: &str, env_prefix: Option<&str>) -> String {
    let start = if is_ollama(base_url) {
        "start Ollama (`ollama serve`)"
    } else {
        "start it"
    };
    match env_prefix {
        Some(prefix) => format!(
            "{start}, or set {} to a running OpenAI-compatible server",
            variable(prefix, "BASE_URL")
        ),
        None => format!("{start}, or point the client at a running OpenAI-compatible server"),
    }
}

fn missing_model_advice(base_url: &str, model: &str, env_prefix: Option<&str>) -> String {
    let choose = match env_prefix {
        Some(prefix) => format!("set {} to a model it serves", variable(prefix, "MODEL")),
        None => "choose a model it serves".to_owned(),
    };
    if is_ollama(base_url) {
        format!("pull it with `ollama pull {model}`, or {choose}")
    } else {
        choose
    }
}

fn problem_advice(env_prefix: Option<&str>) -> String {
    env_prefix.map_or_else(String::new, |prefix| {
        format!(
            " — check {}, and {} if the server needs a key",
            variable(prefix, "BASE_URL"),
            variable(prefix, "API_KEY")
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::ffi::OsString;

    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    /// `from_env` over these variables instead of the process's.
    fn from_vars(prefix: &str, vars: &[(&str, &str)]) -> Result<OpenAiCompatible, EnvError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OpenAiCompatible::from_lookup(prefix, |name| {
            vars.get(name).cloned().ok_or(VarError::NotPresent)
        })
    }

    #[test]
    fn with_nothing_set_it_is_ollama_on_this_machine() {
        let client = from_vars("FERROBOT", &[]).unwrap();
        assert_eq!(client.base_url(), "http://localhost:11434/v1");
        assert_eq!(client.model_name(), "qwen3:8b");
        assert_eq!(client.endpoint().api_key(), None);
        assert_eq!(client.dialect().env_prefix.as_deref(), Some("FERROBOT"));
    }

    #[test]
    fn the_three_variables_are_read_under_the_prefix() {
        let client = from_vars(
            "APP",
            &[
                ("APP_BASE_URL", "https://api.example.com/v1/"),
                ("APP_MODEL", " gpt-4o-mini\n"),
                ("APP_API_KEY", "sk-test\n"),
                ("FERROBOT_MODEL", "not this one"),
            ],
        )
        .unwrap();
        assert_eq!(client.base_url(), "https://api.example.com/v1");
        assert_eq!(client.model_name(), "gpt-4o-mini");
        assert_eq!(client.endpoint().api_key(), Some("sk-test"));
        // A trailing underscore, or none at all, names the same variables.
        let same = from_vars("APP_", &[("APP_MODEL", "m")]).unwrap();
        assert_eq!(same.model_name(), "m");
        let bare = from_vars("", &[("MODEL", "m"), ("BASE_URL", "http://h/v1")]).unwrap();
        assert_eq!((bare.base_url(), bare.model_name()), ("http://h/v1", "m"));
    }

    #[test]
    fn the_model_alone_changes_the_model_of_the_default_server() {
        let client = from_vars("FERROBOT", &[("FERROBOT_MODEL", "llama3.2")]).unwrap();
        assert_eq!(client.base_url(), "http://localhost:11434/v1");
        assert_eq!(client.model_name(), "llama3.2");
        // Empty counts as unset.
        let client = from_vars("FERROBOT", &[("FERROBOT_MODEL", "")]).unwrap();
        assert_eq!(client.model_name(), "qwen3:8b");
    }

    #[test]
    fn another_server_needs_its_model_named() {
        let error = from_vars(
            "FERROBOT",
            &[("FERROBOT_BASE_URL", "https://u:pw@api.example.com/v1")],
        )
        .unwrap_err();
        assert_eq!(
            error,
            EnvError::MissingModel {
                variable: "FERROBOT_MODEL".into(),
                base_url: "https://api.example.com/v1".into(),
            }
        );
        assert_eq!(
            error.to_string(),
            "FERROBOT_MODEL is not set: name the model to ask https://api.example.com/v1 for, \
             e.g. FERROBOT_MODEL=qwen3:8b"
        );
    }

    #[test]
    fn unusable_values_name_their_variable() {
        let error = from_vars("FERROBOT", &[("FERROBOT_BASE_URL", "localhost:11434")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "FERROBOT_BASE_URL can't be used: `localhost:11434` is not an http:// or https:// URL; \
             write it like http://localhost:11434/v1"
        );
        let error = OpenAiCompatible::from_lookup("FERROBOT", |name| {
            if name == "FERROBOT_API_KEY" {
                Err(VarError::NotUnicode(OsString::from("x")))
            } else {
                Err(VarError::NotPresent)
            }
        })
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "FERROBOT_API_KEY can't be used: it is not valid Unicode"
        );
    }

    #[test]
    fn from_env_reads_the_process_environment() {
        // No test sets variables with this prefix, so the defaults apply.
        let client = OpenAiCompatible::from_env("FERROBOT_UNIT_TEST_UNSET").unwrap();
        assert_eq!(client.base_url(), DEFAULT_BASE_URL);
        assert_eq!(client.model_name(), DEFAULT_MODEL);
    }

    #[test]
    fn advice_names_ollamas_commands_only_for_its_address() {
        let down = HealthError::Unreachable {
            base_url: "http://localhost:11434/v1".into(),
            detail: "connection refused".into(),
            env_prefix: Some("FERROBOT".into()),
        };
        assert_eq!(
            down.to_string(),
            "can't reach the model server at http://localhost:11434/v1: connection refused — \
             start Ollama (`ollama serve`), or set FERROBOT_BASE_URL to a running \
             OpenAI-compatible server"
        );
        let missing = HealthError::ModelMissing {
            base_url: "http://localhost:11434/v1".into(),
            model: "qwen3:8b".into(),
            env_prefix: None,
        };
        assert_eq!(
            missing.to_string(),
            "the model server at http://localhost:11434/v1 does not serve the model `qwen3:8b` — \
             pull it with `ollama pull qwen3:8b`, or choose a model it serves"
        );
    }

    /// A server whose `/models` lists `served`.
    async fn serving(served: &str) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(serde_json::json!({"object": "list", "data": [{"id": served}]})),
            )
            .mount(&server)
            .await;
        server
    }

    #[tokio::test]
    async fn a_ready_server_passes_the_check() {
        let server = serving("tiny").await;
        let url = format!("{}/v1", server.uri());
        let client = from_vars(
            "FERROBOT",
            &[("FERROBOT_BASE_URL", &url), ("FERROBOT_MODEL", "tiny")],
        )
        .unwrap();
        let health = client.check_health().await.unwrap();
        assert!(health.is_ok());
    }

    #[tokio::test]
    async fn a_missing_model_names_the_variable_to_change() {
        let server = serving("tiny").await;
        let url = format!("{}/v1", server.uri());
        let client = from_vars(
            "FERROBOT",
            &[("FERROBOT_BASE_URL", &url), ("FERROBOT_MODEL", "huge")],
        )
        .unwrap();
        let error = client.check_health().await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "the model server at {url} does not serve the model `huge` — set FERROBOT_MODEL \
                 to a model it serves"
            )
        );
    }

    #[tokio::test]
    async fn a_refused_key_names_the_key_variable() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(401)
                    .set_body_string(r#"{"error":{"message":"Invalid API key"}}"#),
            )
            .mount(&server)
            .await;
        let url = format!("{}/v1", server.uri());
        let client = from_vars(
            "FERROBOT",
            &[
                ("FERROBOT_BASE_URL", &url),
                ("FERROBOT_MODEL", "m"),
                ("FERROBOT_API_KEY", "sk-wrong"),
            ],
        )
        .unwrap();
        let error = client.check_health().await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("the model server at {url} answered, but: ")),
            "{message}"
        );
        assert!(
            message.ends_with(
                "server answered 401: Invalid API key — check FERROBOT_BASE_URL, and \
                 FERROBOT_API_KEY if the server needs a key"
            ),
            "{message}"
        );
        assert!(!message.contains("sk-wrong"), "{message}");
    }

    #[tokio::test]
    async fn nothing_listening_names_the_base_url_variable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/v1");
        let client = from_vars(
            "FERROBOT",
            &[("FERROBOT_BASE_URL", &url), ("FERROBOT_MODEL", "m")],
        )
        .unwrap();
        let error = client.check_health().await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("can't reach the model server at {url}: ")),
            "{message}"
        );
        assert!(
            message.ends_with(
                "— start it, or set FERROBOT_BASE_URL to a running OpenAI-compatible server"
            ),
            "{message}"
        );
        assert!(matches!(error, HealthError::Unreachable { .. }));
    }
}
