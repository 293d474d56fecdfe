//! Images on the wire: what each dialect's server takes, checked before a
//! request is sent.
//!
//! Every dialect calls [`check`] first thing in its `body`, with its
//! [`Limits`]: a URL to a server that needs the bytes, a stored image that
//! was never loaded, or an image (or a request's images) over the size the
//! server documents is refused with [`ProviderError::InvalidRequest`],
//! naming the image and what to do, instead of a 400 from the server (or,
//! worse, a request that a server truncates). After it, the dialects write
//! what they were given: every image has its bytes, or is a URL their
//! server fetches.
//!
//! The shared corpus of recorded traffic holds no images, so the wire forms
//! each dialect writes come from its provider's documentation, cited where
//! they are written.

// Each dialect uses its own limits; with only some compiled, the others
// are unused.
#![cfg_attr(
    not(all(
        feature = "openai",
        feature = "anthropic",
        feature = "gemini",
        feature = "ollama",
        feature = "responses"
    )),
    allow(dead_code)
)]

use std::fmt;

use super::ProviderError;
use crate::message::{Image, Message, Part, Role, human_size};

/// How a server counts an image's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Its bytes.
    Bytes,
    /// Its base64 text, as the request carries it (a third more).
    Base64,
}

/// A size limit and how the error names it, e.g. `5 MB`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) bytes: u64,
    pub(crate) named: &'static str,
}

/// What a dialect's server takes, from its documentation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Who documents the limits, for messages: "Anthropic's API".
    pub(crate) server: &'static str,
    /// Whether a URL may go for the server to fetch.
    pub(crate) urls: bool,
    /// How sizes are counted.
    pub(crate) counted: Counted,
    /// The most one image may take.
    pub(crate) per_image: Limit,
    /// The most a request's images may take together.
    pub(crate) per_request: Limit,
}

const MIB: u64 = 1024 * 1024;

/// `OpenAI`'s image input requirements: "up to 20MB per image" and "up to
/// 50 MB image bytes per request" (platform.openai.com, guides,
/// images-vision, "Image input requirements"); the same for chat
/// completions and Responses. The local servers that speak chat completions
/// (llama.cpp, vLLM, LM Studio, Ollama's `/v1`) document none of their own,
/// and none smaller is imposed on them.
pub(crate) const OPENAI: Limits = Limits {
    server: "OpenAI's API",
    urls: true,
    counted: Counted::Bytes,
    per_image: Limit {
        bytes: 20 * MIB,
        named: "20 MB",
    },
    per_request: Limit {
        bytes: 50 * MIB,
        named: "50 MB",
    },
};

/// Anthropic's vision guide: "5MB per image" through the API, checked on
/// the base64 text (its 400 reads "image exceeds 5 MB maximum: … bytes >
/// 5242880 bytes"), and 32 MB for a whole Messages request
/// (platform.claude.com, build-with-claude/vision, "General limits"); only
/// the images are counted here, so a request just under it may still be
/// refused by the server.
pub(crate) const ANTHROPIC: Limits = Limits {
    server: "Anthropic's API",
    urls: true,
    counted: Counted::Base64,
    per_image: Limit {
        bytes: 5 * MIB,
        named: "5 MB",
    },
    per_request: Limit {
        bytes: 32 * MIB,
        named: "32 MB",
    },
};

/// Gemini's inline data: 100 MB a request, base64 encoded, since January
/// 2026 (20 MB before; ai.google.dev, gemini-api/docs/file-input-methods,
/// and Google's announcement "Increased file size limits and expanded
/// inputs support in Gemini API"). No limit per image is documented beyond
/// it. URLs are refused: Gemini takes uploaded files' URIs and, since then,
/// external `https` URLs in `fileData`, but wants their `mimeType`, which an
/// [`Image::Url`] doesn't know.
pub(crate) const GEMINI: Limits = Limits {
    server: "Gemini's API",
    urls: false,
    counted: Counted::Base64,
    per_image: Limit {
        bytes: 100 * MIB,
        named: "100 MB",
    },
    per_request: Limit {
        bytes: 100 * MIB,
        named: "100 MB",
    },
};

/// Ollama documents no limit on `images` (docs/api.md, "Chat request (with
/// images)"), so `OpenAI`'s, the largest any other dialect documents, guard
/// against an accident; URLs are refused, as `images` holds base64 only.
pub(crate) const OLLAMA: Limits = Limits {
    server: "Ollama's native API",
    urls: false,
    ..OPENAI
};

/// Refuses, before anything is sent, a request holding an image `limits`
/// says the server can't take. `provider` is the dialect's name, for the
/// error.
pub(crate) fn check(
    provider: &str,
    limits: &Limits,
    messages: &[Message],
) -> Result<(), ProviderError> {
    let invalid = |message: String| ProviderError::InvalidRequest {
        provider: provider.to_owned(),
        message,
    };
    let mut total: u64 = 0;
    for (m, message) in messages.iter().enumerate() {
        let names = ToolNames(&messages[..m]);
        for (place, image) in places(m, message, names) {
            let size = match image {
                Image::Bytes { data, .. } => counted(limits.counted, data.len() as u64),
                Image::Url { .. } if limits.urls => continue,
                Image::Url { url } => {
                    return Err(invalid(format!(
                        "{place} is a URL ({url}): {} needs the image's bytes, and ferrobot \
                         never fetches an image: download it and send `Image::from_bytes(…)`",
                        limits.server
                    )));
                }
                Image::Stored { id, size, .. } => {
                    return Err(invalid(format!(
                        "{place} is a stored image (`{id}`, {}) that was not loaded: the \
                         agent loads stored images before each call; a caller of \
                         `Provider::stream` must replace it with its bytes \
                         (`HistoryStore::load_image`)",
                        human_size(*size)
                    )));
                }
            };
            if size > limits.per_image.bytes {
                return Err(invalid(format!(
                    "{place} is {}{}, over the {} per image {} takes: resize or compress it",
                    human_size(size),
                    as_sent(limits.counted),
                    limits.per_image.named,
                    limits.server,
                )));
            }
            total += size;
        }
    }
    if total > limits.per_request.bytes {
        return Err(invalid(format!(
            "the request's images come to {}{}, over the {} of images in one request {} \
             takes: send fewer or smaller images (resize or compress them, or leave older \
             ones out of the conversation)",
            human_size(total),
            as_sent(limits.counted),
            limits.per_request.named,
            limits.server,
        )));
    }
    Ok(())
}

/// `len` bytes as the server counts them.
fn counted(counted: Counted, len: u64) -> u64 {
    match counted {
        Counted::Bytes => len,
        Counted::Base64 => len.div_ceil(3) * 4,
    }
}

fn as_sent(counted: Counted) -> &'static str {
    match counted {
        Counted::Bytes => "",
        Counted::Base64 => " as base64",
    }
}

/// Where an image is, for errors: "image 2 of message 3 (the user's)".
#[derive(Debug, Clone, Copy)]
enum Place<'a> {
    User {
        message: usize,
        index: usize,
    },
    Tool {
        message: usize,
        index: usize,
        call_id: &'a str,
        name: Option<&'a str>,
    },
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Place::User { message, index } => {
                write!(f, "image {index} of message {message} (the user's)")
            }
            Place::Tool {
                message,
                index,
                call_id,
                name,
            } => {
                write!(f, "image {index} of the result of ")?;
                match name {
                    Some(name) => write!(f, "`{name}` (call `{call_id}`")?,
                    None => write!(f, "the call `{call_id}` (")?,
                }
                write!(f, ", message {message})")
            }
        }
    }
}

/// Every image of `message` (the `m`-th, from 0) with where it is.
fn places<'a>(
    m: usize,
    message: &'a Message,
    names: ToolNames<'a>,
) -> impl Iterator<Item = (Place<'a>, &'a Image)> {
    let message_number = m + 1;
    let own = message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Image(image) => Some(image),
            _ => None,
        })
        .enumerate()
        .map(move |(i, image)| {
            let place = Place::User {
                message: message_number,
                index: i + 1,
            };
            (place, image)
        });
    let from_tools = message.tool_results_iter().flat_map(move |result| {
        result.images.iter().enumerate().map(move |(i, image)| {
            let place = Place::Tool {
                message: message_number,
                index: i + 1,
                call_id: &result.call_id,
                name: names.get(&result.call_id),
            };
            (place, image)
        })
    });
    own.chain(from_tools)
}

/// The names of the tools called in some messages, by call id: tool
/// results carry only the id. Asked only about results that show images,
/// so it searches the messages rather than indexing every call of every
/// request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolNames<'a>(pub(crate) &'a [Message]);

impl<'a> ToolNames<'a> {
    /// The name of the tool called as `call_id` (the latest such call), if
    /// known.
    pub(crate) fn get(&self, call_id: &str) -> Option<&'a str> {
        self.0
            .iter()
            .rev()
            .filter(|message| message.role == Role::Assistant)
            .flat_map(Message::tool_calls)
            .find(|call| call.id == call_id)
            .map(|call| call.name.as_str())
    }
}

/// The text put before a tool's `count` images where they must go apart
/// from its result (chat completions, whose tool messages hold only text;
/// Gemini 2.x): which call they came from, as `call` says it to the model.
pub(crate) fn from_tool(count: usize, call: &str) -> String {
    match count {
        1 => format!("The image from {call} above:"),
        n => format!("The {n} images from {call} above:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolCall, ToolResult};

    fn conversation(images: Vec<Image>, tool_images: Vec<Image>) -> Vec<Message> {
        let mut user = Message::user("look");
        user.parts.extend(images.into_iter().map(Part::Image));
        vec![
            user,
            Message::new(
                Role::Assistant,
                vec![Part::ToolCall(ToolCall::new(
                    "call_1",
                    "screenshot",
                    serde_json::json!({}),
                ))],
            ),
            Message::tool_results([ToolResult::ok("call_1", "shot").with_images(tool_images)]),
        ]
    }

    fn refused(limits: &Limits, messages: &[Message]) -> String {
        check("test", limits, messages).unwrap_err().to_string()
    }

    #[test]
    fn images_within_the_limits_pass() {
        let messages = conversation(
            vec![
                Image::png(vec![1; 10]),
                Image::url("https://example.com/a.png"),
            ],
            vec![Image::png(vec![2; 10])],
        );
        check("test", &OPENAI, &messages).unwrap();
        check("test", &ANTHROPIC, &messages).unwrap();
        let no_url = conversation(vec![Image::png(vec![1; 10])], vec![]);
        check("test", &GEMINI, &no_url).unwrap();
    }

    #[test]
    fn a_url_to_a_server_that_needs_bytes_is_refused_naming_it() {
        let messages = conversation(vec![Image::url("https://example.com/a.png")], vec![]);
        assert_eq!(
            refused(&GEMINI, &messages),
            "test can't send this request: image 1 of message 1 (the user's) is a URL \
             (https://example.com/a.png): Gemini's API needs the image's bytes, and ferrobot \
             never fetches an image: download it and send `Image::from_bytes(…)`"
        );
    }

    #[test]
    fn a_stored_image_that_was_not_loaded_is_refused() {
        let stored = Image::Stored {
            id: "img-7".into(),
            media_type: "image/png".into(),
            size: 1200,
        };
        let messages = conversation(vec![], vec![stored]);
        let message = refused(&OPENAI, &messages);
        assert!(
            message.starts_with(
                "test can't send this request: image 1 of the result of `screenshot` \
                 (call `call_1`, message 3) is a stored image (`img-7`, 1 KB) that was not loaded"
            ),
            "{message}"
        );
    }

    #[test]
    fn sizes_are_counted_as_each_server_counts_them() {
        // 3,932,160 bytes are exactly 5 MiB of base64; one more byte is over.
        let fits = conversation(vec![Image::png(vec![0; 3_932_160])], vec![]);
        check("anthropic", &ANTHROPIC, &fits).unwrap();
        let over = conversation(vec![Image::png(vec![0; 3_932_161])], vec![]);
        assert_eq!(
            refused(&ANTHROPIC, &over),
            "test can't send this request: image 1 of message 1 (the user's) is 5.2 MB as \
             base64, over the 5 MB per image Anthropic's API takes: resize or compress it"
        );
        // The same image is well within OpenAI's limit, counted in bytes.
        check("openai", &OPENAI, &over).unwrap();
    }

    #[test]
    fn the_images_of_a_request_are_limited_together() {
        let image = || Image::png(vec![0; 15 * MIB as usize]);
        let messages = conversation(vec![image(), image()], vec![image(), image()]);
        let message = refused(&OPENAI, &messages);
        assert!(
            message.contains(
                "the request's images come to 62.9 MB, over the 50 MB of images in one \
                 request OpenAI's API takes"
            ),
            "{message}"
        );
    }

    #[test]
    fn tool_images_are_introduced_by_their_call() {
        assert_eq!(
            from_tool(1, "the tool call `call_1` (`screenshot`)"),
            "The image from the tool call `call_1` (`screenshot`) above:"
        );
        assert_eq!(
            from_tool(2, "function response 1 (`screenshot`)"),
            "The 2 images from function response 1 (`screenshot`) above:"
        );
    }
}
