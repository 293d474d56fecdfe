use ferrobot::tool;

struct Thing;

impl Thing {
    /// Echo.
    #[tool]
    async fn echo(&self, text: String) {}
}

fn main() {}
