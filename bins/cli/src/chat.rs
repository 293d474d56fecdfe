//! The chat: a line editor (`Input`) on its own thread, read for each
//! prompt and each confirmation question, and each line a turn.

use std::path::PathBuf;
use std::process::ExitCode;

use ferrobot::Image;
use ferrobot::agent::{Builtin, TurnRequest};
use ferrobot::bot::always_covers;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::policy::Scope;
use ferrobot::provider::Provider;
use ferrobot_app::{LoadedConfig, ToolState};

use crate::agent_with;
use crate::args::{ConversationArgs, conversation_id, fresh_conversation};
use crate::logs::data_dir;
use crate::turn::{Shown, print_events};

/// Reads lines for the chat on its own thread (the line editor blocks), for
/// the prompt and for confirmation questions alike.
#[derive(Clone)]
struct Input(std::sync::mpsc::Sender<(String, tokio::sync::oneshot::Sender<Option<String>>)>);

impl Input {
    /// Starts the editor, with input history kept in `history`.
    fn start(history: PathBuf) -> anyhow::Result<Self> {
        let (tx, rx) =
            std::sync::mpsc::channel::<(String, tokio::sync::oneshot::Sender<Option<String>>)>();
        let mut editor = rustyline::DefaultEditor::new()?;
        let _ = editor.load_history(&history);
        std::thread::spawn(move || {
            while let Ok((prompt, answer)) = rx.recv() {
                let line = loop {
                    match editor.readline(&prompt) {
                        Ok(line) => break Some(line),
                        // Ctrl-C at the prompt clears the line.
                        Err(rustyline::error::ReadlineError::Interrupted) => {}
                        Err(_) => break None,
                    }
                };
                if let Some(line) = line.as_deref().filter(|l| !l.trim().is_empty()) {
                    let _ = editor.add_history_entry(line);
                    if let Some(dir) = history.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    let _ = editor.save_history(&history);
                }
                let _ = answer.send(line);
            }
        });
        Ok(Self(tx))
    }

    /// One line; `None` at the end of input (Ctrl-D, or the end of a pipe).
    async fn line(&self, prompt: &str) -> Option<String> {
        let (answer, line) = tokio::sync::oneshot::channel();
        self.0.send((prompt.to_owned(), answer)).ok()?;
        line.await.ok().flatten()
    }
}

/// The chat: a line editor with persistent input history (it also reads
/// piped stdin); Ctrl-C cancels the turn in progress, `exit` or Ctrl-D quits,
/// `/new` starts a fresh conversation, `:image PATH` attaches an image to the
/// next message; tools that ask get a y/n question, with `a` (always) when
/// the agent offers it.
pub(crate) async fn chat(
    loaded: &LoadedConfig,
    args: &ConversationArgs,
) -> anyhow::Result<ExitCode> {
    let mut conversation = conversation_id(args);
    let input = Input::start(data_dir(loaded).join("input_history.txt"))?;
    let asker = input.clone();
    let agent = agent_with(loaded, move |request: ConfirmRequest| {
        let asker = asker.clone();
        async move {
            eprintln!("{}", question(&request));
            let prompt = if request.always.is_some() {
                "[y/n/a] "
            } else {
                "[y/N] "
            };
            let answer = asker.line(prompt).await.unwrap_or_default();
            let decision = decision(&answer, request.always.as_ref());
            if decision == Decision::Deny(None) && is_always(&answer) {
                eprintln!("\"always\" isn't offered for `{}`: declined", request.tool);
            }
            decision
        }
    })
    .await?;
    let _state = ToolState::watch(loaded.tool_state_path(), &agent);
    // The MCP servers connect in the background; each one's tools are
    // offered from the turn after it answers.
    let _mcp = loaded.start_mcp(&agent).map_err(|e| anyhow::anyhow!(e))?;
    // Say up front when the model is out of reach; slash commands still work.
    let health = agent.provider().health().await;
    if !health.is_ok() {
        eprintln!(
            "LLM unavailable: {} — slash commands still work (type /help)",
            health.detail.unwrap_or_else(|| "no answer".into())
        );
    }
    let _tools = ferrobot_app::watch_tools_file(loaded.tools_file_path(), &agent);
    let mut show_reasoning = true;
    // Images attached with `:image`, sent with the next message.
    let mut images: Vec<Image> = Vec::new();
    while let Some(line) = input.line("› ").await {
        let line = line.trim();
        if line == "exit" || line == "quit" {
            break;
        }
        if let Some(path) = line.strip_prefix(":image") {
            attach(path.trim(), &mut images);
            continue;
        }
        if line == ":reasoning" {
            show_reasoning = !show_reasoning;
            eprintln!(
                "reasoning {}",
                if show_reasoning { "shown" } else { "hidden" }
            );
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if Builtin::parse(line) == Some(Builtin::New) {
            conversation = fresh_conversation(&args.conversation);
            eprintln!(
                "Started a fresh conversation ({conversation}). The earlier one is kept in the history."
            );
            continue;
        }
        let mut request = TurnRequest::new(line);
        request.images = std::mem::take(&mut images);
        let mut events = agent.stream(&conversation, request);
        let cancel = events.cancellation();
        let interrupt = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
        print_events(
            &mut events,
            Shown {
                json: false,
                typed: false,
                reasoning: show_reasoning,
            },
        )
        .await;
        interrupt.abort();
    }
    Ok(ExitCode::SUCCESS)
}

/// What the chat shows before asking about a tool call: the question, why
/// it is asked, and the answers, "always" saying exactly what it covers.
fn question(request: &ConfirmRequest) -> String {
    let mut text = request.prompt.clone();
    if !request.reason.is_empty() {
        text.push_str(&format!("\n  why: {}", request.reason));
    }
    text.push_str("\n  y = yes, n = no (`n REASON` tells the model why)");
    if let Some(scope) = &request.always {
        text.push_str(&format!(
            ", a = always allow {}",
            always_covers(&request.tool, scope)
        ));
    }
    text
}

/// The answer typed at a confirmation question: `y`, `a` (when offered),
/// `n REASON`; anything else declines, as the default `N` says.
fn decision(answer: &str, always: Option<&Scope>) -> Decision {
    let answer = answer.trim();
    let (word, reason) = answer
        .split_once(char::is_whitespace)
        .map_or((answer, ""), |(word, rest)| (word, rest.trim()));
    match (word.to_lowercase().as_str(), always) {
        ("y" | "yes", _) if reason.is_empty() => Decision::Approve,
        ("a" | "always", Some(scope)) if reason.is_empty() => Decision::Always(scope.clone()),
        ("n" | "no", _) if !reason.is_empty() => Decision::deny(reason),
        _ => Decision::Deny(None),
    }
}

fn is_always(answer: &str) -> bool {
    matches!(answer.trim().to_lowercase().as_str(), "a" | "always")
}

/// `:image PATH`: reads the image to send with the next message, or says
/// why it can't.
fn attach(path: &str, images: &mut Vec<Image>) {
    if path.is_empty() {
        eprintln!(
            "Usage: :image PATH (a PNG, JPEG, GIF or WebP file, sent with your next message)"
        );
        return;
    }
    // `~/…` as a shell would read it.
    let path = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    };
    match Image::read(&path) {
        Ok(image) => {
            eprintln!(
                "Attached {} {}; it goes with your next message.",
                path.display(),
                image.describe()
            );
            images.push(image);
        }
        Err(error) => eprintln!("{error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_decisions() {
        let tool = Some(&Scope::Tool);
        assert_eq!(decision("y", tool), Decision::Approve);
        assert_eq!(decision(" YES ", None), Decision::Approve);
        assert_eq!(decision("a", tool), Decision::Always(Scope::Tool));
        assert_eq!(decision("a", None), Decision::Deny(None), "not offered");
        assert_eq!(decision("n", tool), Decision::Deny(None));
        assert_eq!(
            decision("n  not on a Friday ", tool),
            Decision::deny("not on a Friday")
        );
        assert_eq!(decision("", tool), Decision::Deny(None));
        assert_eq!(decision("yes please", tool), Decision::Deny(None));
    }

    #[test]
    fn the_question_says_what_always_covers_and_only_when_offered() {
        let mut request = ConfirmRequest::new("cli", "uptime", "Run `uptime`?");
        request.reason = "rule 1: ask uptime".into();
        assert_eq!(
            question(&request),
            "Run `uptime`?\n  why: rule 1: ask uptime\n  y = yes, n = no (`n REASON` tells the model why), \
             a = always allow every call of `uptime` in this conversation"
        );
        request.always = None;
        assert!(!question(&request).contains("a = always"));
    }
}
