//! Answers' bodies cut into the frames dialects decode: server-sent events,
//! lines of JSON, or the whole body at once.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use super::endpoint::Tap;
use super::http::transport_error;
use super::observe::Outcome;
use super::timer::IdleTimer;
use super::{ProviderError, StreamEvent};

/// Where a [`Decode`]r puts the events it decoded, in order.
pub type Events = VecDeque<StreamEvent>;

/// How an answer's body is cut into the frames its [`Decode`]r reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Framing {
    /// Server-sent events: each event's `event:` name and its `data:` lines,
    /// joined by `\n`. Comments (keep-alives) are skipped.
    Sse,
    /// One JSON value a line (NDJSON, as Ollama streams); blank lines are
    /// skipped, and each line comes with no name.
    Lines,
    /// The whole body at once, when the server does not stream; it must
    /// arrive within the read time-out.
    Whole,
}

/// A dialect's reading of its answers: frames in, [`StreamEvent`]s out.
///
/// One decoder reads one answer; a dialect makes a fresh one per request.
pub trait Decode: Send + Unpin + 'static {
    /// Decodes one frame: an event's `event:` name (SSE only) and its data.
    /// Events go onto `out`, in order.
    ///
    /// # Errors
    /// A [`ProviderError`] ends the stream after the events already decoded:
    /// [`ProviderError::Decode`] for data that isn't the format (see
    /// [`json`]), [`ProviderError::Stream`] for an error the server reported.
    fn event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError>;

    /// The body ended: push the finish reason (and usage) not yet pushed.
    ///
    /// # Errors
    /// When the answer stopped short, e.g. without the event that finishes it.
    fn end(&mut self, out: &mut Events) -> Result<(), ProviderError>;
}

/// A frame's data as JSON, for decoders that read it untyped; the error
/// quotes the data.
///
/// # Errors
/// [`ProviderError::Decode`] when `data` is not JSON.
///
/// # Examples
/// ```
/// let value = ferrobot::provider::dialect::json(r#"{"type":"ping"}"#).unwrap();
/// assert_eq!(value["type"], "ping");
/// assert!(ferrobot::provider::dialect::json("{oops").is_err());
/// ```
pub fn json(data: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| ProviderError::Decode {
        message: format!("{e} in event `{data}`"),
    })
}

/// The events of a response body. SSE lines are parsed in place in our own
/// buffer ([`sse_line`]), then each event's `data` is decoded once. (An SSE
/// crate's whole-stream adapter was measured first: its per-line `Bytes`
/// reference counting cost a fifth of a streamed turn.)
///
/// Frames are decoded as they are read, not as they arrive: a read that
/// brings many (a busy client gets a socket's worth at once) leaves the
/// undecoded ones in the buffer, so the events waiting are those of one
/// frame, not hundreds of small strings per stream.
pub(crate) struct Frames<S, D> {
    body: S,
    framing: Framing,
    /// Bytes read and not yet dispatched; the current event starts at
    /// `event_start`, and lines before `scan` are parsed.
    buf: Vec<u8>,
    event_start: usize,
    scan: usize,
    /// `buf[scan..unended]` holds no line end: a long line arriving in
    /// many pieces is searched once, not once a piece.
    unended: usize,
    /// The `data` lines of the current event, as ranges of `buf` relative
    /// to `event_start`.
    data: Vec<(usize, usize)>,
    body_done: bool,
    /// Complete frames may wait in the buffer, undecoded.
    more: bool,
    decoder: D,
    /// The `event:` name of the event being read.
    name: Option<(usize, usize)>,
    queue: Events,
    endpoint: Arc<str>,
    done: bool,
    /// An error that ends the stream once the events decoded before it are out.
    error: Option<ProviderError>,
    idle: IdleTimer,
    tap: Option<Tap>,
}

impl<S, D: Decode> Frames<S, D> {
    pub(crate) fn new(
        body: S,
        framing: Framing,
        decoder: D,
        endpoint: Arc<str>,
        idle: IdleTimer,
        tap: Option<Tap>,
    ) -> Self {
        Self {
            body,
            framing,
            buf: Vec::new(),
            event_start: 0,
            scan: 0,
            unended: 0,
            data: Vec::new(),
            body_done: false,
            more: false,
            decoder,
            name: None,
            queue: Events::new(),
            endpoint,
            done: false,
            error: None,
            idle,
            tap,
        }
    }

    /// Decodes complete frames until one gives events (`more` then says
    /// others may wait), or none is left. Line ends are looked for from
    /// `unended` on, so a long line arriving in many pieces is searched
    /// once, not once a piece.
    fn parse_framed(&mut self) -> Result<(), ProviderError> {
        match self.framing {
            Framing::Sse => self.parse_sse(),
            Framing::Lines => self.parse_lines(),
            Framing::Whole => Ok(()),
        }
    }

    /// Whether to stop decoding at `next`, where the frame just decoded
    /// ended: it gave events and bytes follow, which wait undecoded until
    /// the events are taken (`more`). Usually the read ends with the frame,
    /// and nothing waits.
    fn stop_after_frame(&mut self, next: usize) -> bool {
        self.more = !self.queue.is_empty() && next < self.buf.len();
        self.more
    }

    /// Once every complete line is parsed: what is left after `scan` is an
    /// unended line. A lone `\r` at the end may yet become `\r\n`, so it
    /// is looked at again.
    fn mark_unended(&mut self) {
        self.unended = self.buf.len() - usize::from(self.buf.last() == Some(&b'\r'));
    }

    /// The body ended: a last frame the server did not end (an event
    /// without its blank line, a line without its `\n`) is still delivered,
    /// as browsers do not but lenient clients do.
    fn body_ended(&mut self) {
        self.body_done = true;
        match self.framing {
            Framing::Sse => self.buf.extend_from_slice(b"\n\n"),
            Framing::Lines => self.buf.push(b'\n'),
            Framing::Whole => return,
        }
        self.more = true;
    }

    /// Once every frame is decoded: decodes a whole body, then ends the
    /// decoder.
    fn finish(&mut self) -> Result<(), ProviderError> {
        if self.framing == Framing::Whole {
            let whole = std::mem::take(&mut self.buf);
            self.decoder.event(None, utf8(&whole)?, &mut self.queue)?;
        }
        self.decoder.end(&mut self.queue)
    }

    fn parse_lines(&mut self) -> Result<(), ProviderError> {
        loop {
            let start = self.scan;
            let from = self.unended.max(start);
            let Some(end) = memchr::memchr(b'\n', &self.buf[from..]) else {
                break;
            };
            let end = from + end;
            self.scan = end + 1;
            let line = String::from_utf8_lossy(&self.buf[start..end]);
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            self.decoder.event(None, line, &mut self.queue)?;
            if self.stop_after_frame(self.scan) {
                return Ok(());
            }
        }
        // Keep only the unended line, so the buffer stays small.
        self.buf.drain(..self.scan);
        self.scan = 0;
        self.mark_unended();
        Ok(())
    }

    /// Parses the complete SSE lines in the buffer, decoding each finished event.
    fn parse_sse(&mut self) -> Result<(), ProviderError> {
        while let Some((line, end)) = sse_line(
            &self.buf[self.scan..],
            self.unended.saturating_sub(self.scan),
        ) {
            // Offsets into the event, not slices: the buffer moves when it grows.
            let at = self.scan - self.event_start;
            let next = self.scan + end;
            match line {
                SseLine::Field(b"data", value) => {
                    self.data.push((at + value.start, at + value.end));
                }
                // An empty name is the default one, as no name is.
                SseLine::Field(b"event", value) => {
                    self.name = (!value.is_empty()).then(|| (at + value.start, at + value.end));
                }
                SseLine::Blank => {
                    self.dispatch()?;
                    self.event_start = next;
                    if self.stop_after_frame(next) {
                        self.scan = next;
                        return Ok(());
                    }
                }
                // Comments (keep-alives), `id:` and `retry:` carry nothing
                // a dialect uses.
                SseLine::Field(..) | SseLine::Comment => {}
            }
            self.scan = next;
        }
        // Keep only the unfinished event, so the buffer stays small.
        if self.event_start == self.buf.len() {
            // Usually a read ends with an event.
            self.buf.clear();
            self.scan = 0;
            self.event_start = 0;
        } else if self.event_start > 0 {
            self.buf.drain(..self.event_start);
            self.scan -= self.event_start;
            self.event_start = 0;
        }
        self.mark_unended();
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

impl<S, D> Frames<S, D> {
    /// Tells the observer the body failed with `error`.
    fn failed(&self, error: ProviderError) -> ProviderError {
        if let Some(tap) = &self.tap {
            tap.end(Outcome::Failed(&error));
        }
        error
    }
}

/// One line of server-sent events, read as the WHATWG's `text/event-stream`
/// grammar reads it.
#[derive(Debug, PartialEq, Eq)]
enum SseLine<'a> {
    /// An empty line: the event is complete.
    Blank,
    /// `: …`, a comment (servers send them to keep the connection alive).
    Comment,
    /// A field's name and where its value is in the line: after the first
    /// colon and one space, if one follows it; a line without a colon is a
    /// name whose value is empty.
    Field(&'a [u8], std::ops::Range<usize>),
}

/// The first complete line of `bytes`, and where the next one starts;
/// `None` while the line has not ended. Its first `unended` bytes are known
/// to hold no line end. A line ends at `\n`, `\r\n` or `\r`,
/// so a `\r` at the end waits: it may yet be the start of `\r\n`.
///
/// Written here, not taken from an SSE crate, for what it leaves out: the
/// end is found by one search from where the unended bytes start, and the
/// colon by a few steps along the field's name, so the code every streamed
/// token runs stays small enough to stay in the processor's instruction
/// cache beside the HTTP client's (`../shared/perf`, callgrind's cache
/// simulation: an SSE crate's second search routine was a tenth of what
/// ferrobot added there).
fn sse_line(bytes: &[u8], unended: usize) -> Option<(SseLine<'_>, usize)> {
    let end = unended + memchr::memchr2(b'\n', b'\r', &bytes[unended..])?;
    let next = match (bytes[end], bytes.get(end + 1)) {
        (b'\r', None) => return None,
        (b'\r', Some(b'\n')) => end + 2,
        _ => end + 1,
    };
    let line = &bytes[..end];
    let parsed = match line.iter().position(|&b| b == b':') {
        _ if line.is_empty() => SseLine::Blank,
        Some(0) => SseLine::Comment,
        Some(colon) => {
            let from = colon + 1 + usize::from(line.get(colon + 1) == Some(&b' '));
            SseLine::Field(&line[..colon], from..end)
        }
        None => SseLine::Field(line, end..end),
    };
    Some((parsed, next))
}

fn utf8(bytes: &[u8]) -> Result<&str, ProviderError> {
    std::str::from_utf8(bytes).map_err(|e| ProviderError::Decode {
        message: format!("the stream is not valid UTF-8: {e}"),
    })
}

impl<S, E, D: Decode> Stream for Frames<S, D>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<crate::BoxError>,
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
            let step = if this.more {
                this.more = false;
                this.parse_framed()
            } else if this.body_done {
                this.done = true;
                this.finish()
            } else {
                // The stream's own `poll_next`, not `StreamExt::poll_next_unpin`:
                // that helper isn't `#[inline]`, so whether it is inlined here
                // depended on how the crate's code fell into codegen units,
                // and unrelated code moved it out, at a cost per chunk
                // (../shared/perf instr.sh).
                match Pin::new(&mut this.body).poll_next(cx) {
                    Poll::Ready(Some(Ok(bytes))) => {
                        if let Some(tap) = &this.tap {
                            tap.chunk(&bytes);
                        }
                        // A whole answer must come within one time-out.
                        if this.framing != Framing::Whole {
                            this.idle.read();
                        }
                        this.buf.extend_from_slice(&bytes);
                        this.parse_framed()
                    }
                    Poll::Ready(Some(Err(e))) => {
                        Err(this.failed(transport_error(&this.endpoint, this.idle.limit(), e)))
                    }
                    Poll::Ready(None) => {
                        if let Some(tap) = &this.tap {
                            tap.end(Outcome::Complete);
                        }
                        this.body_ended();
                        Ok(())
                    }
                    Poll::Pending if this.idle.timed_out(cx) => {
                        Err(this.failed(ProviderError::Timeout {
                            endpoint: this.endpoint.to_string(),
                            after: this.idle.limit(),
                        }))
                    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;

    use super::*;
    use crate::provider::timer::Timer;

    /// Each frame's data is one text event.
    struct Texts;

    impl Decode for Texts {
        fn event(
            &mut self,
            _name: Option<&str>,
            data: &str,
            out: &mut Events,
        ) -> Result<(), ProviderError> {
            out.push_back(StreamEvent::TextDelta(data.to_owned()));
            Ok(())
        }

        fn end(&mut self, _out: &mut Events) -> Result<(), ProviderError> {
            Ok(())
        }
    }

    /// The texts of a body read in one piece, checking that no decoded
    /// event waits while the caller takes one.
    async fn one_read(framing: Framing, body: String) -> Vec<String> {
        let read: Result<Bytes, std::io::Error> = Ok(Bytes::from(body));
        let mut frames = Frames::new(
            futures_util::stream::iter([read]),
            framing,
            Texts,
            "test".into(),
            IdleTimer::new(Duration::from_secs(5), Timer::alone()),
            None,
        );
        let mut texts = Vec::new();
        while let Some(event) = frames.next().await {
            assert!(frames.queue.is_empty(), "decoded events waited");
            match event.unwrap() {
                StreamEvent::TextDelta(text) => texts.push(text),
                other => panic!("{other:?}"),
            }
        }
        texts
    }

    #[test]
    fn sse_lines_are_read_as_the_event_stream_grammar_says() {
        let field = |bytes: &'static [u8]| {
            let (line, next) = sse_line(bytes, 0).unwrap();
            match line {
                SseLine::Field(name, value) => (name, &bytes[value], next),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(field(b"data: x\n"), (&b"data"[..], &b"x"[..], 8));
        // One space after the colon is dropped, not two; none is fine.
        assert_eq!(field(b"data:  x\r\nmore"), (&b"data"[..], &b" x"[..], 10));
        assert_eq!(field(b"data:x\rdata"), (&b"data"[..], &b"x"[..], 7));
        // Without a colon, the line is a name with an empty value.
        assert_eq!(field(b"data\n"), (&b"data"[..], &b""[..], 5));
        assert_eq!(field(b"data: a:b\n"), (&b"data"[..], &b"a:b"[..], 10));
        assert_eq!(sse_line(b": keep-alive\n", 0), Some((SseLine::Comment, 13)));
        assert_eq!(sse_line(b"\r\n", 0), Some((SseLine::Blank, 2)));
        assert_eq!(sse_line(b"\n", 0), Some((SseLine::Blank, 1)));
        // Unended, or a `\r` that may yet be `\r\n`: wait for more.
        assert_eq!(sse_line(b"data: x", 0), None);
        assert_eq!(sse_line(b"data: x\r", 0), None);
    }

    #[tokio::test]
    async fn many_frames_in_one_read_are_decoded_as_they_are_taken() {
        let expected: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        let sse: String = expected.iter().map(|i| format!("data: {i}\n\n")).collect();
        let lines: String = expected.iter().map(|i| format!("{i}\n")).collect();
        assert_eq!(one_read(Framing::Sse, sse.clone()).await, expected);
        assert_eq!(one_read(Framing::Lines, lines.clone()).await, expected);
        // A last frame without its end is still read.
        let mut with_last = expected.clone();
        with_last.push("last".into());
        assert_eq!(one_read(Framing::Sse, sse + "data: last").await, with_last);
        assert_eq!(one_read(Framing::Lines, lines + "last").await, with_last);
    }
}
