//! The built-in slash commands: one list that the agent's slash path, `/help`
//! and every front end's command menu read.

/// A command ferrobot answers itself, never a tool: a built-in wins over a
/// tool of the same name (the tool loses its slash command and its menu
/// entry, the model can still call it, and `/help` says so).
///
/// The agent answers `/help`, `/undo`, `/stop`, `/tasks` and `/cancel` in [`Agent::handle`](super::Agent::handle)
/// and [`Agent::stream`](super::Agent::stream). `/new` belongs to the front
/// end, which owns the mapping from a chat to its conversation: `bot::serve`
/// and the `ferrobot` CLI answer it; an agent that is sent `/new` says so.
///
/// # Examples
/// ```
/// use ferrobot::agent::Builtin;
/// assert_eq!(Builtin::parse("/undo"), Some(Builtin::Undo));
/// assert_eq!(Builtin::parse("/new@my_bot please"), Some(Builtin::New));
/// assert_eq!(Builtin::parse("/disk_usage path=/"), None);
/// let menu: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
/// assert_eq!(menu, ["new", "stop", "undo", "tasks", "cancel", "help"]);
/// assert_eq!(Builtin::parse("/cancel 3"), Some(Builtin::Cancel));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Builtin {
    /// `/new`: start a fresh conversation in this chat (the front end's).
    New,
    /// `/stop`: stop the conversation's running turn, keeping what it wrote
    /// ([`Agent::stop`](super::Agent::stop)).
    Stop,
    /// `/undo`: take back the conversation's last turn.
    Undo,
    /// `/tasks`: list the conversation's background tasks
    /// ([`Delegate`](super::Delegate)): id, state, specialist, age, the
    /// task's first line.
    Tasks,
    /// `/cancel ID`: cancel the conversation's background task `ID`; the
    /// chat is told once it has stopped.
    Cancel,
    /// `/help`: list the commands.
    Help,
}

impl Builtin {
    /// Every built-in, in the order menus show them.
    pub const ALL: [Builtin; 6] = [
        Builtin::New,
        Builtin::Stop,
        Builtin::Undo,
        Builtin::Tasks,
        Builtin::Cancel,
        Builtin::Help,
    ];

    /// Its name, without the `/`.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::New => "new",
            Builtin::Stop => "stop",
            Builtin::Undo => "undo",
            Builtin::Tasks => "tasks",
            Builtin::Cancel => "cancel",
            Builtin::Help => "help",
        }
    }

    /// One line for a menu and for `/help`.
    pub fn description(self) -> &'static str {
        match self {
            Builtin::New => "Start a fresh conversation",
            Builtin::Stop => "Stop the running turn",
            Builtin::Undo => "Take back your last message and its answer",
            Builtin::Tasks => "List the background tasks",
            Builtin::Cancel => "Cancel a background task: /cancel ID",
            Builtin::Help => "List the commands",
        }
    }

    /// The built-in named `name` (without the `/`), if any.
    pub fn named(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The built-in a message invokes: its first word is `/name`, or
    /// `/name@bot` as Telegram writes it in groups.
    pub fn parse(text: &str) -> Option<Builtin> {
        let word = text.split_whitespace().next()?.strip_prefix('/')?;
        Builtin::named(command_name(word))
    }
}

/// A command's name without the bot's, which Telegram appends in groups:
/// `help@my_bot` → `help`.
pub(super) fn command_name(word: &str) -> &str {
    word.split_once('@').map_or(word, |(name, _)| name)
}
