//! Splitting inline `<think>…</think>` reasoning out of answer text.

/// Separates `<think>…</think>` spans from streamed text.
///
/// Open-weight reasoning models served over OpenAI-compatible endpoints
/// (DeepSeek-R1 distills, Qwen3 on Ollama or llama.cpp) often write their
/// reasoning inline. The splitter routes it to reasoning instead of the reply,
/// even when a tag is cut across deltas. Whitespace right after `</think>` is
/// dropped so the answer doesn't start with blank lines.
///
/// # Examples
/// ```
/// use ferrobot::provider::ThinkSplitter;
/// let mut splitter = ThinkSplitter::new();
/// let mut text = String::new();
/// let mut reasoning = String::new();
/// for delta in ["<thi", "nk>hmm</th", "ink>\n\nHello"] {
///     splitter.push(delta, |is_reasoning, piece| {
///         if is_reasoning { reasoning.push_str(piece) } else { text.push_str(piece) }
///     });
/// }
/// splitter.finish(|_, piece| text.push_str(piece));
/// assert_eq!((text.as_str(), reasoning.as_str()), ("Hello", "hmm"));
/// ```
#[derive(Debug, Default, Clone)]
pub struct ThinkSplitter {
    in_think: bool,
    trim_next: bool,
    pending: String,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkSplitter {
    /// A splitter outside any `<think>` span.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `delta` would come out unchanged as answer text, so a caller
    /// holding it as an owned string can pass it on without a copy.
    pub fn passes_through(&self, delta: &str) -> bool {
        !self.in_think && !self.trim_next && self.pending.is_empty() && !delta.contains('<')
    }

    /// Feeds one delta; `emit(is_reasoning, piece)` receives what can be
    /// decided now. A possible partial tag at the end is held back.
    pub fn push(&mut self, delta: &str, mut emit: impl FnMut(bool, &str)) {
        // Fast path: no tag can start in this delta and nothing is held back.
        if self.pending.is_empty() && !delta.contains('<') {
            self.emit(delta, &mut emit);
            return;
        }
        let mut buf = std::mem::take(&mut self.pending);
        buf.push_str(delta);
        let mut rest = buf.as_str();
        loop {
            let tag = if self.in_think { CLOSE } else { OPEN };
            if let Some(pos) = rest.find(tag) {
                self.emit(&rest[..pos], &mut emit);
                self.in_think = !self.in_think;
                self.trim_next = !self.in_think;
                rest = &rest[pos + tag.len()..];
                continue;
            }
            let keep = partial_suffix(rest, tag);
            self.emit(&rest[..rest.len() - keep], &mut emit);
            self.pending = rest[rest.len() - keep..].to_owned();
            return;
        }
    }

    /// Flushes what was held back at the end of the stream.
    pub fn finish(&mut self, mut emit: impl FnMut(bool, &str)) {
        let pending = std::mem::take(&mut self.pending);
        self.emit(&pending, &mut emit);
    }

    fn emit(&mut self, mut piece: &str, emit: &mut impl FnMut(bool, &str)) {
        if self.trim_next {
            piece = piece.trim_start();
            if piece.is_empty() {
                return;
            }
            self.trim_next = false;
        }
        if !piece.is_empty() {
            emit(self.in_think, piece);
        }
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(deltas: &[&str]) -> (String, String) {
        let mut s = ThinkSplitter::new();
        let (mut text, mut reasoning) = (String::new(), String::new());
        let mut sink = |r: bool, p: &str| {
            if r {
                reasoning.push_str(p)
            } else {
                text.push_str(p)
            }
        };
        for d in deltas {
            s.push(d, &mut sink);
        }
        s.finish(&mut sink);
        (text, reasoning)
    }

    #[test]
    fn tags_split_at_every_byte_give_the_same_result() {
        let whole = "<think>a < b</think>\nyes <b>bold</b>";
        for cut in 0..=whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(
                split(&[a, b]),
                ("yes <b>bold</b>".into(), "a < b".into()),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn text_without_tags_passes_through() {
        assert_eq!(split(&["x <", "y"]), ("x <y".into(), String::new()));
    }
}
