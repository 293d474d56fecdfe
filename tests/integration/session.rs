//! Bot sessions recorded at the `Channel` trait and replayed:
//! `SessionRecorder` and `Session`, with the model in a `Cassette`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ferrobot::Agent;
use ferrobot::agent::TurnInfo;
use ferrobot::bot::{Channel, ChannelConfirm, ChannelError, Handler, Incoming, Length, serve};
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::testing::{
    Cassette, MockProvider, MockTurn, Mode, Session, SessionError, SessionRecorder,
};
use ferrobot::tool::from_fn;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::sqlite::TempDir;

const SECRET: &str = "tok-SECRET-42";

/// A platform in memory: delivers its messages one by one, edits replies
/// as they stream (every 10 ms), splits at 40 characters, approves every
/// confirmation, and keeps what it finally shows.
#[derive(Default)]
struct Room {
    said: Vec<Incoming>,
    finished: Mutex<Vec<(String, String)>>,
    drafts: Mutex<usize>,
}

impl Channel for Room {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            for message in &self.said {
                handler.answer(message.clone()).await;
            }
            Ok(())
        })
    }

    fn limit(&self) -> (usize, Length) {
        (40, Length::Utf16)
    }

    fn post<'a>(
        &'a self,
        room: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move {
            self.show(room, text, done);
            Ok(format!("m{}", self.finished.lock().unwrap().len()))
        })
    }

    fn edit<'a>(
        &'a self,
        room: &'a str,
        _message: &'a str,
        text: &'a str,
        done: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.show(room, text, done);
            Ok(())
        })
    }

    fn edit_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(10))
    }

    fn confirm(&self, _: ConfirmRequest) -> BoxFuture<'static, Decision> {
        Box::pin(async { Decision::Approve })
    }
}

impl Room {
    fn show(&self, room: &str, text: &str, done: bool) {
        if done {
            let mut finished = self.finished.lock().unwrap();
            finished.push((room.to_owned(), text.to_owned()));
        } else {
            *self.drafts.lock().unwrap() += 1;
        }
    }
}

/// The model's answers: a tool call asked about, a long streamed reply
/// (split in two messages), a reply echoing the secret.
fn model() -> MockProvider {
    MockProvider::new()
        .then(MockTurn::new().tool_call("disk_free", json!({"path": "/"})))
        .then(
            MockTurn::new()
                .text("There are 12 GB free on /, ")
                .text("which is plenty for the backups tonight."),
        )
        .then(MockTurn::new().text(format!("Saved {SECRET}.")))
}

/// The agent under test, answering through `channel`'s prompts, with the
/// day in its prompt.
fn agent(
    provider: impl ferrobot::provider::Provider + 'static,
    confirm: ChannelConfirm,
    clock: Option<SystemTime>,
) -> Agent {
    let disk_free = from_fn("disk_free", "Free space.", |_: Value, _| async { "12 GB" })
        .confirm("Look at {path}?");
    let builder = Agent::builder()
        .provider(provider)
        .tool(disk_free)
        .confirm(confirm)
        .prompt_tail(|turn: &TurnInfo<'_>| {
            let day = turn
                .now
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()?
                .as_secs()
                / 86_400;
            Some(format!("Today is day {day}."))
        });
    match clock {
        Some(at) => builder.clock(move || at).build(),
        None => builder.build(),
    }
}

fn said() -> Vec<Incoming> {
    vec![
        Incoming::new("chat-1", "ann", "how much disk is free?").id("t:1:1"),
        Incoming::new("chat-2", "bob", "/help").id("t:2:1"),
        Incoming::new("chat-1", "ann", format!("remember {SECRET}")).id("t:1:2"),
    ]
}

/// Records [`said`] through a [`Room`], the model in a cassette; returns
/// what the room finally showed.
async fn record(dir: &TempDir) -> Vec<(String, String)> {
    let room = Arc::new(Room {
        said: said(),
        ..Room::default()
    });
    let recorder: Arc<dyn Channel> = Arc::new(
        SessionRecorder::new(dir.file("chat.json"), room.clone() as Arc<dyn Channel>)
            .redact(SECRET),
    );
    let cassette = Cassette::new(dir.file("chat.model.json"), model())
        .mode(Mode::RecordAll)
        .redact(SECRET);
    let agent = agent(cassette, ChannelConfirm(recorder.clone()), None);
    serve(agent, recorder).await.unwrap();
    assert!(
        *room.drafts.lock().unwrap() > 0,
        "the reply streamed as drafts"
    );
    room.finished.lock().unwrap().clone()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn a_recorded_conversation_replays_offline_with_questions_answered_as_they_were() {
    let dir = TempDir::new("session-round-trip");
    let shown = record(&dir).await;
    assert_eq!(
        shown[0],
        (
            "chat-1".into(),
            "There are 12 GB free on /, which is ".into()
        )
    );
    let session_file = read(&dir.file("chat.json"));
    let model_file = read(&dir.file("chat.model.json"));
    assert!(
        !session_file.contains(SECRET) && !model_file.contains(SECRET),
        "{session_file}"
    );
    let file: Value = serde_json::from_str(&session_file).unwrap();
    assert_eq!(file["ferrobot_session"], 1);
    assert_eq!(
        (file["limit"].as_u64(), file["length"].as_str()),
        (Some(40), Some("utf16"))
    );
    let kinds: Vec<String> = file["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| {
            let (kind, body) = event.as_object().unwrap().iter().next().unwrap();
            let text = body["text"]
                .as_str()
                .or(body["prompt"].as_str())
                .unwrap_or_default();
            format!("{kind} {text}")
        })
        .collect();
    assert_eq!(
        kinds[..4],
        [
            "message how much disk is free?",
            "question Look at /?",
            "reply There are 12 GB free on /, which is ",
            "reply plenty for the backups tonight.",
        ]
    );
    assert_eq!(kinds.last().unwrap(), "reply Saved [redacted].");
    assert!(
        kinds.contains(&"message remember [redacted]".to_owned()),
        "{kinds:?}"
    );
    assert_eq!(file["events"][1]["question"]["answer"], "approve");

    // Replayed: no platform, no model, questions answered from the file.
    let session = Session::open(dir.file("chat.json")).unwrap();
    let at = session.recorded_at();
    let replayed = agent(
        Cassette::replay(dir.file("chat.model.json")).redact(SECRET),
        session.confirm(),
        Some(at),
    );
    session.replay(replayed).await.unwrap();
    // Twice: a session replays from the start each time.
    let replayed = agent(
        Cassette::replay(dir.file("chat.model.json")).redact(SECRET),
        session.confirm(),
        Some(at),
    );
    session.replay(replayed).await.unwrap();
}

#[tokio::test]
async fn a_changed_answer_is_named_with_its_chat_and_message() {
    let dir = TempDir::new("session-differs");
    record(&dir).await;
    let session = Session::open(dir.file("chat.json")).unwrap();
    let other = MockProvider::new()
        .then(MockTurn::new().tool_call("disk_free", json!({"path": "/"})))
        .then(MockTurn::new().text("11 GB free."))
        .then(MockTurn::new().text("Saved [redacted]."));
    let error = session
        .replay(agent(other, session.confirm(), Some(session.recorded_at())))
        .await
        .unwrap_err();
    let SessionError::Differs { report } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        report,
        &format!(
            "the session {} replayed differently (1 chat):\n  in chat-1, after the message \"how much disk is free?\" (its message 1):\n    recorded the reply \"There are 12 GB free on /, which is plenty for the backups tonight.\"\n    now      the reply \"11 GB free.\"\nIf the change is meant, record the session again.",
            dir.file("chat.json").display()
        )
    );
}

#[tokio::test]
async fn a_replay_on_another_day_needs_the_recording_s_clock() {
    let dir = TempDir::new("session-clock");
    record(&dir).await;
    let session = Session::open(dir.file("chat.json")).unwrap();
    let later = session.recorded_at() + Duration::from_secs(3 * 86_400);
    let replayed = agent(
        Cassette::replay(dir.file("chat.model.json")).redact(SECRET),
        session.confirm(),
        Some(later),
    );
    let error = session.replay(replayed).await.unwrap_err();
    // The model call failed on the changed prompt; the bot told the chat.
    let report = error.to_string();
    assert!(
        report.contains("in chat-1, after the message \"how much disk is free?\""),
        "{report}"
    );
}

#[tokio::test]
async fn a_missing_or_foreign_file_says_what_to_do() {
    let dir = TempDir::new("session-missing");
    let error = Session::open(dir.file("none.json")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("there is no such file: record one with `SessionRecorder`"),
        "{error}"
    );
    std::fs::write(
        dir.file("cassette.json"),
        r#"{"ferrobot_cassette": 1, "interactions": []}"#,
    )
    .unwrap();
    let error = Session::open(dir.file("cassette.json")).unwrap_err();
    assert!(
        error.to_string().contains("it is no session file"),
        "{error}"
    );
    std::fs::write(
        dir.file("future.json"),
        r#"{"ferrobot_session": 9, "recorded_at": 0, "limit": 10, "length": "chars", "events": []}"#,
    )
    .unwrap();
    let error = Session::open(dir.file("future.json")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("format version 9, this ferrobot reads 1: record it again"),
        "{error}"
    );
}

#[tokio::test]
async fn a_reply_target_holding_a_token_is_kept_as_a_stand_in() {
    let dir = TempDir::new("session-targets");
    let room = Arc::new(Room {
        said: vec![
            Incoming::new("chat-9", "ann", "/help").reply_to("interaction:1:SECRET-TOKEN"),
            Incoming::new("chat-9", "ann", "hi"),
        ],
        ..Room::default()
    });
    let recorder: Arc<dyn Channel> = Arc::new(SessionRecorder::new(
        dir.file("targets.json"),
        room.clone() as Arc<dyn Channel>,
    ));
    let cassette = Cassette::new(
        dir.file("targets.model.json"),
        MockProvider::replying("Hi!"),
    )
    .mode(Mode::RecordAll);
    serve(
        agent(cassette, ChannelConfirm(recorder.clone()), None),
        recorder,
    )
    .await
    .unwrap();
    // The platform got the real target; the file holds a stand-in.
    let shown = room.finished.lock().unwrap().clone();
    assert_eq!(shown[0].0, "interaction:1:SECRET-TOKEN");
    let text = read(&dir.file("targets.json"));
    assert!(!text.contains("SECRET-TOKEN"), "{text}");
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["events"][0]["message"]["reply_to"], "reply-1");
    assert_eq!(file["events"][1]["reply"]["chat"], "chat-9");

    let session = Session::open(dir.file("targets.json")).unwrap();
    let at = session.recorded_at();
    let replayed = agent(
        Cassette::replay(session.model_path()),
        session.confirm(),
        Some(at),
    );
    session.replay(replayed).await.unwrap();
}
