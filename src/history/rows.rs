//! What the database stores share: image keys, role names, the column
//! lists their rows are read in, and their `Storage` error.

use crate::message::{Message, Role};

#[cfg(feature = "schedule")]
use super::Schedule;
use super::{HistoryError, Intake, PendingTurn, Stage, from_secs};

/// Message `seq` of `conversation` from its stored serde form; one this
/// version can't read is [`HistoryError::Corrupt`], naming it.
pub(crate) fn message_from(
    conversation: &str,
    seq: i64,
    body: &str,
) -> Result<Message, HistoryError> {
    serde_json::from_str(body).map_err(|e| HistoryError::Corrupt {
        conversation: conversation.to_owned(),
        index: usize::try_from(seq).unwrap_or(usize::MAX),
        message: e.to_string(),
    })
}

/// The conversation's pending turn from its stored serde form.
pub(crate) fn pending_from(conversation: &str, body: &str) -> Result<PendingTurn, HistoryError> {
    serde_json::from_str(body).map_err(|e| HistoryError::Corrupt {
        conversation: conversation.to_owned(),
        index: usize::MAX,
        message: format!("its pending turn can't be read: {e}"),
    })
}

/// An image's key: 64-bit FNV-1a of its media type and bytes, in hex.
///
/// No SHA-256 is in ferrobot's dependency tree, and the key needn't resist
/// forgery: the stores' `put_image` compares the bytes of an image stored under the
/// same key and takes the next free key when they differ, so a collision,
/// accidental or crafted, never swaps one image for another. FNV-1a is
/// fixed by its specification, so keys stay the same across Rust versions
/// and machines (std's `DefaultHasher` promises neither), and it costs
/// about a millisecond a megabyte.
pub(crate) fn image_key(media_type: &str, data: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for &byte in media_type.as_bytes().iter().chain(&[0]).chain(data) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    format!("{hash:016x}")
}

/// The columns `schedule_from` reads, in its order.
#[cfg(feature = "schedule")]
pub(crate) const SCHEDULE_COLUMNS: &str =
    "id, conversation, prompt, recurrence, next_due, created_at, last_run, last_error, attempts";

/// The columns `intake_from` reads, in its order.
pub(crate) const INTAKE_COLUMNS: &str =
    "id, chat, payload, stage, conversation, calling, reply, answer, received_at";

/// A schedule's row, in [`SCHEDULE_COLUMNS`]' order, as both stores read it.
#[cfg(feature = "schedule")]
pub(crate) struct ScheduleRow {
    pub(crate) id: i64,
    pub(crate) conversation: String,
    pub(crate) prompt: String,
    pub(crate) recurrence: String,
    pub(crate) next_due: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) last_run: Option<i64>,
    pub(crate) last_error: Option<String>,
    pub(crate) attempts: i64,
}

#[cfg(feature = "schedule")]
impl ScheduleRow {
    /// The schedule; a recurrence this version can't read is an error
    /// naming the schedule, with the column it is in.
    pub(crate) fn read(self) -> Result<Schedule, (usize, String)> {
        let id = self.id;
        let recurrence = serde_json::from_str(&self.recurrence).map_err(|e| {
            (
                3,
                format!("schedule {id} has a recurrence this ferrobot can't read: {e}"),
            )
        })?;
        Ok(Schedule {
            id: id as u64,
            conversation: self.conversation,
            prompt: self.prompt,
            recurrence,
            next_due: self.next_due.map(from_secs),
            created: from_secs(self.created_at),
            last_run: self.last_run.map(from_secs),
            last_error: self.last_error,
            attempts: self.attempts.try_into().unwrap_or(u32::MAX),
        })
    }
}

/// A journal row, in [`INTAKE_COLUMNS`]' order, as both stores read it.
pub(crate) struct IntakeRow {
    pub(crate) id: String,
    pub(crate) chat: String,
    pub(crate) payload: String,
    pub(crate) stage: String,
    pub(crate) conversation: Option<String>,
    pub(crate) calling: Option<String>,
    pub(crate) reply: Option<String>,
    pub(crate) answer: Option<String>,
    pub(crate) received_at: i64,
}

impl IntakeRow {
    /// The journaled message; a stage or running calls this version can't
    /// read is an error naming the message, with the column it is in.
    pub(crate) fn read(self) -> Result<Intake, (usize, String)> {
        let id = self.id;
        let stage = Stage::parse(&self.stage).ok_or_else(|| {
            (
                3,
                format!(
                    "journaled message {id} has a stage this ferrobot doesn't know: {}",
                    self.stage
                ),
            )
        })?;
        let calling = self
            .calling
            .map(|body| serde_json::from_str(&body))
            .transpose()
            .map_err(|e| {
                (
                    5,
                    format!(
                        "journaled message {id} has running calls this ferrobot can't read: {e}"
                    ),
                )
            })?;
        Ok(Intake {
            chat: self.chat,
            payload: self.payload,
            stage,
            conversation: self.conversation,
            calling,
            reply: self.reply,
            answer: self.answer,
            received: from_secs(self.received_at),
            id,
        })
    }
}

/// A `Storage` error saying `message`, caused by `source`.
pub(crate) fn storage(
    message: &str,
    source: impl std::error::Error + Send + Sync + 'static,
) -> HistoryError {
    HistoryError::Storage {
        message: message.to_owned(),
        source: Some(Box::new(source)),
    }
}

/// A role as the stores keep it.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

pub(crate) fn role_from(name: &str) -> Role {
    match name {
        "system" => Role::System,
        "user" => Role::User,
        "tool" => Role::Tool,
        _ => Role::Assistant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_are_stable() {
        // FNV-1a's published value for one zero byte, and one for an image:
        // the same on every machine and Rust version, so a file stays
        // deduplicated whichever build writes it.
        assert_eq!(image_key("", &[]), "af63bd4c8601b7df");
        assert_eq!(image_key("image/png", &[1, 2, 3]), "a51c22f4fee5614a");
        assert_ne!(
            image_key("image/png", &[1, 2, 3]),
            image_key("image/jpeg", &[1, 2, 3])
        );
    }
}
