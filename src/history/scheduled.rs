//! Scheduled prompts and later messages, as the stores keep them.
//!
//! Plain records, with the `schedule` feature: the stores keep them, and
//! its `Scheduler` runs them. Times are kept to the second.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{from_secs, human_interval, to_secs, whole_secs};

/// When a scheduled prompt runs.
///
/// Build a checked one with `Recurrence::cron`, `Recurrence::every` or
/// `Recurrence::once` (feature `schedule`), which say what to write when
/// the input is wrong.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::history::Recurrence;
/// let hourly = Recurrence::Every(Duration::from_secs(3600));
/// assert_eq!(hourly.to_string(), "every 1h");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Recurrence {
    /// At the times a five-field cron expression (minute hour day month
    /// weekday) names, read in a time zone.
    Cron {
        /// The expression, e.g. `0 8 * * *`.
        expr: String,
        /// The IANA time zone it is read in, e.g. `Europe/Paris`.
        zone: String,
    },
    /// Every so often, counted from when the schedule was made. Whole
    /// seconds.
    Every(#[serde(with = "secs")] Duration),
    /// Once, at this time.
    Once(#[serde(with = "unix")] SystemTime),
}

impl std::fmt::Display for Recurrence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recurrence::Cron { expr, zone } => write!(f, "cron `{expr}` ({zone})"),
            Recurrence::Every(interval) => write!(f, "every {}", human_interval(*interval)),
            Recurrence::Once(at) => write!(f, "once at {}s since the Unix epoch", to_secs(*at)),
        }
    }
}

/// A prompt the agent runs on a schedule, as a turn of the conversation
/// that made it, its answer posted to that conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Schedule {
    /// The store's id for it; [`add_schedule`](super::HistoryStore::add_schedule)
    /// assigns it and ignores the one it is given.
    pub id: u64,
    /// The conversation that made it, whose turn it runs.
    pub conversation: String,
    /// What is asked at each run.
    pub prompt: String,
    /// When it runs.
    pub recurrence: Recurrence,
    /// When it runs next; `None` once a run is claimed that has no next
    /// (a [`Recurrence::Once`]).
    #[serde(with = "unix_opt")]
    pub next_due: Option<SystemTime>,
    /// When it was made.
    #[serde(with = "unix")]
    pub created: SystemTime,
    /// When it last ran.
    #[serde(with = "unix_opt")]
    pub last_run: Option<SystemTime>,
    /// Why its last run failed; `None` when it succeeded or never ran.
    pub last_error: Option<String>,
    /// Failed attempts at the run now due (retries), from 0.
    pub attempts: u32,
}

impl Schedule {
    /// A schedule not yet stored (its id is 0), first due at `next_due`.
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use ferrobot::history::{Recurrence, Schedule};
    /// let now = SystemTime::now();
    /// let daily = Recurrence::Every(Duration::from_secs(86_400));
    /// let schedule = Schedule::new("alice", "report the disk usage", daily, now, now);
    /// assert_eq!(schedule.attempts, 0);
    /// ```
    pub fn new(
        conversation: impl Into<String>,
        prompt: impl Into<String>,
        recurrence: Recurrence,
        next_due: SystemTime,
        created: SystemTime,
    ) -> Self {
        Self {
            id: 0,
            conversation: conversation.into(),
            prompt: prompt.into(),
            recurrence,
            next_due: Some(whole_secs(next_due)),
            created: whole_secs(created),
            last_run: None,
            last_error: None,
            attempts: 0,
        }
    }
}

/// A message to send to a conversation at a given time
/// ([`ToolContext::notify_later`](crate::ToolContext::notify_later)), kept
/// until it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LaterMessage {
    /// The store's id for it.
    pub id: u64,
    /// Where it goes.
    pub conversation: String,
    /// What it says.
    pub text: String,
    /// When it is to be sent.
    #[serde(with = "unix")]
    pub due: SystemTime,
}

impl LaterMessage {
    /// A message not yet stored (its id is 0).
    ///
    /// # Examples
    /// ```
    /// use std::time::SystemTime;
    /// let message = ferrobot::history::LaterMessage::new("alice", "Rebooting now.", SystemTime::now());
    /// assert_eq!(message.text, "Rebooting now.");
    /// ```
    pub fn new(conversation: impl Into<String>, text: impl Into<String>, due: SystemTime) -> Self {
        Self {
            id: 0,
            conversation: conversation.into(),
            text: text.into(),
            due: whole_secs(due),
        }
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

mod unix {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(super::to_secs(*t))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        i64::deserialize(d).map(super::from_secs)
    }
}

mod unix_opt {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option, reason = "serde's `with` hands a reference")]
    pub(super) fn serialize<S: Serializer>(
        t: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&super::to_secs(*t)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        Option::<i64>::deserialize(d).map(|t| t.map(super::from_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recurrences_keep_their_serde_form() {
        let every = Recurrence::Every(Duration::from_secs(90));
        assert_eq!(serde_json::to_string(&every).unwrap(), r#"{"every":90}"#);
        let cron = Recurrence::Cron {
            expr: "0 8 * * *".into(),
            zone: "UTC".into(),
        };
        assert_eq!(
            serde_json::to_string(&cron).unwrap(),
            r#"{"cron":{"expr":"0 8 * * *","zone":"UTC"}}"#
        );
        let once = Recurrence::Once(from_secs(1_800_000_000));
        assert_eq!(
            serde_json::to_string(&once).unwrap(),
            r#"{"once":1800000000}"#
        );
        for r in [every, cron, once] {
            let back: Recurrence =
                serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(back, r);
        }
    }
}
