//! The typed answer's side of a turn: what each model call is asked, and
//! what is made of what it answers.

use std::sync::Arc;

use serde_json::Value;

use super::output::{Output, OutputMode, correction, parse_partial};
use crate::error::OutputError;
use crate::message::{Message, ToolCall, ToolResult, ToolSpec};
use crate::provider::{FinishReason, OutputFormat, Provider, ToolChoice};

/// A turn's typed answer, as it is being asked for.
pub(super) struct Typed<'o> {
    output: &'o Output,
    ask: Ask,
    /// Whether the last call asked the server for the format.
    sent_format: bool,
    /// Native mode: the model is done with tools and is asked for the answer.
    answering: bool,
    attempts: u32,
}

enum Ask {
    Native(OutputFormat),
    Tool(ToolSpec),
    /// The system prompt with the schema's instructions after it.
    Prompted(String),
}

/// What to make of a model's message.
pub(super) enum Verdict {
    /// Not the answer: the tool calls run as in any turn.
    Continue,
    /// Native mode: the model answered in text, done with tools; that draft
    /// is dropped and the typed answer asked for.
    AskNow,
    /// The answer, checked: store `store`, reply with `value`.
    Answer {
        value: Value,
        text: String,
        store: Vec<Message>,
    },
    /// It doesn't fit: store `store` (the answer and what was wrong), ask again.
    Retry(Vec<Message>),
    /// No answer will come: store `store`, end the turn with the error.
    Fail(OutputError, Vec<Message>),
}

/// Whose deltas are the typed answer, to show it while it streams.
#[derive(Clone, Copy)]
pub(super) enum Watch<'a> {
    Nothing,
    Text,
    Tool(&'a str),
}

impl<'o> Typed<'o> {
    /// How `output` is asked of `provider`.
    pub(super) fn new(
        output: &'o Output,
        provider: &dyn Provider,
        system_prompt: Option<&str>,
    ) -> Result<Self, OutputError> {
        if let Some(why) = output.unportable() {
            return Err(OutputError::Unportable(why.to_owned()));
        }
        let native = provider.native_output();
        let ask = match output.output_mode() {
            OutputMode::Native if !native => {
                return Err(OutputError::NativeUnsupported {
                    provider: provider.name().to_owned(),
                });
            }
            OutputMode::Auto if native => Ask::Native(output.format()),
            OutputMode::Native => Ask::Native(output.format()),
            OutputMode::Prompted => Ask::Prompted(match system_prompt {
                Some(system) => format!("{system}\n\n{}", output.instructions()),
                None => output.instructions(),
            }),
            _ => Ask::Tool(output.tool()),
        };
        Ok(Self {
            output,
            ask,
            sent_format: false,
            answering: false,
            attempts: 0,
        })
    }

    /// The system prompt to send in place of the agent's, if another.
    pub(super) fn system(&self) -> Option<&str> {
        match &self.ask {
            Ask::Prompted(system) => Some(system),
            _ => None,
        }
    }

    /// What the next call offers and asks: `tools` gain the output tool,
    /// the choice and the format are set. `withdrawn` when tools are
    /// withdrawn (the round cap, a budget).
    pub(super) fn plan(
        &mut self,
        tools: &mut Arc<[ToolSpec]>,
        withdrawn: bool,
    ) -> (ToolChoice, Option<&OutputFormat>) {
        match &self.ask {
            Ask::Native(format) => {
                self.sent_format = self.answering || withdrawn || tools.is_empty();
                if self.sent_format {
                    (ToolChoice::None, Some(format))
                } else {
                    (ToolChoice::Auto, None)
                }
            }
            Ask::Tool(spec) => {
                let choice = if withdrawn || tools.is_empty() {
                    ToolChoice::Tool(spec.name.clone())
                } else {
                    ToolChoice::Required
                };
                *tools = tools.iter().chain([spec]).cloned().collect();
                (choice, None)
            }
            Ask::Prompted(_) => {
                let choice = if withdrawn {
                    ToolChoice::None
                } else {
                    ToolChoice::Auto
                };
                (choice, None)
            }
        }
    }

    /// Whose deltas the next call's answer comes in.
    pub(super) fn watch(&self) -> Watch<'_> {
        match &self.ask {
            Ask::Native(_) if !self.sent_format => Watch::Nothing,
            Ask::Native(_) | Ask::Prompted(_) => Watch::Text,
            Ask::Tool(spec) => Watch::Tool(&spec.name),
        }
    }

    /// What can be shown of an answer that has come as far as `text`.
    pub(super) fn partial(&self, text: &str) -> Option<Value> {
        parse_partial(text).and_then(|value| self.output.partial(value))
    }

    /// What to make of the model's `message`.
    /// `finish` is why the model stopped: an answer cut off at the token
    /// limit is told so.
    pub(super) fn judge(&mut self, message: &Message, finish: Option<&FinishReason>) -> Verdict {
        let cut_off = (finish == Some(&FinishReason::Length))
            .then(|| "the answer was cut off at the token limit: give a shorter one".to_owned());
        let text = message.text();
        let calls: Vec<&ToolCall> = message.tool_calls().collect();
        // A refusal beside tool calls is not the end: their results must
        // follow them in the history, and the tools run as in any round.
        if let Some(refusal) = message
            .refusal()
            .filter(|_| text.is_empty() && calls.is_empty())
        {
            return Verdict::Fail(OutputError::Refused(refusal), vec![message.clone()]);
        }
        match &self.ask {
            Ask::Tool(spec) => {
                let Some(answer) = calls.iter().find(|c| c.name == spec.name) else {
                    if !calls.is_empty() {
                        return Verdict::Continue;
                    }
                    let how = format!(
                        "Answer by calling `{}`: text answers are not read.",
                        spec.name
                    );
                    let problems = vec!["the answer was text, not a call of the tool".into()];
                    return self.retry_in_text(message, text, problems, &how);
                };
                let arguments = answer.arguments.to_string();
                match self.output.read(answer.arguments.clone()) {
                    Ok(value) => Verdict::Answer {
                        value,
                        store: vec![
                            message.clone(),
                            results(&calls, answer, true, "Answer received."),
                        ],
                        text: arguments,
                    },
                    Err(mut problems) => {
                        problems.splice(0..0, cut_off);
                        let how = format!("Call `{}` again with a corrected answer.", spec.name);
                        let store = vec![
                            message.clone(),
                            results(&calls, answer, false, &correction(&problems, &how)),
                        ];
                        self.retry(store, problems, arguments)
                    }
                }
            }
            _ if !calls.is_empty() => Verdict::Continue,
            Ask::Native(_) if !self.sent_format => {
                self.answering = true;
                Verdict::AskNow
            }
            Ask::Native(_) | Ask::Prompted(_) => match self.output.read_text(&text) {
                Ok(value) => Verdict::Answer {
                    value,
                    text,
                    store: vec![message.clone()],
                },
                Err(mut problems) => {
                    problems.splice(0..0, cut_off);
                    let how = "Answer again with only the corrected JSON.";
                    self.retry_in_text(message, text, problems, how)
                }
            },
        }
    }

    /// A text answer that doesn't fit: told so in a user message.
    fn retry_in_text(
        &mut self,
        message: &Message,
        text: String,
        problems: Vec<String>,
        how: &str,
    ) -> Verdict {
        let store = vec![
            message.clone(),
            Message::correction(correction(&problems, how)),
        ];
        self.retry(store, problems, text)
    }

    /// One more answer that didn't fit: asked again (storing `store`), or,
    /// past the retries, the end of the turn.
    fn retry(&mut self, store: Vec<Message>, problems: Vec<String>, answer: String) -> Verdict {
        self.attempts += 1;
        if self.attempts > self.output.max_retries() {
            let error = OutputError::Invalid {
                attempts: self.attempts,
                problems,
                answer,
            };
            Verdict::Fail(error, store)
        } else {
            Verdict::Retry(store)
        }
    }
}

/// The results of a message whose call `answer` is the output tool's:
/// `content` for it (a failure unless `accepted`); the other calls are not
/// run, the answer having come.
fn results(calls: &[&ToolCall], answer: &ToolCall, accepted: bool, content: &str) -> Message {
    let results = calls.iter().map(|call| {
        if call.id != answer.id {
            ToolResult::error(
                &call.id,
                "Not run: the final answer came in the same message.",
            )
        } else if accepted {
            ToolResult::ok(&call.id, content)
        } else {
            ToolResult::error(&call.id, content)
        }
    });
    Message::tool_results(results)
}
