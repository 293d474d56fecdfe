//! `ferrobot history export` and `import`: a store's conversations (their
//! messages, images included, and "always" approvals), schedules and later
//! messages as JSON Lines, read back into any store. How a history moves
//! from the SQLite file to a PostgreSQL database: export with the file
//! configured, import with `[history] url` set.
//!
//! One record per line, each tagged by `kind`; a line that can't be read
//! stops the import and names the line. The journal and turns waiting for
//! decisions are not carried: stop the bot first, so nothing is pending.

use std::io::{BufRead, Write};
use std::time::SystemTime;

use anyhow::Context as _;
use ferrobot::history::{HistoryError, HistoryStore, LaterMessage, Schedule};
use ferrobot::message::{Image, Message, Part};
use ferrobot::policy::Approval;
use serde::{Deserialize, Serialize};

/// The format's version, in the first line; a reader refuses a newer one.
const VERSION: u32 = 1;

/// A line of the export.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record {
    /// The first line: what wrote the file.
    Header { version: u32, written_by: String },
    /// A conversation, its images inline (base64).
    Conversation {
        id: String,
        messages: Vec<Message>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approvals: Vec<Approval>,
    },
    /// A scheduled prompt (given a new id on import).
    Schedule { schedule: Schedule },
    /// A message still to be sent (given a new id on import).
    LaterMessage { message: LaterMessage },
}

/// What an export or an import counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) conversations: usize,
    pub(crate) messages: usize,
    pub(crate) schedules: usize,
    pub(crate) later: usize,
    /// What the target already held, left as it was: conversation ids,
    /// schedules and later messages named.
    pub(crate) skipped: Vec<String>,
}

/// Writes everything `store` keeps to `out`, one record per line.
pub(crate) async fn export(
    store: &dyn HistoryStore,
    out: &mut impl Write,
) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let header = Record::Header {
        version: VERSION,
        written_by: format!("ferrobot {}", env!("CARGO_PKG_VERSION")),
    };
    line(out, &header)?;
    // Oldest first, so that an import lists them in the same order.
    let mut conversations = store.list().await?;
    conversations.reverse();
    for info in conversations {
        let mut messages = store.load(&info.id).await?;
        for message in &mut messages {
            inline_images(store, message).await?;
        }
        let approvals = store.approvals(&info.id).await?;
        counts.conversations += 1;
        counts.messages += messages.len();
        let record = Record::Conversation {
            id: info.id,
            messages,
            approvals,
        };
        line(out, &record)?;
    }
    for schedule in unless_unsupported(store.schedules(None).await)? {
        counts.schedules += 1;
        line(out, &Record::Schedule { schedule })?;
    }
    for message in unless_unsupported(store.due_later_messages(end_of_time()).await)? {
        counts.later += 1;
        line(out, &Record::LaterMessage { message })?;
    }
    out.flush()?;
    Ok(counts)
}

/// Reads an export from `input` into `store`. What the store already
/// holds is skipped, so importing twice (or again after a failure) adds
/// nothing twice: a conversation of the same id, a schedule of the same
/// conversation, prompt and recurrence, a later message of the same
/// conversation, text and time.
pub(crate) async fn import(
    store: &dyn HistoryStore,
    input: impl BufRead,
) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let mut header = false;
    // What the store holds, read at the first schedule (or later message).
    let mut schedules: Option<Vec<Schedule>> = None;
    let mut later: Option<Vec<LaterMessage>> = None;
    for (index, text) in input.lines().enumerate() {
        let number = index + 1;
        let text = text.with_context(|| format!("reading line {number}"))?;
        if text.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(&text).with_context(|| {
            format!("line {number} is not a record of `ferrobot history export`")
        })?;
        match record {
            Record::Header { version, .. } if version > VERSION => anyhow::bail!(
                "the file was written by a newer ferrobot (format {version}; this one reads up to {VERSION}): import it with that version"
            ),
            Record::Header { .. } => header = true,
            _ if !header => anyhow::bail!(
                "line {number} comes before the header: the file is not a `ferrobot history export`"
            ),
            Record::Conversation {
                id,
                messages,
                approvals,
            } => {
                if !store.load(&id).await?.is_empty() {
                    counts.skipped.push(id);
                    continue;
                }
                store
                    .append(&id, &messages)
                    .await
                    .with_context(|| format!("storing conversation `{id}` (line {number})"))?;
                for approval in &approvals {
                    store.add_approval(&id, approval).await?;
                }
                counts.conversations += 1;
                counts.messages += messages.len();
            }
            Record::Schedule { schedule } => {
                if schedules.is_none() {
                    schedules = Some(unless_unsupported(store.schedules(None).await)?);
                }
                let held = schedules.as_deref().unwrap_or_default();
                if held.iter().any(|s| {
                    (&s.conversation, &s.prompt, &s.recurrence)
                        == (
                            &schedule.conversation,
                            &schedule.prompt,
                            &schedule.recurrence,
                        )
                }) {
                    counts
                        .skipped
                        .push(format!("schedule “{}”", schedule.prompt));
                    continue;
                }
                store.add_schedule(&schedule).await?;
                counts.schedules += 1;
            }
            Record::LaterMessage { message } => {
                if later.is_none() {
                    later = Some(unless_unsupported(
                        store.due_later_messages(end_of_time()).await,
                    )?);
                }
                let held = later.as_deref().unwrap_or_default();
                if held.iter().any(|m| {
                    (&m.conversation, &m.text, m.due)
                        == (&message.conversation, &message.text, message.due)
                }) {
                    counts
                        .skipped
                        .push(format!("later message “{}”", message.text));
                    continue;
                }
                store.add_later_message(&message).await?;
                counts.later += 1;
            }
        }
    }
    if !header {
        anyhow::bail!("the file is empty: nothing to import");
    }
    Ok(counts)
}

/// A time every later message is due by.
fn end_of_time() -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(u32::MAX.into())
}

/// Replaces each image the store keeps apart with its bytes.
async fn inline_images(store: &dyn HistoryStore, message: &mut Message) -> anyhow::Result<()> {
    for part in &mut message.parts {
        if let Part::Image(image) = part
            && let Image::Stored { id, .. } = image
        {
            *image = store
                .load_image(id)
                .await
                .with_context(|| format!("reading stored image {id}"))?;
        }
    }
    Ok(())
}

fn line(out: &mut impl Write, record: &Record) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// What a store without schedules has: none.
fn unless_unsupported<T>(result: Result<Vec<T>, HistoryError>) -> Result<Vec<T>, HistoryError> {
    match result {
        Err(HistoryError::Unsupported { .. }) => Ok(Vec::new()),
        other => other,
    }
}
