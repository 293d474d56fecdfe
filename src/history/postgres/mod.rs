//! Conversations in a PostgreSQL database, shared by any number of
//! replicas.
//!
//! Built on tokio-postgres with a deadpool pool rather than sqlx: the two
//! compile a fraction of what sqlx does (no query macros, no drivers for
//! other databases), and the store's statements are few and fixed. Every
//! method behaves as [`SqliteHistory`](super::SqliteHistory)'s does; what
//! is PostgreSQL's own is how: identity columns for ids never given twice,
//! a `tsvector` column with a GIN index for search, `BYTEA` for images,
//! row locks and transactions where SQLite has its single writer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use deadpool_postgres::{
    GenericClient, Hook, HookError, Manager, ManagerConfig, Object, Pool, PoolError,
    RecyclingMethod, Runtime, Transaction,
};
use futures_util::future::BoxFuture;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

mod lease;
mod replica;
mod tls;

use self::tls::{Asked, Tls};
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

/// The schema's history; version N is `MIGRATIONS[N - 1]`, SQL run in the
/// transaction that records it. Never edit a released entry: add one.
const MIGRATIONS: [&str; 2] = [V1_TABLES, V2_REPLICAS];

/// Version 1: the tables SQLite's six versions add up to, in PostgreSQL's
/// terms, and the leases of running turns (`turn_leases`, see
/// [`lease`]). Bodies are the serde JSON text of their types, exactly as
/// SQLite keeps them; times are seconds since the Unix epoch. Schedules,
/// later messages and the journal refer to no conversation: they outlive
/// a cleared one.
const V1_TABLES: &str = "
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    search_text TEXT NOT NULL,
    search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
    created_at BIGINT NOT NULL,
    UNIQUE (conversation, seq)
);
CREATE INDEX messages_search ON messages USING GIN (search);
CREATE TABLE images (
    id TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    data BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE message_images (
    message BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    image TEXT NOT NULL REFERENCES images (id),
    PRIMARY KEY (message, image)
);
CREATE INDEX message_images_image ON message_images (image);
CREATE TABLE approvals (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX approvals_conversation ON approvals (conversation);
CREATE TABLE pending_turns (
    conversation TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE schedules (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation TEXT NOT NULL,
    prompt TEXT NOT NULL,
    recurrence TEXT NOT NULL,
    next_due BIGINT,
    created_at BIGINT NOT NULL,
    last_run BIGINT,
    last_error TEXT,
    attempts BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX schedules_conversation ON schedules (conversation);
CREATE INDEX schedules_next_due ON schedules (next_due) WHERE next_due IS NOT NULL;
CREATE TABLE later_messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation TEXT NOT NULL,
    text TEXT NOT NULL,
    due BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX later_messages_due ON later_messages (due);
CREATE TABLE journal (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    chat TEXT NOT NULL,
    payload TEXT NOT NULL,
    stage TEXT NOT NULL,
    conversation TEXT,
    calling TEXT,
    reply TEXT,
    answer TEXT,
    received_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX journal_unfinished ON journal (seq) WHERE stage <> 'delivered';
CREATE TABLE turn_leases (
    conversation TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
";

/// Version 2: which replica journaled each entry (`owner`), and when each
/// replica last said it runs (see [`replica`]); the started turns of a
/// conversation found at once (`started_in`).
const V2_REPLICAS: &str = "
ALTER TABLE journal ADD COLUMN owner TEXT;
CREATE INDEX journal_started ON journal (conversation) WHERE stage = 'started';
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    seen_at TIMESTAMPTZ NOT NULL
);
";

/// The advisory lock migrations run under ("FRBT"): replicas starting
/// together migrate one after the other, and the later ones find nothing
/// to do.
const MIGRATION_LOCK: i64 = 0x4652_4254;

/// How long a connection attempt may take when the URL sets no
/// `connect_timeout`: an unreachable server fails the call, not hangs it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for a free connection of a busy pool.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a statement waits for a lock another program holds (a
/// `LOCK TABLE`, a long transaction) before it fails as
/// [`HistoryError::Busy`], as a SQLite store waits for its file; PostgreSQL
/// waits for ever by default. A `lock_timeout` in the URL's `options` wins.
const LOCK_TIMEOUT: &str = "SET lock_timeout = '5s'";

/// Lifts [`LOCK_TIMEOUT`] for one transaction: the store's own advisory
/// locks (a migration, a claim) are held by other ferrobot replicas doing
/// their work, and are waited for.
const OUR_LOCKS_WAIT: &str = "SET LOCAL lock_timeout = 0";

/// Whether a connection's `options` (`-c lock_timeout=10s`,
/// `--lock_timeout=10s`) set `lock_timeout` themselves.
fn sets_lock_timeout(options: &str) -> bool {
    options.split_whitespace().any(|word| {
        let setting = word.strip_prefix("-c").unwrap_or(word);
        setting.trim_start_matches('-').starts_with("lock_timeout=")
    })
}

/// Conversations in a PostgreSQL database, shared by any number of
/// processes: several bot replicas can use one database, and a scheduled
/// run, a later message or a journaled message is claimed by exactly one.
///
/// Each [`append`](HistoryStore::append) is one transaction, as are
/// [`settle_pending`](HistoryStore::settle_pending) and
/// [`append_marked`](HistoryStore::append_marked) with what they do
/// besides. Images are stored once each, by content, in a `BYTEA` column
/// apart from the messages, and go with the last message showing them.
/// Search is PostgreSQL's full-text search (the `simple` configuration:
/// every word, any language), snippets marked with `[` and `]`.
///
/// The schema is versioned in a `ferrobot_schema` table and migrated by
/// [`connect`](Self::connect), under an advisory lock so that replicas
/// starting together don't race. A database written by a newer ferrobot
/// is refused untouched. The tables go in the first schema of the
/// connection's `search_path`: `options=-c search_path=bot` in the URL
/// keeps them in schema `bot`.
///
/// The URL's password never appears in an error, a log line or this
/// type's `Debug` output.
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
/// use ferrobot::{Message, history::{HistoryStore, PostgresHistory}};
/// let url = std::env::var("DATABASE_URL").unwrap_or_default();
/// let store = PostgresHistory::connect(&url).await?;
/// store.append("alice", &[Message::user("where are the backups?")]).await?;
/// let hits = store.search("backups", 10).await?;
/// assert_eq!(hits[0].snippet, "where are the [backups]?");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresHistory {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// The URL without its password: what errors and `Debug` name.
    target: String,
    /// This store's name as a replica, in the journal's `owner` column.
    owner: String,
    /// Whether it beats in the `replicas` table (once it journals).
    beating: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for PostgresHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresHistory")
            .field("target", &self.inner.target)
            .field("pool_size", &self.inner.pool.status().max_size)
            .finish_non_exhaustive()
    }
}

impl PostgresHistory {
    /// The pool size [`connect`](Self::connect) uses: connections each
    /// store keeps open at most.
    pub const DEFAULT_POOL_SIZE: usize = 8;

    /// Connects to the database at `url` with a pool of
    /// [`DEFAULT_POOL_SIZE`](Self::DEFAULT_POOL_SIZE) connections and
    /// brings its schema up to date.
    ///
    /// `url` is a libpq URL or key-value string, e.g.
    /// `postgres://bot:secret@db.example.com/ferrobot?sslmode=verify-full`.
    /// Its `sslmode` decides TLS, as libpq's does: unset or `disable`,
    /// none; `prefer`, TLS if the server offers it; `require`, TLS without
    /// checking the server's certificate; `verify-ca`, TLS with the
    /// certificate checked up to a trusted authority, whatever host it
    /// names; `verify-full`, and that it names the host. `sslrootcert`
    /// names a PEM file of the authorities to trust (a private CA's, as
    /// managed databases hand out; `require` with it checks as `verify-ca`
    /// does); unset or `system`, the Mozilla roots.
    ///
    /// # Errors
    /// [`HistoryError::Storage`] saying what to check when the URL can't
    /// be read or the server can't be reached or refuses the login,
    /// [`HistoryError::NewerSchema`] for a database written by a newer
    /// ferrobot, [`HistoryError::NotOurs`] when the schema holds tables of
    /// the same names that aren't ferrobot's; never touching the database
    /// in those cases.
    ///
    /// # Examples
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
    /// use ferrobot::history::{HistoryStore, PostgresHistory};
    /// let store = PostgresHistory::connect("postgres://bot:secret@127.0.0.1/ferrobot").await?;
    /// println!("{} conversations", store.list().await?.len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, HistoryError> {
        Self::connect_with(url, Self::DEFAULT_POOL_SIZE).await
    }

    /// [`connect`](Self::connect) with a pool of at most `pool_size`
    /// connections (at least one).
    ///
    /// Size it for the turns that run at once: a turn holds a connection
    /// only while a statement runs, never while the model answers, so a few
    /// connections serve many chats. Every replica opens up to its own
    /// `pool_size`, and their sum must stay under the server's
    /// `max_connections` (often 100, less on small managed plans) minus
    /// what other clients need.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Examples
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
    /// use ferrobot::history::{HistoryStore, PostgresHistory};
    /// let store = PostgresHistory::connect_with("postgres://bot@db/ferrobot", 4).await?;
    /// println!("{} conversations", store.list().await?.len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_with(url: &str, pool_size: usize) -> Result<Self, HistoryError> {
        let target = redacted(url);
        let pool = pool(url, &target, pool_size.max(1))?;
        let store = Self {
            inner: Arc::new(Inner {
                pool,
                target,
                owner: super::journal::new_owner(),
                beating: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        store.migrate().await.map_err(|fail| store.error(fail))?;
        Ok(store)
    }

    /// The URL this store connects to, without its password.
    ///
    /// # Examples
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
    /// let store = ferrobot::history::PostgresHistory::connect("postgres://bot:pw@db/x").await?;
    /// assert_eq!(store.target(), "postgres://bot:***@db/x");
    /// # Ok(())
    /// # }
    /// ```
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// `url` with its password replaced by `***`, in either form libpq
    /// reads (a URL, with or without a `password=` parameter, or key-value
    /// pairs): what a program may print or log about the database.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::history::PostgresHistory;
    /// assert_eq!(
    ///     PostgresHistory::redact("postgres://bot:s3cret@db/x?sslmode=require"),
    ///     "postgres://bot:***@db/x?sslmode=require"
    /// );
    /// assert_eq!(PostgresHistory::redact("host=db password=s3cret"), "host=db password=***");
    /// ```
    pub fn redact(url: &str) -> String {
        redacted(url)
    }

    /// Brings the schema to the latest version in one transaction, under
    /// [`MIGRATION_LOCK`]. An up-to-date database is only read.
    async fn migrate(&self) -> Result<(), Fail> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Another replica's migration is waited for however long it takes:
        // `LOCK_TIMEOUT` is for other programs' locks.
        tx.batch_execute(OUR_LOCKS_WAIT).await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let version = self.schema_version(&tx).await?;
        let latest = MIGRATIONS.len() as i64;
        if version > latest {
            return Err(Fail::History(HistoryError::NewerSchema {
                path: PathBuf::from(&self.inner.target),
                found: version,
                supported: latest,
            }));
        }
        if version == 0 {
            tx.batch_execute(
                "CREATE TABLE ferrobot_schema (
                     version BIGINT PRIMARY KEY,
                     applied_at BIGINT NOT NULL
                 )",
            )
            .await?;
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.batch_execute(migration).await?;
            tx.execute(
                "INSERT INTO ferrobot_schema (version, applied_at) VALUES ($1, $2)",
                &[&(index as i64 + 1), &now()],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The schema's version; 0 for a schema without ferrobot's tables. A
    /// schema holding a `conversations` table but no version is another
    /// application's.
    async fn schema_version(&self, tx: &Transaction<'_>) -> Result<i64, Fail> {
        let row = tx
            .query_one(
                "SELECT to_regclass('ferrobot_schema') IS NOT NULL,
                        to_regclass('conversations') IS NOT NULL",
                &[],
            )
            .await?;
        if row.try_get(0)? {
            let row = tx
                .query_one("SELECT coalesce(max(version), 0) FROM ferrobot_schema", &[])
                .await?;
            return Ok(row.try_get(0)?);
        }
        if row.try_get(1)? {
            return Err(Fail::History(HistoryError::NotOurs {
                path: PathBuf::from(&self.inner.target),
                why: "its schema has a `conversations` table but no ferrobot_schema".into(),
            }));
        }
        Ok(0)
    }

    /// A connection from the pool.
    async fn client(&self) -> Result<Object, Fail> {
        Ok(self.inner.pool.get().await?)
    }

    /// Runs `sql` with `params` on a connection from the pool; its rows.
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Fail> {
        let client = self.client().await?;
        Ok(select(&client, sql, params).await?)
    }

    /// Runs `sql` with `params` on a connection from the pool; how many
    /// rows it changed.
    async fn change(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Fail> {
        let client = self.client().await?;
        Ok(execute(&client, sql, params).await?)
    }

    /// Runs `work`; its failure becomes the [`HistoryError`] that names
    /// this store's database.
    fn run<'a, T: Send + 'a>(
        &'a self,
        work: impl Future<Output = Result<T, Fail>> + Send + 'a,
    ) -> BoxFuture<'a, Result<T, HistoryError>> {
        Box::pin(async move { work.await.map_err(|fail| self.error(fail)) })
    }

    /// Stores `messages` in one transaction, with what `also` says: with
    /// [`Also::ForgetPending`], a crash leaves either the turn pending and
    /// no results, or the results and nothing pending; with [`Also::Mark`],
    /// the journal says exactly what the history holds.
    fn store_messages<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
        also: Also<'a>,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            append_in(&tx, conversation, messages).await?;
            match also {
                Also::Nothing => {}
                Also::ForgetPending => set_pending_in(&tx, conversation, None).await?,
                Also::Mark(id, mark) => mark_in(&tx, id, mark).await?,
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// PostgreSQL's or the pool's failure in the terms of what the user can
    /// do about it, naming the database without its password.
    fn error(&self, fail: Fail) -> HistoryError {
        let target = &self.inner.target;
        match fail {
            Fail::History(error) => error,
            // Opening a connection failed: PostgreSQL's refusal, or none
            // reached it.
            Fail::Pool(PoolError::Backend(error)) if error.code().is_none() => {
                unreachable_error(target, error)
            }
            Fail::Pool(
                PoolError::Backend(error) | PoolError::PostCreateHook(HookError::Backend(error)),
            )
            | Fail::Postgres(error) => postgres_error(target, error),
            Fail::Pool(PoolError::Timeout(_)) => HistoryError::Storage {
                message: format!(
                    "no connection to {target} was free or could be opened in time: check that \
                     the server is reachable, or give the store a larger pool"
                ),
                source: None,
            },
            Fail::Pool(error) => storage(&format!("the connection pool of {target} failed"), error),
        }
    }
}

/// What else the transaction that stores messages does.
enum Also<'a> {
    Nothing,
    /// Forgets the conversation's pending turn.
    ForgetPending,
    /// Marks a journaled message.
    Mark(&'a str, &'a Mark),
}

/// A failure inside a store method, before it is named (see
/// [`PostgresHistory::error`]).
enum Fail {
    Postgres(tokio_postgres::Error),
    Pool(PoolError),
    History(HistoryError),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Postgres(error)
    }
}

impl From<PoolError> for Fail {
    fn from(error: PoolError) -> Self {
        Self::Pool(error)
    }
}

impl From<HistoryError> for Fail {
    fn from(error: HistoryError) -> Self {
        Self::History(error)
    }
}

/// The pool of connections to `url`; none is opened yet.
fn pool(url: &str, target: &str, size: usize) -> Result<Pool, HistoryError> {
    let Asked { tls, roots, url } = tls::asked(url);
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| HistoryError::Storage {
        message: format!(
            "{target} is not a PostgreSQL connection URL: write it as \
             postgres://user:password@host:port/database (add ?sslmode=verify-full for TLS)"
        ),
        source: Some(Box::new(e)),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("ferrobot");
    }
    if tls == Tls::Off {
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    }
    let own_lock_timeout = config.get_options().is_some_and(sets_lock_timeout);
    let recycling = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match tls {
        Tls::Off => Manager::from_config(config, NoTls, recycling),
        Tls::Encrypt | Tls::VerifyCa | Tls::VerifyFull => Manager::from_config(
            config,
            tokio_postgres_rustls::MakeRustlsConnect::new(tls::config(tls, roots.as_deref())?),
            recycling,
        ),
    };
    let mut pool = Pool::builder(manager);
    if !own_lock_timeout {
        // Set on each new connection, not as a start-up option: PgBouncer
        // refuses unknown start-up parameters.
        pool = pool.post_create(Hook::async_fn(|client, _| {
            Box::pin(async move {
                client
                    .batch_execute(LOCK_TIMEOUT)
                    .await
                    .map_err(HookError::Backend)
            })
        }));
    }
    pool.max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT + Duration::from_secs(5)))
        .build()
        .map_err(|e| {
            storage(
                &format!("could not build the connection pool of {target}"),
                e,
            )
        })
}

/// `url` with its password replaced by `***`, in either form libpq reads:
/// `postgres://user:password@host/…` (and a `password=` query parameter),
/// or `host=… password=…` key-value pairs.
fn redacted(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        // The authority ends at the first `/`, `?` or `#`; its user info
        // at its last `@` (a password may hold `@` unescaped).
        let authority_end = out[rest..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let info = &out[rest..rest + at];
            if let Some(colon) = info.find(':') {
                out.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    redact_parameter(&out)
}

/// `text` with the value of each `password=` parameter (query or
/// key-value, quoted or not) replaced by `***`.
fn redact_parameter(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("password=") {
        let value = found + "password=".len();
        // Only a whole key: at the start or after a separator.
        let whole = found == 0 || rest[..found].ends_with(['?', '&', ' ']);
        out.push_str(&rest[..value]);
        rest = &rest[value..];
        if !whole {
            continue;
        }
        let end = if let Some(quoted) = rest.strip_prefix('\'') {
            // A quoted value ends at the first quote not escaped.
            let mut escaped = false;
            quoted
                .char_indices()
                .find(|&(_, c)| {
                    let close = c == '\'' && !escaped;
                    escaped = c == '\\' && !escaped;
                    close
                })
                .map_or(rest.len(), |(i, _)| i + 2)
        } else {
            rest.find(['&', ' ', '#']).unwrap_or(rest.len())
        };
        out.push_str("***");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// An error of a connection that never opened or was lost: the usual
/// causes, in the order worth checking.
fn unreachable_error(target: &str, error: tokio_postgres::Error) -> HistoryError {
    storage(
        &format!(
            "could not connect to PostgreSQL at {target}: check that the server is running \
             and reachable from here (host, port, firewall) and that `sslmode` matches what \
             it accepts"
        ),
        error,
    )
}

/// PostgreSQL's error, in the terms of what the user can do about it.
fn postgres_error(target: &str, error: tokio_postgres::Error) -> HistoryError {
    let path = || PathBuf::from(target);
    let Some(code) = error.code() else {
        return storage(&format!("{target}: PostgreSQL failed"), error);
    };
    let advice = match code {
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION
            || *c == SqlState::INSUFFICIENT_PRIVILEGE =>
        {
            return HistoryError::ReadOnly { path: path() };
        }
        c if *c == SqlState::DISK_FULL => return HistoryError::DiskFull { path: path() },
        c if *c == SqlState::LOCK_NOT_AVAILABLE => return HistoryError::Busy { path: path() },
        c if *c == SqlState::INVALID_PASSWORD
            || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            "the server refused the login: check the user name and password in the URL"
        }
        c if *c == SqlState::INVALID_CATALOG_NAME => {
            "the database does not exist: create it (createdb), or name another in the URL"
        }
        c if *c == SqlState::TOO_MANY_CONNECTIONS => {
            "the server has no connection to spare: give the stores smaller pools, or raise \
             its max_connections"
        }
        _ => "PostgreSQL failed",
    };
    storage(&format!("{target}: {advice}"), error)
}

/// Every row `sql` selects with `params`; the statement is prepared once
/// per connection.
async fn select(
    db: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = db.prepare_cached(sql).await?;
    db.query(&statement, params).await
}

/// Runs `sql` with `params`, prepared once per connection; how many rows
/// it changed.
async fn execute(
    db: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let statement = db.prepare_cached(sql).await?;
    db.execute(&statement, params).await
}

/// Creates the conversation's row if it has none, with `title`; else
/// marks it updated (and titles it if it had no title). The row stays
/// locked until the transaction ends, so appends to one conversation take
/// turns and number their messages without gaps or clashes.
async fn ensure_conversation(
    tx: &Transaction<'_>,
    conversation: &str,
    title: Option<&str>,
    time: i64,
) -> Result<(), tokio_postgres::Error> {
    execute(
        tx,
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES ($1, $2, $3, $3)
         ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at,
             title = coalesce(conversations.title, excluded.title)",
        &[&conversation, &title, &time],
    )
    .await?;
    Ok(())
}

/// Appends `messages` to the conversation inside `tx`, their images kept
/// apart (see [`put_image`]).
async fn append_in(
    tx: &Transaction<'_>,
    conversation: &str,
    messages: &[Message],
) -> Result<(), Fail> {
    let time = now();
    let title = title_of(messages).map(storable);
    ensure_conversation(tx, conversation, title.as_deref(), time).await?;
    let next: i64 = tx
        .query_one(
            "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE conversation = $1",
            &[&conversation],
        )
        .await?
        .try_get(0)?;
    for (offset, message) in messages.iter().enumerate() {
        // A copy whose images name their rows; cheap, image bytes being shared.
        let mut message = message.clone();
        let images = store_images(tx, &mut message, time).await?;
        let body = serde_json::to_string(&message)
            .map_err(|e| storage("could not encode a message", e))?;
        let row = select(
            tx,
            "INSERT INTO messages (conversation, seq, role, body, search_text, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            &[
                &conversation,
                &(next + offset as i64),
                &role_name(message.role),
                &body,
                &storable(searchable_text(&message)),
                &time,
            ],
        )
        .await?;
        let id: i64 = row.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
        link_images(tx, id, &images).await?;
    }
    Ok(())
}

/// `text` as a `TEXT` column can hold it: PostgreSQL refuses the NUL
/// character, which a tool's output may contain. Only for what is derived
/// from a message (its title, its searchable text): the message itself is
/// kept whole, as JSON escapes NUL.
fn storable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', " ")
    } else {
        text
    }
}

/// Stores an image once: the id of the row holding these bytes of this
/// media type, inserted if no row does. The row found is locked against a
/// concurrent delete until the transaction ends.
async fn put_image(
    tx: &Transaction<'_>,
    media_type: &str,
    data: &[u8],
    time: i64,
) -> Result<String, tokio_postgres::Error> {
    let key = image_key(media_type, data);
    let size = i64::try_from(data.len()).unwrap_or(i64::MAX);
    let mut probe: u64 = 0;
    loop {
        let id = if probe == 0 {
            key.clone()
        } else {
            format!("{key}-{probe}")
        };
        let inserted = execute(
            tx,
            "INSERT INTO images (id, media_type, size, data, created_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
            &[&id, &media_type, &size, &data, &time],
        )
        .await?;
        if inserted == 1 {
            return Ok(id);
        }
        let same = select(
            tx,
            "SELECT media_type = $2 AND size = $3 AND data = $4 FROM images WHERE id = $1 FOR SHARE",
            &[&id, &media_type, &size, &data],
        )
        .await?;
        match same
            .first()
            .map(|row| row.try_get::<_, bool>(0))
            .transpose()?
        {
            Some(true) => return Ok(id),
            // Another image under the same key: try the next.
            Some(false) => probe += 1,
            // Deleted since the insert found it: insert it again.
            None => {}
        }
    }
}

/// Moves the bytes of a message's images into the images table, each
/// `Image::Bytes` becoming the `Image::Stored` that names its row. Returns
/// the ids of the rows it now shows, an image it already named as stored
/// included.
async fn store_images(
    tx: &Transaction<'_>,
    message: &mut Message,
    time: i64,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut ids = Vec::new();
    for image in message.images_mut() {
        match image {
            Image::Bytes { media_type, data } => {
                let id = put_image(tx, media_type, data, time).await?;
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
async fn link_images(
    tx: &Transaction<'_>,
    message: i64,
    images: &[String],
) -> Result<(), tokio_postgres::Error> {
    if images.is_empty() {
        return Ok(());
    }
    execute(
        tx,
        "INSERT INTO message_images (message, image)
         SELECT $1, id FROM images WHERE id = ANY($2) ON CONFLICT DO NOTHING",
        &[&message, &images],
    )
    .await?;
    Ok(())
}

/// The images shown by the messages of `conversation` from `seq` on: those
/// that may have no message left once these go.
async fn images_from(
    tx: &Transaction<'_>,
    conversation: &str,
    seq: i64,
) -> Result<Vec<String>, tokio_postgres::Error> {
    select(
        tx,
        "SELECT DISTINCT mi.image FROM message_images mi JOIN messages m ON m.id = mi.message
         WHERE m.conversation = $1 AND m.seq >= $2",
        &[&conversation, &seq],
    )
    .await?
    .iter()
    .map(|row| row.try_get(0))
    .collect()
}

/// Deletes those of `images` no message shows any more, in the transaction
/// that deleted the messages: an image lives exactly as long as the last
/// message showing it, in any conversation.
async fn drop_unshown(
    tx: &Transaction<'_>,
    images: &[String],
) -> Result<(), tokio_postgres::Error> {
    if images.is_empty() {
        return Ok(());
    }
    execute(
        tx,
        "DELETE FROM images i WHERE i.id = ANY($1)
         AND NOT EXISTS (SELECT 1 FROM message_images WHERE image = i.id)",
        &[&images],
    )
    .await?;
    Ok(())
}

/// Keeps (`Some`, the pending turn's serde form) or forgets the
/// conversation's pending turn inside `tx`.
async fn set_pending_in(
    tx: &Transaction<'_>,
    conversation: &str,
    body: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    match body {
        Some(body) => {
            let time = now();
            ensure_conversation(tx, conversation, None, time).await?;
            execute(
                tx,
                "INSERT INTO pending_turns (conversation, body, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (conversation) DO UPDATE SET body = excluded.body,
                     created_at = excluded.created_at",
                &[&conversation, &body, &time],
            )
            .await?;
        }
        None => {
            execute(
                tx,
                "DELETE FROM pending_turns WHERE conversation = $1",
                &[&conversation],
            )
            .await?;
        }
    }
    Ok(())
}

/// Records `mark` for journaled message `id` inside `tx`; a delivered
/// entry stays delivered (but takes a reply's id).
async fn mark_in(tx: &Transaction<'_>, id: &str, mark: &Mark) -> Result<(), Fail> {
    let time = now();
    match mark {
        Mark::Started { conversation } => {
            execute(
                tx,
                "UPDATE journal SET stage = 'started', conversation = $2, calling = NULL,
                     updated_at = $3 WHERE id = $1 AND stage <> 'delivered'",
                &[&id, conversation, &time],
            )
            .await?
        }
        Mark::Calling(message) => {
            let body = serde_json::to_string(message)
                .map_err(|e| storage("could not encode running calls", e))?;
            execute(
                tx,
                "UPDATE journal SET calling = $2, updated_at = $3
                 WHERE id = $1 AND stage <> 'delivered'",
                &[&id, &body, &time],
            )
            .await?
        }
        Mark::Reply(reply) => {
            execute(
                tx,
                "UPDATE journal SET reply = $2, updated_at = $3 WHERE id = $1",
                &[&id, reply, &time],
            )
            .await?
        }
        Mark::Answered { text } => {
            execute(
                tx,
                "UPDATE journal SET stage = 'answered', answer = $2, calling = NULL,
                     updated_at = $3 WHERE id = $1 AND stage <> 'delivered'",
                &[&id, text, &time],
            )
            .await?
        }
        Mark::Delivered => {
            execute(
                tx,
                "UPDATE journal SET stage = 'delivered', calling = NULL, updated_at = $2
                 WHERE id = $1",
                &[&id, &time],
            )
            .await?
        }
    };
    Ok(())
}

/// A schedule from a row of [`SCHEDULE_COLUMNS`].
#[cfg(feature = "schedule")]
fn schedule_from(row: &Row) -> Result<Schedule, Fail> {
    ScheduleRow {
        id: row.try_get(0)?,
        conversation: row.try_get(1)?,
        prompt: row.try_get(2)?,
        recurrence: row.try_get(3)?,
        next_due: row.try_get(4)?,
        created_at: row.try_get(5)?,
        last_run: row.try_get(6)?,
        last_error: row.try_get(7)?,
        attempts: row.try_get(8)?,
    }
    .read()
    .map_err(unreadable)
}

/// A journaled message from a row of [`INTAKE_COLUMNS`].
fn intake_from(row: &Row) -> Result<Intake, Fail> {
    IntakeRow {
        id: row.try_get(0)?,
        chat: row.try_get(1)?,
        payload: row.try_get(2)?,
        stage: row.try_get(3)?,
        conversation: row.try_get(4)?,
        calling: row.try_get(5)?,
        reply: row.try_get(6)?,
        answer: row.try_get(7)?,
        received_at: row.try_get(8)?,
    }
    .read()
    .map_err(unreadable)
}

/// A row [`ScheduleRow::read`] or [`IntakeRow::read`] refused.
fn unreadable((_, what): (usize, String)) -> Fail {
    Fail::History(HistoryError::Storage {
        message: what,
        source: None,
    })
}

#[cfg(feature = "schedule")]
fn later_from(row: &Row) -> Result<LaterMessage, Fail> {
    Ok(LaterMessage {
        id: row.try_get::<_, i64>(0)? as u64,
        conversation: row.try_get(1)?,
        text: row.try_get(2)?,
        due: from_secs(row.try_get(3)?),
    })
}

/// An id as PostgreSQL keeps it; one past `i64::MAX` names no row.
#[cfg(feature = "schedule")]
fn row_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(-1)
}

/// A value's serde JSON text, as the tables keep it.
fn encode<T: serde::Serialize>(value: &T, what: &str) -> Result<String, Fail> {
    serde_json::to_string(value)
        .map_err(|e| Fail::History(storage(&format!("could not encode {what}"), e)))
}

impl HistoryStore for PostgresHistory {
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT seq, body FROM messages WHERE conversation = $1 ORDER BY seq",
                    &[&conversation],
                )
                .await?;
            let mut messages = Vec::with_capacity(rows.len());
            for row in rows {
                let seq: i64 = row.try_get(0)?;
                let body: &str = row.try_get(1)?;
                messages.push(message_from(conversation, seq, body)?);
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

    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let images = images_from(&tx, conversation, 0).await?;
            execute(
                &tx,
                "DELETE FROM conversations WHERE id = $1",
                &[&conversation],
            )
            .await?;
            drop_unshown(&tx, &images).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<ConversationInfo>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT c.id, c.title, c.created_at, c.updated_at,
                        (SELECT count(*) FROM messages m WHERE m.conversation = c.id)
                 FROM conversations c ORDER BY c.updated_at DESC, c.id",
                    &[],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(ConversationInfo {
                        id: row.try_get(0)?,
                        title: row.try_get(1)?,
                        created: row.try_get(2)?,
                        updated: row.try_get(3)?,
                        messages: row.try_get::<_, i64>(4)? as usize,
                    })
                })
                .collect()
        })
    }

    fn truncate<'a>(
        &'a self,
        conversation: &'a str,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // Locks the conversation first, as `append` does, so that the
            // two take turns.
            let locked = select(
                &tx,
                "SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE",
                &[&conversation],
            )
            .await?;
            if locked.is_empty() {
                return Ok(());
            }
            // The `keep`-th message's sequence number, if there are more.
            let cut = select(
                &tx,
                "SELECT seq FROM messages WHERE conversation = $1 ORDER BY seq OFFSET $2 LIMIT 1",
                &[&conversation, &i64::try_from(keep).unwrap_or(i64::MAX)],
            )
            .await?;
            let Some(cut) = cut
                .first()
                .map(|row| row.try_get::<_, i64>(0))
                .transpose()?
            else {
                return Ok(());
            };
            let images = images_from(&tx, conversation, cut).await?;
            if keep == 0 {
                // Nothing left: the conversation goes, title and all.
                execute(
                    &tx,
                    "DELETE FROM conversations WHERE id = $1",
                    &[&conversation],
                )
                .await?;
            } else {
                execute(
                    &tx,
                    "DELETE FROM messages WHERE conversation = $1 AND seq >= $2",
                    &[&conversation, &cut],
                )
                .await?;
                execute(
                    &tx,
                    "UPDATE conversations SET updated_at = $2 WHERE id = $1",
                    &[&conversation, &now()],
                )
                .await?;
            }
            drop_unshown(&tx, &images).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn load_image<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Image, HistoryError>> {
        self.run(async move {
            let rows = self
                .query("SELECT media_type, data FROM images WHERE id = $1", &[&id])
                .await?;
            let Some(row) = rows.first() else {
                return Err(Fail::History(HistoryError::ImageNotFound {
                    id: id.to_owned(),
                }));
            };
            Ok(Image::new(
                row.try_get::<_, String>(0)?,
                row.try_get::<_, Vec<u8>>(1)?,
            ))
        })
    }

    fn approvals<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Approval>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT body FROM approvals WHERE conversation = $1 ORDER BY id",
                    &[&conversation],
                )
                .await?;
            let mut approvals = Vec::with_capacity(rows.len());
            for row in &rows {
                // One this version can't read is skipped: the user is asked
                // again, which is the safe side.
                if let Ok(approval) = serde_json::from_str(row.try_get(0)?) {
                    approvals.push(approval);
                }
            }
            Ok(approvals)
        })
    }

    fn add_approval<'a>(
        &'a self,
        conversation: &'a str,
        approval: &'a Approval,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let body = encode(approval, "an approval")?;
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let time = now();
            ensure_conversation(&tx, conversation, None, time).await?;
            execute(
                &tx,
                "INSERT INTO approvals (conversation, body, created_at) VALUES ($1, $2, $3)",
                &[&conversation, &body, &time],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn pending<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<PendingTurn>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT body FROM pending_turns WHERE conversation = $1",
                    &[&conversation],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            Ok(Some(pending_from(conversation, row.try_get(0)?)?))
        })
    }

    fn set_pending<'a>(
        &'a self,
        conversation: &'a str,
        pending: Option<&'a PendingTurn>,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let body = pending
                .map(|pending| encode(pending, "a pending turn"))
                .transpose()?;
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            set_pending_in(&tx, conversation, body.as_deref()).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn settle_pending<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.store_messages(conversation, messages, Also::ForgetPending)
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, HistoryError>> {
        self.run(async move {
            if query.trim().is_empty() {
                return Ok(Vec::new());
            }
            let client = self.client().await?;
            // `plainto_tsquery`: every word must match, and punctuation
            // (`C++`, quotes) is never query syntax, as SQLite's quoted terms.
            let rows = select(
                &client,
                "SELECT m.conversation, m.seq, m.role,
                        ts_headline('simple', m.search_text, q,
                            'StartSel=\"[\", StopSel=\"]\", MaxWords=12, MinWords=6, ShortWord=0')
                 FROM messages m, plainto_tsquery('simple', $1) q
                 WHERE m.search @@ q
                 ORDER BY ts_rank(m.search, q) DESC, m.id
                 LIMIT $2",
                &[&query, &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await?;
            rows.iter()
                .map(|row| {
                    Ok(SearchHit {
                        conversation: row.try_get(0)?,
                        index: row.try_get::<_, i64>(1)? as usize,
                        role: role_from(row.try_get(2)?),
                        snippet: row.try_get(3)?,
                    })
                })
                .collect()
        })
    }

    #[cfg(feature = "schedule")]
    fn add_schedule<'a>(
        &'a self,
        schedule: &'a Schedule,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        self.run(async move {
            let recurrence = encode(&schedule.recurrence, "a recurrence")?;
            let rows = self
                .query(
                    "INSERT INTO schedules (conversation, prompt, recurrence, next_due, created_at)
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    &[
                        &schedule.conversation,
                        &schedule.prompt,
                        &recurrence,
                        &schedule.next_due.map(to_secs),
                        &to_secs(schedule.created),
                    ],
                )
                .await?;
            let id: i64 = rows.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
            Ok(id as u64)
        })
    }

    #[cfg(feature = "schedule")]
    fn schedules<'a>(
        &'a self,
        conversation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Schedule>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    &format!(
                        "SELECT {SCHEDULE_COLUMNS} FROM schedules
                     WHERE $1::TEXT IS NULL OR conversation = $1 ORDER BY id"
                    ),
                    &[&conversation],
                )
                .await?;
            rows.iter().map(schedule_from).collect()
        })
    }

    #[cfg(feature = "schedule")]
    fn remove_schedule(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.run(async move {
            let removed = self
                .change("DELETE FROM schedules WHERE id = $1", &[&row_id(id)])
                .await?;
            Ok(removed > 0)
        })
    }

    #[cfg(feature = "schedule")]
    fn due_schedules(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<Schedule>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    &format!(
                        "SELECT {SCHEDULE_COLUMNS} FROM schedules
                     WHERE next_due IS NOT NULL AND next_due <= $1 ORDER BY next_due, id"
                    ),
                    &[&to_secs(now)],
                )
                .await?;
            rows.iter().map(schedule_from).collect()
        })
    }

    /// One `UPDATE … WHERE next_due IS NOT DISTINCT FROM $from`: of two
    /// claims at once, the second waits for the first's row lock, then
    /// finds the due time moved and changes nothing.
    fn lock_turn<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<super::TurnGuard>, HistoryError>> {
        self.run(async move {
            let lease = lease::Lease::take(self, conversation).await?;
            Ok(Some(Box::new(lease) as super::TurnGuard))
        })
    }

    #[cfg(feature = "schedule")]
    fn claim_schedule(
        &self,
        id: u64,
        from: Option<SystemTime>,
        to: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.run(async move {
            let claimed = self
                .change(
                    "UPDATE schedules SET next_due = $3
                 WHERE id = $1 AND next_due IS NOT DISTINCT FROM $2",
                    &[&row_id(id), &from.map(to_secs), &to.map(to_secs)],
                )
                .await?;
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
        self.run(async move {
            self.change(
                "UPDATE schedules SET last_run = $2, last_error = $3, attempts = $4 WHERE id = $1",
                &[&row_id(id), &to_secs(at), &error, &i64::from(attempts)],
            )
            .await?;
            Ok(())
        })
    }

    #[cfg(feature = "schedule")]
    fn add_later_message<'a>(
        &'a self,
        message: &'a LaterMessage,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "INSERT INTO later_messages (conversation, text, due, created_at)
                 VALUES ($1, $2, $3, $4) RETURNING id",
                    &[
                        &message.conversation,
                        &message.text,
                        &to_secs(message.due),
                        &now(),
                    ],
                )
                .await?;
            let id: i64 = rows.first().map(|r| r.try_get(0)).transpose()?.unwrap_or(0);
            Ok(id as u64)
        })
    }

    #[cfg(feature = "schedule")]
    fn due_later_messages(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<LaterMessage>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT id, conversation, text, due FROM later_messages
                 WHERE due <= $1 ORDER BY due, id",
                    &[&to_secs(now)],
                )
                .await?;
            rows.iter().map(later_from).collect()
        })
    }

    #[cfg(feature = "schedule")]
    fn take_later_message(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        self.run(async move {
            let taken = self
                .change("DELETE FROM later_messages WHERE id = $1", &[&row_id(id)])
                .await?;
            Ok(taken > 0)
        })
    }

    #[cfg(feature = "schedule")]
    fn next_due(&self) -> BoxFuture<'_, Result<Option<SystemTime>, HistoryError>> {
        self.run(async move {
            let client = self.client().await?;
            // `least` skips NULLs: either table may be empty.
            let rows = select(
                &client,
                "SELECT least((SELECT min(next_due) FROM schedules),
                              (SELECT min(due) FROM later_messages))",
                &[],
            )
            .await?;
            let next: Option<i64> = rows.first().map(|r| r.try_get(0)).transpose()?.flatten();
            Ok(next.map(from_secs))
        })
    }

    fn receive<'a>(&'a self, intake: &'a Intake) -> BoxFuture<'a, Result<bool, HistoryError>> {
        self.run(async move {
            replica::join(self).await?;
            let added = self.change(
                "INSERT INTO journal (id, chat, payload, stage, conversation, reply, received_at, updated_at, owner)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
                &[
                    &intake.id,
                    &intake.chat,
                    &intake.payload,
                    &intake.stage.as_str(),
                    &intake.conversation,
                    &intake.reply,
                    &to_secs(intake.received),
                    &now(),
                    &self.inner.owner,
                ],
            )
            .await?;
            Ok(added == 1)
        })
    }

    fn intake<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Intake>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    &format!("SELECT {INTAKE_COLUMNS} FROM journal WHERE id = $1"),
                    &[&id],
                )
                .await?;
            rows.first().map(intake_from).transpose()
        })
    }

    fn unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        self.run(async move {
            let rows = self.query(
                &format!(
                    "SELECT {INTAKE_COLUMNS} FROM journal WHERE stage <> 'delivered' ORDER BY seq"
                ),
                &[],
            )
            .await?;
            rows.iter().map(intake_from).collect()
        })
    }

    fn claim_unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        self.run(replica::claim(self))
    }

    fn started_in<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, HistoryError>> {
        self.run(async move {
            let rows = self
                .query(
                    "SELECT id FROM journal WHERE conversation = $1 AND stage = 'started'",
                    &[&conversation],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?)
        })
    }

    fn mark<'a>(&'a self, id: &'a str, mark: &'a Mark) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.run(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            mark_in(&tx, id, mark).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn append_marked<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
        id: &'a str,
        mark: &'a Mark,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.store_messages(conversation, messages, Also::Mark(id, mark))
    }

    fn forget_delivered(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, HistoryError>> {
        self.run(async move {
            let forgotten = self
                .change(
                    "DELETE FROM journal WHERE stage = 'delivered' AND received_at < $1",
                    &[&to_secs(before)],
                )
                .await?;
            Ok(forgotten)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lock_timeout_itself_counts_as_set_by_the_url() {
        for set in [
            "-c lock_timeout=10s",
            "-c search_path=bot -c lock_timeout=0",
            "--lock_timeout=1s",
            "-clock_timeout=2s",
        ] {
            assert!(sets_lock_timeout(set), "{set}");
        }
        for unset in [
            "",
            "-c deadlock_timeout=1s",
            "-c search_path=bot",
            "-c idle_in_transaction_session_timeout=5s",
        ] {
            assert!(!sets_lock_timeout(unset), "{unset}");
        }
    }

    #[test]
    fn passwords_are_redacted_in_every_form() {
        for (url, shown) in [
            (
                "postgres://bot:s3cret@db.example.com:5432/ferrobot?sslmode=require",
                "postgres://bot:***@db.example.com:5432/ferrobot?sslmode=require",
            ),
            ("postgresql://bot:p@ss@db/x", "postgresql://bot:***@db/x"),
            ("postgres://bot@db/x", "postgres://bot@db/x"),
            (
                "postgres://db/x?password=s3cret&sslmode=disable",
                "postgres://db/x?password=***&sslmode=disable",
            ),
            (
                "host=db user=bot password=s3cret dbname=x",
                "host=db user=bot password=*** dbname=x",
            ),
            (
                "host=db password='s3 \\'cret' dbname=x",
                "host=db password=*** dbname=x",
            ),
            ("host=db xpassword=visible", "host=db xpassword=visible"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[tokio::test]
    async fn a_url_that_cant_be_read_is_refused_without_its_password() {
        let error = PostgresHistory::connect("postgres://bot:s3cret@db/x?sslmode=bogus")
            .await
            .unwrap_err();
        let text = format!("{} {error:?}", error.chain());
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("postgres://bot:***@db/x"), "{text}");
    }
}
