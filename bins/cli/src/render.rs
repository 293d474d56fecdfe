//! Showing a streaming answer in a terminal: Markdown rendered block by
//! block as each finishes (termimad can't render a stream), a spinner while
//! the agent waits, reasoning dimmed.

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Splits streamed Markdown into finished blocks: a block ends at a blank
/// line outside a code fence.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    pending: String,
}

impl Blocks {
    /// Adds a delta; returns the blocks it finished.
    pub(crate) fn push(&mut self, delta: &str) -> Vec<String> {
        self.pending.push_str(delta);
        let mut done = Vec::new();
        while let Some(end) = block_end(&self.pending) {
            let rest = self.pending.split_off(end);
            done.push(std::mem::replace(&mut self.pending, rest));
        }
        done
    }

    /// What is left at the end of the answer.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        (!rest.trim().is_empty()).then_some(rest)
    }
}

/// The end (after the blank line) of the first finished block of `text`.
fn block_end(text: &str) -> Option<usize> {
    let mut in_fence = false;
    let mut offset = 0;
    let mut previous_blank = false;
    for line in text.split_inclusive('\n') {
        offset += line.len();
        if !line.ends_with('\n') {
            return None;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
            // A closed fence ends its block.
            if !in_fence {
                return Some(offset);
            }
        }
        if !in_fence && trimmed.is_empty() && offset > line.len() && !previous_blank {
            return Some(offset);
        }
        previous_blank = trimmed.is_empty();
    }
    None
}

/// A status line on stderr with a turning wheel, redrawn until cleared.
#[derive(Clone, Default)]
pub(crate) struct Spinner {
    status: Arc<Mutex<Option<String>>>,
}

impl Spinner {
    /// Starts the redrawing task.
    pub(crate) fn start() -> Self {
        let spinner = Self::default();
        let status = Arc::clone(&spinner.status);
        tokio::spawn(async move {
            const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            for frame in FRAMES.iter().cycle() {
                if let Some(text) = status.lock().unwrap_or_else(|e| e.into_inner()).as_deref() {
                    let mut err = std::io::stderr();
                    let _ = write!(err, "\r\x1b[2K\x1b[2m{frame} {text}\x1b[0m");
                    let _ = err.flush();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        spinner
    }

    pub(crate) fn show(&self, text: &str) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.to_owned());
    }

    /// Removes the status line before anything else is printed.
    pub(crate) fn clear(&self) {
        if self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some()
        {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// Prints one finished Markdown block, styled for the terminal.
pub(crate) fn print_block(block: &str) {
    termimad::print_text(block);
}

/// Reasoning, dimmed, on stderr.
pub(crate) fn print_reasoning(delta: &str) {
    let mut err = std::io::stderr();
    let _ = write!(err, "\x1b[2m{delta}\x1b[0m");
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_end_at_blank_lines_outside_code() {
        let mut blocks = Blocks::default();
        assert!(blocks.push("# Title\nSome ").is_empty());
        assert_eq!(blocks.push("text.\n\nNext"), ["# Title\nSome text.\n\n"]);
        assert!(
            blocks.push("\n```sh\ndf -h\n\nls\n").is_empty(),
            "a blank line inside code doesn't end the block"
        );
        assert_eq!(blocks.push("```\n"), ["Next\n```sh\ndf -h\n\nls\n```\n"]);
        assert_eq!(blocks.finish(), None);
        blocks.push("tail");
        assert_eq!(blocks.finish().as_deref(), Some("tail"));
    }
}
