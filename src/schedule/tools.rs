//! The schedule tools: what the model (or a user's slash command) calls to
//! make, list and cancel schedules of its chat.

use crate::ToolContext;
use crate::history::Recurrence;
use crate::tool;
use crate::tool::State;

use super::{Schedule, ScheduleError, Scheduler, parse_interval, parse_time};

/// The chat of a conversation: the part before `~`, as `bot::serve` names
/// a chat's fresh conversations (`/new`), so that a chat's schedules stay
/// its own across them.
fn chat_of(conversation: &str) -> &str {
    conversation
        .split_once('~')
        .map_or(conversation, |(chat, _)| chat)
}

async fn of_this_chat(
    scheduler: &Scheduler,
    ctx: &ToolContext,
) -> Result<Vec<Schedule>, ScheduleError> {
    let chat = chat_of(ctx.conversation());
    Ok(scheduler
        .schedules(None)
        .await?
        .into_iter()
        .filter(|s| chat_of(&s.conversation) == chat)
        .collect())
}

fn say(error: &ScheduleError) -> String {
    error.chain()
}

/// Schedule a prompt to run later, or again and again, in this chat: at each
/// run you are given `prompt` as if the user had just sent it, and your
/// answer is posted here. Give exactly one of `cron`, `every` or `at`.
#[tool]
pub async fn schedule_prompt(
    ctx: ToolContext,
    State(scheduler): State<Scheduler>,
    /// What to do at each run, without the timing, e.g. "report the disk usage".
    prompt: String,
    /// A five-field cron expression (minute hour day month weekday) in the
    /// bot's time zone, e.g. "0 8 * * *" for 8:00 every day, "0 9 * * MON-FRI"
    /// for 9:00 on weekdays.
    cron: Option<String>,
    /// An interval, e.g. "30m", "1h", "1d".
    every: Option<String>,
    /// A single time, e.g. "2026-12-03 08:00" (the bot's time zone) or
    /// "2026-12-03T08:00:00+01:00".
    at: Option<String>,
) -> Result<String, String> {
    let zone = scheduler.time_zone_name().to_owned();
    let recurrence = match (cron, every, at) {
        (Some(cron), None, None) => Recurrence::cron(&cron, &zone),
        (None, Some(every), None) => parse_interval(&every).and_then(|interval| {
            if interval.as_secs() < 60 {
                Err(ScheduleError::Invalid(format!(
                    "`{every}` is too often: schedule at most once a minute"
                )))
            } else {
                Recurrence::every(interval)
            }
        }),
        (None, None, Some(at)) => parse_time(&at, &zone).map(Recurrence::once),
        _ => Err(ScheduleError::Invalid(
            "give exactly one of `cron` (e.g. \"0 8 * * *\"), `every` (e.g. \"1d\") or `at` (e.g. \"2026-12-03 08:00\")".into(),
        )),
    }
    .map_err(|e| say(&e))?;
    let prompt = prompt.trim();
    if prompt.is_empty() {
        return Err("give the `prompt` to run: what to do at each run".into());
    }
    let schedule = scheduler
        .add(ctx.conversation(), prompt, recurrence)
        .await
        .map_err(|e| say(&e))?;
    Ok(format!(
        "Scheduled {}. Cancel it with /cancel_schedule id={}.",
        scheduler.describe(&schedule),
        schedule.id
    ))
}

/// The prompts scheduled in this chat: their ids, what they ask, when they
/// run next and how their last run went.
#[tool(read_only)]
pub async fn list_schedules(
    ctx: ToolContext,
    State(scheduler): State<Scheduler>,
) -> Result<String, String> {
    let schedules = of_this_chat(&scheduler, &ctx).await.map_err(|e| say(&e))?;
    if schedules.is_empty() {
        return Ok("No prompts are scheduled in this chat.".into());
    }
    Ok(schedules
        .iter()
        .map(|s| scheduler.describe(s))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Cancel a prompt scheduled in this chat, by its id (see `list_schedules`).
#[tool(destructive, idempotent)]
pub async fn cancel_schedule(
    ctx: ToolContext,
    State(scheduler): State<Scheduler>,
    /// The schedule's id.
    id: u64,
) -> Result<String, String> {
    let schedules = of_this_chat(&scheduler, &ctx).await.map_err(|e| say(&e))?;
    let Some(schedule) = schedules.iter().find(|s| s.id == id) else {
        return Err(format!(
            "no schedule {id} in this chat (list_schedules lists them)"
        ));
    };
    scheduler.cancel(id).await.map_err(|e| say(&e))?;
    Ok(format!("Cancelled {}.", scheduler.describe(schedule)))
}
