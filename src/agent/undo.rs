//! `/undo`: taking back a conversation's last turn.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Inner;
use crate::error::{Error, Result};
use crate::history::HistoryError;

/// Forgets the conversation's last turn: its last user message (not a
/// summary) and everything after it, a pending turn's waiting calls
/// included, once no turn of it runs. Returns that
/// message's text, or `None` when there was none.
///
/// A turn that compacted the conversation left the original of its message,
/// a summary, then a copy of the message: the turn is taken back from the
/// original, so neither the summary nor a stray copy stays behind.
pub(super) async fn undo(
    inner: &Inner,
    conversation: &Arc<str>,
    cancel: &CancellationToken,
) -> Result<Option<String>> {
    let _turn = tokio::select! {
        guard = inner.turns.lock(conversation) => guard,
        () = cancel.cancelled() => return Err(Error::Cancelled),
    };
    let messages = inner.history.load(conversation).await?;
    let asked = |m: &&crate::message::Message| m.starts_turn();
    let Some(mut at) = messages.iter().rposition(|m| asked(&m)) else {
        return Ok(None);
    };
    if at > 0 && messages[at - 1].summary {
        at = messages[..at - 1]
            .iter()
            .rposition(|m| asked(&m))
            .unwrap_or(at);
    }
    let text = messages[at].text();
    inner.history.truncate(conversation, at).await?;
    // A turn waiting for decisions is part of the turn taken back.
    if inner.history.pending(conversation).await?.is_some() {
        inner.history.set_pending(conversation, None).await?;
    }
    Ok(Some(text))
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
                "Took back the last message (\u{201c}{shown}\u{201d}) and its answer. What its tools did is not undone."
            )
        }
        Ok(None) => "Nothing to undo.".to_owned(),
        Err(Error::History(HistoryError::Unsupported { .. })) => {
            "This conversation's history can't take messages back.".to_owned()
        }
        Err(error) => error.user_message(),
    }
}
