//! An MCP server's tool as a ferrobot [`Tool`], and its results as
//! [`ToolOutput`]s.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures_util::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use super::link::Link;
use super::{Trust, effects};
use crate::message::{Image, ToolSpec};
use crate::tool::arguments::normalize;
use crate::tool::{Constraints, Effects, Tool, ToolContext, ToolError, ToolOutput};

/// One tool of one server, registered in the agent as `server__tool`.
pub(crate) struct McpTool {
    spec: ToolSpec,
    /// Its name on the server.
    remote: Arc<str>,
    link: Arc<Link>,
    effects: Effects,
    /// Whether every call asks ([`Trust::Ask`]).
    ask: bool,
    constraints: Constraints,
    timeout: Duration,
}

impl McpTool {
    /// The tool `remote` describes, named `name`; or why ferrobot can't use
    /// its schema.
    pub(crate) fn new(
        name: String,
        remote: &rmcp::model::Tool,
        link: &Arc<Link>,
    ) -> Result<Self, String> {
        let schema = Value::Object((*remote.input_schema).clone());
        match schema.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => {
                return Err(format!(
                    "its input schema is of type {other}, not \"object\""
                ));
            }
        }
        crate::tool::validate::Schema::new(&schema)
            .map_err(|e| format!("its input schema can't be used: {e}"))?;
        let description = remote
            .description
            .as_deref()
            .map(str::to_owned)
            .or_else(|| remote.title.clone())
            .unwrap_or_else(|| {
                format!(
                    "`{}` of the MCP server `{}`.",
                    remote.name, link.server.name
                )
            });
        let trust = link.server.trust;
        Ok(Self {
            constraints: Constraints::new(&schema),
            spec: ToolSpec::new(name, description, schema),
            remote: Arc::from(&*remote.name),
            link: Arc::clone(link),
            effects: effects::effects(remote.annotations.as_ref(), trust),
            ask: trust == Trust::Ask,
            timeout: link.server.timeout,
        })
    }

    /// Whether `other` says the same to the model and the policy.
    pub(crate) fn same_as(&self, other: &McpTool) -> bool {
        self.spec == other.spec && self.effects == other.effects && self.remote == other.remote
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(
        &self,
        arguments: Value,
        ctx: ToolContext,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let peer = self.link.peer().map_err(ToolError::new)?;
            let arguments = match normalize(arguments) {
                Value::Object(map) => map,
                Value::Null => serde_json::Map::new(),
                other => {
                    return Err(ToolError::arguments_mismatch(
                        &self.spec.name,
                        [format!("the arguments must be a JSON object, not {other}")],
                    ));
                }
            };
            let params =
                CallToolRequestParams::new(self.remote.to_string()).with_arguments(arguments);
            // Dropping this future (the turn cancelled, the call timed out)
            // sends `notifications/cancelled` for the request: rmcp's
            // `call_tool` guards it.
            let call = peer.call_tool(params);
            let result = tokio::select! {
                result = call => result,
                () = ctx.cancellation().cancelled() => {
                    return Err(ToolError::new("cancelled"));
                }
            };
            match result {
                Ok(result) => output(result),
                Err(error) => {
                    self.link.call_failed(&error);
                    Err(ToolError::new(format!(
                        "the MCP server `{}` failed: {error}",
                        self.link.server.name
                    )))
                }
            }
        })
    }

    fn confirmation(&self, arguments: &Value) -> Option<String> {
        self.ask.then(|| {
            format!(
                "Run `{}` of the MCP server `{}` with {arguments}?",
                self.remote, self.link.server.name
            )
        })
    }

    fn effects(&self) -> Effects {
        self.effects
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    fn availability(&self) -> Result<(), String> {
        self.link.peer().map(drop)
    }

    fn check_arguments(&self, arguments: &Value) -> Result<(), ToolError> {
        self.constraints
            .check(&self.spec.name, &normalize(arguments.clone()))
    }
}

/// What the model reads and sees of a result: text blocks joined, images
/// as images, anything else as a line saying what it was; an `isError`
/// result as the tool's error.
pub(crate) fn output(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut texts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            ContentBlock::Image(image) => {
                let decoded = base64::engine::general_purpose::STANDARD.decode(image.data.trim());
                match decoded {
                    Ok(bytes) if Image::is_supported_type(&image.mime_type) => {
                        images.push(Image::new(image.mime_type, bytes));
                    }
                    Ok(_) => texts.push(format!(
                        "[an image of type {} that can't be shown]",
                        image.mime_type
                    )),
                    Err(_) => texts.push("[an image whose data could not be decoded]".to_owned()),
                }
            }
            ContentBlock::Audio(audio) => {
                texts.push(format!(
                    "[audio ({}) that can't be played here]",
                    audio.mime_type
                ));
            }
            ContentBlock::Resource(embedded) => texts.push(match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[resource {uri}: binary data ({}) not shown]",
                    mime_type.as_deref().unwrap_or("unknown type")
                ),
                _ => "[a resource of a kind ferrobot can't show]".to_owned(),
            }),
            ContentBlock::ResourceLink(link) => {
                texts.push(format!("[resource link: {} <{}>]", link.name, link.uri));
            }
            _ => texts.push("[content of a kind ferrobot can't show]".to_owned()),
        }
    }
    if texts.is_empty()
        && images.is_empty()
        && let Some(structured) = result.structured_content
    {
        texts.push(structured.to_string());
    }
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Err(ToolError::new(if text.is_empty() {
            "the tool failed without saying why".to_owned()
        } else {
            text
        }));
    }
    let mut output = ToolOutput::text(text);
    output.images = images;
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, ImageContent};

    #[test]
    fn images_become_images_and_text_joins() {
        let png = base64::engine::general_purpose::STANDARD.encode([0x89, b'P', b'N', b'G']);
        let result = CallToolResult::success(vec![
            ContentBlock::text("one"),
            ContentBlock::Image(ImageContent::new(png, "image/png")),
            ContentBlock::text("two"),
        ]);
        let out = output(result).unwrap();
        assert_eq!(out.text, "one\ntwo");
        assert_eq!(out.images.len(), 1);
        assert_eq!(out.images[0].media_type(), Some("image/png"));
    }

    #[test]
    fn error_results_are_tool_errors_the_model_reads() {
        let result = CallToolResult::error(vec![ContentBlock::text("no such file: /x")]);
        assert_eq!(output(result).unwrap_err().message(), "no such file: /x");
    }
}
