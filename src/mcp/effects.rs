//! MCP's tool annotations as ferrobot's [`Effects`], per [`Trust`].

use rmcp::model::ToolAnnotations;

use super::Trust;
use crate::tool::Effects;

/// What a tool's calls do, from its annotations, trusted as `trust` says.
///
/// MCP's defaults (when a hint is missing): not read-only, destructive,
/// not idempotent, open world; `destructiveHint` and `idempotentHint` mean
/// something only for a tool that is not read-only. [`Trust::All`] reads a
/// missing hint as "nothing declared" instead. Under [`Trust::Ask`] the
/// effects are as for the default; the tool asks through its own question.
pub(crate) fn effects(annotations: Option<&ToolAnnotations>, trust: Trust) -> Effects {
    let hint = |get: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(get);
    let read_only = hint(|a| a.read_only_hint).unwrap_or(false);
    let trusted = trust == Trust::All;
    let mut effects = Effects::NONE;
    effects.read_only = read_only;
    effects.destructive = !read_only && hint(|a| a.destructive_hint).unwrap_or(!trusted);
    effects.idempotent = read_only || hint(|a| a.idempotent_hint).unwrap_or(false);
    effects.open_world = hint(|a| a.open_world_hint).unwrap_or(!trusted);
    effects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(read_only: Option<bool>, destructive: Option<bool>) -> ToolAnnotations {
        ToolAnnotations::from_raw(None, read_only, destructive, None, None)
    }

    #[test]
    fn an_unannotated_tool_is_destructive_unless_the_server_is_trusted() {
        for trust in [Trust::Ask, Trust::ReadOnlyHints] {
            let e = effects(None, trust);
            assert!(e.destructive && e.open_world && !e.read_only, "{trust}");
        }
        assert_eq!(effects(None, Trust::All), Effects::NONE);
    }

    #[test]
    fn read_only_tools_are_not_destructive_whatever_the_trust() {
        for trust in [Trust::Ask, Trust::ReadOnlyHints, Trust::All] {
            let e = effects(Some(&annotated(Some(true), Some(true))), trust);
            assert!(e.read_only && !e.destructive && e.idempotent, "{trust}");
        }
    }

    #[test]
    fn an_explicit_destructive_hint_holds_under_full_trust() {
        let e = effects(Some(&annotated(Some(false), Some(true))), Trust::All);
        assert!(e.destructive);
        let e = effects(Some(&annotated(None, Some(false))), Trust::ReadOnlyHints);
        assert!(!e.destructive && e.open_world);
    }
}
