//! `history list`, `show` and `search`: the conversation store, read.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use ferrobot_app::LoadedConfig;

use crate::args::HistoryAction;
use crate::transfer;

/// A stored message as `history show` prints it: who, then what, tool
/// calls and results on lines of their own (results cut at 200 characters).
fn shown(message: &ferrobot::Message) -> Vec<String> {
    use ferrobot::Role;
    let one_line = |text: &str| text.replace('\n', " ");
    let who = match message.role {
        Role::User if message.summary => "summary",
        Role::User => "you",
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::Tool => "tool",
    };
    let mut lines = Vec::new();
    let text = message.text();
    if !text.is_empty() {
        lines.push(format!("{who}: {}", one_line(&text)));
    }
    for call in message.tool_calls() {
        lines.push(format!("{who}: → {}({})", call.name, call.arguments));
    }
    for result in message.tool_results_iter() {
        let mut content: String = one_line(&result.content).chars().take(200).collect();
        if content.len() < result.content.len() {
            content.push('…');
        }
        let mark = if result.is_error { "✗" } else { "←" };
        lines.push(format!("{who}: {mark} {content}"));
    }
    lines
}

pub(crate) async fn history(
    loaded: &LoadedConfig,
    action: HistoryAction,
) -> anyhow::Result<ExitCode> {
    let store = loaded
        .open_history()
        .await
        .map_err(|e| anyhow::anyhow!(e))?
        .shared();
    match action {
        HistoryAction::List => {
            for info in store.list().await? {
                out!(
                    "{}\t{} messages\t{}",
                    info.id,
                    info.messages,
                    info.title.unwrap_or_default()
                );
            }
        }
        HistoryAction::Show { conversation } => {
            let messages = store.load(&conversation).await?;
            if messages.is_empty() {
                anyhow::bail!(
                    "no conversation `{conversation}`; `ferrobot history list` shows them"
                );
            }
            for (index, message) in messages.iter().enumerate() {
                for line in shown(message) {
                    out!("#{index}\t{line}");
                }
            }
        }
        HistoryAction::Export { output } => {
            let counts = match &output {
                Some(path) => {
                    let file = std::fs::File::create(path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    let mut out = std::io::BufWriter::new(file);
                    transfer::export(store.as_ref(), &mut out).await?
                }
                None => transfer::export(store.as_ref(), &mut std::io::stdout().lock()).await?,
            };
            // The data goes to standard output: the summary to the side.
            eprintln!(
                "exported {} conversations ({} messages), {} schedules, {} later messages from the {}",
                counts.conversations,
                counts.messages,
                counts.schedules,
                counts.later,
                loaded.history_place()
            );
        }
        HistoryAction::Import { file } => {
            let counts = if file.as_os_str() == "-" {
                transfer::import(store.as_ref(), std::io::stdin().lock()).await?
            } else {
                let opened = std::fs::File::open(&file)
                    .with_context(|| format!("opening {}", file.display()))?;
                transfer::import(store.as_ref(), std::io::BufReader::new(opened)).await?
            };
            out!(
                "imported {} conversations ({} messages), {} schedules, {} later messages into the {}",
                counts.conversations,
                counts.messages,
                counts.schedules,
                counts.later,
                loaded.history_place()
            );
            if !counts.skipped.is_empty() {
                out!(
                    "left as they were, already there: {}",
                    counts.skipped.join(", ")
                );
            }
        }
        HistoryAction::Search { query, limit } => {
            for hit in store.search(&query, limit).await? {
                out!(
                    "{}#{}\t{}",
                    hit.conversation,
                    hit.index,
                    hit.snippet.replace('\n', " ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
