use ferrobot::tool::Tool;

#[derive(Tool)]
#[tool(confirm = "Delete {file}?", timeout = "soon")]
struct Delete(String);

/// Generic.
#[derive(Tool)]
struct Generic<T> {
    /// A value.
    value: T,
}

fn main() {
    let _ = Delete::tool();
}
