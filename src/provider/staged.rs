//! A stream that starts with a future.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_core::Stream;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use super::{ProviderError, StreamEvent};

pub(crate) type Item = Result<StreamEvent, ProviderError>;

/// Awaits `start` for an optional first item and the rest of the stream, then
/// yields from the rest directly. It stands in for `once(fut).flatten()`
/// chains, which put several layers of combinators between every event and
/// its reader; the events of a long answer go through this at full rate.
///
/// Generic over the rest, `S`: a connection's own stream (a dialect's
/// frames) is polled here directly, not through one more boxed stream,
/// once for every event.
pub(crate) struct Staged<'a, S> {
    start: Option<BoxFuture<'a, (Option<Item>, Option<S>)>>,
    rest: Option<S>,
}

impl<'a, S> Staged<'a, S> {
    pub(crate) fn new(start: impl Future<Output = (Option<Item>, Option<S>)> + Send + 'a) -> Self {
        Self {
            start: Some(Box::pin(start)),
            rest: None,
        }
    }
}

impl<S: Stream<Item = Item> + Unpin> Stream for Staged<'_, S> {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        if let Some(start) = &mut self.start {
            let (first, rest) = ready!(start.as_mut().poll(cx));
            self.start = None;
            self.rest = rest;
            if first.is_some() {
                return Poll::Ready(first);
            }
        }
        match &mut self.rest {
            Some(rest) => rest.poll_next_unpin(cx),
            None => Poll::Ready(None),
        }
    }
}
