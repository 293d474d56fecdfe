//! Glob patterns over tool names, argument values and commands.
//!
//! A small matcher of our own rather than `glob` or `globset`: rules need
//! two modes (text, where `*` is any run of characters, and paths, where
//! `*` stays in a folder and `**` crosses folders), a lenient reading that
//! never fails during a call (a bad pattern is reported by
//! [`Policy::check`](super::Policy::check) when the configuration is
//! loaded), and nothing more. `globset` would bring `regex` and its
//! automata into every build of the library for patterns a few dozen
//! characters long.

/// How `*` treats `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `*` is any run of characters, `/` included: tool names, commands,
    /// arguments that aren't paths.
    Text,
    /// `*` and `?` stay within a folder; `**` as a whole segment crosses
    /// folders, and a trailing `/**` also matches the folder itself.
    Path,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    One,
    /// `[…]`: ranges, possibly negated with `!` or `^`.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// `*` (in text mode, `**` too).
    Star,
    /// `**/` in path mode: nothing, or any run ending in `/`.
    DeepDir,
    /// `/**` at the end in path mode: nothing, or `/` and anything.
    DeepEnd,
    /// `**` not a whole segment in path mode: crosses folders (and
    /// [`Pattern::problem`] reports it).
    Deep,
}

/// A compiled glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    tokens: Vec<Token>,
    mode: Mode,
    problem: Option<String>,
}

/// Whether `text` matches the glob `pattern`: without a wildcard, whether
/// they are equal; `*` alone in text mode matches anything. Most rules name
/// tools by name, and every rule is matched for every call: those need no
/// pattern built.
pub(crate) fn matches(pattern: &str, text: &str, mode: Mode) -> bool {
    if !pattern.contains(['*', '?', '[']) {
        return pattern == text;
    }
    if pattern == "*" && mode == Mode::Text {
        return true;
    }
    Pattern::new(pattern, mode).matches(text)
}

impl Pattern {
    /// Reads `text` in `mode`. Never fails: what can't be read is taken
    /// literally and recorded in [`problem`](Self::problem).
    pub(crate) fn new(text: &str, mode: Mode) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let mut tokens = Vec::new();
        let mut problem = None;
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    let mut stars = 1;
                    while chars.get(i + stars) == Some(&'*') {
                        stars += 1;
                    }
                    if mode == Mode::Text || stars == 1 {
                        if stars > 2 && mode == Mode::Path {
                            problem.get_or_insert_with(|| {
                                "more than two `*` in a row; write `*` (within a folder) or `**` (across folders)".to_owned()
                            });
                        }
                        tokens.push(Token::Star);
                    } else {
                        let starts_segment = i == 0 || chars[i - 1] == '/';
                        let next = chars.get(i + stars);
                        if stars > 2 {
                            problem.get_or_insert_with(|| {
                                "more than two `*` in a row; write `*` (within a folder) or `**` (across folders)".to_owned()
                            });
                        }
                        if starts_segment && next == Some(&'/') {
                            tokens.push(Token::DeepDir);
                            i += 1; // the `/` is part of the token
                        } else if starts_segment
                            && next.is_none()
                            && tokens.last() == Some(&Token::Literal('/'))
                        {
                            tokens.pop();
                            tokens.push(Token::DeepEnd);
                        } else if starts_segment && next.is_none() {
                            tokens.push(Token::Deep);
                        } else {
                            problem.get_or_insert_with(|| {
                                "`**` must be a whole path segment, as in `/srv/**/notes` or `/srv/**`".to_owned()
                            });
                            tokens.push(Token::Deep);
                        }
                    }
                    i += stars;
                }
                '?' => {
                    tokens.push(Token::One);
                    i += 1;
                }
                '[' => match read_class(&chars[i + 1..]) {
                    Some((token, used)) => {
                        tokens.push(token);
                        i += 1 + used;
                    }
                    None => {
                        problem.get_or_insert_with(|| {
                            "`[` without its `]`; close the class, or write `[[]` for a literal `[`"
                                .to_owned()
                        });
                        tokens.push(Token::Literal('['));
                        i += 1;
                    }
                },
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Self {
            tokens,
            mode,
            problem,
        }
    }

    /// What is wrong with the pattern as written, if anything.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Whether `text` matches the whole pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        let m = text.len();
        // `next[j]`: whether tokens i+1.. match text[j..]; `here[j]` the
        // same for tokens i.. — two rows of the table, not the whole table.
        let mut next = vec![false; m + 1];
        next[m] = true;
        let mut here = vec![false; m + 1];
        let crosses = |c: char| self.mode == Mode::Text || c != '/';
        for token in self.tokens.iter().rev() {
            for j in (0..=m).rev() {
                let at = text.get(j).copied();
                let step = |rest: &[bool]| rest.get(j + 1).copied().unwrap_or(false);
                here[j] = match token {
                    Token::Literal(c) => at == Some(*c) && step(&next),
                    Token::One => at.is_some_and(crosses) && step(&next),
                    Token::Class { negated, ranges } => {
                        at.is_some_and(|c| {
                            crosses(c)
                                && ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
                        }) && step(&next)
                    }
                    Token::Star => next[j] || (at.is_some_and(crosses) && step(&here)),
                    Token::Deep => next[j] || (at.is_some() && step(&here)),
                    Token::DeepDir => next[j] || (j + 1..=m).any(|k| text[k - 1] == '/' && next[k]),
                    Token::DeepEnd => j == m || (at == Some('/') && next[m]),
                };
            }
            std::mem::swap(&mut next, &mut here);
        }
        next[0]
    }

    pub(crate) fn split_literal_dir(text: &str) -> (&str, &str) {
        let wild = text.find(['*', '?', '[']).unwrap_or(text.len());
        match text[..wild].rfind('/') {
            Some(0) => ("/", &text[1..]),
            Some(slash) => (&text[..slash], &text[slash + 1..]),
            None => ("", text),
        }
    }
}

/// Reads a class after its `[`: the token and how many characters it used,
/// `]` included; `None` when it isn't closed.
fn read_class(chars: &[char]) -> Option<(Token, usize)> {
    let mut i = 0;
    let negated = matches!(chars.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    // A `]` first is a member, as in POSIX.
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            ranges.push((c, chars[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
    None
}

/// Whether an argument pattern is about paths: it starts with `/` or `~/`
/// (or is `~`).
pub(crate) fn is_path_pattern(pattern: &str) -> bool {
    pattern.starts_with('/') || pattern.starts_with("~/") || pattern == "~"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: &str, t: &str) -> bool {
        Pattern::new(p, Mode::Text).matches(t)
    }

    fn path(p: &str, t: &str) -> bool {
        Pattern::new(p, Mode::Path).matches(t)
    }

    #[test]
    fn text_stars_cross_everything() {
        assert!(text("git status*", "git status --short"));
        assert!(text("*", ""));
        assert!(text("read_*", "read_file"));
        assert!(!text("read_*", "write_file"));
        assert!(text("rm *", "rm -rf /a/b"));
        assert!(text("a?c", "abc"));
        assert!(!text("a?c", "ac"));
        assert!(text("exact", "exact"));
        assert!(!text("exact", "exactly"));
    }

    #[test]
    fn classes_ranges_and_negation() {
        assert!(text("file[0-9]", "file7"));
        assert!(!text("file[0-9]", "filex"));
        assert!(text("file[!0-9]", "filex"));
        assert!(text("x[]]", "x]"));
        assert!(text("[[]", "["));
    }

    #[test]
    fn an_unclosed_class_is_literal_and_reported() {
        let p = Pattern::new("a[b", Mode::Text);
        assert!(p.matches("a[b"));
        assert!(
            p.problem()
                .is_some_and(|m| m.contains("`[` without its `]`"))
        );
        assert_eq!(Pattern::new("a[b]", Mode::Text).problem(), None);
    }

    #[test]
    fn path_stars_stay_in_a_folder() {
        assert!(path("/srv/*.md", "/srv/a.md"));
        assert!(!path("/srv/*.md", "/srv/sub/a.md"));
        assert!(!path("/srv/?", "/srv/a/b"));
        assert!(path("/srv/**", "/srv/a/b/c"));
        assert!(
            path("/srv/**", "/srv"),
            "a trailing /** covers the folder itself"
        );
        assert!(!path("/srv/**", "/srvx"));
        assert!(!path("/srv/**", "/srvx/a"));
        assert!(path("/srv/**/x.md", "/srv/x.md"));
        assert!(path("/srv/**/x.md", "/srv/a/b/x.md"));
        assert!(!path("/srv/**/x.md", "/srv/a/bx.md"));
        assert!(path("**", "/anything/at/all"));
    }

    #[test]
    fn misplaced_double_stars_are_reported() {
        assert!(Pattern::new("/srv/a**", Mode::Path).problem().is_some());
        assert!(Pattern::new("/srv/***", Mode::Path).problem().is_some());
        assert_eq!(Pattern::new("/srv/**/a/**", Mode::Path).problem(), None);
        assert_eq!(Pattern::new("a**b", Mode::Text).problem(), None);
    }

    #[test]
    fn literal_folders_split_off() {
        assert_eq!(
            Pattern::split_literal_dir("/srv/notes/*.md"),
            ("/srv/notes", "*.md")
        );
        assert_eq!(
            Pattern::split_literal_dir("/srv/notes/**"),
            ("/srv/notes", "**")
        );
        assert_eq!(Pattern::split_literal_dir("/*"), ("/", "*"));
        assert_eq!(
            Pattern::split_literal_dir("/etc/passwd"),
            ("/etc", "passwd")
        );
    }
}
