//! Splitting a long reply into messages a chat platform accepts.

/// How a platform counts a message's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Length {
    /// Unicode scalar values (Discord's 2,000).
    Chars,
    /// UTF-16 code units (Telegram's 4,096): most emoji count twice.
    Utf16,
}

impl Length {
    fn of(self, text: &str) -> usize {
        match self {
            Length::Chars => text.chars().count(),
            Length::Utf16 => text.encode_utf16().count(),
        }
    }

    fn of_char(self, c: char) -> usize {
        match self {
            Length::Chars => 1,
            Length::Utf16 => c.len_utf16(),
        }
    }
}

const FENCE: &str = "```";
/// Shortest limit that leaves room for text beside a reopened code fence.
const MIN_LIMIT: usize = 32;

/// Splits `text` into pieces of at most `limit` (measured as `length`),
/// preferring paragraph breaks, then line breaks, then spaces. A piece that
/// ends inside a Markdown code block closes it, and the next piece reopens
/// it with the same language, so each message renders on its own. Characters
/// are never cut, and nothing is dropped: joining the pieces, less the added
/// fences, gives `text` back.
///
/// # Panics
/// When `limit` is below 32, too small to hold a reopened code fence.
///
/// # Examples
/// ```
/// use ferrobot::bot::{split_message, Length};
/// let text = format!("Here:\n```rust\n{}```\nDone.", "let x = 1;\n".repeat(10));
/// let pieces = split_message(&text, 64, Length::Chars);
/// assert!(pieces.iter().all(|p| p.chars().count() <= 64));
/// assert!(pieces[1].starts_with("```rust\n"));
/// ```
pub fn split_message(text: &str, limit: usize, length: Length) -> Vec<String> {
    pieces(text, limit, length)
        .iter()
        .map(Piece::render)
        .collect()
}

/// `text` cut to at most `limit` (measured as `length`), ending with `…`
/// when cut: for what must fit one message, such as a confirmation prompt.
///
/// # Examples
/// ```
/// use ferrobot::bot::{clip, Length};
/// assert_eq!(clip("Delete /var/log/syslog?", 12, Length::Chars), "Delete /var…");
/// assert_eq!(clip("short", 12, Length::Chars), "short");
/// ```
pub fn clip(text: &str, limit: usize, length: Length) -> String {
    if length.of(text) <= limit {
        return text.to_owned();
    }
    let mut used = length.of_char('…');
    let mut clipped: String = text
        .chars()
        .take_while(|&c| {
            used += length.of_char(c);
            used <= limit
        })
        .collect();
    clipped.push('…');
    clipped
}

/// One message of a split: a slice of the text, with the code fence it
/// reopens and whether it closes one.
struct Piece<'a> {
    reopens: Option<String>,
    body: &'a str,
    closes: bool,
}

impl Piece<'_> {
    fn render(&self) -> String {
        let mut message = String::new();
        if let Some(fence) = &self.reopens {
            message.push_str(fence);
            message.push('\n');
        }
        message.push_str(self.body);
        if self.closes {
            message.push('\n');
            message.push_str(FENCE);
        }
        message
    }
}

fn pieces(text: &str, limit: usize, length: Length) -> Vec<Piece<'_>> {
    assert!(
        limit >= MIN_LIMIT,
        "a message limit below {MIN_LIMIT} can't hold a reopened code fence"
    );
    let mut pieces = Vec::new();
    let mut rest = text;
    // The opening line of the code block the previous piece ended in.
    let mut open: Option<String> = None;
    while !rest.is_empty() {
        let room = limit - open.as_ref().map_or(0, |fence| length.of(fence) + 1);
        if length.of(rest) <= room {
            pieces.push(Piece {
                reopens: open.take(),
                body: rest,
                closes: false,
            });
            break;
        }
        // Leave room to close a fence this piece may end inside.
        let budget = room - length.of("\n") - length.of(FENCE);
        let starts_line =
            rest.len() == text.len() || text[..text.len() - rest.len()].ends_with('\n');
        let (body, tail) = rest.split_at(cut_point(rest, budget, length));
        let still_open = fence_after(open.clone(), body, starts_line);
        pieces.push(Piece {
            reopens: open,
            body,
            closes: still_open.is_some(),
        });
        open = still_open;
        rest = tail;
    }
    pieces
}

/// The byte index to cut `text` at: the last paragraph break, line break or
/// space that keeps the piece within `budget`, else as much as fits.
fn cut_point(text: &str, budget: usize, length: Length) -> usize {
    let mut used = 0;
    let mut max = 0;
    for (i, c) in text.char_indices() {
        used += length.of_char(c);
        if used > budget {
            break;
        }
        max = i + c.len_utf8();
    }
    let window = &text[..max];
    // A piece may not start with a fence unless it starts a line: on its own
    // the message would open a code block the text never had.
    let clean =
        |cut: usize| window[..cut].ends_with('\n') || !text[cut..].trim_start().starts_with(FENCE);
    // Cut after the separator, so it ends the piece rather than starting the next.
    let after = |sep: &str| {
        window
            .match_indices(sep)
            .map(|(i, _)| i + sep.len())
            .filter(|&i| i > max / 3 && clean(i))
            .last()
    };
    let hard = (first_char_len(text)..=max.max(first_char_len(text)))
        .rev()
        .find(|&i| text.is_char_boundary(i) && clean(i))
        .unwrap_or(max.max(first_char_len(text)));
    let cut = after("\n\n")
        .or_else(|| after("\n"))
        .or_else(|| after(" "))
        .unwrap_or(hard);
    // Never cut through a fence line: the pieces would disagree about which
    // code block is open. Cut before it instead, when anything comes first.
    let line_start = text[..cut].rfind('\n').map_or(0, |i| i + 1);
    if cut > line_start && line_start > 0 && text[line_start..].trim_start().starts_with(FENCE) {
        return line_start;
    }
    cut
}

fn first_char_len(text: &str) -> usize {
    text.chars().next().map_or(0, char::len_utf8)
}

/// Which code block is open after `piece`, given the one open before it.
/// `starts_line` says whether the piece starts at the start of a line: when
/// it doesn't, its first line's beginning is mid-line and can't be a fence.
fn fence_after(mut open: Option<String>, piece: &str, starts_line: bool) -> Option<String> {
    for (i, line) in piece.split('\n').enumerate() {
        if i == 0 && !starts_line {
            continue;
        }
        let Some(info) = line.trim_start().strip_prefix(FENCE) else {
            continue;
        };
        open = match open {
            Some(_) => None,
            // A backtick in the info string makes it inline code, not a fence.
            None if info.contains('`') => None,
            // Reopened with the language only, at most 16 UTF-16 units
            // (so 16 characters too), so the fence always fits.
            None => {
                let mut units = 0;
                let language: String = info
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take_while(|c| {
                        units += c.len_utf16();
                        units <= 16
                    })
                    .collect();
                Some(format!("{FENCE}{language}"))
            }
        };
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_fence_line_longer_than_the_limit_still_splits_within_it() {
        let text = format!("```{}\n{}\n```", "json ".repeat(40), "x".repeat(200));
        for piece in split_message(&text, 64, Length::Chars) {
            assert!(piece.chars().count() <= 64, "{piece}");
        }
        let inline = format!("```{}```\n{}", "y".repeat(100), "z ".repeat(50));
        for piece in split_message(&inline, 40, Length::Chars) {
            assert!(piece.chars().count() <= 40, "{piece}");
        }
    }

    #[test]
    fn a_language_of_emoji_reopens_within_the_shortest_limit() {
        // 16 emoji are 32 UTF-16 units: reopened whole, the fence alone
        // would not fit a 32-unit message.
        let text = format!("```{}\n{}\n```", "🦀".repeat(16), "x ".repeat(100));
        for limit in 32..40 {
            for piece in split_message(&text, limit, Length::Utf16) {
                assert!(piece.encode_utf16().count() <= limit, "{limit}: {piece}");
            }
        }
    }

    #[test]
    fn short_text_is_one_piece() {
        assert_eq!(split_message("hello", 100, Length::Chars), ["hello"]);
    }

    #[test]
    fn paragraphs_are_preferred_over_lines_and_words() {
        let text = format!("{}\n\n{}", "a ".repeat(20), "b ".repeat(20));
        let pieces = split_message(&text, 60, Length::Chars);
        assert_eq!(pieces[0], format!("{}\n\n", "a ".repeat(20)));
    }

    #[test]
    fn code_blocks_are_closed_and_reopened() {
        let text = format!("```python\n{}```", "print('hi')\n".repeat(20));
        let pieces = split_message(&text, 80, Length::Chars);
        assert!(pieces.len() > 2);
        for piece in &pieces {
            assert_eq!(piece.matches("```").count() % 2, 0, "unbalanced: {piece:?}");
        }
        assert!(pieces[1].starts_with("```python\n"));
    }

    #[test]
    fn utf16_counts_emoji_twice() {
        let text = "😀".repeat(40);
        let pieces = split_message(&text, 32, Length::Utf16);
        assert!(pieces.iter().all(|p| p.encode_utf16().count() <= 32));
        assert_eq!(pieces.concat(), text);
    }

    proptest! {
        #[test]
        fn pieces_fit_and_fences_balance(
            words in prop::collection::vec(prop_oneof![
                "[a-z]{1,12}", Just("\n".to_owned()), Just("\n\n".to_owned()), Just("```rust\n".to_owned()),
                Just("\n```\n".to_owned()), Just("😀".to_owned()), Just("é".to_owned()), Just(" ".to_owned()),
            ], 0..200),
            limit in 32usize..200,
            utf16 in any::<bool>(),
        ) {
            let text = words.concat();
            let length = if utf16 { Length::Utf16 } else { Length::Chars };
            let parts = pieces(&text, limit, length);
            let ends_open = fence_after(None, &text, true).is_some();
            for (i, part) in parts.iter().enumerate() {
                let message = part.render();
                prop_assert!(length.of(&message) <= limit, "{} > {limit}: {message:?}", length.of(&message));
                // Each message's code blocks are closed, but for a text that
                // itself ends inside one.
                let balanced = fence_after(None, &message, true).is_none();
                prop_assert!(balanced || (i + 1 == parts.len() && ends_open), "unbalanced: {message:?}");
            }
            // Nothing is lost or repeated.
            let bodies: String = parts.iter().map(|p| p.body).collect();
            prop_assert_eq!(bodies, text);
        }
    }
}
