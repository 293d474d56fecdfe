//! Parts of a test's setup that live outside this repository: the recorded
//! traffic in `../shared/corpus`, the real model server, the npm MCP
//! servers, and later a database server or a browser.
//!
//! Every test that needs one follows one rule when it is missing. Under CI
//! (the `CI` environment variable set, and not empty, `false` or `0`) the
//! test fails, naming what is missing: a suite that passes by skipping
//! proves nothing. Elsewhere the test skips loudly: it prints a line starting
//! with `SKIPPED:` that names the test and the part, and returns without
//! checking anything, so a checkout without the part still runs the rest.

use std::path::{Path, PathBuf};

/// `../shared` beside the checkout: the recorded corpus and the real server.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
}

/// A category of the recorded traffic in `../shared/corpus`, or `None` after
/// a loud skip when it is missing outside CI.
///
/// # Panics
/// Under CI, when it is missing.
pub fn corpus(category: &str) -> Option<PathBuf> {
    required(
        shared_dir().join("corpus").join(category),
        "the recorded traffic corpus",
    )
}

/// The version of the npm MCP servers the tests use, which `.ci/run`
/// installs.
pub const MCP_SERVERS_VERSION: &str = "2026.8.31";

/// Where `.ci/run` installs the npm MCP servers: `FERROBOT_MCP_HOME`, else
/// `~/.cache/ferrobot-mcp`.
pub fn mcp_home() -> PathBuf {
    match std::env::var_os("FERROBOT_MCP_HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/ferrobot-mcp"),
    }
}

/// The entry script (`dist/index.js`) of the npm package
/// `@modelcontextprotocol/<name>` installed in [`mcp_home`] at
/// [`MCP_SERVERS_VERSION`], with `node` on `PATH`; or `None` after a loud
/// skip when either is missing outside CI.
///
/// # Panics
/// Under CI, when it is missing or at another version.
pub fn mcp_server(name: &str) -> Option<PathBuf> {
    let package = mcp_home()
        .join("node_modules/@modelcontextprotocol")
        .join(name);
    let what = format!(
        "the npm MCP server @modelcontextprotocol/{name}@{MCP_SERVERS_VERSION} (.ci/run installs it)"
    );
    let manifest = required(package.join("package.json"), &what)?;
    let version = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.trim_start().starts_with("\"version\""))
                .map(str::to_owned)
        })
        .unwrap_or_default();
    if !version.contains(MCP_SERVERS_VERSION) {
        missing(&format!(
            "{what} is at another version in {} ({})",
            package.display(),
            version.trim()
        ));
        return None;
    }
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        missing("`node` is not on PATH, and the npm MCP servers need it");
        return None;
    }
    required(package.join("dist/index.js"), &what)
}

/// `path` if it exists; else the rule above: `None` after a loud skip, or a
/// panic under CI. `what` names the part in messages.
///
/// # Examples
/// ```
/// let here = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
/// assert_eq!(ferrobot_testkit::outside::required(here.clone(), "this checkout"), Some(here));
/// ```
///
/// # Panics
/// Under CI, when `path` does not exist.
pub fn required(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    missing(&format!("{what} is missing at {}", path.display()));
    None
}

/// Applies the rule to a part found missing, described by `why` ("the real
/// model server did not start: …"): prints the skip, or panics under CI.
///
/// # Panics
/// Under CI, always.
pub fn missing(why: &str) {
    // libtest runs each test on a thread named after it.
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    match decide(why, test, std::env::var("CI").ok().as_deref()) {
        Missing::Fail(message) => panic!("{message}"),
        Missing::Skip(message) => eprintln!("{message}"),
    }
}

/// What a test does when an outside part is missing.
#[derive(Debug, PartialEq, Eq)]
pub enum Missing {
    /// Under CI: it fails with this message.
    Fail(String),
    /// Elsewhere: it prints this line and returns.
    Skip(String),
}

/// The rule's decision for a missing part, given the value of the `CI`
/// variable, so that both ways can be tested on any machine.
pub fn decide(why: &str, test: &str, ci: Option<&str>) -> Missing {
    match ci.filter(|v| is_ci(v)) {
        Some(ci) => Missing::Fail(format!("{why}, and it is required under CI (CI={ci})")),
        None => Missing::Skip(format!("SKIPPED: {test}: {why}")),
    }
}

/// Whether a value of the `CI` variable means the tests run under CI: any
/// value but empty, `false` or `0`.
pub fn is_ci(value: &str) -> bool {
    let value = value.trim();
    !(value.is_empty() || value.eq_ignore_ascii_case("false") || value == "0")
}

/// Whether this process runs under CI.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| is_ci(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_value_but_empty_false_or_zero() {
        for value in ["true", "1", "TRUE", "yes"] {
            assert!(is_ci(value), "{value:?}");
        }
        for value in ["", " ", "false", "False", "0"] {
            assert!(!is_ci(value), "{value:?}");
        }
    }

    #[test]
    fn a_missing_outside_part_fails_under_ci_and_skips_loudly_elsewhere() {
        let why = "the recorded traffic corpus is missing at /nonexistent/corpus/01";
        assert_eq!(
            decide(why, "replay", Some("true")),
            Missing::Fail(
                "the recorded traffic corpus is missing at /nonexistent/corpus/01, \
                 and it is required under CI (CI=true)"
                    .to_owned()
            )
        );
        assert!(matches!(decide(why, "replay", Some("1")), Missing::Fail(_)));
        for ci in [None, Some(""), Some("false"), Some("0")] {
            assert_eq!(
                decide(why, "replay", ci),
                Missing::Skip(
                    "SKIPPED: replay: the recorded traffic corpus is missing at \
                     /nonexistent/corpus/01"
                        .to_owned()
                ),
                "CI={ci:?}"
            );
        }
    }

    /// An npm MCP server that isn't installed follows the same rule.
    #[test]
    fn a_missing_mcp_server_follows_this_process_ci_variable() {
        let found = std::panic::catch_unwind(|| mcp_server("server-that-does-not-exist"));
        if under_ci() {
            assert!(found.is_err(), "under CI a missing part fails the test");
        } else {
            assert_eq!(found.ok(), Some(None), "elsewhere it is skipped");
        }
    }

    /// The decision above, wired to this process's own `CI` variable, on a
    /// corpus category that does not exist: run with and without `CI=true`
    /// to see both ways.
    #[test]
    fn a_missing_corpus_follows_this_process_ci_variable() {
        let found = std::panic::catch_unwind(|| corpus("no_such_category"));
        if under_ci() {
            assert!(found.is_err(), "under CI a missing part fails the test");
        } else {
            assert_eq!(found.ok(), Some(None), "elsewhere it is skipped");
        }
    }
}
