//! Conversations in one SQLite file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction, params};

use super::{
    ConversationInfo, HistoryError, HistoryStore, SearchHit, now, searchable_text, title_of,
};
use crate::message::{Message, Role};

/// Marks a SQLite file as ferrobot's (`PRAGMA application_id`, "FRBT").
const APPLICATION_ID: i64 = 0x4652_4254;

/// A migration brings the schema from the previous version to its own.
type Migration = fn(&Transaction<'_>) -> rusqlite::Result<()>;

/// The schema's history; version N is `MIGRATIONS[N - 1]`. Never edit a
/// released entry: add one.
const MIGRATIONS: [Migration; 2] = [v1_tables, v2_search];

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

/// Conversations in one SQLite file, surviving restarts and crashes.
///
/// The file is in WAL mode; each [`append`](HistoryStore::append) is one
/// transaction, so a step's assistant message and its tool results are stored
/// together or not at all. The schema is versioned and migrated on open.
/// Opening a file that isn't a ferrobot database, or one written by a newer
/// ferrobot, fails without touching it. SQLite runs on Tokio's blocking
/// threads, never on the async ones.
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
    connection: Mutex<Connection>,
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
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                connection: Mutex::new(connection),
            }),
        })
    }

    /// Runs `work` with the connection on a blocking thread.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, HistoryError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, HistoryError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut connection = inner.connection.lock().unwrap_or_else(|e| e.into_inner());
                work(&mut connection)
            })
            .await
            .map_err(|e| storage("a history store task failed", e))?
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

fn storage(message: &str, source: impl std::error::Error + Send + Sync + 'static) -> HistoryError {
    HistoryError::Storage {
        message: message.to_owned(),
        source: Some(Box::new(source)),
    }
}

/// SQLite's error, in the terms of what the user can do about it.
fn sqlite_error(path: &Path, error: rusqlite::Error) -> HistoryError {
    let path = path.to_owned();
    match error.sqlite_error_code() {
        Some(ErrorCode::ReadOnly) => HistoryError::ReadOnly { path },
        Some(ErrorCode::DiskFull) => HistoryError::DiskFull { path },
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

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn role_from(name: &str) -> Role {
    match name {
        "system" => Role::System,
        "user" => Role::User,
        "tool" => Role::Tool,
        _ => Role::Assistant,
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
                let message = serde_json::from_str(&body).map_err(|e| HistoryError::Corrupt {
                    conversation: conversation.clone(),
                    index: seq as usize,
                    message: e.to_string(),
                })?;
                messages.push(message);
            }
            Ok(messages)
        })
    }

    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        // Serialised here, so the blocking thread only writes.
        let rows: Result<Vec<(&'static str, String, String)>, serde_json::Error> = messages
            .iter()
            .map(|m| {
                Ok((
                    role_name(m.role),
                    serde_json::to_string(m)?,
                    searchable_text(m),
                ))
            })
            .collect();
        let title = title_of(messages);
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                return Box::pin(async move { Err(storage("could not encode a message", e)) });
            }
        };
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let time = now();
            let tx = connection
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(fail)?;
            tx.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
                     title = coalesce(conversations.title, excluded.title)",
                params![conversation, title, time],
            )
            .map_err(fail)?;
            let next: i64 = tx
                .query_row("SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE conversation = ?1", [&conversation], |r| r.get(0))
                .map_err(fail)?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO messages (conversation, seq, role, body, search_text, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .map_err(fail)?;
                for (offset, (role, body, text)) in rows.iter().enumerate() {
                    insert
                        .execute(params![conversation, next + offset as i64, role, body, text, time])
                        .map_err(fail)?;
                }
            }
            tx.commit().map_err(fail)
        })
    }

    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        let conversation = conversation.to_owned();
        let path = self.inner.path.clone();
        self.run(move |connection| {
            connection
                .execute("DELETE FROM conversations WHERE id = ?1", [&conversation])
                .map(drop)
                .map_err(|e| sqlite_error(&path, e))
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
            }
            tx.commit().map_err(fail)
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<ConversationInfo>, HistoryError>> {
        let path = self.inner.path.clone();
        self.run(move |connection| {
            let fail = |e| sqlite_error(&path, e);
            let mut select = connection
                .prepare_cached(
                    "SELECT c.id, c.title, c.created_at, c.updated_at,
                            (SELECT count(*) FROM messages m WHERE m.conversation = c.id)
                     FROM conversations c ORDER BY c.updated_at DESC, c.id",
                )
                .map_err(fail)?;
            let rows = select
                .query_map([], |row| {
                    Ok(ConversationInfo {
                        id: row.get(0)?,
                        title: row.get(1)?,
                        created: row.get(2)?,
                        updated: row.get(3)?,
                        messages: row.get::<_, i64>(4)? as usize,
                    })
                })
                .map_err(fail)?;
            rows.collect::<rusqlite::Result<_>>().map_err(fail)
        })
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, HistoryError>> {
        let query = fts_query(query);
        let path = self.inner.path.clone();
        self.run(move |connection| {
            if query.is_empty() {
                return Ok(Vec::new());
            }
            let fail = |e| sqlite_error(&path, e);
            let mut select = connection
                .prepare_cached(
                    "SELECT m.conversation, m.seq, m.role,
                            snippet(messages_fts, 0, '[', ']', '…', 12)
                     FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                     WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2",
                )
                .map_err(fail)?;
            let rows = select
                .query_map(params![query, limit as i64], |row| {
                    Ok(SearchHit {
                        conversation: row.get(0)?,
                        index: row.get::<_, i64>(1)? as usize,
                        role: role_from(&row.get::<_, String>(2)?),
                        snippet: row.get(3)?,
                    })
                })
                .map_err(fail)?;
            rows.collect::<rusqlite::Result<_>>().map_err(fail)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_disk_is_reported_and_stores_nothing_of_the_write() {
        let dir = std::env::temp_dir().join(format!("ferrobot-full-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SqliteHistory::open(dir.join("h.db")).await.unwrap();
        store.append("a", &[Message::user("kept")]).await.unwrap();
        {
            // SQLite's own page limit stands in for a full disk: writes past
            // it fail with SQLITE_FULL, as they would on a full filesystem.
            let connection = store.inner.connection.lock().unwrap();
            let pages: i64 = connection
                .query_row("PRAGMA page_count", [], |r| r.get(0))
                .unwrap();
            connection
                .query_row(
                    &format!("PRAGMA max_page_count = {}", pages + 1),
                    [],
                    |_| Ok(()),
                )
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

    #[test]
    fn search_words_are_quoted() {
        assert_eq!(fts_query(r#"C++ "x" y"#), r#""C++" """x""" "y""#);
    }
}
