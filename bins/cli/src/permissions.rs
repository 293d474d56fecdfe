//! `permissions`: the rules the config gives every agent, what each tool
//! does when no rule matches, and the "always" approvals stored with the
//! conversations; `permissions test`: what would happen to one call.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use ferrobot::bot::always_covers;
use ferrobot::history::HistoryStore;
use ferrobot::policy::{Approval, Permission, Policy};
use ferrobot_app::{LoadedConfig, ToolState};
use serde_json::Value;

use crate::args::PermissionsAction;
use crate::commands::find_tool;
use crate::{EXIT_ASK, EXIT_DENY};

pub(crate) async fn permissions(
    loaded: &LoadedConfig,
    action: Option<PermissionsAction>,
) -> anyhow::Result<ExitCode> {
    match action {
        None => show(loaded).await,
        Some(PermissionsAction::Test {
            tool,
            arguments,
            conversation,
        }) => test(loaded, &tool, &arguments, conversation.as_deref()).await,
    }
}

async fn show(loaded: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let policy = loaded.policy();
    out!("Rules (the last that matches a call decides; a deny is final):");
    if policy.list().is_empty() {
        out!("  none: each tool's default decides");
    }
    let source = loaded.rules_source();
    for (index, rule) in policy.list().iter().enumerate() {
        let number = index + 1;
        out!("  {number:>2}  {rule}    # permissions.rules[{number}], {source}");
    }
    // The defaults depend on the call for some tools (a question filled from
    // the arguments, the commands a command tool would run): these are for
    // a call without arguments, and `permissions test` answers for a call.
    out!("\nDefaults, when no rule matches (for a call without arguments):");
    let none = Value::Object(serde_json::Map::new());
    for tool in loaded.tools().map_err(|e| anyhow::anyhow!(e))? {
        let verdict = Policy::new().evaluate(tool.as_ref(), &none, &[]);
        out!(
            "  {:<20} {:<5}  {}",
            tool.name(),
            verdict.permission.to_string(),
            verdict.reason
        );
    }
    out!("\n\"Always\" approvals, by conversation:");
    let store = open(loaded).await?;
    let mut any = false;
    for info in store.list().await? {
        for approval in store.approvals(&info.id).await? {
            any = true;
            out!("  {}  {}", info.id, approved(&approval));
        }
    }
    if !any {
        out!("  none");
    }
    Ok(ExitCode::SUCCESS)
}

/// An approval as `permissions` lists it: what it covers, who gave it, when.
fn approved(approval: &Approval) -> String {
    let covers = always_covers(&approval.tool, &approval.scope);
    let who = approval.granted_by.as_deref().unwrap_or("someone unknown");
    format!("{covers}, by {who}, {}", utc(approval.granted_at))
}

async fn test(
    loaded: &LoadedConfig,
    name: &str,
    words: &[String],
    conversation: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let tool = find_tool(loaded, name)?;
    let arguments = arguments(words, &tool.spec().parameters)?;
    // The agent turns such a call back before asking the policy.
    if let Err(error) = tool.check_arguments(&arguments) {
        anyhow::bail!(
            "`{name}` would refuse these arguments before any rule is asked: {}",
            error.message()
        );
    }
    let approvals = match conversation {
        Some(conversation) => open(loaded).await?.approvals(conversation).await?,
        None => Vec::new(),
    };
    let verdict = loaded
        .policy()
        .evaluate(tool.as_ref(), &arguments, &approvals);
    out!("{verdict}");
    if ToolState::load(&loaded.tool_state_path())?.is_disabled(name) {
        eprintln!(
            "note: `{name}` is disabled, so no call of it runs now (`ferrobot enable {name}`)"
        );
    }
    Ok(match verdict.permission {
        Permission::Allow => ExitCode::SUCCESS,
        Permission::Ask => ExitCode::from(EXIT_ASK),
        Permission::Deny => ExitCode::from(EXIT_DENY),
    })
}

/// The call's arguments: one JSON object, or `key=value` words as the shell
/// split them, read by the slash commands' parser (each word quoted for it,
/// so a value with spaces stays whole).
fn arguments(words: &[String], schema: &Value) -> anyhow::Result<Value> {
    let joined = words.join(" ");
    if joined.trim_start().starts_with('{') {
        let value: Value = serde_json::from_str(&joined)
            .context("the arguments start with `{` but are not a JSON object")?;
        anyhow::ensure!(
            value.is_object(),
            "the arguments must be one JSON object, e.g. '{{\"path\": \"/etc\"}}'"
        );
        return Ok(value);
    }
    let text = if words.iter().all(|word| word.contains('=')) {
        let pairs = words.iter().filter_map(|word| word.split_once('='));
        let quoted = ferrobot::bot::slash_text("", pairs);
        quoted.trim_start_matches('/').to_owned()
    } else {
        // The parser names the word that isn't `key=value`.
        joined
    };
    ferrobot::agent::parse_arguments(&text, schema).map_err(|message| anyhow::anyhow!(message))
}

async fn open(loaded: &LoadedConfig) -> anyhow::Result<Arc<dyn HistoryStore>> {
    let store = loaded
        .open_history()
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(store.shared())
}

/// Seconds since the Unix epoch as a UTC date and time, `2024-05-01 09:30 UTC`
/// (a time no calendar holds as the number itself).
fn utc(seconds: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(seconds) {
        Ok(at) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute()
        ),
        Err(_) => format!("{seconds} s after 1970"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_210_096), "2024-02-29 12:34 UTC");
        assert_eq!(utc(951_868_800), "2000-03-01 00:00 UTC");
    }

    #[test]
    fn arguments_are_json_or_key_value_words() {
        let schema =
            json!({"properties": {"path": {"type": "string"}, "depth": {"type": "integer"}}});
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            arguments(&words(&["path=/my dir", "depth=2"]), &schema).unwrap(),
            json!({"path": "/my dir", "depth": 2})
        );
        assert_eq!(
            arguments(&words(&[r#"{"path": "/etc"}"#]), &schema).unwrap(),
            json!({"path": "/etc"})
        );
        assert_eq!(arguments(&[], &schema).unwrap(), json!({}));
        let error = arguments(&words(&["depth"]), &schema).unwrap_err();
        assert!(error.to_string().contains("expected key=value"), "{error}");
        let error = arguments(&words(&["nope=1"]), &schema).unwrap_err();
        assert!(
            error.to_string().contains("unknown parameter `nope`"),
            "{error}"
        );
    }
}
