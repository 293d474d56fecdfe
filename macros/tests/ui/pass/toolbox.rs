use ferrobot::{Agent, testing::MockProvider, tool, toolbox};

struct Notes {
    lines: std::sync::Mutex<Vec<String>>,
}

#[toolbox]
impl Notes {
    /// Add a note.
    #[tool]
    async fn add_note(&self, /** The note. */ text: String) {
        self.lines.lock().unwrap().push(text);
    }

    /// Count the notes.
    #[tool(name = "count_notes")]
    fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }
}

fn main() {
    let notes = Notes { lines: Default::default() };
    let _agent = Agent::builder().provider(MockProvider::replying("ok")).tools(notes).build();
}
