use ferrobot::{tool, toolbox};

struct Thing;

#[toolbox]
impl Thing {
    /// Consume.
    #[tool]
    async fn consume(self) {}
}

fn main() {}
