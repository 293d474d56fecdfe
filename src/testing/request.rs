//! A model call's request as JSON, the same on every run: what cassettes
//! keep and compare, and what the conformance check reports.

use serde_json::{Map, Value, json};

use crate::provider::{ChatRequest, ToolChoice};

/// The request as cassettes keep it and bug reports show it: system
/// prompt, messages, tools and tool choice, output format, settings.
pub(crate) fn canonical(request: &ChatRequest<'_>) -> Value {
    let mut messages = serde_json::to_value(request.messages).unwrap_or_default();
    shorten_images(&mut messages);
    let tool_choice = match request.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({ "tool": name }),
        #[allow(unreachable_patterns)]
        _ => json!("other"),
    };
    let mut canonical = Map::new();
    if let Some(system) = request.system {
        canonical.insert("system".into(), system.into());
    }
    canonical.insert("messages".into(), messages);
    if !request.tools.is_empty() {
        canonical.insert(
            "tools".into(),
            serde_json::to_value(request.tools).unwrap_or_default(),
        );
        canonical.insert("tool_choice".into(), tool_choice);
    }
    if let Some(output) = request.output {
        canonical.insert(
            "output".into(),
            json!({ "name": output.name, "description": output.description, "schema": output.schema }),
        );
    }
    // Only the settings given: an unset one is the provider's own.
    if let Value::Object(mut settings) = serde_json::to_value(request.settings).unwrap_or_default()
    {
        settings.retain(|_, value| !value.is_null());
        if !settings.is_empty() {
            canonical.insert("settings".into(), Value::Object(settings));
        }
    }
    Value::Object(canonical)
}

/// Images as their type, size and digest: the file stays small, and a
/// different image still shows as a difference.
fn shorten_images(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("source").and_then(Value::as_str) == Some("bytes")
                && let Some(Value::String(data)) = map.get("data")
            {
                let digest = data.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                    (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
                });
                let shown = format!("{} base64 characters, fnv1a {digest:016x}", data.len());
                map.insert("data".into(), shown.into());
            }
            map.values_mut().for_each(shorten_images);
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_images),
        _ => {}
    }
}
