//! A small MCP server written here, in this process over a duplex stream,
//! for the faults the real ones don't make: hangs, crashes, bad schemas,
//! tool lists that change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ferrobot::mcp::McpServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ImageContent,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The server's behaviour and what it saw, shared by its connections.
#[derive(Clone, Default)]
pub(crate) struct Fake {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    tools: Mutex<Vec<Tool>>,
    instructions: Mutex<Option<String>>,
    /// Names of the calls that came.
    started: Mutex<Vec<String>>,
    /// Names of the calls the client cancelled (`notifications/cancelled`).
    cancelled: Mutex<Vec<String>>,
    /// Ends the current connection, as a crash would.
    crash: Mutex<CancellationToken>,
    /// While set, connections are refused: the stream closes at once.
    down: AtomicBool,
    peer: Mutex<Option<Peer<RoleServer>>>,
    connections: Mutex<u32>,
}

/// A tool of the fake server, with this schema.
pub(crate) fn tool(name: &str, schema: Value) -> Tool {
    let Value::Object(map) = schema else {
        panic!("a schema is an object")
    };
    Tool::new(
        name.to_owned(),
        format!("The fake `{name}`."),
        Arc::new(map),
    )
}

/// A tool with these annotations: read-only and destructive hints.
pub(crate) fn annotated(name: &str, read_only: Option<bool>, destructive: Option<bool>) -> Tool {
    tool(name, json!({"type": "object"})).with_annotations(ToolAnnotations::from_raw(
        None,
        read_only,
        destructive,
        None,
        None,
    ))
}

impl Fake {
    /// A server offering `tools`.
    pub(crate) fn new(tools: Vec<Tool>) -> Self {
        let fake = Self::default();
        *fake.inner.tools.lock().unwrap() = tools;
        fake
    }

    pub(crate) fn instructions(self, text: &str) -> Self {
        *self.inner.instructions.lock().unwrap() = Some(text.to_owned());
        self
    }

    /// The server as ferrobot reaches it: a new in-process connection per
    /// attempt.
    pub(crate) fn server(&self, name: &str) -> McpServer {
        let fake = self.clone();
        McpServer::stream(name, move || {
            let (client, server) = tokio::io::duplex(1 << 16);
            if fake.inner.down.load(Ordering::SeqCst) {
                drop(server);
                return client;
            }
            let crash = CancellationToken::new();
            *fake.inner.crash.lock().unwrap() = crash.clone();
            *fake.inner.connections.lock().unwrap() += 1;
            let fake = fake.clone();
            tokio::spawn(async move {
                let Ok(running) = fake.clone().serve(server).await else {
                    return;
                };
                *fake.inner.peer.lock().unwrap() = Some(running.peer().clone());
                tokio::select! {
                    _ = running.waiting() => {}
                    () = crash.cancelled() => {}
                }
            });
            client
        })
    }

    /// Ends the current connection, as a crash would; refuses new ones
    /// while `stay_down`.
    pub(crate) fn crash(&self, stay_down: bool) {
        self.inner.down.store(stay_down, Ordering::SeqCst);
        self.inner.crash.lock().unwrap().cancel();
    }

    /// Accepts connections again.
    pub(crate) fn revive(&self) {
        self.inner.down.store(false, Ordering::SeqCst);
    }

    pub(crate) fn connections(&self) -> u32 {
        *self.inner.connections.lock().unwrap()
    }

    pub(crate) fn started(&self) -> Vec<String> {
        self.inner.started.lock().unwrap().clone()
    }

    pub(crate) fn cancelled(&self) -> Vec<String> {
        self.inner.cancelled.lock().unwrap().clone()
    }

    /// Offers `tool` too, and says so (`notifications/tools/list_changed`).
    pub(crate) async fn add_tool(&self, tool: Tool) {
        self.inner.tools.lock().unwrap().push(tool);
        let peer = self.inner.peer.lock().unwrap().clone().unwrap();
        peer.notify_tool_list_changed().await.unwrap();
    }
}

impl ServerHandler for Fake {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let info = InitializeResult::new(capabilities);
        match self.inner.instructions.lock().unwrap().clone() {
            Some(text) => info.with_instructions(text),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.inner.tools.lock().unwrap().clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        self.inner
            .started
            .lock()
            .unwrap()
            .push(request.name.to_string());
        let result = match &*request.name {
            "hang" => {
                context.ct.cancelled().await;
                self.inner
                    .cancelled
                    .lock()
                    .unwrap()
                    .push(request.name.to_string());
                CallToolResult::success(vec![ContentBlock::text("too late")])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the disk is on fire")]),
            "image" => CallToolResult::success(vec![
                ContentBlock::text("A dot:"),
                ContentBlock::Image(ImageContent::new(
                    // A 1×1 PNG.
                    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
                    "image/png",
                )),
            ]),
            _ => CallToolResult::success(vec![ContentBlock::text(format!(
                "{} got {arguments}",
                request.name
            ))]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}
