//! The examples in `docs/*.md`, compiled and run.
//!
//! Every `rust` code block in `docs/*.md` appears in this file verbatim
//! (indentation aside), with the setup it needs around it;
//! `every_rust_block_in_the_docs_is_compiled_here` fails when one drifts. Blocks
//! that talk to a real model server are compiled but not run.
//!
//! The modules are not formatted by rustfmt, so that they stay identical to
//! the docs.
#![cfg(feature = "openai")]
// The examples use `unwrap` as a reader's code would.
#![allow(clippy::unwrap_used)]
// Items are `pub` as a reader would write them in their own crate.
#![allow(unreachable_pub)]

use std::path::Path;

/// Each line without its indentation, so a block nested in a function here
/// still matches the block in the docs.
fn normalized(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).collect()
}

/// The `rust` code blocks of a Markdown file, with the line each starts on.
fn rust_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (number, line) in markdown.lines().enumerate() {
        let fence = line.trim_start();
        match &mut current {
            None if fence.starts_with("```rust") => current = Some((number + 1, String::new())),
            Some(_) if fence.starts_with("```") => blocks.extend(current.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn every_rust_block_in_the_docs_is_compiled_here() {
    let here = normalized(include_str!("docs_examples.rs"));
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut files: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &files {
        let markdown = std::fs::read_to_string(file).unwrap();
        for (line, block) in rust_blocks(&markdown) {
            let block = normalized(&block);
            if !here
                .windows(block.len())
                .any(|window| window == block.as_slice())
            {
                let name = file
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap_or(file);
                missing.push(format!("{}:{line}", name.display()));
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no rust blocks found under {}", docs.display());
    assert!(
        missing.is_empty(),
        "these code blocks of the docs are not in tests/docs_examples.rs (copy them there, \
         inside a test, so they are compiled): {missing:#?}"
    );
}

// ---- docs/testing.md --------------------------------------------------------

#[rustfmt::skip]
mod testing_in_ten_lines {
    use ferrobot::provider::Provider;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::{Agent, tool::from_fn};
    use serde_json::json;

    /// In your crate: the agent, from any provider.
    fn my_agent(provider: impl Provider + 'static) -> Agent {
        let add = from_fn("add", "Add two integers.", |v: serde_json::Value, _ctx| async move {
            v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
        });
        Agent::builder().provider(provider).tool(add).build()
    }

    #[tokio::test]
    async fn answers_sums_with_the_add_tool() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
            .then(MockTurn::new().text("2 + 3 = 5"));
        let agent = my_agent(mock.clone());

        let reply = agent.handle("test", "what is 2 + 3?").await.unwrap();
        assert_eq!(reply.text, "2 + 3 = 5");
        assert_eq!(reply.tool_calls[0].content, "5"); // the tool really ran
        assert_eq!(mock.requests()[0].tool_names(), ["add"]); // and was offered
    }
}

#[rustfmt::skip]
mod testing {
    use ferrobot::Agent;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::from_fn;
    use serde_json::json;

    #[test]
    fn other_ways_to_answer() {
        use ferrobot::testing::{MockProvider, MockTurn};

        // The same answer to every call.
        let hello = MockProvider::replying("Hello!");

        // An answer computed from the request.
        let echo = MockProvider::from_fn(|request| {
            let last = request.messages.last().map(|m| m.text()).unwrap_or_default();
            MockTurn::new().text(format!("you said: {last}"))
        });

        // More script, added while the agent is already using the provider.
        echo.push(MockTurn::new().text("scripted turns come first"));
        assert_eq!(hello.remaining(), 0);
        assert_eq!(echo.remaining(), 1);
    }

    #[tokio::test]
    async fn asserting_what_the_model_was_sent() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("add", json!({"a": 2, "b": 3})))
            .then(MockTurn::new().text("5"));
        let add = from_fn("add", "Add.", |v: serde_json::Value, _ctx| async move {
            v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)
        });
        let agent = Agent::builder().provider(mock.clone()).tool(add).build();
        agent.handle("test", "2 + 3").await.unwrap();
        let requests = mock.requests();
        assert_eq!(requests.len(), 2);
        // The second call carried the tool's result back to the model.
        let result = requests[1].messages.last().unwrap().tool_results_iter().next().unwrap();
        assert_eq!(result.content, "5");
        assert!(!result.is_error);
        assert_eq!(mock.remaining(), 0); // the whole script was used
    }

    #[tokio::test]
    async fn streams() {
        use ferrobot::{Agent, AgentEvent, testing::{MockProvider, MockTurn}};
        use futures_util::StreamExt;

        let agent = Agent::builder()
            .provider(MockProvider::new().then(MockTurn::new().text("Hello, world").chunked(5)))
            .build();
        let mut events = agent.stream("test", "hi");
        let mut deltas = Vec::new();
        while let Some(event) = events.next().await {
            if let AgentEvent::TextDelta(text) = event.unwrap() {
                deltas.push(text);
            }
        }
        assert_eq!(deltas, ["Hello", ", wor", "ld"]);
    }

    #[tokio::test]
    async fn failures() {
        use ferrobot::{Agent, Error, provider::ProviderError, testing::{MockProvider, MockTurn}};

        let down = ProviderError::Status { status: 503, message: "overloaded".into(), retry_after: None };
        let agent = Agent::builder()
            .provider(MockProvider::new().then(MockTurn::failing(down)))
            .build();
        let err = agent.handle("test", "hi").await.unwrap_err();
        assert!(matches!(err, Error::Provider(_)));
        assert_eq!(
            err.user_message(),
            "LLM unavailable: server answered 503: overloaded — slash commands still work"
        );
    }

    #[tokio::test]
    async fn confirmation() {
        use ferrobot::{Agent, agent::ToolOutcome, confirm::ConfirmRequest, tool::from_fn};
        use ferrobot::testing::{MockProvider, MockTurn};
        use serde_json::json;

        let reboot = from_fn("reboot", "Reboot the machine.", |_: serde_json::Value, _ctx| async { "rebooting" })
            .confirm("Reboot now?");
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("reboot", json!({})))
            .then(MockTurn::new().text("Okay, I won't."));
        let agent = Agent::builder()
            .provider(mock)
            .tool(reboot)
            .confirm(|request: ConfirmRequest| async move {
                assert_eq!(request.prompt, "Reboot now?");
                false // decline
            })
            .build();
        let reply = agent.handle("test", "reboot please").await.unwrap();
        assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
        assert_eq!(reply.tool_calls[0].content, "Cancelled by user.");
    }

    #[tokio::test]
    async fn a_tool_alone() {
        use ferrobot::tool::{Tool, ToolContext, from_fn};
        use serde_json::json;

        let shout = from_fn("shout", "Upper-case a text.", |v: serde_json::Value, _ctx| async move {
            v["text"].as_str().unwrap_or_default().to_uppercase()
        });
        let out = shout.call(json!({"text": "hi"}), ToolContext::for_test("test")).await;
        assert_eq!(out.unwrap(), "HI");
    }

    #[tokio::test]
    async fn over_real_http() {
        use ferrobot::{Agent, provider::OpenAiCompatible, testing::text_sse};
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};

        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(text_sse("Hello from the wire"), "text/event-stream"))
            .mount(&server)
            .await;
        let provider = OpenAiCompatible::new(format!("{}/v1", server.uri())).model("test-model");
        let agent = Agent::builder().provider(provider).build();
        let reply = agent.handle("test", "hi").await.unwrap();
        assert_eq!(reply.text, "Hello from the wire");
        assert_eq!(reply.usage.input_tokens, 10);
    }
}

// ---- docs/history.md --------------------------------------------------------

#[rustfmt::skip]
#[cfg(feature = "sqlite")]
mod history {
    #[tokio::test]
    async fn sqlite_store_survives_a_restart_and_searches() -> Result<(), Box<dyn std::error::Error>> {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join("ferrobot-docs-history"));
        use ferrobot::Agent;
        use ferrobot::history::{HistoryStore, SqliteHistory};
        use ferrobot::testing::MockProvider;

        let dir = std::env::temp_dir().join("ferrobot-docs-history");
        let store = SqliteHistory::open(dir.join("history.db")).await?;
        let agent = Agent::builder().provider(MockProvider::replying("Noted.")).history(store.clone()).build();
        agent.handle("alice", "The backup server is backup-02.").await?;

        // After a restart, the same file continues the conversation.
        let reopened = SqliteHistory::open(dir.join("history.db")).await?;
        assert_eq!(reopened.load("alice").await?.len(), 2);

        let hits = store.search("backup server", 5).await?;
        assert_eq!(hits[0].conversation, "alice");
        assert_eq!(hits[0].snippet, "The [backup] [server] is [backup]-02.");
        let _ = std::fs::remove_dir_all(dir);
        Ok(())
    }

    #[test]
    fn a_context_policy_with_compaction() {
        use ferrobot::Agent;
        use ferrobot::history::{Compaction, ContextPolicy};
        use ferrobot::testing::MockProvider;

        let agent = Agent::builder()
            .provider(MockProvider::replying("ok"))
            .context(
                ContextPolicy::builder()
                    .max_tokens(24_000)
                    .compaction(Compaction::builder().context_window(32_000).build())
                    .build(),
            )
            .build();
        let _ = agent;
    }

    #[test]
    fn an_estimator_from_a_closure() {
        use ferrobot::Message;
        use ferrobot::history::ContextPolicy;

        let policy = ContextPolicy::builder()
            .max_tokens(8_000)
            .estimator(|message: &Message| message.text().split_whitespace().count() * 4 / 3 + 4)
            .build();
        assert_eq!(policy.max_tokens, Some(8_000));
    }
}

// ---- docs/tools.md: #[tool] -------------------------------------------------

#[rustfmt::skip]
#[cfg(feature = "macros")]
mod tools_macro {
    use ferrobot::agent::ToolOutcome;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::Agent;
    use serde_json::json;

    mod disk {
        use ferrobot::tool;
        use serde::Serialize;

        #[derive(Serialize)]
        pub struct DiskReport {
            pub mount: String,
            pub free_gib: u64,
        }

        /// Free space on a mounted filesystem.
        #[tool]
        pub async fn disk_free(
            /// Mount point to inspect, e.g. "/" or "/home".
            mount: String,
            /// Round to whole GiB.
            round: Option<bool>,
        ) -> Result<DiskReport, std::io::Error> {
            let _ = round;
            Ok(DiskReport { mount, free_gib: 42 })
        }
    }
    use disk::disk_free;

    #[tokio::test]
    async fn the_function_is_callable_in_tests() {
        let report = disk_free::run("/".to_owned(), None).await.unwrap();
        assert_eq!(report.free_gib, 42);
    }

    #[tokio::test]
    async fn the_tool_as_the_agent_runs_it() {
        use ferrobot::tool::{Tool, ToolContext};
        let out = disk_free.call(serde_json::json!({"mount": "/"}), ToolContext::for_test("test")).await;
        assert_eq!(out.unwrap(), r#"{"mount":"/","free_gib":42}"#);
    }

    #[tokio::test]
    async fn bad_arguments_are_explained() {
        use ferrobot::tool::{Tool, ToolContext};
        let error = disk_free.call(json!({"mount": 7, "round": "yes"}), ToolContext::for_test("t")).await.unwrap_err();
        assert_eq!(
            error.message(),
            "Invalid arguments for `disk_free`:\n\
             - `mount`: invalid type: integer `7`, expected a string\n\
             - `round`: invalid type: string \"yes\", expected a boolean\n\
             Call `disk_free` again with arguments that match its schema."
        );
    }

    mod stock {
        use ferrobot::tool::{State, ToolContext};
        use ferrobot::tool;

        pub struct Inventory {
            items: Vec<String>,
        }

        /// How many of an item are in stock.
        #[tool]
        pub async fn stock(
            ctx: ToolContext,
            State(inventory): State<Inventory>,
            /// The item to count.
            item: String,
        ) -> usize {
            let _ = ctx.conversation();
            inventory.items.iter().filter(|i| **i == item).count()
        }

        pub fn inventory() -> Inventory {
            Inventory { items: vec!["nut".into(), "nut".into(), "bolt".into()] }
        }
    }

    #[tokio::test]
    async fn state_is_injected() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("stock", json!({"item": "nut"})))
            .then(MockTurn::new().text("Two nuts."));
        let agent = Agent::builder().provider(mock).tool(stock::stock).state(stock::inventory()).build();
        let reply = agent.handle("a", "nuts?").await.unwrap();
        assert_eq!(reply.tool_calls[0].content, "2");
    }

    mod attributes {
        use ferrobot::tool;

        /// Delete a file.
        #[tool(confirm = "Delete {path}?", timeout = "10s", exclusive)]
        pub async fn delete_file(/** The file to delete. */ path: String) -> std::io::Result<()> {
            tokio::fs::remove_file(path).await
        }

        /// Name and memory of each GPU.
        #[tool(platforms = ["linux", "windows"], requires = ["nvidia-smi"])]
        pub async fn gpu_info() -> std::io::Result<String> {
            let out = tokio::process::Command::new("nvidia-smi").arg("-L").output().await?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    }

    #[test]
    fn attributes_set_the_policy() {
        use ferrobot::tool::Tool;
        let delete = attributes::delete_file;
        assert_eq!(delete.confirmation(&json!({"path": "/tmp/x"})).as_deref(), Some("Delete /tmp/x?"));
        assert_eq!(delete.timeout(), Some(std::time::Duration::from_secs(10)));
        assert!(delete.is_exclusive());
        let _ = attributes::gpu_info.availability();
    }

    mod notes {
        use std::sync::Mutex;
        use ferrobot::toolbox;

        pub struct Notes {
            lines: Mutex<Vec<String>>,
        }

        #[toolbox]
        impl Notes {
            /// Remember a note.
            #[tool]
            pub async fn add_note(&self, /** The note. */ text: String) {
                self.lines.lock().unwrap().push(text);
            }

            /// How many notes there are.
            #[tool]
            pub fn count_notes(&self) -> usize {
                self.lines.lock().unwrap().len()
            }
        }

        pub fn empty() -> Notes {
            Notes { lines: Mutex::new(Vec::new()) }
        }
    }

    #[tokio::test]
    async fn a_toolbox_registers_its_tools() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("add_note", json!({"text": "milk"})))
            .then(MockTurn::new().tool_call("count_notes", json!({})))
            .then(MockTurn::new().text("One note."));
        let agent = Agent::builder().provider(mock).tools(notes::empty()).build();
        let reply = agent.handle("a", "note milk").await.unwrap();
        let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [ToolOutcome::Ok, ToolOutcome::Ok]);
        assert_eq!(reply.tool_calls[1].content, "1");
    }
}

// ---- docs/tools.md: ready-made tools ----------------------------------------

#[rustfmt::skip]
#[cfg(feature = "tools")]
mod tools_ready_made {
    #[tokio::test]
    async fn system_and_command_tools() {
        use ferrobot::Agent;
        let provider = ferrobot::testing::MockProvider::replying("ok");
        use std::time::Duration;
        use ferrobot::tools::{CommandTool, ParamKind, system};

        let ping = CommandTool::new("ping_host", "Ping a host three times.", ["ping", "-c", "3", "{host}"])
            .param("host", ParamKind::String, "Host name or address.", true)
            .timeout(Duration::from_secs(10))
            .max_output(4_000)
            .confirm("Ping {host}?");
        let agent = Agent::builder()
            .provider(provider)
            .tools(system()) // disk_usage, memory, cpu_load, temperatures, uptime, …
            .tool(ping)
            .build();
        assert!(agent.tools().get("disk_usage").is_some());
        assert_eq!(agent.tools().get("ping_host").unwrap().confirmation(&serde_json::json!({"host": "example.org"})).as_deref(), Some("Ping example.org?"));
    }
}

// ---- docs/tools.md ----------------------------------------------------------

#[rustfmt::skip]
mod tools {
    use ferrobot::agent::ToolOutcome;
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::{Tool, ToolContext};
    use serde_json::json;

    #[tokio::test]
    async fn from_fn_with_an_arguments_struct() {
        use ferrobot::tool::from_fn;
        use schemars::JsonSchema;
        use serde::Deserialize;

        #[derive(Deserialize, JsonSchema)]
        struct DiskArgs {
            /// Mount point to inspect, e.g. `/` or `/home`.
            mount: String,
            /// Report sizes in human units (GiB) instead of bytes.
            human: Option<bool>,
        }

        let disk_free = from_fn(
            "disk_free",
            "Free space on a mounted filesystem.",
            |args: DiskArgs, _ctx| async move {
                if args.mount != "/" {
                    return Err(format!("no such mount point: {}", args.mount));
                }
                Ok(if args.human.unwrap_or(true) { "42 GiB".to_owned() } else { "45097156608".to_owned() })
            },
        );
        let ctx = || ToolContext::for_test("test");
        assert_eq!(disk_free.call(json!({"mount": "/"}), ctx()).await.unwrap(), "42 GiB");
        assert_eq!(
            disk_free.call(json!({"mount": "/data"}), ctx()).await.unwrap_err().message(),
            "no such mount point: /data"
        );
        let schema = &disk_free.spec().parameters;
        assert_eq!(schema["properties"]["mount"]["description"], "Mount point to inspect, e.g. `/` or `/home`.");
    }

    mod by_hand {
        use ferrobot::tool::{Tool, ToolContext, ToolError};
        use ferrobot::ToolSpec;
        use futures_util::future::BoxFuture;
        use serde_json::{Value, json};

        struct GpuInfo {
            spec: ToolSpec,
        }

        impl GpuInfo {
            fn new() -> Self {
                let schema = json!({"type": "object", "properties": {}});
                Self { spec: ToolSpec::new("gpu_info", "Name and memory of each GPU.", schema) }
            }
        }

        impl Tool for GpuInfo {
            fn spec(&self) -> &ToolSpec {
                &self.spec
            }

            fn call(&self, _arguments: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<String, ToolError>> {
                Box::pin(async {
                    let out = std::process::Command::new("nvidia-smi").arg("-L").output()?;
                    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
                })
            }

            fn availability(&self) -> Result<(), String> {
                // Listed everywhere, but on a machine without the command a call
                // answers with this reason instead of running.
                if std::path::Path::new("/usr/bin/nvidia-smi").exists() {
                    Ok(())
                } else {
                    Err("needs `nvidia-smi`".to_owned())
                }
            }
        }

        #[test]
        fn is_a_tool() {
            let gpu = GpuInfo::new();
            assert_eq!(gpu.name(), "gpu_info");
            let _ = gpu.availability();
        }
    }

    #[tokio::test]
    async fn confirmation() {
        use ferrobot::tool::from_fn;
        use schemars::JsonSchema;
        use serde::Deserialize;

        #[derive(Deserialize, JsonSchema)]
        struct DeleteArgs {
            /// Path of the file.
            path: String,
        }

        let delete_file = from_fn("delete_file", "Delete a file.", |args: DeleteArgs, _ctx| async move {
            std::fs::remove_file(&args.path).map(|()| format!("deleted {}", args.path))
        })
        .confirm("Delete {path}?");
        let provider = MockProvider::new()
            .then(MockTurn::new().tool_call("delete_file", json!({"path": "/etc/hosts"})))
            .then(MockTurn::new().text("Not allowed."));
            use ferrobot::Agent;
            use ferrobot::confirm::ConfirmRequest;

            let agent = Agent::builder()
                .provider(provider)
                .tool(delete_file)
                .confirm(|request: ConfirmRequest| async move {
                    // A bot would send `request.prompt` with Yes/No buttons and await the
                    // click; here, only files under /tmp may go.
                    request.arguments["path"].as_str().is_some_and(|p| p.starts_with("/tmp/"))
                })
                .build();
        let reply = agent.handle("test", "delete /etc/hosts").await.unwrap();
        assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
        assert_eq!(reply.tool_calls[0].content, "Cancelled by user.");
    }

    #[test]
    fn exclusive_with_a_time_out() {
        use std::time::Duration;
        use ferrobot::tool::from_fn;

        let upgrade = from_fn("apt_upgrade", "Upgrade all packages.", |_: serde_json::Value, _ctx| async { "upgraded" })
            .exclusive(true)
            .timeout(Duration::from_secs(600));
        assert!(upgrade.is_exclusive());
        assert_eq!(Tool::timeout(&upgrade), Some(Duration::from_secs(600)));
    }

    #[tokio::test]
    async fn tool_context() {
        let provider = MockProvider::new();
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::time::Duration;
        use ferrobot::{Agent, tool::from_fn};

        /// Shared by every tool through `ToolContext::state`.
        struct Counter(AtomicU64);

        let visit = from_fn("visit", "Count a visit.", |_: serde_json::Value, ctx| async move {
            let counter = ctx.state::<Counter>().expect("the agent was built with a Counter");
            counter.0.fetch_add(1, Ordering::Relaxed) + 1
        });

        let slow_scan = from_fn("scan", "Scan the network (slow).", |_: serde_json::Value, ctx| async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(30)) => "3 hosts up".to_owned(),
                () = ctx.cancellation().cancelled() => "scan stopped".to_owned(),
            }
        });

        let shutdown = from_fn("shutdown", "Power off in a minute.", |_: serde_json::Value, ctx| async move {
            ctx.notify_later("Powering off now.", Duration::from_secs(60))?;
            Ok::<_, ferrobot::tool::ToolError>("Shutdown scheduled in 60 s.")
        });

        let agent = Agent::builder()
            .provider(provider)
            .tool(visit)
            .tool(slow_scan)
            .tool(shutdown)
            .state(Counter(AtomicU64::new(0)))
            .notifier(|conversation: String, text: String| async move {
                // A bot sends `text` to the chat `conversation` here.
                println!("to {conversation}: {text}");
            })
            .build();
        assert_eq!(agent.handle("test", "/visit").await.unwrap().text, "1");
        assert_eq!(agent.handle("test", "/visit").await.unwrap().text, "2");
        assert_eq!(agent.handle("test", "/shutdown").await.unwrap().text, "Shutdown scheduled in 60 s.");
        assert!(agent.tools().set_enabled("shutdown", false));
        assert!(!agent.tools().is_enabled("shutdown"));
        agent.tools().set_enabled("shutdown", true);
    }
}

// ---- docs/providers.md ------------------------------------------------------

#[rustfmt::skip]
mod providers {
    #[cfg(feature = "responses")]
    #[test]
    fn responses() {
        use ferrobot::provider::OpenAiResponses;

        let gpt = OpenAiResponses::new("https://api.openai.com/v1")
            .model("gpt-5-mini")
            .api_key_env("OPENAI_API_KEY")
            .reasoning_effort("low");
        assert!(format!("{gpt:?}").contains("gpt-5-mini"));
    }

    #[cfg(feature = "gemini")]
    #[test]
    fn gemini() {
        use ferrobot::provider::Gemini;

        let gemini = Gemini::new()
            .model("gemini-2.5-flash")
            .api_key_env("GEMINI_API_KEY")
            .thinking(1024);
        assert!(format!("{gemini:?}").contains("gemini-2.5-flash"));
    }

    #[cfg(feature = "anthropic")]
    #[test]
    fn anthropic() {
        use ferrobot::provider::Anthropic;

        let claude = Anthropic::new()
            .model("claude-sonnet-4-20250514")
            .api_key_env("ANTHROPIC_API_KEY")
            .thinking(2048);
        assert!(format!("{claude:?}").contains("claude-sonnet-4-20250514"));
    }

    #[test]
    fn ollama() {
        use ferrobot::provider::OpenAiCompatible;

        let ollama = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
        assert_eq!(ollama.base_url(), "http://localhost:11434/v1");
    }

    #[test]
    fn servers() {
        use ferrobot::provider::OpenAiCompatible;

        let openai = OpenAiCompatible::new("https://api.openai.com/v1")
            .model("gpt-4o-mini")
            .api_key_env("OPENAI_API_KEY");
        let openrouter = OpenAiCompatible::new("https://openrouter.ai/api/v1")
            .model("qwen/qwen3-32b")
            .api_key_env("OPENROUTER_API_KEY");
        let vllm = OpenAiCompatible::new("http://gpu-box:8000/v1").model("Qwen/Qwen3-8B");
        use ferrobot::provider::Provider;
        assert_eq!(openai.model_name(), "gpt-4o-mini");
        assert_eq!(openrouter.model_name(), "qwen/qwen3-32b");
        assert_eq!(vllm.base_url(), "http://gpu-box:8000/v1");
    }

    #[test]
    fn extra_body() {
        use ferrobot::provider::OpenAiCompatible;
        use serde_json::json;

        let ollama = OpenAiCompatible::new("http://localhost:11434/v1")
            .model("qwen3:8b")
            .extra_body("seed", json!(7))
            // Ollama: a longer context window than its default.
            .extra_body("options", json!({"num_ctx": 16384}));
        let vllm = OpenAiCompatible::new("http://localhost:8000/v1")
            .model("Qwen/Qwen3-8B")
            // vLLM: turn Qwen3's thinking off.
            .extra_body("chat_template_kwargs", json!({"enable_thinking": false}));
        let openai = OpenAiCompatible::new("https://api.openai.com/v1")
            .model("o4-mini")
            .api_key_env("OPENAI_API_KEY")
            // Reasoning models want this instead of `max_tokens`.
            .extra_body("max_completion_tokens", json!(4096));
        let _ = (ollama, vllm, openai);
    }

    #[test]
    fn retries() {
        use std::time::Duration;
        use ferrobot::provider::{OpenAiCompatible, RetryPolicy};

        let patient = OpenAiCompatible::new("https://openrouter.ai/api/v1")
            .model("qwen/qwen3-32b")
            .api_key_env("OPENROUTER_API_KEY")
            .retry(
                RetryPolicy::builder()
                    .max_attempts(5) // by default, 3
                    .initial_backoff(Duration::from_secs(1)) // by default, 500 ms, doubling
                    .max_backoff(Duration::from_secs(20)) // by default, 10 s
                    .max_retry_after(Duration::from_secs(120)) // by default, 60 s
                    .build(),
            )
            .timeouts(Duration::from_secs(5), Duration::from_secs(120));
        let impatient = OpenAiCompatible::new("http://localhost:11434/v1")
            .model("qwen3:8b")
            .retry(RetryPolicy::none());
        let _ = (patient, impatient);
    }

    /// Needs a model server: compiled, not run.
    #[allow(dead_code)]
    async fn health() {
        use ferrobot::provider::{OpenAiCompatible, Provider};

        let provider = OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b");
        let health = provider.health().await;
        if !health.reachable {
            eprintln!("No model server at {}: {}", provider.base_url(), health.detail.unwrap_or_default());
        } else if health.model_present == Some(false) {
            eprintln!("The server does not have qwen3:8b; run `ollama pull qwen3:8b`.");
        }
    }
}

// ---- docs/agent.md ----------------------------------------------------------

#[rustfmt::skip]
mod agent {
    use ferrobot::testing::{MockProvider, MockTurn};
    use ferrobot::tool::from_fn;
    use serde_json::json;

    fn disk_free() -> ferrobot::tool::FnTool {
        from_fn("disk_free", "Free space.", |_: serde_json::Value, _ctx| async { "42 GiB" })
    }

    #[tokio::test]
    async fn a_conversation() -> ferrobot::Result<()> {
        let provider = MockProvider::new()
            .then(MockTurn::new().tool_call("disk_free", json!({"mount": "/"})))
            .then(MockTurn::new().text("42 GiB are free."))
            .then(MockTurn::new().text("Also 42 GiB."));
        let disk_free = disk_free();
        use std::time::Duration;
        use ferrobot::{Agent, history::MemoryHistory, provider::ModelSettings};

        let agent = Agent::builder()
            .provider(provider) // required: any Provider
            .system_prompt("You are a careful sysadmin.") // by default, none
            .tool(disk_free) // once per tool; or .tools([…])
            .history(MemoryHistory::new()) // by default, a MemoryHistory
            .settings(ModelSettings::builder().temperature(0.2).build()) // by default, the provider's
            .max_tool_rounds(10) // by default, 10
            .max_concurrent_tools(4) // by default, 4
            .tool_timeout(Duration::from_secs(60)) // by default, 60 s
            .build();
            let reply = agent.handle("alice", "How much disk is free on /?").await?;
            println!("{}", reply.text);
        assert_eq!(reply.text, "42 GiB are free.");
        use ferrobot::AgentEvent;
        use futures_util::StreamExt;

        let mut events = agent.stream("alice", "And on /home?");
        while let Some(event) = events.next().await {
            match event? {
                AgentEvent::TextDelta(text) => print!("{text}"),
                AgentEvent::ToolCallFinished(record) => eprintln!("[{}: {:?}]", record.call.name, record.outcome),
                AgentEvent::Done(reply) => println!("\n({} tokens)", reply.usage.output_tokens),
                _ => {}
            }
        }
        let reply = agent.handle("alice", "/disk_free mount=/").await?;
        assert_eq!(reply.text, "42 GiB");
        assert!(reply.finish_reason.is_none()); // no model call
        let messages = agent.history().load("alice").await?;
        assert_eq!(messages[0].text(), "How much disk is free on /?");
        agent.history().clear("alice").await?; // start over
        assert!(agent.history().load("alice").await?.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn budgets() {
        let provider = MockProvider::replying("ok");
        use ferrobot::Agent;
        use std::time::Duration;
        use ferrobot::agent::TurnBudget;

        let agent = Agent::builder()
            .provider(provider)
            .budget(
                TurnBudget::builder()
                    .wall_time(Duration::from_secs(120))
                    .tool_output_bytes(200_000)
                    .output_tokens(8_000)
                    .build(),
            )
            .build();
        assert_eq!(agent.handle("alice", "hi").await.unwrap().text, "ok");
    }

    #[tokio::test]
    async fn cancellation() {
        let agent = ferrobot::Agent::builder()
            .provider(MockProvider::new().then(MockTurn::new().text("An essay.").delay(std::time::Duration::from_secs(5))))
            .build();
            let events = agent.stream("alice", "Write a long essay.");
            let stop = events.cancellation();
            stop.cancel(); // e.g. from a Stop button's handler
            let err = events.into_reply().await.unwrap_err();
            assert!(matches!(err, ferrobot::Error::Cancelled));
    }
}

// ---- docs/getting-started.md ------------------------------------------------

#[rustfmt::skip]
mod getting_started {
    /// Needs a model server: compiled, not run.
    #[allow(dead_code)]
    async fn first_turn() -> ferrobot::Result<()> {
        use ferrobot::{Agent, provider::OpenAiCompatible};

        let agent = Agent::builder()
            .provider(OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b"))
            .system_prompt("You are a friendly assistant. Answer in one sentence.")
            .build();
        let reply = agent.handle("me", "Why is the sky blue?").await?;
        println!("{}", reply.text);
        Ok(())
    }

    /// Needs a model server: compiled, not run.
    #[allow(dead_code)]
    async fn a_tool_and_streaming() -> ferrobot::Result<()> {
        use ferrobot::{Agent, provider::OpenAiCompatible, tool};

        /// Current weather in a city.
        #[tool]
        async fn weather(
            /// City name, e.g. "Lisbon".
            city: String,
        ) -> String {
            // Call a real weather API here.
            format!("Sunny and 24 °C in {city}.")
        }

        let agent = Agent::builder()
            .provider(OpenAiCompatible::new("http://localhost:11434/v1").model("qwen3:8b"))
            .tool(weather)
            .build();
        let reply = agent.handle("me", "Should I take an umbrella in Lisbon today?").await?;
        for call in &reply.tool_calls {
            eprintln!("called {} with {}: {}", call.call.name, call.call.arguments, call.content);
        }
        println!("{}", reply.text);
        use ferrobot::AgentEvent;
        use futures_util::StreamExt;
        use std::io::Write;

        let mut events = agent.stream("me", "And in Porto?");
        while let Some(event) = events.next().await {
            match event? {
                AgentEvent::TextDelta(text) => {
                    print!("{text}");
                    std::io::stdout().flush().ok();
                }
                AgentEvent::ToolCallStarted(call) => eprintln!("\n[calling {}]", call.name),
                AgentEvent::Done(_) => println!(),
                _ => {}
            }
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_test() -> ferrobot::Result<()> {
        use ferrobot::{Agent, testing::MockProvider};

        let agent = Agent::builder().provider(MockProvider::replying("Bring a hat.")).build();
        assert_eq!(agent.handle("me", "Umbrella?").await?.text, "Bring a hat.");
        Ok(())
    }
}

// ---- docs/bots.md -----------------------------------------------------------
#[cfg(feature = "bot")]
#[rustfmt::skip]
mod bots {
use std::sync::{Arc, Mutex};

use ferrobot::bot::{Channel, ChannelError, Handler, Incoming, serve};
use ferrobot::{Agent, testing::MockProvider};
use futures_util::future::BoxFuture;

/// Delivers a script of messages and keeps what the bot posts.
#[derive(Default)]
pub struct Scripted {
    pub script: Vec<Incoming>,
    pub posted: Mutex<Vec<(String, String)>>,
}

impl Channel for Scripted {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            for message in &self.script {
                handler(message.clone()).await;
            }
            Ok(())
        })
    }

    fn post<'a>(&'a self, chat: &'a str, text: &'a str, _done: bool) -> BoxFuture<'a, Result<String, ChannelError>> {
        let mut posted = self.posted.lock().unwrap();
        posted.push((chat.to_owned(), text.to_owned()));
        let id = posted.len().to_string();
        Box::pin(async move { Ok(id) })
    }
}

#[tokio::test]
async fn the_bot_answers_in_the_chat_it_was_asked_in() {
    let channel = Arc::new(Scripted {
        script: vec![Incoming::new("chat-1", "ann", "hello")],
        ..Scripted::default()
    });
    let agent = Agent::builder().provider(MockProvider::replying("Hi Ann!")).build();
    serve(agent, channel.clone()).await.unwrap();
    assert_eq!(*channel.posted.lock().unwrap(), [("chat-1".to_owned(), "Hi Ann!".to_owned())]);
}
}
