use ferrobot::tool::{Tool, ToolContext, TypedTool};

struct Report;

/// Report.
#[derive(Tool)]
struct MakeReport;

impl TypedTool for MakeReport {
    type Output = Report;

    async fn call(self, _ctx: ToolContext) -> Report {
        Report
    }
}

fn main() {
    let _ = MakeReport::tool();
}
