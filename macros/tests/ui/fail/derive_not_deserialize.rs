use ferrobot::tool::{Tool, ToolContext, TypedTool};

struct Opaque;

/// Use it.
#[derive(Tool)]
struct UseIt {
    /// The value.
    value: Opaque,
    /// How many.
    n: u32,
}

impl TypedTool for UseIt {
    type Output = u32;

    async fn call(self, _ctx: ToolContext) -> u32 {
        let _ = self.value;
        self.n
    }
}

fn main() {
    let _ = UseIt::tool();
}
