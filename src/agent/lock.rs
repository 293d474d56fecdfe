//! One turn at a time per conversation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// Per-conversation turn locks. Different conversations never wait on each
/// other; an entry lives only while a turn holds or awaits it, so idle
/// conversations cost nothing.
#[derive(Debug, Default)]
pub(crate) struct ConversationLocks {
    locks: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
}

pub(crate) struct TurnGuard<'a> {
    owner: &'a ConversationLocks,
    conversation: Arc<str>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl ConversationLocks {
    pub(crate) async fn lock(&self, conversation: &Arc<str>) -> TurnGuard<'_> {
        let mutex = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(Arc::clone(conversation)).or_default())
        };
        TurnGuard {
            owner: self,
            conversation: Arc::clone(conversation),
            guard: Some(mutex.lock_owned().await),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.owner.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Only the map holds it: nobody waits, so the entry can go. Waiters
        // clone the Arc under this same map lock, so this check can't race.
        if locks
            .get(&self.conversation)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            locks.remove(&self.conversation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_are_removed_when_no_turn_needs_them() {
        let locks = ConversationLocks::default();
        let alice: Arc<str> = "alice".into();
        {
            let _g = locks.lock(&alice).await;
            assert_eq!(locks.len(), 1);
        }
        assert_eq!(locks.len(), 0);
    }

    #[tokio::test]
    async fn a_second_turn_waits_for_the_first() {
        let locks = Arc::new(ConversationLocks::default());
        let alice: Arc<str> = "alice".into();
        let first = locks.lock(&alice).await;
        let waiting = {
            let (locks, alice) = (Arc::clone(&locks), Arc::clone(&alice));
            tokio::spawn(async move {
                let _g = locks.lock(&alice).await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        waiting.await.unwrap();
        assert_eq!(locks.len(), 0);
    }
}
