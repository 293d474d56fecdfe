//! Whether a turn's token was cancelled while its model answer streams,
//! told by a flag rather than by the token.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Wake, Waker};

use tokio_util::sync::WaitForCancellationFuture;

use crate::relay::Relay;

/// Watches a cancellation for a task that waits on something else (a
/// model's answer) and looks at the cancellation each time that wait is
/// pending, once a streamed token.
///
/// The cancellation future is registered with the alarm's own waker, which
/// marks the alarm and wakes the task; so each look is one load of the mark.
/// (`CancellationToken::is_cancelled` takes the token's lock: two atomic
/// writes a token, and a cache line of the token's, which a thousand turns
/// streaming at once keep out of the cache.)
#[derive(Default)]
pub(super) struct Alarm {
    armed: Option<Armed>,
}

struct Armed {
    bell: Arc<Bell>,
    /// The task's waker the bell wakes, as last given.
    task: Waker,
}

#[derive(Default)]
struct Bell {
    rung: AtomicBool,
    task: Relay,
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rung.store(true, Ordering::Release);
        self.task.wake_task();
    }
}

impl Alarm {
    /// Whether `cancelled` has finished; if not, the task of `cx` is woken
    /// when it does. Polls `cancelled` only the first time and when the
    /// task's waker changed.
    pub(super) fn rung(
        &mut self,
        cancelled: Pin<&mut WaitForCancellationFuture<'_>>,
        cx: &Context<'_>,
    ) -> bool {
        if let Some(armed) = &self.armed
            && armed.task.will_wake(cx.waker())
        {
            return armed.bell.rung.load(Ordering::Acquire);
        }
        self.arm(cancelled, cx)
    }

    #[cold]
    #[inline(never)]
    fn arm(
        &mut self,
        cancelled: Pin<&mut WaitForCancellationFuture<'_>>,
        cx: &Context<'_>,
    ) -> bool {
        let task = cx.waker().clone();
        let armed = match &mut self.armed {
            Some(armed) => {
                armed.task = task.clone();
                armed
            }
            None => self.armed.insert(Armed {
                bell: Arc::default(),
                task: task.clone(),
            }),
        };
        armed.bell.task.set(Some(task));
        // Registered once with the bell, which stays the same; the poll
        // after a change of task only sees whether it finished meanwhile.
        let bell = Waker::from(Arc::clone(&armed.bell));
        cancelled.poll(&mut Context::from_waker(&bell)).is_ready()
            || armed.bell.rung.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Poll;
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// Waits until the token is cancelled, through the alarm only.
    async fn until_rung(token: &CancellationToken) {
        let cancelled = token.cancelled();
        tokio::pin!(cancelled);
        let mut alarm = Alarm::default();
        poll_fn(|cx| {
            if alarm.rung(cancelled.as_mut(), cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    #[tokio::test]
    async fn a_cancel_while_the_task_waits_wakes_it_and_is_seen() {
        let token = CancellationToken::new();
        let waiting = tokio::spawn({
            let token = token.clone();
            async move { until_rung(&token).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the alarm woke the task")
            .unwrap();
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter::default());
        (Arc::clone(&counter), Waker::from(counter))
    }

    #[test]
    fn the_task_s_latest_waker_is_woken_and_a_cancel_is_seen_through_any() {
        let token = CancellationToken::new();
        let cancelled = token.cancelled();
        tokio::pin!(cancelled);
        let mut alarm = Alarm::default();
        let (first, first_waker) = counter();
        let (second, second_waker) = counter();
        assert!(!alarm.rung(cancelled.as_mut(), &Context::from_waker(&first_waker)));
        // The task moved: its new waker is the one woken.
        assert!(!alarm.rung(cancelled.as_mut(), &Context::from_waker(&second_waker)));
        token.cancel();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert!(alarm.rung(cancelled.as_mut(), &Context::from_waker(&second_waker)));
        // A cancel rung while another waker was stored is still seen.
        assert!(alarm.rung(cancelled.as_mut(), &Context::from_waker(&first_waker)));
    }

    #[test]
    fn a_cancel_under_one_waker_is_seen_under_the_next() {
        let token = CancellationToken::new();
        let cancelled = token.cancelled();
        tokio::pin!(cancelled);
        let mut alarm = Alarm::default();
        let (_, first_waker) = counter();
        let (_, second_waker) = counter();
        assert!(!alarm.rung(cancelled.as_mut(), &Context::from_waker(&first_waker)));
        token.cancel();
        assert!(alarm.rung(cancelled.as_mut(), &Context::from_waker(&second_waker)));
    }

    #[tokio::test]
    async fn a_token_cancelled_before_is_seen_at_once() {
        let token = CancellationToken::new();
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), until_rung(&token))
            .await
            .expect("seen at the first look");
    }

    #[tokio::test]
    async fn a_parent_s_cancel_rings_a_child_s_alarm() {
        let parent = CancellationToken::new();
        let child = parent.child_token();
        let waiting = tokio::spawn(async move { until_rung(&child).await });
        tokio::task::yield_now().await;
        parent.cancel();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the alarm woke the task")
            .unwrap();
    }
}
