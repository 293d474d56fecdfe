//! Conversations in one SQLite file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction, params};

use super::rows::{
    INTAKE_COLUMNS, IntakeRow, image_key, message_from, pending_from, role_from, role_name, storage,
};
#[cfg(feature = "schedule")]
use super::rows::{SCHEDULE_COLUMNS, ScheduleRow};
use super::{
    ConversationInfo, HistoryError, HistoryStore, Intake, Mark, PendingTurn, SearchHit, now,
    searchable_text, title_of, to_secs,
};
#[cfg(feature = "schedule")]
use super::{LaterMessage, Schedule, from_secs};
use crate::message::{Image, Message};
use crate::policy::Approval;

/// Marks a SQLite file as ferrobot's (`PRAGMA application_id`, "FRBT").
const APPLICATION_ID: i64 = 0x4652_4254;

/// A migration brings the schema from the previous version to its own.
type Migration = fn(&Transaction<'_>) -> rusqlite::Result<()>;

/// The schema's history; version N is `MIGRATIONS[N - 1]`. Never edit a
/// released entry: add one.
const MIGRATIONS: [Migration; 7] = [
    v1_tables,
    v2_search,
    v3_images,
    v4_decisions,
    v5_schedules,
    v6_journal,
    v7_journal_owner,
];

/// Version 7: which store instance (process) journaled each entry, so
/// that [`claim_unfinished`](HistoryStore::claim_unfinished) gives only
/// what earlier processes left. Entries from before have none: theirs.
fn v7_journal_owner(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE journal ADD COLUMN owner TEXT;")
}

/// Version 6: the turn journal, one row per message from outside, in the
/// order received (`seq`); `calling` is the serde form of a [`Message`].
/// It refers to no conversation: an entry outlives a cleared one.
fn v6_journal(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE journal (
             seq INTEGER PRIMARY KEY AUTOINCREMENT,
             id TEXT NOT NULL UNIQUE,
             chat TEXT NOT NULL,
             payload TEXT NOT NULL,
             stage TEXT NOT NULL,
             conversation TEXT,
             calling TEXT,
             reply TEXT,
             answer TEXT,
             received_at INTEGER NOT NULL,
             updated_at INTEGER NOT NULL
         );
         CREATE INDEX journal_unfinished ON journal (seq) WHERE stage <> 'delivered';",
    )
}

/// Version 5: scheduled prompts and later messages, times in seconds since
/// the Unix epoch, each recurrence the serde form of its type. Neither
/// refers to the conversations table: a schedule belongs to its chat, and
/// outlives a cleared conversation. `AUTOINCREMENT` so that an id is never
/// given twice, and a stale id never names a newer schedule.
fn v5_schedules(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE schedules (
             id INTEGER PRIMARY KEY AUTOINCREMENT,
             conversation TEXT NOT NULL,
             prompt TEXT NOT NULL,
             recurrence TEXT NOT NULL,
             next_due INTEGER,
             created_at INTEGER NOT NULL,
             last_run INTEGER,
             last_error TEXT,
             attempts INTEGER NOT NULL DEFAULT 0
         );
         CREATE INDEX schedules_conversation ON schedules (conversation);
         CREATE INDEX schedules_next_due ON schedules (next_due) WHERE next_due IS NOT NULL;
         CREATE TABLE later_messages (
             id INTEGER PRIMARY KEY AUTOINCREMENT,
             conversation TEXT NOT NULL,
             text TEXT NOT NULL,
             due INTEGER NOT NULL,
             created_at INTEGER NOT NULL
         );
         CREATE INDEX later_messages_due ON later_messages (due);",
    )
}

/// Version 4: what users decided about tool calls: "always allow"
/// approvals, and a turn waiting for decisions (at most one per
/// conversation), each the serde form of its type. Both go with their
/// conversation.
fn v4_decisions(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE approvals (
             id INTEGER PRIMARY KEY,
             conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
             body TEXT NOT NULL,
             created_at INTEGER NOT NULL
         );
         CREATE INDEX approvals_conversation ON approvals (conversation);
         CREATE TABLE pending_turns (
             conversation TEXT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
             body TEXT NOT NULL,
             created_at INTEGER NOT NULL
         );",
    )
}

/// Version 1: conversations and their messages, each message the serde form
/// of [`Message`] with its position.
fn v1_tables(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE conversations (
             id TEXT PRIMARY KEY,
             title TEXT,
             created_at INTEGER NOT NULL,
             updated_at INTEGER NOT NULL
         );
         CREATE TABLE messages (
             id INTEGER PRIMARY KEY,
             conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
             seq INTEGER NOT NULL,
             role TEXT NOT NULL,
             body TEXT NOT NULL,
             created_at INTEGER NOT NULL,
             UNIQUE (conversation, seq)
         );",
    )
}

/// Version 2: full-text search over each message's text and tool results,
/// filled in for the messages already stored.
fn v2_search(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE messages ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
         CREATE VIRTUAL TABLE messages_fts USING fts5(
             search_text, content = 'messages', content_rowid = 'id'
         );
         CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
             INSERT INTO messages_fts (rowid, search_text) VALUES (new.id, new.search_text);
         END;
         CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
             INSERT INTO messages_fts (messages_fts, rowid, search_text)
                 VALUES ('delete', old.id, old.search_text);
         END;",
    )?;
    let rows: Vec<(i64, String)> = {
        let mut select = tx.prepare("SELECT id, body FROM messages")?;
        select
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut update = tx.prepare("UPDATE messages SET search_text = ?1 WHERE id = ?2")?;
    for (id, body) in rows {
        // A body this version can't read is left unindexed, not lost.
        if let Ok(message) = serde_json::from_str::<Message>(&body) {
            update.execute(params![searchable_text(&message), id])?;
        }
    }
    tx.execute(
        "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
        [],
    )?;
    Ok(())
}

/// Version 3: images kept once each, by content, apart from the messages
/// that show them, whose rows name them instead (`Image::Stored`);
/// `message_images` says which message shows which image, so the last
/// message to go takes its images with it. Images already stored inside
/// messages move out.
fn v3_images(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE images (
             id TEXT PRIMARY KEY,
             media_type TEXT NOT NULL,
             size INTEGER NOT NULL,
             data BLOB NOT NULL,
             created_at INTEGER NOT NULL
         );
         CREATE TABLE message_images (
             message INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
             image TEXT NOT NULL REFERENCES images(id),
             PRIMARY KEY (message, image)
         ) WITHOUT ROWID;
         CREATE INDEX message_images_image ON message_images (image);",
    )?;
    let rows: Vec<(i64, String)> = {
        // Only rows that can hold an image's bytes are read.
        let mut select = tx.prepare(
            "SELECT id, body FROM messages WHERE instr(body, '\"source\":\"bytes\"') > 0",
        )?;
        select
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let time = now();
    for (row, body) in rows {
        // A body this version can't read is left as it is, not lost.
        let Ok(mut message) = serde_json::from_str::<Message>(&body) else {
            continue;
        };
        let images = store_images(tx, &mut message, time)?;
        let body = serde_json::to_string(&message)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        tx.execute(
            "UPDATE messages SET body = ?1 WHERE id = ?2",
            params![body, row],
        )?;
        link_images(tx, row, &images)?;
    }
    Ok(())
}

/// Stores an image once: the id of the row holding these bytes of this
/// media type, inserted if no row does.
fn put_image(
    tx: &Transaction<'_>,
    media_type: &str,
    data: &[u8],
    time: i64,
) -> rusqlite::Result<String> {
    let key = image_key(media_type, data);
    let size = i64::try_from(data.len()).unwrap_or(i64::MAX);
    let mut same = tx.prepare_cached(
        "SELECT media_type = ?2 AND size = ?3 AND data = ?4 FROM images WHERE id = ?1",
    )?;
    let mut probe: u64 = 0;
    loop {
        let id = if probe == 0 {
            key.clone()
        } else {
            format!("{key}-{probe}")
        };
        match same
            .query_row(params![id, media_type, size, data], |r| r.get::<_, bool>(0))
            .optional()?
        {
            Some(true) => return Ok(id),
            // Another image with the same key: try the next.
            Some(false) => probe += 1,
            None => {
                tx.prepare_cached(
                    "INSERT INTO images (id, media_type, size, data, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![id, media_type, size, data, time])?;
                return Ok(id);
            }
        }
    }
}

/// Moves the bytes of a message's images (its own and its tool results')
/// into the images table, each `Image::Bytes` becoming the `Image::Stored`
/// that names its row. Returns the ids of the rows it now shows, an image
/// it already named as stored included.
fn store_images(
    tx: &Transaction<'_>,
    message: &mut Message,
    time: i64,
) -> rusqlite::Result<Vec<String>> {
    let mut ids = Vec::new();
    for image in message.images_mut() {
        match image {
            Image::Bytes { media_type, data } => {
                let id = put_image(tx, media_type, data, time)?;
                let stored = Image::Stored {
                    id: id.clone(),
                    media_type: std::mem::take(media_type),
                    size: data.len() as u64,
                };
                *image = stored;
                ids.push(id);
            }
            Image::Stored { id, .. } => ids.push(id.clone()),
            Image::Url { .. } => {}
        }
    }
    Ok(ids)
}

/// Records that message row `message` shows these images. An id this store
/// doesn't hold (a stored image of another store) is not recorded.
fn link_images(tx: &Transaction<'_>, message: i64, images: &[String]) -> rusqlite::Result<()> {
    let mut link = tx.prepare_cached(
        "INSERT OR IGNORE INTO message_images (message, image)
         SELECT ?1, id FROM images WHERE id = ?2",
    )?;
    for image in images {
        link.execute(params![message, image])?;
    }
    Ok(())
}

/// The images shown by the messages of `conversation` from `seq` on: those
/// that may have no message left once these go.
fn images_from(
    tx: &Transaction<'_>,
    conversation: &str,
    seq: i64,
) -> rusqlite::Result<Vec<String>> {
    let mut select = tx.prepare_cached(
        "SELECT DISTINCT mi.image FROM message_images mi JOIN messages m ON m.id = mi.message
         WHERE m.conversation = ?1 AND m.seq >= ?2",
    )?;
    select
        .query_map(params![conversation, seq], |row| row.get(0))?
        .collect()
}

/// Deletes those of `images` no message shows any more, in the transaction
/// that deleted the messages: an image lives exactly as long as the last
/// message showing it, in any conversation.
fn drop_unshown(tx: &Transaction<'_>, images: &[String]) -> rusqlite::Result<()> {
    let mut delete = tx.prepare_cached(
        "DELETE FROM images WHERE id = ?1
         AND NOT EXISTS (SELECT 1 FROM message_images WHERE image = ?1)",
    )?;
    for image in images {
        delete.execute([image])?;
    }
    Ok(())
}

/// Conversations in one SQLite file, surviving restarts and crashes.
///
/// The file is in WAL mode; each [`append`](HistoryStore::append) is one
/// transaction, so a step's assistant message and its tool results are stored
/// together or not at all. The schema is versioned and migrated on open.
///
/// Images are stored once each, by content, apart from the messages: a
/// message's row names its images ([`Image::Stored`]), so
/// [`load`](HistoryStore::load) reads no image bytes, and
/// [`load_image`](HistoryStore::load_image) reads one image's. An image
/// goes with the last message showing it ([`clear`](HistoryStore::clear),
/// [`truncate`](HistoryStore::truncate)), in the same transaction.
/// Opening a file that isn't a ferrobot database, or one written by a newer
/// ferrobot, fails without touching it. SQLite runs on the store's own
/// thread, never on the async ones.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
/// use ferrobot::{Message, history::{HistoryStore, SqliteHistory}};
/// let dir = std::env::temp_dir().join(format!("ferrobot-doc-{}", std::process::id()));
/// let store = SqliteHistory::open(dir.join("history.db")).await?;
/// store.append("alice", &[Message::user("where are the backups?")]).await?;
/// let hits = store.search("backups", 10).await?;
/// assert_eq!(hits[0].snippet, "where are the [backups]?");
/// # std::fs::remove_dir_all(dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteHistory {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// The connection's own thread takes each job in turn; once the store
    /// is dropped it finishes the jobs already sent, then ends, closing the
    /// connection. One thread, not a
    /// blocking-pool thread per call waiting on a lock: 32 turns storing at
    /// once cost 32 threads that way.
    jobs: std::sync::mpsc::Sender<Job>,
    /// This instance's name in the journal's `owner` column.
    owner: String,
    /// The connection's thread, joined by the last handle's
    /// [`close`](SqliteHistory::close).
    thread: std::thread::JoinHandle<()>,
}

/// Work for the connection's thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Starts the thread that owns `connection` and runs the jobs sent to it,
/// until every sender is gone.
fn connection_thread(
    mut connection: Connection,
) -> std::io::Result<(std::sync::mpsc::Sender<Job>, std::thread::JoinHandle<()>)> {
    let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
    let thread = std::thread::Builder::new()
        .name("ferrobot-sqlite".into())
        .spawn(move || {
            for job in inbox {
                // A job that panics drops its answer, so its caller gets an
                // error; the connection serves the next.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    job(&mut connection);
                }));
            }
        })?;
    Ok((jobs, thread))
}

impl std::fmt::Debug for SqliteHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteHistory")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteHistory {
    /// Opens (or creates) the history file at `path`, creating its directory
    /// if needed, and brings its schema up to date.
    ///
    /// # Errors
    /// [`HistoryError::NotOurs`] for a file that isn't a ferrobot database,
    /// [`HistoryError::NewerSchema`] for one written by a newer ferrobot,
    /// [`HistoryError::ReadOnly`] when it can't be written; never touching
    /// the file in those cases.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, HistoryError> {
        let path = path.as_ref().to_owned();
        tokio::task::spawn_blocking(move || Self::open_blocking(path))
            .await
            .map_err(|e| storage("the history store's open task failed", e))?
    }

    /// The file this store writes.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn open_blocking(path: PathBuf) -> Result<Self, HistoryError> {
        check_header(&path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
                    HistoryError::ReadOnly { path: path.clone() }
                }
                _ => storage(
                    &format!("could not create the directory of {}", path.display()),
                    e,
                ),
            })?;
        }
        let fail = |e: rusqlite::Error| sqlite_error(&path, e);
        let mut connection = Connection::open(&path).map_err(fail)?;
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(fail)?;
        let application_id: i64 = connection
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(fail)?;
        let version = if application_id == APPLICATION_ID {
            connection
                .query_row("SELECT max(version) FROM ferrobot_schema", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .map_err(fail)?
                .unwrap_or(0)
        } else {
            let tables: i64 = connection
                .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
                .map_err(fail)?;
            if application_id != 0 || tables > 0 {
                return Err(HistoryError::NotOurs {
                    path,
                    why: "it is an SQLite database of another application".into(),
                });
            }
            0
        };
        let latest = MIGRATIONS.len() as i64;
        if version > latest {
            return Err(HistoryError::NewerSchema {
                path,
                found: version,
                supported: latest,
            });
        }
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
            )
            .map_err(fail)?;
        if version < latest {
            migrate(&mut connection, version).map_err(fail)?;
        }
        let (jobs, thread) = connection_thread(connection)
            .map_err(|e| storage("could not start the history store's thread", e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                jobs,
                owner: super::journal::new_owner(),
                thread,
            }),
        })
    }

    /// Closes the store: waits for everything sent to it before, folds the
    /// write-ahead log into the file (a checkpoint), and, from the store's
    /// last handle, closes the file's connection, so the file can be
    /// copied, moved or deleted whole. `Ok(true)` when the connection is
    /// closed; `Ok(false)` when other handles keep it open (the writes are
    /// in the file all the same): an [`Agent`](crate::Agent) built with a
    /// clone of the store holds one, as does a running `Scheduler`; drop
    /// those, then close. (Dropping every handle closes the connection too,
    /// without waiting.)
    ///
    /// # Errors
    /// [`HistoryError::Storage`] when another connection to the file
    /// (another program, or another `open` of the same file) kept the log
    /// from being folded in (the writes are safe in the log), or when the
    /// store's thread has stopped.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
    /// use ferrobot::{Message, history::{HistoryStore, SqliteHistory}};
    /// let dir = std::env::temp_dir().join(format!("ferrobot-close-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// let store = SqliteHistory::open(dir.join("history.db")).await?;
    /// store.append("alice", &[Message::user("hello")]).await?;
    /// assert!(store.close().await?, "the last handle closes the file");
    /// # std::fs::remove_dir_all(dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn close(self) -> Result<bool, HistoryError> {
        // After every job sent before it; a reader elsewhere holding the
        // log makes it report busy rather than wait.
        let path = self.inner.path.clone();
        let busy: i64 = self
            .sql(|c| c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0)))
            .await?;
        if busy != 0 {
            return Err(HistoryError::Storage {
                message: format!(
                    "could not fold the write-ahead log of {} into the file: another \
                     program is reading it; every write is safe in the log: close the \
                     store again once that program is done",
                    path.display()
                ),
                source: None,
            });
        }
        // One handle of several closing at once gets the connection.
        let Some(inner) = Arc::into_inner(self.inner) else {
            return Ok(false);
        };
        let Inner { jobs, thread, .. } = inner;
        drop(jobs);
        tokio::task::spawn_blocking(move || thread.join())
            .await
            .map_err(|e| storage("could not wait for the history store's thread", e))?
            .map_err(|_| HistoryError::Storage {
                message: "the history store's thread failed while closing".into(),
                source: None,
            })?;
        Ok(true)
    }

    /// Appends `messages` in one transaction, with what `also` says: with
    /// [`Also::ForgetPending`], a crash leaves either the turn pending and
    /// no results, or the results and nothing pending; with [`Also::Mark`],
    /// the journal says exactly what the history holds.
    fn store_messages(
        &self,
        conversation: &str,
        messages: &[Message],
        also: Also,
    ) -> BoxFuture<'static, Result<(), HistoryError>> {
        // Encoded on the store's thread, in the transaction: a message's
        // image ids come from the images table (see `put_image`). The copy
        // is cheap, image bytes being shared.
        let messages = messages.to_vec();
        let title = title_of(&messages);
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let tx = connection
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(fail)?;
            append_in(&tx, &conversation, messages, title.as_deref()).map_err(fail)?;
            match also {
                Also::Nothing => {}
                Also::ForgetPending => set_pending_in(&tx, &conversation, None).map_err(fail)?,
                Also::Mark(id, mark) => mark_in(&tx, &id, &mark).map_err(fail)?,
            }
            tx.commit().map_err(fail)
        })
    }

    /// Runs `work` with the connection on its thread; its SQLite
    /// error becomes [`sqlite_error`]'s, naming this store's file.
    fn sql<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, HistoryError>> {
        let path = self.inner.path.clone();
        self.run(move |connection| work(connection).map_err(|e| sqlite_error(&path, e)))
    }

    /// Runs `work` with the connection on its thread, after the work sent
    /// before it.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, HistoryError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, HistoryError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let (answer, answered) = tokio::sync::oneshot::channel();
            let job: Job = Box::new(move |connection| {
                let _ = answer.send(work(connection));
            });
            inner.jobs.send(job).map_err(|_| HistoryError::Storage {
                message: "the history store's thread has stopped".into(),
                source: None,
            })?;
            answered
                .await
                .map_err(|e| storage("a history store task failed (it panicked)", e))?
        })
    }
}

/// Brings a database at `from` up to the latest version, in one transaction.
fn migrate(connection: &mut Connection, from: i64) -> rusqlite::Result<()> {
    let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if from == 0 {
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID};
             CREATE TABLE ferrobot_schema (version INTEGER NOT NULL, applied_at INTEGER NOT NULL);"
        ))?;
    }
    for (version, migration) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        migration(&tx)?;
        tx.execute(
            "INSERT INTO ferrobot_schema (version, applied_at) VALUES (?1, ?2)",
            params![version as i64 + 1, now()],
        )?;
    }
    tx.commit()
}

/// A non-empty file must start with SQLite's header; anything else is left alone.
fn check_header(path: &Path) -> Result<(), HistoryError> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut header = [0u8; 16];
    match file.read(&mut header) {
        Ok(0) => Ok(()),
        Ok(n) if n == 16 && &header == b"SQLite format 3\0" => Ok(()),
        _ => Err(HistoryError::NotOurs {
            path: path.to_owned(),
            why: "it is not an SQLite file".into(),
        }),
    }
}

/// SQLite's error, in the terms of what the user can do about it.
fn sqlite_error(path: &Path, error: rusqlite::Error) -> HistoryError {
    let path = path.to_owned();
    match error.sqlite_error_code() {
        Some(ErrorCode::ReadOnly) => HistoryError::ReadOnly { path },
        Some(ErrorCode::DiskFull) => HistoryError::DiskFull { path },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => HistoryError::Busy { path },
        Some(ErrorCode::NotADatabase) => HistoryError::NotOurs {
            path,
            why: "SQLite can't read it as a database".into(),
        },
        Some(ErrorCode::CannotOpen) => {
            let read_only = path
                .parent()
                .and_then(|d| {
                    std::fs::metadata(if d.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        d
                    })
                    .ok()
                })
                .is_some_and(|m| m.permissions().readonly());
            if read_only {
                HistoryError::ReadOnly { path }
            } else {
                storage(
                    &format!(
                        "could not open {}: check that its directory exists and is writable",
                        path.display()
                    ),
                    error,
                )
            }
        }
        _ => storage(&format!("SQLite failed on {}", path.display()), error),
    }
}

/// Each word of a search as a quoted FTS5 term, so punctuation such as
/// `C++` or `"` can't turn into query syntax errors.
fn fts_query(query: &str) -> String {
    query
        .split_whitespace()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What else the transaction that stores messages does.
enum Also {
    Nothing,
    /// Forgets the conversation's pending turn.
    ForgetPending,
    /// Marks a journaled message.
    Mark(String, Mark),
}

/// Creates the conversation's row if it has none, with `title`; else
/// marks it updated (and titles it if it had no title).
fn ensure_conversation(
    tx: &Transaction<'_>,
    conversation: &str,
    title: Option<&str>,
    time: i64,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
         ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
             title = coalesce(conversations.title, excluded.title)",
    )?
    .execute(params![conversation, title, time])?;
    Ok(())
}

/// Appends `messages` to the conversation inside `tx`, their images kept
/// apart (see `put_image`).
fn append_in(
    tx: &Transaction<'_>,
    conversation: &str,
    messages: Vec<Message>,
    title: Option<&str>,
) -> rusqlite::Result<()> {
    let time = now();
    ensure_conversation(tx, conversation, title, time)?;
    let next: i64 = tx.query_row(
        "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE conversation = ?1",
        [conversation],
        |r| r.get(0),
    )?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (conversation, seq, role, body, search_text, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (offset, mut message) in messages.into_iter().enumerate() {
        let images = store_images(tx, &mut message, time)?;
        let body = serde_json::to_string(&message)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        let role = role_name(message.role);
        let text = searchable_text(&message);
        insert.execute(params![
            conversation,
            next + offset as i64,
            role,
            body,
            text,
            time
        ])?;
        link_images(tx, tx.last_insert_rowid(), &images)?;
    }
    Ok(())
}

/// Keeps (`Some`, the pending turn's serde form) or forgets the
/// conversation's pending turn inside `tx`.
fn set_pending_in(
    tx: &Transaction<'_>,
    conversation: &str,
    body: Option<&str>,
) -> rusqlite::Result<()> {
    match body {
        Some(body) => {
            let time = now();
            ensure_conversation(tx, conversation, None, time)?;
            tx.execute(
                "INSERT INTO pending_turns (conversation, body, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation) DO UPDATE SET body = excluded.body,
                     created_at = excluded.created_at",
                params![conversation, body, time],
            )?;
        }
        None => {
            tx.execute(
                "DELETE FROM pending_turns WHERE conversation = ?1",
                [conversation],
            )?;
        }
    }
    Ok(())
}

/// A schedule from a row of [`SCHEDULE_COLUMNS`].
#[cfg(feature = "schedule")]
fn schedule_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<Schedule> {
    ScheduleRow {
        id: row.get(0)?,
        conversation: row.get(1)?,
        prompt: row.get(2)?,
        recurrence: row.get(3)?,
        next_due: row.get(4)?,
        created_at: row.get(5)?,
        last_run: row.get(6)?,
        last_error: row.get(7)?,
        attempts: row.get(8)?,
    }
    .read()
    .map_err(unreadable)
}

/// A row [`ScheduleRow::read`] or [`IntakeRow::read`] refused, as SQLite's error.
fn unreadable((column, what): (usize, String)) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, what.into())
}

#[cfg(feature = "schedule")]
fn later_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<LaterMessage> {
    Ok(LaterMessage {
        id: row.get::<_, i64>(0)? as u64,
        conversation: row.get(1)?,
        text: row.get(2)?,
        due: from_secs(row.get(3)?),
    })
}

/// Records `mark` for journaled message `id` inside `tx`; a delivered
/// entry stays delivered.
fn mark_in(tx: &Transaction<'_>, id: &str, mark: &Mark) -> rusqlite::Result<()> {
    let time = now();
    let live = "AND stage <> 'delivered'";
    match mark {
        Mark::Started { conversation } => tx.execute(
            &format!("UPDATE journal SET stage = 'started', conversation = ?2, calling = NULL, updated_at = ?3 WHERE id = ?1 {live}"),
            params![id, conversation, time],
        ),
        Mark::Calling(message) => {
            let body = serde_json::to_string(message)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            tx.execute(
                &format!("UPDATE journal SET calling = ?2, updated_at = ?3 WHERE id = ?1 {live}"),
                params![id, body, time],
            )
        }
        Mark::Reply(reply) => tx.execute(
            "UPDATE journal SET reply = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, reply, time],
        ),
        Mark::Answered { text } => tx.execute(
            &format!("UPDATE journal SET stage = 'answered', answer = ?2, calling = NULL, updated_at = ?3 WHERE id = ?1 {live}"),
            params![id, text, time],
        ),
        Mark::Delivered => tx.execute(
            "UPDATE journal SET stage = 'delivered', calling = NULL, updated_at = ?2 WHERE id = ?1",
            params![id, time],
        ),
    }?;
    Ok(())
}

/// A journaled message from a row of [`INTAKE_COLUMNS`].
fn intake_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<Intake> {
    IntakeRow {
        id: row.get(0)?,
        chat: row.get(1)?,
        payload: row.get(2)?,
        stage: row.get(3)?,
        conversation: row.get(4)?,
        calling: row.get(5)?,
        reply: row.get(6)?,
        answer: row.get(7)?,
        received_at: row.get(8)?,
    }
    .read()
    .map_err(unreadable)
}

/// An id as SQLite keeps it; one past `i64::MAX` names no row.
#[cfg(feature = "schedule")]
fn row_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(-1)
}

impl HistoryStore for SqliteHistory {
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let mut select = connection
                .prepare_cached(
                    "SELECT seq, body FROM messages WHERE conversation = ?1 ORDER BY seq",
                )
                .map_err(fail)?;
            let rows = select
                .query_map([&conversation], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(fail)?;
            let mut messages = Vec::new();
            for row in rows {
                let (seq, body) = row.map_err(fail)?;
                messages.push(message_from(&conversation, seq, &body)?);
            }
            Ok(messages)
        })
    }

    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.store_messages(conversation, messages, Also::Nothing)
    }

    fn approvals<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Approval>, HistoryError>> {
        let conversation = conversation.to_owned();
        self.sql(move |connection| {
            let bodies: Vec<String> = select_all(
                connection,
                "SELECT body FROM approvals WHERE conversation = ?1 ORDER BY id",
                [&conversation],
                |row| row.get(0),
            )?;
            Ok(bodies
                .iter()
                // One this version can't read is skipped: the user is asked
                // again, which is the safe side.
                .filter_map(|body| serde_json::from_str(body).ok())
                .collect())
        })
    }

    fn add_approval<'a>(
        &'a self,
        conversation: &'a str,
        approval: &'a Approval,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let body = match serde_json::to_string(approval) {
            Ok(body) => body,
            Err(e) => return Box::pin(async { Err(storage("could not encode an approval", e)) }),
        };
        let conversation = conversation.to_owned();
        self.sql(move |connection| {
            let tx =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let time = now();
            ensure_conversation(&tx, &conversation, None, time)?;
            tx.execute(
                "INSERT INTO approvals (conversation, body, created_at) VALUES (?1, ?2, ?3)",
                params![conversation, body, time],
            )?;
            tx.commit()
        })
    }

    fn pending<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<PendingTurn>, HistoryError>> {
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let body: Option<String> = connection
                .prepare_cached("SELECT body FROM pending_turns WHERE conversation = ?1")
                .map_err(fail)?
                .query_row([&conversation], |row| row.get(0))
                .optional()
                .map_err(fail)?;
            body.map(|body| pending_from(&conversation, &body))
                .transpose()
        })
    }

    fn set_pending<'a>(
        &'a self,
        conversation: &'a str,
        pending: Option<&'a PendingTurn>,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let body = match pending.map(serde_json::to_string).transpose() {
            Ok(body) => body,
            Err(e) => {
                return Box::pin(async { Err(storage("could not encode a pending turn", e)) });
            }
        };
        let conversation = conversation.to_owned();
        self.sql(move |connection| {
            let tx =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            set_pending_in(&tx, &conversation, body.as_deref())?;
            tx.commit()
        })
    }

    fn settle_pending<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.store_messages(conversation, messages, Also::ForgetPending)
    }

    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        let conversation = conversation.to_owned();
        self.sql(move |connection| {
            let tx =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let images = images_from(&tx, &conversation, 0)?;
            tx.execute("DELETE FROM conversations WHERE id = ?1", [&conversation])?;
            drop_unshown(&tx, &images)?;
            tx.commit()
        })
    }

    fn load_image<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Image, HistoryError>> {
        let id = id.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let found = connection
                .prepare_cached("SELECT media_type, data FROM images WHERE id = ?1")
                .map_err(fail)?
                .query_row([&id], |row| {
                    Ok(Image::new(
                        row.get::<_, String>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                    ))
                })
                .optional()
                .map_err(fail)?;
            found.ok_or(HistoryError::ImageNotFound { id })
        })
    }

    fn truncate<'a>(
        &'a self,
        conversation: &'a str,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            // Written from the start, as `append` is: a read that later
            // wants to write can't wait out another process's lock.
            let tx = connection
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(fail)?;
            // The `keep`-th message's sequence number, if there are more.
            let cut: Option<i64> = tx
                .query_row(
                    "SELECT seq FROM messages WHERE conversation = ?1 ORDER BY seq LIMIT 1 OFFSET ?2",
                    params![conversation, i64::try_from(keep).unwrap_or(i64::MAX)],
                    |row| row.get(0),
                )
                .optional()
                .map_err(fail)?;
            if let Some(cut) = cut {
                let images = images_from(&tx, &conversation, cut).map_err(fail)?;
                if keep == 0 {
                    // Nothing left: the conversation goes, title and all.
                    tx.execute("DELETE FROM conversations WHERE id = ?1", [&conversation])
                        .map_err(fail)?;
                } else {
                    tx.execute(
                        "DELETE FROM messages WHERE conversation = ?1 AND seq >= ?2",
                        params![conversation, cut],
                    )
                    .map_err(fail)?;
                    tx.execute(
                        "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
                        params![conversation, now()],
                    )
                    .map_err(fail)?;
                }
                drop_unshown(&tx, &images).map_err(fail)?;
            }
            tx.commit().map_err(fail)
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<ConversationInfo>, HistoryError>> {
        self.sql(move |connection| {
            select_all(
                connection,
                "SELECT c.id, c.title, c.created_at, c.updated_at,
                        (SELECT count(*) FROM messages m WHERE m.conversation = c.id)
                 FROM conversations c ORDER BY c.updated_at DESC, c.id",
                [],
                |row| {
                    Ok(ConversationInfo {
                        id: row.get(0)?,
                        title: row.get(1)?,
                        created: row.get(2)?,
                        updated: row.get(3)?,
                        messages: row.get::<_, i64>(4)? as usize,
                    })
                },
            )
        })
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, HistoryError>> {
        let query = fts_query(query);
        self.sql(move |connection| {
            if query.is_empty() {
                return Ok(Vec::new());
            }
            select_all(
                connection,
                "SELECT m.conversation, m.seq, m.role,
                        snippet(messages_fts, 0, '[', ']', '…', 12)
                 FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                 WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2",
                params![query, limit as i64],
                |row| {
                    Ok(SearchHit {
                        conversation: row.get(0)?,
                        index: row.get::<_, i64>(1)? as usize,
                        role: role_from(&row.get::<_, String>(2)?),
                        snippet: row.get(3)?,
                    })
                },
            )
        })
    }
    #[cfg(feature = "schedule")]
    fn add_schedule<'a>(
        &'a self,
        schedule: &'a Schedule,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let recurrence = match serde_json::to_string(&schedule.recurrence) {
            Ok(recurrence) => recurrence,
            Err(e) => return Box::pin(async { Err(storage("could not encode a recurrence", e)) }),
        };
        let schedule = schedule.clone();
        self.sql(move |connection| {
            connection
                .prepare_cached(
                    "INSERT INTO schedules (conversation, prompt, recurrence, next_due, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    schedule.conversation,
                    schedule.prompt,
                    recurrence,
                    schedule.next_due.map(to_secs),
                    to_secs(schedule.created),
                ])?;
            Ok(connection.last_insert_rowid() as u64)
        })
    }

    #[cfg(feature = "schedule")]
    fn schedules<'a>(
        &'a self,
        conversation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Schedule>, HistoryError>> {
        let conversation = conversation.map(str::to_owned);
        self.sql(move |connection| {
            select_all(
                connection,
                &format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM schedules
                     WHERE ?1 IS NULL OR conversation = ?1 ORDER BY id"
                ),
                [&conversation],
                schedule_from,
            )
        })
    }

    #[cfg(feature = "schedule")]
    fn remove_schedule(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.sql(move |connection| {
            let removed =
                connection.execute("DELETE FROM schedules WHERE id = ?1", [row_id(id)])?;
            Ok(removed > 0)
        })
    }

    #[cfg(feature = "schedule")]
    fn due_schedules(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<Schedule>, HistoryError>> {
        self.sql(move |connection| {
            select_all(
                connection,
                &format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM schedules
                     WHERE next_due IS NOT NULL AND next_due <= ?1 ORDER BY next_due, id"
                ),
                [to_secs(now)],
                schedule_from,
            )
        })
    }

    #[cfg(feature = "schedule")]
    /// One `UPDATE … WHERE next_due IS ?from`: SQLite runs it atomically,
    /// so of two schedulers on one file (or two processes), one claims.
    fn claim_schedule(
        &self,
        id: u64,
        from: Option<SystemTime>,
        to: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.sql(move |connection| {
            let claimed = connection
                .prepare_cached(
                    "UPDATE schedules SET next_due = ?3 WHERE id = ?1 AND next_due IS ?2",
                )?
                .execute(params![row_id(id), from.map(to_secs), to.map(to_secs)])?;
            Ok(claimed == 1)
        })
    }

    #[cfg(feature = "schedule")]
    fn record_schedule_run<'a>(
        &'a self,
        id: u64,
        at: SystemTime,
        error: Option<&'a str>,
        attempts: u32,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let error = error.map(str::to_owned);
        self.sql(move |connection| {
            connection
                .prepare_cached(
                    "UPDATE schedules SET last_run = ?2, last_error = ?3, attempts = ?4 WHERE id = ?1",
                )?
                .execute(params![row_id(id), to_secs(at), error, attempts])?;
            Ok(())
        })
    }

    #[cfg(feature = "schedule")]
    fn add_later_message<'a>(
        &'a self,
        message: &'a LaterMessage,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let message = message.clone();
        self.sql(move |connection| {
            connection
                .prepare_cached(
                    "INSERT INTO later_messages (conversation, text, due, created_at)
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![
                    message.conversation,
                    message.text,
                    to_secs(message.due),
                    now()
                ])?;
            Ok(connection.last_insert_rowid() as u64)
        })
    }

    #[cfg(feature = "schedule")]
    fn due_later_messages(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<LaterMessage>, HistoryError>> {
        self.sql(move |connection| {
            select_all(
                connection,
                "SELECT id, conversation, text, due FROM later_messages
                 WHERE due <= ?1 ORDER BY due, id",
                [to_secs(now)],
                later_from,
            )
        })
    }

    #[cfg(feature = "schedule")]
    fn take_later_message(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.sql(move |connection| {
            let taken =
                connection.execute("DELETE FROM later_messages WHERE id = ?1", [row_id(id)])?;
            Ok(taken > 0)
        })
    }

    #[cfg(feature = "schedule")]
    fn next_due(&self) -> BoxFuture<'_, Result<Option<SystemTime>, HistoryError>> {
        self.sql(move |connection| {
            let next: Option<i64> = connection.query_row(
                "SELECT min(t) FROM (
                     SELECT min(next_due) AS t FROM schedules
                     UNION ALL SELECT min(due) FROM later_messages
                 )",
                [],
                |row| row.get(0),
            )?;
            Ok(next.map(from_secs))
        })
    }

    fn receive<'a>(&'a self, intake: &'a Intake) -> BoxFuture<'a, Result<bool, HistoryError>> {
        let intake = intake.clone();
        let owner = self.inner.owner.clone();
        self.sql(move |connection| {
            let added = connection
                .prepare_cached(
                    "INSERT INTO journal (id, chat, payload, stage, conversation, reply, received_at, updated_at, owner)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![
                    intake.id,
                    intake.chat,
                    intake.payload,
                    intake.stage.as_str(),
                    intake.conversation,
                    intake.reply,
                    to_secs(intake.received),
                    now(),
                    owner
                ])?;
            Ok(added == 1)
        })
    }

    fn intake<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Intake>, HistoryError>> {
        let id = id.to_owned();
        self.sql(move |connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {INTAKE_COLUMNS} FROM journal WHERE id = ?1"
                ))?
                .query_row([&id], intake_from)
                .optional()
        })
    }

    fn unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        self.sql(|connection| {
            select_all(
                connection,
                &format!(
                    "SELECT {INTAKE_COLUMNS} FROM journal WHERE stage <> 'delivered' ORDER BY seq"
                ),
                [],
                intake_from,
            )
        })
    }

    fn claim_unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        // One process at a time: whatever another instance journaled, an
        // earlier process left.
        let owner = self.inner.owner.clone();
        self.sql(move |connection| {
            let others = "stage <> 'delivered' AND owner IS NOT ?1";
            // Asked every few seconds: a read when there is nothing, which
            // is almost always; the write lock only to take something.
            let any: bool = connection
                .prepare_cached(&format!(
                    "SELECT EXISTS (SELECT 1 FROM journal WHERE {others})"
                ))?
                .query_row([&owner], |row| row.get(0))?;
            if !any {
                return Ok(Vec::new());
            }
            let tx =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let left = select_all(
                &tx,
                &format!("SELECT {INTAKE_COLUMNS} FROM journal WHERE {others} ORDER BY seq"),
                [&owner],
                intake_from,
            )?;
            if !left.is_empty() {
                tx.prepare_cached(&format!("UPDATE journal SET owner = ?1 WHERE {others}"))?
                    .execute([&owner])?;
            }
            tx.commit()?;
            Ok(left)
        })
    }

    fn mark<'a>(&'a self, id: &'a str, mark: &'a Mark) -> BoxFuture<'a, Result<(), HistoryError>> {
        let (id, mark) = (id.to_owned(), mark.clone());
        self.sql(move |connection| {
            let tx =
                connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            mark_in(&tx, &id, &mark)?;
            tx.commit()
        })
    }

    fn append_marked<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
        id: &'a str,
        mark: &'a Mark,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.store_messages(
            conversation,
            messages,
            Also::Mark(id.to_owned(), mark.clone()),
        )
    }

    fn forget_delivered(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, HistoryError>> {
        let before = to_secs(before);
        self.sql(move |connection| {
            let forgotten = connection.execute(
                "DELETE FROM journal WHERE stage = 'delivered' AND received_at < ?1",
                [before],
            )?;
            Ok(forgotten as u64)
        })
    }
}

/// Every row `sql` selects with `params`, read by `from`; the statement is
/// kept in the connection's cache.
fn select_all<T>(
    connection: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    from: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    connection
        .prepare_cached(sql)?
        .query_map(params, from)?
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[tokio::test]
    async fn a_full_disk_is_reported_and_stores_nothing_of_the_write() {
        let dir = std::env::temp_dir().join(format!("ferrobot-full-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteHistory::open(dir.join("h.db")).await.unwrap();
        store.append("a", &[Message::user("kept")]).await.unwrap();
        {
            // SQLite's own page limit stands in for a full disk: writes past
            // it fail with SQLITE_FULL, as they would on a full filesystem.
            store
                .sql(|connection| {
                    let pages: i64 = connection.query_row("PRAGMA page_count", [], |r| r.get(0))?;
                    connection.query_row(
                        &format!("PRAGMA max_page_count = {}", pages + 1),
                        [],
                        |_| Ok(()),
                    )
                })
                .await
                .unwrap();
        }
        let big: Vec<Message> = (0..50)
            .map(|i| Message::user(format!("{i} {}", "x".repeat(4000))))
            .collect();
        let error = store.append("a", &big).await.unwrap_err();
        assert!(matches!(error, HistoryError::DiskFull { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("is full; nothing of this write was stored"),
            "{error}"
        );
        assert_eq!(store.load("a").await.unwrap(), [Message::user("kept")]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_file_locked_by_another_connection_or_made_query_only_stores_nothing_and_says_why() {
        let dir = std::env::temp_dir().join(format!("ferrobot-locked-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteHistory::open(dir.join("h.db")).await.unwrap();
        store.append("a", &[Message::user("kept")]).await.unwrap();
        // Not the 5 s the store waits: the test needn't.
        store
            .sql(|c| c.busy_timeout(std::time::Duration::from_millis(100)))
            .await
            .unwrap();
        // Another program holding the file: a second connection's
        // exclusive transaction.
        let other = rusqlite::Connection::open(dir.join("h.db")).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let error = store
            .append("a", &[Message::user("lost?")])
            .await
            .unwrap_err();
        assert!(matches!(error, HistoryError::Busy { .. }), "{error:?}");
        assert!(
            error.to_string().contains("is locked by another program"),
            "{error}"
        );
        other.execute_batch("ROLLBACK").unwrap();
        drop(other);
        assert_eq!(store.load("a").await.unwrap(), [Message::user("kept")]);

        // SQLite's `query_only`: every write refused as read-only.
        store
            .sql(|c| c.execute_batch("PRAGMA query_only = 1"))
            .await
            .unwrap();
        let error = store
            .append("a", &[Message::user("lost?")])
            .await
            .unwrap_err();
        assert!(matches!(error, HistoryError::ReadOnly { .. }), "{error:?}");
        assert_eq!(store.load("a").await.unwrap(), [Message::user("kept")]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_key_held_by_other_bytes_is_never_given_to_an_image() {
        let dir = std::env::temp_dir().join(format!("ferrobot-collide-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteHistory::open(dir.join("h.db")).await.unwrap();
        let image = Image::png(vec![1u8, 2, 3]);
        let key = image_key("image/png", &[1, 2, 3]);
        // Another image under this image's key, as a collision would leave it.
        let held = key.clone();
        store
            .sql(move |c| {
                c.execute(
                    "INSERT INTO images VALUES (?1, 'image/png', 3, x'090909', 0)",
                    [&held],
                )
            })
            .await
            .unwrap();
        let shown = Message::new(Role::User, vec![crate::Part::image(image.clone())]);
        store.append("a", &[shown.clone(), shown]).await.unwrap();
        let ids: Vec<String> = store
            .load("a")
            .await
            .unwrap()
            .iter()
            .flat_map(|m| m.images().cloned().collect::<Vec<_>>())
            .map(|image| match image {
                Image::Stored { id, .. } => id,
                other => panic!("not stored: {other:?}"),
            })
            .collect();
        assert_eq!(ids, [format!("{key}-1"), format!("{key}-1")]);
        assert_eq!(store.load_image(&ids[0]).await.unwrap(), image);
        assert_eq!(
            store.load_image(&key).await.unwrap().bytes(),
            Some(&[9u8, 9, 9][..])
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn search_words_are_quoted() {
        assert_eq!(fts_query(r#"C++ "x" y"#), r#""C++" """x""" "y""#);
    }
}
