//! What a message holds besides its text: `Files::of` (or `Files::of_raw`,
//! for an update teloxide's types refuse) picks out the images to download
//! for the model and names everything else for the user; `Inner::fetch`
//! downloads an image (`getFile`, then the file) within the size limit.

use ferrobot::Image;
use ferrobot_app::images::{
    DOWNLOAD_TIMEOUT, IMAGE_LIMIT, named, not_downloaded, over_limit, read,
};
use serde_json::Value;
use teloxide::net::Download as _;
use teloxide::prelude::{Request as _, Requester as _};
use teloxide::types::{Document, FileId, MediaKind, Message, MessageKind, PhotoSize};

use crate::Inner;

/// The files of a message: images to download, and the rest named for the
/// user (`Incoming::unread`).
#[derive(Debug, Default)]
pub(crate) struct Files {
    pub(crate) images: Vec<Wanted>,
    pub(crate) unread: Vec<String>,
}

/// An image to download.
#[derive(Debug)]
pub(crate) struct Wanted {
    file_id: String,
    /// What it is called for the user: `photo`, or the file's name.
    what: String,
}

impl Files {
    pub(crate) fn of(message: &Message) -> Self {
        let MessageKind::Common(common) = &message.kind else {
            return Self::default();
        };
        let other = match &common.media_kind {
            MediaKind::Animation(_) => Some("GIF".to_owned()),
            MediaKind::Audio(audio) => Some(named(
                audio.audio.file_name.as_deref(),
                audio.audio.mime_type.as_ref().map(|m| m.essence_str()),
                "audio",
            )),
            MediaKind::Contact(_) => Some("contact".to_owned()),
            MediaKind::PaidMedia(_) => Some("paid media".to_owned()),
            MediaKind::Game(_) => Some("game".to_owned()),
            MediaKind::Venue(_) | MediaKind::Location(_) => Some("location".to_owned()),
            MediaKind::Poll(_) => Some("poll".to_owned()),
            MediaKind::Checklist(_) => Some("checklist".to_owned()),
            MediaKind::Sticker(_) => Some("sticker".to_owned()),
            MediaKind::Story(_) => Some("story".to_owned()),
            MediaKind::Video(_) => Some("video".to_owned()),
            MediaKind::VideoNote(_) => Some("video message".to_owned()),
            MediaKind::Voice(_) => Some("voice note".to_owned()),
            MediaKind::Document(_)
            | MediaKind::Photo(_)
            | MediaKind::Text(_)
            | MediaKind::Migration(_) => None,
        };
        Self::from_parts(message.photo(), message.document(), other)
    }

    /// The same from a message in raw JSON, its photo and document read
    /// with teloxide's types.
    pub(crate) fn of_raw(message: &Value) -> Self {
        let photo: Option<Vec<PhotoSize>> = message
            .get("photo")
            .and_then(|p| serde_json::from_value(p.clone()).ok());
        let document: Option<Document> = message
            .get("document")
            // An animation comes with a copy of itself as a document.
            .filter(|_| message.get("animation").is_none())
            .and_then(|d| serde_json::from_value(d.clone()).ok());
        let other = [
            ("animation", "GIF"),
            ("audio", "audio"),
            ("contact", "contact"),
            ("paid_media", "paid media"),
            ("game", "game"),
            ("location", "location"),
            ("poll", "poll"),
            ("checklist", "checklist"),
            ("sticker", "sticker"),
            ("story", "story"),
            ("video", "video"),
            ("video_note", "video message"),
            ("voice", "voice note"),
        ]
        .into_iter()
        .find(|(key, _)| message.get(key).is_some())
        .map(|(_, name)| name.to_owned());
        Self::from_parts(photo.as_deref(), document.as_ref(), other)
    }

    fn from_parts(
        photo: Option<&[PhotoSize]>,
        document: Option<&Document>,
        other: Option<String>,
    ) -> Self {
        let mut files = Self::default();
        if let Some(sizes) = photo {
            files.photo(sizes);
        }
        if let Some(document) = document {
            files.document(document);
        }
        files.unread.extend(other);
        files
    }

    /// The largest size of a photo within the limit (Telegram sends each
    /// photo in several sizes, from a thumbnail up).
    fn photo(&mut self, sizes: &[PhotoSize]) {
        let within = sizes
            .iter()
            .filter(|s| known(s.file.size).is_none_or(|size| size <= IMAGE_LIMIT))
            .max_by_key(|s| u64::from(s.width) * u64::from(s.height));
        match within {
            Some(size) => self.images.push(Wanted {
                file_id: size.file.id.0.clone(),
                what: "photo".to_owned(),
            }),
            None => {
                let smallest = sizes.iter().filter_map(|s| known(s.file.size)).min();
                self.unread.push(match smallest {
                    Some(size) => over_limit("photo", size),
                    None => "photo".to_owned(),
                });
            }
        }
    }

    /// An image sent as a file is downloaded; any other file is named.
    fn document(&mut self, document: &Document) {
        let media_type = document.mime_type.as_ref().map(|m| m.essence_str());
        let name = document.file_name.as_deref();
        if !media_type.is_some_and(ferrobot::Image::is_supported_type) {
            self.unread.push(named(name, media_type, "file"));
            return;
        }
        let what = named(name, None, "image");
        match known(document.file.size) {
            Some(size) if size > IMAGE_LIMIT => self.unread.push(over_limit(&what, size)),
            _ => self.images.push(Wanted {
                file_id: document.file.id.0.clone(),
                what,
            }),
        }
    }
}

/// A file size Telegram gave (teloxide reads a missing one as `u32::MAX`).
fn known(size: u32) -> Option<u64> {
    (size != u32::MAX).then_some(u64::from(size))
}

impl Inner {
    /// Downloads `wanted` within [`IMAGE_LIMIT`] and [`DOWNLOAD_TIMEOUT`].
    ///
    /// # Errors
    /// What to tell the user about it: too big, not downloaded, not an
    /// image. The file's URL holds the bot token, so no error is shown or
    /// logged without [`Inner::redact`] (and reqwest's errors lose their URL
    /// first).
    pub(crate) async fn fetch(&self, wanted: &Wanted) -> Result<Image, String> {
        let what = wanted.what.as_str();
        let download = async {
            let file = self
                .call("getFile", || {
                    self.bot.get_file(FileId(wanted.file_id.clone())).send()
                })
                .await
                .map_err(|error| {
                    tracing::warn!(%what, error = %self.redact(&error), "could not look up an image to download");
                    not_downloaded(what)
                })?;
            if let Some(size) = known(file.meta.size).filter(|&size| size > IMAGE_LIMIT) {
                return Err(over_limit(what, size));
            }
            let chunks = self.bot.download_file_stream(&file.path);
            read(what, chunks, |error| {
                self.redact(&ferrobot::error_chain(&error.without_url()))
            })
            .await
        };
        tokio::time::timeout(DOWNLOAD_TIMEOUT, download)
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(%what, "downloading an image timed out");
                Err(not_downloaded(what))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn photo(sizes: &[(u32, u32)]) -> Value {
        let sizes: Vec<Value> = sizes
            .iter()
            .map(|&(side, size)| {
                serde_json::json!({"file_id": format!("p{side}"), "file_unique_id": "u",
                    "width": side, "height": side, "file_size": size})
            })
            .collect();
        serde_json::json!({"photo": sizes})
    }

    #[test]
    fn the_largest_photo_size_within_the_limit_is_fetched() {
        let files = Files::of_raw(&photo(&[(90, 2_000), (1280, 300_000), (2560, 12 << 20)]));
        assert_eq!(files.images.len(), 1);
        assert_eq!(files.images[0].file_id, "p1280");
        assert!(files.unread.is_empty());
        let files = Files::of_raw(&photo(&[(2560, 14 << 20)]));
        assert!(files.images.is_empty());
        assert_eq!(files.unread, ["photo (14 MB, over the 10 MB limit)"]);
    }

    #[test]
    fn documents_are_fetched_when_images_and_named_otherwise() {
        let document = |name: &str, mime: &str, size: u64| {
            serde_json::json!({"document": {"file_id": "d", "file_unique_id": "u",
                "file_name": name, "mime_type": mime, "file_size": size}})
        };
        let files = Files::of_raw(&document("shot.png", "image/png", 5_000));
        assert_eq!(files.images[0].what, "shot.png");
        let files = Files::of_raw(&document("report.pdf", "application/pdf", 5_000));
        assert!(files.images.is_empty());
        assert_eq!(files.unread, ["report.pdf (application/pdf)"]);
        let files = Files::of_raw(&document("raw.png", "image/png", 11 << 20));
        assert_eq!(files.unread, ["raw.png (11 MB, over the 10 MB limit)"]);
        let files = Files::of_raw(&document("live.heic", "image/heic", 5_000));
        assert_eq!(files.unread, ["live.heic (image/heic)"]);
    }

    #[test]
    fn other_media_are_named_shortly() {
        let voice =
            serde_json::json!({"voice": {"file_id": "v", "file_unique_id": "u", "duration": 3}});
        assert_eq!(Files::of_raw(&voice).unread, ["voice note"]);
        let gif = serde_json::json!({
            "animation": {"file_id": "a", "file_unique_id": "u", "width": 1, "height": 1, "duration": 1},
            "document": {"file_id": "a", "file_unique_id": "u", "mime_type": "video/mp4"},
        });
        assert_eq!(Files::of_raw(&gif).unread, ["GIF"]);
    }
}
