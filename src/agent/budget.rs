//! Limits on one turn's work, beside the round cap.

use std::fmt;
use std::time::Duration;

// Tokio's clock, as the tool time-outs use: the same clock for every limit
// of a turn, and one a test can pause.
use tokio::time::Instant;

/// Limits on one turn's work beside `max_tool_rounds`. Past any of them the
/// tools are withdrawn, as past the round cap, and the model answers from
/// what it has; tool calls it makes anyway are not run and it is told why.
/// Nothing running is cut short: the limits are checked before each model
/// call.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::agent::TurnBudget;
/// use ferrobot::{Agent, testing::MockProvider};
///
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("Done."))
///     .budget(
///         TurnBudget::builder()
///             .wall_time(Duration::from_secs(120))
///             .tool_output_bytes(200_000)
///             .output_tokens(8_000)
///             .build(),
///     )
///     .build();
/// # let _ = agent;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bon::Builder)]
#[non_exhaustive]
pub struct TurnBudget {
    /// How long a turn may go on calling tools. By default, no limit.
    pub wall_time: Option<Duration>,
    /// How much tool output (bytes of results) the model may be given in a
    /// turn. By default, no limit.
    pub tool_output_bytes: Option<usize>,
    /// How many tokens the model may write in a turn, as providers report
    /// them. By default, no limit.
    pub output_tokens: Option<u64>,
}

/// What a turn has used so far.
#[derive(Debug)]
pub(super) struct Spent {
    pub(super) started: Instant,
    pub(super) tool_output_bytes: usize,
}

impl Spent {
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            tool_output_bytes: 0,
        }
    }
}

/// Why the tools were withdrawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    Rounds(u32),
    WallTime(Duration),
    ToolOutputBytes(usize),
    OutputTokens(u64),
    /// A sub-agent's turn reached what its caller had left.
    CallerWallTime,
    CallerToolOutputBytes(usize),
    CallerOutputTokens(u64),
}

/// What a sub-agent's turn is given of its caller's budget: what the
/// calling turn had left when it made the call. A sub-agent's turn stops
/// at its own [`TurnBudget`] or at this, whichever comes first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// When the caller's time is up.
    pub(crate) deadline: Option<Instant>,
    /// Tokens the caller may still write.
    pub(crate) output_tokens: Option<u64>,
    /// Bytes of tool output the caller may still be given.
    pub(crate) tool_output_bytes: Option<usize>,
}

impl Inherited {
    /// The first of the caller's limits the turn has reached, if any.
    pub(super) fn reached(&self, spent: &Spent, output_tokens: u64) -> Option<Limit> {
        if let Some(deadline) = self.deadline
            && Instant::now() >= deadline
        {
            return Some(Limit::CallerWallTime);
        }
        if let Some(limit) = self.tool_output_bytes
            && spent.tool_output_bytes >= limit
        {
            return Some(Limit::CallerToolOutputBytes(limit));
        }
        if let Some(limit) = self.output_tokens
            && output_tokens >= limit
        {
            return Some(Limit::CallerOutputTokens(limit));
        }
        None
    }
}

impl TurnBudget {
    /// The first limit the turn has reached, if any.
    pub(super) fn reached(&self, spent: &Spent, output_tokens: u64) -> Option<Limit> {
        if let Some(limit) = self.wall_time
            && spent.started.elapsed() >= limit
        {
            return Some(Limit::WallTime(limit));
        }
        if let Some(limit) = self.tool_output_bytes
            && spent.tool_output_bytes >= limit
        {
            return Some(Limit::ToolOutputBytes(limit));
        }
        if let Some(limit) = self.output_tokens
            && output_tokens >= limit
        {
            return Some(Limit::OutputTokens(limit));
        }
        None
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Rounds(rounds) => {
                let plural = if *rounds == 1 { "" } else { "s" };
                write!(
                    f,
                    "the limit of {rounds} tool round{plural} per turn was reached"
                )
            }
            Limit::WallTime(limit) => {
                write!(
                    f,
                    "the turn's time budget of {} is used up",
                    seconds(*limit)
                )
            }
            Limit::ToolOutputBytes(limit) => write!(
                f,
                "the turn's budget of {limit} bytes of tool output is used up"
            ),
            Limit::OutputTokens(limit) => {
                write!(f, "the turn's budget of {limit} written tokens is used up")
            }
            Limit::CallerWallTime => f.write_str("the time the calling agent had left is used up"),
            Limit::CallerToolOutputBytes(limit) => write!(
                f,
                "the {limit} bytes of tool output the calling agent had left are used up"
            ),
            Limit::CallerOutputTokens(limit) => write!(
                f,
                "the {limit} written tokens the calling agent had left are used up"
            ),
        }
    }
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_reached_is_named() {
        let budget = TurnBudget::builder()
            .tool_output_bytes(100)
            .output_tokens(50)
            .build();
        let mut spent = Spent::new();
        assert_eq!(budget.reached(&spent, 10), None);
        spent.tool_output_bytes = 100;
        assert_eq!(
            budget.reached(&spent, 60),
            Some(Limit::ToolOutputBytes(100))
        );
        assert_eq!(TurnBudget::default().reached(&spent, u64::MAX), None);
        assert_eq!(
            Limit::WallTime(Duration::from_millis(1500)).to_string(),
            "the turn's time budget of 1.5 s is used up"
        );
    }

    #[test]
    fn a_sub_agent_is_told_its_callers_limit_was_reached() {
        let spent = Spent::new();
        let none = Inherited::default();
        assert_eq!(none.reached(&spent, u64::MAX), None);
        let tokens = Inherited {
            output_tokens: Some(4),
            ..Inherited::default()
        };
        assert_eq!(tokens.reached(&spent, 3), None);
        assert_eq!(
            tokens.reached(&spent, 4),
            Some(Limit::CallerOutputTokens(4))
        );
        let late = Inherited {
            deadline: Some(spent.started),
            ..Inherited::default()
        };
        assert_eq!(late.reached(&spent, 0), Some(Limit::CallerWallTime));
        assert_eq!(
            Limit::CallerWallTime.to_string(),
            "the time the calling agent had left is used up"
        );
        assert_eq!(
            Limit::CallerOutputTokens(4).to_string(),
            "the 4 written tokens the calling agent had left are used up"
        );
        assert_eq!(
            Limit::CallerToolOutputBytes(10).to_string(),
            "the 10 bytes of tool output the calling agent had left are used up"
        );
    }
}
