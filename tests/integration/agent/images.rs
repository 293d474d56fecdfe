use std::sync::{Arc, Mutex};

use ferrobot::agent::{ImagePolicy, TurnRequest};
use ferrobot::history::{ContextPolicy, HistoryError, HistoryStore};
use ferrobot::testing::{MockProvider, MockTurn, RecordedRequest};
use ferrobot::tool::{ToolOutput, from_fn};
use ferrobot::{Agent, Image, Message, Part, Role};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

const PLACEHOLDER: &str = "[image: image/png, 3 bytes]";

/// The images and text of the first message of a request: the user's
/// message of the turn that showed the image.
fn first_message(request: &RecordedRequest) -> (Vec<Image>, String) {
    let first = &request.messages[0];
    assert_eq!(first.role, Role::User);
    (first.images().cloned().collect(), first.text())
}

/// Four turns, the first showing a 3-byte PNG; the requests the model got.
async fn four_turns(agent: &Agent, mock: &MockProvider) -> Vec<RecordedRequest> {
    agent
        .handle(
            "alice",
            TurnRequest::new("what is this?").image(Image::png(vec![1u8, 2, 3])),
        )
        .await
        .unwrap();
    for question in ["and the colour?", "the size?", "anything else?"] {
        agent.handle("alice", question).await.unwrap();
    }
    mock.requests()
}

#[tokio::test]
async fn an_image_is_sent_for_three_turns_then_described() {
    let mock = MockProvider::replying("A cat.");
    let agent = Agent::builder().provider(mock.clone()).build();
    let requests = four_turns(&agent, &mock).await;
    assert_eq!(requests.len(), 4);
    for request in &requests[..3] {
        let (images, text) = first_message(request);
        assert_eq!(images, [Image::png(vec![1u8, 2, 3])]);
        assert_eq!(text, "what is this?");
    }
    let (images, text) = first_message(&requests[3]);
    assert!(images.is_empty(), "{images:?}");
    assert_eq!(text, format!("what is this?\n{PLACEHOLDER}"));
    // The store keeps the image itself.
    let stored = agent.history().load("alice").await.unwrap();
    assert_eq!(
        stored[0].images().collect::<Vec<_>>(),
        [&Image::png(vec![1u8, 2, 3])]
    );
}

#[tokio::test]
async fn all_keeps_every_image_and_current_turn_describes_them_at_once() {
    let mock = MockProvider::replying("A cat.");
    let agent = Agent::builder()
        .provider(mock.clone())
        .images(ImagePolicy::All)
        .build();
    let requests = four_turns(&agent, &mock).await;
    assert!(
        requests
            .iter()
            .all(|r| first_message(r).0 == [Image::png(vec![1u8, 2, 3])])
    );

    let mock = MockProvider::replying("A cat.");
    let agent = Agent::builder()
        .provider(mock.clone())
        .images(ImagePolicy::CurrentTurn)
        .build();
    let requests = four_turns(&agent, &mock).await;
    assert_eq!(first_message(&requests[0]).0.len(), 1);
    for request in &requests[1..] {
        assert_eq!(
            first_message(request),
            (vec![], format!("what is this?\n{PLACEHOLDER}"))
        );
    }
}

#[tokio::test]
async fn a_tools_image_is_kept_with_its_turn_and_then_described_after_its_text() {
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("screenshot", json!({})))
        .then(MockTurn::new().text("The login page."))
        .then(MockTurn::new().text("Blue."))
        .then(MockTurn::new().text("Yes."));
    let shot = from_fn("screenshot", "Take a screenshot.", |_: Value, _| async {
        ToolOutput::text("The screen:").image(Image::png(vec![1u8, 2, 3]))
    });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(shot)
        .images(ImagePolicy::Recent(2))
        .build();
    agent.handle("alice", "what is on screen?").await.unwrap();
    agent.handle("alice", "which colour?").await.unwrap();
    agent.handle("alice", "sure?").await.unwrap();
    let requests = mock.requests();
    let result = |request: &RecordedRequest| {
        request
            .messages
            .iter()
            .flat_map(Message::tool_results_iter)
            .next()
            .cloned()
            .unwrap()
    };
    // The turn's own next call, and the next turn, see the screenshot.
    for request in &requests[1..3] {
        let result = result(request);
        assert_eq!(result.content, "The screen:");
        assert_eq!(result.images, [Image::png(vec![1u8, 2, 3])]);
    }
    let result = result(&requests[3]);
    assert_eq!(result.content, format!("The screen:\n{PLACEHOLDER}"));
    assert!(result.images.is_empty());
}

/// A store of the user's own that keeps images apart but can't load them
/// back: it implements neither `load_image` nor anything but the basics.
#[derive(Debug, Default)]
struct NoImages(Mutex<Vec<Message>>);

impl HistoryStore for NoImages {
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        let messages = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(messages) })
    }

    fn append<'a>(
        &'a self,
        _: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.0.lock().unwrap().extend_from_slice(messages);
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.0.lock().unwrap().clear();
        Box::pin(async { Ok(()) })
    }

    fn list(
        &self,
    ) -> BoxFuture<'_, Result<Vec<ferrobot::history::ConversationInfo>, HistoryError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

#[tokio::test]
async fn a_store_that_cant_load_images_gets_descriptions_and_the_turn_answers() {
    let stored = Image::Stored {
        id: "img-1".into(),
        media_type: "image/png".into(),
        size: 3,
    };
    let store = NoImages::default();
    store.0.lock().unwrap().extend([
        Message::new(
            Role::User,
            vec![Part::text("what is this?"), Part::image(stored)],
        ),
        Message::assistant("A cat."),
    ]);
    let mock = MockProvider::replying("Grey.");
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(store)
        .build();
    let reply = agent.handle("alice", "which colour?").await.unwrap();
    assert_eq!(reply.text, "Grey.");
    let (images, text) = first_message(&mock.requests()[0]);
    assert!(images.is_empty(), "{images:?}");
    assert_eq!(
        text,
        format!(
            "what is this?\n{PLACEHOLDER} (could not be loaded: this history store does not \
             support load_image)"
        )
    );
}

/// A store that keeps images apart and counts the ones loaded back.
#[derive(Debug, Default)]
struct Counting {
    messages: Mutex<Vec<Message>>,
    loads: Arc<Mutex<Vec<String>>>,
}

impl HistoryStore for Counting {
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Vec<Message>, HistoryError>> {
        let messages = self.messages.lock().unwrap().clone();
        Box::pin(async move { Ok(messages) })
    }

    fn append<'a>(
        &'a self,
        _: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), HistoryError>> {
        self.messages.lock().unwrap().extend_from_slice(messages);
        Box::pin(async { Ok(()) })
    }

    fn clear<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), HistoryError>> {
        Box::pin(async { Ok(()) })
    }

    fn list(
        &self,
    ) -> BoxFuture<'_, Result<Vec<ferrobot::history::ConversationInfo>, HistoryError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn load_image<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Image, HistoryError>> {
        self.loads.lock().unwrap().push(id.to_owned());
        Box::pin(async { Ok(Image::png(vec![1u8, 2, 3])) })
    }
}

/// A `Counting` store holding five turns, each showing a stored image.
fn five_turns_of_stored_images() -> Counting {
    let store = Counting::default();
    for turn in 0..5 {
        let image = Image::Stored {
            id: format!("img-{turn}"),
            media_type: "image/png".into(),
            size: 3,
        };
        store.messages.lock().unwrap().extend([
            Message::new(Role::User, vec![Part::text("look"), Part::image(image)]),
            Message::assistant("ok"),
        ]);
    }
    store
}

#[tokio::test]
async fn only_the_images_that_are_sent_are_loaded() {
    let store = five_turns_of_stored_images();
    let loads = Arc::clone(&store.loads);
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .history(store)
        .build();
    agent.handle("alice", "and now?").await.unwrap();
    // The last three turns: two stored ones and the current one.
    assert_eq!(*loads.lock().unwrap(), ["img-3", "img-4"]);

    // Where the context policy cuts, nothing before is loaded.
    let store = five_turns_of_stored_images();
    let loads = Arc::clone(&store.loads);
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .history(store)
        .images(ImagePolicy::All)
        .context(ContextPolicy::builder().max_messages(3).build())
        .build();
    agent.handle("alice", "and now?").await.unwrap();
    assert_eq!(*loads.lock().unwrap(), ["img-4"]);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use ferrobot::history::SqliteHistory;

    use super::*;
    use crate::sqlite::TempDir;

    #[tokio::test]
    async fn stored_images_are_sent_as_bytes_loaded_from_sqlite() {
        let dir = TempDir::new("agent-images");
        let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
        let mock = MockProvider::replying("A cat.");
        let agent = Agent::builder()
            .provider(mock.clone())
            .history(store.clone())
            .build();
        let requests = four_turns(&agent, &mock).await;
        // What the store gives back names the image; what the model gets
        // holds its bytes, read back from the file.
        assert!(matches!(
            store.load("alice").await.unwrap()[0].images().next(),
            Some(Image::Stored { .. })
        ));
        for request in &requests {
            let stored = request
                .messages
                .iter()
                .flat_map(Message::images)
                .filter(|image| matches!(image, Image::Stored { .. }))
                .count();
            assert_eq!(stored, 0, "{:?}", request.messages);
        }
        for request in &requests[..3] {
            assert_eq!(first_message(request).0, [Image::png(vec![1u8, 2, 3])]);
        }
        assert_eq!(
            first_message(&requests[3]),
            (vec![], format!("what is this?\n{PLACEHOLDER}"))
        );
    }

    #[tokio::test]
    async fn an_image_the_store_lost_is_described_with_why() {
        let dir = TempDir::new("agent-lost-image");
        let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
        let lost = Image::Stored {
            id: "gone".into(),
            media_type: "image/png".into(),
            size: 3,
        };
        store
            .append(
                "alice",
                &[
                    Message::new(
                        Role::User,
                        vec![Part::text("what is this?"), Part::image(lost)],
                    ),
                    Message::assistant("A cat."),
                ],
            )
            .await
            .unwrap();
        let mock = MockProvider::replying("Grey.");
        let agent = Agent::builder()
            .provider(mock.clone())
            .history(store)
            .build();
        assert_eq!(
            agent.handle("alice", "colour?").await.unwrap().text,
            "Grey."
        );
        assert_eq!(
            first_message(&mock.requests()[0]).1,
            format!(
                "what is this?\n{PLACEHOLDER} (could not be loaded: no image `gone` in this \
                 history store)"
            )
        );
    }
}
