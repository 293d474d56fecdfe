//! Tools from closures over a typed arguments struct.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::arguments::{normalize, parse_checked, parse_whole};
use super::{
    Constraints, Effects, IntoToolOutput, Tool, ToolContext, ToolError, ToolOutput,
    fill_placeholders,
};
use crate::message::ToolSpec;

type Handler =
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

/// A tool made by [`from_fn`].
#[derive(Clone)]
pub struct FnTool {
    spec: ToolSpec,
    handler: Arc<Handler>,
    check: fn(&str, &Value) -> Result<(), ToolError>,
    constraints: Arc<Constraints>,
    confirm: Option<String>,
    exclusive: bool,
    effects: Effects,
    timeout: Option<Duration>,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// Makes a tool from an async closure taking a typed arguments struct and the
/// [`ToolContext`].
///
/// The arguments type gives the JSON Schema the model sees (doc comments
/// become descriptions, `#[schemars(range(…), length(…), regex(…))]`
/// constraints) and parses the model's arguments. Arguments that don't parse
/// or break a constraint go back to the model as an error result naming the
/// problem, before any confirmation, and the closure is not called; a check
/// in the type's own `Deserialize` (`#[serde(try_from = …)]`) runs then too.
/// The return value may be anything [`IntoToolOutput`].
///
/// # Examples
/// ```
/// use ferrobot::tool::from_fn;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// The first operand.
///     a: i64,
///     /// The second operand.
///     b: i64,
/// }
///
/// let add = from_fn("add", "Add two integers.", |args: AddArgs, _ctx| async move { args.a + args.b });
/// let delete = from_fn("delete_file", "Delete a file.", |_args: serde_json::Value, _ctx| async move {})
///     .confirm("Delete {path}?");
/// # let _ = (add, delete);
/// ```
pub fn from_fn<A, F, Fut, O>(
    name: impl Into<String>,
    description: impl Into<String>,
    f: F,
) -> FnTool
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
    O: IntoToolOutput,
{
    let f = Arc::new(f);
    let name: String = name.into();
    let tool: Arc<str> = Arc::from(name.as_str());
    let spec = ToolSpec::new(name, description, super::schema::for_type::<A>());
    let constraints = Arc::new(Constraints::for_typed(&spec.parameters));
    let checked = Arc::clone(&constraints);
    let handler = move |arguments: Value,
                        ctx: ToolContext|
          -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let parsed = parse_checked::<A>(&tool, arguments, &checked);
        let f = Arc::clone(&f);
        Box::pin(async move { f(parsed?, ctx).await.into_tool_output() })
    };
    FnTool {
        spec,
        handler: Arc::new(handler),
        check: |tool, arguments| parse_whole::<A>(tool, arguments).map(drop),
        constraints,
        confirm: None,
        exclusive: false,
        effects: Effects::NONE,
        timeout: None,
    }
}

impl FnTool {
    /// Asks the user before each call. `{name}` placeholders are filled from
    /// the arguments. By default, no confirmation.
    #[must_use]
    pub fn confirm(mut self, prompt: impl Into<String>) -> Self {
        self.confirm = Some(prompt.into());
        self
    }

    /// Runs the tool alone. By default, `false`.
    #[must_use]
    pub fn exclusive(mut self, exclusive: bool) -> Self {
        self.exclusive = exclusive;
        self
    }

    /// Declares what the tool's calls do, for the
    /// [`Policy`](crate::policy::Policy)'s defaults. By default, nothing.
    ///
    /// # Examples
    /// ```
    /// use ferrobot::tool::{Effects, Tool, from_fn};
    /// let wipe = from_fn("wipe", "Wipe the scratch disk.", |_: serde_json::Value, _| async { "wiped" })
    ///     .effects(Effects::DESTRUCTIVE);
    /// assert!(Tool::effects(&wipe).destructive);
    /// ```
    #[must_use]
    pub fn effects(mut self, effects: Effects) -> Self {
        self.effects = effects;
        self
    }

    /// Limits how long a call may take. By default, the agent's (60 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl Tool for FnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        (self.handler)(arguments, ctx)
    }

    fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        let arguments = normalize(arguments.clone());
        (self.check)(&self.spec.name, &arguments)?;
        self.constraints.check(&self.spec.name, &arguments)
    }

    fn confirmation(&self, arguments: &Value) -> Option<String> {
        self.confirm
            .as_deref()
            .map(|t| fill_placeholders(t, arguments))
    }

    fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    fn effects(&self) -> Effects {
        self.effects
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// How many.
        n: u32,
        label: Option<String>,
    }

    #[tokio::test]
    async fn parses_arguments_and_reports_mismatches() {
        let tool = from_fn("count", "Count.", |a: Args, _| async move {
            format!("{}{}", a.n, a.label.unwrap_or_default())
        });
        let ok = tool.call(json!({"n": 3}), ToolContext::for_test("t")).await;
        assert_eq!(ok.unwrap(), "3");
        let bad = tool
            .call(json!({"n": "three"}), ToolContext::for_test("t"))
            .await
            .unwrap_err();
        assert_eq!(
            bad.message(),
            "Invalid arguments for `count`:\n- `n`: invalid type: string \"three\", expected u32\n\
             Call `count` again with arguments that match its schema."
        );
    }

    #[test]
    fn schema_is_an_inlined_object_with_descriptions() {
        let tool = from_fn("count", "Count.", |_: Args, _| async {});
        let schema = &tool.spec().parameters;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["n"]["description"], "How many.");
        assert!(schema.get("$schema").is_none());
    }
}
