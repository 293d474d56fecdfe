//! The commands that don't chat with the model: `tools`, `enable` and
//! `disable`, `doctor` (which only probes it and the MCP servers),
//! `status`, `replay` (which answers it from a recording) and `config
//! check`.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use ferrobot::provider::Provider;
use ferrobot::testing::SessionError;
use ferrobot::tool::Tool;
use ferrobot_app::{LoadedConfig, ToolState};

use crate::{EXIT_DOCTOR, EXIT_TURN_FAILED};

pub(crate) fn tools(loaded: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let state = ToolState::load(&loaded.tool_state_path())?;
    for tool in loaded.tools().map_err(|e| anyhow::anyhow!(e))? {
        let enabled = if state.is_disabled(tool.name()) {
            "disabled"
        } else {
            "enabled"
        };
        let available = match tool.availability() {
            Ok(()) => "available".to_owned(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        let summary = tool
            .spec()
            .description
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        out!("{:<20} {enabled:<9} {available:<12} {summary}", tool.name());
    }
    Ok(ExitCode::SUCCESS)
}

/// The tool named `name`: a system tool or one of the tools file, as
/// `ferrobot tools` lists them.
pub(crate) fn find_tool(loaded: &LoadedConfig, name: &str) -> anyhow::Result<Arc<dyn Tool>> {
    let tools = loaded.tools().map_err(|e| anyhow::anyhow!(e))?;
    let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    let Some(found) = tools.iter().find(|t| t.name() == name) else {
        anyhow::bail!(
            "no tool named `{name}`; the tools are: {}",
            known.join(", ")
        );
    };
    Ok(Arc::clone(found))
}

pub(crate) fn switch(loaded: &LoadedConfig, name: &str, enabled: bool) -> anyhow::Result<ExitCode> {
    // An MCP server's tool (`SERVER__TOOL`) is known only once the server
    // answers; its name is taken on trust (`ferrobot mcp list` shows them).
    let of_a_server = loaded.config.mcp.servers.keys().any(|server| {
        name.strip_prefix(server.as_str())
            .is_some_and(|rest| rest.starts_with("__"))
    });
    if !of_a_server {
        find_tool(loaded, name)?;
    }
    let path = loaded.tool_state_path();
    let mut state = ToolState::load(&path)?;
    state.set_enabled(name, enabled);
    state
        .save(&path)
        .with_context(|| format!("saving {}", path.display()))?;
    out!("{name} {}", if enabled { "enabled" } else { "disabled" });
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn doctor(loaded: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let llm = llm_doctor(loaded).await?;
    let mcp = crate::mcp::doctor(loaded).await;
    Ok(if llm && mcp {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DOCTOR)
    })
}

/// `ferrobot doctor --conformance`: the check's table (or JSON), and
/// whether tool calling is usable.
pub(crate) async fn conformance(loaded: &LoadedConfig, json: bool) -> anyhow::Result<ExitCode> {
    let report = loaded.conformance()?.run().await;
    if json {
        out!("{}", serde_json::to_string_pretty(&report.scenarios)?);
    } else {
        let _ = write!(std::io::stdout(), "{report}");
        out!(
            "tool calling: {}",
            if report.tool_calling_usable() {
                "usable"
            } else {
                "not usable"
            }
        );
    }
    Ok(if report.tool_calling_usable() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DOCTOR)
    })
}

/// `ferrobot replay FILE`: a recorded bot session replayed against this
/// config's agent; 0 when the bot answered as recorded, 1 with the report
/// when not.
pub(crate) async fn replay(
    loaded: &LoadedConfig,
    file: &std::path::Path,
    ignored: &[String],
) -> anyhow::Result<ExitCode> {
    match loaded.replay_session(file, ignored).await {
        Ok(()) => {
            out!("{}: the bot answered as recorded", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => match error.downcast::<SessionError>() {
            Ok(error) if matches!(*error, SessionError::Differs { .. }) => {
                eprintln!("{error}");
                Ok(ExitCode::from(EXIT_TURN_FAILED))
            }
            Ok(error) => Err(anyhow::Error::new(*error)),
            Err(error) => Err(anyhow::anyhow!(error)),
        },
    }
}

/// `ferrobot status`: the bots of this config, from their runtime files and
/// panels.
pub(crate) async fn status(loaded: &LoadedConfig, json: bool) -> anyhow::Result<ExitCode> {
    use ferrobot_app::panel::local_time;
    let dir = loaded.runtime_dir();
    let seen = ferrobot_app::panel::survey(&dir).await;
    let running = seen.iter().any(|bot| bot.running);
    if json {
        out!("{}", serde_json::to_string_pretty(&seen)?);
    } else if seen.is_empty() {
        out!(
            "No bot has run with this config (no runtime files in {}).",
            dir.display()
        );
    }
    for bot in seen.iter().filter(|_| !json) {
        let name = format!("{} (pid {})", bot.bot, bot.pid);
        let Some(uptime) = bot.uptime() else {
            out!(
                "{name}: stopped, last seen {} (started {})",
                local_time(bot.last_seen),
                local_time(bot.started_at)
            );
            continue;
        };
        out!(
            "{name}: running since {} ({} h {} min)",
            local_time(bot.started_at),
            uptime / 3600,
            uptime % 3600 / 60
        );
        match (&bot.panel, &bot.status, &bot.panel_error) {
            (None, ..) => out!("  panel:    none ([panel] is off, or its port was taken)"),
            (Some(_), _, Some(error)) => out!("  panel:    not answering: {error}"),
            (Some(panel), Some(status), None) => {
                out!("  panel:    {panel}");
                let model = &status["model"];
                let health = match (
                    model["reachable"].as_bool(),
                    model["model_present"].as_bool(),
                ) {
                    (Some(true), Some(false)) => "reachable, but the model is missing".to_owned(),
                    (Some(true), _) => format!("reachable ({} ms)", model["latency_ms"]),
                    _ => format!(
                        "unreachable: {}",
                        model["detail"].as_str().unwrap_or("no answer")
                    ),
                };
                out!(
                    "  model:    {} at {}: {health}",
                    model["model"].as_str().unwrap_or_default(),
                    model["base_url"].as_str().unwrap_or_default()
                );
                let turns = &status["turns"];
                out!(
                    "  turns:    {} ended, {} failed, {} running",
                    turns["turns"],
                    turns["failed"],
                    turns["running"]
                );
                let problems = status["problems"].as_array().cloned().unwrap_or_default();
                for problem in problems.iter().rev().take(5) {
                    out!(
                        "  {:<5} {}  {}",
                        problem["level"].as_str().unwrap_or_default(),
                        local_time(problem["at"].as_u64().unwrap_or_default()),
                        problem["message"].as_str().unwrap_or_default()
                    );
                }
            }
            (Some(_), None, None) => {}
        }
    }
    Ok(if running {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DOCTOR)
    })
}

/// The model server's part of `doctor`: whether it is well.
async fn llm_doctor(loaded: &LoadedConfig) -> anyhow::Result<bool> {
    let provider = loaded.provider()?;
    let llm = &loaded.config.llm;
    let health = provider.health().await;
    out!(
        "server:  {} ({} ms)",
        llm.base_url,
        health.latency.as_millis()
    );
    out!("model:   {}", llm.model);
    if health.is_ok() {
        out!("status:  ok");
        return Ok(true);
    }
    out!(
        "status:  {}",
        if health.reachable {
            "answered, with a problem"
        } else {
            "unreachable"
        }
    );
    if let Some(detail) = health.detail {
        out!("problem: {detail}");
    }
    Ok(false)
}

pub(crate) fn config_check(loaded: &LoadedConfig) -> ExitCode {
    match &loaded.file {
        Some(file) => out!("config file: {}", file.display()),
        None => out!("config file: none (built-in defaults)"),
    }
    for (key, value, source) in loaded.explain() {
        out!("{key} = {value}    # {source}");
    }
    out!("{}", loaded.history_place());
    ExitCode::SUCCESS
}
