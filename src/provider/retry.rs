//! The retry rule shared by every provider.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

use futures_core::Stream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::staged::{Item, Staged};
use super::{EventStream, ProviderError};

/// When and how a failed model call is sent again.
///
/// A call is retried only when [`ProviderError::is_retryable`] says so (429,
/// 5xx, connection failures, time-outs) **and** nothing of the reply has been
/// passed on yet: once a delta reached the caller, a retry would repeat it.
/// Waits grow exponentially with jitter and honour the server's `Retry-After`.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::provider::RetryPolicy;
/// let policy = RetryPolicy::builder().max_attempts(5).initial_backoff(Duration::from_millis(100)).build();
/// assert_eq!(policy.max_attempts, 5);
/// assert_eq!(RetryPolicy::none().max_attempts, 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, bon::Builder)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Requests sent at most, the first included. By default, 3.
    #[builder(default = 3)]
    pub max_attempts: u32,
    /// Wait before the second attempt; doubles each time. By default, 500 ms.
    #[builder(default = Duration::from_millis(500))]
    pub initial_backoff: Duration,
    /// Longest wait between attempts. By default, 10 s.
    #[builder(default = Duration::from_secs(10))]
    pub max_backoff: Duration,
    /// A server asking for a longer wait than this is not retried. By default, 60 s.
    #[builder(default = Duration::from_secs(60))]
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        Self::builder().max_attempts(1).build()
    }

    /// How long to wait after failed attempt number `attempt` (1-based), or
    /// `None` when the server asked for more than [`max_retry_after`](Self::max_retry_after).
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let exp = self
            .initial_backoff
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(self.max_backoff);
        // Full jitter between half and all of the backoff, so clients that
        // failed together don't retry together.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let half = exp / 2;
        Some(half + half.mul_f64((random % 1000) as f64 / 1000.0))
    }

    /// Starts a model call with `start`, and starts it again while its first
    /// item is a retryable error, waiting between attempts. The stream that
    /// yields anything else first is passed on unchanged, so errors after the
    /// first event are never retried. Providers written outside ferrobot use
    /// it to follow the same rule.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use ferrobot::provider::{ProviderError, RetryPolicy, StreamEvent};
    /// use futures_util::{StreamExt, stream};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let policy = RetryPolicy::builder().initial_backoff(std::time::Duration::from_millis(1)).build();
    /// let cancel = CancellationToken::new();
    /// let mut attempts = 0;
    /// let events = policy.run(&cancel, || {
    ///     attempts += 1;
    ///     let first = if attempts < 3 {
    ///         Err(ProviderError::Status { status: 503, message: "busy".into(), retry_after: None })
    ///     } else {
    ///         Ok(StreamEvent::TextDelta("hi".into()))
    ///     };
    ///     stream::iter([first]).boxed()
    /// });
    /// let items: Vec<_> = events.collect().await;
    /// assert!(matches!(&items[..], [Ok(StreamEvent::TextDelta(t))] if t == "hi"));
    /// # }
    /// ```
    pub fn run<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        mut start: impl FnMut() -> EventStream<'a> + Send + 'a,
    ) -> EventStream<'a> {
        self.attempts(cancel, move || {
            let mut events = start();
            async move { (events.next().await, Some(events)) }
        })
    }

    /// As [`run`](Self::run), with each try a future of its first item and
    /// the rest of its stream: a connection can hand on its body's stream
    /// itself, without a layer of its own between every event and its
    /// reader.
    pub(crate) fn attempts<'a, F, S>(
        &'a self,
        cancel: &'a CancellationToken,
        mut try_once: impl FnMut() -> F + Send + 'a,
    ) -> EventStream<'a>
    where
        F: Future<Output = (Option<Item>, Option<S>)> + Send + 'a,
        S: Stream<Item = Item> + Unpin + Send + 'a,
    {
        Staged::new(async move {
            let started = Instant::now();
            let mut attempt = 1;
            loop {
                let (first, rest) = try_once().await;
                let error = match first {
                    Some(Err(error)) => error,
                    first => return (first, rest),
                };
                let delay = (error.is_retryable() && attempt < self.max_attempts)
                    .then(|| self.delay(attempt, error.retry_after()))
                    .flatten();
                let Some(delay) = delay else {
                    return (Some(Err(give_up(error, attempt, started))), None);
                };
                tracing::warn!(
                    attempt,
                    ?delay,
                    error = %error.chain(),
                    "model call failed; retrying"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = cancel.cancelled() => {
                        return (Some(Err(give_up(error, attempt, started))), None);
                    }
                }
                attempt += 1;
            }
        })
        .boxed()
    }
}

fn give_up(error: ProviderError, attempts: u32, started: Instant) -> ProviderError {
    if attempts == 1 {
        return error;
    }
    ProviderError::GaveUp {
        attempts,
        elapsed: started.elapsed(),
        last: Box::new(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::builder()
            .initial_backoff(Duration::from_secs(1))
            .max_backoff(Duration::from_secs(4))
            .build();
        let d1 = p.delay(1, None).unwrap();
        let d5 = p.delay(5, None).unwrap();
        assert!(d1 >= Duration::from_millis(500) && d1 <= Duration::from_secs(1));
        assert!(d5 >= Duration::from_secs(2) && d5 <= Duration::from_secs(4));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_limit() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(600))), None);
    }
}
