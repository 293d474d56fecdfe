//! The agent a config describes (its model, its tools, its history), and a
//! bot served from it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::AbortOnDropHandle;

use ferrobot::agent::{Agent, TurnBudget};
use ferrobot::bot::{Channel, ChannelConfirm, ChannelError, ChannelNotifier};
use ferrobot::confirm::ConfirmHandler;
use ferrobot::history::SqliteHistory;
use ferrobot::tool::{Notifier, Tool};

use crate::{LoadedConfig, ToolState, watch_tools_file};

impl LoadedConfig {
    /// The tools a bot offers: the system tools, then the command tools of
    /// the tools file, if there is one.
    ///
    /// # Errors
    /// When the tools file has mistakes; the message names them.
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ferrobot::BoxError> {
        let mut tools = ferrobot::tools::system();
        let file = self.tools_file_path();
        if file.is_file() {
            let commands = ferrobot::tools::CommandTool::load_file(&file)?;
            tools.extend(commands.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>));
        }
        Ok(tools)
    }

    /// The agent the config describes: its [`provider`](Self::provider),
    /// [`tools`](Self::tools) with the tool state file applied, the `[agent]`
    /// settings, the `[[permissions.rules]]` ([`policy`](Self::policy)) and
    /// the SQLite history; it asks `confirm` before tools that
    /// want approval and delivers later messages through `notifier`.
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
        let path = self.history_path();
        let history = SqliteHistory::open(&path)
            .await
            .map_err(|e| format!("opening the history at {}: {e}", path.display()))?;
        let settings = &self.config.agent;
        let agent = Agent::builder()
            .provider(self.provider()?)
            .tools(self.tools()?)
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
            .history(history)
            .confirm(confirm)
            .notifier(notifier)
            .build();
        ToolState::load(&self.tool_state_path())?.apply(&agent);
        Ok(agent)
    }

    /// Runs a bot until its channel stops: the [`agent`](Self::agent) this
    /// config describes answering on `channel` (confirmations and later
    /// messages go through it), its MCP servers connecting in the
    /// background ([`start_mcp`](Self::start_mcp)), the tool state and
    /// tools files followed as they change, and, when `notice_to` resolves to a conversation (once
    /// the channel is connected), a start-up report sent there
    /// ([`system_report`](ferrobot::tools::system_report)).
    ///
    /// # Errors
    /// When the agent can't be built (the message names the file) or the
    /// channel stops with an error.
    pub async fn serve(
        &self,
        channel: Arc<dyn Channel>,
        notice_to: Option<impl Future<Output = Option<String>> + Send + 'static>,
    ) -> Result<(), ChannelError> {
        let agent = self
            .agent(
                ChannelConfirm(Arc::clone(&channel)),
                ChannelNotifier(Arc::clone(&channel)),
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
        let _state = AbortOnDropHandle::new(ToolState::watch(self.tool_state_path(), &agent));
        let _tools = AbortOnDropHandle::new(watch_tools_file(self.tools_file_path(), &agent));
        let _notice = notice_to.map(|notice_to| {
            let channel = Arc::clone(&channel);
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
