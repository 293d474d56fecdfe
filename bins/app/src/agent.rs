//! The agent a config describes (its model, its tools, its history), and a
//! bot served from it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::task::AbortOnDropHandle;

use ferrobot::agent::{Agent, Delegate, TurnBudget, TurnWatcher};
use ferrobot::bot::{Channel, ChannelConfirm, ChannelError, ChannelNotifier};
use ferrobot::confirm::ConfirmHandler;
use ferrobot::provider::Provider;
use ferrobot::schedule::{Retries, Scheduler};
use ferrobot::testing::{Cassette, Mode, SessionRecorder};
use ferrobot::tool::{Notifier, Tool};

use crate::history::Store;
use crate::{LoadedConfig, ToolState, watch_tools_file};

/// Where an agent's model and history come from.
pub(crate) enum Stage {
    /// The config's server and store.
    Live,
    /// The config's server, every model call recorded into the cassette
    /// `model`, conversations in memory (a bot recording its session).
    Record { model: PathBuf },
    /// The cassette `model` replayed, conversations in memory, the clock
    /// stopped at `at` (a session replayed).
    Replay { model: Cassette, at: SystemTime },
}

impl LoadedConfig {
    /// The tools a bot offers: the system tools, the power tools when
    /// `[tools] power` is set, then the command tools of the tools file, if
    /// there is one.
    ///
    /// # Errors
    /// When the tools file has mistakes or `power_command` is empty; the
    /// message names them.
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ferrobot::BoxError> {
        let mut tools = ferrobot::tools::system();
        let settings = &self.config.tools;
        if settings.power {
            let power = ferrobot::tools::SystemPower::command(&settings.power_command)
                .map_err(|message| format!("tools.power_command: {message}"))?;
            tools.extend(ferrobot::tools::power(power));
        }
        let file = self.tools_file_path();
        if file.is_file() {
            let commands = ferrobot::tools::CommandTool::load_file(&file)?;
            tools.extend(commands.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>));
        }
        Ok(tools)
    }

    /// The scheduler `[schedule]` describes: its time zone and retries. The
    /// [`agent`](Self::agent) holds one as state; [`serve`](Self::serve)
    /// runs it.
    ///
    /// # Errors
    /// When `schedule.time_zone` names a zone the system doesn't know.
    pub fn scheduler(&self) -> Result<Scheduler, ferrobot::BoxError> {
        let settings = &self.config.schedule;
        let scheduler = Scheduler::new().retries(Retries::new(
            settings
                .retry_minutes
                .iter()
                .map(|minutes| Duration::from_secs(minutes.saturating_mul(60))),
        ));
        Ok(match &settings.time_zone {
            Some(zone) => scheduler
                .time_zone(zone)
                .map_err(|e| format!("`schedule.time_zone`: {e}"))?,
            None => scheduler,
        })
    }

    /// The agent the config describes: its [`provider`](Self::provider),
    /// [`tools`](Self::tools) with the tool state file applied, the `[agent]`
    /// settings, the `[context]` bounds ([`context_policy`](Self::context_policy)), the `[[permissions.rules]]` ([`policy`](Self::policy)) and
    /// the history `[history]` names ([`open_history`](Self::open_history)), and the [`scheduler`](Self::scheduler) as state
    /// (for `notify_later`; [`serve`](Self::serve) runs it and adds the
    /// schedule tools); it asks `confirm` before tools that want approval
    /// and delivers later messages through `notifier`.
    ///
    /// # Errors
    /// When the dialect is not in this build, the history can't be opened
    /// or the tools or tool state files can't be read; the message names the
    /// feature or the file.
    pub async fn agent(
        &self,
        confirm: impl ConfirmHandler,
        notifier: impl Notifier,
    ) -> Result<Agent, ferrobot::BoxError> {
        self.agent_for(confirm, notifier, Stage::Live).await
    }

    /// The [`agent`](Self::agent), its model and history as `stage` says.
    pub(crate) async fn agent_for(
        &self,
        confirm: impl ConfirmHandler,
        notifier: impl Notifier,
        stage: Stage,
    ) -> Result<Agent, ferrobot::BoxError> {
        // A recording and its replay keep their conversations in memory:
        // each chat starts afresh in both, and the bot's store is untouched.
        let history = match &stage {
            Stage::Live => Some(self.open_history().await?),
            Stage::Record { .. } | Stage::Replay { .. } => None,
        };
        let (provider, clock): (Arc<dyn Provider>, _) = match stage {
            Stage::Live => (self.provider()?, None),
            Stage::Record { model } => {
                let cassette = Cassette::new(model, self.provider()?).mode(Mode::RecordAll);
                (Arc::new(cassette), None)
            }
            Stage::Replay { model, at } => (Arc::new(model), Some(at)),
        };
        let context = self.context_policy(provider.as_ref()).await;
        let settings = &self.config.agent;
        let tools = self.tools()?;
        let delegate = self.delegate(&tools)?;
        // Turns counted for the panel, and traced when `[logging] traces`.
        let traces = (self.config.logging.traces)
            .then(|| Arc::new(crate::Traces::new(self.traces_path())) as Arc<dyn TurnWatcher>);
        let activity = crate::activity::Activity::new(traces);
        let agent = Agent::builder()
            .provider(provider)
            .context(context)
            .tools(tools)
            .tools(delegate)
            .system_prompt(settings.system_prompt.clone())
            .max_tool_rounds(settings.max_tool_rounds)
            .budget(
                TurnBudget::builder()
                    .maybe_wall_time(settings.budget_wall_time_secs.map(Duration::from_secs))
                    .maybe_tool_output_bytes(settings.budget_tool_output_bytes)
                    .maybe_output_tokens(settings.budget_output_tokens)
                    .build(),
            )
            .tool_timeout(Duration::from_secs(settings.tool_timeout_secs))
            .policy(self.policy())
            .while_busy(settings.while_busy.into())
            .confirm(confirm)
            .notifier(notifier)
            .state(self.scheduler()?)
            .watcher(activity.clone())
            .state(activity)
            .maybe_prompt_tail(self.prompt_facts())
            .maybe_clock(clock.map(|at: SystemTime| move || at));
        let agent = match history {
            Some(Store::Sqlite(store)) => agent.history(store).build(),
            #[cfg(feature = "postgres")]
            Some(Store::Postgres(store)) => agent.history(store).build(),
            None => agent.build(),
        };
        // Before the MCP servers' instructions, which join as they connect.
        for (file, text) in self.instruction_files() {
            agent.instructions().set(file, text);
        }
        ToolState::load(&self.tool_state_path())?.apply(&agent);
        Ok(agent)
    }

    /// The `delegate` tool `[delegate]` describes, its specialists given
    /// their tools from `tools` (the bot's); none without specialists.
    ///
    /// # Errors
    /// When a specialist names a tool the bot doesn't have (the message
    /// names the specialist, the tool and the bot's tools), or its
    /// provider can't be built.
    fn delegate(&self, tools: &[Arc<dyn Tool>]) -> Result<Option<Delegate>, ferrobot::BoxError> {
        let config = &self.config.delegate;
        if config.agents.is_empty() {
            return Ok(None);
        }
        let mut delegate = Delegate::new()
            .max_running(config.max_running)
            .max_waiting(config.max_waiting)
            .timeout(Duration::from_secs(config.timeout_mins.max(1) * 60));
        for (name, specialist) in &config.agents {
            let unknown: Vec<&str> = specialist
                .tools
                .iter()
                .filter(|wanted| !tools.iter().any(|t| t.name() == wanted.as_str()))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
                return Err(format!(
                    "delegate.agents.{name}.tools: no tool named {}; the bot's tools: {}",
                    unknown.join(", "),
                    known.join(", ")
                )
                .into());
            }
            let model = specialist
                .model
                .as_deref()
                .unwrap_or(&self.config.llm.model);
            let agent = Agent::builder()
                .provider(self.provider_for(model)?)
                .tools(
                    tools
                        .iter()
                        .filter(|t| specialist.tools.iter().any(|w| w == t.name()))
                        .cloned(),
                )
                .maybe_system_prompt(specialist.system_prompt.clone())
                .max_tool_rounds(self.config.agent.max_tool_rounds)
                .tool_timeout(Duration::from_secs(self.config.agent.tool_timeout_secs))
                .policy(self.policy())
                .build();
            delegate = delegate.agent(name, &specialist.description, agent);
        }
        Ok(Some(delegate))
    }

    /// Offers `agent`'s scheduler's tools, as the tool state file allows:
    /// the scheduler to run, when the agent has one.
    pub(crate) fn add_schedule_tools(&self, agent: &Agent) -> Option<Scheduler> {
        let scheduler = Scheduler::clone(&*agent.state::<Scheduler>()?);
        for tool in ferrobot::schedule::tools() {
            agent.tools().register(tool);
        }
        // The tool state file may switch them off too.
        match ToolState::load(&self.tool_state_path()) {
            Ok(state) => state.apply(agent),
            Err(error) => tracing::warn!(%error, "could not read the tool state file"),
        }
        Some(scheduler)
    }

    /// Runs a bot until its channel stops: the [`agent`](Self::agent) this
    /// config describes answering on `channel` (confirmations and later
    /// messages go through it), its MCP servers connecting in the
    /// background ([`start_mcp`](Self::start_mcp)), the schedule tools and
    /// its scheduler running (answers of scheduled prompts and later
    /// messages, kept in the history file, posted to their chats), the tool
    /// state and tools files followed as they change, and, when `notice_to`
    /// resolves to a conversation (once
    /// the channel is connected), a start-up report sent there
    /// ([`system_report`](ferrobot::tools::system_report)), and the
    /// process's runtime file and control panel ([`Panel`](crate::panel::Panel)).
    ///
    /// With [`FERROBOT_SESSION`](crate::session::SESSION_VAR) naming a file,
    /// the conversation is recorded as a test
    /// ([`replay_session`](Self::replay_session) replays it): the chats
    /// through a [`SessionRecorder`], every model call into the cassette
    /// beside it, the conversations kept in memory.
    ///
    /// # Errors
    /// When another bot serves from the same history file, the agent can't
    /// be built (the message names the file) or the channel stops with an
    /// error.
    pub async fn serve(
        &self,
        channel: Arc<dyn Channel>,
        notice_to: Option<impl Future<Output = Option<String>> + Send + 'static>,
    ) -> Result<(), ChannelError> {
        // Replicas share a database; a file is one process's.
        let _single =
            match self.config.history.url {
                Some(_) => None,
                None => Some(crate::single::lock_history(&self.history_path()).map_err(
                    |message| ChannelError::Other {
                        message,
                        source: None,
                    },
                )?),
            };
        // `FERROBOT_SESSION=FILE`: the conversation recorded as a test.
        // What the bot sends on its own (later messages, schedules, the
        // start-up notice) goes to the platform unrecorded: a replay runs
        // none of it.
        let platform = Arc::clone(&channel);
        let (channel, stage) = match crate::session::to_record() {
            Some(path) => {
                let recorder = SessionRecorder::new(&path, channel);
                let model = recorder.model_path();
                tracing::info!(session = %path.display(), model = %model.display(), "recording the session ({})", crate::session::SESSION_VAR);
                (
                    Arc::new(recorder) as Arc<dyn Channel>,
                    Stage::Record { model },
                )
            }
            None => (channel, Stage::Live),
        };
        let agent = self
            .agent_for(
                ChannelConfirm(Arc::clone(&channel)),
                ChannelNotifier(Arc::clone(&platform)),
                stage,
            )
            .await
            .map_err(|source| ChannelError::Other {
                message: source.to_string(),
                source: Some(source),
            })?;
        let _mcp = self
            .start_mcp(&agent)
            .map_err(|source| ChannelError::Other {
                message: source.to_string(),
                source: Some(source),
            })?;
        let _schedule = self.add_schedule_tools(&agent).map(|scheduler| {
            AbortOnDropHandle::new(tokio::spawn(
                scheduler.run(agent.clone(), ChannelNotifier(Arc::clone(&platform))),
            ))
        });
        let _state = AbortOnDropHandle::new(ToolState::watch(self.tool_state_path(), &agent));
        let _tools = AbortOnDropHandle::new(watch_tools_file(self.tools_file_path(), &agent));
        let _panel = crate::panel::Panel::start(self, &agent).await;
        let _notice = notice_to.map(|notice_to| {
            let channel = Arc::clone(&platform);
            AbortOnDropHandle::new(tokio::spawn(async move {
                let Some(to) = notice_to.await else { return };
                let report = ferrobot::tools::system_report().await;
                let text = format!("ferrobot is online.\n\n{report}");
                if let Err(error) = channel.send(&to, &text).await {
                    tracing::warn!(error = %error.chain(), "could not send the start-up notice");
                }
            }))
        });
        ferrobot::bot::serve(agent, channel).await
    }
}
