//! What the HTTP dialects share: the client, retried requests, status and
//! transport errors, `Retry-After`, and keeping credentials out of messages.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::staged::Staged;
use super::{EventStream, ProviderError, RetryPolicy};

/// An API key as a header value marked sensitive (so `reqwest` keeps it out
/// of its `Debug` output); `None` for a key no header can carry.
/// Surrounding whitespace (a key read from a file ends in a newline) is not
/// part of the key.
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "responses"))]
pub(crate) fn secret(key: &str) -> Option<reqwest::header::HeaderValue> {
    let mut value = reqwest::header::HeaderValue::from_str(key.trim()).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Sends `request` to `endpoint` (already redacted, for messages), waiting
/// at most `read_timeout` for the response head. Statuses are the caller's
/// to check, since some dialects add hints to them.
#[cfg(any(
    feature = "ollama",
    feature = "anthropic",
    feature = "gemini",
    feature = "responses"
))]
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    endpoint: &str,
    read_timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    match tokio::time::timeout(read_timeout, request.send()).await {
        Ok(result) => result.map_err(|e| transport_error(endpoint, read_timeout, e)),
        Err(_) => Err(ProviderError::Timeout {
            endpoint: endpoint.to_owned(),
            after: read_timeout,
        }),
    }
}

/// A health probe of `url` for dialects whose answer says nothing more we
/// need: reachable and answering 2xx within five seconds. With `model`, `url`
/// names that model, and a 404 means the server lacks it; without, the model
/// is left unchecked.
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "responses"))]
pub(crate) async fn probe(
    client: &Result<reqwest::Client, String>,
    url: &str,
    headers: reqwest::header::HeaderMap,
    model: Option<&str>,
) -> super::Health {
    use super::Health;
    let started = std::time::Instant::now();
    let shown = redact(url);
    let attempt = async {
        let client = client
            .as_ref()
            .map_err(|e| Health::problem(Duration::ZERO, e.clone()))?;
        let response = client.get(url).headers(headers).send().await.map_err(|e| {
            let error = transport_error(&shown, Duration::from_secs(5), e);
            Health::unreachable(started.elapsed(), error.chain())
        })?;
        if let Some(model) = model.filter(|_| response.status() == reqwest::StatusCode::NOT_FOUND) {
            let mut health = Health::problem(
                started.elapsed(),
                format!("the server has no model `{model}`; check the name against its model list"),
            );
            health.model_present = Some(false);
            return Err(health);
        }
        check_status(response)
            .await
            .map_err(|e| Health::problem(started.elapsed(), e.chain()))
    };
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Err(_) => Health::unreachable(
            started.elapsed(),
            format!("{shown} did not answer within 5s"),
        ),
        Ok(Err(health)) => health,
        Ok(Ok(_)) => {
            let mut health = Health::ok(started.elapsed());
            health.model_present = model.map(|_| true);
            health
        }
    }
}

/// The events of one request under `retry`: the encoded `body` (or the error
/// encoding it) sent by `connect` on each try, until a try streams its first
/// event or fails in a way the policy doesn't retry.
pub(crate) fn retried<'a, F>(
    body: Result<Bytes, ProviderError>,
    retry: &'a RetryPolicy,
    cancel: &'a CancellationToken,
    connect: impl Fn(Bytes) -> F + Send + 'a,
) -> EventStream<'a>
where
    F: Future<Output = Result<EventStream<'a>, ProviderError>> + Send + 'a,
{
    let body = match body {
        Ok(body) => body,
        Err(e) => return stream::iter([Err(e)]).boxed(),
    };
    retry.run(cancel, move || {
        let connecting = connect(body.clone());
        Staged::new(async move {
            match connecting.await {
                Ok(events) => (None, Some(events)),
                Err(error) => (Some(Err(error)), None),
            }
        })
        .boxed()
    })
}

pub(crate) fn transport_error(
    endpoint: &str,
    read_timeout: Duration,
    e: reqwest::Error,
) -> ProviderError {
    let e = e.without_url();
    if e.is_timeout() {
        ProviderError::Timeout {
            endpoint: endpoint.to_owned(),
            after: read_timeout,
        }
    } else {
        ProviderError::Connect {
            endpoint: endpoint.to_owned(),
            source: Box::new(e),
        }
    }
}

/// The URL without `user:password@`, for messages and logs.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// The server's own words from an error body: `{"error": {"message": …}}`,
/// `{"error": "…"}`, `{"message": …}` or `{"detail": …}`; else the body's start.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let error = v.get("error").unwrap_or(&v);
        error
            .get("message")
            .or_else(|| error.get("detail"))
            .unwrap_or(error)
            .as_str()
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| {
        let body = body.trim();
        match body.char_indices().nth(500) {
            Some((cut, _)) => format!("{}…", &body[..cut]),
            None if body.is_empty() => "(empty body)".to_owned(),
            None => body.to_owned(),
        }
    })
}

/// The HTTP client. The read time-out is kept by ferrobot, not reqwest:
/// reqwest re-arms a timer for every body frame, which cost a streamed turn
/// more than parsing it did; each dialect re-arms its own only when it fires.
pub(crate) fn build_client(connect: Duration) -> Result<reqwest::Client, String> {
    // reqwest is built without a bundled crypto provider; ring is ours. If
    // the application installed another one first, that one is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(connect)
        .user_agent(concat!("ferrobot/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("could not build the HTTP client: {e}"))
}

/// Passes a successful response through; turns any other into an error that
/// carries the server's own message and its `Retry-After`.
pub(crate) async fn check_status(
    response: reqwest::Response,
) -> Result<reqwest::Response, ProviderError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let body = response.text().await.unwrap_or_default();
    Err(ProviderError::Status {
        status: status.as_u16(),
        message: error_message(&body),
        retry_after,
    })
}

/// `retry-after-ms` (`OpenAI`), else `Retry-After` in seconds or as an HTTP date.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

/// A request body as the bytes sent (and resent on retries).
pub(crate) fn encode(body: &impl serde::Serialize) -> Result<Bytes, ProviderError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ProviderError::Decode {
            message: format!("could not encode the request: {e}"),
        })
}

/// How long to wait for a connection, by default.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait for each next piece of an answer, by default: local
/// models can take minutes to read a long prompt.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The builder methods every HTTP provider shares, over its fields `model`,
/// `base_url`, `retry`, `read_timeout` and `client` (and `api_key`, given how
/// the key is sent): one text for their behaviour and their docs.
macro_rules! shared_setters {
    (model: $example:literal $(, key: $sent_as:literal)?) => {
        #[doc = concat!("The model to ask for, e.g. `\"", $example, "\"`. Required.")]
        #[must_use]
        pub fn model(mut self, model: impl Into<String>) -> Self {
            self.model = model.into();
            self
        }

        $(
            #[doc = concat!("The API key, sent as ", $sent_as, ". By default, none.")]
            #[must_use]
            pub fn api_key(mut self, key: impl Into<String>) -> Self {
                self.api_key = Some(key.into()).filter(|k| !k.is_empty());
                self
            }

            /// Reads the API key from the environment variable `name`, if it
            /// is set. No variable is read implicitly, so a key only goes to
            /// the server you chose. By default, none.
            #[must_use]
            pub fn api_key_env(self, name: &str) -> Self {
                match std::env::var(name) {
                    Ok(key) => self.api_key(key),
                    Err(_) => self,
                }
            }
        )?

        /// When to retry failed calls. By default,
        /// [`RetryPolicy::default()`](crate::provider::RetryPolicy::default).
        #[must_use]
        pub fn retry(mut self, policy: crate::provider::RetryPolicy) -> Self {
            self.retry = policy;
            self
        }

        /// Connection and read time-outs: how long to wait for a connection,
        /// and for each next piece of the answer. By default, 10 s and 300 s
        /// (local models can take minutes to read a long prompt).
        #[must_use]
        pub fn timeouts(mut self, connect: std::time::Duration, read: std::time::Duration) -> Self {
            self.read_timeout = read;
            self.client = crate::provider::http::build_client(connect);
            self
        }

        /// A configuration error unless a model is set.
        fn require_model(&self) -> Result<(), crate::provider::ProviderError> {
            if self.model.is_empty() {
                return Err(crate::provider::ProviderError::Config(format!(
                    concat!("no model set for {}: call `.model(\"…\")`, e.g. `.model(\"", $example, "\")`"),
                    crate::provider::http::redact(&self.base_url)
                )));
            }
            Ok(())
        }
    };
}
pub(crate) use shared_setters;

/// Tells when a response body has been silent for a whole read time-out.
/// Reading the clock on every read cost more than parsing the bytes, so a
/// read only marks progress; the clock is read when the body next keeps us
/// waiting, and the timer is re-armed only when it fires early.
pub(crate) struct IdleTimer {
    timeout: Duration,
    /// When the body was last seen sending bytes, as of the last wait.
    last_read: std::time::Instant,
    /// Whether bytes came since `last_read` was set.
    progressed: bool,
    /// Fires at the earliest moment the time-out could have passed; armed
    /// when the body first keeps us waiting.
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl IdleTimer {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            last_read: std::time::Instant::now(),
            progressed: false,
            sleep: None,
        }
    }

    /// The time-out it watches for.
    pub(crate) fn limit(&self) -> Duration {
        self.timeout
    }

    /// Bytes came in.
    pub(crate) fn read(&mut self) {
        self.progressed = true;
    }

    /// Whether the body has been silent for the whole time-out; if not, the
    /// task is woken when it could be.
    pub(crate) fn timed_out(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        if std::mem::take(&mut self.progressed) {
            self.last_read = std::time::Instant::now();
        }
        // A time-out too long to add to a clock reading never fires.
        let Some(deadline) = self.last_read.checked_add(self.timeout) else {
            return false;
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        while sleep.as_mut().poll(cx).is_ready() {
            if deadline <= tokio::time::Instant::now() {
                return true;
            }
            sleep.as_mut().reset(deadline);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_every_common_shape() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"auth"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(r#"{"error":"model \"x\" not found"}"#),
            "model \"x\" not found"
        );
        assert_eq!(
            error_message(r#"{"object":"error","message":"too long"}"#),
            "too long"
        );
        assert_eq!(error_message("Bad Gateway"), "Bad Gateway");
        assert_eq!(error_message(""), "(empty body)");
    }
}
