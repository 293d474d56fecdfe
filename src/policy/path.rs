//! Paths made canonical before they are matched, so a pattern such as
//! `/home/u/**` can't be escaped with `..` or a symbolic link.

use std::path::{Component, Path, PathBuf};

/// The user's home folder, for `~`.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `text` with a leading `~` (alone or before `/`) replaced by the home
/// folder; unchanged when there is none.
pub(crate) fn expand_home(text: &str) -> PathBuf {
    if let Some(rest) = text.strip_prefix('~')
        && (rest.is_empty() || rest.starts_with('/'))
        && let Some(home) = home()
    {
        return home.join(rest.trim_start_matches('/'));
    }
    PathBuf::from(text)
}

/// `text` as the absolute path it names: `~` expanded, made absolute
/// against the process's working folder, every `..` and symbolic link
/// resolved along the existing part, and the rest (which doesn't exist
/// yet) appended with `..` taken lexically.
///
/// Walking one component at a time, rather than canonicalising the longest
/// existing prefix and appending the rest, gets `link/../x` right: the
/// kernel resolves `link` first, and so must we.
pub(crate) fn canonical(text: &str) -> PathBuf {
    let path = expand_home(text);
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir().map_or(path.clone(), |cwd| cwd.join(&path))
    };
    let mut resolved = PathBuf::new();
    // Once a component doesn't exist, nothing under it does: no more
    // file-system calls.
    let mut exists = true;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => resolved.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                resolved.push(name);
                if exists {
                    match std::fs::canonicalize(&resolved) {
                        Ok(real) => resolved = real,
                        // A dangling link still points somewhere: follow
                        // its text as the kernel would on creating it.
                        Err(_) => match std::fs::read_link(&resolved) {
                            Ok(target) => {
                                resolved.pop();
                                let target = resolved.join(target);
                                resolved = lexical(&target);
                                exists = false;
                            }
                            Err(_) => exists = false,
                        },
                    }
                }
            }
        }
    }
    resolved
}

/// `path` with `.` and `..` taken lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `pattern` (a path pattern) with `~` expanded and its literal folders
/// made canonical, as values are, so `/tmp/**` still matches where `/tmp`
/// is a link.
pub(crate) fn canonical_pattern(pattern: &str) -> String {
    let (dir, rest) = super::pattern::Pattern::split_literal_dir(pattern);
    if dir.is_empty() {
        // `~` alone: no folder before any wildcard.
        return canonical(pattern).to_string_lossy().into_owned();
    }
    let dir = canonical(dir);
    let dir = dir.to_string_lossy();
    if rest.is_empty() {
        dir.into_owned()
    } else if dir.ends_with('/') {
        format!("{dir}{rest}")
    } else {
        format!("{dir}/{rest}")
    }
}

/// Whether `value` is `prefix` or inside it, both made canonical and
/// compared by whole components: `/srv/a` covers `/srv/a/b`, not `/srv/ab`.
pub(crate) fn is_within(value: &str, prefix: &str) -> bool {
    canonical(value).starts_with(canonical(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_resolved() {
        assert_eq!(
            canonical("/nonexistent-x/a/../b"),
            PathBuf::from("/nonexistent-x/b")
        );
        assert_eq!(canonical("/nonexistent-x/../../etc"), canonical("/etc"));
        assert_eq!(canonical("/a/./b/."), PathBuf::from("/a/b"));
    }

    #[test]
    fn relative_paths_start_at_the_working_folder() {
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(
            canonical("some-missing-file"),
            cwd.join("some-missing-file")
        );
    }

    #[test]
    fn prefixes_are_whole_components() {
        assert!(is_within("/srv/a/b", "/srv/a"));
        assert!(is_within("/srv/a", "/srv/a/"));
        assert!(!is_within("/srv/ab", "/srv/a"));
        assert!(!is_within("/srv/a/../b", "/srv/a"));
    }
}
