//! A message's attachments: `Attached` is one as the gateway describes it;
//! `Inner::files` hands each image within the size limit to `Inner::fetch`
//! (a plain GET from Discord's CDN, without the token) and names the rest
//! for the user.

use std::sync::OnceLock;
use std::time::Duration;

use ferrobot::Image;
use ferrobot::bot::Incoming;
use ferrobot_app::images::{
    DOWNLOAD_TIMEOUT, IMAGE_LIMIT, named, not_downloaded, over_limit, read,
};
use futures_util::future::join_all;
use serde_json::Value;
use twilight_model::channel::Attachment;

use crate::Inner;

/// A file attached to a message.
#[derive(Debug)]
pub(crate) struct Attached {
    filename: String,
    content_type: Option<String>,
    size: u64,
    url: String,
    /// A voice message (Discord sends it as an `audio/ogg` file).
    voice: bool,
}

impl From<Attachment> for Attached {
    fn from(attachment: Attachment) -> Self {
        Self {
            voice: attachment.duration_secs.is_some() || attachment.waveform.is_some(),
            filename: attachment.filename,
            content_type: attachment.content_type,
            size: attachment.size,
            url: attachment.url,
        }
    }
}

impl Attached {
    /// The same from an attachment in raw JSON.
    pub(crate) fn of_raw(attachment: &Value) -> Option<Self> {
        let text = |key: &str| attachment.get(key)?.as_str().map(str::to_owned);
        Some(Self {
            filename: text("filename")?,
            content_type: text("content_type"),
            size: attachment.get("size")?.as_u64()?,
            url: text("url")?,
            voice: attachment.get("duration_secs").is_some()
                || attachment.get("waveform").is_some(),
        })
    }
}

/// The client for the CDN: no token (the files' URLs are signed), its own
/// time-out.
fn client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built without a bundled crypto provider; ring is the
            // one the gateway and the rest of ferrobot use.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(DOWNLOAD_TIMEOUT)
                .user_agent(concat!("ferrobot-discord/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| ferrobot::error_chain(&e))
        })
        .clone()
}

impl Inner {
    /// `incoming` with the images among `files` (downloaded together) and
    /// the rest (named), and its stickers named.
    pub(crate) async fn files(
        &self,
        mut incoming: Incoming,
        files: Vec<Attached>,
        stickers: usize,
    ) -> Incoming {
        let taken = join_all(files.iter().map(|file| self.take(file))).await;
        for file in taken {
            incoming = match file {
                Ok(image) => incoming.image(image),
                Err(unread) => incoming.unread(unread),
            };
        }
        for _ in 0..stickers {
            incoming = incoming.unread("sticker");
        }
        incoming
    }

    /// The image `file` holds, or what to tell the user about it.
    async fn take(&self, file: &Attached) -> Result<Image, String> {
        let media_type = file.content_type.as_deref();
        if file.voice {
            Err("voice message".to_owned())
        } else if !media_type.is_some_and(Image::is_supported_type) {
            Err(named(Some(&file.filename), media_type, "file"))
        } else if file.size > IMAGE_LIMIT {
            Err(over_limit(&file.filename, file.size))
        } else {
            self.fetch(file).await
        }
    }

    /// Downloads an image attachment within [`IMAGE_LIMIT`].
    ///
    /// # Errors
    /// What to tell the user about it: not downloaded (a failure, a
    /// time-out), over the limit, not an image.
    async fn fetch(&self, file: &Attached) -> Result<Image, String> {
        let what = file.filename.as_str();
        let describe =
            |error: reqwest::Error| self.redact(&ferrobot::error_chain(&error.without_url()));
        let client = client().map_err(|error| {
            tracing::warn!(%what, %error, "could not download an image");
            not_downloaded(what)
        })?;
        let response = client
            .get(&file.url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|error| {
                tracing::warn!(%what, error = %describe(error), "could not download an image");
                not_downloaded(what)
            })?;
        read(what, response.bytes_stream(), describe).await
    }
}
