//! Where conversations are kept between turns.
//!
//! The agent loads a conversation from its [`HistoryStore`] at the start of a
//! turn and appends each step as it completes: the user's message, then each
//! assistant message together with the results of its tool calls, in one
//! call, so a store never holds a tool call without its result.
//! [`MemoryHistory`] is the default store; `SqliteHistory` (feature
//! `sqlite`) keeps conversations in one file across restarts and crashes,
//! and images apart from the messages that show them, read back one by one
//! with [`HistoryStore::load_image`]; `PostgresHistory` (feature
//! `postgres`) does the same in a PostgreSQL database that several
//! replicas share.

mod context;
mod journal;
mod memory;
mod pending;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rows;
#[cfg(feature = "schedule")]
mod scheduled;
mod seconds;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::path::PathBuf;
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use context::{CharEstimate, Compaction, ContextPolicy, IMAGE_TOKENS, TokenEstimator};
pub(crate) use context::{shorten_tool_outputs, since_summary};
pub use journal::{Intake, Mark, Stage};
pub use memory::MemoryHistory;
pub use pending::{PendingCall, PendingTurn};
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::PostgresHistory;
#[cfg(feature = "schedule")]
#[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
pub use scheduled::{LaterMessage, Recurrence, Schedule};
pub(crate) use seconds::human_interval;
#[cfg(feature = "schedule")]
pub(crate) use seconds::whole_secs;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "schedule"))]
pub(crate) use seconds::{from_secs, to_secs};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::SqliteHistory;

use crate::message::{Image, Message, Part, Role};
use crate::policy::Approval;

/// A store of conversations, keyed by conversation id.
///
/// Implementations must be safe to share between tasks; the agent makes sure
/// only one turn of a conversation runs at a time.
pub trait HistoryStore: Send + Sync + std::fmt::Debug + 'static {
    /// The conversation's messages, oldest first; empty for a new conversation.
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>>;

    /// Appends messages atomically: all of them are stored, or none. The
    /// agent calls it once per step (an assistant message with the results
    /// of its tool calls), so a crash never separates the two.
    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>>;

    /// Forgets a conversation.
    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>>;

    /// The stored conversations, most recently updated first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<ConversationInfo>, HistoryError>>;

    /// Keeps the first `keep` messages of a conversation and forgets the
    /// rest, atomically: what `/undo` uses to take back the last turn. A
    /// `keep` of 0 forgets the conversation (as [`clear`](Self::clear)); one
    /// at or past its length changes nothing. Stores that can't say so with
    /// [`HistoryError::Unsupported`].
    fn truncate<'a>(
        &'a self,
        conversation: &'a str,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let _ = (conversation, keep);
        Box::pin(async {
            Err(HistoryError::Unsupported {
                operation: "truncate",
            })
        })
    }

    /// The bytes of an image this store keeps apart from its messages: the
    /// [`Image::Stored`] with this `id` that [`load`](Self::load) returned
    /// in their place, as an [`Image::Bytes`]. The agent calls it before a
    /// model call for each stored image it sends (see
    /// [`ImagePolicy`](crate::agent::ImagePolicy)); when it fails, the model
    /// gets the image's description and the turn goes on. Stores that keep
    /// images inside their messages (such as [`MemoryHistory`]) never hand
    /// out a stored image, and answer [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// [`HistoryError::ImageNotFound`] for an id the store doesn't hold,
    /// [`HistoryError::Unsupported`] by default.
    fn load_image<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Image, HistoryError>> {
        let _ = id;
        Box::pin(async {
            Err(HistoryError::Unsupported {
                operation: "load_image",
            })
        })
    }

    /// The conversation's "always allow" approvals
    /// ([`Decision::Always`](crate::confirm::Decision::Always)), oldest
    /// first. By default, none: a store that can't keep them forgets them,
    /// and the user is asked again.
    ///
    /// # Errors
    /// When the store fails.
    fn approvals<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Approval>, HistoryError>> {
        let _ = conversation;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Keeps an "always allow" approval with the conversation. By default,
    /// [`HistoryError::Unsupported`]: the call it was given for still runs.
    ///
    /// # Errors
    /// When the store fails or keeps no approvals.
    fn add_approval<'a>(
        &'a self,
        conversation: &'a str,
        approval: &'a Approval,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let _ = (conversation, approval);
        Box::pin(async {
            Err(HistoryError::Unsupported {
                operation: "add_approval",
            })
        })
    }

    /// The conversation's turn waiting for decisions, if any. By default,
    /// none.
    ///
    /// # Errors
    /// When the store fails.
    fn pending<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<PendingTurn>, HistoryError>> {
        let _ = conversation;
        Box::pin(async { Ok(None) })
    }

    /// Keeps (`Some`) or forgets (`None`) the conversation's turn waiting
    /// for decisions. By default, [`HistoryError::Unsupported`]: deferring
    /// needs a store that keeps it.
    ///
    /// # Errors
    /// When the store fails or keeps no pending turns.
    fn set_pending<'a>(
        &'a self,
        conversation: &'a str,
        pending: Option<&'a PendingTurn>,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let _ = (conversation, pending);
        Box::pin(async {
            Err(HistoryError::Unsupported {
                operation: "set_pending",
            })
        })
    }

    /// Appends the decided turn's step (the calls' message and every
    /// result) and forgets the pending turn, together: a store that can
    /// should do both in one transaction, so a crash between them neither
    /// loses the results nor leaves the turn pending after they were
    /// stored. By default, [`append`](Self::append) then
    /// [`set_pending`](Self::set_pending).
    ///
    /// # Errors
    /// When the store fails.
    fn settle_pending<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        Box::pin(async move {
            self.append(conversation, messages).await?;
            self.set_pending(conversation, None).await
        })
    }

    /// Messages matching `query`, best first, at most `limit`. Stores that
    /// can't search say so with [`HistoryError::Unsupported`].
    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, HistoryError>> {
        let _ = (query, limit);
        Box::pin(async {
            Err(HistoryError::Unsupported {
                operation: "search",
            })
        })
    }

    /// Keeps a scheduled prompt and returns the id the store gave it (the
    /// schedule's own `id` is ignored). Ids are never reused, so a stale id
    /// can't cancel a newer schedule. By default,
    /// [`HistoryError::Unsupported`]: the store keeps no schedules.
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn add_schedule<'a>(
        &'a self,
        schedule: &'a Schedule,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let _ = schedule;
        unsupported("add_schedule")
    }

    /// The schedules of `conversation`, or of every conversation (`None`),
    /// oldest first. By default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn schedules<'a>(
        &'a self,
        conversation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Schedule>, HistoryError>> {
        let _ = conversation;
        unsupported("schedules")
    }

    /// Forgets schedule `id`; returns whether it was there. By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn remove_schedule(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let _ = id;
        unsupported("remove_schedule")
    }

    /// The schedules due at `now` (their next due time at or before it),
    /// earliest first. The scheduler calls it when it wakes, then
    /// [`claim_schedule`](Self::claim_schedule)s each before running it. By
    /// default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn due_schedules(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<Schedule>, HistoryError>> {
        let _ = now;
        unsupported("due_schedules")
    }

    /// Claims a due time of schedule `id`: moves its next due time from
    /// `from` to `to`, atomically, only if it still is `from` (a
    /// compare-and-set), and says whether it did. Whoever claims a due time
    /// runs it; anyone else (another scheduler on the same store, or this
    /// one after a restart) sees it moved and leaves it, so a due time runs
    /// at most once. `None` is no due time: a claimed run with no next. By
    /// default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn claim_schedule(
        &self,
        id: u64,
        from: Option<SystemTime>,
        to: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let _ = (id, from, to);
        unsupported("claim_schedule")
    }

    /// Records how a run of schedule `id` went: when it ran, why it failed
    /// (`None`: it succeeded), and the failed attempts at the run now due
    /// (0 once it succeeded or was given up). Nothing happens for an id the
    /// store doesn't hold (cancelled meanwhile). By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no schedules.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn record_schedule_run<'a>(
        &'a self,
        id: u64,
        at: SystemTime,
        error: Option<&'a str>,
        attempts: u32,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let _ = (id, at, error, attempts);
        unsupported("record_schedule_run")
    }

    /// Keeps a message to send later and returns the id the store gave it.
    /// By default, [`HistoryError::Unsupported`]: later messages wait in
    /// memory instead, and a restart loses them.
    ///
    /// # Errors
    /// When the store fails or keeps no later messages.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn add_later_message<'a>(
        &'a self,
        message: &'a LaterMessage,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let _ = message;
        unsupported("add_later_message")
    }

    /// The later messages due at `now`, earliest first. By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no later messages.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn due_later_messages(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<LaterMessage>, HistoryError>> {
        let _ = now;
        unsupported("due_later_messages")
    }

    /// Takes later message `id` out of the store to send it; returns
    /// whether it was there. Whoever takes it sends it, so it is sent at
    /// most once. By default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no later messages.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn take_later_message(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let _ = id;
        unsupported("take_later_message")
    }

    /// The earliest time a schedule or a later message is due, if any: when
    /// the scheduler wakes next. By default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps neither.
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    fn next_due(&self) -> BoxFuture<'_, Result<Option<SystemTime>, HistoryError>> {
        unsupported("next_due")
    }

    /// Journals a message from outside before its turn runs (see
    /// [`Intake`]) and says whether it is new: false when a message with
    /// its id is journaled already, at any stage (a platform's redelivery:
    /// don't run it again). By default, [`HistoryError::Unsupported`]: the
    /// front end runs messages unjournaled, and a crash may lose one.
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn receive<'a>(&'a self, intake: &'a Intake) -> BoxFuture<'a, Result<bool, HistoryError>> {
        let _ = intake;
        unsupported("receive")
    }

    /// The journaled message `id`, if any. By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn intake<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Intake>, HistoryError>> {
        let _ = id;
        unsupported("intake")
    }

    /// The journaled messages not yet [`Stage::Delivered`], in the order
    /// they were received: what to recover after a crash. By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        unsupported("unfinished")
    }

    /// Takes over the journaled messages no running process is answering,
    /// for the caller to recover, in the order they were received: those
    /// received by processes that have stopped. Each is given to one
    /// caller; what this store received itself is never given back.
    ///
    /// A store only one process uses at a time (a SQLite file) gives what
    /// earlier processes left, and then nothing; a store replicas share
    /// (PostgreSQL) also gives, later, what a replica that stopped left. A
    /// bot calls it at start, then every little while
    /// ([`serve`](crate::bot::serve) does). By default,
    /// [`HistoryError::Unsupported`]: [`serve`](crate::bot::serve)
    /// recovers [`unfinished`](Self::unfinished) at start instead.
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn claim_unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        unsupported("claim_unfinished")
    }

    /// Records how far journaled message `id` got. Nothing happens for an
    /// id the store doesn't hold. By default, [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn mark<'a>(&'a self, id: &'a str, mark: &'a Mark) -> BoxFuture<'a, Result<(), HistoryError>> {
        let _ = (id, mark);
        unsupported("mark")
    }

    /// Appends `messages` and marks journaled message `id`, together: a
    /// store that can should do both in one transaction, so that after a
    /// crash the journal says exactly what the history holds. By default,
    /// [`append`](Self::append) then [`mark`](Self::mark), whose failure is
    /// logged (the messages are stored).
    ///
    /// # Errors
    /// When the store fails to append.
    fn append_marked<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
        id: &'a str,
        mark: &'a Mark,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        Box::pin(async move {
            self.append(conversation, messages).await?;
            if let Err(error) = self.mark(id, mark).await {
                tracing::warn!(intake = %id, error = %error.chain(), "could not mark a journaled message");
            }
            Ok(())
        })
    }

    /// The ids of journaled messages whose turns in `conversation` started
    /// and are not answered. Beside the running turn's own, these are turns
    /// a stopped process left half-done (the user's message stored, no
    /// answer), or that a replica is recovering: another turn must not run
    /// beside them, or it would answer the wrong message. A new turn
    /// holding the conversation's [`lock_turn`](Self::lock_turn) waits
    /// until there are none but its own (logged; at most 15 minutes); only
    /// a store that gives such a lock is asked. By default, none: one
    /// process uses the store, and it recovers such turns before new ones.
    ///
    /// # Errors
    /// When the store fails.
    fn started_in<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, HistoryError>> {
        let _ = conversation;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Takes the conversation's turn lock across processes, for stores that
    /// several processes share (replicas on one PostgreSQL): the agent
    /// takes it after its own, in-process lock, before a turn loads the
    /// conversation, and drops the guard when the turn ends. Waiting is the
    /// store's to bound: it should fail with a message rather than wait
    /// forever. By default, `None`: one process uses the store, and the
    /// agent's own lock is enough.
    ///
    /// # Errors
    /// When the lock can't be had (the store failed, or the wait was too
    /// long); the turn fails with it.
    fn lock_turn<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<TurnGuard>, HistoryError>> {
        let _ = conversation;
        Box::pin(async { Ok(None) })
    }

    /// Forgets the delivered messages journaled before `before` and says
    /// how many. Keep them as long as the platform may deliver a message
    /// again (a day is plenty): a forgotten id would run again. By default,
    /// [`HistoryError::Unsupported`].
    ///
    /// # Errors
    /// When the store fails or keeps no journal.
    fn forget_delivered(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, HistoryError>> {
        let _ = before;
        unsupported("forget_delivered")
    }
}

/// What [`HistoryStore::lock_turn`] holds while a turn runs: dropping it
/// lets the conversation's next turn, in any process, begin.
pub type TurnGuard = Box<dyn Send + Sync + 'static>;

/// The answer of a store that can't do `operation`.
fn unsupported<T: Send + 'static>(
    operation: &'static str,
) -> BoxFuture<'static, Result<T, HistoryError>> {
    Box::pin(async move { Err(HistoryError::Unsupported { operation }) })
}

/// What a store knows about a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConversationInfo {
    /// The conversation's id.
    pub id: String,
    /// The start of its first user message.
    pub title: Option<String>,
    /// When its first message was stored, in seconds since the Unix epoch.
    pub created: i64,
    /// When its last message was stored, in seconds since the Unix epoch.
    pub updated: i64,
    /// How many messages it holds.
    pub messages: usize,
}

/// One message found by [`HistoryStore::search`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SearchHit {
    /// The conversation it belongs to.
    pub conversation: String,
    /// Its position in the conversation, from 0.
    pub index: usize,
    /// Who wrote it.
    pub role: Role,
    /// The matching passage, matches between `[` and `]`.
    pub snippet: String,
}

/// Why a history store failed. Messages name the file and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The file exists but is not a ferrobot history database; it was not
    /// touched.
    #[error("{} is not a ferrobot history database ({why}); it was left untouched: choose another path or move the file away", path.display())]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// The file was written by a newer ferrobot.
    #[error("{} has history schema version {found}, and this ferrobot reads up to {supported}; upgrade ferrobot, or use another file", path.display())]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The file or its directory can't be written.
    #[error("{} can't be written (read-only file or directory); make it writable, or choose another path", path.display())]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// The disk is full; nothing of the failed write was stored.
    #[error("the disk holding {} is full; nothing of this write was stored: free some space", path.display())]
    DiskFull {
        /// The file.
        path: PathBuf,
    },
    /// Another program held the file (or, in PostgreSQL, a table) locked
    /// for longer than the store waits (5 s); nothing of the failed write
    /// was stored.
    #[error("{} is locked by another program (another bot or a tool writing to it) and stayed locked; nothing of this write was stored: stop the other program, or give each its own file or database", path.display())]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// A stored message could not be read back.
    #[error("message {index} of conversation `{conversation}` could not be read: {message}")]
    Corrupt {
        /// The conversation.
        conversation: String,
        /// The message's position.
        index: usize,
        /// What was wrong.
        message: String,
    },
    /// The store holds no image with this id (it was deleted with the last
    /// message that showed it, or the id is of another store).
    #[error("no image `{id}` in this history store")]
    ImageNotFound {
        /// The id asked for.
        id: String,
    },
    /// This store can't do that.
    #[error("this history store does not support {operation}")]
    Unsupported {
        /// The operation, e.g. `search`.
        operation: &'static str,
    },
    /// The storage backend failed.
    #[error("storage failed: {message}")]
    Storage {
        /// What went wrong, and what to do about it.
        message: String,
        /// The backend's error.
        #[source]
        source: Option<crate::BoxError>,
    },
}

impl HistoryError {
    /// The error with every source, joined by ": ".
    pub fn chain(&self) -> String {
        crate::error::chain(self)
    }
}

/// The text a store indexes for search: text, refusals and tool results.
pub(crate) fn searchable_text(message: &Message) -> String {
    let mut text = String::new();
    for part in &message.parts {
        let piece = match part {
            Part::Text { text } | Part::Refusal { text } => text.as_str(),
            Part::ToolResult(result) => result.content.as_str(),
            _ => continue,
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(piece);
    }
    text
}

/// A title from the first user message: its first line, at most 80 characters.
pub(crate) fn title_of(messages: &[Message]) -> Option<String> {
    let first = messages.iter().find(|m| m.role == Role::User)?.text();
    let line = first.lines().next().unwrap_or_default().trim();
    if line.is_empty() {
        return None;
    }
    Some(match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    })
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
