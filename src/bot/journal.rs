//! Each incoming message journaled before its turn runs, and the turns a
//! crash interrupted recovered before their chats' new messages.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::channel::{Channel, Incoming};
use super::live::{self, Sessions};
use crate::agent::{Agent, Builtin};
use crate::history::{HistoryError, Intake, Stage};

/// How long a delivered message stays journaled, so that the platform
/// delivering it again is recognised: far longer than any platform keeps
/// an unacknowledged message.
const KEEP_DELIVERED: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// How often a bot asks the store for what stopped processes left: a
/// replica killed mid-turn is answered for within this, after the store
/// counts it stopped.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// What a [`Channel`] hands each incoming message to: [`serve`](super::serve)'s
/// turns.
///
/// A message with an [`id`](Incoming::id) is journaled in the agent's
/// history store before its turn runs, so a crash never loses it, and a
/// message journaled already (the platform delivered it again) is not
/// answered again. After a restart, [`serve`](super::serve) recovers the
/// journaled messages whose answers were not shown, before the new
/// messages of their chats.
///
/// The guarantee, on a platform that edits messages (Telegram, Discord),
/// with a store that keeps the journal (`SqliteHistory`, or
/// `PostgresHistory` shared by replicas, where what a stopped replica left
/// is claimed by another within a minute): each journaled message gets
/// one answer. The answer's first message is journaled as
/// soon as it is posted, and recovery edits it rather than posting
/// another, so at most one draft may be left over (one posted in the
/// moment before the crash). The history holds each turn once: recovery
/// goes on from what the turn stored, and a tool call that was running is
/// not run again unasked (see [`TurnRequest::recover`](crate::agent::TurnRequest::recover)).
/// A slash command that was running is not run again: the chat is told.
#[derive(Clone)]
pub struct Handler {
    shared: Arc<Shared>,
    /// Told of each message before it is journaled: a session recorder
    /// ([`SessionRecorder`](crate::testing::SessionRecorder)).
    #[cfg_attr(not(feature = "cassette"), allow(dead_code))]
    tap: Option<Tap>,
}

/// What a handler tells of each message it is handed.
pub(crate) type Tap = Arc<dyn Fn(&Incoming) + Send + Sync>;

struct Shared {
    agent: Agent,
    channel: Arc<dyn Channel>,
    sessions: Sessions,
    /// Chats whose interrupted turns are being recovered: their new
    /// messages wait until it is `true`.
    recovering: Mutex<HashMap<String, watch::Receiver<bool>>>,
    /// Whether each chat's latest message has started its turn: the
    /// chat's next message waits for it, so that a chat's turns start in
    /// the order its messages came (and are journaled).
    latest: Mutex<HashMap<String, watch::Receiver<bool>>>,
}

/// A message's place in its chat's line: the start it waits for, and the
/// one it signals.
struct Turn {
    after: Option<watch::Receiver<bool>>,
    started: Option<watch::Sender<bool>>,
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler").finish_non_exhaustive()
    }
}

/// Where an incoming message stands with the journal.
enum Journaled {
    /// Journaled now, under this id.
    Now(String),
    /// Not journaled: it has no id, or the store keeps no journal.
    Not,
    /// Journaled before: answered, or being answered, already.
    Before,
}

/// How [`live::answer`] journals the message it answers.
pub(super) enum Journal<'a> {
    /// It doesn't.
    Off,
    /// Under this id, from the start of its turn.
    Fresh(&'a str),
    /// It recovers this journaled message.
    Recover(&'a Intake),
}

impl Handler {
    pub(super) fn new(agent: Agent, channel: Arc<dyn Channel>) -> Self {
        Self {
            shared: Arc::new(Shared {
                agent,
                channel,
                sessions: Sessions::default(),
                recovering: Mutex::default(),
                latest: Mutex::default(),
            }),
            tap: None,
        }
    }

    /// The same handler, telling `tap` of each message it is handed.
    #[cfg(feature = "cassette")]
    pub(crate) fn tapped(&self, tap: Tap) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            tap: Some(tap),
        }
    }

    /// Journals `incoming` and answers it; returns once it is answered. A
    /// message journaled before is not answered again.
    pub async fn answer(&self, incoming: Incoming) {
        self.tell(&incoming);
        let journaled = self.journal(&incoming).await;
        let turn = self.line_up(&incoming);
        self.run(incoming, journaled, turn).await;
    }

    /// Journals `incoming` and answers it in the background: returns as
    /// soon as the message is safe (journaled, or known already), so the
    /// platform may be told it was received.
    pub async fn accept(&self, incoming: Incoming) {
        self.tell(&incoming);
        tokio::spawn(self.admit(incoming).await);
    }

    /// Journals `incoming` and puts it behind its chat's latest message;
    /// the future returned answers it. Messages admitted one after another
    /// start their turns in that order, however their answers run.
    pub(crate) async fn admit(
        &self,
        incoming: Incoming,
    ) -> impl Future<Output = ()> + Send + 'static {
        let journaled = self.journal(&incoming).await;
        let turn = self.line_up(&incoming);
        let handler = self.clone();
        async move { handler.run(incoming, journaled, turn).await }
    }

    fn tell(&self, incoming: &Incoming) {
        if let Some(tap) = &self.tap {
            tap(incoming);
        }
    }

    /// Puts the message behind its chat's latest one. A built-in command
    /// (`/stop`, `/new`, …) waits for nobody: it is about the turn running.
    fn line_up(&self, incoming: &Incoming) -> Turn {
        if Builtin::parse(&incoming.text).is_some() {
            return Turn {
                after: None,
                started: None,
            };
        }
        let (started, start) = watch::channel(false);
        let after = self
            .shared
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(incoming.conversation.clone(), start);
        Turn {
            after,
            started: Some(started),
        }
    }

    async fn journal(&self, incoming: &Incoming) -> Journaled {
        let Some(id) = &incoming.id else {
            return Journaled::Not;
        };
        let payload = match serde_json::to_string(incoming) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::warn!(intake = %id, %error, "could not journal a message; answering it unjournaled");
                return Journaled::Not;
            }
        };
        let intake = Intake::new(id, &incoming.conversation, payload);
        match self.shared.agent.history().receive(&intake).await {
            Ok(true) => Journaled::Now(intake.id),
            Ok(false) => {
                tracing::debug!(intake = %id, "a message came again; it is answered once");
                Journaled::Before
            }
            Err(HistoryError::Unsupported { .. }) => Journaled::Not,
            Err(error) => {
                // Answering it is better than dropping it.
                tracing::warn!(intake = %id, error = %error.chain(), "could not journal a message; answering it unjournaled");
                Journaled::Not
            }
        }
    }

    async fn run(&self, incoming: Incoming, journaled: Journaled, turn: Turn) {
        let shared = &self.shared;
        let journal = match &journaled {
            Journaled::Before => return,
            Journaled::Not => Journal::Off,
            Journaled::Now(id) => Journal::Fresh(id),
        };
        let recovery = shared
            .recovering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&incoming.conversation)
            .cloned();
        if let Some(mut done) = recovery {
            // An error: the recovery stopped (serve ended); go on.
            let _ = done.wait_for(|done| *done).await;
        }
        if let Some(mut before) = turn.after {
            // An error: that message's answer ended before its turn began.
            let _ = before.wait_for(|started| *started).await;
        }
        let channel = shared.channel.as_ref();
        let (agent, sessions) = (&shared.agent, &shared.sessions);
        live::answer(agent, channel, sessions, incoming, journal, turn.started).await;
    }

    /// Starts recovering the journaled messages whose answers were not
    /// shown, oldest first, one chat's after another; new messages of those
    /// chats wait until their chat's are done. Then, every [`SWEEP_EVERY`],
    /// recovers what other processes sharing the store left when they
    /// stopped (a replica killed mid-turn). Dropping the set stops it all.
    pub(super) async fn recover(&self) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        let history = self.shared.agent.history();
        let before = SystemTime::now() - KEEP_DELIVERED;
        match history.forget_delivered(before).await {
            Ok(_) | Err(HistoryError::Unsupported { .. }) => {}
            Err(error) => {
                tracing::warn!(error = %error.chain(), "could not forget old journaled messages");
            }
        }
        let claimed = history.claim_unfinished().await;
        if !matches!(claimed, Err(HistoryError::Unsupported { .. })) {
            tasks.spawn(Arc::clone(&self.shared).sweep());
        }
        let left = match claimed {
            // A store that can't tell its own entries from others': what
            // it holds at start, no process is answering.
            Err(HistoryError::Unsupported { .. }) => history.unfinished().await,
            claimed => claimed,
        };
        let left = match left {
            Ok(left) => left,
            Err(HistoryError::Unsupported { .. }) => return tasks,
            Err(error) => {
                tracing::warn!(error = %error.chain(), "could not read the journal; turns a restart interrupted are not recovered");
                return tasks;
            }
        };
        if !left.is_empty() {
            tracing::info!(
                messages = left.len(),
                "recovering the answers a restart interrupted"
            );
        }
        Arc::clone(&self.shared).start_recovering(left, &mut tasks);
        tasks
    }
}

impl Shared {
    /// Every [`SWEEP_EVERY`], claims and recovers what stopped processes
    /// left, until aborted; the recoveries stop with it.
    async fn sweep(self: Arc<Self>) {
        let mut recoveries = JoinSet::new();
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            while recoveries.try_join_next().is_some() {}
            match self.agent.history().claim_unfinished().await {
                Ok(left) if left.is_empty() => {}
                Ok(left) => {
                    tracing::info!(
                        messages = left.len(),
                        "recovering the answers of a process that stopped"
                    );
                    Arc::clone(&self).start_recovering(left, &mut recoveries);
                }
                Err(error) => {
                    tracing::warn!(error = %error.chain(), "could not claim the messages stopped processes left; trying again");
                }
            }
        }
    }

    /// Recovers `left` in `tasks`, each chat's in the order received, its
    /// started turn first; the chat's new messages wait for them.
    fn start_recovering(self: Arc<Self>, left: Vec<Intake>, tasks: &mut JoinSet<()>) {
        let mut chats: Vec<(String, Vec<Intake>)> = Vec::new();
        for intake in left {
            match chats.iter_mut().find(|(chat, _)| *chat == intake.chat) {
                Some((_, intakes)) => intakes.push(intake),
                None => chats.push((intake.chat.clone(), vec![intake])),
            }
        }
        for (_, intakes) in &mut chats {
            // A turn that had started goes first, as it did: the messages
            // received before it may have been waiting for it. (Stable: the
            // rest keep the order they came in.)
            intakes.sort_by_key(|intake| intake.stage == Stage::Received);
        }
        for (chat, intakes) in chats {
            let (done, waiting) = watch::channel(false);
            // Not behind a batch of the chat still recovering: its turns
            // may be waiting for these (`HistoryStore::started_in`).
            self.recovering
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(chat.clone(), waiting.clone());
            let shared = Arc::clone(&self);
            tasks.spawn(async move {
                for intake in intakes {
                    shared.recover_one(intake).await;
                }
                let mut recovering = shared
                    .recovering
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                // Unless a later batch of the chat is the one to wait for.
                if recovering
                    .get(&chat)
                    .is_some_and(|latest| latest.same_channel(&waiting))
                {
                    recovering.remove(&chat);
                }
                drop(recovering);
                done.send_replace(true);
            });
        }
    }

    async fn recover_one(&self, intake: Intake) {
        let incoming: Incoming = match serde_json::from_str(&intake.payload) {
            Ok(incoming) => incoming,
            Err(error) => {
                // Another front end's (the CLI's `run`, which recovers its
                // own), or a bot version's that wrote another form: left
                // as it is, for whoever can read it.
                tracing::info!(intake = %intake.id, %error, "a journaled message this bot can't read is left for its own front end");
                return;
            }
        };
        tracing::info!(intake = %intake.id, stage = intake.stage.as_str(), "recovering an answer");
        let channel = self.channel.as_ref();
        let journal = Journal::Recover(&intake);
        live::answer(
            &self.agent,
            channel,
            &self.sessions,
            incoming,
            journal,
            None,
        )
        .await;
    }
}
