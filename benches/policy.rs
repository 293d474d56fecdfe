//! The permission policy's cost per tool call: what the agent pays before
//! every call it decides. Three calls against a 20-rule policy: a plain
//! tool, a tool whose path argument is made canonical, and a command tool
//! whose `sh -c` script is read command by command.
//!
//! Run with: `cargo bench --bench policy`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ferrobot::ToolSpec;
use ferrobot::policy::{Policy, Rule};
use ferrobot::tool::{Tool, ToolContext, ToolError, ToolOutput};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

/// A tool that says which program it would run, as command tools do.
struct Shell(ToolSpec);

impl Tool for Shell {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn call(&self, _: Value, _: ToolContext) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async { Ok("ran".into()) })
    }

    fn command_line(&self, arguments: &Value) -> Option<Vec<String>> {
        let script = arguments["script"].as_str().unwrap_or_default();
        Some(vec!["sh".into(), "-c".into(), script.into()])
    }
}

fn policy() -> Policy {
    let mut policy = Policy::new().rule(Rule::ask("*"));
    for i in 0..16 {
        policy = policy.rule(Rule::allow(format!("tool_{i}")));
    }
    policy
        .rule(Rule::allow("read_file").argument("path", "/srv/notes/**"))
        .rule(Rule::deny("read_file").argument("path", "~/.ssh/**"))
        .rule(Rule::allow("shell").command("git *"))
}

fn evaluate(c: &mut Criterion) {
    let policy = policy();
    let plain = ferrobot::tool::from_fn("tool_7", "A tool.", |_: Value, _| async { "ok" });
    let read = ferrobot::tool::from_fn("read_file", "Read.", |_: Value, _| async { "ok" });
    let shell = Shell(ToolSpec::new(
        "shell",
        "Run a script.",
        json!({"type": "object"}),
    ));
    let no_arguments = json!({});
    let path = json!({"path": "/srv/notes/../notes/todo.md"});
    let script = json!({"script": "git status && git log -n 3 | head -20; git diff --stat"});
    let mut group = c.benchmark_group("policy");
    group.bench_function("plain tool", |b| {
        b.iter(|| policy.evaluate(black_box(&plain), black_box(&no_arguments), &[]));
    });
    group.bench_function("path argument", |b| {
        b.iter(|| policy.evaluate(black_box(&read), black_box(&path), &[]));
    });
    group.bench_function("sh -c script", |b| {
        b.iter(|| policy.evaluate(black_box(&shell), black_box(&script), &[]));
    });
    group.finish();
}

criterion_group!(benches, evaluate);
criterion_main!(benches);
