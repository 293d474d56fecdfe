//! `#[derive(Tool)]` beside `use ferrobot::tool;` (the attribute and the
//! module), and with the struct deriving serde's and schemars' traits too.
use ferrobot::tool::{Tool, ToolContext, TypedTool};
use ferrobot::{Agent, testing::MockProvider, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Units for a report.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Bytes,
    Gigabytes,
}

#[derive(Serialize)]
struct Report {
    free: u64,
}

/// Show free disk space.
#[derive(Deserialize, JsonSchema, Tool)]
#[serde(rename_all = "camelCase")]
#[tool(name = "disk", confirm = "Inspect {mountPoint}?", timeout = "5s", exclusive, retries = 1)]
struct DiskFree {
    /// The mount point.
    mount_point: String,
    /// The unit.
    unit: Option<Unit>,
}

impl TypedTool for DiskFree {
    type Output = Result<Report, std::io::Error>;

    async fn call(self, ctx: ToolContext) -> Self::Output {
        let _ = (ctx.conversation(), self.mount_point, self.unit.map(|u| matches!(u, Unit::Bytes)));
        Ok(Report { free: 1 })
    }
}

/// Say hello.
#[derive(Tool)]
struct Hello;

impl TypedTool for Hello {
    type Output = &'static str;

    async fn call(self, _ctx: ToolContext) -> &'static str {
        "hello"
    }
}

/// Add one.
#[tool]
fn add_one(/** The number. */ n: i64) -> i64 {
    n + 1
}

fn main() {
    let _agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(DiskFree::tool())
        .tool(Hello::tool())
        .tool(add_one)
        .build();
    let disk = DiskFree::tool();
    assert_eq!(disk.name(), "disk");
    assert_eq!(Hello::tool().name(), "hello");
    let keys: Vec<_> = disk.spec().parameters["properties"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["mountPoint", "unit"]);
}
