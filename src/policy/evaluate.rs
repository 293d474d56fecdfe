//! The order in which the layers decide, as `docs/permissions.md`
//! tabulates it: floor, rules, approvals, defaults, then the guard.

use serde_json::Value;

use super::pattern::{self, Mode, Pattern, is_path_pattern};
use super::shell::{Reading, read_argv};
use super::{Approval, Layer, Permission, Policy, Rule, Scope, Verdict, floor, path};
use crate::tool::Tool;

pub(super) fn evaluate(
    policy: &Policy,
    tool: &dyn Tool,
    arguments: &Value,
    approvals: &[Approval],
) -> Verdict {
    let name = tool.name();
    let reading = tool.command_line(arguments).map(|argv| read_argv(&argv));
    if let Some(reading) = &reading
        && let Some(hit) = floor::check(reading)
    {
        return Verdict::new(Permission::Deny, Layer::Floor, format!("floor: {hit}"));
    }

    let ruled = rules(policy, name, arguments, reading.as_ref());
    if let Some(Ruled::Rule(index, rule)) = &ruled
        && rule.permission == Permission::Deny
    {
        return rule_verdict(*index, rule);
    }

    // Never for a tool that runs programs: "always" for `sh -c {script}`
    // would be always for anything.
    if reading.is_none()
        && !matches!(&ruled, Some(Ruled::Rule(_, rule)) if rule.permission == Permission::Allow)
        && let Some(approval) = approvals
            .iter()
            .find(|a| a.tool == name && a.scope.covers(arguments))
    {
        let by = approval
            .granted_by
            .as_deref()
            .map(|who| format!(" (granted by {who})"))
            .unwrap_or_default();
        return Verdict::new(
            Permission::Allow,
            Layer::Conversation,
            format!("approval: {}{by}", approval.scope),
        );
    }

    let verdict = match ruled {
        Some(Ruled::Rule(index, rule)) => rule_verdict(index, rule),
        Some(Ruled::Partly(index, rule)) => {
            // Some commands were ruled, others weren't: the strictest of
            // the rule and the default.
            let default = default(tool, arguments);
            if default.permission > rule.permission {
                default
            } else {
                rule_verdict(index, rule)
            }
        }
        None => default(tool, arguments),
    };

    if verdict.permission == Permission::Allow
        && let Some(reading) = &reading
        && let Some(doubt) = &reading.doubt
    {
        let line = reading.raw.last().map_or("", String::as_str);
        return Verdict::new(
            Permission::Ask,
            Layer::Guard,
            format!("guard: {doubt} in {line:?}"),
        );
    }
    verdict
}

fn rule_verdict(index: usize, rule: &Rule) -> Verdict {
    Verdict::new(
        rule.permission,
        Layer::Application,
        format!("rule {}: {rule}", index + 1),
    )
}

/// What the rules say about a call.
enum Ruled<'p> {
    /// The strictest rule over all its commands (for tools without
    /// commands, the last rule that matches), numbered from 0.
    Rule(usize, &'p Rule),
    /// The strictest rule over the commands some rule matched; others
    /// matched none.
    Partly(usize, &'p Rule),
}

fn rules<'p>(
    policy: &'p Policy,
    tool: &str,
    arguments: &Value,
    reading: Option<&Reading>,
) -> Option<Ruled<'p>> {
    // The rules about this tool and these arguments, whatever the command.
    let candidates: Vec<(usize, &Rule)> = policy
        .rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| {
            pattern::matches(&rule.tool, tool, Mode::Text)
                && rule
                    .arguments
                    .iter()
                    .all(|(name, pattern)| argument_matches(pattern, arguments.get(name)))
        })
        .collect();
    let Some(reading) = reading else {
        return candidates
            .into_iter()
            .rev()
            .find(|(_, rule)| rule.command.is_none())
            .map(|(index, rule)| Ruled::Rule(index, rule));
    };

    // Per command, the last rule whose pattern matches it; a script of no
    // commands (only a comment) is judged as its line.
    let mut texts: Vec<String> = reading.commands.iter().map(|c| c.text()).collect();
    if texts.is_empty() {
        texts.push(reading.raw.last().cloned().unwrap_or_default());
    }
    let last_match = |text: &str| {
        candidates.iter().rev().copied().find(|(_, rule)| {
            rule.command
                .as_deref()
                .is_none_or(|p| pattern::matches(p, text, Mode::Text))
        })
    };
    let mut strictest: Option<(usize, &Rule)> = None;
    let mut unruled = false;
    for text in &texts {
        match last_match(text) {
            Some(found) => {
                if strictest.is_none_or(|(_, s)| found.1.permission > s.permission) {
                    strictest = Some(found);
                }
            }
            None => unruled = true,
        }
    }
    // A line the reader can't vouch for may hide a command it didn't find:
    // deny rules are matched against the raw lines too.
    if reading.doubt.is_some()
        && strictest.is_none_or(|(_, s)| s.permission != Permission::Deny)
        && let Some(deny) = candidates.iter().copied().find(|(_, rule)| {
            rule.permission == Permission::Deny
                && rule.command.as_deref().is_some_and(|p| {
                    let pattern = Pattern::new(p, Mode::Text);
                    reading.raw.iter().any(|raw| pattern.matches(raw))
                })
        })
    {
        return Some(Ruled::Rule(deny.0, deny.1));
    }
    let (index, rule) = strictest?;
    Some(if unruled {
        Ruled::Partly(index, rule)
    } else {
        Ruled::Rule(index, rule)
    })
}

/// Whether an argument's value matches a rule's pattern; a missing
/// argument matches nothing.
fn argument_matches(pattern: &str, value: Option<&Value>) -> bool {
    let Some(value) = value else {
        return false;
    };
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if is_path_pattern(pattern) {
        let canonical = path::canonical(&text);
        Pattern::new(&path::canonical_pattern(pattern), Mode::Path)
            .matches(&canonical.to_string_lossy())
    } else {
        pattern::matches(pattern, &text, Mode::Text)
    }
}

/// The default layer: the tool's own question, then its effects.
fn default(tool: &dyn Tool, arguments: &Value) -> Verdict {
    if tool.confirmation(arguments).is_some() {
        return Verdict::new(
            Permission::Ask,
            Layer::Default,
            "default: the tool asks first",
        );
    }
    let effects = tool.effects();
    if effects.destructive {
        return Verdict::new(
            Permission::Ask,
            Layer::Default,
            "default: a destructive tool asks first",
        );
    }
    let what = if effects.read_only {
        "default: a read-only tool runs"
    } else {
        "default: no rule matched and the tool declares no destructive effects"
    };
    Verdict::new(Permission::Allow, Layer::Default, what)
}

/// Whether `scope` covers a call with `arguments`.
pub(super) fn covers(scope: &Scope, arguments: &Value) -> bool {
    match scope {
        Scope::Call { arguments: exact } => exact == arguments,
        Scope::Tool => true,
        Scope::Prefix { argument, prefix } => arguments.get(argument).is_some_and(|value| {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if is_path_pattern(prefix) || prefix.starts_with('.') {
                path::is_within(&text, prefix)
            } else {
                text.starts_with(prefix.as_str())
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use futures_util::future::BoxFuture;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::message::ToolSpec;
    use crate::policy::shell::read_argv;
    use crate::tool::{ToolContext, ToolError, ToolOutput};

    /// `sh -c {script}`, as a tools file can declare it.
    struct Shell(ToolSpec);

    impl Tool for Shell {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        fn call(&self, _: Value, _: ToolContext) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
            Box::pin(async { Ok("done".into()) })
        }

        fn command_line(&self, arguments: &Value) -> Option<Vec<String>> {
            let script = arguments["script"].as_str().unwrap_or_default();
            Some(vec!["sh".into(), "-c".into(), script.into()])
        }
    }

    fn word() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("ls"),
            Just("rm"),
            Just("git"),
            Just("status"),
            Just("-rf"),
            Just("x"),
            Just("/tmp/y"),
            Just("'a b'"),
            Just("sudo"),
            Just("-u"),
            Just("env"),
            Just("X=1"),
            Just("timeout"),
            Just("5"),
            Just("/bin/rm"),
            Just("\\rm"),
            Just("'r''m'"),
            Just("curl"),
            Just("push"),
            Just("\"q\""),
            Just("nice"),
        ]
    }

    fn separator() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just(" "),
            Just(" "),
            Just(" "),
            Just("; "),
            Just(" && "),
            Just(" | "),
            Just("\n"),
            Just(" || "),
            Just(" & ")
        ]
    }

    proptest! {
        #[test]
        fn a_read_script_never_runs_what_a_deny_rule_matches(
            parts in proptest::collection::vec((word(), separator()), 1..12),
            deny in prop_oneof![Just("rm*"), Just("git push*"), Just("curl *"), Just("* x*"), Just("ls")],
            allows in proptest::collection::vec(prop_oneof![Just("*"), Just("ls*"), Just("git *"), Just("rm *")], 0..3),
        ) {
            let script: String = parts.iter().map(|(w, s)| format!("{w}{s}")).collect();
            let reading = read_argv(&["sh".into(), "-c".into(), script.clone()]);
            let pattern = Pattern::new(deny, Mode::Text);
            let hit = reading.commands.iter().any(|c| pattern.matches(&c.text()));
            let policy = Policy::new()
                .rule(Rule::allow("run_shell"))
                .rules(allows.into_iter().map(|a| Rule::allow("run_shell").command(a)))
                .rule(Rule::deny("run_shell").command(deny));
            let tool = Shell(ToolSpec::new("run_shell", "Run.", json!({"type": "object"})));
            let verdict = evaluate(&policy, &tool, &json!({"script": script}), &[]);
            if reading.doubt.is_none() && hit {
                prop_assert_eq!(verdict.permission, Permission::Deny, "{}", verdict);
            }
            if hit {
                prop_assert_ne!(verdict.permission, Permission::Allow, "{}", verdict);
            }
        }
    }
}
