//! How much of a long conversation each turn sends (`[context]`): the
//! model's context window (configured, else asked of the model server,
//! else [`FALLBACK_WINDOW`]) becomes a [`ContextPolicy`] that summarises
//! the older part before it would be cut, and cuts only what still
//! doesn't fit.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ferrobot::history::{Compaction, ContextPolicy};
use ferrobot::provider::{ContextWindow, Provider};
use serde::{Deserialize, Serialize};

use crate::LoadedConfig;
use crate::config::ContextConfig;

/// The window assumed when neither the config nor the server says: what
/// llama.cpp and Ollama run most models with by default, or more.
pub const FALLBACK_WINDOW: u32 = 8_192;

/// How long the server is given to say its window at start: one down must
/// not hold the bot up.
const ASK_FOR: Duration = Duration::from_secs(5);

impl LoadedConfig {
    /// The context policy `[context]` describes for `provider`'s model:
    /// `context.window`, else what the server said (asked once a day: the
    /// answer is kept in `context_window.json` beside the history, so a
    /// CLI run doesn't ask every time), else [`FALLBACK_WINDOW`] (logged,
    /// naming the key to set).
    pub async fn context_policy(&self, provider: &dyn Provider) -> ContextPolicy {
        let config = &self.config.context;
        let window = match config.window {
            Some(tokens) => ContextWindow::new(tokens),
            None => self.asked_window(provider).await.unwrap_or_else(|| {
                tracing::info!(
                    tokens = FALLBACK_WINDOW,
                    "the model server doesn't say the model's context window; assuming it (set [context] window)"
                );
                ContextWindow::new(FALLBACK_WINDOW)
            }),
        };
        policy(window, config)
    }

    /// What the model server says the model's window is: from the cache
    /// when asked in the last day, else asked (and kept).
    async fn asked_window(&self, provider: &dyn Provider) -> Option<ContextWindow> {
        let llm = &self.config.llm;
        let key = format!("{:?} {} {}", llm.provider, llm.base_url, llm.model);
        let path = self.history_path().with_file_name("context_window.json");
        let mut known: BTreeMap<String, Known> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Some(seen) = known.get(&key)
            && now.saturating_sub(seen.asked_at) < KEEP_FOR.as_secs()
        {
            return seen.window();
        }
        let window = match tokio::time::timeout(ASK_FOR, provider.context_window()).await {
            Ok(Ok(window)) => window,
            Ok(Err(error)) => {
                tracing::warn!(error = %ferrobot::error_chain(&error), "could not ask the model server for the context window");
                return None;
            }
            Err(_) => {
                tracing::warn!("the model server didn't say its context window in 5 s");
                return None;
            }
        };
        if let Some(window) = window {
            tracing::info!(
                tokens = window.tokens,
                "the model server gives the model's context window"
            );
        }
        known.insert(
            key,
            Known {
                tokens: window.map(|w| w.tokens),
                max_output: window.and_then(|w| w.max_output),
                asked_at: now,
            },
        );
        // A cache: not written, the server is asked again next time.
        if let Ok(text) = serde_json::to_vec_pretty(&known) {
            let _ = std::fs::write(&path, text);
        }
        window
    }
}

/// How long a server's answer is kept: a model server restarted with
/// another window is believed the next day (or set `[context] window`).
const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// What a server said about a model's window, and when.
#[derive(Serialize, Deserialize)]
struct Known {
    /// `None`: it said nothing.
    tokens: Option<u32>,
    max_output: Option<u32>,
    asked_at: u64,
}

impl Known {
    fn window(&self) -> Option<ContextWindow> {
        let window = ContextWindow::new(self.tokens?);
        Some(match self.max_output {
            Some(max) => window.with_max_output(max),
            None => window,
        })
    }
}

/// The policy for a model with `window`: room kept for the answer (the
/// server's bound on one answer, at most a quarter of the window);
/// compaction, counting the system prompt and tools too, at 70 % of the
/// rest; and, should that not be enough (or be off), the conversation cut
/// at 85 % of the rest and at `max_messages`, so compaction always comes
/// first.
///
/// # Examples
/// ```
/// use ferrobot::provider::ContextWindow;
/// use ferrobot_app::config::ContextConfig;
/// let policy = ferrobot_app::context::policy(ContextWindow::new(8192), &ContextConfig::default());
/// assert_eq!(policy.max_messages, Some(200));
/// assert_eq!(policy.max_tokens, Some(5222));
/// assert_eq!(policy.compaction.unwrap().context_window, 8192);
/// ```
pub fn policy(window: ContextWindow, config: &ContextConfig) -> ContextPolicy {
    let tokens = window.tokens as usize;
    let answer = window
        .max_output
        .map_or(tokens / 4, |max| max as usize)
        .min(tokens / 4)
        .max(256);
    let rest = tokens.saturating_sub(answer);
    let compaction = config.compaction.then(|| {
        Compaction::builder()
            .context_window(tokens)
            .threshold(0.7 * rest as f32 / tokens as f32)
            .build()
    });
    ContextPolicy::builder()
        .max_messages(config.max_messages)
        .max_tokens(rest * 85 / 100)
        .maybe_compaction(compaction)
        .build()
}
