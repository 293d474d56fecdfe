//! Tools the model can call.
//!
//! A [`Tool`] has a [`ToolSpec`] (name, description, JSON Schema of its
//! arguments) and an async `call` that takes the arguments and a
//! [`ToolContext`]. [`from_fn`] makes one from a closure over a typed
//! arguments struct; [`IntoTool`] is what `Agent::builder().tool(…)` accepts.
//! The agent keeps its tools in a [`ToolRegistry`], which also knows which are
//! enabled. [`schema`] turns a tool's schema into the forms the dialects
//! accept (plain, `OpenAI` strict, Gemini).
//!
//! A tool never fails the turn: what it returns, its error, a panic or a
//! time-out all become a [`ToolResult`](crate::ToolResult) the model reads.

pub(crate) mod arguments;
pub(crate) mod context;
mod effects;
mod func;
mod registry;
pub mod schema;
pub(crate) mod validate;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

pub use arguments::Constraints;
pub use context::{Notifier, State, StateType, ToolContext};
pub use effects::Effects;
pub use func::{FnTool, from_fn};
pub use registry::ToolRegistry;

// The derive beside the trait it is named after, as serde's are: `use
// ferrobot::tool::Tool;` (or `ferrobot::Tool`) brings in both.
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
#[doc(inline)]
#[doc = include_str!("../docs/derive_tool.md")]
pub use ferrobot_macros::Tool;

use crate::message::ToolSpec;

/// Something the model can ask to run.
///
/// Most tools come from `#[tool]` or [`from_fn`]; implement the
/// trait by hand for full control.
///
/// # Examples
/// ```
/// use ferrobot::tool::{Tool, ToolContext, ToolError, ToolOutput};
/// use ferrobot::ToolSpec;
/// use futures_util::future::BoxFuture;
/// use serde_json::{json, Value};
///
/// struct Uptime { spec: ToolSpec }
///
/// impl Tool for Uptime {
///     fn spec(&self) -> &ToolSpec { &self.spec }
///     fn call(&self, _args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
///         Box::pin(async { Ok("up 3 days".into()) })
///     }
/// }
///
/// let uptime = Uptime {
///     spec: ToolSpec::new("uptime", "How long this machine has been up.", json!({"type": "object", "properties": {}})),
/// };
/// assert_eq!(uptime.name(), "uptime");
/// ```
pub trait Tool: Send + Sync + 'static {
    /// What the model is told about the tool.
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool. Called only after the agent checked that the tool is
    /// enabled and available, and got the user's approval if
    /// [`confirmation`](Self::confirmation) asked for it. The returned
    /// output (text, and images if any), or the error's message, is what
    /// the model reads; `Ok("text".into())` for text alone.
    fn call(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>>;

    /// The tool's name; by default the spec's.
    fn name(&self) -> &str {
        &self.spec().name
    }

    /// The question to ask the user before running with these arguments, or
    /// `None` to run without asking. By default, `None`.
    fn confirmation(&self, arguments: &Value) -> Option<String> {
        let _ = arguments;
        None
    }

    /// What the tool's calls do to the world, for the
    /// [`Policy`](crate::policy::Policy)'s defaults. By default, nothing
    /// declared ([`Effects::NONE`]): the call runs unless a rule or
    /// [`confirmation`](Self::confirmation) says otherwise.
    fn effects(&self) -> Effects {
        Effects::NONE
    }

    /// The command line a call runs, for tools that run programs
    /// ([`CommandTool`](crate::tools::CommandTool)): the argv, never a shell
    /// line. The [`Policy`](crate::policy::Policy) matches `command` rules
    /// against it (and against each command of the script of `sh -c`), and
    /// never offers "always" for such a tool. By default, `None`: the tool
    /// runs no other program.
    fn command_line(&self, arguments: &Value) -> Option<Vec<String>> {
        let _ = arguments;
        None
    }

    /// Whether the tool must run alone: no other tool of this agent runs
    /// while it does. By default, `false`.
    fn is_exclusive(&self) -> bool {
        false
    }

    /// How long a call may take; `None` uses the agent's default (60 s).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// How many times in one turn the model may call the tool again after
    /// sending invalid arguments; beyond that the call is not run and the
    /// model is told to answer without it. By default, 2.
    fn argument_retries(&self) -> u32 {
        2
    }

    /// Whether the tool can run on this machine. An unavailable tool stays
    /// listed; a call answers with the reason instead of running. By default,
    /// available.
    ///
    /// # Errors
    /// A one-line reason, e.g. "needs `nvidia-smi` on PATH".
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }

    /// Checks the model's arguments without running the tool, so that a
    /// call `call` would refuse is turned back before the user is asked to
    /// confirm it (no "Delete {path}?" for a call without a path). The agent
    /// calls it for every call, after [`availability`](Self::availability)
    /// and before [`confirmation`](Self::confirmation), with a JSON object;
    /// the model reads the error's message. Tools made with [`from_fn`] or
    /// `#[tool]` check them against their arguments type, then against the
    /// constraints of their schema ([`Constraints`]: ranges, lengths,
    /// patterns, formats), then with `#[tool(check = …)]`'s function; by
    /// default, anything passes (`call` still checks).
    ///
    /// # Errors
    /// What is wrong, for the model, as [`ToolError::invalid_arguments`].
    fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        let _ = arguments;
        Ok(())
    }

    /// The types of shared state the tool reads
    /// ([`ToolContext::state`], a `#[tool]`'s `State<T>` parameters). The
    /// agent checks when it is built that it has each, so a missing
    /// `.state(…)` is found at start-up rather than at the first call. By
    /// default, none.
    fn state_types(&self) -> Vec<StateType> {
        Vec::new()
    }
}

impl fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// Converts a value into a shareable tool; `Agent::builder().tool(…)` takes it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool",
    note = "mark the function with `#[ferrobot::tool]`, register `Name::tool()` of a struct with `#[derive(ferrobot::Tool)]`, build a tool with `ferrobot::tool::from_fn`, or implement `ferrobot::tool::Tool`"
)]
pub trait IntoTool {
    /// Makes the shareable tool.
    fn into_tool(self) -> std::sync::Arc<dyn Tool>;
}

impl<T: Tool> IntoTool for T {
    fn into_tool(self) -> std::sync::Arc<dyn Tool> {
        std::sync::Arc::new(self)
    }
}

impl IntoTool for std::sync::Arc<dyn Tool> {
    fn into_tool(self) -> std::sync::Arc<dyn Tool> {
        self
    }
}

/// What a tool whose arguments are a struct deriving
/// [`Tool`](derive@crate::Tool) does with them.
///
/// `#[derive(Tool)]` gives the struct's schema, description and options;
/// this impl gives the behaviour. The agent reads the model's arguments
/// into the struct (checked as for `#[tool]`), then calls
/// [`call`](Self::call) with them. Register the tool with
/// `Agent::builder().tool(Name::tool())`.
///
/// # Examples
/// ```
/// use ferrobot::tool::{Tool, ToolContext, TypedTool};
/// use serde::Deserialize;
/// use schemars::JsonSchema;
///
/// /// Add two integers.
/// #[derive(Deserialize, JsonSchema, Tool)]
/// struct Add {
///     /// The first operand.
///     a: i64,
///     /// The second operand.
///     b: i64,
/// }
///
/// impl TypedTool for Add {
///     type Output = i64;
///
///     async fn call(self, _ctx: ToolContext) -> i64 {
///         self.a + self.b
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let text = Add::tool().call(serde_json::json!({"a": 2, "b": 3}), ToolContext::for_test("t")).await;
/// assert_eq!(text.unwrap(), "5");
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` derives `Tool` but has no behaviour: implement `ferrobot::tool::TypedTool` for it",
    label = "the model's arguments are read into `{Self}`, then handed to its `TypedTool::call`",
    note = "write `impl TypedTool for {Self}` with `type Output = String;` (or any type a tool may return) and `async fn call(self, ctx: ToolContext) -> Self::Output`"
)]
pub trait TypedTool: Sized {
    /// What `call` returns, which becomes the text the model reads, as a
    /// `#[tool]` function's return value does: text as is, `()` as `Done.`,
    /// numbers and `bool` as their text, any other `serde::Serialize` type
    /// as JSON, and a `Result` as its `Ok` value that way or its error's
    /// message, marked as an error.
    type Output;

    /// Runs the tool with the model's arguments, read and checked. Called
    /// only after the agent checked that the tool is enabled and available,
    /// and got the user's approval if the tool asks for it. Write it as an
    /// `async fn`; the future must be `Send`, since the agent runs calls on
    /// any of its runtime's threads.
    fn call(self, ctx: ToolContext) -> impl Future<Output = Self::Output> + Send;
}

/// A tool's failure, as the model will read it.
///
/// Any `std::error::Error` converts into it, so `?` works in tool bodies.
///
/// # Examples
/// ```
/// use ferrobot::tool::ToolError;
/// let e = ToolError::new("no such mount point: /data");
/// assert_eq!(e.to_string(), "no such mount point: /data");
/// let io: ToolError = std::io::Error::other("disk on fire").into();
/// assert_eq!(io.message(), "disk on fire");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    invalid_arguments: bool,
}

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            invalid_arguments: false,
        }
    }

    /// The model's arguments did not fit the tool's schema; the message says
    /// what was wrong. The agent counts these per tool and turn, and stops
    /// running a tool the model keeps calling wrongly
    /// ([`Tool::argument_retries`]).
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        Self {
            invalid_arguments: true,
            ..Self::new(message)
        }
    }

    /// The model's arguments don't fit `tool`, for each of `problems`: the one
    /// wording every kind of tool uses (`from_fn`, `#[tool]`, command tools),
    /// so the model always reads the same shape of answer.
    ///
    /// # Examples
    /// ```
    /// let error = ferrobot::tool::ToolError::arguments_mismatch("add", ["`a` is missing"]);
    /// assert!(error.is_invalid_arguments());
    /// assert_eq!(
    ///     error.message(),
    ///     "Invalid arguments for `add`:\n- `a` is missing\nCall `add` again with arguments that match its schema."
    /// );
    /// ```
    pub fn arguments_mismatch<P: fmt::Display>(
        tool: &str,
        problems: impl IntoIterator<Item = P>,
    ) -> Self {
        let mut message = format!("Invalid arguments for `{tool}`:");
        for problem in problems {
            message.push_str(&format!("\n- {problem}"));
        }
        message.push_str(&format!(
            "\nCall `{tool}` again with arguments that match its schema."
        ));
        Self::invalid_arguments(message)
    }

    /// Whether the model's arguments were the problem.
    pub fn is_invalid_arguments(&self) -> bool {
        self.invalid_arguments
    }

    /// The message the model will read.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::new(crate::error::chain(&error))
    }
}

/// The most text one tool result gives the model (1 MiB): a longer one is
/// cut there, at a character boundary, and says how long it was. A result
/// that size is past most models' context windows already; a tool that
/// means to return much should write a file and return its path.
pub const MAX_TOOL_RESULT: usize = 1024 * 1024;

/// What a tool gives the model: text, and images after it (a screenshot, a
/// chart). Most tools return text alone: `"done".into()`.
///
/// # Examples
/// ```
/// use ferrobot::{Image, tool::ToolOutput};
/// let shot = ToolOutput::text("The login page:").image(Image::png(vec![0x89, b'P', b'N', b'G']));
/// assert_eq!(shot.text, "The login page:");
/// assert_eq!(shot.images.len(), 1);
/// let plain: ToolOutput = "42".into();
/// assert!(plain.images.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// What the model sees, after the text.
    pub images: Vec<crate::message::Image>,
}

impl ToolOutput {
    /// Text alone.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            images: Vec::new(),
        }
    }

    /// With an image after the text.
    #[must_use]
    pub fn image(mut self, image: crate::message::Image) -> Self {
        self.images.push(image);
        self
    }
}

/// Text alone equals its text: `assert_eq!(output, "42")`.
impl PartialEq<str> for ToolOutput {
    fn eq(&self, text: &str) -> bool {
        self.images.is_empty() && self.text == text
    }
}

impl PartialEq<String> for ToolOutput {
    fn eq(&self, text: &String) -> bool {
        *self == **text
    }
}

impl PartialEq<&str> for ToolOutput {
    fn eq(&self, text: &&str) -> bool {
        *self == **text
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

/// What a tool function may return: text as is, `()` as a short success note,
/// JSON values and numbers as their JSON text, a [`ToolOutput`] or an
/// [`Image`](crate::Image) to show images, and `Result`s whose error goes
/// to the model as an error result.
pub trait IntoToolOutput {
    /// Converts into what the model reads and sees, or an error.
    ///
    /// # Errors
    /// When the value is itself a failure.
    fn into_tool_output(self) -> Result<ToolOutput, ToolError>;
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

impl IntoToolOutput for crate::message::Image {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::default().image(self))
    }
}

impl IntoToolOutput for String {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self.into())
    }
}

impl IntoToolOutput for &str {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self.into())
    }
}

impl IntoToolOutput for () {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok("Done.".into())
    }
}

impl IntoToolOutput for Value {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(match self {
            Value::String(s) => s.into(),
            other => other.to_string().into(),
        })
    }
}

macro_rules! display_output {
    ($($t:ty),*) => {$(
        impl IntoToolOutput for $t {
            fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
                Ok(self.to_string().into())
            }
        }
    )*};
}
display_output!(
    bool, i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);

/// Wraps any `Serialize` value to return it from a tool as JSON.
///
/// # Examples
/// ```
/// use ferrobot::tool::{IntoToolOutput, Json};
/// let out = Json(vec![1, 2]).into_tool_output().unwrap();
/// assert_eq!(out.text, "[1,2]");
/// ```
#[derive(Debug, Clone)]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        serde_json::to_string(&self.0)
            .map(ToolOutput::text)
            .map_err(ToolError::from)
    }
}

impl<T: IntoToolOutput, E: fmt::Display> IntoToolOutput for Result<T, E> {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        self.map_err(ToolError::new)?.into_tool_output()
    }
}

/// Fills `{name}` placeholders in a confirmation template from the call's
/// arguments: strings as they are, other values as JSON. Unknown names stay.
///
/// # Examples
/// ```
/// use ferrobot::tool::fill_placeholders;
/// let text = fill_placeholders("Delete {path}?", &serde_json::json!({"path": "/tmp/x"}));
/// assert_eq!(text, "Delete /tmp/x?");
/// ```
pub fn fill_placeholders(template: &str, arguments: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = &after[..close];
        match arguments.get(key) {
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
            None => out.push_str(&rest[open..open + close + 2]),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_and_unknown_ones_kept() {
        let args = json!({"n": 3, "who": "bob"});
        assert_eq!(
            fill_placeholders("{who} x{n} {missing} {", &args),
            "bob x3 {missing} {"
        );
    }

    #[test]
    fn results_route_errors_to_the_model() {
        let r: Result<u32, &str> = Err("nope");
        assert_eq!(r.into_tool_output(), Err(ToolError::new("nope")));
        assert_eq!(().into_tool_output().unwrap(), "Done.");
    }
}
