//! One JSON line per turn: what the model was asked, what it called, what
//! it answered, and how long each step took; for each tool call, the audit
//! trail of its permission: the policy's verdict (permission, layer, rule),
//! the user's decision and who gave it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};

use ferrobot::agent::{TurnRequest, TurnWatch, TurnWatcher};
use ferrobot::confirm::Decision;
use ferrobot::{AgentEvent, Reply, Usage};

/// Collects a turn's events into one trace record.
///
/// # Examples
/// ```
/// use ferrobot_app::TurnTrace;
/// let mut trace = TurnTrace::new("alice", "hi");
/// let record = trace.finish(Err("LLM unavailable"));
/// assert_eq!(record["conversation"], "alice");
/// assert_eq!(record["error"], "LLM unavailable");
/// ```
#[derive(Debug)]
pub struct TurnTrace {
    started: Instant,
    record: Value,
    model_calls: Vec<Value>,
    tool_calls: Vec<Value>,
}

impl TurnTrace {
    /// Starts the trace of a turn of `conversation` asking `prompt`.
    pub fn new(conversation: &str, prompt: &str) -> Self {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self {
            started: Instant::now(),
            record: json!({"at_ms": at, "conversation": conversation, "prompt": prompt}),
            model_calls: Vec::new(),
            tool_calls: Vec::new(),
        }
    }

    /// Notes one event. A sub-agent's model and tool calls are noted too,
    /// with `"agent"` naming the tools that ran it (`research`, or
    /// `research/lookup` for its own sub-agent's).
    pub fn record(&mut self, event: &AgentEvent) {
        self.note(event, None);
    }

    fn note(&mut self, event: &AgentEvent, agent: Option<&str>) {
        let mut entry = match event {
            AgentEvent::SubAgent(sub) => {
                let path = match agent {
                    Some(above) => format!("{above}/{}", sub.tool),
                    None => sub.tool.clone(),
                };
                return self.note(&sub.event, Some(&path));
            }
            AgentEvent::Usage(Usage {
                input_tokens,
                output_tokens,
                ..
            }) => json!({"input_tokens": input_tokens, "output_tokens": output_tokens}),
            AgentEvent::ToolCallFinished(record) => json!({
                "name": record.call.name,
                "arguments": redacted(&record.call.arguments),
                "outcome": format!("{:?}", record.outcome),
                "duration_ms": record.duration.as_millis() as u64,
                "result": record.content,
                "verdict": record.verdict.as_ref().map(|verdict| json!({
                    "permission": verdict.permission,
                    "layer": verdict.layer,
                    "rule": verdict.reason,
                })),
                "decision": record.decision.as_ref().map(decision),
                "approver": record.approver,
            }),
            _ => return,
        };
        if let Some(agent) = agent {
            entry["agent"] = json!(agent);
        }
        if matches!(event, AgentEvent::Usage(_)) {
            self.model_calls.push(entry);
        } else {
            self.tool_calls.push(entry);
        }
    }

    /// The finished record: the reply's text, or the error's message.
    pub fn finish(&mut self, outcome: Result<&str, &str>) -> Value {
        let mut record = self.record.take();
        record["duration_ms"] = json!(self.started.elapsed().as_millis() as u64);
        record["model_calls"] = Value::Array(std::mem::take(&mut self.model_calls));
        record["tool_calls"] = Value::Array(std::mem::take(&mut self.tool_calls));
        match outcome {
            Ok(reply) => record["reply"] = json!(reply),
            Err(error) => record["error"] = json!(error),
        }
        record
    }
}

/// The user's answer for the audit trail: its label, and what it carried
/// (the edited arguments, the reason given, what "always" covers).
fn decision(decision: &Decision) -> Value {
    let mut shown = json!({"label": decision.label()});
    match decision {
        Decision::Edit(arguments) => shown["arguments"] = redacted(arguments),
        Decision::Deny(Some(reason)) => shown["reason"] = json!(reason),
        Decision::Always(scope) => shown["scope"] = json!(scope),
        _ => {}
    }
    shown
}

/// The words in an argument's name that say its value is a secret (`api`
/// followed by `key` too).
const SECRET_WORDS: [&str; 9] = [
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "auth",
    "credential",
    "credentials",
];

/// Whether an argument named `key` holds a secret: one of its words (split
/// at `_`, `-`, `.`, spaces and lower-to-upper case changes) is a
/// [`SECRET_WORDS`], or `api` is followed by `key`. `max_tokens` is no
/// secret; `access_token`, `apiKey` and `X-Auth-Token` are.
fn names_a_secret(key: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut word));
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|pair| pair[0] == "api" && pair[1] == "key")
}

/// `arguments` with the value of every key that names a secret (a
/// password, a token, an API key, …), at any depth, as `[redacted]`.
///
/// # Examples
/// ```
/// let shown = ferrobot_app::trace::redacted(&serde_json::json!(
///     {"host": "db", "max_tokens": 5, "login": {"user": "bot", "Password": "hunter2", "apiKey": "k"}}
/// ));
/// assert_eq!(shown["login"]["Password"], "[redacted]");
/// assert_eq!(shown["login"]["apiKey"], "[redacted]");
/// assert_eq!(shown["host"], "db");
/// assert_eq!(shown["max_tokens"], 5);
/// ```
pub fn redacted(arguments: &Value) -> Value {
    match arguments {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| {
                    let shown = if names_a_secret(key) {
                        json!("[redacted]")
                    } else {
                        redacted(value)
                    };
                    (key.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        other => other.clone(),
    }
}

/// The [`TurnWatcher`] that writes each turn of an agent as a line of a
/// `traces.jsonl` file ([`TurnTrace`], [`append_trace`]): what the bots and
/// the CLI build their agents with, unless `[logging] traces = false`.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, testing::MockProvider};
/// let dir = std::env::temp_dir().join(format!("ferrobot-traces-{}", std::process::id()));
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("Hello."))
///     .watcher(ferrobot_app::Traces::new(dir.join("traces.jsonl")))
///     .build();
/// agent.handle("alice", "hi").await?;
/// let line = std::fs::read_to_string(dir.join("traces.jsonl")).unwrap();
/// assert!(line.contains(r#""reply":"Hello.""#));
/// # std::fs::remove_dir_all(dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Traces {
    path: PathBuf,
}

impl Traces {
    /// Traces written to `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

impl TurnWatcher for Traces {
    fn start(&self, conversation: &str, request: &TurnRequest) -> Box<dyn TurnWatch> {
        Box::new(Traced {
            trace: TurnTrace::new(conversation, &request.text),
            path: self.path.clone(),
        })
    }
}

/// One turn being traced.
struct Traced {
    trace: TurnTrace,
    path: PathBuf,
}

impl TurnWatch for Traced {
    fn event(&mut self, event: &AgentEvent) {
        self.trace.record(event);
    }

    fn end(mut self: Box<Self>, result: Result<&Reply, &ferrobot::Error>) {
        let error = result.err().map(|error| ferrobot::error_chain(error));
        let outcome = match result {
            Ok(reply) => Ok(reply.text.as_str()),
            Err(_) => Err(error.as_deref().unwrap_or_default()),
        };
        let record = self.trace.finish(outcome);
        if let Err(error) = append_trace(&self.path, &record) {
            tracing::warn!(path = %self.path.display(), %error, "could not write the turn's trace");
        }
    }
}

/// Appends one record as a line to a `traces.jsonl` file, creating it and
/// its directory as needed.
///
/// # Errors
/// When the file can't be written.
pub fn append_trace(path: &Path, record: &Value) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // One write per line, so concurrent writers never interleave a line.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(&line)
}

#[cfg(test)]
mod tests {
    use ferrobot::agent::SubAgentEvent;

    use super::*;

    #[test]
    fn a_sub_agents_model_calls_are_noted_with_the_tools_that_ran_it() {
        let usage = AgentEvent::Usage(Usage {
            input_tokens: 3,
            output_tokens: 2,
            ..Usage::default()
        });
        let nested = SubAgentEvent::new("lookup", "call_2", 2, usage.clone());
        let sub = SubAgentEvent::new("research", "call_1", 1, AgentEvent::SubAgent(nested));
        let mut trace = TurnTrace::new("alice", "hi");
        trace.record(&usage);
        trace.record(&AgentEvent::SubAgent(sub));
        let record = trace.finish(Ok("done"));
        assert!(record["model_calls"][0].get("agent").is_none());
        assert_eq!(record["model_calls"][1]["agent"], "research/lookup");
        assert_eq!(record["model_calls"][1]["output_tokens"], 2);
    }

    #[test]
    fn secrets_are_named_by_whole_words_not_by_substrings() {
        for secret in [
            "password",
            "db_password",
            "Password",
            "access_token",
            "apiKey",
            "api_key",
            "X-Auth-Token",
            "client.secret",
            "credentials",
            "Authorization",
        ] {
            assert!(names_a_secret(secret), "{secret}");
        }
        for plain in [
            "max_tokens",
            "author",
            "path",
            "keyboard",
            "api",
            "tokenizer",
        ] {
            assert!(!names_a_secret(plain), "{plain}");
        }
    }
}
