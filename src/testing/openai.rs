//! Chat-completions response bodies for tests that serve a real HTTP endpoint
//! (e.g. with `wiremock`).

use serde_json::{Value, json};

/// Builds an OpenAI-format SSE body (`data: {chunk}` lines, then
/// `data: [DONE]`) or the equivalent non-streamed response, one delta at a time.
///
/// # Examples
/// ```
/// use ferrobot::testing::OpenAiStream;
/// let body = OpenAiStream::new().text("Hel").text("lo").finish("stop").into_sse();
/// assert!(body.starts_with("data: {"));
/// assert!(body.ends_with("data: [DONE]\n\n"));
/// // Serve it with, e.g., wiremock:
/// // ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenAiStream {
    chunks: Vec<Value>,
    calls: usize,
    text: String,
    tool_calls: Vec<Value>,
    finish: Option<String>,
    usage: Option<Value>,
}

impl OpenAiStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn delta(mut self, delta: Value) -> Self {
        let mut chunk = json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "test",
            "choices": [{"index": 0, "finish_reason": null}]
        });
        chunk["choices"][0]["delta"] = delta;
        self.chunks.push(chunk);
        self
    }

    /// Adds a text delta.
    #[must_use]
    pub fn text(mut self, text: &str) -> Self {
        self.text.push_str(text);
        self.delta(json!({"content": text}))
    }

    /// Adds a `reasoning_content` delta.
    #[must_use]
    pub fn reasoning(self, text: &str) -> Self {
        self.delta(json!({"reasoning_content": text}))
    }

    /// Adds a `refusal` delta.
    #[must_use]
    pub fn refusal(self, text: &str) -> Self {
        self.delta(json!({"refusal": text}))
    }

    /// Adds a whole tool call at the next index, in one fragment.
    #[must_use]
    pub fn tool_call(mut self, id: &str, name: &str, arguments: &Value) -> Self {
        let index = self.calls;
        self.calls += 1;
        let arguments = arguments.to_string();
        self.tool_calls.push(json!({
            "id": id, "type": "function", "function": {"name": name, "arguments": arguments}
        }));
        self.delta(json!({"tool_calls": [{
            "index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}
        }]}))
    }

    /// Adds one raw tool-call fragment, for testing assembly.
    #[must_use]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "takes `json!(…)` values as written"
    )]
    pub fn tool_call_fragment(self, fragment: Value) -> Self {
        self.delta(json!({"tool_calls": [fragment]}))
    }

    /// Adds an arbitrary chunk verbatim.
    #[must_use]
    pub fn chunk(mut self, chunk: Value) -> Self {
        self.chunks.push(chunk);
        self
    }

    /// Ends the choice with this `finish_reason` (`"stop"`, `"tool_calls"`, …).
    #[must_use]
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_owned());
        self.chunks.push(json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "test",
            "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]
        }));
        self
    }

    /// Adds a usage chunk (as with `stream_options.include_usage`).
    #[must_use]
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        let usage = json!({
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        });
        self.usage = Some(usage.clone());
        self.chunks.push(json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "test",
            "choices": [], "usage": usage
        }));
        self
    }

    /// The SSE body, ending with `data: [DONE]`.
    pub fn into_sse(self) -> String {
        sse_body(self.chunks.iter())
    }

    /// The same answer as one non-streamed `chat.completion` object.
    pub fn into_completion(self) -> Value {
        let mut message = json!({"role": "assistant", "content": if self.text.is_empty() { Value::Null } else { Value::String(self.text) }});
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(self.tool_calls);
        }
        let mut body = json!({
            "id": "chatcmpl-test", "object": "chat.completion", "model": "test",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}]
        });
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        body
    }
}

/// An SSE body from chat-completion chunks, ending with `data: [DONE]`.
///
/// # Examples
/// ```
/// let body = ferrobot::testing::sse_body([&serde_json::json!({"choices": []})]);
/// assert_eq!(body, "data: {\"choices\":[]}\n\ndata: [DONE]\n\n");
/// ```
pub fn sse_body<'a>(chunks: impl IntoIterator<Item = &'a Value>) -> String {
    let mut body = String::new();
    for chunk in chunks {
        body.push_str("data: ");
        body.push_str(&chunk.to_string());
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// An SSE body answering with `text`, streamed word by word, then
/// `finish_reason: "stop"` and a usage chunk.
///
/// # Examples
/// ```
/// let body = ferrobot::testing::text_sse("Hello world");
/// assert!(body.contains(r#""content":"Hello ""#));
/// ```
pub fn text_sse(text: &str) -> String {
    let mut stream = OpenAiStream::new();
    for word in text.split_inclusive(' ') {
        stream = stream.text(word);
    }
    stream.finish("stop").usage(10, 5).into_sse()
}

/// An SSE body asking for one tool call, then `finish_reason: "tool_calls"`.
///
/// # Examples
/// ```
/// let body = ferrobot::testing::tool_call_sse("call_1", "add", &serde_json::json!({"a": 1}));
/// assert!(body.contains(r#""name":"add""#));
/// ```
pub fn tool_call_sse(id: &str, name: &str, arguments: &Value) -> String {
    OpenAiStream::new()
        .tool_call(id, name, arguments)
        .finish("tool_calls")
        .usage(10, 5)
        .into_sse()
}
