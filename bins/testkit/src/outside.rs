//! Outside parts a test needs (the recorded corpus, the real model server,
//! PostgreSQL, npm packages, a browser): missing locally, the test skips and
//! says so loudly; missing under CI (`CI` set and not `false` or `0`), the
//! test fails. A test that needs one can never pass by checking nothing.

use std::path::{Path, PathBuf};

/// Whether this run is CI's: `CI` is set, and not to `false`, `0` or nothing.
pub fn under_ci() -> bool {
    ci_says(std::env::var("CI").ok().as_deref())
}

fn ci_says(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// What to do about a missing outside part.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// Locally: skip, with this line on stderr.
    Skip(String),
    /// Under CI: fail with this message.
    Fail(String),
}

/// The decision for a missing `what` (a sentence naming the part and where
/// it was looked for), given whether this is CI.
pub fn decide(what: &str, ci: bool) -> Missing {
    if ci {
        Missing::Fail(format!(
            "{what} is missing, and CI must run every test: install or start it in .ci/run"
        ))
    } else {
        Missing::Skip(format!(
            "SKIPPED: {what} is missing; this test did not run (under CI=true it fails)"
        ))
    }
}

/// Handles a missing outside part: prints the skip and returns, or panics
/// under CI.
///
/// # Panics
/// Under CI, always: that is the point.
pub fn missing(what: &str) {
    match decide(what, under_ci()) {
        Missing::Skip(line) => eprintln!("{line}"),
        Missing::Fail(message) => panic!("{message}"),
    }
}

/// `path` if it exists; otherwise [`missing`] (a loud skip locally, a
/// failure under CI) and `None`.
///
/// # Examples
/// ```
/// let here = ferrobot_testkit::outside::required_path(std::path::Path::new("."), "the checkout");
/// assert!(here.is_some());
/// ```
///
/// # Panics
/// Under CI when `path` does not exist.
pub fn required_path(path: &Path, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_owned());
    }
    missing(&format!("{what} ({})", path.display()));
    None
}

/// `../shared` beside the checkout: the recorded corpus and the real server.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
}

/// A recorded-traffic category of `../shared/corpus`, or `None` after a
/// loud skip (a failure under CI) when it isn't there.
pub fn corpus(category: &str) -> Option<PathBuf> {
    required_path(
        &shared_dir().join("corpus").join(category),
        &format!("the recorded traffic `{category}`"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_value_but_false_zero_or_empty() {
        assert!(ci_says(Some("true")));
        assert!(ci_says(Some("1")));
        assert!(!ci_says(Some("false")));
        assert!(!ci_says(Some("0")));
        assert!(!ci_says(Some("")));
        assert!(!ci_says(None));
    }

    #[test]
    fn missing_parts_skip_locally_and_fail_under_ci() {
        let what = "the recorded traffic `x` (/nowhere)";
        assert!(matches!(decide(what, false), Missing::Skip(line) if line.starts_with("SKIPPED: ") && line.contains("/nowhere")));
        assert!(matches!(decide(what, true), Missing::Fail(m) if m.contains("/nowhere") && m.contains(".ci/run")));
    }
}
