//! The Telegram bot's MarkdownV2 writer on any text a model may write:
//! never a panic, and no reserved character left bare outside code, where
//! Telegram would refuse the whole message.
#![no_main]

use ferrobot_telegram::markdown;

/// What MarkdownV2 reserves in text.
const RESERVED: &str = "\\_*[]()~`>#+-=|{}.!";

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let written = markdown::to_markdown_v2(text);
    // Outside code and link targets, a `.` or `!` (reserved, and never
    // markup) always follows a backslash.
    let mut chars = written.chars().peekable();
    let (mut in_code, mut in_url) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '`' if !in_url => in_code = !in_code,
            ']' if !in_code && chars.peek() == Some(&'(') => {
                chars.next();
                in_url = true;
            }
            ')' if in_url => in_url = false,
            '.' | '!' if !in_code && !in_url => {
                panic!("a bare {c:?} in {written:?} (from {text:?}); reserved: {RESERVED}")
            }
            _ => {}
        }
    }
});
