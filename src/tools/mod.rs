//! Batteries-included tools (feature `tools`): what a system administration
//! assistant needs to answer "how much disk space is left?".
//!
//! [`system()`] returns them all, for `Agent::builder().tools(…)`. Each is an
//! ordinary `#[tool]` and can be registered alone. A reading this machine
//! can't provide (temperatures in a container, say) is answered with a clear
//! sentence, not an error.
//!
//! [`power()`] is opt-in: `shutdown`, `reboot` and `cancel_shutdown`, over
//! the system's `shutdown` command ([`SystemPower`]) or a fake in tests.

mod command;
mod power;
// The tools' doc comments are what the model reads; rustdoc sections such as
// `# Errors` would be sent to it too.
#[allow(clippy::missing_errors_doc)]
mod system;

use std::sync::Arc;

pub use command::{CommandTool, ParamKind};
pub use power::{PowerAction, PowerControl, SystemPower, power};
pub use system::{
    cpu_load, disk_usage, memory, network_interfaces, os_info, report as system_report,
    temperatures, top_processes, uptime,
};

use crate::tool::{IntoTool, Tool};

/// Every system tool.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, testing::MockProvider};
/// let agent = Agent::builder().provider(MockProvider::replying("ok")).tools(ferrobot::tools::system()).build();
/// assert!(agent.tools().get("disk_usage").is_some());
/// ```
pub fn system() -> Vec<Arc<dyn Tool>> {
    vec![
        disk_usage.into_tool(),
        memory.into_tool(),
        cpu_load.into_tool(),
        temperatures.into_tool(),
        uptime.into_tool(),
        top_processes.into_tool(),
        network_interfaces.into_tool(),
        os_info.into_tool(),
    ]
}
