//! The in-memory history store.

#[cfg(feature = "schedule")]
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use futures_util::future::BoxFuture;

use super::{
    ConversationInfo, HistoryError, HistoryStore, Intake, Mark, PendingTurn, SearchHit, Stage, now,
    searchable_text, title_of,
};
#[cfg(feature = "schedule")]
use super::{LaterMessage, Schedule, whole_secs};
use crate::message::Message;
use crate::policy::Approval;

/// Keeps conversations in memory; they end with the process.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ferrobot::history::HistoryError> {
/// use ferrobot::{Message, history::{HistoryStore, MemoryHistory}};
/// let store = MemoryHistory::new();
/// store.append("alice", &[Message::user("hi")]).await?;
/// assert_eq!(store.load("alice").await?.len(), 1);
/// assert_eq!(store.list().await?[0].title.as_deref(), Some("hi"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct MemoryHistory {
    conversations: Mutex<HashMap<String, Conversation>>,
    #[cfg(feature = "schedule")]
    scheduled: Mutex<Scheduled>,
    journal: Mutex<Journal>,
}

/// Journaled messages in the order received, and where each is.
#[derive(Debug, Default)]
struct Journal {
    last: usize,
    /// By sequence number, ascending: appended in order, found by halving.
    entries: Vec<(usize, Intake)>,
    by_id: HashMap<String, usize>,
}

impl Journal {
    fn get_mut(&mut self, id: &str) -> Option<&mut Intake> {
        let seq = *self.by_id.get(id)?;
        let at = self.entries.binary_search_by_key(&seq, |(s, _)| *s).ok()?;
        Some(&mut self.entries[at].1)
    }
}

/// Schedules and later messages, by id; ids count up from 1 and are never
/// reused, as in the SQLite store.
#[cfg(feature = "schedule")]
#[derive(Debug, Default)]
struct Scheduled {
    last_schedule: u64,
    last_later: u64,
    schedules: BTreeMap<u64, Schedule>,
    later: BTreeMap<u64, LaterMessage>,
}

#[derive(Debug)]
struct Conversation {
    messages: Vec<Message>,
    created: i64,
    updated: i64,
    approvals: Vec<Approval>,
    pending: Option<PendingTurn>,
}

impl Conversation {
    fn new(time: i64) -> Self {
        Self {
            messages: Vec::new(),
            created: time,
            updated: time,
            approvals: Vec::new(),
            pending: None,
        }
    }
}

/// A conversation with its id, as [`sorted`] orders them.
type Entry<'c> = (&'c String, &'c Conversation);

/// The conversations in `order`. The order is a function pointer rather
/// than a closure so that every caller shares one sort's code (a closure
/// type of its own would make the compiler write the sort again), and the
/// sort moves references, not the conversations.
fn sorted(
    conversations: &HashMap<String, Conversation>,
    order: fn(&Entry<'_>, &Entry<'_>) -> std::cmp::Ordering,
) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = conversations.iter().collect();
    entries.sort_unstable_by(order);
    entries
}

impl MemoryHistory {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Conversation>) -> T) -> T {
        // A panic elsewhere while holding the lock cannot leave a half-written
        // conversation (every write is a single extend), so poisoning is ignored.
        f(&mut self.conversations.lock().unwrap_or_else(|e| e.into_inner()))
    }

    #[cfg(feature = "schedule")]
    fn scheduled<T>(&self, f: impl FnOnce(&mut Scheduled) -> T) -> T {
        // Every write is a single insert, remove or field update.
        f(&mut self.scheduled.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn journal<T>(&self, f: impl FnOnce(&mut Journal) -> T) -> T {
        // Every write is a single insert, remove or field update.
        f(&mut self.journal.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs `f` on the conversation, created (at `time`) if it has no entry.
    fn with_conversation<T>(
        &self,
        conversation: &str,
        time: i64,
        f: impl FnOnce(&mut Conversation) -> T,
    ) -> T {
        self.with(|c| {
            f(c.entry(conversation.to_owned())
                .or_insert_with(|| Conversation::new(time)))
        })
    }
}

impl HistoryStore for MemoryHistory {
    fn load<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        let messages = self.with(|c| {
            c.get(conversation)
                .map(|c| c.messages.clone())
                .unwrap_or_default()
        });
        Box::pin(async move { Ok(messages) })
    }

    fn append<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let time = now();
        self.with_conversation(conversation, time, |entry| {
            entry.messages.extend_from_slice(messages);
            entry.updated = time;
        });
        Box::pin(async { Ok(()) })
    }

    fn approvals<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Approval>, HistoryError>> {
        let approvals = self.with(|c| {
            c.get(conversation)
                .map(|c| c.approvals.clone())
                .unwrap_or_default()
        });
        Box::pin(async move { Ok(approvals) })
    }

    fn add_approval<'a>(
        &'a self,
        conversation: &'a str,
        approval: &'a Approval,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let time = now();
        self.with_conversation(conversation, time, |entry| {
            entry.approvals.push(approval.clone());
        });
        Box::pin(async { Ok(()) })
    }

    fn pending<'a>(
        &'a self,
        conversation: &'a str,
    ) -> BoxFuture<'a, Result<Option<PendingTurn>, HistoryError>> {
        let pending = self.with(|c| c.get(conversation).and_then(|c| c.pending.clone()));
        Box::pin(async move { Ok(pending) })
    }

    fn set_pending<'a>(
        &'a self,
        conversation: &'a str,
        pending: Option<&'a PendingTurn>,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let time = now();
        match pending {
            Some(pending) => self.with_conversation(conversation, time, |entry| {
                entry.pending = Some(pending.clone());
            }),
            None => self.with(|c| {
                if let Some(entry) = c.get_mut(conversation) {
                    entry.pending = None;
                }
            }),
        }
        Box::pin(async { Ok(()) })
    }

    fn settle_pending<'a>(
        &'a self,
        conversation: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let time = now();
        // One lock: nobody sees the results stored and the turn still pending.
        self.with_conversation(conversation, time, |entry| {
            entry.messages.extend_from_slice(messages);
            entry.pending = None;
            entry.updated = time;
        });
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, conversation: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.with(|c| c.remove(conversation));
        Box::pin(async { Ok(()) })
    }

    fn truncate<'a>(
        &'a self,
        conversation: &'a str,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        let time = now();
        self.with(|c| {
            if keep == 0 {
                // Nothing left: the conversation goes, as in the SQLite store.
                c.remove(conversation);
            } else if let Some(entry) = c.get_mut(conversation)
                && entry.messages.len() > keep
            {
                entry.messages.truncate(keep);
                entry.updated = time;
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<ConversationInfo>, HistoryError>> {
        let list: Vec<ConversationInfo> = self.with(|c| {
            // Newest first, then by id (unique: a total order).
            sorted(c, |(a_id, a), (b_id, b)| {
                b.updated.cmp(&a.updated).then_with(|| a_id.cmp(b_id))
            })
            .into_iter()
            .map(|(id, c)| ConversationInfo {
                id: id.clone(),
                title: title_of(&c.messages),
                created: c.created,
                updated: c.updated,
                messages: c.messages.len(),
            })
            .collect()
        });
        Box::pin(async move { Ok(list) })
    }

    /// A case-insensitive substring search; the snippet is the matching line.
    fn search<'a>(
        &'a self,
        query: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<SearchHit>, HistoryError>> {
        let needle = query.to_lowercase();
        let hits: Vec<SearchHit> = self.with(|c| {
            // By conversation, then by position: the messages are in order.
            sorted(c, |(a, _), (b, _)| a.cmp(b))
                .into_iter()
                .flat_map(|(id, c)| {
                    c.messages
                        .iter()
                        .enumerate()
                        .filter_map(|(index, message)| {
                            let text = searchable_text(message);
                            let line = text.lines().find(|l| l.to_lowercase().contains(&needle))?;
                            Some(SearchHit {
                                conversation: id.clone(),
                                index,
                                role: message.role,
                                snippet: line.to_owned(),
                            })
                        })
                })
                .take(limit)
                .collect()
        });
        Box::pin(async move { Ok(hits) })
    }

    #[cfg(feature = "schedule")]
    fn add_schedule<'a>(
        &'a self,
        schedule: &'a Schedule,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let id = self.scheduled(|s| {
            s.last_schedule += 1;
            let mut stored = schedule.clone();
            stored.id = s.last_schedule;
            stored.next_due = stored.next_due.map(whole_secs);
            s.schedules.insert(s.last_schedule, stored);
            s.last_schedule
        });
        Box::pin(async move { Ok(id) })
    }

    #[cfg(feature = "schedule")]
    fn schedules<'a>(
        &'a self,
        conversation: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<Schedule>, HistoryError>> {
        let found = self.scheduled(|s| {
            s.schedules
                .values()
                .filter(|x| conversation.is_none_or(|c| x.conversation == c))
                .cloned()
                .collect()
        });
        Box::pin(async move { Ok(found) })
    }

    #[cfg(feature = "schedule")]
    fn remove_schedule(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let removed = self.scheduled(|s| s.schedules.remove(&id).is_some());
        Box::pin(async move { Ok(removed) })
    }

    #[cfg(feature = "schedule")]
    fn due_schedules(&self, now: SystemTime) -> BoxFuture<'_, Result<Vec<Schedule>, HistoryError>> {
        let mut due: Vec<Schedule> = self.scheduled(|s| {
            s.schedules
                .values()
                .filter(|x| x.next_due.is_some_and(|at| at <= now))
                .cloned()
                .collect()
        });
        due.sort_by_key(|x| (x.next_due, x.id));
        Box::pin(async move { Ok(due) })
    }

    #[cfg(feature = "schedule")]
    fn claim_schedule(
        &self,
        id: u64,
        from: Option<SystemTime>,
        to: Option<SystemTime>,
    ) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let claimed = self.scheduled(|s| match s.schedules.get_mut(&id) {
            Some(x) if x.next_due == from => {
                x.next_due = to.map(whole_secs);
                true
            }
            _ => false,
        });
        Box::pin(async move { Ok(claimed) })
    }

    #[cfg(feature = "schedule")]
    fn record_schedule_run<'a>(
        &'a self,
        id: u64,
        at: SystemTime,
        error: Option<&'a str>,
        attempts: u32,
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.scheduled(|s| {
            if let Some(x) = s.schedules.get_mut(&id) {
                x.last_run = Some(whole_secs(at));
                x.last_error = error.map(str::to_owned);
                x.attempts = attempts;
            }
        });
        Box::pin(async { Ok(()) })
    }

    #[cfg(feature = "schedule")]
    fn add_later_message<'a>(
        &'a self,
        message: &'a LaterMessage,
    ) -> BoxFuture<'a, Result<u64, HistoryError>> {
        let id = self.scheduled(|s| {
            s.last_later += 1;
            let mut stored = message.clone();
            stored.id = s.last_later;
            stored.due = whole_secs(stored.due);
            s.later.insert(s.last_later, stored);
            s.last_later
        });
        Box::pin(async move { Ok(id) })
    }

    #[cfg(feature = "schedule")]
    fn due_later_messages(
        &self,
        now: SystemTime,
    ) -> BoxFuture<'_, Result<Vec<LaterMessage>, HistoryError>> {
        let mut due: Vec<LaterMessage> =
            self.scheduled(|s| s.later.values().filter(|m| m.due <= now).cloned().collect());
        due.sort_by_key(|m| (m.due, m.id));
        Box::pin(async move { Ok(due) })
    }

    #[cfg(feature = "schedule")]
    fn take_later_message(&self, id: u64) -> BoxFuture<'_, Result<bool, HistoryError>> {
        let taken = self.scheduled(|s| s.later.remove(&id).is_some());
        Box::pin(async move { Ok(taken) })
    }

    #[cfg(feature = "schedule")]
    fn next_due(&self) -> BoxFuture<'_, Result<Option<SystemTime>, HistoryError>> {
        let next = self.scheduled(|s| {
            s.schedules
                .values()
                .filter_map(|x| x.next_due)
                .chain(s.later.values().map(|m| m.due))
                .min()
        });
        Box::pin(async move { Ok(next) })
    }

    fn receive<'a>(&'a self, intake: &'a Intake) -> BoxFuture<'a, Result<bool, HistoryError>> {
        let new = self.journal(|j| {
            if j.by_id.contains_key(&intake.id) {
                return false;
            }
            j.last += 1;
            j.by_id.insert(intake.id.clone(), j.last);
            j.entries.push((j.last, intake.clone()));
            true
        });
        Box::pin(async move { Ok(new) })
    }

    fn intake<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Intake>, HistoryError>> {
        let intake = self.journal(|j| j.get_mut(id).map(|i| i.clone()));
        Box::pin(async move { Ok(intake) })
    }

    fn unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        let unfinished = self.journal(|j| {
            j.entries
                .iter()
                .map(|(_, i)| i)
                .filter(|i| i.stage != Stage::Delivered)
                .cloned()
                .collect()
        });
        Box::pin(async move { Ok(unfinished) })
    }

    fn claim_unfinished(&self) -> BoxFuture<'_, Result<Vec<Intake>, HistoryError>> {
        // Memory outlives no process: all it holds, this process received
        // and is answering.
        Box::pin(async { Ok(Vec::new()) })
    }

    fn mark<'a>(&'a self, id: &'a str, mark: &'a Mark) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.journal(|j| {
            if let Some(intake) = j.get_mut(id) {
                intake.apply(mark);
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn forget_delivered(&self, before: SystemTime) -> BoxFuture<'_, Result<u64, HistoryError>> {
        let forgotten = self.journal(|j| {
            let Journal { entries, by_id, .. } = j;
            let before_count = entries.len();
            entries.retain(|(_, i)| {
                let old = i.stage == Stage::Delivered && i.received < before;
                if old {
                    by_id.remove(&i.id);
                }
                !old
            });
            (before_count - entries.len()) as u64
        });
        Box::pin(async move { Ok(forgotten) })
    }
}
