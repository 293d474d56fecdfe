//! Which tool calls run, which are asked about, which never run.
//!
//! A [`Policy`] holds the application's [`Rule`]s. The agent asks it about
//! every call whose arguments passed their checks, and gets a [`Verdict`]:
//! [`Permission::Allow`] runs the call, [`Permission::Ask`] asks the
//! [`ConfirmHandler`](crate::confirm::ConfirmHandler) (declined when there
//! is none), [`Permission::Deny`] returns the reason to the model.
//!
//! The layers decide in this order, as the permissions guide
//! (`docs/permissions.md`) tabulates row by row:
//!
//! 1. **The floor** ([`Layer::Floor`]): commands no rule can allow
//!    (`rm -rf /`, `mkfs`, writing to a disk device), checked against every
//!    command a command tool would run, however it is spelled.
//! 2. **Rules** ([`Layer::Application`]), from the program or the bots'
//!    config: the last rule that matches the call decides. A rule that
//!    denies is final.
//! 3. **Approvals** ([`Layer::Conversation`]): "always allow" answers
//!    given in a conversation ([`Approval`]), stored with it. They turn an
//!    "ask" into an "allow", never a written deny into anything.
//! 4. **Defaults** ([`Layer::Default`]), when no rule matched: the tool's
//!    own question ([`Tool::confirmation`]) asks; a destructive tool
//!    ([`Effects::destructive`]) asks; anything else runs.
//!
//! Then an "allow" is turned into an "ask" when a command tool's script
//! can't be read with certainty (command substitution, `eval`,
//! redirections, nested shells, anything the shell reader can't parse),
//! and by the agent when the same call comes a third time in a row
//! ([`Layer::Guard`]).
//!
//! # Examples
//! ```
//! use ferrobot::policy::{Permission, Policy, Rule};
//! use ferrobot::tool::from_fn;
//! use serde_json::json;
//!
//! let policy = Policy::new()
//!     .rule(Rule::ask("*"))
//!     .rule(Rule::allow("read_file").argument("path", "/srv/notes/**"))
//!     .rule(Rule::deny("read_file").argument("path", "/srv/notes/private/**"));
//! let read = from_fn("read_file", "Read a file.", |_: serde_json::Value, _| async { "…" });
//!
//! let verdict = policy.evaluate(&read, &json!({"path": "/srv/notes/todo.md"}), &[]);
//! assert_eq!(verdict.permission, Permission::Allow);
//! let verdict = policy.evaluate(&read, &json!({"path": "/srv/notes/private/diary.md"}), &[]);
//! assert_eq!(verdict.permission, Permission::Deny);
//! let verdict = policy.evaluate(&read, &json!({"path": "/etc/shadow"}), &[]);
//! assert_eq!(verdict.permission, Permission::Ask);
//! ```
//!
//! [`Tool::confirmation`]: crate::tool::Tool::confirmation
//! [`Effects::destructive`]: crate::tool::Effects::destructive

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::Tool;

/// What happens to a call.
///
/// Ordered by strictness: `Allow < Ask < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// It runs.
    Allow,
    /// The user is asked first; with nobody to ask, it doesn't run.
    Ask,
    /// It never runs; the model reads why.
    Deny,
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Permission::Allow => "allow",
            Permission::Ask => "ask",
            Permission::Deny => "deny",
        })
    }
}

/// Where a [`Verdict`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Layer {
    /// The built-in deny floor for commands.
    Floor,
    /// The tool's declared effects and question, when no rule matched.
    Default,
    /// A [`Rule`] of the program or its config.
    Application,
    /// An "always allow" [`Approval`] given in the conversation.
    Conversation,
    /// A check that turns an allow into an ask: a command that can't be
    /// read with certainty, or the same call a third time in a row.
    Guard,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Floor => "floor",
            Layer::Default => "default",
            Layer::Application => "rule",
            Layer::Conversation => "approval",
            Layer::Guard => "guard",
        })
    }
}

/// A rule: allow, ask about or deny the calls of the tools it names, with
/// arguments that match its patterns.
///
/// Patterns are globs: `*` is any run of characters and `?` one. In an
/// argument pattern that is a path (it starts with `/` or `~/`), `*` stays
/// within a folder and `**` crosses folders, and the argument is made
/// absolute and canonical first (`..` and symbolic links resolved), so
/// `/home/u/**` can't be escaped with `/home/u/../../etc/passwd`.
///
/// # Examples
/// ```
/// use ferrobot::policy::{Permission, Rule};
/// let rule = Rule::allow("run_command").command("git status*");
/// assert_eq!(rule.permission, Permission::Allow);
/// let config = r#"{"tool": "read_file", "permission": "deny", "arguments": {"path": "~/.ssh/**"}}"#;
/// let parsed: Rule = serde_json::from_str(config).unwrap();
/// assert_eq!(parsed, Rule::deny("read_file").argument("path", "~/.ssh/**"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Rule {
    /// What the rule says.
    pub permission: Permission,
    /// The tools it is about: a name or a glob (`*` for every tool).
    pub tool: String,
    /// Named arguments and the pattern each must match; all must match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, String>,
    /// For tools that run programs ([`Tool::command_line`]): a pattern over
    /// each command the call would run, quoted as a shell would read it
    /// back (`git commit -m 'a b'`), after wrappers such as `sudo -u x`,
    /// `env`, `timeout 5` and `VAR=x` are taken off and a program's folder
    /// is dropped (`/bin/rm` → `rm`). A call whose commands don't all match
    /// doesn't match an allow; one command matching a deny denies the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl Rule {
    /// A rule allowing calls of `tool` (a name or glob).
    pub fn allow(tool: impl Into<String>) -> Self {
        Self::new(Permission::Allow, tool)
    }

    /// A rule asking before calls of `tool` (a name or glob).
    pub fn ask(tool: impl Into<String>) -> Self {
        Self::new(Permission::Ask, tool)
    }

    /// A rule denying calls of `tool` (a name or glob).
    pub fn deny(tool: impl Into<String>) -> Self {
        Self::new(Permission::Deny, tool)
    }

    /// A rule saying `permission` about calls of `tool`.
    pub fn new(permission: Permission, tool: impl Into<String>) -> Self {
        Self {
            permission,
            tool: tool.into(),
            arguments: BTreeMap::new(),
            command: None,
        }
    }

    /// The same rule, for calls whose argument `name` matches `pattern`.
    #[must_use]
    pub fn argument(mut self, name: impl Into<String>, pattern: impl Into<String>) -> Self {
        self.arguments.insert(name.into(), pattern.into());
        self
    }

    /// The same rule, for calls whose commands match `pattern`.
    #[must_use]
    pub fn command(mut self, pattern: impl Into<String>) -> Self {
        self.command = Some(pattern.into());
        self
    }
}

impl fmt::Display for Rule {
    /// `deny read_file path="~/.ssh/**"`, as `ferrobot permissions` lists it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.permission, self.tool)?;
        for (name, pattern) in &self.arguments {
            write!(f, " {name}={pattern:?}")?;
        }
        if let Some(command) = &self.command {
            write!(f, " command={command:?}")?;
        }
        Ok(())
    }
}

/// What an "always allow" covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Scope {
    /// Calls of the tool with exactly these arguments.
    Call {
        /// The arguments, as a JSON object.
        arguments: Value,
    },
    /// Every call of the tool.
    Tool,
    /// Calls whose argument `argument` starts with `prefix`; for a path,
    /// the path or anything inside it, compared canonically.
    Prefix {
        /// The argument's name.
        argument: String,
        /// What its value starts with.
        prefix: String,
    },
}

impl fmt::Display for Scope {
    /// What it covers, in words.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Call { arguments } => write!(f, "calls with arguments {arguments}"),
            Scope::Tool => f.write_str("every call"),
            Scope::Prefix { argument, prefix } => {
                write!(f, "calls whose `{argument}` starts with {prefix:?}")
            }
        }
    }
}

/// An "always allow" answer, stored with the conversation it was given in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Approval {
    /// The tool's name.
    pub tool: String,
    /// Which of its calls.
    pub scope: Scope,
    /// Who gave it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_by: Option<String>,
    /// When, in seconds since the Unix epoch.
    pub granted_at: i64,
}

impl Approval {
    /// An approval of `tool`'s calls that `scope` covers, given now.
    pub fn new(tool: impl Into<String>, scope: Scope) -> Self {
        let granted_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Self {
            tool: tool.into(),
            scope,
            granted_by: None,
            granted_at,
        }
    }

    /// The same approval, given by `user`.
    #[must_use]
    pub fn by(mut self, user: impl Into<String>) -> Self {
        self.granted_by = Some(user.into());
        self
    }
}

/// What the policy says about one call, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// Whether it runs, is asked about, or never runs.
    pub permission: Permission,
    /// Which layer decided.
    pub layer: Layer,
    /// Which rule, default or guard decided, in words, for the audit trail
    /// and `ferrobot permissions test`: `rule 3: deny read_file
    /// path="~/.ssh/**"`.
    pub reason: String,
}

impl Verdict {
    /// A verdict with this permission, layer and reason.
    pub fn new(permission: Permission, layer: Layer, reason: impl Into<String>) -> Self {
        Self {
            permission,
            layer,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.permission, self.reason)
    }
}

/// The application's rules, in order: for a call, the last rule that
/// matches decides (write the general rules first, the exceptions after).
/// An empty policy leaves every call to the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// A policy with no rules: the defaults decide.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same policy, with `rule` after the others.
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The same policy, with `rules` after the others.
    #[must_use]
    pub fn rules(mut self, rules: impl IntoIterator<Item = Rule>) -> Self {
        self.rules.extend(rules);
        self
    }

    /// Its rules, in order.
    pub fn list(&self) -> &[Rule] {
        &self.rules
    }

    /// Checks every rule's patterns, for a configuration loader to report
    /// mistakes before any call is judged. [`evaluate`](Self::evaluate)
    /// never fails: it reads a bad pattern literally.
    ///
    /// # Errors
    /// The first rule that names no tool or holds a pattern that can't be
    /// read as intended (an unclosed `[`, `**` that isn't a whole path
    /// segment), naming the rule's number and how to write it.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::policy::{Policy, Rule};
    /// let policy = Policy::new()
    ///     .rule(Rule::allow("read_file"))
    ///     .rule(Rule::deny("read_file").argument("path", "/etc/[abc"));
    /// let error = policy.check().unwrap_err();
    /// assert!(error.to_string().starts_with("rule 2 "));
    /// assert!(Policy::new().rule(Rule::ask("*")).check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), PolicyError> {
        for (index, rule) in self.rules.iter().enumerate() {
            let rule_number = index + 1;
            let empty = |problem: &str| PolicyError::Empty {
                rule: rule_number,
                text: rule.to_string(),
                problem: problem.to_owned(),
            };
            if rule.tool.is_empty() {
                return Err(empty(
                    "it names no tool; write `tool = \"*\"` for every tool",
                ));
            }
            if rule.arguments.keys().any(String::is_empty) {
                return Err(empty("an argument without a name"));
            }
            let patterns = std::iter::once(("tool", rule.tool.as_str(), pattern::Mode::Text))
                .chain(
                    rule.command
                        .as_deref()
                        .map(|c| ("command", c, pattern::Mode::Text)),
                )
                .chain(rule.arguments.iter().map(|(name, p)| {
                    let mode = if pattern::is_path_pattern(p) {
                        pattern::Mode::Path
                    } else {
                        pattern::Mode::Text
                    };
                    (name.as_str(), p.as_str(), mode)
                }));
            for (field, text, mode) in patterns {
                if let Some(problem) = pattern::Pattern::new(text, mode).problem() {
                    return Err(PolicyError::Pattern {
                        rule: rule_number,
                        text: rule.to_string(),
                        field: field.to_owned(),
                        pattern: text.to_owned(),
                        problem: problem.to_owned(),
                    });
                }
            }
        }
        Ok(())
    }

    /// What happens to a call of `tool` with `arguments` (a JSON object that
    /// passed the tool's checks), given the conversation's `approvals`:
    /// the floor, the rules, the approvals and the defaults decide in the
    /// order the module documentation gives.
    pub fn evaluate(&self, tool: &dyn Tool, arguments: &Value, approvals: &[Approval]) -> Verdict {
        evaluate::evaluate(self, tool, arguments, approvals)
    }
}

mod evaluate;
mod floor;
mod path;
mod pattern;
mod shell;

/// What is wrong with a [`Policy`]'s rules, found by [`Policy::check`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A pattern can't be read as intended.
    #[error("rule {rule} (`{text}`): the {field} pattern {pattern:?}: {problem}")]
    Pattern {
        /// The rule's number, from 1.
        rule: usize,
        /// The rule, as [`Rule`]'s `Display` writes it.
        text: String,
        /// Which pattern: `tool`, `command`, or the argument's name.
        field: String,
        /// The pattern as written.
        pattern: String,
        /// What is wrong and how to write it.
        problem: String,
    },
    /// A rule names no tool, or an argument without a name.
    #[error("rule {rule} (`{text}`): {problem}")]
    Empty {
        /// The rule's number, from 1.
        rule: usize,
        /// The rule, as [`Rule`]'s `Display` writes it.
        text: String,
        /// What is missing.
        problem: String,
    },
}

impl Scope {
    /// Whether this scope covers a call with `arguments`: [`Scope::Call`]
    /// the same JSON; [`Scope::Tool`] every call; [`Scope::Prefix`] a
    /// value starting with the prefix, and for a path (starting with `/`,
    /// `~` or `.`) the prefix's folder or anything inside it, both made
    /// canonical and compared by whole names.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::policy::Scope;
    /// use serde_json::json;
    /// let scope = Scope::Prefix { argument: "path".into(), prefix: "/srv/a".into() };
    /// assert!(scope.covers(&json!({"path": "/srv/a/b.txt"})));
    /// assert!(!scope.covers(&json!({"path": "/srv/ab"})));
    /// assert!(!scope.covers(&json!({"path": "/srv/a/../b"})));
    /// ```
    pub fn covers(&self, arguments: &Value) -> bool {
        evaluate::covers(self, arguments)
    }
}
