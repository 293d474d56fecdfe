//! A scripted provider for tests.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{StreamExt, stream};
use serde_json::Value;

use crate::message::{Message, ToolSpec, Usage};
use crate::provider::{
    ChatRequest, ContextWindow, EventStream, FinishReason, Health, ModelSettings, OutputFormat,
    Provider, ProviderError, StreamEvent, ToolCallDelta, ToolChoice,
};

/// A [`Provider`] that answers from a script, records every request, and
/// never touches the network.
///
/// Script it turn by turn with [`then`](Self::then), answer every call the
/// same way with [`replying`](Self::replying), or decide each answer from the
/// request with [`from_fn`](Self::from_fn). Clones share the script and the
/// recorded requests, so a test can keep one clone and give the other to the
/// agent.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, testing::{MockProvider, MockTurn}, tool::from_fn};
/// use serde_json::json;
///
/// let mock = MockProvider::new()
///     .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
///     .then(MockTurn::new().text("2 + 3 = 5"));
/// let add = from_fn("add", "Add.", |v: serde_json::Value, _| async move {
///     v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
/// });
/// let agent = Agent::builder().provider(mock.clone()).tool(add).build();
///
/// let reply = agent.handle("alice", "what is 2 + 3?").await?;
/// assert_eq!(reply.text, "2 + 3 = 5");
/// // The second request carried the tool's result back to the model.
/// let second = &mock.requests()[1];
/// assert_eq!(second.messages.last().unwrap().tool_results_iter().next().unwrap().content, "5");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MockProvider {
    inner: Arc<MockInner>,
    /// What [`Provider::context_window`] answers.
    window: Option<ContextWindow>,
    /// What [`Provider::native_output`] answers.
    native_output: bool,
}

type Responder = dyn Fn(&RecordedRequest) -> MockTurn + Send + Sync;

struct MockInner {
    script: Mutex<VecDeque<MockTurn>>,
    responder: Option<Box<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

impl fmt::Debug for MockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockProvider")
            .field("scripted", &lock(&self.inner.script).len())
            .field("requests", &lock(&self.inner.requests).len())
            .finish()
    }
}

impl Default for MockProvider {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MockProvider {
    /// A provider with an empty script; add turns with [`then`](Self::then).
    /// A call beyond the script fails with an error saying so.
    pub fn new() -> Self {
        Self::with_responder(None)
    }

    /// A provider that answers every call with `text`.
    pub fn replying(text: impl Into<String>) -> Self {
        let text = text.into();
        Self::from_fn(move |_| MockTurn::new().text(text.clone()))
    }

    /// A provider whose answer to each call is decided from the request.
    /// Scripted turns, if any, are used first.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::testing::{MockProvider, MockTurn};
    /// let echo = MockProvider::from_fn(|request| {
    ///     let last = request.messages.last().map(|m| m.text()).unwrap_or_default();
    ///     MockTurn::new().text(format!("you said: {last}"))
    /// });
    /// # let _ = echo;
    /// ```
    pub fn from_fn(respond: impl Fn(&RecordedRequest) -> MockTurn + Send + Sync + 'static) -> Self {
        Self::with_responder(Some(Box::new(respond)))
    }

    fn with_responder(responder: Option<Box<Responder>>) -> Self {
        Self {
            inner: Arc::new(MockInner {
                script: Mutex::new(VecDeque::new()),
                responder,
                requests: Mutex::new(Vec::new()),
            }),
            window: None,
            native_output: false,
        }
    }

    /// Says the model's context window is `window`, as a server would: what
    /// [`Provider::context_window`] answers (by default, `None`), for testing
    /// code that bounds a conversation by it.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use ferrobot::provider::{ContextWindow, Provider};
    /// use ferrobot::testing::MockProvider;
    /// let mock = MockProvider::replying("ok").with_context_window(ContextWindow::new(4096));
    /// let window = mock.context_window().await.unwrap();
    /// assert_eq!(window.map(|w| w.tokens), Some(4096));
    /// # }
    /// ```
    #[must_use]
    pub fn with_context_window(mut self, window: ContextWindow) -> Self {
        self.window = Some(window);
        self
    }

    /// Says whether the mock's "server" takes a structured answer
    /// ([`ChatRequest::output`]): what [`Provider::native_output`] answers
    /// (by default, false), for testing code that asks for one where it can
    /// and uses an output tool where it can't. The format asked for is in
    /// [`RecordedRequest::output`]; the answer is still the script's.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::provider::Provider;
    /// use ferrobot::testing::MockProvider;
    /// assert!(!MockProvider::replying("{}").native_output());
    /// let mock = MockProvider::replying("{\"total\": 3}").with_native_output(true);
    /// assert!(mock.native_output());
    /// ```
    #[must_use]
    pub fn with_native_output(mut self, native: bool) -> Self {
        self.native_output = native;
        self
    }

    /// Appends a turn to the script.
    #[must_use]
    pub fn then(self, turn: MockTurn) -> Self {
        self.push(turn);
        self
    }

    /// Appends a turn to the script of a provider already in use.
    pub fn push(&self, turn: MockTurn) {
        lock(&self.inner.script).push_back(turn);
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }

    /// How many scripted turns are still unused.
    pub fn remaining(&self) -> usize {
        lock(&self.inner.script).len()
    }
}

impl Provider for MockProvider {
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> EventStream<'a> {
        let recorded = RecordedRequest {
            system: request.system.map(str::to_owned),
            messages: request.messages.to_vec(),
            tools: request.tools.to_vec(),
            tool_choice: request.tool_choice.clone(),
            output: request.output.cloned(),
            settings: request.settings.clone(),
        };
        let scripted = lock(&self.inner.script).pop_front();
        let turn = scripted.or_else(|| {
            self.inner
                .responder
                .as_ref()
                .map(|respond| respond(&recorded))
        });
        let call = {
            let mut requests = lock(&self.inner.requests);
            requests.push(recorded);
            requests.len()
        };
        match turn {
            Some(turn) => turn.answering(&request).into_stream(),
            None => stream::iter([Err(ProviderError::Other(
                format!("MockProvider has no scripted turn for model call #{call}; add one with `.then(MockTurn::…)`")
                    .into(),
            ))])
            .boxed(),
        }
    }

    fn health(&self) -> BoxFuture<'_, Health> {
        Box::pin(async { Health::ok(Duration::ZERO) })
    }

    fn context_window(&self) -> BoxFuture<'_, Result<Option<ContextWindow>, ProviderError>> {
        let window = self.window;
        Box::pin(async move { Ok(window) })
    }

    fn native_output(&self) -> bool {
        self.native_output
    }

    fn name(&self) -> &str {
        "mock"
    }

    fn model_name(&self) -> &str {
        "mock"
    }
}

/// A request the [`MockProvider`] received.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedRequest {
    /// The system prompt.
    pub system: Option<String>,
    /// The conversation sent.
    pub messages: Vec<Message>,
    /// The tools described.
    pub tools: Vec<ToolSpec>,
    /// Whether the model could call them: [`ToolChoice::None`] once they are
    /// withdrawn for a last answer, and for summaries.
    pub tool_choice: ToolChoice,
    /// The structured answer asked of the server, if any
    /// ([`ChatRequest::output`]). Code that heeds
    /// [`Provider::native_output`] asks one only of a mock
    /// [`with_native_output(true)`](MockProvider::with_native_output); the
    /// mock records it either way.
    pub output: Option<OutputFormat>,
    /// The settings sent.
    pub settings: ModelSettings,
}

impl RecordedRequest {
    /// The names of the tools described.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }
}

/// One scripted answer of a [`MockProvider`]: what the model "says", in order.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::testing::MockTurn;
/// use ferrobot::provider::ProviderError;
/// let slow = MockTurn::new().reasoning("let me see").text("It is 42.").chunked(3).delay(Duration::from_millis(5));
/// let down = MockTurn::failing(ProviderError::Status { status: 503, message: "busy".into(), retry_after: None });
/// # let _ = (slow, down);
/// ```
#[derive(Debug, Default)]
pub struct MockTurn {
    events: Vec<StreamEvent>,
    calls: usize,
    chunk: Option<usize>,
    delay: Duration,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    error: Option<ProviderError>,
    /// A typed answer, given as the request asks for it.
    output: Option<Value>,
}

impl MockTurn {
    /// An empty answer; add to it with the other methods.
    pub fn new() -> Self {
        Self::default()
    }

    /// An answer that fails with `error` before anything streams.
    pub fn failing(error: ProviderError) -> Self {
        Self::new().error(error)
    }

    /// Adds answer text.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.events.push(StreamEvent::TextDelta(text.into()));
        self
    }

    /// Adds reasoning.
    #[must_use]
    pub fn reasoning(mut self, text: impl Into<String>) -> Self {
        self.events.push(StreamEvent::ReasoningDelta(text.into()));
        self
    }

    /// Adds a refusal.
    #[must_use]
    pub fn refusal(mut self, text: impl Into<String>) -> Self {
        self.events.push(StreamEvent::RefusalDelta(text.into()));
        self
    }

    /// Answers with a typed answer, the way the request asks for it: as a
    /// call of the output tool when one must be called (the tool named by
    /// [`ToolChoice::Tool`], or under [`ToolChoice::Required`] the last
    /// tool whose name starts with `final_`, as the agent names output
    /// tools), else as text holding the value's JSON. Comes after whatever
    /// else the turn says.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
    /// use ferrobot::testing::{MockProvider, MockTurn};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Total { cents: u64 }
    /// let mock = MockProvider::new().then(MockTurn::new().output(serde_json::json!({"cents": 420})));
    /// let agent = ferrobot::Agent::builder().provider(mock).build();
    /// let total: Total = agent.extract("alice", "the total?").await?;
    /// assert_eq!(total.cents, 420);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn output(mut self, value: Value) -> Self {
        self.output = Some(value);
        self
    }

    /// Adds a tool call with a generated id (`call_1`, `call_2`, … within the turn).
    #[must_use]
    pub fn tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        let id = format!("call_{}", self.calls + 1);
        self.tool_call_with_id(id, name, arguments)
    }

    /// Adds a tool call with the given id.
    #[must_use]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "takes `json!(…)` values as written"
    )]
    pub fn tool_call_with_id(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.raw_tool_call(id, name, arguments.to_string())
    }

    /// Adds a tool call whose argument text is given verbatim, e.g. invalid JSON.
    #[must_use]
    pub fn raw_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.events.push(StreamEvent::ToolCallDelta(ToolCallDelta {
            index: self.calls,
            id: Some(id.into()),
            name: Some(name.into()),
            arguments: arguments.into(),
        }));
        self.calls += 1;
        self
    }

    /// Reports token usage at the end.
    #[must_use]
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Overrides the finish reason (by default `ToolCalls` when the answer
    /// has tool calls, else `Stop`).
    #[must_use]
    pub fn finish(mut self, reason: FinishReason) -> Self {
        self.finish = Some(reason);
        self
    }

    /// Splits text, reasoning and refusal into deltas of at most `chars` characters.
    #[must_use]
    pub fn chunked(mut self, chars: usize) -> Self {
        self.chunk = Some(chars.max(1));
        self
    }

    /// Waits this long before each event.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Fails with `error` after the events added so far have streamed.
    #[must_use]
    pub fn error(mut self, error: ProviderError) -> Self {
        self.error = Some(error);
        self
    }

    /// The turn with its typed answer, if any, as `request` asks for it.
    fn answering(mut self, request: &ChatRequest<'_>) -> Self {
        let Some(value) = self.output.take() else {
            return self;
        };
        let tool = match request.tool_choice {
            ToolChoice::Tool(name) => Some(name.as_str()),
            ToolChoice::Required => request
                .tools
                .iter()
                .rev()
                .map(|t| t.name.as_str())
                .find(|name| name.starts_with("final_")),
            _ => None,
        };
        match tool {
            Some(name) => self.tool_call(name.to_owned(), value),
            None => self.text(value.to_string()),
        }
    }

    fn into_stream(self) -> EventStream<'static> {
        let mut events: Vec<Result<StreamEvent, ProviderError>> = Vec::new();
        for event in self.events {
            match (self.chunk, event) {
                (Some(n), StreamEvent::TextDelta(t)) => {
                    events.extend(split(&t, n).map(|p| Ok(StreamEvent::TextDelta(p))))
                }
                (Some(n), StreamEvent::ReasoningDelta(t)) => {
                    events.extend(split(&t, n).map(|p| Ok(StreamEvent::ReasoningDelta(p))));
                }
                (Some(n), StreamEvent::RefusalDelta(t)) => {
                    events.extend(split(&t, n).map(|p| Ok(StreamEvent::RefusalDelta(p))))
                }
                (_, event) => events.push(Ok(event)),
            }
        }
        match self.error {
            Some(error) => events.push(Err(error)),
            None => {
                events.extend(self.usage.map(|u| Ok(StreamEvent::Usage(u))));
                let finish = self.finish.unwrap_or(if self.calls > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Stop
                });
                events.push(Ok(StreamEvent::Finish(finish)));
            }
        }
        let delay = self.delay;
        stream::iter(events)
            .then(move |event| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                event
            })
            .boxed()
    }
}

fn split(text: &str, chars: usize) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn the_tool_choice_and_the_structured_answer_asked_for_are_recorded() {
        let mock = MockProvider::replying("{}").with_native_output(true);
        assert!(mock.native_output());
        let messages = [Message::user("hi")];
        let tools = [ToolSpec::new(
            "ping",
            "Ping.",
            serde_json::json!({"type": "object"}),
        )];
        let choice = ToolChoice::Tool("ping".into());
        let format = OutputFormat::new("answer", serde_json::json!({"type": "object"}));
        let request = ChatRequest::new(&messages)
            .tools(&tools)
            .tool_choice(&choice)
            .output(Some(&format));
        let events: Vec<_> = mock.stream(request).collect().await;
        assert!(events.iter().all(Result::is_ok));
        let recorded = &mock.requests()[0];
        assert_eq!(recorded.tool_choice, choice);
        assert_eq!(recorded.output.as_ref(), Some(&format));
        // A plain request records none.
        drop(mock.stream(ChatRequest::new(&messages)));
        assert_eq!(mock.requests()[1].output, None);
        assert!(!MockProvider::new().native_output());
    }
}
