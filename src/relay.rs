//! A waker that passes its wake-ups on to whichever task waits now.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Wake, Waker};

/// Wakes the task last [`set`](Self::set), if any.
///
/// Registered once, in place of a task's own waker, with something that
/// wakes later (a timer, a cancellation), it lets the waiting task change
/// its waker, or leave, without registering again; and whatever holds the
/// relay's waker holds no task's (nor, through it, the task's memory).
#[derive(Default)]
pub(crate) struct Relay(Mutex<Option<Waker>>);

impl Relay {
    /// The task to wake from now on; `None`, none.
    pub(crate) fn set(&self, task: Option<Waker>) {
        let old = std::mem::replace(&mut *self.task(), task);
        // Dropped after the lock: a task's last waker frees the task, and
        // that is no work to hold the lock for.
        drop(old);
    }

    /// Wakes the task set, if any.
    pub(crate) fn wake_task(&self) {
        // Woken outside the lock: a waker may poll the task in place, and
        // that poll may take the lock to set another waker.
        let task = self.task().clone();
        if let Some(task) = task {
            task.wake();
        }
    }

    fn task(&self) -> MutexGuard<'_, Option<Waker>> {
        // Nothing here can be left half-done by a panic.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_task();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_task();
    }
}
