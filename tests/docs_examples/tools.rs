//! The examples of `docs/tools.md`.

use ferrobot::agent::ToolOutcome;
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{Tool, ToolContext};
use serde_json::json;

/// `#[tool]` and `#[toolbox]` (feature `macros`).
#[cfg(feature = "macros")]
mod tool_macro {
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

        #[tokio::test]
        async fn run_takes_the_injected_parameters_and_call_the_context() {
            use std::sync::Arc;
            use ferrobot::tool::{State, Tool, ToolContext};

            let inventory = || Inventory { items: vec!["nut".into(), "nut".into(), "bolt".into()] };

            // The function: its own parameters, in its order, injected ones included.
            let count = stock::run(ToolContext::for_test("t"), State(Arc::new(inventory())), "nut".into()).await;
            assert_eq!(count, 2);

            // The tool, as the agent calls it: the state travels in the context.
            let ctx = ToolContext::for_test("t").with_state(inventory());
            assert_eq!(stock.call(serde_json::json!({"item": "bolt"}), ctx).await.unwrap(), "1");
        }
    }

    mod switch {
        use ferrobot::tool::{State as Shared, ToolContext as Context};
        use ferrobot::tool;

        /// Where a switch should be: the model's to choose.
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "lowercase")]
        pub enum State {
            On,
            Off,
        }

        pub struct Lights;

        /// Switch the lights.
        #[tool]
        pub async fn switch(
            /// On or off.
            state: State,
            #[state] Shared(_lights): Shared<Lights>,
            #[ctx] ctx: &Context,
        ) -> String {
            format!("{}: {}", ctx.conversation(), matches!(state, State::On))
        }

        #[tokio::test]
        async fn a_type_of_your_own_named_state_is_an_argument() {
            use ferrobot::tool::{Tool, ToolContext};
            let _ = State::Off;
            assert_eq!(switch.spec().parameters["properties"]["state"]["enum"], serde_json::json!(["on", "off"]));
            let ctx = ToolContext::for_test("t").with_state(Lights);
            assert_eq!(switch.call(serde_json::json!({"state": "on"}), ctx).await.unwrap(), "t: true");
        }
    }

    mod derived {
        use ferrobot::tool::{Tool, ToolContext, TypedTool};

        /// Set the thermostat of a room.
        #[derive(Tool)]
        #[tool(confirm = "Set {room} to {celsius} °C?", timeout = "10s")]
        pub struct SetThermostat {
            /// Degrees Celsius.
            #[schemars(range(min = 5, max = 30))]
            pub celsius: f64,
            /// The room, in lower case, e.g. "kitchen".
            pub room: String,
        }

        impl TypedTool for SetThermostat {
            type Output = String;

            async fn call(self, ctx: ToolContext) -> String {
                format!("{} set {} to {} °C", ctx.conversation(), self.room, self.celsius)
            }
        }

        #[tokio::test]
        async fn the_struct_and_the_tool_are_testable() {
            use ferrobot::tool::{Tool, ToolContext, TypedTool};

            let direct = SetThermostat { celsius: 20.0, room: "hall".into() };
            assert_eq!(direct.call(ToolContext::for_test("t")).await, "t set hall to 20 °C");

            let tool = SetThermostat::tool();
            let out = tool.call(serde_json::json!({"celsius": 21, "room": "hall"}), ToolContext::for_test("t")).await;
            assert_eq!(out.unwrap(), "t set hall to 21 °C");
            assert!(tool.check_arguments(&serde_json::json!({"celsius": 40, "room": "hall"})).is_err());
        }
    }

    #[tokio::test]
    async fn a_derived_tool_registers_with_tool() {
        let mock = MockProvider::new()
            .then(MockTurn::new().tool_call("set_thermostat", json!({"celsius": 21, "room": "hall"})))
            .then(MockTurn::new().text("Done."));
        let agent = Agent::builder()
            .provider(mock)
            .tool(derived::SetThermostat::tool())
            .confirm(|_: ferrobot::confirm::ConfirmRequest| async { true })
            .build();
        let reply = agent.handle("a", "warm the hall").await.unwrap();
        assert_eq!(reply.tool_calls[0].content, "a set hall to 21 °C");
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

    mod thermostat {
        use ferrobot::tool;

        /// Only rooms with a radiator can be heated.
        fn heated(_celsius: &f64, room: &str) -> Result<(), String> {
            if room == "attic" {
                return Err("the attic has no radiator; pick another room".into());
            }
            Ok(())
        }

        /// Set the thermostat of a room.
        #[tool(confirm = "Set {room} to {celsius} °C?", check = heated)]
        pub async fn set_thermostat(
            /// Degrees Celsius.
            #[schemars(range(min = 5, max = 30))]
            celsius: f64,
            /// The room, in lower case, e.g. "kitchen".
            #[schemars(length(min = 1, max = 20), regex(pattern = r"^[a-z]+$"))]
            room: String,
        ) -> String {
            format!("{room} set to {celsius} °C")
        }
    }

    #[test]
    fn arguments_are_checked_before_confirmation() {
        use ferrobot::tool::Tool;
        let tool = thermostat::set_thermostat;
        let cold = tool.check_arguments(&json!({"celsius": 4, "room": "kitchen"})).unwrap_err();
        assert!(cold.message().contains("- `celsius`: 4 is less than the minimum of 5"), "{cold}");
        let attic = tool.check_arguments(&json!({"celsius": 20, "room": "attic"})).unwrap_err();
        assert!(attic.message().contains("- the attic has no radiator; pick another room"), "{attic}");
        assert!(tool.check_arguments(&json!({"celsius": 20, "room": "kitchen"})).is_ok());
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
    use ferrobot::tool::{Tool, ToolContext, ToolError, ToolOutput};
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

        fn call(&self, _arguments: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
            Box::pin(async {
                let out = std::process::Command::new("nvidia-smi").arg("-L").output()?;
                Ok(String::from_utf8_lossy(&out.stdout).into_owned().into())
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
        ctx.notify_later("Powering off now.", Duration::from_secs(60)).await?;
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

/// Ready-made tools (feature `tools`).
#[cfg(feature = "tools")]
mod ready_made {
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
