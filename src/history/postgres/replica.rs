//! Which replicas are running: each store that journals messages beats in
//! the `replicas` table, and the entries of one that stopped beating are
//! claimed by another ([`claim`]), so that a replica killed mid-turn
//! loses no message even if it never comes back.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Fail, Inner, PostgresHistory, intake_from};
use crate::history::Intake;
use crate::history::rows::INTAKE_COLUMNS;

/// How often a running replica says so.
const BEAT_EVERY: Duration = Duration::from_secs(10);

/// How long after its last beat a replica counts as stopped: three beats
/// missed, as a turn's lease (see `lease`) expires.
const GONE_AFTER: Duration = Duration::from_secs(30);

/// Stopped replicas' rows are dropped after a day: long after their
/// entries were claimed.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The advisory lock claims run under ("FRBC").
const CLAIM_LOCK: i64 = 0x4652_4243;

const BEAT: &str = "INSERT INTO replicas (id, seen_at) VALUES ($1, now())
     ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at";

const FORGET: &str = "DELETE FROM replicas WHERE seen_at < now() - make_interval(secs => $1)";

/// Makes this store a running replica, once: its first beat now (before
/// it journals anything, so that no other replica claims it), then one
/// every [`BEAT_EVERY`] while the store lives.
pub(super) async fn join(store: &PostgresHistory) -> Result<(), Fail> {
    let inner = &store.inner;
    if inner.beating.load(Ordering::Acquire) {
        return Ok(());
    }
    store.change(BEAT, &[&inner.owner]).await?;
    if !inner.beating.swap(true, Ordering::AcqRel) {
        tokio::spawn(beat(Arc::downgrade(inner)));
    }
    Ok(())
}

/// Beats until the store is dropped; a beat that fails is logged (three
/// in a row and other replicas take this one's messages over).
async fn beat(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(BEAT_EVERY).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let store = PostgresHistory { inner };
        let beaten = store.change(BEAT, &[&store.inner.owner]).await;
        if let Err(fail) = beaten {
            let error = store.error(fail);
            tracing::warn!(error = %error.chain(), "could not tell the database this replica runs; after 30 s other replicas recover its messages");
            continue;
        }
        let forget = FORGET_AFTER.as_secs_f64();
        if let Err(fail) = store.change(FORGET, &[&forget]).await {
            tracing::debug!(error = %store.error(fail).chain(), "could not forget stopped replicas");
        }
    }
}

/// Takes the unfinished entries of replicas that stopped (or of none: a
/// database written before replicas were tracked) for this store, oldest
/// first, under [`CLAIM_LOCK`]: two replicas claiming at once never both
/// get an entry.
pub(super) async fn claim(store: &PostgresHistory) -> Result<Vec<Intake>, Fail> {
    join(store).await?;
    let gone = GONE_AFTER.as_secs_f64();
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // One claimant at a time, each seeing what the one before committed:
    // a statement alone would judge a replica that just started (and
    // claimed) by a snapshot from before its first beat, and take its
    // entries too.
    tx.batch_execute(super::OUR_LOCKS_WAIT).await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
        .await?;
    let rows = super::select(
        &tx,
        &format!(
            "UPDATE journal SET owner = $1
             WHERE stage <> 'delivered' AND owner IS DISTINCT FROM $1
               AND NOT EXISTS (
                   SELECT 1 FROM replicas
                   WHERE replicas.id = journal.owner
                     AND replicas.seen_at > now() - make_interval(secs => $2))
             RETURNING {INTAKE_COLUMNS}, seq"
        ),
        &[&store.inner.owner, &gone],
    )
    .await?;
    tx.commit().await?;
    let mut claimed = rows
        .iter()
        .map(|row| Ok((row.try_get::<_, i64>(9)?, intake_from(row)?)))
        .collect::<Result<Vec<_>, Fail>>()?;
    claimed.sort_by_key(|(seq, _)| *seq);
    Ok(claimed.into_iter().map(|(_, intake)| intake).collect())
}
