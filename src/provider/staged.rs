//! A stream that starts with a future.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_core::Stream;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use super::{EventStream, ProviderError, StreamEvent};

pub(crate) type Item = Result<StreamEvent, ProviderError>;

/// Awaits `start` for an optional first item and the rest of the stream, then
/// yields from the rest directly. It stands in for `once(fut).flatten()`
/// chains, which put several layers of combinators between every event and
/// its reader; the events of a long answer go through this at full rate.
pub(crate) struct Staged<'a> {
    start: Option<BoxFuture<'a, (Option<Item>, Option<EventStream<'a>>)>>,
    rest: Option<EventStream<'a>>,
}

impl<'a> Staged<'a> {
    pub(crate) fn new(
        start: impl Future<Output = (Option<Item>, Option<EventStream<'a>>)> + Send + 'a,
    ) -> Self {
        Self {
            start: Some(Box::pin(start)),
            rest: None,
        }
    }
}

impl Stream for Staged<'_> {
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
