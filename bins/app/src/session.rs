//! A bot's conversations pinned as regression tests: recorded while it
//! runs with `FERROBOT_SESSION=FILE` ([`LoadedConfig::serve`]), replayed
//! with no chat platform and no model server by `ferrobot replay FILE`
//! ([`LoadedConfig::replay_session`]).

use std::path::{Path, PathBuf};

use ferrobot::testing::{Cassette, Session};

use crate::LoadedConfig;
use crate::agent::Stage;

/// The environment variable that makes a bot record its session: the
/// conversation into the file it names, the model's answers into
/// `NAME.model.json` beside it.
pub const SESSION_VAR: &str = "FERROBOT_SESSION";

/// The file `FERROBOT_SESSION` names, when a bot is to record.
pub(crate) fn to_record() -> Option<PathBuf> {
    std::env::var_os(SESSION_VAR)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

impl LoadedConfig {
    /// Replays the session file at `path` against the agent this config
    /// describes — its tools, prompt, rules and limits — with the model
    /// answered from the session's cassette (`NAME.model.json`), the
    /// conversations in memory (the bot's store is not touched), the clock
    /// at the recording's time, the scheduler's tools offered but no
    /// schedule run, and no MCP server started. The model's requests are
    /// compared with the recording's, leaving out the dotted paths of
    /// `ignored` (`*` for any step): e.g. a tool's live output.
    ///
    /// # Errors
    /// A [`SessionError`](ferrobot::testing::SessionError) when the file
    /// can't be read or the bot answered otherwise (a model request that
    /// differs shows in the report as the error the bot told the chat,
    /// with the cassette's difference); the agent's error when it can't be
    /// built.
    pub async fn replay_session(
        &self,
        path: &Path,
        ignored: &[String],
    ) -> Result<(), ferrobot::BoxError> {
        let session = Session::open(path)?;
        let model = ignored
            .iter()
            .fold(Cassette::replay(session.model_path()), |cassette, path| {
                cassette.ignore(path.clone())
            });
        let stage = Stage::Replay {
            model,
            at: session.recorded_at(),
        };
        let agent = self
            .agent_for(session.confirm(), session.notifier(), stage)
            .await?;
        self.add_schedule_tools(&agent);
        session.replay(agent).await?;
        Ok(())
    }
}
