//! The power tools: `shutdown` and `reboot` plan a power-off or a restart
//! of the machine after a delay, once the user confirms, and announce it
//! just before; `cancel_shutdown` calls it off, as `/cancel_shutdown` too.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::tool::{Effects, IntoTool as _, Tool, ToolContext, ToolError, from_fn};

/// What to do with the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PowerAction {
    /// Power it off.
    PowerOff,
    /// Restart it.
    Reboot,
}

impl PowerAction {
    /// What the user is told just before it happens.
    pub fn announcement(self) -> &'static str {
        match self {
            PowerAction::PowerOff => "Powering off now.",
            PowerAction::Reboot => "Rebooting now.",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            PowerAction::PowerOff => "power off",
            PowerAction::Reboot => "reboot",
        }
    }
}

/// Plans and cancels power actions: the operating system's `shutdown`
/// command ([`SystemPower`]) on a real machine, a fake in tests.
///
/// # Examples
/// A control that only records, for tests:
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use futures_util::future::BoxFuture;
/// use ferrobot::tools::{PowerAction, PowerControl};
///
/// #[derive(Default)]
/// struct Recorded(Mutex<Vec<String>>);
///
/// impl PowerControl for Recorded {
///     fn schedule(&self, action: PowerAction, delay: Duration) -> BoxFuture<'_, Result<(), String>> {
///         self.0.lock().unwrap().push(format!("{action:?} in {delay:?}"));
///         Box::pin(async { Ok(()) })
///     }
///     fn cancel(&self) -> BoxFuture<'_, Result<(), String>> {
///         self.0.lock().unwrap().push("cancel".into());
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// let tools = ferrobot::tools::power(Arc::new(Recorded::default()));
/// assert_eq!(tools.len(), 3);
/// ```
pub trait PowerControl: Send + Sync + 'static {
    /// Plans `action` `delay` from now, in place of any action planned
    /// before. Returns once it is planned.
    ///
    /// # Errors
    /// What went wrong, for the user: the command failed, was not allowed…
    fn schedule(&self, action: PowerAction, delay: Duration) -> BoxFuture<'_, Result<(), String>>;

    /// Cancels the planned action, if there is one.
    ///
    /// # Errors
    /// What went wrong, for the user.
    fn cancel(&self) -> BoxFuture<'_, Result<(), String>>;
}

impl<T: PowerControl> PowerControl for Arc<T> {
    fn schedule(&self, action: PowerAction, delay: Duration) -> BoxFuture<'_, Result<(), String>> {
        T::schedule(self, action, delay)
    }

    fn cancel(&self) -> BoxFuture<'_, Result<(), String>> {
        T::cancel(self)
    }
}

/// The operating system's `shutdown` command: `shutdown -P +5` (`-h` on
/// macOS and the BSDs, `/s /t 300` on Windows), `-r` to reboot, `-c` (`/a`)
/// to cancel.
///
/// The system keeps the plan (systemd's logind on Linux), so it survives
/// the bot's restart; the bot's own announcement does too when its history
/// keeps later messages. macOS and the BSDs can't cancel a planned
/// shutdown from the command line: `cancel` says so.
///
/// The command usually needs privileges: run it through `sudo -n` with a
/// sudoers rule for this one command ([`command`](Self::command)).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ferrobot::tools::{PowerAction, SystemPower};
/// let power = SystemPower::command(["sudo", "-n", "shutdown"]).unwrap();
/// # #[cfg(target_os = "linux")]
/// assert_eq!(
///     power.arguments(PowerAction::Reboot, Duration::from_secs(300)),
///     ["sudo", "-n", "shutdown", "-r", "+5"]
/// );
/// ```
#[derive(Debug, Clone)]
pub struct SystemPower {
    program: Vec<String>,
}

impl Default for SystemPower {
    fn default() -> Self {
        Self {
            program: vec!["shutdown".to_owned()],
        }
    }
}

impl SystemPower {
    /// `shutdown`, found on `PATH`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `program` (a program and its first arguments, e.g. `["sudo",
    /// "-n", "shutdown"]`) in place of `shutdown`.
    ///
    /// # Errors
    /// When `program` is empty.
    pub fn command<S: Into<String>>(program: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let program: Vec<String> = program.into_iter().map(Into::into).collect();
        if program.first().is_none_or(String::is_empty) {
            return Err("the power command is empty: name a program, e.g. [\"shutdown\"]".into());
        }
        Ok(Self { program })
    }

    /// The whole command line that plans `action` in `delay` (rounded up
    /// to whole minutes where the system counts in minutes).
    pub fn arguments(&self, action: PowerAction, delay: Duration) -> Vec<String> {
        let mut line = self.program.clone();
        if cfg!(windows) {
            let flag = match action {
                PowerAction::PowerOff => "/s",
                PowerAction::Reboot => "/r",
            };
            line.extend([
                flag.to_owned(),
                "/t".to_owned(),
                delay.as_secs().to_string(),
            ]);
        } else {
            let flag = match action {
                PowerAction::PowerOff if cfg!(target_os = "linux") => "-P",
                PowerAction::PowerOff => "-h",
                PowerAction::Reboot => "-r",
            };
            line.extend([
                flag.to_owned(),
                format!("+{}", delay.as_secs().div_ceil(60)),
            ]);
        }
        line
    }

    async fn run(&self, line: Vec<String>) -> Result<(), String> {
        let shown = line.join(" ");
        let mut child = tokio::process::Command::new(&line[0])
            .args(&line[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|error| format!("could not run `{shown}`: {error}"))?;
        let mut said = Vec::new();
        let mut stderr = child.stderr.take();
        let finished = tokio::time::timeout(COMMAND_WAIT, async {
            if let Some(stderr) = &mut stderr {
                let _ = tokio::io::AsyncReadExt::read_to_end(stderr, &mut said).await;
            }
            child.wait().await
        })
        .await;
        let status = match finished {
            Ok(Ok(status)) => status,
            Ok(Err(error)) => return Err(format!("`{shown}` failed: {error}")),
            // systemd's `shutdown` hands the plan to logind and returns at
            // once; sysvinit's and the BSDs' wait in the foreground until
            // the time comes. Such a one is left running: it is the plan.
            Err(_) => return Ok(()),
        };
        if status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&said);
        let said = said.trim();
        Err(format!(
            "`{shown}` failed ({status}){}{said}",
            if said.is_empty() { "" } else { ": " }
        ))
    }
}

/// How long the `shutdown` command is waited for before it counts as
/// waiting in the foreground for its time.
const COMMAND_WAIT: Duration = Duration::from_secs(5);

impl PowerControl for SystemPower {
    fn schedule(&self, action: PowerAction, delay: Duration) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if cfg!(windows) {
                // Windows refuses a second plan (error 1190): the new one
                // replaces the old, as elsewhere.
                let mut abort = self.program.clone();
                abort.push("/a".to_owned());
                let _ = self.run(abort).await;
            }
            self.run(self.arguments(action, delay)).await
        })
    }

    fn cancel(&self) -> BoxFuture<'_, Result<(), String>> {
        let mut line = self.program.clone();
        if cfg!(windows) {
            line.push("/a".to_owned());
        } else if cfg!(target_os = "linux") {
            line.push("-c".to_owned());
        } else {
            return Box::pin(async {
                Err(
                    "this system's `shutdown` can't cancel: stop the waiting `shutdown` process \
                     (`sudo killall shutdown`)"
                        .to_owned(),
                )
            });
        }
        Box::pin(self.run(line))
    }
}

/// How long before the action the announcement goes: the system starts
/// stopping services (the bot among them) at the planned minute.
const ANNOUNCE_AHEAD: Duration = Duration::from_secs(20);

#[derive(Deserialize, JsonSchema)]
struct When {
    /// Minutes from now, 1 to 1440 (a day); 1 when the user says "now".
    #[schemars(range(min = 1, max = 1440))]
    minutes: u32,
}

/// The power tools over `control`: `shutdown` and `reboot` (each asks the
/// user first, then plans the action `minutes` from now and announces it
/// through [`ToolContext::notify_later`] 20 s before), and
/// `cancel_shutdown` (no question; also the `/cancel_shutdown` command,
/// which answers while another turn of the chat runs).
///
/// A new plan replaces the old one and its announcement. With a running
/// [`Scheduler`](crate::schedule::Scheduler) and a store that keeps later
/// messages, the announcement survives a restart and `cancel_shutdown`
/// still withdraws it afterwards.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, testing::MockProvider};
/// use ferrobot::tools::{SystemPower, power};
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .tools(power(SystemPower::new()))
///     .build();
/// assert!(agent.tools().get("cancel_shutdown").is_some());
/// ```
pub fn power(control: impl PowerControl) -> Vec<Arc<dyn Tool>> {
    let power = Arc::new(Power {
        control: Box::new(control),
        one_at_a_time: tokio::sync::Mutex::new(()),
    });
    vec![
        plan(
            "shutdown",
            "Power this machine off after a delay in minutes. The user is asked to confirm \
             and told just before; `cancel_shutdown` calls it off.",
            "Power this machine off in {minutes} minute(s)?",
            PowerAction::PowerOff,
            &power,
        ),
        plan(
            "reboot",
            "Restart this machine after a delay in minutes. The user is asked to confirm \
             and told just before; `cancel_shutdown` calls it off.",
            "Reboot this machine in {minutes} minute(s)?",
            PowerAction::Reboot,
            &power,
        ),
        from_fn(
            "cancel_shutdown",
            "Cancel a planned shutdown or reboot of this machine.",
            move |_: serde_json::Value, ctx: ToolContext| {
                let power = Arc::clone(&power);
                async move {
                    let _alone = power.one_at_a_time.lock().await;
                    power.control.cancel().await.map_err(ToolError::new)?;
                    let withdrawn = withdraw_announcements(&ctx).await?;
                    Ok::<_, ToolError>(if withdrawn > 0 {
                        "Cancelled: the machine stays on."
                    } else {
                        "No shutdown or reboot was announced; any the system had planned is cancelled."
                    })
                }
            },
        )
        .effects(Effects::NONE.idempotent())
        .into_tool(),
    ]
}

/// What the three tools share: the control, and a lock so that a plan and
/// a cancellation (which runs beside the chat's turn) never interleave.
struct Power {
    control: Box<dyn PowerControl>,
    one_at_a_time: tokio::sync::Mutex<()>,
}

fn plan(
    name: &str,
    description: &str,
    question: &str,
    action: PowerAction,
    power: &Arc<Power>,
) -> Arc<dyn Tool> {
    let power = Arc::clone(power);
    from_fn(name, description, move |when: When, ctx: ToolContext| {
        let power = Arc::clone(&power);
        async move {
            let _alone = power.one_at_a_time.lock().await;
            let delay = Duration::from_secs(u64::from(when.minutes) * 60);
            power
                .control
                .schedule(action, delay)
                .await
                .map_err(ToolError::new)?;
            // The plan is made: from here on, a failure only costs the
            // warning just before, and the answer says so.
            let announced = match withdraw_announcements(&ctx).await {
                // The new plan replaced any earlier one; so does its
                // announcement.
                Ok(_) => {
                    ctx.notify_later(action.announcement(), delay.saturating_sub(ANNOUNCE_AHEAD))
                        .await
                }
                Err(error) => Err(error),
            };
            let minutes = when.minutes;
            let plural = if minutes == 1 { "" } else { "s" };
            Ok::<_, ToolError>(match announced {
                Ok(()) => format!(
                    "The machine will {} in {minutes} minute{plural}; the user will be told just \
                     before. /cancel_shutdown calls it off.",
                    action.verb()
                ),
                Err(error) => {
                    tracing::warn!(%error, "a power plan's announcement could not be kept");
                    format!(
                        "The machine will {} in {minutes} minute{plural}, without a warning just \
                         before ({error}). /cancel_shutdown calls it off.",
                        action.verb()
                    )
                }
            })
        }
    })
    .confirm(question)
    .effects(Effects::DESTRUCTIVE)
    .into_tool()
}

/// Withdraws both announcements from every conversation: the plan is the
/// machine's, whichever chat made it.
async fn withdraw_announcements(ctx: &ToolContext) -> Result<usize, ToolError> {
    let mut withdrawn = 0;
    for action in [PowerAction::PowerOff, PowerAction::Reboot] {
        withdrawn += ctx.withdraw_later_everywhere(action.announcement()).await?;
    }
    Ok(withdrawn)
}
