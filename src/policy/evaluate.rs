//! The order in which the layers decide.
//!
//! A first cut: tool names and arguments matched exactly or with a trailing
//! `*`; no floor, no shell reading, no path canonicalisation yet.

use serde_json::Value;

use super::{Approval, Layer, Permission, Policy, Rule, Scope, Verdict};
use crate::tool::Tool;

pub(super) fn evaluate(
    policy: &Policy,
    tool: &dyn Tool,
    arguments: &Value,
    approvals: &[Approval],
) -> Verdict {
    let name = tool.name();
    let ruled = policy
        .rules
        .iter()
        .enumerate()
        .rev()
        .find(|(_, rule)| matches(rule, name, arguments));
    if let Some((index, rule)) = ruled
        && rule.permission == Permission::Deny
    {
        return Verdict::new(
            Permission::Deny,
            Layer::Application,
            format!("rule {}: {rule}", index + 1),
        );
    }
    let runs_commands = tool.command_line(arguments).is_some();
    if !runs_commands
        && let Some(approval) = approvals
            .iter()
            .find(|a| a.tool == name && covers(&a.scope, arguments))
    {
        return Verdict::new(
            Permission::Allow,
            Layer::Conversation,
            format!("always allowed: {}", approval.scope),
        );
    }
    if let Some((index, rule)) = ruled {
        return Verdict::new(
            rule.permission,
            Layer::Application,
            format!("rule {}: {rule}", index + 1),
        );
    }
    if tool.confirmation(arguments).is_some() {
        return Verdict::new(Permission::Ask, Layer::Default, "the tool asks first");
    }
    let effects = tool.effects();
    if effects.destructive {
        return Verdict::new(Permission::Ask, Layer::Default, "a destructive tool");
    }
    Verdict::new(Permission::Allow, Layer::Default, "no rule matched")
}

fn matches(rule: &Rule, tool: &str, arguments: &Value) -> bool {
    glob(&rule.tool, tool)
        && rule.arguments.iter().all(|(name, pattern)| {
            arguments
                .get(name)
                .and_then(Value::as_str)
                .is_some_and(|value| glob(pattern, value))
        })
        && rule.command.is_none()
}

fn glob(pattern: &str, text: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => text.starts_with(prefix.trim_end_matches('*')),
        None => pattern == text,
    }
}

fn covers(scope: &Scope, arguments: &Value) -> bool {
    match scope {
        Scope::Call { arguments: exact } => exact == arguments,
        Scope::Tool => true,
        Scope::Prefix { argument, prefix } => arguments
            .get(argument)
            .and_then(Value::as_str)
            .is_some_and(|value| value.starts_with(prefix.as_str())),
    }
}
