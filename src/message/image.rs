//! Images in messages and in tools' output.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The image formats every dialect takes.
const FORMATS: [(&str, &[u8]); 4] = [
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("image/webp", b"RIFF"),
];

/// An image shown to the model: in a user's message
/// ([`TurnRequest::image`](crate::agent::TurnRequest::image)) or in a tool's
/// output ([`ToolOutput::image`](crate::tool::ToolOutput::image)).
///
/// Each dialect sends it its own way (an `image_url` data URI, an `image`
/// block, `inlineData`, Ollama's `images`). A URL is passed on for the
/// server to fetch where the dialect can say so (chat completions,
/// Responses, Anthropic); the others refuse it — ferrobot never fetches an
/// image on its own. Cloning is cheap: the bytes are shared.
///
/// # Examples
/// ```
/// use ferrobot::Image;
/// // The first bytes of a PNG file.
/// let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
/// let image = Image::from_bytes(png)?;
/// assert_eq!(image.media_type(), Some("image/png"));
///
/// let error = Image::from_bytes(b"%PDF-1.7".to_vec()).unwrap_err();
/// assert_eq!(error.to_string(), "not a PNG, JPEG, GIF or WebP image");
/// # Ok::<(), ferrobot::message::ImageError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Image {
    /// The image itself.
    Bytes {
        /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
        media_type: String,
        /// The encoded image; base64 in the serde form.
        #[serde(with = "base64_bytes")]
        data: Arc<[u8]>,
    },
    /// An image on the web, fetched by the server where the dialect can ask
    /// it to.
    Url {
        /// Its address (`https://…`).
        url: String,
    },
    /// An image a history store keeps apart from the messages, so loading
    /// a conversation doesn't load every image it ever held; the agent
    /// loads the bytes only for the images it sends
    /// ([`HistoryStore::load_image`](crate::history::HistoryStore::load_image)).
    Stored {
        /// The store's key for it.
        id: String,
        /// Its media type.
        media_type: String,
        /// Its size in bytes.
        size: u64,
    },
}

/// Why bytes are no image ferrobot can send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The bytes are no PNG, JPEG, GIF or WebP.
    #[error("not a PNG, JPEG, GIF or WebP image")]
    UnknownFormat,
    /// The file could not be read.
    #[error("could not read the image {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl Image {
    /// An image of the given media type.
    pub fn new(media_type: impl Into<String>, data: impl Into<Arc<[u8]>>) -> Self {
        Image::Bytes {
            media_type: media_type.into(),
            data: data.into(),
        }
    }

    /// A PNG image.
    pub fn png(data: impl Into<Arc<[u8]>>) -> Self {
        Self::new("image/png", data)
    }

    /// A JPEG image.
    pub fn jpeg(data: impl Into<Arc<[u8]>>) -> Self {
        Self::new("image/jpeg", data)
    }

    /// An image on the web; see [`Image::Url`].
    pub fn url(url: impl Into<String>) -> Self {
        Image::Url { url: url.into() }
    }

    /// An image whose format is read from its first bytes.
    ///
    /// # Errors
    /// [`ImageError::UnknownFormat`] when it is no PNG, JPEG, GIF or WebP.
    pub fn from_bytes(data: impl Into<Arc<[u8]>>) -> Result<Self, ImageError> {
        let data = data.into();
        let media_type = sniff(&data).ok_or(ImageError::UnknownFormat)?;
        Ok(Self::new(media_type, data))
    }

    /// The image in the file at `path`, its format read from its first bytes.
    ///
    /// # Errors
    /// When the file can't be read or holds no image ferrobot can send.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ImageError> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|e| ImageError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_bytes(data).map_err(|_| ImageError::Read {
            path: path.display().to_string(),
            message: ImageError::UnknownFormat.to_string(),
        })
    }

    /// Whether ferrobot sends images of `media_type` (`image/png`,
    /// `image/jpeg`, `image/gif`, `image/webp`; parameters and case
    /// ignored): what a front end may take from its users.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::Image;
    /// assert!(Image::is_supported_type("image/JPEG"));
    /// assert!(Image::is_supported_type("image/png; charset=binary"));
    /// assert!(!Image::is_supported_type("image/heic"));
    /// assert!(!Image::is_supported_type("application/pdf"));
    /// ```
    pub fn is_supported_type(media_type: &str) -> bool {
        let essence = media_type.split(';').next().unwrap_or_default().trim();
        FORMATS
            .iter()
            .any(|(supported, _)| supported.eq_ignore_ascii_case(essence))
    }

    /// Its media type; `None` for a URL.
    pub fn media_type(&self) -> Option<&str> {
        match self {
            Image::Bytes { media_type, .. } | Image::Stored { media_type, .. } => Some(media_type),
            Image::Url { .. } => None,
        }
    }

    /// Its bytes, when they are here.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Image::Bytes { data, .. } => Some(data),
            _ => None,
        }
    }

    /// Its size in bytes; `None` for a URL.
    pub fn size(&self) -> Option<u64> {
        match self {
            Image::Bytes { data, .. } => Some(data.len() as u64),
            Image::Stored { size, .. } => Some(*size),
            Image::Url { .. } => None,
        }
    }

    /// Its bytes in base64, as most dialects send them.
    pub fn base64(&self) -> Option<String> {
        self.bytes()
            .map(|data| base64::engine::general_purpose::STANDARD.encode(data))
    }

    /// A `data:` URI of its bytes, or its URL.
    pub fn uri(&self) -> Option<String> {
        match self {
            Image::Bytes { media_type, .. } => {
                Some(format!("data:{media_type};base64,{}", self.base64()?))
            }
            Image::Url { url } => Some(url.clone()),
            Image::Stored { .. } => None,
        }
    }

    /// One line naming the image for a model that can't see it: its type and
    /// size, or its URL.
    pub fn describe(&self) -> String {
        match (self, self.size()) {
            (Image::Url { url }, _) => format!("[image: {url}]"),
            (_, Some(size)) => format!(
                "[image: {}, {}]",
                self.media_type().unwrap_or("image"),
                human_size(size)
            ),
            _ => "[image]".to_owned(),
        }
    }
}

impl fmt::Debug for Image {
    /// The kind and size, never the bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Image::Bytes { media_type, data } => {
                write!(f, "Image({media_type}, {} bytes)", data.len())
            }
            Image::Url { url } => write!(f, "Image({url})"),
            Image::Stored {
                id,
                media_type,
                size,
            } => write!(f, "Image(stored {id}, {media_type}, {size} bytes)"),
        }
    }
}

/// The media type of an image's bytes, from its magic number.
fn sniff(data: &[u8]) -> Option<&'static str> {
    FORMATS.iter().find_map(|(media_type, magic)| {
        let webp = *media_type != "image/webp" || data.get(8..12) == Some(b"WEBP");
        (data.starts_with(magic) && webp).then_some(*media_type)
    })
}

/// `1.2 MB`, `340 KB`, `12 bytes`.
pub(crate) fn human_size(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss, reason = "a size shown to one decimal")]
    let size = bytes as f64;
    if bytes >= 1_000_000 {
        format!("{:.1} MB", size / 1e6)
    } else if bytes >= 1_000 {
        format!("{} KB", bytes / 1_000)
    } else {
        format!("{bytes} bytes")
    }
}

/// Bytes as base64 in serde forms (JSON history rows).
mod base64_bytes {
    use std::sync::Arc;

    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(data: &Arc<[u8]>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<[u8]>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(Into::into)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_their_first_bytes() {
        let webp = b"RIFF\0\0\0\0WEBPVP8 ".to_vec();
        assert_eq!(sniff(&webp), Some("image/webp"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVEfmt "), None);
        assert_eq!(sniff(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a"), Some("image/gif"));
    }

    #[test]
    fn the_serde_form_holds_base64_and_debug_never_the_bytes() {
        let image = Image::png(vec![1u8, 2, 3]);
        let json = serde_json::to_value(&image).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"source": "bytes", "media_type": "image/png", "data": "AQID"})
        );
        assert_eq!(serde_json::from_value::<Image>(json).unwrap(), image);
        assert_eq!(format!("{image:?}"), "Image(image/png, 3 bytes)");
        assert_eq!(image.uri().unwrap(), "data:image/png;base64,AQID");
        assert_eq!(image.describe(), "[image: image/png, 3 bytes]");
    }
}
