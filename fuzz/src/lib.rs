//! What the fuzz targets share: a runtime to drive ferrobot's async API,
//! scratch files, and an HTTP answer made of the fuzzer's bytes, fed to a dialect's own
//! decoder through the replay hook.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use ferrobot::provider::{ProviderError, Replay, Replayed, WireRequest};

/// One runtime for every input: building one per input would dominate.
pub fn block_on<F: Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("a Tokio runtime")
        })
        .block_on(future)
}

/// Answers every request with the same status, headers and body pieces.
pub struct Answer(Replayed);

impl Answer {
    /// `body` with `content_type`, cut into pieces where `cuts` say.
    pub fn new(content_type: &str, cuts: &[u8], body: &[u8]) -> Arc<Self> {
        Arc::new(Self(Replayed::new(
            200,
            vec![("content-type".into(), content_type.into())],
            pieces(cuts, body),
        )))
    }
}

impl Replay for Answer {
    fn respond(&self, _: &WireRequest<'_>) -> Option<Result<Replayed, ProviderError>> {
        Some(Ok(self.0.clone()))
    }
}

/// `body` cut at offsets derived from `cuts` (each byte a step forward, so
/// pieces may end inside a UTF-8 character or an SSE line).
pub fn pieces(cuts: &[u8], body: &[u8]) -> Vec<(Duration, Bytes)> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &step in cuts {
        let end = (start + usize::from(step)).min(body.len());
        if end > start {
            pieces.push((Duration::ZERO, Bytes::copy_from_slice(&body[start..end])));
            start = end;
        }
    }
    if start < body.len() {
        pieces.push((Duration::ZERO, Bytes::copy_from_slice(&body[start..])));
    }
    pieces
}

/// Splits the fuzzer's input into a selector byte, up to 8 cut steps and
/// the rest.
pub fn split(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&which, rest) = data.split_first()?;
    let cuts = rest.len().min(8);
    Some((which, &rest[..cuts], &rest[cuts..]))
}

/// A file holding one input, in a folder every run of the target shares,
/// removed when dropped (even after a panic).
pub struct Scratch(PathBuf);

impl Scratch {
    /// `data` in a new file of `folder` (under the system's temporary
    /// folder) ending in `extension`; `None` when it can't be written.
    pub fn new(folder: &str, extension: &str, data: &[u8]) -> Option<Self> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(folder);
        std::fs::create_dir_all(&dir).ok()?;
        let file = dir.join(format!(
            "{}-{}.{extension}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&file, data).ok()?;
        Some(Self(file))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
