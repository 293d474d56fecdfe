//! Server-sent events: the transport of the streaming dialects.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;

use super::http::{IdleTimer, transport_error};
use super::{ProviderError, StreamEvent};

/// Where decoded events go, in order.
pub(crate) type Events = VecDeque<StreamEvent>;

/// A dialect's reading of its events.
pub(crate) trait SseDecoder {
    /// Decodes one event: its `event:` name, if any, and its data.
    fn event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError>;

    /// The stream ended.
    fn end(&mut self, out: &mut Events) -> Result<(), ProviderError>;
}

/// An event's data as JSON, for dialects that read it untyped; a decode
/// error names the event.
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "responses"))]
pub(crate) fn json(data: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| ProviderError::Decode {
        message: format!("{e} in event `{data}`"),
    })
}

/// The events of a streamed response. Lines are parsed by `sseer`'s
/// zero-copy line parser over our own buffer, then each event's `data` is
/// decoded once into typed structs. (`sseer`'s whole-stream adapter was
/// measured first: its per-line `Bytes` reference counting cost a fifth of a
/// streamed turn.)
pub(crate) struct SseEvents<S, D> {
    body: S,
    /// Bytes read and not yet dispatched; the current event starts at
    /// `event_start`, and lines before `scan` are parsed.
    buf: Vec<u8>,
    event_start: usize,
    scan: usize,
    /// The `data` lines of the current event, as ranges of `buf` relative
    /// to `event_start`.
    data: Vec<(usize, usize)>,
    body_done: bool,
    decoder: D,
    /// The `event:` name of the event being read.
    name: Option<(usize, usize)>,
    queue: Events,
    endpoint: String,
    done: bool,
    /// An error that ends the stream once the events decoded before it are out.
    error: Option<ProviderError>,
    idle: IdleTimer,
}

/// POSTs the JSON `body` to `url` with `headers`, and once the server
/// answered well, streams its events through `decoder`: the whole of
/// `connect` for the dialects that need nothing more.
#[cfg(any(feature = "anthropic", feature = "gemini", feature = "responses"))]
pub(crate) async fn post<'a, D: SseDecoder + Unpin + Send + 'a>(
    client: &Result<reqwest::Client, String>,
    url: &str,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
    read_timeout: Duration,
    decoder: D,
) -> Result<super::EventStream<'a>, ProviderError> {
    let client = client
        .as_ref()
        .map_err(|e| ProviderError::Config(e.clone()))?;
    let request = client
        .post(url)
        .headers(headers)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    let endpoint = super::http::redact(url);
    let response = super::http::send(request, &endpoint, read_timeout).await?;
    let response = super::http::check_status(response).await?;
    Ok(SseEvents::new(response.bytes_stream(), decoder, endpoint, read_timeout).boxed())
}

impl<S, D: SseDecoder> SseEvents<S, D> {
    pub(crate) fn new(body: S, decoder: D, endpoint: String, read_timeout: Duration) -> Self {
        Self {
            body,
            buf: Vec::new(),
            event_start: 0,
            scan: 0,
            data: Vec::new(),
            body_done: false,
            decoder,
            name: None,
            queue: Events::new(),
            endpoint,
            done: false,
            error: None,
            idle: IdleTimer::new(read_timeout),
        }
    }

    /// Parses the complete lines in the buffer, decoding each finished event.
    fn parse(&mut self) -> Result<(), ProviderError> {
        use sseer::parser::{RawEventLine, parse_line};
        let base = self.buf.as_ptr() as usize;
        while let Some((line, rest)) = parse_line(&self.buf[self.scan..]) {
            let next = self.buf.len() - rest.len();
            match line {
                RawEventLine::Field {
                    field_name: b"data",
                    field_value,
                } => {
                    // Offsets, not slices: the buffer moves when it grows.
                    let range = field_value.map_or((0, 0), |value| {
                        let from = value.as_ptr() as usize - base - self.event_start;
                        (from, from + value.len())
                    });
                    self.data.push(range);
                }
                RawEventLine::Field {
                    field_name: b"event",
                    field_value: Some(value),
                } => {
                    let from = value.as_ptr() as usize - base - self.event_start;
                    self.name = Some((from, from + value.len()));
                }
                RawEventLine::Empty => {
                    self.dispatch()?;
                    self.event_start = next;
                }
                // Comments (keep-alives), `event:`, `id:` and `retry:` carry
                // nothing this dialect uses.
                _ => {}
            }
            self.scan = next;
        }
        // Keep only the unfinished event, so the buffer stays small.
        if self.event_start > 0 {
            self.buf.drain(..self.event_start);
            self.scan -= self.event_start;
            self.event_start = 0;
        }
        Ok(())
    }

    /// Decodes the current event's data, if it has any.
    fn dispatch(&mut self) -> Result<(), ProviderError> {
        let event = &self.buf[self.event_start..];
        let name = match self.name.take() {
            Some((from, to)) => Some(utf8(&event[from..to])?),
            None => None,
        };
        let result = match self.data.as_slice() {
            [] => Ok(()),
            [(from, to)] => self
                .decoder
                .event(name, utf8(&event[*from..*to])?, &mut self.queue),
            lines => {
                let mut joined = Vec::new();
                for (i, (from, to)) in lines.iter().enumerate() {
                    if i > 0 {
                        joined.push(b'\n');
                    }
                    joined.extend_from_slice(&event[*from..*to]);
                }
                self.decoder.event(name, utf8(&joined)?, &mut self.queue)
            }
        };
        self.data.clear();
        result
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, ProviderError> {
    std::str::from_utf8(bytes).map_err(|e| ProviderError::Decode {
        message: format!("the stream is not valid UTF-8: {e}"),
    })
}

impl<S, D: SseDecoder + Unpin> Stream for SseEvents<S, D>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    type Item = Result<StreamEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let step = if this.body_done {
                this.done = true;
                // A last event the server did not end with a blank line is
                // still delivered, as browsers do not but lenient clients do.
                this.buf.extend_from_slice(b"\n\n");
                this.parse()
                    .and_then(|()| this.decoder.end(&mut this.queue))
            } else {
                match this.body.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(bytes))) => {
                        this.idle.read();
                        this.buf.extend_from_slice(&bytes);
                        this.parse()
                    }
                    Poll::Ready(Some(Err(e))) => {
                        Err(transport_error(&this.endpoint, this.idle.limit(), e))
                    }
                    Poll::Ready(None) => {
                        this.body_done = true;
                        Ok(())
                    }
                    Poll::Pending if this.idle.timed_out(cx) => Err(ProviderError::Timeout {
                        endpoint: this.endpoint.clone(),
                        after: this.idle.limit(),
                    }),
                    Poll::Pending => return Poll::Pending,
                }
            };
            if let Err(e) = step {
                this.done = true;
                this.error = Some(e);
            }
        }
    }
}
