//! The chat-completions wire format: request bodies out, chunks and responses in.
//!
//! Each chunk is parsed once, straight into these typed structs; fields we
//! don't use (logprobs, obfuscation padding, provider extras) are skipped by
//! serde without being materialised.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Image, Message, Part, Role, ToolResult, ToolSpec, Usage};
use crate::provider::images::{self, ToolNames};

// ---- request ----------------------------------------------------------------

#[derive(Serialize)]
pub(super) struct Body<'a> {
    pub(super) model: &'a str,
    pub(super) messages: Messages<'a>,
    #[serde(skip_serializing_if = "Tools::is_empty")]
    pub(super) tools: Tools<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<Value>,
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(flatten)]
    pub(super) extra: Cow<'a, Map<String, Value>>,
}

#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// The system prompt followed by the conversation, one wire message per
/// message, except tool messages, which become one wire message per result.
/// Tool messages hold only text, so the images tool results showed follow
/// the tool messages of their round in one user message.
pub(super) struct Messages<'a> {
    pub(super) system: Option<&'a str>,
    pub(super) messages: &'a [Message],
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        if let Some(system) = self.system {
            seq.serialize_element(&TextMessage {
                role: "system",
                content: system,
            })?;
        }
        // Results of the current run of tool messages that showed images.
        let mut shown: Vec<&ToolResult> = Vec::new();
        for (m, message) in self.messages.iter().enumerate() {
            if message.role != Role::Tool && !shown.is_empty() {
                seq.serialize_element(&ToolImages {
                    results: &shown,
                    names: ToolNames(&self.messages[..m]),
                })?;
                shown.clear();
            }
            match message.role {
                Role::User if message.images().next().is_some() => {
                    seq.serialize_element(&UserMessage(message))?;
                }
                Role::System | Role::User => {
                    let role = if message.role == Role::System {
                        "system"
                    } else {
                        "user"
                    };
                    seq.serialize_element(&TextMessage {
                        role,
                        content: &message.text(),
                    })?;
                }
                Role::Assistant => seq.serialize_element(&AssistantMessage(message))?,
                Role::Tool => {
                    for result in message.tool_results_iter() {
                        seq.serialize_element(&ToolMessage {
                            role: "tool",
                            tool_call_id: &result.call_id,
                            content: &result.content,
                        })?;
                        if !result.images.is_empty() {
                            shown.push(result);
                        }
                    }
                }
            }
        }
        if !shown.is_empty() {
            seq.serialize_element(&ToolImages {
                results: &shown,
                names: ToolNames(self.messages),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct TextMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ToolMessage<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a str,
}

/// A user message with images: its text, then its images, as content parts.
struct UserMessage<'a>(&'a Message);

impl Serialize for UserMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.text();
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry(
            "content",
            &ContentParts {
                text: (!text.is_empty()).then_some(&*text),
                parts: &self.0.parts,
            },
        )?;
        map.end()
    }
}

/// The user message after a round's tool messages that carries the images
/// their results showed, each result's introduced by which call it was.
struct ToolImages<'a, 'b> {
    results: &'b [&'a ToolResult],
    names: ToolNames<'a>,
}

impl Serialize for ToolImages<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Parts<'a, 'b>(&'b ToolImages<'a, 'b>);
        impl Serialize for Parts<'_, '_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(None)?;
                for result in self.0.results {
                    // The model knows the call by its id.
                    let call = match self.0.names.get(&result.call_id) {
                        Some(name) => format!("the tool call `{}` (`{name}`)", result.call_id),
                        None => format!("the tool call `{}`", result.call_id),
                    };
                    let intro = images::from_tool(result.images.len(), &call);
                    seq.serialize_element(&TextPart { text: &intro })?;
                    for image in &result.images {
                        seq.serialize_element(&ImagePart(image))?;
                    }
                }
                seq.end()
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("content", &Parts(self))?;
        map.end()
    }
}

/// Content parts: the text, if any, then the image parts of `parts`.
struct ContentParts<'a> {
    text: Option<&'a str>,
    parts: &'a [Part],
}

impl Serialize for ContentParts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        if let Some(text) = self.text {
            seq.serialize_element(&TextPart { text })?;
        }
        for part in self.parts {
            if let Part::Image(image) = part {
                seq.serialize_element(&ImagePart(image))?;
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "text")]
struct TextPart<'a> {
    text: &'a str,
}

/// `{"type": "image_url", "image_url": {"url": …}}`: a `data:` URI of the
/// bytes, or the URL for the server to fetch (`OpenAI`'s image inputs; the
/// local servers read the same part).
struct ImagePart<'a>(&'a Image);

impl Serialize for ImagePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Url {
            url: String,
        }
        // `images::check` refused stored images before the body was written.
        let url = self
            .0
            .uri()
            .ok_or_else(|| serde::ser::Error::custom("a stored image was not loaded"))?;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "image_url")?;
        map.serialize_entry("image_url", &Url { url })?;
        map.end()
    }
}

struct AssistantMessage<'a>(&'a Message);

impl Serialize for AssistantMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let message = self.0;
        // A refusal is sent back as the assistant's text: few servers besides
        // OpenAI accept a `refusal` field on input messages.
        let content: String = message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Text { text } | Part::Refusal { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let has_calls = message.tool_calls().next().is_some();
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("role", "assistant")?;
        if content.is_empty() && has_calls {
            map.serialize_entry("content", &Option::<&str>::None)?;
        } else {
            map.serialize_entry("content", &content)?;
        }
        if has_calls {
            map.serialize_entry("tool_calls", &ToolCalls(message))?;
        }
        map.end()
    }
}

struct ToolCalls<'a>(&'a Message);

impl Serialize for ToolCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for call in self.0.tool_calls() {
            // Arguments that were not valid JSON are kept as a JSON string;
            // send the model's own text back rather than a quoted copy.
            let arguments = match &call.arguments {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            };
            seq.serialize_element(&WireCallOut {
                id: &call.id,
                kind: "function",
                function: WireFunctionOut {
                    name: &call.name,
                    arguments,
                },
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct WireCallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionOut<'a>,
}

#[derive(Serialize)]
struct WireFunctionOut<'a> {
    name: &'a str,
    arguments: String,
}

/// The tools on offer. With `strict`, each schema that `OpenAI`'s strict
/// mode can express is sent in that form with `"strict": true`; the others
/// go as they are.
pub(super) struct Tools<'a> {
    pub(super) specs: &'a [ToolSpec],
    pub(super) strict: bool,
}

impl Tools<'_> {
    fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: Cow<'a, Value>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            strict: bool,
        }
        s.collect_seq(self.specs.iter().map(|spec| {
            let (parameters, strict) = if self.strict {
                crate::tool::schema::openai_strict_or_plain(&spec.parameters)
            } else {
                (Cow::Borrowed(&spec.parameters), false)
            };
            Tool {
                kind: "function",
                function: Function {
                    name: &spec.name,
                    description: &spec.description,
                    strict,
                    parameters,
                },
            }
        }))
    }
}

// ---- response ---------------------------------------------------------------

/// One streamed chunk (`chat.completion.chunk`) or a whole non-streamed
/// response (`chat.completion`): the two share this shape, with `delta` in
/// the first and `message` in the second.
///
/// Strings borrow from the payload where they have no escapes, and rare parts
/// are boxed: a chunk is parsed and moved once per event, so its size shows in
/// the throughput.
#[derive(Deserialize)]
pub(super) struct Chunk<'a> {
    /// The first choice; with `n > 1` the others are skipped without
    /// collecting them into a vector.
    #[serde(default, borrow, rename = "choices", deserialize_with = "first_choice")]
    pub(super) choice: Option<Choice<'a>>,
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
    /// Groq reports streamed usage here instead of in `usage`.
    #[serde(default)]
    pub(super) x_groq: Option<Box<XGroq>>,
    #[serde(default)]
    pub(super) error: Option<Box<Value>>,
}

fn first_choice<'de, D, C>(d: D) -> Result<Option<C>, D::Error>
where
    D: Deserializer<'de>,
    C: Deserialize<'de> + Indexed,
{
    struct First<C>(std::marker::PhantomData<C>);
    impl<'de, C: Deserialize<'de> + Indexed> Visitor<'de> for First<C> {
        type Value = Option<C>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of choices")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut first = None;
            while let Some(choice) = seq.next_element::<C>()? {
                if choice.index() == 0 && first.is_none() {
                    first = Some(choice);
                }
            }
            Ok(first)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }
    // `null` or a list: asked for as such, not with `deserialize_any`, whose
    // code for every JSON type ran for every chunk.
    d.deserialize_option(First(std::marker::PhantomData))
}

/// The chunk almost every streamed token comes in: a piece of text of the
/// first choice's delta, maybe a finish reason, nothing else a [`Chunk`]
/// reads. Streamed chunks are read as this first, and as a [`Chunk`] only
/// when this type refuses them (tool calls, reasoning, refusals, usage,
/// errors, a message: a field of the delta's other than the text, or of
/// the choice's or the chunk's, that isn't `null`). Its smaller visitors
/// are what one token runs: the whole `Chunk`'s, with the HTTP client's, no
/// longer fit the processor's instruction cache, and every token fetched
/// them again (`../shared/perf`: callgrind's cache simulation, and CPU
/// time).
#[derive(Deserialize)]
pub(super) struct TextChunk {
    #[serde(default, rename = "choices", deserialize_with = "first_choice")]
    pub(super) choice: Option<TextChoice>,
    #[serde(default, rename = "usage")]
    _usage: Null,
    #[serde(default, rename = "x_groq")]
    _x_groq: Null,
    #[serde(default, rename = "error")]
    _error: Null,
}

#[derive(Deserialize)]
pub(super) struct TextChoice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<TextDelta>,
    /// In place of the delta or beside it: the whole [`Chunk`] reads it.
    #[serde(default, rename = "message")]
    _message: Null,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

/// A delta with text at most: any other field refuses the chunk, even a
/// `null` one (servers that send `"reasoning_content": null` with each
/// token have their chunks read whole: matching those names here made
/// every token run a quarter of a kilobyte more code).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TextDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "role")]
    _role: de::IgnoredAny,
}

/// A field [`TextChunk`] leaves to [`Chunk`]: absent or `null`, else the
/// chunk is not a text chunk.
#[derive(Default)]
struct Null;

impl<'de> Deserialize<'de> for Null {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Null;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("null")
            }
            fn visit_none<E: de::Error>(self) -> Result<Null, E> {
                Ok(Null)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Null, E> {
                Ok(Null)
            }
        }
        d.deserialize_option(V)
    }
}

/// A choice with an `index`, the first of which a chunk's `choices` yield.
trait Indexed {
    fn index(&self) -> u32;
}

impl Indexed for TextChoice {
    fn index(&self) -> u32 {
        self.index
    }
}

impl Indexed for Choice<'_> {
    fn index(&self) -> u32 {
        self.index
    }
}

impl<'a> Choice<'a> {
    /// The delta, else the message.
    pub(super) fn delta(&mut self) -> Option<Box<Delta<'a>>> {
        self.delta.take().or_else(|| self.message.take())
    }
}

impl TextChoice {
    /// The delta's text.
    pub(super) fn text(&mut self) -> Option<String> {
        self.delta.take().and_then(|delta| delta.content)
    }
}

#[derive(Deserialize)]
pub(super) struct XGroq {
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
}

#[derive(Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(default)]
    pub(super) index: u32,
    /// Boxed: moving a 128-byte delta through serde's layers cost more
    /// than the allocation.
    #[serde(default, borrow, deserialize_with = "boxed_delta")]
    delta: Option<Box<Delta<'a>>>,
    /// A whole response's message; some servers stream it in place of the
    /// delta, and Perplexity beside it (holding the text so far).
    #[serde(default, borrow, deserialize_with = "boxed_delta")]
    message: Option<Box<Delta<'a>>>,
    #[serde(default, borrow)]
    pub(super) finish_reason: Option<Cow<'a, str>>,
}

/// A delta or a message: one function for both fields, not the code to
/// read one written out in each.
#[inline(never)]
fn boxed_delta<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<Delta<'a>>>, D::Error> {
    Option::deserialize(d)
}

#[derive(Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) tool_calls: Option<Vec<WireCall<'a>>>,
    /// The legacy `functions` API: one call, no id.
    #[serde(default, borrow)]
    pub(super) function_call: Option<Box<WireFunction<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct WireCall<'a> {
    #[serde(default)]
    pub(super) index: Option<usize>,
    #[serde(default, borrow)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
pub(super) struct WireFunction<'a> {
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) arguments: Arguments<'a>,
}

/// Argument text. Some servers send an object instead of a JSON string;
/// it is re-encoded so every path yields text.
#[derive(Default)]
pub(super) struct Arguments<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Arguments<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON string or object of arguments")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Arguments<'de>, E> {
                Ok(Arguments(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Arguments<'de>, E> {
                Ok(Arguments(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Arguments<'de>, E> {
                Ok(Arguments(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Arguments<'de>, E> {
                Ok(Arguments::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<Arguments<'de>, E> {
                Ok(Arguments::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Arguments<'de>, A::Error> {
                let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Arguments(Cow::Owned(value.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Usage {
        Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        }
    }
}

/// The message of an `{"error": …}` object found inside a stream.
pub(super) fn stream_error_message(error: &Value) -> String {
    error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned)
}
