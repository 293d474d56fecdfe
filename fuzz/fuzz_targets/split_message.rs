//! Splitting a reply for a platform's length limit: any text (Markdown
//! code blocks included, whose fences are closed and reopened across
//! pieces), any limit a platform may have, either way of counting. Never a
//! panic; every piece within the limit; no character dropped.
#![no_main]

use ferrobot::bot::{Length, split_message};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // 32, the shortest limit that holds a reopened fence, and up.
    let limit = 32 + usize::from(head % 96);
    for length in [Length::Chars, Length::Utf16] {
        let pieces = split_message(text, limit, length);
        for piece in &pieces {
            let size = match length {
                Length::Chars => piece.chars().count(),
                _ => piece.encode_utf16().count(),
            };
            assert!(
                size <= limit,
                "a piece of {size} over the limit {limit}: {piece:?}"
            );
        }
        // The added fences aside, the pieces hold every character.
        let kept = pieces
            .iter()
            .flat_map(|p| p.chars())
            .filter(|c| !c.is_whitespace())
            .count();
        let given = text.chars().filter(|c| !c.is_whitespace()).count();
        assert!(kept >= given, "characters dropped splitting at {limit}");
    }
});
