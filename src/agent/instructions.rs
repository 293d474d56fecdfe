//! Sections added to the system prompt while the agent runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// Sections of the system prompt that come and go while the agent runs,
/// each under its source's name: the instructions of a connected MCP
/// server, say. Each turn sends the agent's system prompt, then the
/// sections in the order they were first set, separated by blank lines.
/// A turn reads them once, at its start.
///
/// Get it from [`Agent::instructions`](super::Agent::instructions); it is
/// shared by the agent's clones.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let mock = MockProvider::replying("ok");
/// let agent = Agent::builder().provider(mock.clone()).system_prompt("Be terse.").build();
/// agent.instructions().set("weather", "Temperatures are in Celsius.");
/// agent.handle("alice", "hi").await?;
/// let system = mock.requests()[0].system.clone().unwrap();
/// assert_eq!(system, "Be terse.\n\nTemperatures are in Celsius.");
///
/// assert!(agent.instructions().remove("weather"));
/// assert!(agent.instructions().is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Instructions {
    /// Whether there is no section: the turn's fast path, without the lock.
    empty: AtomicBool,
    inner: RwLock<Sections>,
}

#[derive(Debug, Default)]
struct Sections {
    base: Option<String>,
    sections: Vec<(String, String)>,
    /// The base and the sections, joined once per change.
    joined: Option<Arc<str>>,
}

impl Instructions {
    pub(crate) fn new(base: Option<String>) -> Self {
        Self {
            empty: AtomicBool::new(true),
            inner: RwLock::new(Sections {
                base,
                ..Sections::default()
            }),
        }
    }

    /// Sets the section of `source`, replacing its earlier text (it keeps
    /// its place). Empty text removes it.
    pub fn set(&self, source: impl Into<String>, text: impl Into<String>) {
        let (source, text) = (source.into(), text.into());
        if text.trim().is_empty() {
            self.remove(&source);
            return;
        }
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        match inner.sections.iter_mut().find(|(s, _)| *s == source) {
            Some((_, old)) => *old = text,
            None => inner.sections.push((source, text)),
        }
        self.rejoin(&mut inner);
    }

    /// Removes the section of `source`. Returns whether there was one.
    pub fn remove(&self, source: &str) -> bool {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let before = inner.sections.len();
        inner.sections.retain(|(s, _)| s != source);
        let removed = inner.sections.len() != before;
        if removed {
            self.rejoin(&mut inner);
        }
        removed
    }

    /// The text of `source`'s section.
    pub fn get(&self, source: &str) -> Option<String> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner
            .sections
            .iter()
            .find(|(s, _)| s == source)
            .map(|(_, text)| text.clone())
    }

    /// The sources that have a section, in order.
    pub fn sources(&self) -> Vec<String> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.sections.iter().map(|(s, _)| s.clone()).collect()
    }

    /// Whether there is no section.
    pub fn is_empty(&self) -> bool {
        self.empty.load(Ordering::Acquire)
    }

    /// The system prompt with the sections, for a turn; `None` when there
    /// is no section (the agent's own prompt is sent as it is).
    pub(crate) fn joined(&self) -> Option<Arc<str>> {
        if self.is_empty() {
            return None;
        }
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.joined.clone()
    }

    fn rejoin(&self, inner: &mut Sections) {
        inner.joined = (!inner.sections.is_empty()).then(|| {
            let mut parts: Vec<&str> = inner.base.iter().map(String::as_str).collect();
            parts.extend(inner.sections.iter().map(|(_, text)| text.as_str()));
            Arc::from(parts.join("\n\n"))
        });
        self.empty
            .store(inner.sections.is_empty(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keep_their_place_and_join_after_the_base() {
        let instructions = Instructions::new(Some("Base.".into()));
        assert!(instructions.joined().is_none());
        instructions.set("a", "A one.");
        instructions.set("b", "B.");
        instructions.set("a", "A two.");
        assert_eq!(
            instructions.joined().as_deref(),
            Some("Base.\n\nA two.\n\nB.")
        );
        assert_eq!(instructions.sources(), ["a", "b"]);
        instructions.set("a", " ");
        assert_eq!(instructions.joined().as_deref(), Some("Base.\n\nB."));
        assert!(instructions.remove("b"));
        assert!(!instructions.remove("b"));
        assert!(instructions.joined().is_none());
    }

    #[test]
    fn without_a_base_the_sections_are_the_prompt() {
        let instructions = Instructions::new(None);
        instructions.set("a", "A.");
        assert_eq!(instructions.joined().as_deref(), Some("A."));
    }
}
