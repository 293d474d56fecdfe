//! Helpers shared by the integration tests.

use std::path::PathBuf;

use ferrobot::Message;
use ferrobot::provider::{Assembled, Assembler, ChatRequest, Provider, ProviderError, StreamEvent};
use ferrobot_testkit::fault::{FaultServer, Script, Step};
use futures_util::StreamExt;

/// Runs one model call and returns its events, stopping at the first error.
pub(crate) async fn events(
    provider: &dyn Provider,
    messages: &[Message],
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut stream = provider.stream(ChatRequest::new(messages));
    let mut out = Vec::new();
    while let Some(event) = stream.next().await {
        out.push(event?);
    }
    Ok(out)
}

/// Runs one model call and assembles its message.
pub(crate) async fn assemble(
    provider: &dyn Provider,
    messages: &[Message],
) -> Result<Assembled, ProviderError> {
    let mut assembler = Assembler::new();
    for event in events(provider, messages).await? {
        assembler.push(&event);
    }
    Ok(assembler.finish())
}

/// The folder of one category of the shared recorded traffic; `None` after
/// a loud skip when it is missing outside CI, a failure under CI (see
/// `ferrobot_testkit::outside`).
pub(crate) fn corpus(category: &str) -> Option<PathBuf> {
    ferrobot_testkit::outside::corpus(category)
}

/// The JSON bodies of every request `server` received, in order.
pub(crate) async fn bodies(server: &wiremock::MockServer) -> Vec<serde_json::Value> {
    let requests = server.received_requests().await.unwrap();
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// One recording of the corpus: its folder's name, the folder, and what a
/// correct client assembles from it.
pub(crate) struct Recording {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) expected: serde_json::Value,
}

impl Recording {
    /// A loopback server answering POSTs to `route` with this recording's
    /// `response.txt` as an event stream.
    pub(crate) async fn serve_stream(&self, route: &str) -> wiremock::MockServer {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .and(wiremock::matchers::path(route))
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw(
                std::fs::read(self.dir.join("response.txt")).unwrap(),
                "text/event-stream",
            ))
            .mount(&server)
            .await;
        server
    }

    /// Asserts that `message` has the text and reasoning `expected.json`
    /// names (absent counts as empty).
    pub(crate) fn assert_text(&self, message: &Message) {
        let name = &self.name;
        assert_eq!(
            message.text(),
            self.expected["content"].as_str().unwrap_or_default(),
            "{name}: content"
        );
        assert_eq!(
            message.reasoning().unwrap_or_default(),
            self.expected["reasoning"].as_str().unwrap_or_default(),
            "{name}: reasoning"
        );
    }
}

/// Every recording of a corpus category, in name order; none when the corpus
/// is missing outside CI (see [`corpus`]).
pub(crate) fn recordings(category: &str) -> Vec<Recording> {
    let Some(dir) = corpus(category) else {
        return Vec::new();
    };
    let mut dirs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "{} holds no recordings", dir.display());
    dirs.into_iter()
        .map(|dir| Recording {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            expected: serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap())
                .unwrap(),
            dir,
        })
        .collect()
}

/// A loopback server that sends the response head and `first`, then stays
/// silent with the connection open.
pub(crate) async fn serve_then_stall(first: &str) -> FaultServer {
    FaultServer::start([Script::chunked("text/event-stream", [first]).then(Step::Stall)]).await
}

/// Runs one turn over `provider` with a `count` tool and a cap of one tool
/// round, against a `server` that calls `count` while tools are on offer and
/// answers "Still zero." once they are not; returns the two request bodies.
pub(crate) async fn last_round_bodies(
    provider: impl Provider + 'static,
    server: &wiremock::MockServer,
) -> Vec<serde_json::Value> {
    let count = ferrobot::tool::from_fn("count", "Count.", |_: serde_json::Value, _| async { 0 });
    let agent = ferrobot::Agent::builder()
        .provider(provider)
        .tool(count)
        .max_tool_rounds(1)
        .build();
    let reply = agent.handle("a", "count again").await.unwrap();
    assert_eq!(reply.text, "Still zero.");
    let bodies = bodies(server).await;
    assert_eq!(bodies.len(), 2, "one tool round, then the last answer");
    bodies
}

/// The tools the request-body tests offer: two, so that a forced
/// `ToolChoice::Tool` shows which are still sent.
pub(crate) fn weather_tools() -> Vec<ferrobot::ToolSpec> {
    let city = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city."}},
        "required": ["city"],
    });
    vec![
        ferrobot::ToolSpec::new("get_weather", "The weather in a city.", city.clone()),
        ferrobot::ToolSpec::new("get_time", "The local time in a city.", city),
    ]
}

/// The structured answer the request-body tests ask for: an optional field,
/// so that `OpenAI`'s strict form (every field required, optional ones
/// nullable) and Gemini's (`nullable: true`) differ from the plain one.
pub(crate) fn forecast_format() -> ferrobot::provider::OutputFormat {
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Forecast {
        /// The city.
        city: String,
        /// The temperature, in degrees Celsius.
        celsius: f64,
        /// Anything worth knowing, if there is.
        note: Option<String>,
    }
    ferrobot::provider::OutputFormat::new(
        "forecast",
        ferrobot::tool::schema::for_type::<Forecast>(),
    )
    .description("Tomorrow's weather.")
}

/// The JSON body of one model call over `provider` with `tools`, `choice`
/// and `output`, sent to `server`, which must answer it well.
pub(crate) async fn request_body(
    provider: &dyn Provider,
    server: &wiremock::MockServer,
    tools: &[ferrobot::ToolSpec],
    choice: &ferrobot::provider::ToolChoice,
    output: Option<&ferrobot::provider::OutputFormat>,
) -> serde_json::Value {
    let messages = [Message::user("Weather in Paris tomorrow?")];
    let request = ChatRequest::new(&messages)
        .system(Some("Be brief."))
        .tools(tools)
        .tool_choice(choice)
        .output(output);
    let mut stream = provider.stream(request);
    while let Some(event) = stream.next().await {
        event.unwrap_or_else(|e| panic!("{}", e.chain()));
    }
    bodies(server).await.pop().unwrap()
}

/// A conversation showing images, for the request-body tests: the user's
/// text with an image's bytes (and one by URL, where `url`), then a round of
/// two tool calls, the first of which showed an image. The bytes are a few
/// fakes, so the base64 stays short. The shared corpus holds no recordings
/// with images, so the bodies each dialect sends for it are written from its
/// provider's documented wire format.
pub(crate) fn image_conversation(url: bool) -> Vec<Message> {
    use ferrobot::{Image, Part, Role, ToolCall, ToolResult};
    let mut user = vec![
        Part::text("What is in this picture?"),
        Part::image(Image::png(vec![1, 2, 3])),
    ];
    if url {
        user.push(Part::image(Image::url("https://example.com/cat.png")));
    }
    vec![
        Message::new(Role::User, user),
        Message::new(
            Role::Assistant,
            vec![
                Part::ToolCall(ToolCall::new("call_1", "screenshot", serde_json::json!({}))),
                Part::ToolCall(ToolCall::new(
                    "call_2",
                    "get_time",
                    serde_json::json!({"city": "Paris"}),
                )),
            ],
        ),
        Message::tool_results([
            ToolResult::ok("call_1", "The screen, now.")
                .with_images(vec![Image::jpeg(vec![4, 5, 6])]),
            ToolResult::ok("call_2", "12:00"),
        ]),
    ]
}

/// The JSON body of one model call over `provider` for `messages`, sent to
/// `server`, which must answer it well.
pub(crate) async fn body_for(
    provider: &dyn Provider,
    server: &wiremock::MockServer,
    messages: &[Message],
) -> serde_json::Value {
    let mut stream = provider.stream(ChatRequest::new(messages));
    while let Some(event) = stream.next().await {
        event.unwrap_or_else(|e| panic!("{}", e.chain()));
    }
    bodies(server).await.pop().unwrap()
}

/// The error of one model call over `provider` for `messages`, which must
/// be refused before anything reaches `server`.
pub(crate) async fn refused(
    provider: &dyn Provider,
    server: &wiremock::MockServer,
    messages: &[Message],
) -> ProviderError {
    let error = provider
        .stream(ChatRequest::new(messages))
        .next()
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::InvalidRequest { .. }),
        "{error:?}"
    );
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "nothing is sent"
    );
    error
}

/// A conversation steered mid-turn, for the request-body tests: the user's
/// message, a tool call, its result, then a steering message (what the user
/// said while the tool ran). Dialects whose turns alternate must merge the
/// tool result and the steering message into one user turn.
pub(crate) fn steered_conversation() -> Vec<Message> {
    use ferrobot::{Part, Role, ToolCall, ToolResult};
    vec![
        Message::user("Deploy the site."),
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall::new(
                "call_1",
                "deploy",
                serde_json::json!({"target": "production"}),
            ))],
        ),
        Message::tool_results([ToolResult::ok("call_1", "Deployed to production.")]),
        Message::steering("Then staging too."),
    ]
}
