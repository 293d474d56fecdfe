//! The shell reader: what a command tool's call would run, command by
//! command, for the rules and the floor.
//!
//! A command tool runs an argv, never a shell line, but a tools file can
//! declare `["sh", "-c", "{script}"]`, and then the model writes the
//! script. This reader splits such a script into its simple commands and
//! takes off the wrappers that run another command (`sudo -u x`, `env`,
//! `timeout 5`, `VAR=x`, `/bin/` …), so that `rm` rules see `rm` however it
//! is spelled.
//!
//! It is small and strict on purpose: quotes, backslashes, comments and
//! the operators `;` `&&` `||` `|` `&` and newline, nothing more. Whatever
//! else it meets makes the reading *doubtful* ([`Reading::doubt`]), which
//! turns an allow into an ask: substitutions (`$(…)`, backticks, `<(…)`),
//! parameter expansion anywhere (`$x`, `${x}`: its value is unknown here),
//! `eval`, `source`, `exec`, `xargs`, shells inside the script,
//! redirections and here-documents, keywords and compound commands (`if`,
//! `for`, `{`, `(`, functions), wildcards in a program's name, unclosed
//! quotes. It still reads on past them, into substitutions and `eval`'s and
//! nested shells' scripts, so deny rules and the floor see every command it
//! could find.
//!
//! Not `brush-parser`, a full bash parser: it would bring insta, pest,
//! cached and two versions of syn into every user's build (about 66 s of a
//! cold build on two cores), and a complete grammar isn't the point: what
//! this reader can't vouch for is asked about.

/// How deep `eval`, `sh -c` and substitutions are read into.
const MAX_DEPTH: usize = 8;

/// One simple command, wrappers taken off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// The program (without its folder) and its arguments.
    pub(crate) argv: Vec<String>,
    /// Where its output is redirected to (`> file`).
    pub(crate) writes: Vec<String>,
}

impl Command {
    /// The command as a shell would read it back: `git commit -m 'a b'`.
    pub(crate) fn text(&self) -> String {
        quote_all(&self.argv)
    }
}

/// What a command line runs, as far as the reader could tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// Every simple command found, wrappers taken off.
    pub(crate) commands: Vec<Command>,
    /// The lines as given: the quoted argv, and each script read.
    pub(crate) raw: Vec<String>,
    /// Why the reading can't be trusted to be complete, if it can't.
    pub(crate) doubt: Option<String>,
}

impl Reading {
    fn doubt(&mut self, why: impl FnOnce() -> String) {
        if self.doubt.is_none() {
            self.doubt = Some(why());
        }
    }
}

/// Reads what `argv` (a command tool's command line) runs.
pub(crate) fn read_argv(argv: &[String]) -> Reading {
    let mut reading = Reading {
        raw: vec![quote_all(argv)],
        ..Reading::default()
    };
    normalize(argv, Vec::new(), 0, &mut reading);
    reading
}

/// `words` joined, each quoted only where a shell needs it.
pub(crate) fn quote_all(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A word as read: its text with quotes taken off.
#[derive(Debug, Default)]
struct Word {
    text: String,
    /// It holds an unquoted `*`, `?` or `[`.
    wild: bool,
    /// Any part of it was quoted or escaped.
    quoted: bool,
}

/// A simple command before its wrappers are taken off.
#[derive(Debug, Default)]
struct Simple {
    words: Vec<Word>,
    writes: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for",
    "in", "function", "select", "!", "[[", "]]", "{", "}", "coproc",
];

/// Reads `script`, adding its commands to `reading`.
fn read_script(script: &str, depth: usize, reading: &mut Reading) {
    if depth > MAX_DEPTH {
        reading.doubt(|| "scripts nested too deep to read".to_owned());
        return;
    }
    reading.raw.push(script.to_owned());
    let mut lexer = Lexer {
        chars: script.chars().collect(),
        pos: 0,
        depth,
        reading,
        found: Vec::new(),
    };
    lexer.script(None);
    let found = std::mem::take(&mut lexer.found);
    for simple in found {
        let mut words = simple.words;
        // `then rm x`: the keywords come off so the commands inside a
        // compound are still matched by deny rules and the floor.
        while let Some(first) = words.first()
            && !first.quoted
            && KEYWORDS.contains(&first.text.as_str())
        {
            reading.doubt(|| format!("the shell keyword `{}`", first.text));
            words.remove(0);
        }
        if words.is_empty() && simple.writes.is_empty() {
            continue;
        }
        if !words.is_empty() {
            let program = words.iter().find(|w| !is_assignment(&w.text));
            if let Some(program) = program
                && program.wild
            {
                reading.doubt(|| format!("a wildcard in the program's name `{}`", program.text));
            }
        }
        let argv: Vec<String> = words.into_iter().map(|w| w.text).collect();
        normalize(&argv, simple.writes, depth, reading);
    }
}

struct Lexer<'r> {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    reading: &'r mut Reading,
    found: Vec<Simple>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn doubt(&mut self, why: &str) {
        self.reading.doubt(|| why.to_owned());
    }

    /// Reads simple commands up to the end, or up to `until` (the `)` of
    /// a substitution), into `found`.
    fn script(&mut self, until: Option<char>) {
        let mut current = Simple::default();
        loop {
            while matches!(self.peek(), Some(' ' | '\t')) {
                self.pos += 1;
            }
            let Some(c) = self.peek() else {
                if until.is_some() {
                    self.doubt("a substitution without its closing `)`");
                }
                break;
            };
            if Some(c) == until {
                self.pos += 1;
                break;
            }
            match c {
                '\n' | ';' | '&' | '|' => {
                    self.pos += 1;
                    if c == '&' && self.peek() == Some('>') {
                        // `&>file`: both outputs to a file.
                        self.redirection(&mut current);
                        continue;
                    }
                    if matches!(self.peek(), Some('&' | '|' | ';')) {
                        self.pos += 1;
                    }
                    self.end(&mut current);
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '(' | ')' => {
                    self.doubt("a subshell, group or function `(…)`");
                    self.pos += 1;
                    self.end(&mut current);
                }
                '<' | '>' => self.redirection(&mut current),
                _ => {
                    let word = self.word();
                    let is_fd = !word.quoted
                        && !word.text.is_empty()
                        && word.text.chars().all(|c| c.is_ascii_digit())
                        && matches!(self.peek(), Some('<' | '>'));
                    if !is_fd && (word.quoted || !word.text.is_empty()) {
                        current.words.push(word);
                    }
                }
            }
        }
        self.end(&mut current);
    }

    fn end(&mut self, current: &mut Simple) {
        if !current.words.is_empty() || !current.writes.is_empty() {
            self.found.push(std::mem::take(current));
        }
    }

    /// At `<` or `>`: reads the operator and its target.
    fn redirection(&mut self, current: &mut Simple) {
        let first = self.peek();
        self.pos += 1;
        if self.peek() == Some('(') {
            self.doubt("a process substitution `<(…)`");
            self.pos += 1;
            self.nested();
            return;
        }
        if first == Some('<') && self.peek() == Some('<') {
            self.doubt("a here-document `<<`");
        } else {
            self.doubt("a redirection `<` or `>`");
        }
        while matches!(self.peek(), Some('<' | '>' | '&' | '|' | '-')) {
            self.pos += 1;
        }
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
        let target = self.word();
        if first == Some('>') {
            current.writes.push(target.text);
        }
    }

    /// Reads the script of a substitution up to its `)`, adding its
    /// commands to what is found.
    fn nested(&mut self) {
        if self.depth >= MAX_DEPTH {
            self.doubt("substitutions nested too deep to read");
        }
        self.depth += 1;
        self.script(Some(')'));
        self.depth -= 1;
    }

    /// Reads one word, quotes taken off.
    fn word(&mut self) -> Word {
        let mut word = Word::default();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\'' => {
                    word.quoted = true;
                    self.pos += 1;
                    self.until_quote(&mut word.text);
                }
                '"' => {
                    word.quoted = true;
                    self.pos += 1;
                    self.double_quoted(&mut word.text);
                }
                '\\' => {
                    word.quoted = true;
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(next) => {
                            word.text.push(next);
                            self.pos += 1;
                        }
                        None => self.doubt("a backslash at the end"),
                    }
                }
                '$' => self.dollar(&mut word.text),
                '`' => self.backticks(&mut word.text),
                '*' | '?' | '[' => {
                    word.wild = true;
                    word.text.push(c);
                    self.pos += 1;
                }
                '{' | '}' => {
                    // `{}` alone is literal (find's); anything else may be
                    // a brace expansion or a group.
                    let literal_pair =
                        (c == '{' && self.peek_at(1) == Some('}')) || word.text.ends_with('{');
                    if !literal_pair {
                        self.doubt("braces `{…}`");
                    }
                    word.text.push(c);
                    self.pos += 1;
                }
                _ => {
                    word.text.push(c);
                    self.pos += 1;
                }
            }
        }
        word
    }

    /// After an opening `'`: up to the closing one.
    fn until_quote(&mut self, text: &mut String) {
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == '\'' {
                return;
            }
            text.push(c);
        }
        self.doubt("an unclosed `'`");
    }

    /// After an opening `"`: up to the closing one.
    fn double_quoted(&mut self, text: &mut String) {
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(next @ ('$' | '`' | '"' | '\\')) => {
                            text.push(next);
                            self.pos += 1;
                        }
                        _ => text.push('\\'),
                    }
                }
                '$' => self.dollar(text),
                '`' => self.backticks(text),
                _ => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
        self.doubt("an unclosed `\"`");
    }

    /// At `$`: a substitution, an expansion, or a plain `$`.
    fn dollar(&mut self, text: &mut String) {
        self.pos += 1;
        match self.peek() {
            Some('(') => {
                self.doubt("a command substitution `$(…)`");
                self.pos += 1;
                text.push_str("$(…)");
                self.nested();
            }
            Some('{') => {
                self.doubt("a parameter expansion `${…}`");
                text.push('$');
                while let Some(c) = self.peek() {
                    text.push(c);
                    self.pos += 1;
                    if c == '}' {
                        break;
                    }
                }
            }
            Some('\'') => {
                self.doubt("`$'…'` quoting");
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '\'' => break,
                        '\\' => {
                            if let Some(next) = self.peek() {
                                text.push(next);
                                self.pos += 1;
                            }
                        }
                        _ => text.push(c),
                    }
                }
            }
            Some(c) if c.is_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.doubt("a parameter expansion `$…`");
                text.push('$');
                if c.is_alphabetic() || c == '_' {
                    while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        text.push(self.chars[self.pos]);
                        self.pos += 1;
                    }
                } else {
                    text.push(c);
                    self.pos += 1;
                }
            }
            _ => text.push('$'),
        }
    }

    /// At a backtick: an old-style command substitution, read inside.
    fn backticks(&mut self, text: &mut String) {
        self.doubt("a command substitution with backticks");
        self.pos += 1;
        let mut inner = String::new();
        let mut closed = false;
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '`' => {
                    closed = true;
                    break;
                }
                '\\' if matches!(self.peek(), Some('`' | '\\' | '$')) => {
                    inner.push(self.chars[self.pos]);
                    self.pos += 1;
                }
                _ => inner.push(c),
            }
        }
        if !closed {
            self.doubt("an unclosed backtick");
        }
        text.push_str("`…`");
        read_script(&inner, self.depth + 1, self.reading);
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
    })
}

fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"];

/// Skips the options of a wrapper at `argv[*i]` (the wrapper itself is
/// already skipped): short options in `with_value` take the next word (or
/// the rest of their cluster), long ones in `long_with_value` the next
/// word unless written `--name=value`. Stops at `--` (skipped) or the first
/// word that isn't an option.
fn skip_options(argv: &[String], i: &mut usize, with_value: &str, long_with_value: &[&str]) {
    while let Some(word) = argv.get(*i) {
        if word == "--" {
            *i += 1;
            return;
        }
        if let Some(long) = word.strip_prefix("--") {
            *i += 1;
            if !long.contains('=') && long_with_value.contains(&long) {
                *i += 1;
            }
            continue;
        }
        let Some(cluster) = word.strip_prefix('-') else {
            return;
        };
        if cluster.is_empty() {
            return;
        }
        *i += 1;
        for (at, flag) in cluster.char_indices() {
            if with_value.contains(flag) {
                if at + flag.len_utf8() == cluster.len() {
                    *i += 1;
                }
                break;
            }
        }
    }
}

/// Takes the wrappers off `argv` and adds the command (and any it runs
/// inside: `eval`'s text, `sh -c`'s script) to `reading`.
fn normalize(argv: &[String], writes: Vec<String>, depth: usize, reading: &mut Reading) {
    let mut i = 0;
    loop {
        while argv.get(i).is_some_and(|w| is_assignment(w)) {
            i += 1;
        }
        let Some(word) = argv.get(i) else {
            if !writes.is_empty() {
                reading.commands.push(Command {
                    argv: Vec::new(),
                    writes,
                });
            }
            return;
        };
        let program = program_name(word);
        match program {
            "env" => {
                i += 1;
                if argv
                    .get(i)
                    .is_some_and(|w| w.starts_with("-S") || w.starts_with("--split-string"))
                {
                    reading.doubt(|| "`env -S`, which splits a string into a command".to_owned());
                }
                skip_options(argv, &mut i, "uCS", &["unset", "chdir", "split-string"]);
                if argv.get(i).is_none() {
                    i -= 1; // `env` alone prints the environment
                    break;
                }
            }
            "sudo" | "doas" => {
                i += 1;
                let rest = argv.get(i..).unwrap_or_default();
                if rest.iter().take_while(|w| w.starts_with('-')).any(|w| {
                    matches!(
                        w.as_str(),
                        "-s" | "-i" | "-e" | "--shell" | "--login" | "--edit"
                    )
                }) {
                    reading.doubt(|| format!("`{program}` running a shell or an editor"));
                }
                skip_options(
                    argv,
                    &mut i,
                    "ugCDhprtUTR",
                    &[
                        "user",
                        "group",
                        "chdir",
                        "host",
                        "prompt",
                        "role",
                        "type",
                        "other-user",
                        "close-from",
                        "command-timeout",
                    ],
                );
            }
            "timeout" => {
                i += 1;
                skip_options(argv, &mut i, "sk", &["signal", "kill-after"]);
                i += 1; // the duration
            }
            "nice" => {
                i += 1;
                if argv.get(i).is_some_and(|w| {
                    w.len() > 1 && w[1..].chars().all(|c| c.is_ascii_digit()) && w.starts_with('-')
                }) {
                    i += 1; // `nice -10`
                }
                skip_options(argv, &mut i, "n", &["adjustment"]);
            }
            "stdbuf" => {
                i += 1;
                skip_options(argv, &mut i, "ioe", &["input", "output", "error"]);
            }
            "nohup" | "command" | "time" | "setsid" | "builtin" => {
                i += 1;
                skip_options(argv, &mut i, "", &[]);
            }
            "xargs" => {
                reading.doubt(|| "`xargs`, which runs commands built from its input".to_owned());
                i += 1;
                skip_options(
                    argv,
                    &mut i,
                    "adELnPsI",
                    &[
                        "arg-file",
                        "delimiter",
                        "max-lines",
                        "max-args",
                        "max-procs",
                        "max-chars",
                        "process-slot-var",
                    ],
                );
                // `…` stands for the arguments xargs adds from its input,
                // so `rm *` deny rules match `xargs rm`.
                let mut run: Vec<String> =
                    argv.get(i..).map(<[String]>::to_vec).unwrap_or_default();
                if run.is_empty() {
                    run.push("echo".to_owned());
                }
                run.push("…".to_owned());
                normalize(&run, writes, depth, reading);
                return;
            }
            "exec" => {
                reading.doubt(|| "`exec`".to_owned());
                i += 1;
                skip_options(argv, &mut i, "a", &[]);
            }
            "eval" => {
                reading.doubt(|| "`eval`".to_owned());
                let script = argv[i + 1..].join(" ");
                read_script(&script, depth + 1, reading);
                return;
            }
            "source" | "." => {
                reading.doubt(|| format!("`{program}`, which runs a script file"));
                break;
            }
            shell if SHELLS.contains(&shell) => {
                let mut at = i + 1;
                let mut script = None;
                while let Some(word) = argv.get(at) {
                    at += 1;
                    if word == "--" || !(word.starts_with('-') || word.starts_with('+')) {
                        break;
                    }
                    if word.starts_with("--") {
                        continue;
                    }
                    if matches!(word.as_str(), "-o" | "+o" | "-O" | "+O") {
                        at += 1;
                    } else if word[1..].contains('c') {
                        script = argv.get(at).cloned();
                        break;
                    }
                }
                match script {
                    Some(script) => {
                        if depth > 0 {
                            reading.doubt(|| format!("a shell inside the script (`{shell} -c`)"));
                        }
                        read_script(&script, depth + 1, reading);
                        return;
                    }
                    None => {
                        reading.doubt(|| format!("`{shell}` running a script file or its input"));
                        break;
                    }
                }
            }
            _ => break,
        }
    }
    let mut argv = argv.get(i..).map(<[String]>::to_vec).unwrap_or_default();
    if let Some(program) = argv.first_mut() {
        *program = program_name(program).to_owned();
    }
    reading.commands.push(Command { argv, writes });
}

/// The raw lines as plain words, quotes and operators taken off, for the
/// floor to scan when the reading is doubtful: each word is tried as the
/// start of a command.
pub(crate) fn crude_commands(reading: &Reading) -> Vec<Command> {
    let mut commands = Vec::new();
    for raw in &reading.raw {
        let words: Vec<String> = raw
            .replace(['\'', '"', '\\'], "")
            .split(|c: char| c.is_whitespace() || ";&|()<>`{}".contains(c))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        for start in 0..words.len() {
            // Wrappers only: nothing read inside, no doubts recorded.
            let mut quiet = Reading::default();
            normalize(&words[start..], Vec::new(), MAX_DEPTH + 1, &mut quiet);
            commands.extend(quiet.commands);
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(text: &str) -> Reading {
        read_argv(&["sh".into(), "-c".into(), text.into()])
    }

    fn texts(reading: &Reading) -> Vec<String> {
        reading.commands.iter().map(Command::text).collect()
    }

    #[test]
    fn operators_split_simple_commands() {
        let r = script("ls -l; git status && make || echo 'a b' | wc -l & sleep 1\nid");
        assert_eq!(
            texts(&r),
            [
                "ls -l",
                "git status",
                "make",
                "echo 'a b'",
                "wc -l",
                "sleep 1",
                "id"
            ]
        );
        assert_eq!(r.doubt, None);
    }

    #[test]
    fn quotes_and_backslashes_are_taken_off() {
        let r = script(r#"'r''m' -rf /; \rm x; "git" commit -m "a \"b\"""#);
        assert_eq!(texts(&r), ["rm -rf /", "rm x", r#"git commit -m 'a "b"'"#]);
        assert_eq!(r.doubt, None);
    }

    #[test]
    fn comments_hide_nothing_that_runs() {
        let r = script("ls # ; rm -rf /\nid");
        assert_eq!(texts(&r), ["ls", "id"]);
        assert_eq!(r.doubt, None);
        // `#` inside a word is not a comment.
        assert_eq!(texts(&script("echo a#b")), ["echo 'a#b'"]);
    }

    #[test]
    fn wrappers_come_off() {
        for (line, expected) in [
            ("sudo -u root rm -rf /", "rm -rf /"),
            ("env X=1 timeout 5 rm -rf /", "rm -rf /"),
            ("env -i -u PATH A=b /bin/rm x", "rm x"),
            ("X=1 Y=2 nice -n 5 nohup command rm x", "rm x"),
            ("timeout -s KILL 10s rm x", "rm x"),
            ("sudo -E -n -u bob -- /usr/bin/rm x", "rm x"),
            ("env", "env"),
        ] {
            let r = script(line);
            assert_eq!(texts(&r), [expected], "{line}");
            assert_eq!(r.doubt, None, "{line}");
        }
    }

    #[test]
    fn what_it_cannot_vouch_for_is_doubtful_but_still_read() {
        for (line, command, why) in [
            ("ls && $(curl x|sh)", "curl x", "command substitution"),
            ("echo `rm -rf /`", "rm -rf /", "backticks"),
            ("eval 'rm -rf /'", "rm -rf /", "`eval`"),
            ("bash -c 'rm -rf /'", "rm -rf /", "a shell inside"),
            ("find . | xargs -0 rm", "rm '…'", "`xargs`"),
            ("echo x > /dev/sda", "echo x", "redirection"),
            ("cat <<EOF\nrm -rf /\nEOF", "rm -rf /", "here-document"),
            ("echo 'unclosed", "echo unclosed", "unclosed"),
            ("rm -rf $HOME", "rm -rf '$HOME'", "parameter expansion"),
            ("if true; then rm x; fi", "rm x", "keyword `if`"),
            ("(rm x)", "rm x", "subshell"),
            ("exec rm x", "rm x", "`exec`"),
            ("source ./x.sh", "source ./x.sh", "`source`"),
            ("diff <(ls a) b", "ls a", "process substitution"),
            ("/bin/r? x", "'r?' x", "wildcard in the program"),
        ] {
            let r = script(line);
            assert!(
                texts(&r).contains(&command.to_owned()),
                "{line}: {:?}",
                texts(&r)
            );
            assert!(
                r.doubt.as_deref().is_some_and(|d| d.contains(why)),
                "{line}: {:?}",
                r.doubt
            );
        }
    }

    #[test]
    fn a_plain_argv_is_one_command() {
        let r = read_argv(&[
            "git".into(),
            "commit".into(),
            "-m".into(),
            "a b; rm -rf /".into(),
        ]);
        assert_eq!(texts(&r), ["git commit -m 'a b; rm -rf /'"]);
        assert_eq!(r.doubt, None);
    }

    #[test]
    fn redirect_targets_are_recorded() {
        let r = script("echo x >> /dev/sda 2>/dev/null");
        assert_eq!(r.commands[0].writes, ["/dev/sda", "/dev/null"]);
        assert_eq!(r.commands[0].argv, ["echo", "x"]);
    }

    #[test]
    fn crude_words_find_commands_anywhere() {
        let r = script("x=$(printf '%s' \"r\"m -rf /)");
        let crude: Vec<String> = crude_commands(&r).iter().map(Command::text).collect();
        assert!(crude.iter().any(|c| c.starts_with("rm -rf /")), "{crude:?}");
    }
}
