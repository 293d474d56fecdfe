//! What the bots do with the files people send: an image (PNG, JPEG, GIF or
//! WebP) within [`IMAGE_LIMIT`] is downloaded ([`read`]) and given to the
//! model; anything else is named for the user ([`over_limit`],
//! [`not_downloaded`], [`named`]) in
//! [`Incoming::unread`](ferrobot::bot::Incoming::unread), which the answer
//! says didn't reach the model.

use std::time::Duration;

use ferrobot::Image;
use futures_util::{Stream, StreamExt as _};

/// The largest image a bot downloads and gives the model: 10 MiB.
///
/// Far above any Telegram photo (Telegram recompresses photos to at most
/// 2560 px, rarely over 1 MB), so it only bites on images sent as files;
/// the same as Discord's upload limit for accounts without Nitro; half of
/// the 20 MB the Telegram Bot API lets a bot download; and within what
/// OpenAI (20 MB an image) and Gemini (20 MB a request) take. An image is
/// kept in the conversation and sent, base64 (a third larger), with every
/// later turn, so a bigger one would cost every request that follows.
/// Anthropic's API takes less (5 MB of base64, about 3.7 MB of image): fitting
/// an image to a dialect is the provider's job, not the bots'.
pub const IMAGE_LIMIT: u64 = 10 * 1024 * 1024;

/// How long fetching one image may take, every step and retry together.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// A size in bytes for people: `14 MB`, `10.4 MB`, `320 KB`, `12 bytes`
/// (units of 1,024).
///
/// # Examples
/// ```
/// use ferrobot_app::images::size;
/// assert_eq!(size(14 * 1024 * 1024), "14 MB");
/// assert_eq!(size(10 * 1024 * 1024 + 400 * 1024), "10.4 MB");
/// assert_eq!(size(320 * 1024), "320 KB");
/// assert_eq!(size(12), "12 bytes");
/// ```
pub fn size(bytes: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = KB * KB;
    if bytes >= MB {
        let tenths = (bytes * 10 + MB / 2) / MB;
        if tenths.is_multiple_of(10) || tenths >= 1000 {
            format!("{} MB", (tenths + 5) / 10)
        } else {
            format!("{}.{} MB", tenths / 10, tenths % 10)
        }
    } else if bytes >= KB {
        format!("{} KB", bytes.div_ceil(KB))
    } else if bytes == 1 {
        "1 byte".to_owned()
    } else {
        format!("{bytes} bytes")
    }
}

/// An image of `bytes` named for the user as too big.
///
/// # Examples
/// ```
/// use ferrobot_app::images::over_limit;
/// assert_eq!(over_limit("photo", 14 * 1024 * 1024), "photo (14 MB, over the 10 MB limit)");
/// ```
pub fn over_limit(what: &str, bytes: u64) -> String {
    format!(
        "{what} ({}, over the {} limit)",
        size(bytes),
        size(IMAGE_LIMIT)
    )
}

/// An image named for the user as one that could not be downloaded.
///
/// # Examples
/// ```
/// assert_eq!(ferrobot_app::images::not_downloaded("photo"), "photo (could not be downloaded)");
/// ```
pub fn not_downloaded(what: &str) -> String {
    format!("{what} (could not be downloaded)")
}

/// A file named for the user: its name and media type, `report.pdf
/// (application/pdf)`, or whichever of them is known, or `fallback`.
///
/// # Examples
/// ```
/// use ferrobot_app::images::named;
/// assert_eq!(named(Some("report.pdf"), Some("application/pdf"), "file"), "report.pdf (application/pdf)");
/// assert_eq!(named(None, Some("audio/ogg"), "audio"), "audio (audio/ogg)");
/// assert_eq!(named(Some("notes"), None, "file"), "notes");
/// assert_eq!(named(None, None, "file"), "file");
/// ```
pub fn named(name: Option<&str>, media_type: Option<&str>, fallback: &str) -> String {
    let name = name.map(str::trim).filter(|n| !n.is_empty());
    let media_type = media_type.map(str::trim).filter(|t| !t.is_empty());
    match (name, media_type) {
        (Some(name), Some(media_type)) => format!("{name} ({media_type})"),
        (Some(name), None) => name.to_owned(),
        (None, Some(media_type)) => format!("{fallback} ({media_type})"),
        (None, None) => fallback.to_owned(),
    }
}

/// Reads a download's `chunks` into an image for the model, stopping at
/// [`IMAGE_LIMIT`] whatever size the platform announced. A failure is
/// logged with `describe(error)`, which must leave secrets out (a Telegram
/// file URL holds the bot token).
///
/// # Errors
/// What to tell the user about `what` ([`Incoming::unread`]): over the
/// limit, not downloaded, or not a PNG, JPEG, GIF or WebP image.
///
/// [`Incoming::unread`]: ferrobot::bot::Incoming::unread
///
/// # Examples
/// ```
/// use ferrobot_app::images::read;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let jpeg = futures_util::stream::iter([Ok::<_, std::io::Error>(vec![0xff, 0xd8, 0xff, 0xe0])]);
/// let image = read("photo", jpeg, |e| e.to_string()).await.unwrap();
/// assert_eq!(image.media_type(), Some("image/jpeg"));
///
/// let pdf = futures_util::stream::iter([Ok::<_, std::io::Error>(b"%PDF-1.7".to_vec())]);
/// let note = read("scan.png", pdf, |e| e.to_string()).await.unwrap_err();
/// assert_eq!(note, "scan.png (not a PNG, JPEG, GIF or WebP image)");
/// # }
/// ```
pub async fn read<B, E>(
    what: &str,
    chunks: impl Stream<Item = Result<B, E>>,
    describe: impl FnOnce(E) -> String,
) -> Result<Image, String>
where
    B: AsRef<[u8]>,
{
    let mut chunks = std::pin::pin!(chunks);
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(chunk) => bytes.extend_from_slice(chunk.as_ref()),
            Err(error) => {
                let error = describe(error);
                tracing::warn!(%what, %error, "could not download an image");
                return Err(not_downloaded(what));
            }
        }
        if bytes.len() as u64 > IMAGE_LIMIT {
            return Err(format!("{what} (over the {} limit)", size(IMAGE_LIMIT)));
        }
    }
    Image::from_bytes(bytes).map_err(|error| format!("{what} ({error})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size(IMAGE_LIMIT), "10 MB");
        assert_eq!(size(1024 * 1024 - 1), "1024 KB");
        assert_eq!(size(1), "1 byte");
        assert_eq!(size(999 * 1024 * 1024 + 1000 * 1024), "1000 MB");
    }

    #[tokio::test]
    async fn a_download_past_the_limit_stops_there() {
        let taken = std::sync::atomic::AtomicUsize::new(0);
        let chunk = || {
            taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::io::Error>(vec![0xff; 1024 * 1024])
        };
        let endless = futures_util::stream::repeat_with(chunk);
        let note = read("huge.png", endless, |e| e.to_string())
            .await
            .unwrap_err();
        assert_eq!(note, "huge.png (over the 10 MB limit)");
        assert_eq!(taken.load(std::sync::atomic::Ordering::SeqCst), 11);
    }

    #[tokio::test]
    async fn a_failed_download_is_named_and_described_once() {
        let failing =
            futures_util::stream::iter([Ok(vec![0xff, 0xd8]), Err("connection reset".to_owned())]);
        let mut described = Vec::new();
        let note = read("photo", failing, |e| {
            described.push(e.clone());
            e
        })
        .await
        .unwrap_err();
        assert_eq!(note, "photo (could not be downloaded)");
        assert_eq!(described, ["connection reset"]);
    }
}
