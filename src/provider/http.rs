//! What the HTTP endpoint is built from: the client, retried requests,
//! status and transport errors, `Retry-After`, read time-outs, and keeping
//! credentials out of messages.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::staged::Item;
use super::{EventStream, ProviderError, RetryPolicy};
use crate::BoxError;

/// The events of one request under `retry`: the encoded `body` (or the error
/// encoding it) sent by `connect` on each try, until a try streams its first
/// event or fails in a way the policy doesn't retry.
pub(crate) fn retried<'a, F, S>(
    body: Result<Bytes, ProviderError>,
    retry: &'a RetryPolicy,
    cancel: &'a CancellationToken,
    connect: impl Fn(Bytes) -> F + Send + 'a,
) -> EventStream<'a>
where
    F: Future<Output = Result<S, ProviderError>> + Send + 'a,
    S: Stream<Item = Item> + Unpin + Send + 'a,
{
    let body = match body {
        Ok(body) => body,
        Err(e) => return stream::iter([Err(e)]).boxed(),
    };
    retry.attempts(cancel, move || {
        // Boxed where it is made: the request's future (hyper's, under
        // the time-out, under the dialect's) is large, and each layer of
        // the retry stage would otherwise copy it again.
        let connecting = Box::pin(connect(body.clone()));
        async move {
            match connecting.await {
                Ok(mut events) => (events.next().await, Some(events)),
                Err(error) => (Some(Err(error)), None),
            }
        }
    })
}

/// What a failed connection or read is: a time-out (the connection's,
/// reported as `read_timeout`, the wait of the step that failed) or a
/// failure to reach the server.
pub(crate) fn transport_error(
    endpoint: &str,
    read_timeout: Duration,
    e: impl Into<BoxError>,
) -> ProviderError {
    let e = e.into();
    if timed_out(&*e) {
        ProviderError::Timeout {
            endpoint: endpoint.to_owned(),
            after: read_timeout,
        }
    } else {
        ProviderError::Connect {
            endpoint: endpoint.to_owned(),
            source: e,
        }
    }
}

/// Whether `error` or one of its causes is an I/O time-out.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

/// The URL without `user:password@`, for messages and logs.
pub(crate) fn redact(url: &str) -> Cow<'_, str> {
    // Every request's URL comes here; one scan for `@` clears most of them.
    if !url.contains('@') {
        return Cow::Borrowed(url);
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Cow::Borrowed(url);
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => Cow::Owned(format!("{scheme}://{}", &rest[at + 1..])),
        None => Cow::Borrowed(url),
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

/// The HTTP client ([`Client`]). The read time-out is kept by the
/// dialects, each re-arming its timer only when it fires, not for every
/// body frame (which cost a streamed turn more than parsing it did).
///
/// One client per connect time-out is shared by the providers built in one
/// Tokio runtime: each client reads the system's root certificates (some
/// 1,300 file operations here) at its first `https` connection, which a
/// program with a few providers, each set up with several builder calls,
/// did nine times before its first turn; and providers of one server share
/// its pooled connections. Not across
/// runtimes: a pooled connection is served by a task of the runtime that
/// opened it, and fails once that runtime is gone ("dispatch task is
/// gone"), as in a test suite where each test has its runtime and a later
/// server gets an earlier one's port.
pub(crate) fn build_client(connect: Duration) -> Result<Client, String> {
    /// Clients kept at most: a program has one runtime or a few; a test
    /// suite has one per test, long gone.
    const KEPT: usize = 16;
    type Key = (Duration, Option<tokio::runtime::Id>);
    static SHARED: std::sync::Mutex<Vec<(Key, Client)>> = std::sync::Mutex::new(Vec::new());
    let key = (
        connect,
        tokio::runtime::Handle::try_current().ok().map(|h| h.id()),
    );
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, client)) = shared.iter().find(|(kept, _)| *kept == key) {
        return Ok(client.clone());
    }
    if shared.len() == KEPT {
        shared.remove(0);
    }
    let client = Client::new(connect, crate::tls::client_config()?);
    shared.push((key, client.clone()));
    Ok(client)
}

/// `retry-after-ms` (`OpenAI`), else `Retry-After` in seconds or as an HTTP date.
pub(crate) fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
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

/// How long to wait for a connection, by default.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait for each next piece of an answer, by default: local
/// models can take minutes to read a long prompt.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(300);

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
