//! The permission rules and the shell reader: rules whose patterns are any
//! text, checked, then asked about a command tool that runs a script the
//! model wrote (`sh -c {script}`) and one that runs an argv with a path.
//! Never a panic, never a hang; a rule set that fails its check is an
//! error naming the rule.
#![no_main]

use ferrobot::policy::{Permission, Policy, Rule};
use ferrobot::tools::{CommandTool, ParamKind};
use serde_json::json;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Fields separated by `\u{1}`: the script, then per rule a permission
    // (`0` allow, `1` ask, `2` deny), a tool pattern, a command pattern and
    // an argument pattern.
    let mut fields = text.split('\u{1}');
    let script = fields.next().unwrap_or_default();
    let mut rules = Vec::new();
    let mut rest: Vec<&str> = fields.collect();
    while !rest.is_empty() {
        let take = rest.len().min(4);
        let rule: Vec<&str> = rest.drain(..take).collect();
        let permission = match rule[0].bytes().next().unwrap_or_default() % 3 {
            0 => Permission::Allow,
            1 => Permission::Ask,
            _ => Permission::Deny,
        };
        let mut made = Rule::new(permission, rule.get(1).copied().unwrap_or("*"));
        if let Some(command) = rule.get(2).filter(|c| !c.is_empty()) {
            made = made.command(*command);
        }
        if let Some(argument) = rule.get(3).filter(|a| !a.is_empty()) {
            made = made.argument("path", *argument);
        }
        rules.push(made);
    }
    let policy = Policy::new().rules(rules);
    if let Err(error) = policy.check() {
        assert!(error.to_string().contains("rule "), "{error}");
        return;
    }
    let shell = CommandTool::new("run_script", "Run a script.", ["sh", "-c", "{script}"]).param(
        "script",
        ParamKind::String,
        "The script.",
        true,
    );
    let _ = policy.evaluate(&shell, &json!({ "script": script }), &[]);
    let remove = CommandTool::new("remove", "Remove a file.", ["rm", "-f", "{path}"]).param(
        "path",
        ParamKind::String,
        "The file.",
        true,
    );
    let _ = policy.evaluate(&remove, &json!({ "path": script }), &[]);
});
