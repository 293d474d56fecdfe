//! `/undo`: taking back a conversation's last turn.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Inner;
use crate::error::{Error, Result};
use crate::history::HistoryError;
use crate::message::Role;

/// Forgets the conversation's last turn: its last user message (not a
/// summary) and everything after it, once no turn of it runs. Returns that
/// message's text, or `None` when there was none.
pub(super) async fn undo(
    inner: &Inner,
    conversation: &Arc<str>,
    cancel: &CancellationToken,
) -> Result<Option<String>> {
    let _turn = tokio::select! {
        guard = inner.locks.lock(conversation) => guard,
        () = cancel.cancelled() => return Err(Error::Cancelled),
    };
    let messages = inner.history.load(conversation).await?;
    let Some(at) = messages
        .iter()
        .rposition(|m| m.role == Role::User && !m.summary)
    else {
        return Ok(None);
    };
    inner.history.truncate(conversation, at).await?;
    Ok(Some(messages[at].text()))
}

/// What `/undo` answers.
pub(super) async fn reply(
    inner: &Inner,
    conversation: &Arc<str>,
    cancel: &CancellationToken,
) -> String {
    match undo(inner, conversation, cancel).await {
        Ok(Some(text)) => {
            let mut shown: String = text.chars().take(80).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!(
                "Took back your last message (\u{201c}{shown}\u{201d}) and its answer. What its tools did is not undone."
            )
        }
        Ok(None) => "Nothing to undo.".to_owned(),
        Err(Error::History(HistoryError::Unsupported { .. })) => {
            "This conversation's history can't take messages back.".to_owned()
        }
        Err(error) => error.user_message(),
    }
}
