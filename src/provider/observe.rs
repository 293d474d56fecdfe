//! Watching the bytes a provider sends and receives.

use super::ProviderError;

/// Sees every HTTP exchange of a provider, byte for byte: each model call
/// (each retry too), health probe and metadata request. Set one with any
/// dialect's `.observe(…)`; recording cassettes, debugging a server's quirks
/// and counting bytes go through it. Without one, nothing is copied or
/// called.
///
/// Credentials never reach an observer: the API key's header and any header
/// named like a credential read `[redacted]`, and the URL has no
/// `user:password@`. Calls come from the task reading the answer, in order
/// for one exchange; exchanges may run at once, told apart by their number.
/// Keep each call short: the answer waits for it.
///
/// # Examples
/// ```
/// use std::sync::{Arc, Mutex};
/// use ferrobot::provider::{Observe, OpenAiCompatible, WireRequest};
///
/// #[derive(Default)]
/// struct Bytes(Mutex<usize>);
///
/// impl Observe for Bytes {
///     fn request(&self, _exchange: u64, request: &WireRequest<'_>) {
///         *self.0.lock().unwrap() += request.body.len();
///     }
///     fn chunk(&self, _exchange: u64, bytes: &[u8]) {
///         *self.0.lock().unwrap() += bytes.len();
///     }
/// }
///
/// let counted = Arc::new(Bytes::default());
/// let provider = OpenAiCompatible::new("http://localhost:11434/v1")
///     .model("qwen3:8b")
///     .observe(counted.clone());
/// # let _ = provider;
/// ```
pub trait Observe: Send + Sync + 'static {
    /// A request is about to be sent. `exchange` numbers it; the calls
    /// that follow for its answer carry the same number.
    fn request(&self, exchange: u64, request: &WireRequest<'_>) {
        let _ = (exchange, request);
    }

    /// The server answered with this status and these headers. Not called
    /// when no answer came (see [`end`](Self::end)).
    fn response(&self, exchange: u64, response: &WireResponse<'_>) {
        let _ = (exchange, response);
    }

    /// A piece of the answer's body arrived, as the network delivered it.
    fn chunk(&self, exchange: u64, bytes: &[u8]) {
        let _ = (exchange, bytes);
    }

    /// The exchange is over: called once, last.
    fn end(&self, exchange: u64, outcome: Outcome<'_>) {
        let _ = (exchange, outcome);
    }
}

#[cfg(all(feature = "cassette", feature = "__http"))]
/// Answers a provider's requests from a recording instead of the network:
/// a wire cassette (`testing::WireCassette`, feature `cassette`) replaying
/// raw bytes through the dialect's real decoder. Set one with any dialect's
/// `.replay(…)`.
pub trait Replay: Send + Sync + 'static {
    /// The recorded answer to `request` (credentials redacted, as an
    /// [`Observe`]r sees it); `None` to send it to the server, an error to
    /// fail the call with it (no recording matches).
    ///
    /// # Errors
    /// When the request can't be answered: the message says why.
    fn respond(&self, request: &WireRequest<'_>) -> Option<Result<Replayed, ProviderError>>;
}

/// A recorded answer, for [`Replay`].
#[cfg(all(feature = "cassette", feature = "__http"))]
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Replayed {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    /// The body in the pieces it arrived in, each after its pause.
    pub chunks: Vec<(std::time::Duration, bytes::Bytes)>,
}

#[cfg(all(feature = "cassette", feature = "__http"))]
impl Replayed {
    /// An answer with this status, headers and body pieces.
    pub fn new(
        status: u16,
        headers: Vec<(String, String)>,
        chunks: Vec<(std::time::Duration, bytes::Bytes)>,
    ) -> Self {
        Self {
            status,
            headers,
            chunks,
        }
    }
}

/// A request as an [`Observe`]r sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WireRequest<'a> {
    /// `GET` or `POST`.
    pub method: &'a str,
    /// The URL, without credentials.
    pub url: &'a str,
    /// The headers set for this request, credentials as `[redacted]`
    /// (the client's own, such as `user-agent`, are not listed).
    pub headers: &'a [(String, String)],
    /// The body as sent; empty for a `GET`.
    pub body: &'a [u8],
}

/// A response's head as an [`Observe`]r sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WireResponse<'a> {
    /// The HTTP status code.
    pub status: u16,
    /// The headers, credentials (`set-cookie`, …) as `[redacted]`.
    pub headers: &'a [(String, String)],
}

/// How an exchange ended, for [`Observe::end`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// The whole body arrived.
    Complete,
    /// The request or the body failed: no answer, a time-out, a broken
    /// connection.
    Failed(&'a ProviderError),
    /// The reader stopped before the body's end: the call was cancelled, or
    /// its answer could not be decoded.
    Abandoned,
}
