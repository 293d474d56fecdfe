//! Recurrences: checked constructors, the next due time, and reading
//! intervals and times the way people write them.

use std::time::{Duration, SystemTime};

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

use super::ScheduleError;
use crate::history::{Recurrence, whole_secs};

/// What a five-field cron expression looks like, for error messages.
const CRON_HINT: &str = "expected 5 fields (minute hour day month weekday), e.g. `0 8 * * *` for 8:00 every day, `*/15 * * * *` for every quarter hour, `0 9 * * MON-FRI` for 9:00 on weekdays";

impl Recurrence {
    /// At the times of a five-field cron expression (minute hour day month
    /// weekday; `@daily`, `@hourly` and the other nicknames too), read in
    /// the IANA time zone `zone`.
    ///
    /// # Errors
    /// [`ScheduleError::Cron`] for an expression that isn't one, saying
    /// what to write; [`ScheduleError::TimeZone`] for a zone the time zone
    /// database doesn't know.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::history::Recurrence;
    /// assert!(Recurrence::cron("0 8 * * *", "UTC").is_ok());
    /// let error = Recurrence::cron("0 8 * *", "UTC").unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "`0 8 * *` is not a cron expression: expected 5 fields (minute hour day month weekday), \
    ///      e.g. `0 8 * * *` for 8:00 every day, `*/15 * * * *` for every quarter hour, \
    ///      `0 9 * * MON-FRI` for 9:00 on weekdays"
    /// );
    /// ```
    pub fn cron(expr: &str, zone: &str) -> Result<Self, ScheduleError> {
        let expr = expr.trim();
        parse_cron(expr)?;
        time_zone(zone)?;
        Ok(Recurrence::Cron {
            expr: expr.to_owned(),
            zone: zone.to_owned(),
        })
    }

    /// Every `interval` (whole seconds, at least one), counted from when the
    /// schedule is made.
    ///
    /// # Errors
    /// [`ScheduleError::Invalid`] for an interval under a second.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ferrobot::history::Recurrence;
    /// let every = Recurrence::every(Duration::from_millis(90_500)).unwrap();
    /// assert_eq!(every, Recurrence::Every(Duration::from_secs(90)));
    /// assert!(Recurrence::every(Duration::ZERO).is_err());
    /// ```
    pub fn every(interval: Duration) -> Result<Self, ScheduleError> {
        if interval.as_secs() == 0 {
            return Err(ScheduleError::Invalid(
                "an interval must be at least one second".into(),
            ));
        }
        Ok(Recurrence::Every(Duration::from_secs(interval.as_secs())))
    }

    /// Once, at `at` (to the second).
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use ferrobot::history::Recurrence;
    /// let tomorrow = SystemTime::now() + Duration::from_secs(86_400);
    /// assert!(matches!(Recurrence::once(tomorrow), Recurrence::Once(_)));
    /// ```
    pub fn once(at: SystemTime) -> Self {
        Recurrence::Once(whole_secs(at))
    }

    /// Its first due time strictly after `after`, for a schedule made at
    /// `created` (an interval counts from there); `None` when it has none
    /// left (a [`Recurrence::Once`] past its time). Missed due times are
    /// skipped, not caught up one by one.
    ///
    /// # Errors
    /// When a stored cron expression or time zone can't be read (a zone
    /// removed from the time zone database, say).
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use ferrobot::history::Recurrence;
    /// let created = UNIX_EPOCH;
    /// let every = Recurrence::every(Duration::from_secs(60)).unwrap();
    /// let next = every.next_after(UNIX_EPOCH + Duration::from_secs(150), created).unwrap();
    /// assert_eq!(next, Some(UNIX_EPOCH + Duration::from_secs(180)));
    ///
    /// let daily = Recurrence::cron("0 8 * * *", "UTC").unwrap();
    /// let next = daily.next_after(UNIX_EPOCH, created).unwrap();
    /// assert_eq!(next, Some(UNIX_EPOCH + Duration::from_secs(8 * 3600)));
    /// ```
    pub fn next_after(
        &self,
        after: SystemTime,
        created: SystemTime,
    ) -> Result<Option<SystemTime>, ScheduleError> {
        match self {
            Recurrence::Cron { expr, zone } => {
                let cron = parse_cron(expr)?;
                let zone = time_zone(zone)?;
                let start = timestamp(after).to_zoned(zone);
                let next =
                    cron.find_next_occurrence(&start, false)
                        .map_err(|e| ScheduleError::Cron {
                            expr: expr.clone(),
                            why: format!("it has no next time ({e})"),
                        })?;
                Ok(Some(whole_secs(SystemTime::from(next.timestamp()))))
            }
            Recurrence::Every(interval) => {
                let step = interval.as_secs().max(1);
                let created = whole_secs(created);
                let since = after.duration_since(created).map_or(0, |d| d.as_secs());
                let steps = since / step + 1;
                Ok(Some(
                    created + Duration::from_secs(steps.saturating_mul(step)),
                ))
            }
            Recurrence::Once(at) => Ok((*at > after).then_some(*at)),
        }
    }

    /// How people read it, times in `zone`: `every day at 08:00` is
    /// written `cron 0 8 * * * (Europe/Paris)`, `every 1h`, `once at
    /// 2026-12-03 08:00 (Europe/Paris)`.
    pub(crate) fn describe(&self, zone: &TimeZone) -> String {
        match self {
            Recurrence::Cron { expr, zone } => format!("cron `{expr}` ({zone})"),
            Recurrence::Every(_) => self.to_string(),
            Recurrence::Once(at) => format!("once at {}", local(*at, zone)),
        }
    }
}

/// A cron expression of five fields (or a nickname such as `@daily`).
fn parse_cron(expr: &str) -> Result<Cron, ScheduleError> {
    let wrong = |why: String| ScheduleError::Cron {
        expr: expr.to_owned(),
        why,
    };
    if !expr.starts_with('@') && expr.split_whitespace().count() != 5 {
        return Err(wrong(CRON_HINT.to_owned()));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| wrong(format!("{e}; {CRON_HINT}")))
}

/// The IANA time zone `name`, from the system's time zone database.
pub(crate) fn time_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    TimeZone::get(name).map_err(|_| ScheduleError::TimeZone {
        zone: name.to_owned(),
    })
}

fn timestamp(time: SystemTime) -> Timestamp {
    Timestamp::try_from(time).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `time` on the wall clock of `zone`: `2026-12-03 08:00 (Europe/Paris)`.
pub(crate) fn local(time: SystemTime, zone: &TimeZone) -> String {
    let name = zone.iana_name().unwrap_or("UTC");
    format!(
        "{} ({name})",
        timestamp(time)
            .to_zoned(zone.clone())
            .strftime("%Y-%m-%d %H:%M")
    )
}

/// Reads an interval the way people write it: a number and a unit, or
/// several (`30m`, `1h30m`, `1d`, `2w`, `90s`; units s, m, h, d, w).
///
/// # Errors
/// [`ScheduleError::Interval`], saying what to write.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::schedule::parse_interval;
/// assert_eq!(parse_interval("1h30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(parse_interval("1d").unwrap(), Duration::from_secs(86_400));
/// assert!(parse_interval("daily").is_err());
/// ```
pub fn parse_interval(text: &str) -> Result<Duration, ScheduleError> {
    let wrong = || ScheduleError::Interval {
        text: text.to_owned(),
    };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return Err(wrong());
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in compact.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let size = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(wrong()),
        };
        let count: u64 = number.parse().map_err(|_| wrong())?;
        number.clear();
        total = count
            .checked_mul(size)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(wrong)?;
    }
    if !number.is_empty() || total == 0 {
        return Err(wrong());
    }
    Ok(Duration::from_secs(total))
}

/// Reads a time: RFC 3339 with its offset (`2026-12-03T08:00:00+01:00`,
/// `…Z`), or a wall-clock time in `zone` (`2026-12-03 08:00`,
/// `2026-12-03T08:00`).
///
/// # Errors
/// [`ScheduleError::Time`], saying what to write;
/// [`ScheduleError::TimeZone`] for an unknown zone.
///
/// # Examples
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use ferrobot::schedule::parse_time;
/// let at = parse_time("2026-12-03 08:00", "UTC").unwrap();
/// assert_eq!(at, UNIX_EPOCH + Duration::from_secs(1_796_284_800));
/// assert_eq!(parse_time("2026-12-03T09:00:00+01:00", "UTC").unwrap(), at);
/// ```
pub fn parse_time(text: &str, zone: &str) -> Result<SystemTime, ScheduleError> {
    let text = text.trim();
    if let Ok(at) = text.parse::<Timestamp>() {
        return Ok(whole_secs(SystemTime::from(at)));
    }
    let tz = time_zone(zone)?;
    let civil = text.parse::<DateTime>().map_err(|_| ScheduleError::Time {
        text: text.to_owned(),
        zone: zone.to_owned(),
    })?;
    let zoned = civil.to_zoned(tz).map_err(|_| ScheduleError::Time {
        text: text.to_owned(),
        zone: zone.to_owned(),
    })?;
    Ok(whole_secs(SystemTime::from(zoned.timestamp())))
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn cron_runs_in_its_time_zone() {
        // 8:00 in Paris is 7:00 UTC in winter.
        let daily = Recurrence::cron("0 8 * * *", "Europe/Paris").unwrap();
        let next = daily.next_after(at(0), at(0)).unwrap().unwrap();
        assert_eq!(next, at(7 * 3600));
        // Strictly after: at the due time itself, the next day's.
        let after = daily.next_after(next, at(0)).unwrap().unwrap();
        assert_eq!(after, at(86_400 + 7 * 3600));
    }

    #[test]
    fn wrong_cron_expressions_say_what_to_write() {
        let error = Recurrence::cron("0 8 * * * *", "UTC").unwrap_err();
        assert!(error.to_string().contains("expected 5 fields"), "{error}");
        let error = Recurrence::cron("0 25 * * *", "UTC").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("`0 25 * * *` is not a cron expression: "),
            "{error}"
        );
        assert!(Recurrence::cron("@daily", "UTC").is_ok());
        let error = Recurrence::cron("0 8 * * *", "Europe/Pariss").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("unknown time zone `Europe/Pariss`"),
            "{error}"
        );
    }

    #[test]
    fn intervals_count_from_creation_and_skip_missed_runs() {
        let every = Recurrence::every(Duration::from_secs(60)).unwrap();
        assert_eq!(every.next_after(at(100), at(100)).unwrap(), Some(at(160)));
        // Down for ten minutes: one run, on the interval's beat.
        assert_eq!(every.next_after(at(765), at(100)).unwrap(), Some(at(820)));
        let once = Recurrence::once(at(500));
        assert_eq!(once.next_after(at(100), at(0)).unwrap(), Some(at(500)));
        assert_eq!(once.next_after(at(500), at(0)).unwrap(), None);
    }

    #[test]
    fn intervals_and_times_read_as_people_write_them() {
        assert_eq!(parse_interval("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(
            parse_interval("1 h 30 m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_interval("2w").unwrap(),
            Duration::from_secs(1_209_600)
        );
        for wrong in ["", "30", "m", "1x", "0m", "1.5h"] {
            let error = parse_interval(wrong).unwrap_err();
            assert!(error.to_string().contains("e.g. `30m`"), "{wrong}: {error}");
        }
        assert_eq!(
            parse_time("2026-12-03T08:00", "Europe/Paris").unwrap(),
            parse_time("2026-12-03T07:00:00Z", "UTC").unwrap()
        );
        let error = parse_time("tomorrow", "UTC").unwrap_err();
        assert!(error.to_string().contains("`2026-12-03 08:00`"), "{error}");
    }
}
