//! The examples in `docs/*.md`, compiled and run.
//!
//! Every `rust` code block in `docs/NAME.md` appears verbatim (indentation
//! aside) in this test's module for that guide, `NAME.rs` with `-` as `_`,
//! with the setup it needs around it; `every_rust_block_in_the_docs_is_compiled_here`
//! fails when one drifts. Blocks that talk to a real model server are compiled
//! but not run.
//!
//! The modules are not formatted by rustfmt, so that they stay identical to
//! the docs.
#![cfg(feature = "openai")]
// The examples use `unwrap` as a reader's code would.
#![allow(clippy::unwrap_used)]
// Items are `pub` as a reader would write them in their own crate.
#![allow(unreachable_pub)]

use std::path::Path;

/// Declares the guides' modules and keeps the text of each for the drift
/// check. One list for both, so that no module is searched without being
/// compiled: separate `mod` lines and `include_str!`s could drift apart.
macro_rules! guides {
    ($($(#[$attr:meta])* mod $name:ident;)*) => {
        $(
            $(#[$attr])*
            #[rustfmt::skip]
            mod $name;
        )*

        /// Each guide module's name and text.
        const GUIDES: &[(&str, &str)] = &[
            $((stringify!($name), include_str!(concat!(stringify!($name), ".rs"))),)*
        ];
    };
}

guides! {
    // docs/agent.md: building an agent, events, budgets, cancellation.
    mod agent;
    // docs/bots.md: your own platform as a `Channel`.
    #[cfg(feature = "bot")]
    mod bots;
    // docs/getting-started.md: a first turn, a tool, streaming, a test.
    mod getting_started;
    // docs/history.md: `SqliteHistory` and context policies.
    #[cfg(feature = "sqlite")]
    mod history;
    // docs/multi-agent.md: agents as tools, their history, rules, budgets, events.
    mod multi_agent;
    // docs/mcp.md: MCP servers' tools, instructions.
    #[cfg(feature = "mcp")]
    mod mcp;
    // docs/permissions.md: rules, decisions, deferred approvals.
    mod permissions;
    // docs/production.md: the turn journal, in a program of your own.
    #[cfg(feature = "sqlite")]
    mod production;
    // docs/providers.md: servers, settings, retries, health, other dialects.
    mod providers;
    // docs/schedules.md: a scheduler, its tools, a manual clock in tests.
    #[cfg(all(feature = "schedule", feature = "sqlite"))]
    mod schedules;
    // docs/testing.md: `MockProvider` scripts and what to assert.
    mod testing;
    // docs/tools.md: `#[tool]`, `from_fn`, the `Tool` trait, ready-made tools.
    mod tools;
    // docs/typed-output.md: `extract`, `Output`, modes, retries, partial values.
    mod typed_output;
}

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
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/docs_examples");
    // A file here that `guides!` does not list is neither compiled nor searched.
    let mut listed: Vec<String> = GUIDES
        .iter()
        .map(|(name, _)| format!("{name}.rs"))
        .collect();
    listed.push("main.rs".to_owned());
    for entry in std::fs::read_dir(&here).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            listed.contains(&file),
            "tests/docs_examples/{file} is not listed in `guides!` in main.rs"
        );
    }
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
        let guide = file
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .replace('-', "_");
        let module = GUIDES
            .iter()
            .find(|(name, _)| *name == guide)
            .map(|(_, text)| normalized(text))
            .unwrap_or_default();
        let markdown = std::fs::read_to_string(file).unwrap();
        for (line, block) in rust_blocks(&markdown) {
            let block = normalized(&block);
            if !module
                .windows(block.len())
                .any(|window| window == block.as_slice())
            {
                let name = file
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap_or(file);
                missing.push(format!(
                    "{}:{line} (in tests/docs_examples/{guide}.rs)",
                    name.display()
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no rust blocks found under {}", docs.display());
    assert!(
        missing.is_empty(),
        "these code blocks of the docs are not in their guide's module (copy them there, \
         inside a test, so they are compiled; a new guide also needs a line in `guides!`): \
         {missing:#?}"
    );
}
