//! The history store `[history]` names: a SQLite file, for one bot
//! process, or a PostgreSQL database that several replicas share.

use std::sync::Arc;

#[cfg(feature = "postgres")]
use ferrobot::history::PostgresHistory;
use ferrobot::history::{HistoryStore, SqliteHistory};

use crate::LoadedConfig;

/// An opened history store, of the kind `[history]` names.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Store {
    /// `[history] path` (or the default file).
    Sqlite(SqliteHistory),
    /// `[history] url`.
    #[cfg(feature = "postgres")]
    Postgres(PostgresHistory),
}

impl Store {
    /// The store behind a shared handle, for what only reads and writes it.
    pub fn shared(&self) -> Arc<dyn HistoryStore> {
        match self {
            Self::Sqlite(store) => Arc::new(store.clone()),
            #[cfg(feature = "postgres")]
            Self::Postgres(store) => Arc::new(store.clone()),
        }
    }
}

impl LoadedConfig {
    /// Where the history is kept, for people: `history file: PATH`, or
    /// `history database: URL` without its password.
    pub fn history_place(&self) -> String {
        match &self.config.history.url {
            Some(url) => format!("history database: {}", url.shown()),
            None => format!("history file: {}", self.history_path().display()),
        }
    }

    /// Opens the history `[history]` names: the database at `url` (its
    /// schema brought up to date), else the SQLite file at `path`.
    ///
    /// # Errors
    /// When the store can't be opened: the message says which (a database
    /// without its password) and why.
    pub async fn open_history(&self) -> Result<Store, ferrobot::BoxError> {
        let history = &self.config.history;
        if let Some(url) = &history.url {
            #[cfg(feature = "postgres")]
            {
                let size = history
                    .pool_size
                    .unwrap_or(PostgresHistory::DEFAULT_POOL_SIZE);
                return PostgresHistory::connect_with(url.expose(), size)
                    .await
                    .map(Store::Postgres)
                    .map_err(|e| format!("opening the history database: {e}").into());
            }
            #[cfg(not(feature = "postgres"))]
            {
                // `validate` refuses such a config; a hand-built one lands here.
                let _ = url;
                return Err(crate::config::no_postgres().to_string().into());
            }
        }
        let path = self.history_path();
        SqliteHistory::open(&path)
            .await
            .map(Store::Sqlite)
            .map_err(|e| format!("opening the history at {}: {e}", path.display()).into())
    }
}
