//! A conversation's images on their way to the model: which are sent again
//! ([`ImagePolicy`]), and the bytes of stored ones, loaded from the history
//! store ([`HistoryStore::load_image`]).

use std::collections::HashMap;

use super::Inner;
use crate::history::HistoryStore;
use crate::message::{Image, Message, Part};

/// Which of a conversation's earlier images are sent to the model again.
///
/// An image the model saw is part of the conversation: sent again with
/// every later request, it costs about
/// [`IMAGE_TOKENS`](crate::history::IMAGE_TOKENS) each time. The policy
/// keeps the images of recent turns; an older one is sent as one line of
/// text naming it ([`Image::describe`], e.g. `[image: image/png, 340 KB]`),
/// so the model knows one was there. The store keeps every image either
/// way.
///
/// A turn is a user's message and everything that answers it, the images
/// tools showed included; the current turn's images are always sent.
///
/// # Examples
/// ```
/// use ferrobot::{Agent, agent::ImagePolicy, testing::MockProvider};
/// let agent = Agent::builder()
///     .provider(MockProvider::replying("ok"))
///     .images(ImagePolicy::CurrentTurn)
///     .build();
/// # let _ = agent;
/// assert_eq!(ImagePolicy::default(), ImagePolicy::Recent(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImagePolicy {
    /// Every image, in every request: a conversation's cost grows with each
    /// image it ever held.
    All,
    /// The images of the last `n` turns, the current one included; older
    /// ones as their description. `Recent(0)` is `Recent(1)`.
    ///
    /// The default is `Recent(3)`: follow-up questions about an image ("and
    /// the red one?") come in the next turn or two, and three turns cap what
    /// images cost a request instead of letting it grow with the
    /// conversation.
    Recent(usize),
    /// Only the current turn's images (the user's and its tools'); every
    /// earlier one as its description. The cheapest; the same as
    /// `Recent(1)`.
    CurrentTurn,
}

impl Default for ImagePolicy {
    fn default() -> Self {
        ImagePolicy::Recent(3)
    }
}

impl ImagePolicy {
    /// Where the messages whose images are sent begin: the user message that
    /// starts the oldest turn kept (0 when every turn is).
    fn first_kept(self, history: &[Message]) -> usize {
        let turns = match self {
            ImagePolicy::All => return 0,
            ImagePolicy::Recent(turns) => turns.max(1),
            ImagePolicy::CurrentTurn => 1,
        };
        // Counted as `/undo` counts turns: user messages, summaries aside.
        history
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| m.starts_turn())
            .nth(turns - 1)
            .map_or(0, |(at, _)| at)
    }
}

/// Readies a turn's `history` for the model, once per turn: images before
/// the turns the agent's [`ImagePolicy`] keeps (or before where its
/// context policy cuts) become their description; the stored images it
/// sends are loaded, and one that can't be becomes its description with
/// why, so a store that fails never fails the turn.
pub(super) async fn prepare(inner: &Inner, history: &mut [Message]) {
    // Most conversations hold no image: nothing to read the policies for.
    if history.iter().all(|m| m.images().next().is_none()) {
        return;
    }
    let cut = inner.context.as_ref().map_or(0, |c| c.start(history));
    let kept = inner.images.first_kept(history).max(cut);
    let (old, sent) = history.split_at_mut(kept);
    for message in old {
        describe_images(message, |image| Some(image.describe()));
    }
    let loaded = load_stored(inner.history.as_ref(), sent).await;
    for message in sent {
        for image in message.images_mut() {
            if let Image::Stored { id, .. } = image
                && let Some(Ok(bytes)) = loaded.get(id.as_str())
            {
                *image = bytes.clone();
            }
        }
        describe_images(message, |image| {
            let Image::Stored { id, .. } = image else {
                return None;
            };
            let why = loaded.get(id.as_str())?.as_ref().err()?;
            Some(format!("{} (could not be loaded: {why})", image.describe()))
        });
    }
}

/// The bytes of each stored image in `messages`, loaded once per id, or
/// why they could not be.
async fn load_stored(
    store: &dyn HistoryStore,
    messages: &[Message],
) -> HashMap<String, Result<Image, String>> {
    let mut loaded = HashMap::new();
    for image in messages.iter().flat_map(Message::images) {
        let Image::Stored { id, .. } = image else {
            continue;
        };
        if loaded.contains_key(id) {
            continue;
        }
        let result = match store.load_image(id).await {
            Ok(bytes) => Ok(bytes),
            Err(error) => {
                tracing::warn!(image = %id, error = %error.chain(), "could not load a stored image; the model gets its description");
                Err(error.to_string())
            }
        };
        loaded.insert(id.clone(), result);
    }
    loaded
}

/// Replaces the images of `message` for which `text` gives a description
/// with it: an image part becomes a text part, a tool result's image a line
/// after its content. Each goes on a line of its own: dialects join a
/// message's text parts as they are.
fn describe_images(message: &mut Message, text: impl Fn(&Image) -> Option<String>) {
    for (index, part) in message.parts.iter_mut().enumerate() {
        match part {
            Part::Image(image) => {
                if let Some(text) = text(image) {
                    let line = if index == 0 { "" } else { "\n" };
                    *part = Part::text(format!("{line}{text}"));
                }
            }
            Part::ToolResult(result) => result.images.retain(|image| {
                let Some(text) = text(image) else {
                    return true;
                };
                if !result.content.is_empty() {
                    result.content.push('\n');
                }
                result.content.push_str(&text);
                false
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, ToolResult};

    fn turn(text: &str) -> Vec<Message> {
        vec![
            Message::new(
                Role::User,
                vec![Part::text(text), Part::image(Image::png(vec![1u8]))],
            ),
            Message::assistant("ok"),
        ]
    }

    #[test]
    fn the_policy_keeps_the_last_turns() {
        let history: Vec<Message> = ["a", "b", "c", "d"].into_iter().flat_map(turn).collect();
        assert_eq!(ImagePolicy::All.first_kept(&history), 0);
        assert_eq!(ImagePolicy::Recent(3).first_kept(&history), 2);
        assert_eq!(ImagePolicy::Recent(9).first_kept(&history), 0);
        assert_eq!(ImagePolicy::CurrentTurn.first_kept(&history), 6);
        assert_eq!(ImagePolicy::Recent(0).first_kept(&history), 6);
        assert_eq!(ImagePolicy::CurrentTurn.first_kept(&[]), 0);
    }

    #[test]
    fn described_images_leave_text_in_their_place() {
        let mut message = Message::new(
            Role::Tool,
            vec![Part::ToolResult(
                ToolResult::ok("c1", "The page:").with_images(vec![
                    Image::png(vec![1u8, 2]),
                    Image::url("https://example.com/a.png"),
                ]),
            )],
        );
        describe_images(&mut message, |image| {
            image.bytes().is_some().then(|| image.describe())
        });
        let result = message.tool_results_iter().next().unwrap();
        assert_eq!(result.content, "The page:\n[image: image/png, 2 bytes]");
        assert_eq!(result.images, [Image::url("https://example.com/a.png")]);

        let mut message = turn("look").remove(0);
        describe_images(&mut message, |image| Some(image.describe()));
        assert_eq!(message.text(), "look\n[image: image/png, 1 bytes]");
        assert_eq!(message.images().count(), 0);
    }
}
