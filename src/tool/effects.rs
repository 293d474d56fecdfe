//! What a tool's calls do to the world, as the tool declares it.

use serde::{Deserialize, Serialize};

/// What a tool's calls do, as MCP's tool annotations name it. The
/// [`Policy`](crate::policy::Policy) reads them for its defaults: a
/// destructive tool asks before it runs unless a rule allows it; a
/// read-only one runs; a tool that declares nothing runs, as any tool did
/// before effects existed. A tool's own question
/// ([`Tool::confirmation`](super::Tool::confirmation)) is asked whatever
/// its effects say.
///
/// `#[tool(read_only)]`, `#[tool(destructive)]`, `#[tool(idempotent)]` and
/// `#[tool(open_world)]` declare them on a function; [`FnTool`](super::FnTool)
/// and [`CommandTool`](crate::tools::CommandTool) have setters.
///
/// # Examples
/// ```
/// use ferrobot::tool::Effects;
/// let effects = Effects::DESTRUCTIVE.idempotent();
/// assert!(effects.destructive && effects.idempotent && !effects.read_only);
/// assert_eq!(Effects::default(), Effects::NONE);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Effects {
    /// Only reads: changes nothing anywhere (MCP's `readOnlyHint`).
    pub read_only: bool,
    /// May destroy or overwrite something that can't be had back: deleting
    /// files, rebooting, sending mail (MCP's `destructiveHint`).
    pub destructive: bool,
    /// Calling it again with the same arguments does nothing more (MCP's
    /// `idempotentHint`).
    pub idempotent: bool,
    /// Reaches outside this machine: the web, other people (MCP's
    /// `openWorldHint`).
    pub open_world: bool,
}

impl Effects {
    /// Nothing declared.
    pub const NONE: Effects = Effects {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };

    /// Only reads.
    pub const READ_ONLY: Effects = Effects {
        read_only: true,
        ..Effects::NONE
    };

    /// May destroy something.
    pub const DESTRUCTIVE: Effects = Effects {
        destructive: true,
        ..Effects::NONE
    };

    /// These effects, and only reading.
    #[must_use]
    pub const fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// These effects, and destroying something.
    #[must_use]
    pub const fn destructive(mut self) -> Self {
        self.destructive = true;
        self
    }

    /// These effects, and repeating does nothing more.
    #[must_use]
    pub const fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// These effects, and reaching outside this machine.
    #[must_use]
    pub const fn open_world(mut self) -> Self {
        self.open_world = true;
        self
    }
}
