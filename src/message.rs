//! Provider-neutral conversation messages, and the tool specs sent beside them.
//!
//! A [`Message`] has a [`Role`] and a list of [`Part`]s: text, a refusal, the
//! model's reasoning, a [`ToolCall`] the model asked for, or the [`ToolResult`]
//! that answers it. Every provider module converts to and from these types, and
//! history stores persist their serde form, so a conversation can move between
//! providers and survive a restart.

mod image;

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "__http")]
pub(crate) use image::human_size;
pub use image::{Image, ImageError};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person talking to the agent.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, answering an assistant message.
    Tool,
}

/// One message of a conversation.
///
/// # Examples
/// ```
/// use ferrobot::{Message, Role};
/// let message = Message::user("how much disk space is left?");
/// assert_eq!(message.role, Role::User);
/// assert_eq!(message.text(), "how much disk space is left?");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub parts: Vec<Part>,
    /// Set when the turn was cancelled while this message was being written,
    /// so it holds only what had streamed by then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Set on a summary written by context compaction: it stands for every
    /// message stored before it, which stay in the store but are no longer
    /// sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
    /// Set on what the agent told the model after a typed answer that
    /// didn't fit: a user message the user didn't write, which starts no
    /// turn of its own ([`starts_turn`](Self::starts_turn)).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub correction: bool,
    /// Set on what a user said while a turn ran and the agent entered into
    /// that turn ([`WhileBusy::Steer`](crate::agent::WhileBusy::Steer)): a
    /// user message inside a turn, which starts no turn of its own
    /// ([`starts_turn`](Self::starts_turn)), so `/undo` takes it back with
    /// the turn it steered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub steering: bool,
}

/// A piece of a [`Message`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model declined to answer; the text says why.
    Refusal {
        /// The model's explanation.
        text: String,
    },
    /// The model's reasoning ("thinking") before its answer.
    Reasoning(Reasoning),
    /// The model asks for a tool to be run.
    ToolCall(ToolCall),
    /// The outcome of a tool call.
    ToolResult(ToolResult),
    /// An image, in a user's message.
    Image(Image),
    /// Something a provider produced and ran on its own side (Anthropic's
    /// web search or MCP blocks), kept verbatim so the same dialect gets it
    /// back; other dialects leave it out.
    Opaque(Opaque),
}

/// A provider's own content block, kept as it came.
///
/// # Examples
/// ```
/// use ferrobot::{Message, Opaque, Part, Role};
/// let search = Opaque {
///     provider: "anthropic".into(),
///     value: serde_json::json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rust"}}),
/// };
/// let message = Message::new(Role::Assistant, vec![Part::Opaque(search), Part::text("Found it.")]);
/// assert_eq!(message.text(), "Found it.");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opaque {
    /// The dialect that made it, e.g. `"anthropic"`.
    pub provider: String,
    /// The block, in that dialect's wire form.
    pub value: serde_json::Value,
}

/// The model's reasoning, with what a provider needs to accept it back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reasoning {
    /// The reasoning text (may be empty when the provider only sent a signature).
    pub text: String,
    /// An opaque value some providers attach to reasoning and require back
    /// unchanged with the tool results that follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Which provider dialect produced [`signature`](Self::signature); another
    /// dialect drops the signature rather than send it malformed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Identifies the call; its [`ToolResult::call_id`] repeats it. When a server
    /// sends no id, ferrobot generates a stable one and sends it back unchanged.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them. An empty argument string becomes
    /// `{}`. When the model wrote text that is not JSON, it is kept here as a
    /// JSON string so nothing is lost, and the tool is not run.
    pub arguments: Value,
}

impl ToolCall {
    /// Creates a tool call.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::ToolCall;
    /// let call = ToolCall::new("call_1", "add", serde_json::json!({"a": 2, "b": 3}));
    /// assert_eq!(call.name, "add");
    /// ```
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// The outcome of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub call_id: String,
    /// What the tool returned, or what went wrong.
    pub content: String,
    /// Whether `content` describes a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Images the tool showed, after its text
    /// ([`ToolOutput::image`](crate::tool::ToolOutput::image)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            call_id: call_id.into(),
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// With images the tool showed.
    #[must_use]
    pub fn with_images(mut self, images: Vec<Image>) -> Self {
        self.images = images;
        self
    }

    /// A failed result; `content` tells the model what went wrong.
    pub fn error(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            call_id: call_id.into(),
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            role,
            parts,
            interrupted: false,
            summary: false,
            correction: false,
            steering: false,
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![Part::text(text)])
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Part::text(text)])
    }

    /// An assistant message holding only text.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![Part::text(text)])
    }

    /// A tool message holding the given results.
    pub fn tool_results(results: impl IntoIterator<Item = ToolResult>) -> Self {
        Self::new(
            Role::Tool,
            results.into_iter().map(Part::ToolResult).collect(),
        )
    }

    /// A summary of the conversation before it, as context compaction writes
    /// it: a user message, so every provider takes it.
    pub fn summary(text: impl AsRef<str>) -> Self {
        let mut message = Self::user(format!(
            "Summary of the earlier conversation:\n{}",
            text.as_ref()
        ));
        message.summary = true;
        message
    }

    /// What the agent tells the model after a typed answer that didn't fit:
    /// a user message marked [`correction`](Self::correction).
    pub fn correction(text: impl Into<String>) -> Self {
        let mut message = Self::user(text);
        message.correction = true;
        message
    }

    /// What the user said while a turn ran, entered into that turn: a user
    /// message marked [`steering`](Self::steering).
    ///
    /// # Examples
    /// ```
    /// use ferrobot::Message;
    /// let message = Message::steering("use the staging server instead");
    /// assert!(message.steering);
    /// assert!(!message.starts_turn());
    /// ```
    pub fn steering(text: impl Into<String>) -> Self {
        let mut message = Self::user(text);
        message.steering = true;
        message
    }

    /// Whether the message starts a turn: a user's own message, not a
    /// summary, a correction or a steering message. Where `/undo`,
    /// compaction and the image policy count turns from.
    pub fn starts_turn(&self) -> bool {
        self.role == Role::User && !self.summary && !self.correction && !self.steering
    }

    /// Marks the message as cut short by a cancelled turn.
    #[must_use]
    pub fn with_interrupted(mut self, interrupted: bool) -> Self {
        self.interrupted = interrupted;
        self
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        self.collect(|part| match part {
            Part::Text { text } => Some(text),
            _ => None,
        })
    }

    /// The concatenated refusal parts, if any.
    pub fn refusal(&self) -> Option<String> {
        self.has(|p| matches!(p, Part::Refusal { .. })).then(|| {
            self.collect(|part| match part {
                Part::Refusal { text } => Some(text),
                _ => None,
            })
        })
    }

    /// The concatenated reasoning text, if any.
    pub fn reasoning(&self) -> Option<String> {
        self.has(|p| matches!(p, Part::Reasoning(_))).then(|| {
            self.collect(|part| match part {
                Part::Reasoning(r) => Some(&r.text),
                _ => None,
            })
        })
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl DoubleEndedIterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The images, in order: its own, then those of its tool results.
    pub fn images(&self) -> impl Iterator<Item = &Image> {
        self.parts.iter().flat_map(|part| match part {
            Part::Image(image) => std::slice::from_ref(image),
            Part::ToolResult(result) => &result.images[..],
            _ => &[],
        })
    }

    /// The images, in the order of [`images`](Self::images), to change in
    /// place: what history stores and the agent use to swap bytes for a
    /// stored reference and back.
    pub(crate) fn images_mut(&mut self) -> impl Iterator<Item = &mut Image> {
        self.parts.iter_mut().flat_map(|part| match part {
            Part::Image(image) => std::slice::from_mut(image),
            Part::ToolResult(result) => &mut result.images[..],
            _ => &mut [],
        })
    }

    /// The tool results, in order.
    pub fn tool_results_iter(&self) -> impl Iterator<Item = &ToolResult> {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolResult(result) => Some(result),
            _ => None,
        })
    }

    fn has(&self, pred: impl Fn(&Part) -> bool) -> bool {
        self.parts.iter().any(pred)
    }

    fn collect<'a>(&'a self, pick: impl Fn(&'a Part) -> Option<&'a String>) -> String {
        self.parts
            .iter()
            .filter_map(pick)
            .map(String::as_str)
            .collect()
    }
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// An image part.
    pub fn image(image: Image) -> Self {
        Part::Image(image)
    }
}

/// A tool as the model sees it: a name, what it does, and a JSON Schema for
/// its arguments.
///
/// # Examples
/// ```
/// use ferrobot::ToolSpec;
/// let spec = ToolSpec::new("uptime", "How long this machine has been up.", serde_json::json!({"type": "object", "properties": {}}));
/// assert_eq!(spec.name, "uptime");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// Creates a tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// Token counts reported by a provider.
///
/// Counts add up with `+` across the model calls of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens the model generated, reasoning included.
    pub output_tokens: u64,
    /// Of `output_tokens`, those spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Of `input_tokens`, those served from the provider's prompt cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

impl Add for Usage {
    type Output = Usage;
    fn add(mut self, rhs: Usage) -> Usage {
        self += rhs;
        self
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.reasoning_tokens += rhs.reasoning_tokens;
        self.cached_tokens += rhs.cached_tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_part_round_trips_through_serde() {
        let message = Message::new(
            Role::Assistant,
            vec![
                Part::text("hi"),
                Part::Refusal { text: "no".into() },
                Part::Reasoning(Reasoning {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    provider: Some("anthropic".into()),
                }),
                Part::ToolCall(ToolCall::new("c1", "add", json!({"a": 1}))),
                Part::ToolResult(ToolResult::error("c1", "boom")),
            ],
        )
        .with_interrupted(true);
        let json = serde_json::to_string(&message).unwrap();
        let back: Message = serde_json::from_str(&json).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn accessors_concatenate_parts() {
        let message = Message::new(
            Role::Assistant,
            vec![
                Part::text("a"),
                Part::text("b"),
                Part::Refusal { text: "r".into() },
            ],
        );
        assert_eq!(message.text(), "ab");
        assert_eq!(message.refusal().as_deref(), Some("r"));
        assert_eq!(message.reasoning(), None);
    }

    #[test]
    fn usage_adds_field_by_field() {
        let a = Usage {
            input_tokens: 1,
            output_tokens: 2,
            reasoning_tokens: 3,
            cached_tokens: 4,
        };
        assert_eq!((a + a).cached_tokens, 8);
    }
}
