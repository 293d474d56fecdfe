//! The dialects `llm.provider` may name, and the provider `[llm]` describes.

use std::sync::Arc;

use ferrobot::provider::Provider;
use serde::{Deserialize, Serialize};

use super::{ConfigError, LoadedConfig};

/// The wire format of the model server, as `llm.provider` names it. Every
/// dialect is a cargo feature of this crate (all on by default); naming one
/// the build lacks is a [`ConfigError`] that names the feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Dialect {
    /// `openai`: any OpenAI-compatible chat-completions server (Ollama's
    /// `/v1`, vLLM, llama.cpp, OpenAI).
    OpenAi,
    /// `ollama`: Ollama's native API; a base URL ending in `/v1` is taken as
    /// the server's root.
    Ollama,
    /// `anthropic`: Anthropic's Messages API.
    Anthropic,
    /// `gemini`: Google's Gemini API.
    Gemini,
    /// `responses`: OpenAI's Responses API, at the same base URL as `openai`.
    Responses,
}

impl Dialect {
    /// Every dialect, in the order the docs list them.
    pub const ALL: [Dialect; 5] = [
        Dialect::OpenAi,
        Dialect::Ollama,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Responses,
    ];

    /// The name `llm.provider` gives it, which is also its cargo feature.
    ///
    /// # Examples
    /// ```
    /// use ferrobot_app::Dialect;
    /// for dialect in Dialect::ALL {
    ///     let named = serde_json::to_string(&dialect).unwrap();
    ///     assert_eq!(named, format!("\"{}\"", dialect.name()));
    /// }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Ollama => "ollama",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Responses => "responses",
        }
    }

    /// Whether this build can speak it.
    pub fn is_built(self) -> bool {
        match self {
            Dialect::OpenAi => cfg!(feature = "openai"),
            Dialect::Ollama => cfg!(feature = "ollama"),
            Dialect::Anthropic => cfg!(feature = "anthropic"),
            Dialect::Gemini => cfg!(feature = "gemini"),
            Dialect::Responses => cfg!(feature = "responses"),
        }
    }

    /// The error for a dialect this build lacks.
    pub(super) fn not_built(self) -> ConfigError {
        let built: Vec<&str> = Dialect::ALL
            .iter()
            .filter(|d| d.is_built())
            .map(|d| d.name())
            .collect();
        ConfigError::Invalid(format!(
            "`llm.provider` is `{name}`, but this build of ferrobot was compiled without the `{name}` feature; \
             rebuild with `--features {name}` (the default builds have every dialect), or name one this build has: {}",
            if built.is_empty() {
                "none".to_owned()
            } else {
                built.join(", ")
            },
            name = self.name(),
        ))
    }
}

impl LoadedConfig {
    /// The provider the `[llm]` section describes: its dialect at its base
    /// URL, with the model, time-outs, temperature and key. For `anthropic`
    /// and `gemini`, the default base URL (a local Ollama) is taken as the
    /// vendor's own. The API key comes from `llm.api_key`, else from the
    /// variable `llm.api_key_env` names.
    ///
    /// # Errors
    /// When the dialect is not in this build (see [`Dialect::is_built`]).
    pub fn provider(&self) -> Result<Arc<dyn Provider>, ConfigError> {
        self.provider_for(&self.config.llm.model)
    }

    /// The conformance check of the server and model `[llm]` describes
    /// (`ferrobot doctor --conformance`): streamed, and for the
    /// OpenAI-compatible dialect also not streamed, and asked for a model
    /// no server serves, for the error scenario.
    ///
    /// # Errors
    /// When the dialect is not in this build.
    pub fn conformance(&self) -> Result<ferrobot::testing::conformance::Conformance, ConfigError> {
        let with_streaming = |streaming: bool| {
            let mut loaded = self.clone();
            loaded.config.llm.streaming = streaming;
            loaded.provider()
        };
        let mut check = ferrobot::testing::conformance::Conformance::new(with_streaming(true)?)
            .failing(self.provider_for("ferrobot-conformance-no-such-model")?);
        if self.config.llm.provider == Dialect::OpenAi {
            check = check.non_streaming(with_streaming(false)?);
        }
        Ok(check)
    }

    /// The provider `[llm]` describes, asking for `model` instead of its
    /// own (a specialist's `[delegate.agents.NAME] model`).
    pub(crate) fn provider_for(&self, model: &str) -> Result<Arc<dyn Provider>, ConfigError> {
        // Unused in a build without any dialect.
        let _ = model;
        let llm = &self.config.llm;
        // Anthropic and Gemini take the default base URL (a local Ollama)
        // as their vendor's own.
        #[cfg(any(feature = "anthropic", feature = "gemini"))]
        let vendors = llm.base_url == super::Config::default().llm.base_url;
        match llm.provider {
            #[cfg(feature = "openai")]
            Dialect::OpenAi => Ok(self.configured(
                model,
                ferrobot::provider::OpenAiCompatible::new(&llm.base_url).streaming(llm.streaming),
            )),
            #[cfg(feature = "ollama")]
            Dialect::Ollama => {
                let root = llm.base_url.trim_end_matches('/').trim_end_matches("/v1");
                Ok(self.configured(model, ferrobot::provider::Ollama::new(root)))
            }
            #[cfg(feature = "anthropic")]
            Dialect::Anthropic => Ok(self.configured(
                model,
                if vendors {
                    ferrobot::provider::Anthropic::new()
                } else {
                    ferrobot::provider::Anthropic::with_base_url(&llm.base_url)
                },
            )),
            #[cfg(feature = "gemini")]
            Dialect::Gemini => Ok(self.configured(
                model,
                if vendors {
                    ferrobot::provider::Gemini::new()
                } else {
                    ferrobot::provider::Gemini::with_base_url(&llm.base_url)
                },
            )),
            #[cfg(feature = "responses")]
            Dialect::Responses => Ok(self.configured(
                model,
                ferrobot::provider::OpenAiResponses::new(&llm.base_url),
            )),
            // Unreachable in a build with every dialect.
            #[allow(unreachable_patterns)]
            lacking => Err(lacking.not_built()),
        }
    }
}

/// Building a dialect's client from `[llm]`; unused in a build without any
/// dialect.
#[cfg(any(
    feature = "openai",
    feature = "ollama",
    feature = "anthropic",
    feature = "gemini",
    feature = "responses"
))]
mod configure {
    use std::sync::Arc;
    use std::time::Duration;

    use ferrobot::provider::Provider;
    use ferrobot::provider::dialect::{Dialect, Http};

    use crate::LoadedConfig;

    impl LoadedConfig {
        /// `provider` with what `[llm]` says of every dialect: the model, the
        /// time-outs, the temperature and the key.
        pub(super) fn configured<D: Dialect>(
            &self,
            model: &str,
            provider: Http<D>,
        ) -> Arc<dyn Provider> {
            let llm = &self.config.llm;
            let mut provider = provider.model(model).timeouts(
                Duration::from_secs(llm.connect_timeout_secs),
                Duration::from_secs(llm.read_timeout_secs),
            );
            if let Some(temperature) = llm.temperature {
                provider = provider.temperature(temperature);
            }
            if let Some(key) = self.api_key() {
                provider = provider.api_key(key);
            }
            Arc::new(provider)
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
}
