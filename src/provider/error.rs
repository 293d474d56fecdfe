//! What can go wrong talking to a model endpoint.

use std::time::Duration;

use crate::BoxError;

/// Why a model call failed.
///
/// Messages name the endpoint and what the server said, never an API key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// Nothing answered at the endpoint (refused, DNS, TLS, reset).
    #[error("could not reach {endpoint}")]
    Connect {
        /// The URL that was tried, without credentials.
        endpoint: String,
        /// The transport error.
        #[source]
        source: BoxError,
    },
    /// The endpoint took too long to answer.
    #[error("{endpoint} did not answer within {after:?}")]
    Timeout {
        /// The URL that was tried.
        endpoint: String,
        /// How long we waited.
        after: Duration,
    },
    /// The server answered with an error status.
    #[error("server answered {status}: {message}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The server's own error message (or the start of its body).
        message: String,
        /// How long the server asked us to wait, from `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// The server reported an error inside an otherwise successful stream.
    #[error("server reported an error mid-stream: {message}")]
    Stream {
        /// The server's own error message.
        message: String,
    },
    /// The server sent something that is not the expected wire format.
    #[error("could not decode the server's reply: {message}")]
    Decode {
        /// What was wrong, with the start of the offending data.
        message: String,
    },
    /// Retries ran out; the last error is the source.
    #[error("gave up after {attempts} attempts over {elapsed:?}")]
    GaveUp {
        /// How many requests were sent.
        attempts: u32,
        /// Time from the first request to giving up.
        elapsed: Duration,
        /// The error of the last attempt.
        #[source]
        last: Box<ProviderError>,
    },
    /// The provider is misconfigured (bad URL, missing key, …).
    #[error("invalid provider configuration: {0}")]
    Config(String),
    /// The request asks for what this provider can't send: a native
    /// structured answer ([`ChatRequest::output`](super::ChatRequest::output))
    /// where [`Provider::native_output`](super::Provider::native_output) is
    /// false, or a forced tool call with nothing to call (a
    /// [`ToolChoice::Tool`](super::ToolChoice::Tool) naming a tool the
    /// request doesn't describe, [`ToolChoice::Required`](super::ToolChoice::Required)
    /// without tools). Nothing was sent; sending it again won't help, and
    /// the message says what to change.
    #[error("{provider} can't send this request: {message}")]
    InvalidRequest {
        /// The provider's [name](super::Provider::name), e.g. `"anthropic"`.
        provider: String,
        /// What is wrong with the request, and what to do instead.
        message: String,
    },
    /// Any other failure, for providers written outside ferrobot.
    #[error(transparent)]
    Other(BoxError),
}

impl ProviderError {
    /// Whether sending the same request again may succeed: connection errors,
    /// time-outs, 408, 409, 429 and 5xx.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::provider::ProviderError;
    /// let e = ProviderError::Status { status: 503, message: "busy".into(), retry_after: None };
    /// assert!(e.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            ProviderError::Status { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..600).contains(status)
            }
            _ => false,
        }
    }

    /// The kind of failure in a word, for the `error.type` of a span: the
    /// HTTP status, else `connect`, `timeout`, `stream`, `decode`,
    /// `gave_up`, `config`, `invalid_request` or `other`.
    pub(crate) fn error_type(&self) -> std::borrow::Cow<'static, str> {
        match self {
            ProviderError::Status { status, .. } => status.to_string().into(),
            ProviderError::Connect { .. } => "connect".into(),
            ProviderError::Timeout { .. } => "timeout".into(),
            ProviderError::Stream { .. } => "stream".into(),
            ProviderError::Decode { .. } => "decode".into(),
            ProviderError::GaveUp { .. } => "gave_up".into(),
            ProviderError::Config(_) => "config".into(),
            ProviderError::InvalidRequest { .. } => "invalid_request".into(),
            ProviderError::Other(_) => "other".into(),
        }
    }

    /// How long the server asked us to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error with every source, joined by ": ", for logs and bot replies.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::provider::ProviderError;
    /// let e = ProviderError::Config("no model set".into());
    /// assert_eq!(e.chain(), "invalid provider configuration: no model set");
    /// ```
    pub fn chain(&self) -> String {
        crate::error::chain(self)
    }
}
