//! The agent's catalogue of tools.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

use tokio::sync::watch;

use super::Tool;
use crate::message::ToolSpec;

/// The tools of an agent, by name, and which of them are enabled.
///
/// A disabled tool is hidden from the model and refuses slash commands; it can
/// be enabled again at any time, from any thread.
///
/// # Examples
/// ```
/// use ferrobot::tool::{ToolRegistry, from_fn};
/// let registry = ToolRegistry::new();
/// registry.register(from_fn("ping", "Reply pong.", |_: serde_json::Value, _| async { "pong" }));
/// registry.set_enabled("ping", false);
/// assert!(registry.specs().is_empty());
/// assert!(registry.get("ping").is_some());
/// ```
#[derive(Debug)]
pub struct ToolRegistry {
    inner: RwLock<Inner>,
    /// Marked on every change, for [`changes`](Self::changes).
    announcer: watch::Sender<()>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self {
            inner: RwLock::default(),
            announcer: watch::Sender::new(()),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, usize>,
    disabled: HashSet<String>,
    /// Specs of the enabled tools, rebuilt on change and shared with each
    /// model call without copying.
    specs: Arc<[ToolSpec]>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. A tool with the same name is replaced, with a warning.
    pub fn register(&self, tool: impl super::IntoTool) {
        let tool = tool.into_tool();
        let name = tool.name().to_owned();
        if !is_portable_name(&name) {
            tracing::warn!(tool = %name, "tool names should match ^[a-zA-Z0-9_-]{{1,64}}$; some providers reject others");
        }
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        match inner.by_name.get(&name) {
            Some(&i) => {
                tracing::warn!(tool = %name, "a tool with this name was already registered; replacing it");
                inner.tools[i] = tool;
            }
            None => {
                let i = inner.tools.len();
                inner.tools.push(tool);
                inner.by_name.insert(name, i);
            }
        }
        inner.rebuild_specs();
        self.announce(inner);
    }

    /// Removes the tool called `name`. Returns whether there was one.
    pub fn unregister(&self, name: &str) -> bool {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let Some(index) = inner.by_name.remove(name) else {
            return false;
        };
        inner.tools.remove(index);
        for i in inner.by_name.values_mut() {
            if *i > index {
                *i -= 1;
            }
        }
        inner.rebuild_specs();
        self.announce(inner);
        true
    }

    /// The tool called `name`, enabled or not.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner
            .by_name
            .get(name)
            .map(|&i| Arc::clone(&inner.tools[i]))
    }

    /// The tool called `name` and whether it is enabled: one look-up where
    /// [`get`](Self::get) and [`is_enabled`](Self::is_enabled) take two (a
    /// tool call asks both).
    pub(crate) fn get_and_enabled(&self, name: &str) -> Option<(Arc<dyn Tool>, bool)> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        let &i = inner.by_name.get(name)?;
        Some((Arc::clone(&inner.tools[i]), !inner.disabled.contains(name)))
    }

    /// Every tool, in registration order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tools
            .clone()
    }

    /// Whether the tool is enabled; unknown names are not.
    pub fn is_enabled(&self, name: &str) -> bool {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.by_name.contains_key(name) && !inner.disabled.contains(name)
    }

    /// Enables or disables a tool by name. Returns whether such a tool exists.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> bool {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if !inner.by_name.contains_key(name) {
            return false;
        }
        let changed = if enabled {
            inner.disabled.remove(name)
        } else {
            inner.disabled.insert(name.to_owned())
        };
        if changed {
            inner.rebuild_specs();
            self.announce(inner);
        }
        true
    }

    /// Tells of every change to the tools or to which are enabled, as it
    /// happens: `changed().await` on the receiver returns after the next one
    /// (several quick changes may be seen as one). A bot uses it to keep its
    /// command menu in step.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use ferrobot::tool::{ToolRegistry, from_fn};
    /// let registry = ToolRegistry::new();
    /// let mut changes = registry.changes();
    /// registry.register(from_fn("ping", "Reply pong.", |_: serde_json::Value, _| async { "pong" }));
    /// changes.changed().await.unwrap();
    /// assert!(!changes.has_changed().unwrap());
    /// # }
    /// ```
    pub fn changes(&self) -> watch::Receiver<()> {
        self.announcer.subscribe()
    }

    /// The specs of the enabled tools, as sent to the model.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::clone(&self.inner.read().unwrap_or_else(|e| e.into_inner()).specs)
    }

    /// Tells the [`changes`](Self::changes) receivers, once the change is
    /// complete and the lock released.
    fn announce(&self, inner: RwLockWriteGuard<'_, Inner>) {
        drop(inner);
        self.announcer.send_replace(());
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tools
            .len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn rebuild_specs(&mut self) {
        self.specs = self
            .tools
            .iter()
            .filter(|t| !self.disabled.contains(t.name()))
            .map(|t| t.spec().clone())
            .collect();
    }
}

fn is_portable_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
