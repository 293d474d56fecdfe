//! Folding a model call's events back into one message.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::{FinishReason, StreamEvent, ToolCallDelta};
use crate::message::{Message, Part, Reasoning, Role, ToolCall, Usage};

/// The most argument text one tool call may carry (1 MiB). Past it the
/// text is dropped as it streams, not kept or parsed, and the agent refuses
/// the call telling the model why: a runaway model can't fill the memory
/// or the history with one call.
pub const MAX_TOOL_ARGUMENTS: usize = 1024 * 1024;

/// How an oversized call's arguments read once dropped: in the history and
/// in what is sent back to the model.
const DROPPED: (&str, &str) = (
    "[arguments of ",
    " bytes dropped: over the 1 MiB a call may carry]",
);

/// The size of the arguments dropped from a call, if they were.
pub(crate) fn dropped_arguments(arguments: &Value) -> Option<&str> {
    let text = arguments.as_str()?;
    text.strip_prefix(DROPPED.0)?.strip_suffix(DROPPED.1)
}

/// Builds the assistant [`Message`] of one model call from its [`StreamEvent`]s.
///
/// Text, reasoning and refusal deltas extend the part of their kind that was
/// written last, so parts keep the order the model wrote them in. Tool-call
/// fragments are grouped by index; the first non-empty id and name win and
/// argument pieces are concatenated, up to [`MAX_TOOL_ARGUMENTS`] a call. A call that arrives without an id gets a
/// generated one, fixed from then on, so the result sent back matches it.
///
/// # Examples
/// ```
/// use ferrobot::provider::{Assembler, StreamEvent, FinishReason};
/// let mut assembler = Assembler::new();
/// assembler.push(&StreamEvent::TextDelta("Hel".into()));
/// assembler.push(&StreamEvent::TextDelta("lo".into()));
/// assembler.push(&StreamEvent::Finish(FinishReason::Stop));
/// let assembled = assembler.finish();
/// assert_eq!(assembled.message.text(), "Hello");
/// assert_eq!(assembled.finish, Some(FinishReason::Stop));
/// ```
#[derive(Debug, Default)]
pub struct Assembler {
    parts: Vec<Part>,
    calls: Vec<PendingCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

#[derive(Debug, Default)]
struct PendingCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
    /// The argument text's whole size once it passed [`MAX_TOOL_ARGUMENTS`]
    /// and was dropped; 0 while it is kept.
    dropped: usize,
}

/// What one model call produced.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Assembled {
    /// The assistant message: text, reasoning, refusal and tool-call parts.
    pub message: Message,
    /// Why the model stopped, if the stream said.
    pub finish: Option<FinishReason>,
    /// Token counts, if the stream reported them.
    pub usage: Option<Usage>,
}

impl Assembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one event.
    pub fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::TextDelta(text) => self.extend_text(text, Kind::Text),
            StreamEvent::ReasoningDelta(text) => self.extend_text(text, Kind::Reasoning),
            StreamEvent::RefusalDelta(text) => self.extend_text(text, Kind::Refusal),
            StreamEvent::ReasoningSignature {
                signature,
                provider,
            } => self.sign_reasoning(signature, provider),
            StreamEvent::ToolCallDelta(delta) => self.push_call(delta),
            StreamEvent::Opaque(opaque) => self.parts.push(Part::Opaque(opaque.clone())),
            StreamEvent::Usage(usage) => self.usage = Some(*usage),
            StreamEvent::Finish(reason) => self.finish = Some(reason.clone()),
        }
    }

    /// Whether any text, reasoning, refusal or tool call has arrived.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.calls.is_empty()
    }

    /// The assembled message, finish reason and usage.
    pub fn finish(self) -> Assembled {
        let mut parts = self.parts;
        parts.extend(self.calls.into_iter().map(|call| {
            Part::ToolCall(ToolCall {
                id: if call.id.is_empty() {
                    generate_call_id()
                } else {
                    call.id
                },
                name: call.name,
                arguments: if call.dropped > 0 {
                    Value::String(format!("{}{}{}", DROPPED.0, call.dropped, DROPPED.1))
                } else {
                    parse_arguments(call.arguments)
                },
            })
        }));
        Assembled {
            message: Message::new(Role::Assistant, parts),
            finish: self.finish,
            usage: self.usage,
        }
    }

    fn extend_text(&mut self, delta: &str, kind: Kind) {
        if delta.is_empty() {
            return;
        }
        match (self.parts.last_mut(), kind) {
            (Some(Part::Text { text }), Kind::Text)
            | (Some(Part::Refusal { text }), Kind::Refusal) => text.push_str(delta),
            // A signed reasoning part is closed; new reasoning starts a new part.
            (Some(Part::Reasoning(r)), Kind::Reasoning) if r.signature.is_none() => {
                r.text.push_str(delta);
            }
            _ => self.parts.push(match kind {
                Kind::Text => Part::text(delta),
                Kind::Refusal => Part::Refusal {
                    text: delta.to_owned(),
                },
                Kind::Reasoning => Part::Reasoning(Reasoning {
                    text: delta.to_owned(),
                    ..Reasoning::default()
                }),
            }),
        }
    }

    fn sign_reasoning(&mut self, signature: &str, provider: &str) {
        match self.parts.last_mut() {
            Some(Part::Reasoning(r)) if r.signature.is_none() => {
                r.signature = Some(signature.to_owned());
                r.provider = Some(provider.to_owned());
            }
            _ => self.parts.push(Part::Reasoning(Reasoning {
                signature: Some(signature.to_owned()),
                provider: Some(provider.to_owned()),
                ..Reasoning::default()
            })),
        }
    }

    fn push_call(&mut self, delta: &ToolCallDelta) {
        // Kept in index order as they arrive (a sort at the end would cost
        // a sort's code for a handful of calls).
        let at = self.calls.partition_point(|c| c.index < delta.index);
        if self.calls.get(at).is_none_or(|c| c.index != delta.index) {
            self.calls.insert(
                at,
                PendingCall {
                    index: delta.index,
                    ..PendingCall::default()
                },
            );
        }
        let call = &mut self.calls[at];
        if let Some(id) = delta.id.as_deref().filter(|id| !id.is_empty())
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        if let Some(name) = delta.name.as_deref().filter(|n| !n.is_empty())
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        if call.dropped > 0 {
            call.dropped += delta.arguments.len();
        } else if call.arguments.len() + delta.arguments.len() > MAX_TOOL_ARGUMENTS {
            call.dropped = call.arguments.len() + delta.arguments.len();
            call.arguments = String::new();
        } else {
            call.arguments.push_str(&delta.arguments);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Reasoning,
    Refusal,
}

/// Parses a call's argument text: empty means `{}`, an object encoded twice
/// (as some models write it) is read as the object, and invalid JSON is kept
/// as a JSON string so the raw text reaches the error message and history.
pub(crate) fn parse_arguments(raw: String) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str(&raw) {
        Ok(Value::String(inner)) => match serde_json::from_str(&inner) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::String(raw),
        },
        Ok(value) => value,
        Err(_) => Value::String(raw),
    }
}

/// An id for a tool call the server sent without one. Unique within the process
/// and, through the start-time prefix, across restarts that share a history.
pub(crate) fn generate_call_id() -> String {
    static PREFIX: LazyLock<u64> = LazyLock::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            & 0xffff_ffff_ffff
    });
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "call_{:012x}{:06x}",
        *PREFIX,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delta(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> StreamEvent {
        StreamEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: args.into(),
        })
    }

    #[test]
    fn interleaved_calls_are_grouped_by_index() {
        let mut a = Assembler::new();
        for event in [
            delta(0, Some("a"), Some("first"), "{\"x\":"),
            delta(1, Some("b"), Some("second"), ""),
            delta(0, None, Some(""), "1}"),
            delta(1, Some(""), None, "{}"),
        ] {
            a.push(&event);
        }
        let message = a.finish().message;
        let calls: Vec<_> = message.tool_calls().cloned().collect();
        assert_eq!(calls[0], ToolCall::new("a", "first", json!({"x": 1})));
        assert_eq!(calls[1], ToolCall::new("b", "second", json!({})));
    }

    #[test]
    fn missing_ids_are_generated_once_and_distinct() {
        let mut a = Assembler::new();
        a.push(&delta(0, Some(""), Some("f"), ""));
        a.push(&delta(1, None, Some("g"), ""));
        let message = a.finish().message;
        let ids: Vec<_> = message.tool_calls().map(|c| c.id.clone()).collect();
        assert!(ids.iter().all(|id| id.starts_with("call_")));
        assert_ne!(ids[0], ids[1]);
    }

    #[test]
    fn invalid_arguments_are_kept_as_text() {
        assert_eq!(parse_arguments("{oops".into()), json!("{oops"));
        assert_eq!(parse_arguments("  ".into()), json!({}));
        assert_eq!(
            parse_arguments(r#""{\"path\": \"/tmp\"}""#.into()),
            json!({"path": "/tmp"}),
            "an object encoded twice"
        );
        assert_eq!(
            parse_arguments(r#""hi""#.into()),
            json!(r#""hi""#),
            "anything else encoded twice stays as the model wrote it"
        );
    }

    #[test]
    fn parts_keep_the_order_the_model_wrote_them_in() {
        let mut a = Assembler::new();
        a.push(&StreamEvent::ReasoningDelta("think".into()));
        a.push(&StreamEvent::TextDelta("answer".into()));
        a.push(&StreamEvent::TextDelta(" more".into()));
        let message = a.finish().message;
        assert!(matches!(&message.parts[0], Part::Reasoning(r) if r.text == "think"));
        assert_eq!(message.parts[1], Part::text("answer more"));
    }
}
