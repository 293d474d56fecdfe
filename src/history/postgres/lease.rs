//! A conversation's turn lock across the processes sharing the database:
//! a lease row, renewed while the turn runs, rather than an advisory lock,
//! which would pin one pooled connection for each running turn (turns
//! last minutes with a local model) and starve the pool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::{Fail, PostgresHistory};
use crate::history::HistoryError;

/// How long a lease lasts unless renewed: how long a crashed process's
/// conversations stay locked.
const LEASE: Duration = Duration::from_secs(30);

/// How often a running turn renews its lease.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// How long a turn waits for the conversation's turn in another process
/// before it fails: longer than any turn should take.
const WAIT_AT_MOST: Duration = Duration::from_secs(15 * 60);

/// Takes the lease when it is free or has expired.
const TAKE: &str = "INSERT INTO turn_leases (conversation, holder, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3))
     ON CONFLICT (conversation) DO UPDATE
         SET holder = excluded.holder, expires_at = excluded.expires_at
         WHERE turn_leases.expires_at < now()";

const RENEW: &str = "UPDATE turn_leases SET expires_at = now() + make_interval(secs => $3)
     WHERE conversation = $1 AND holder = $2";

const RELEASE: &str = "DELETE FROM turn_leases WHERE conversation = $1 AND holder = $2";

/// A running turn's hold on its conversation, renewed in the background;
/// dropping it gives the conversation back.
pub(super) struct Lease {
    store: PostgresHistory,
    conversation: String,
    holder: String,
    renewing: JoinHandle<()>,
}

impl Lease {
    /// Waits for the conversation's lease (at most [`WAIT_AT_MOST`]), then
    /// holds it.
    pub(super) async fn take(store: &PostgresHistory, conversation: &str) -> Result<Self, Fail> {
        let holder = holder();
        let started = Instant::now();
        let mut pause = Duration::from_millis(20);
        let mut said = false;
        loop {
            let taken = store
                .change(TAKE, &[&conversation, &holder, &LEASE.as_secs_f64()])
                .await?;
            if taken == 1 {
                if said {
                    tracing::info!(%conversation, waited_ms = started.elapsed().as_millis() as u64, "took the conversation's turn from another process");
                }
                break;
            }
            if started.elapsed() > WAIT_AT_MOST {
                return Err(Fail::History(HistoryError::Storage {
                    message: format!(
                        "conversation `{conversation}` has been busy in another process for {} \
                         minutes; its turn may be stuck: restart that process, or delete its row \
                         in turn_leases",
                        WAIT_AT_MOST.as_secs() / 60
                    ),
                    source: None,
                }));
            }
            if !said {
                tracing::info!(%conversation, "waiting for the conversation's turn in another process");
                said = true;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        let renewing = tokio::spawn(renew(
            store.clone(),
            conversation.to_owned(),
            holder.clone(),
        ));
        Ok(Self {
            store: store.clone(),
            conversation: conversation.to_owned(),
            holder,
            renewing,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewing.abort();
        let (store, conversation, holder) = (
            self.store.clone(),
            std::mem::take(&mut self.conversation),
            std::mem::take(&mut self.holder),
        );
        // Given back at once; if that fails (or no runtime is left), the
        // lease expires by itself.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let released = store.change(RELEASE, &[&conversation, &holder]).await;
                if let Err(fail) = released {
                    let error = store.error(fail);
                    tracing::warn!(%conversation, error = %error.chain(), "could not give back the conversation's turn; it frees itself in 30 s");
                }
            });
        }
    }
}

/// Renews the lease until aborted; says so if another process took it
/// (this one was too slow to renew: the database out of reach).
async fn renew(store: PostgresHistory, conversation: String, holder: String) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let seconds = LEASE.as_secs_f64();
        let renewed = store
            .change(RENEW, &[&conversation, &holder, &seconds])
            .await;
        match renewed {
            Ok(1) => {}
            Ok(_) => {
                tracing::warn!(%conversation, "lost the conversation's turn lock to another process (it expired); two turns may run at once");
                return;
            }
            Err(fail) => {
                let error = store.error(fail);
                tracing::warn!(%conversation, error = %error.chain(), "could not renew the conversation's turn lock");
            }
        }
    }
}

/// A holder name no other turn, here or in another process, has: the
/// process, when it started, and a count.
fn holder() -> String {
    static STARTED: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let started = STARTED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    });
    format!(
        "{}-{started}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
