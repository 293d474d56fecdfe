//! The floor: what a plain client does for the same exchange, with nothing
//! of ferrobot. reqwest posts a body made with serde; the SSE stream is split
//! naively on blank lines; each `data:` payload is parsed into a minimal
//! typed struct; text is concatenated and tool calls are assembled by index.
//!
//! It is written the way a careful application author would, not tuned
//! either way: typed structs with owned strings, one pass over the buffer
//! per network read.

#![allow(dead_code, reason = "each bench uses a different part")]

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A plain chat-completions client.
pub(crate) struct Floor {
    pub(crate) client: reqwest::Client,
    /// The full `…/chat/completions` URL.
    pub(crate) url: String,
    /// The `tools` array, prepared once as a real client would.
    pub(crate) tools: Option<Value>,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [OutMessage<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a Value>,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message of the request.
#[derive(Serialize)]
pub(crate) struct OutMessage<'a> {
    pub(crate) role: &'a str,
    pub(crate) content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_calls: Option<Vec<OutCall<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_call_id: Option<&'a str>,
}

/// A tool call sent back in the assistant message.
#[derive(Serialize)]
pub(crate) struct OutCall<'a> {
    pub(crate) id: &'a str,
    #[serde(rename = "type")]
    pub(crate) kind: &'a str,
    pub(crate) function: OutFunction<'a>,
}

#[derive(Serialize)]
pub(crate) struct OutFunction<'a> {
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a str,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// A tool call assembled from its fragments.
#[derive(Debug, Default)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

impl Floor {
    /// A client for the server at `addr`, offering `tools` (a JSON array).
    pub(crate) fn new(addr: std::net::SocketAddr, tools: Option<Value>) -> Self {
        // reqwest is built with `rustls-no-provider` and panics when building
        // a client before a crypto provider is installed, even for plain
        // http. ring is what ferrobot installs too.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            client: reqwest::Client::builder().build().expect("reqwest client"),
            url: format!("http://{addr}/v1/chat/completions"),
            tools,
        }
    }

    /// A user message.
    pub(crate) fn user(text: &str) -> OutMessage<'_> {
        OutMessage {
            role: "user",
            content: Some(text),
            tool_calls: None,
            tool_call_id: None,
        }
    }

    /// Posts the conversation and folds the streamed answer into its text
    /// and tool calls.
    pub(crate) async fn call(&self, messages: &[OutMessage<'_>]) -> (String, Vec<Call>) {
        let body = serde_json::to_vec(&Request {
            model: "test",
            messages,
            tools: self.tools.as_ref(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
        })
        .expect("request body");
        let response = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .expect("response")
            .error_for_status()
            .expect("200 OK");
        let mut bytes = response.bytes_stream();
        let mut buf = String::new();
        let mut text = String::new();
        let mut calls: Vec<Call> = Vec::new();
        while let Some(chunk) = bytes.next().await {
            buf.push_str(std::str::from_utf8(&chunk.expect("body chunk")).expect("UTF-8"));
            let mut start = 0;
            while let Some(end) = buf[start..].find("\n\n") {
                let event = &buf[start..start + end];
                start += end + 2;
                let Some(data) = event.strip_prefix("data: ") else {
                    continue;
                };
                if data == "[DONE]" {
                    continue;
                }
                let chunk: Chunk = serde_json::from_str(data).expect("chunk JSON");
                for delta in chunk.choices.into_iter().filter_map(|c| c.delta) {
                    if let Some(content) = delta.content {
                        text.push_str(&content);
                    }
                    for fragment in delta.tool_calls.into_iter().flatten() {
                        if calls.len() <= fragment.index {
                            calls.resize_with(fragment.index + 1, Call::default);
                        }
                        let call = &mut calls[fragment.index];
                        if let Some(id) = fragment.id {
                            call.id = id;
                        }
                        if let Some(function) = fragment.function {
                            if let Some(name) = function.name {
                                call.name = name;
                            }
                            if let Some(arguments) = function.arguments {
                                call.arguments.push_str(&arguments);
                            }
                        }
                    }
                }
            }
            buf.drain(..start);
        }
        (text, calls)
    }
}
