//! Helpers for the bots' and the CLI's end-to-end tests (feature `bots`):
//! a fake OpenAI-compatible model, the agent a bot is tested with, a scratch
//! home to run a binary in, corpus recordings, and a wait for what a test
//! expects to happen.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::bot::{Channel, ChannelConfirm, ChannelNotifier};
use ferrobot::provider::{OpenAiCompatible, Provider};
use ferrobot::testing::OpenAiStream;
use ferrobot::tool::{FnTool, Tool, from_fn};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// The chat requests `server` received, in order: the POSTs, without the
/// `GET`s a binary makes at start to learn the model's context window.
pub async fn chat_requests(server: &MockServer) -> Vec<Request> {
    let mut requests = server.received_requests().await.unwrap_or_default();
    requests.retain(|request| request.method.as_str() == "POST");
    requests
}

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

/// The recordings of a corpus category, by name: each directory's name,
/// the platform's payload (`response.json`) and what it means
/// (`expected.json`). `None` after a loud skip when the corpus isn't beside
/// the checkout, and a failure under CI ([`outside`](crate::outside)).
pub fn recordings(category: &str) -> Option<Vec<(String, Value, Value)>> {
    let dir = crate::outside::corpus(category)?;
    let mut recordings: Vec<(String, Value, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap().path();
            (
                entry.file_name().unwrap().to_string_lossy().into_owned(),
                read(&entry.join("response.json")),
                read(&entry.join("expected.json")),
            )
        })
        .collect();
    recordings.sort_by(|a, b| a.0.cmp(&b.0));
    Some(recordings)
}

/// A JSON file.
fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A tool `name` that answers `output` and counts its runs: what a test
/// checks ran, or didn't.
pub fn counted(name: &str, output: &'static str) -> (FnTool, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let tool = from_fn(name, format!("{name}."), move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { output }
    });
    (tool, runs)
}

/// Checks `found` every 20 ms until it finds something, up to 30 s (a binary
/// may start cold on a loaded machine); `None` if it never does.
pub async fn eventually<T>(found: impl Fn() -> Option<T>) -> Option<T> {
    for _ in 0..1500 {
        if let Some(thing) = found() {
            return Some(thing);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
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

    /// The home's directory, also the binary's working directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The binary at `program`, configured by `env` alone (no model server
    /// from the test machine's environment), its output captured.
    pub fn command(&self, program: &str, env: &[(&str, String)]) -> tokio::process::Command {
        let mut command = tokio::process::Command::from(self.std_command(program, env));
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// [`command`](Self::command) as a `std::process::Command`, for a test
    /// that runs the binary to the end or in a terminal: its input and
    /// output are as the test sets them (`output()` captures stdout and
    /// stderr).
    pub fn std_command(&self, program: &str, env: &[(&str, String)]) -> std::process::Command {
        let mut command = std::process::Command::new(program);
        command
            .current_dir(&self.0)
            .env("HOME", &self.0)
            .env("XDG_CONFIG_HOME", self.0.join("config"))
            .env("XDG_DATA_HOME", self.0.join("data"))
            .env("FERROBOT_LOG", "info")
            // Any free port for the control panel: tests run side by side,
            // and beside a developer's own bot on the default one.
            .env("FERROBOT_PANEL__PORT", "0")
            .env_remove("FERROBOT_LLM__BASE_URL")
            .env_remove("FERROBOT_LLM__MODEL")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        command
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
