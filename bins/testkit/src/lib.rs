//! What the bot binaries' end-to-end tests share: a fake OpenAI-compatible
//! model, the agent a bot is tested with, a scratch home to run a binary in,
//! and the recorded traffic in `../shared/corpus`.

// Helpers panic on setup failures, as the tests that call them would.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ferrobot::Agent;
use ferrobot::bot::{Channel, ChannelConfirm, ChannelNotifier};
use ferrobot::provider::{OpenAiCompatible, Provider};
use ferrobot::testing::OpenAiStream;
use ferrobot::tool::Tool;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// An OpenAI-compatible endpoint answering each chat request with the next
/// of `answers` (SSE bodies), then "(no more answers)".
pub async fn llm(answers: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    let answers = Mutex::new(VecDeque::from(answers));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(move |_: &Request| {
            let body = answers
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| OpenAiStream::new().text("(no more answers)").into_sse());
            ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
        })
        .mount(&server)
        .await;
    server
}

/// A client for [`llm`]'s endpoint.
pub fn openai(server: &MockServer) -> OpenAiCompatible {
    OpenAiCompatible::new(format!("{}/v1", server.uri())).model("test-model")
}

/// An answer of plain text, as [`llm`] takes it.
pub fn text_answer(text: &str) -> String {
    OpenAiStream::new().text(text).into_sse()
}

/// The agent a bot is tested with: `tools`, confirmations and later
/// messages through `channel`.
pub fn agent(
    provider: impl Provider + 'static,
    channel: &Arc<dyn Channel>,
    tools: Vec<Arc<dyn Tool>>,
) -> Agent {
    Agent::builder()
        .provider(provider)
        .tools(tools)
        .confirm(ChannelConfirm(Arc::clone(channel)))
        .notifier(ChannelNotifier(Arc::clone(channel)))
        .build()
}

/// A recorded-traffic category, or `None` (with a notice) when the corpus
/// isn't beside the checkout.
pub fn corpus(category: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(category);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("NOTICE: {} is absent; skipping the replay", dir.display());
        None
    }
}

/// A JSON file.
pub fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A scratch home to run a binary in: its own config, data and working
/// directories, removed afterwards.
#[derive(Debug)]
pub struct Home(pub PathBuf);

impl Home {
    /// A fresh home named for the test.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ferrobot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The binary at `program`, configured by `env` alone (no model server
    /// from the test machine's environment), its output captured.
    pub fn command(&self, program: &str, env: &[(&str, String)]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        command
            .current_dir(&self.0)
            .env("HOME", &self.0)
            .env("XDG_CONFIG_HOME", self.0.join("config"))
            .env("XDG_DATA_HOME", self.0.join("data"))
            .env("FERROBOT_LOG", "info")
            .env_remove("FERROBOT_LLM__BASE_URL")
            .env_remove("FERROBOT_LLM__MODEL")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
