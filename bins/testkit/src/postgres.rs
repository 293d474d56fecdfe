//! A real PostgreSQL server for the tests: the one named by
//! `FERROBOT_TEST_POSTGRES_URL` (`.ci/postgres` starts one), each test in
//! a database of its own, so that tests run in parallel.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The variable naming the test server; its role may create databases.
pub const SERVER: &str = "FERROBOT_TEST_POSTGRES_URL";

/// A database of its own for one test, on the test server.
#[derive(Debug)]
pub struct Database {
    /// The server's URL, connected to its `postgres` database.
    pub server: String,
    /// The database's name.
    pub name: String,
}

impl Database {
    /// A new, empty database; `None` after a loud skip when no server is
    /// named outside CI, a failure under CI (`ferrobot_testkit::outside`).
    pub async fn new() -> Option<Self> {
        let Ok(server) = std::env::var(SERVER) else {
            crate::outside::missing(&format!(
                "no PostgreSQL server: {SERVER} is not set (`. .ci/postgres; postgres_start` \
                 starts one and sets it)"
            ));
            return None;
        };
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "ferrobot_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let database = Self { server, name };
        database
            .sql(&format!("CREATE DATABASE {}", database.name))
            .await;
        Some(database)
    }

    /// The database's URL: the server's, its database name replaced.
    pub fn url(&self) -> String {
        let (base, query) = self
            .server
            .split_once('?')
            .map_or((self.server.as_str(), ""), |(b, q)| (b, q));
        let base = base.rsplit_once('/').unwrap().0;
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        format!("{base}/{}{query}", self.name)
    }

    /// Runs `sql` on the server's `postgres` database.
    pub async fn sql(&self, sql: &str) {
        run_sql(&self.server, sql).await;
    }

    /// Runs `sql` in this database, as an outsider would.
    pub async fn sql_here(&self, sql: &str) {
        run_sql(&self.url(), sql).await;
    }

    /// A connection of its own to this database, as another program's:
    /// what it holds (a lock, an open transaction) it holds until dropped.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }

    /// Removes the database, whoever is still connected.
    pub async fn remove(self) {
        self.sql(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .await;
    }
}

/// Runs `sql` (statements separated by `;`) on the database at `url`.
pub async fn run_sql(url: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = connection.await;
}
