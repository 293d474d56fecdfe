//! Times as the stores keep them (whole seconds since the Unix epoch), and
//! intervals the way people write them.

use std::time::Duration;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "schedule"))]
use std::time::{SystemTime, UNIX_EPOCH};

/// An interval the way people write it: `1d`, `1h30m`, `45s`.
pub(crate) fn human_interval(interval: Duration) -> String {
    let mut left = interval.as_secs();
    if left == 0 {
        return "0s".to_owned();
    }
    let mut text = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if left >= size {
            text.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    text
}

/// Seconds since the Unix epoch (0 before it).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "schedule"))]
pub(crate) fn to_secs(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The time `secs` seconds after the Unix epoch.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "schedule"))]
pub(crate) fn from_secs(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// `time` to the second below, as the stores keep it.
#[cfg(feature = "schedule")]
pub(crate) fn whole_secs(time: SystemTime) -> SystemTime {
    from_secs(to_secs(time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_as_people_write_them() {
        assert_eq!(human_interval(Duration::from_secs(5400)), "1h30m");
        assert_eq!(human_interval(Duration::from_secs(86_400)), "1d");
        assert_eq!(human_interval(Duration::from_secs(45)), "45s");
    }
}
