//! The rule for retrying a chat platform's API.

use std::future::Future;
use std::time::Duration;

/// What to do after a platform API call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Wait as the platform said (flood control), then again; up to 5 times.
    After(Duration),
    /// A passing failure (network, server error): again after a doubling
    /// pause from 1 s; up to 3 times.
    Backoff,
    /// Give up: the request itself is wrong, or the token is.
    No,
}

/// Runs `request`, retrying as `classify` says; each retry is logged with
/// `describe(error)`, which must leave secrets out.
///
/// # Errors
/// The last error, once `classify` says no or the retries are spent.
pub async fn retry<T, E, F, Fut>(
    platform: &str,
    what: &str,
    request: F,
    classify: impl Fn(&E) -> Retry,
    describe: impl Fn(&E) -> String,
) -> Result<T, E>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let error = match request().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let wait = match classify(&error) {
            Retry::After(wait) if attempt <= 5 => wait.min(Duration::from_secs(60)),
            Retry::Backoff if attempt <= 3 => Duration::from_millis(500 << attempt),
            _ => return Err(error),
        };
        tracing::warn!(%platform, %what, error = %describe(&error), retry_in_ms = wait.as_millis() as u64, "request failed; retrying");
        tokio::time::sleep(wait).await;
    }
}
