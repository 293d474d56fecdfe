//! Turning chat-completions chunks into [`StreamEvent`]s.

use std::borrow::Cow;

use super::wire::{
    Chunk, Delta, TextChunk, WireCall, WireFunction, WireUsage, XGroq, stream_error_message,
};
use crate::provider::{FinishReason, ProviderError, StreamEvent, ThinkSplitter, ToolCallDelta};

pub(super) use crate::provider::frames::Events;

impl crate::provider::frames::Decode for Decoder {
    fn event(
        &mut self,
        _name: Option<&str>,
        data: &str,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        self.data(data, out)
    }

    fn end(&mut self, out: &mut Events) -> Result<(), ProviderError> {
        Decoder::end(self, out)
    }
}

/// Reads the chat-completions chunks of one answer, streamed or whole.
///
/// It owns the quirks of the servers that speak this dialect: tool-call
/// fragments without an `index`, `finish_reason: ""`, a finish reason before
/// the usage chunk, both `reasoning_content` and `reasoning`, and inline
/// `<think>` tags.
#[derive(Debug, Default)]
pub struct Decoder {
    think: Option<ThinkSplitter>,
    /// Whether the answer streams: its chunks are tried as [`TextChunk`]s
    /// first; a whole response is read as a [`Chunk`] at once.
    streamed: bool,
    /// Per call position: the server's `index` (if it sent one) and id.
    slots: Vec<Slot>,
    finish: Option<FinishReason>,
    saw_done: bool,
    saw_data: bool,
}

#[derive(Debug)]
struct Slot {
    wire_index: Option<usize>,
    id: String,
    named: bool,
}

impl Decoder {
    pub(super) fn new(split_think_tags: bool, streamed: bool) -> Self {
        Self {
            think: split_think_tags.then(ThinkSplitter::new),
            streamed,
            ..Self::default()
        }
    }

    /// Decodes one SSE `data:` payload, pushing events onto `out`.
    pub(super) fn data(&mut self, data: &str, out: &mut Events) -> Result<(), ProviderError> {
        // JSON's whitespace is ASCII; `trim` looks for any Unicode space, out
        // of line, for every chunk.
        let data = data.trim_ascii();
        if data == "[DONE]" {
            self.saw_done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        // A streamed chunk is tried as the narrow shape first.
        if self.streamed
            && let Ok(chunk) = serde_json::from_str::<TextChunk>(data)
        {
            self.saw_data = true;
            self.text_chunk(chunk, out);
            return Ok(());
        }
        self.whole_chunk(data, out)
    }

    /// A chunk with a piece of text at most: most of them.
    fn text_chunk(&mut self, chunk: TextChunk, out: &mut Events) {
        if let Some(mut choice) = chunk.choice {
            if let Some(content) = choice.text() {
                self.text(Cow::Owned(content), out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason(&reason);
            }
        }
    }

    /// A whole response, or a streamed chunk [`TextChunk`] refused: read
    /// as a [`Chunk`] (or found not to be one).
    #[inline(never)]
    fn whole_chunk(&mut self, data: &str, out: &mut Events) -> Result<(), ProviderError> {
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| ProviderError::Decode {
            message: format!("{e} in chunk {}", preview(data)),
        })?;
        self.saw_data = true;
        self.chunk(chunk, out)
    }

    /// Decodes one parsed chunk or whole response: streamed text chunks
    /// come by [`text_chunk`](Self::text_chunk); what the rare parts need is
    /// in functions of their own, out of the way.
    pub(super) fn chunk(
        &mut self,
        chunk: Chunk<'_>,
        out: &mut Events,
    ) -> Result<(), ProviderError> {
        if let Some(error) = &chunk.error {
            self.error(error)?;
        }
        // With `n > 1` the first choice is the reply; the others are ignored.
        if let Some(mut choice) = chunk.choice {
            if let Some(delta) = choice.delta() {
                self.delta(*delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason(&reason);
            }
        }
        if chunk.usage.is_some() || chunk.x_groq.is_some() {
            usage(chunk.usage, chunk.x_groq, out);
        }
        Ok(())
    }

    /// A delta's text, through the `<think>` splitter if there is one.
    fn text(&mut self, content: Cow<'_, str>, out: &mut Events) {
        if content.is_empty() {
            return;
        }
        match &mut self.think {
            Some(splitter) if !splitter.passes_through(&content) => {
                splitter.push(&content, |r, piece| out.push_back(text_event(r, piece)));
            }
            _ => out.push_back(StreamEvent::TextDelta(content.into_owned())),
        }
    }

    #[cold]
    fn error(&self, error: &serde_json::Value) -> Result<(), ProviderError> {
        let message = stream_error_message(error);
        // OpenRouter follows `finish_reason: "length"` with an error
        // chunk that only explains the stop (and carries the usage); the
        // reply itself is complete.
        if self.finish.is_none() {
            return Err(ProviderError::Stream { message });
        }
        tracing::debug!(%message, "server reported an error after the reply finished");
        Ok(())
    }

    #[inline(never)]
    fn finish_reason(&mut self, reason: &str) {
        if !reason.is_empty() {
            self.finish = Some(FinishReason::from_raw(reason));
        }
    }

    fn delta(&mut self, delta: Delta<'_>, out: &mut Events) {
        let Delta {
            content,
            reasoning_content,
            reasoning,
            refusal,
            tool_calls,
            function_call,
        } = delta;
        if let Some(reasoning) = reasoning_content.or(reasoning) {
            reasoning_delta(reasoning, out);
        }
        if let Some(content) = content {
            self.text(content, out);
        }
        if refusal.is_some() || tool_calls.is_some() || function_call.is_some() {
            self.after_text(refusal, tool_calls, function_call, out);
        }
    }

    /// A refusal or tool-call fragments: what follows a delta's text.
    #[inline(never)]
    fn after_text(
        &mut self,
        refusal: Option<Cow<'_, str>>,
        tool_calls: Option<Vec<WireCall<'_>>>,
        function_call: Option<Box<WireFunction<'_>>>,
        out: &mut Events,
    ) {
        if let Some(refusal) = refusal.filter(|r| !r.is_empty()) {
            out.push_back(StreamEvent::RefusalDelta(refusal.into_owned()));
        }
        if let Some(calls) = tool_calls {
            for call in calls {
                self.call(call, out);
            }
        }
        if let Some(function) = function_call {
            self.call(
                WireCall {
                    index: Some(0),
                    id: None,
                    function: Some(*function),
                },
                out,
            );
        }
    }

    fn call(&mut self, call: WireCall<'_>, out: &mut Events) {
        let (name, arguments) = match call.function {
            Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments.0),
            None => (None, Cow::Borrowed("")),
        };
        let id = call.id.filter(|id| !id.is_empty());
        let index = self.slot(call.index, id.as_deref(), name.is_some());
        out.push_back(StreamEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: id.map(Cow::into_owned),
            name: name.map(Cow::into_owned),
            arguments: arguments.into_owned(),
        }));
    }

    /// The position of the call a fragment belongs to. With an `index`, that
    /// index names the call. Without one, a fragment starts a new call when it
    /// carries a new id, or a name while the last call already has one.
    fn slot(&mut self, wire_index: Option<usize>, id: Option<&str>, named: bool) -> usize {
        let found = match wire_index {
            Some(i) => self.slots.iter().position(|s| s.wire_index == Some(i)),
            None => self.slots.last().and_then(|last| {
                let new_id = id.is_some_and(|id| id != last.id);
                let new_name = id.is_none() && named && last.named;
                (!new_id && !new_name).then_some(self.slots.len() - 1)
            }),
        };
        let position = found.unwrap_or_else(|| {
            self.slots.push(Slot {
                wire_index,
                id: String::new(),
                named: false,
            });
            self.slots.len() - 1
        });
        let slot = &mut self.slots[position];
        if let Some(id) = id
            && slot.id.is_empty()
        {
            id.clone_into(&mut slot.id);
        }
        slot.named |= named;
        position
    }

    /// Ends the stream: flushes held-back text and emits the finish reason.
    pub(super) fn end(&mut self, out: &mut Events) -> Result<(), ProviderError> {
        if let Some(splitter) = &mut self.think {
            splitter.finish(|r, piece| out.push_back(text_event(r, piece)));
        }
        let finish = match self.finish.take() {
            Some(finish) => finish,
            None if self.saw_done && !self.slots.is_empty() => FinishReason::ToolCalls,
            None if self.saw_done => FinishReason::Stop,
            None if !self.saw_data => {
                return Err(ProviderError::Decode {
                    message: "the server closed the stream without sending any data".into(),
                });
            }
            None => {
                return Err(ProviderError::Stream {
                    message: "the connection closed before the reply finished \
                              (no finish_reason and no [DONE])"
                        .into(),
                });
            }
        };
        out.push_back(StreamEvent::Finish(finish));
        Ok(())
    }
}

#[inline(never)]
fn reasoning_delta(reasoning: Cow<'_, str>, out: &mut Events) {
    if !reasoning.is_empty() {
        out.push_back(StreamEvent::ReasoningDelta(reasoning.into_owned()));
    }
}

#[inline(never)]
fn usage(usage: Option<Box<WireUsage>>, x_groq: Option<Box<XGroq>>, out: &mut Events) {
    if let Some(usage) = usage.or_else(|| x_groq.and_then(|x| x.usage)) {
        out.push_back(StreamEvent::Usage((*usage).into()));
    }
}

fn text_event(is_reasoning: bool, piece: &str) -> StreamEvent {
    if is_reasoning {
        StreamEvent::ReasoningDelta(piece.to_owned())
    } else {
        StreamEvent::TextDelta(piece.to_owned())
    }
}

/// The start of a payload, for error messages.
pub(super) fn preview(data: &str) -> String {
    match data.char_indices().nth(200) {
        Some((cut, _)) => format!("`{}…`", &data[..cut]),
        None => format!("`{data}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Assembler;
    use serde_json::json;

    fn decode(lines: &[&str]) -> Result<crate::provider::Assembled, ProviderError> {
        let mut decoder = Decoder::new(true, true);
        let mut events = Events::new();
        for line in lines {
            decoder.data(line, &mut events)?;
        }
        decoder.end(&mut events)?;
        let mut a = Assembler::new();
        events.iter().for_each(|e| a.push(e));
        Ok(a.finish())
    }

    /// The events of `chunks` decoded as a stream (each tried as a
    /// `TextChunk` first) and as whole chunks.
    fn both_ways(chunks: &[&str]) -> (Vec<StreamEvent>, Vec<StreamEvent>) {
        let run = |streamed: bool| {
            let mut decoder = Decoder::new(true, streamed);
            let mut events = Events::new();
            for chunk in chunks {
                if let Err(e) = decoder.data(chunk, &mut events) {
                    events.push_back(StreamEvent::TextDelta(format!("error: {e}")));
                }
            }
            Vec::from(events)
        };
        (run(true), run(false))
    }

    #[test]
    fn text_chunks_read_narrowly_give_what_whole_chunks_give() {
        let shapes = [
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null,"obfuscation":"xyz"}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a \"quoted\" \u00e9 word"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#,
            r#"{"choices":[{"delta":{"content":"no index"}}]}"#,
            // `n > 1`: the second choice is not the reply.
            r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"other only"}}]}"#,
            r#"{"choices":null}"#,
            r#"{"choices":[]}"#,
            // What only the whole chunk reads.
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":"x"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"y"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":"think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"refusal":"no"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"g","arguments":"{}"}}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"usage":{"prompt_tokens":1,"completion_tokens":2}}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"<think>why</think>because"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"z"},"finish_reason":"length"}]}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#,
            "not json",
            // A message in place of the delta, or beside it (Perplexity).
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" there"},"message":{"role":"assistant","content":"hi there"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"!"},"message":{"content":"hi there!"}}],"usage":{"prompt_tokens":1,"completion_tokens":3}}"#,
            // The delta's other fields, null, or ones no version reads.
            r#"{"choices":[{"index":0,"delta":{"content":"n","reasoning_content":null,"reasoning":null,"refusal":null,"tool_calls":null,"function_call":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a","audio":{"id":"x"}}}]}"#,
        ];
        for shape in shapes {
            let (fast, whole) = both_ways(&[shape]);
            assert_eq!(format!("{fast:?}"), format!("{whole:?}"), "{shape}");
        }
        // Whichever way, a message stands in for a missing delta, and a
        // delta wins over a message beside it.
        let texts = |shape: &str| {
            let (fast, _) = both_ways(&[shape]);
            fast.iter()
                .filter_map(|e| match e {
                    StreamEvent::TextDelta(text) => Some(text.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(shapes[22]), ["hi"]);
        assert_eq!(texts(shapes[23]), [" there"]);
        assert_eq!(texts(shapes[24]), ["!"]);
        // And one after another to the end: the finish reason and the usage.
        let ended = |streamed| {
            let mut decoder = Decoder::new(true, streamed);
            let mut events = Events::new();
            for shape in &shapes[..19] {
                decoder.data(shape, &mut events).unwrap();
            }
            decoder.end(&mut events).unwrap();
            format!("{:?}", Vec::from(events))
        };
        assert_eq!(ended(true), ended(false));
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id_or_name() {
        let out = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        let calls: Vec<_> = out.message.tool_calls().cloned().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, json!({"x": 1}));
        assert_eq!(calls[1].name, "g");
        assert_eq!(calls[1].arguments, json!({}));
    }

    #[test]
    fn empty_finish_reason_is_ignored_and_done_ends_the_reply() {
        let out = decode(&[
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":""}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(out.finish, Some(FinishReason::Stop));
    }

    #[test]
    fn error_object_in_the_stream_is_surfaced() {
        let err = decode(&[r#"{"error":{"message":"overloaded","code":503}}"#]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "server reported an error mid-stream: overloaded"
        );
    }

    #[test]
    fn a_cut_stream_is_an_error_not_a_short_reply() {
        let err = decode(&[r#"{"choices":[{"delta":{"content":"hal"}}]}"#]).unwrap_err();
        assert!(err.to_string().contains("closed before the reply finished"));
    }
}
