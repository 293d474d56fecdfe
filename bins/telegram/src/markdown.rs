//! The model's Markdown as Telegram's MarkdownV2.
//!
//! Telegram rejects a MarkdownV2 message with one unescaped `.` or `!`, and
//! models write CommonMark; so the reply is parsed with `pulldown-cmark` and
//! written again with every character escaped as MarkdownV2 requires in its
//! place (text, code, link target). If Telegram still refuses it, the
//! channel falls back to plain text.
//!
//! It needs nothing but `pulldown-cmark`, so the fuzz targets (`fuzz/`)
//! include this file without linking teloxide.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// What MarkdownV2 reserves in text; each is written after a `\`.
const RESERVED: [char; 19] = [
    '\\', '_', '*', '[', ']', '(', ')', '~', '`', '>', '#', '+', '-', '=', '|', '{', '}', '.', '!',
];

/// Text with every reserved character escaped.
fn escape(text: &str) -> String {
    escaped(text, &RESERVED)
}

/// Code, inline or a block: only `` ` `` and `\` are escaped there.
fn escape_code(code: &str) -> String {
    escaped(code, &['`', '\\'])
}

fn escaped(text: &str, reserved: &[char]) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        if reserved.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `markdown` as MarkdownV2.
pub fn to_markdown_v2(markdown: &str) -> String {
    let mut out = Writer::default();
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        out.event(event);
    }
    out.text.trim_end().to_owned()
}

#[derive(Default)]
struct Writer {
    text: String,
    /// Numbers of the open lists (`None` for bullets), innermost last.
    lists: Vec<Option<u64>>,
    quote: usize,
    in_code_block: bool,
    /// Targets of the open links, innermost last.
    links: Vec<String>,
    /// How deep inside bold, italic and strikethrough the text is: a marker
    /// is written only at the outermost level (`**bold**` inside a heading,
    /// which is bold, must not close the heading's bold).
    styles: [usize; 3],
}

/// The MarkdownV2 markers of bold, italic and strikethrough.
const MARKERS: [&str; 3] = ["*", "_", "~"];

impl Writer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.in_code_block => self.text.push_str(&escape_code(&text)),
            Event::Text(text) => self.write(&escape(&text)),
            Event::Code(code) => self.write(&format!("`{}`", escape_code(&code))),
            Event::Html(html) | Event::InlineHtml(html) => self.write(&escape(&html)),
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block_break();
                self.write("———");
                self.block_break();
            }
            Event::TaskListMarker(done) => self.write(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(name) => self.write(&escape(&format!("[{name}]"))),
            Event::InlineMath(math) | Event::DisplayMath(math) => {
                self.write(&format!("`{}`", escape_code(&math)));
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::Table(_) => self.block_break(),
            Tag::Heading { .. } => {
                self.block_break();
                self.open(0);
            }
            Tag::BlockQuote(_) => {
                self.block_break();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block_break();
                let language = match kind {
                    CodeBlockKind::Fenced(language) => language
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                // A code block can't be quoted in MarkdownV2; it stands alone.
                self.text
                    .push_str(&format!("```{}\n", escape_code(&language)));
                self.in_code_block = true;
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_break();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.line_break();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        *number += 1;
                        format!("{}\\. ", *number - 1)
                    }
                    _ => "• ".to_owned(),
                };
                self.write(&format!("{}{marker}", "  ".repeat(depth)));
            }
            Tag::Strong => self.open(0),
            Tag::Emphasis => self.open(1),
            Tag::Strikethrough => self.open(2),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.write("[");
                self.links.push(dest_url.into_string());
            }
            Tag::TableRow | Tag::TableHead => self.line_break(),
            Tag::TableCell if !self.text.ends_with('\n') && !self.text.is_empty() => {
                self.write(" \\| ");
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(level) => {
                self.close(0);
                if level == HeadingLevel::H1 {
                    self.newline();
                }
            }
            TagEnd::BlockQuote(_) => self.quote = self.quote.saturating_sub(1),
            TagEnd::CodeBlock => {
                if !self.text.ends_with('\n') {
                    self.text.push('\n');
                }
                self.text.push_str("```");
                self.in_code_block = false;
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Strong => self.close(0),
            TagEnd::Emphasis => self.close(1),
            TagEnd::Strikethrough => self.close(2),
            TagEnd::Link | TagEnd::Image => {
                let url = self.links.pop().unwrap_or_default();
                // In a link target, `)` and `\` are escaped (teloxide's
                // `escape_link_url` leaves the backslash).
                let url = url.replace('\\', "\\\\").replace(')', "\\)");
                self.write(&format!("]({url})"));
            }
            _ => {}
        }
    }

    fn open(&mut self, style: usize) {
        if self.styles[style] == 0 {
            self.write(MARKERS[style]);
        }
        self.styles[style] += 1;
    }

    fn close(&mut self, style: usize) {
        self.styles[style] = self.styles[style].saturating_sub(1);
        if self.styles[style] == 0 {
            self.write(MARKERS[style]);
        }
    }

    /// Writes inline text, opening each new line of a quote with `>`.
    fn write(&mut self, text: &str) {
        if self.quote > 0 && (self.text.is_empty() || self.text.ends_with('\n')) {
            self.text.push('>');
        }
        self.text.push_str(text);
    }

    fn newline(&mut self) {
        self.text.push('\n');
    }

    /// Ends the current line, unless at the start of one.
    fn line_break(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
    }

    /// A blank line between blocks (a single line break inside a list or quote).
    fn block_break(&mut self) {
        if self.text.is_empty() {
            return;
        }
        self.line_break();
        if self.lists.is_empty() && self.quote == 0 && !self.text.ends_with("\n\n") {
            self.text.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::to_markdown_v2;

    #[test]
    fn every_reserved_character_in_text_is_escaped() {
        assert_eq!(
            to_markdown_v2("Free: 42.5 GB (of 100)! a-b = c + d | {x} #1 ~ >"),
            r"Free: 42\.5 GB \(of 100\)\! a\-b \= c \+ d \| \{x\} \#1 \~ \>"
        );
    }

    #[test]
    fn emphasis_code_and_links_become_markdown_v2_entities() {
        assert_eq!(
            to_markdown_v2("**Disk** is _fine_, see `df -h` or [the docs](https://x.org/a_(b))."),
            r"*Disk* is _fine_, see `df -h` or [the docs](https://x.org/a_(b\))\."
        );
    }

    #[test]
    fn a_style_inside_the_same_style_is_written_once() {
        assert_eq!(to_markdown_v2("## **Disk report**"), "*Disk report*");
        assert_eq!(to_markdown_v2("*a _b_ c*"), "_a b c_");
    }

    #[test]
    fn link_targets_escape_backslashes_and_parentheses() {
        assert_eq!(
            to_markdown_v2(r"[x](https://a.org/b\\c)"),
            r"[x](https://a.org/b\\c)"
        );
        assert_eq!(
            to_markdown_v2("[x](<https://a.org/(b)>)"),
            r"[x](https://a.org/(b\))"
        );
    }

    #[test]
    fn code_blocks_keep_their_language_and_escape_only_backslashes_and_backticks() {
        assert_eq!(
            to_markdown_v2("Run:\n\n```sh\necho \"a.b\" \\ `x`\n```\nDone."),
            "Run:\n\n```sh\necho \"a.b\" \\\\ \\`x\\`\n```\n\nDone\\."
        );
    }

    #[test]
    fn headings_lists_and_quotes_read_well() {
        assert_eq!(
            to_markdown_v2("# Report\n\n- one\n- two.\n\n1. first\n2. second\n\n> quoted.\n> more"),
            "*Report*\n\n• one\n• two\\.\n\n1\\. first\n2\\. second\n\n>quoted\\.\n>more"
        );
    }
}
