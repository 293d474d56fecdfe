//! Secrets from config or environment, hidden by their types.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// A secret from config or environment (an API key, a bot token): never
/// printed. Its `Debug` shows `[redacted]` and it serializes as `[redacted]`,
/// so a config written out anywhere (`config check`, a log line) can't carry
/// it, whatever the key holding it is called.
///
/// # Examples
/// ```
/// let secret = ferrobot_app::Secret::new("sk-123");
/// assert_eq!(format!("{secret:?}"), "[redacted]");
/// assert_eq!(serde_json::to_string(&secret).unwrap(), r#""[redacted]""#);
/// assert_eq!(secret.expose(), "sk-123");
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

/// What a secret shows instead of itself.
const REDACTED: &str = "[redacted]";

impl Secret {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this secret, compared in constant time so the
    /// time taken tells nothing of how much of it matched.
    ///
    /// # Examples
    /// ```
    /// let secret = ferrobot_app::Secret::new("s3cret");
    /// assert!(secret.matches(b"s3cret"));
    /// assert!(!secret.matches(b"s3cre"));
    /// ```
    pub fn matches(&self, given: &[u8]) -> bool {
        let secret = self.0.as_bytes();
        given.len() == secret.len()
            && given
                .iter()
                .zip(secret)
                .fold(0, |differ, (a, b)| differ | (a ^ b))
                == 0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

/// A database URL from config or environment: shown (in `config check`, in
/// `Debug`) without its password, so a reader sees which database without
/// learning how to log in.
///
/// # Examples
/// ```
/// let url = ferrobot_app::DatabaseUrl::new("postgres://bot:s3cret@db/ferrobot");
/// assert!(!format!("{url:?}").contains("s3cret"));
/// assert!(!serde_json::to_string(&url).unwrap().contains("s3cret"));
/// assert_eq!(url.expose(), "postgres://bot:s3cret@db/ferrobot");
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL itself, password included, for the one place that connects.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL without its password. A build without PostgreSQL can't
    /// read the URL's forms, and shows none of it.
    pub fn shown(&self) -> String {
        #[cfg(feature = "postgres")]
        return ferrobot::history::PostgresHistory::redact(&self.0);
        #[cfg(not(feature = "postgres"))]
        REDACTED.to_owned()
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Serialize for DatabaseUrl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.shown())
    }
}
