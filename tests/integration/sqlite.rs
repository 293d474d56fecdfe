//! `SqliteHistory` against real files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferrobot::history::{HistoryError, HistoryStore, SqliteHistory};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::from_fn;
use ferrobot::{Agent, Image, Message, Part, Role, ToolCall, ToolResult};
use serde_json::{Value, json};

/// A fresh directory for one test, removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "ferrobot-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The texts of `conversation`'s messages, as `store` loads them.
async fn texts(store: &SqliteHistory, conversation: &str) -> Vec<String> {
    let messages = store.load(conversation).await.unwrap();
    messages.iter().map(Message::text).collect()
}

#[tokio::test]
async fn every_part_type_round_trips() {
    let dir = TempDir::new("roundtrip");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    store
        .append("alice", &super::fixtures::every_part()[..2])
        .await
        .unwrap();
    store
        .append("alice", &super::fixtures::every_part()[2..])
        .await
        .unwrap();
    assert_eq!(
        store.load("alice").await.unwrap(),
        super::fixtures::every_part()
    );
    assert!(store.load("nobody").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_conversation_survives_a_restart() {
    let dir = TempDir::new("restart");
    let path = dir.file("nested/dir/history.db");
    {
        let agent = Agent::builder()
            .provider(
                MockProvider::new()
                    .then(MockTurn::new().tool_call("echo", json!({"x": 1})))
                    .then(MockTurn::new().text("one")),
            )
            .tool(from_fn("echo", "Echo.", |v: Value, _| async move {
                v.to_string()
            }))
            .history(SqliteHistory::open(&path).await.unwrap())
            .build();
        assert_eq!(agent.handle("bob", "first").await.unwrap().text, "one");
    }
    let mock = MockProvider::new().then(MockTurn::new().text("two"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .history(SqliteHistory::open(&path).await.unwrap())
        .build();
    assert_eq!(agent.handle("bob", "second").await.unwrap().text, "two");
    let sent: Vec<(Role, String)> = mock.requests()[0]
        .messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect();
    assert_eq!(
        sent,
        [
            (Role::User, "first".to_owned()),
            (Role::Assistant, String::new()),
            (Role::Tool, String::new()),
            (Role::Assistant, "one".to_owned()),
            (Role::User, "second".to_owned()),
        ]
    );
}

#[tokio::test]
async fn conversations_are_listed_with_their_titles_and_cleared() {
    let dir = TempDir::new("list");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    store
        .append("a", &[Message::user("How full is /var?\nAlso /home.")])
        .await
        .unwrap();
    store.append("b", &[Message::user("hello")]).await.unwrap();
    store
        .append("a", &[Message::assistant("80%")])
        .await
        .unwrap();
    let list = store.list().await.unwrap();
    let summary: Vec<(&str, Option<&str>, usize)> = list
        .iter()
        .map(|c| (c.id.as_str(), c.title.as_deref(), c.messages))
        .collect();
    assert!(
        summary.contains(&("a", Some("How full is /var?"), 2)),
        "{summary:?}"
    );
    assert!(summary.contains(&("b", Some("hello"), 1)), "{summary:?}");
    store.clear("a").await.unwrap();
    assert!(store.load("a").await.unwrap().is_empty());
    assert_eq!(store.list().await.unwrap().len(), 1);
    assert!(
        store.search("var", 10).await.unwrap().is_empty(),
        "cleared messages leave the index"
    );
}

#[tokio::test]
async fn truncate_forgets_the_tail_searches_included_and_keeps_appending_in_order() {
    let dir = TempDir::new("truncate");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    store
        .append(
            "ops",
            &[
                Message::user("check the backup"),
                Message::assistant("The backup is fine."),
                Message::user("delete the old snapshots"),
                Message::assistant("Deleted three snapshots."),
            ],
        )
        .await
        .unwrap();
    store.truncate("ops", 2).await.unwrap();
    let left = store.load("ops").await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(left[1].text(), "The backup is fine.");
    assert!(
        store.search("snapshots", 10).await.unwrap().is_empty(),
        "the index forgot them too"
    );
    // Keeping more than there is changes nothing; appending goes on after.
    store.truncate("ops", 10).await.unwrap();
    store
        .append("ops", &[Message::user("and the logs?")])
        .await
        .unwrap();
    let texts = texts(&store, "ops").await;
    assert_eq!(
        texts,
        ["check the backup", "The backup is fine.", "and the logs?"]
    );
    // A restart sees the same.
    drop(store);
    let again = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    assert_eq!(again.load("ops").await.unwrap().len(), 3);
    // Keeping nothing forgets the conversation, title and all.
    again.truncate("ops", 0).await.unwrap();
    assert!(again.list().await.unwrap().is_empty());
    assert!(again.search("backup", 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn search_finds_messages_across_conversations() {
    let dir = TempDir::new("search");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    store
        .append(
            "ops",
            &[
                Message::user("the nightly backup failed again"),
                Message::assistant("Restarting the backup job."),
            ],
        )
        .await
        .unwrap();
    store
        .append(
            "dev",
            &[
                Message::user("C++ \"build\" is slow"),
                Message::tool_results([ToolResult::ok("c", "backup size: 3 GB")]),
            ],
        )
        .await
        .unwrap();
    let hits = store.search("backup", 10).await.unwrap();
    let found: Vec<(&str, usize)> = hits
        .iter()
        .map(|h| (h.conversation.as_str(), h.index))
        .collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        hits.iter()
            .any(|h| h.snippet == "the nightly [backup] failed again")
    );
    assert!(
        hits.iter()
            .any(|h| h.conversation == "dev" && h.role == Role::Tool)
    );
    // Punctuation is searched for, not parsed as query syntax.
    assert_eq!(store.search("C++ \"build", 10).await.unwrap().len(), 1);
    assert!(store.search("   ", 10).await.unwrap().is_empty());
    assert_eq!(store.search("backup", 1).await.unwrap().len(), 1);
}

/// The version-1 schema exactly as released, to test the migration from it.
const V1_SCHEMA: &str = "
    PRAGMA application_id = 1179796052;
    CREATE TABLE ferrobot_schema (version INTEGER NOT NULL, applied_at INTEGER NOT NULL);
    INSERT INTO ferrobot_schema VALUES (1, 0);
    CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL, role TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL,
        UNIQUE (conversation, seq)
    );";

#[tokio::test]
async fn an_older_schema_is_migrated_and_its_messages_become_searchable() {
    let dir = TempDir::new("migrate");
    let path = dir.file("old.db");
    {
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(V1_SCHEMA).unwrap();
        old.execute(
            "INSERT INTO conversations VALUES ('old', 'Old talk', 1, 2)",
            [],
        )
        .unwrap();
        let body = serde_json::to_string(&Message::user("where did the logs go?")).unwrap();
        old.execute("INSERT INTO messages (conversation, seq, role, body, created_at) VALUES ('old', 0, 'user', ?1, 1)", [body]).unwrap();
    }
    let store = SqliteHistory::open(&path).await.unwrap();
    assert_eq!(
        store.load("old").await.unwrap(),
        [Message::user("where did the logs go?")]
    );
    assert_eq!(
        store.search("logs", 5).await.unwrap()[0].conversation,
        "old"
    );
    store
        .append("old", &[Message::assistant("In /var/log.")])
        .await
        .unwrap();
    assert_eq!(store.load("old").await.unwrap().len(), 2);
    let check = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = check
        .prepare("SELECT version FROM ferrobot_schema ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7]);
}

/// A PNG-typed image of 300 bytes, whose base64 is easy to look for.
fn picture(fill: u8) -> Image {
    Image::png(vec![fill; 300])
}

/// A user message showing `image`.
fn showing(text: &str, image: Image) -> Message {
    Message::new(Role::User, vec![Part::text(text), Part::image(image)])
}

/// The file's images table: how many rows, and every message body.
fn image_rows(path: &Path) -> (i64, Vec<String>) {
    let file = rusqlite::Connection::open(path).unwrap();
    let count = file
        .query_row("SELECT count(*) FROM images", [], |r| r.get(0))
        .unwrap();
    let bodies = file
        .prepare("SELECT body FROM messages")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (count, bodies)
}

#[tokio::test]
async fn an_image_is_stored_once_apart_from_the_messages_and_loaded_back() {
    let dir = TempDir::new("images");
    let path = dir.file("h.db");
    let store = SqliteHistory::open(&path).await.unwrap();
    let image = picture(7);
    let base64 = image.base64().unwrap();
    store
        .append("a", &[showing("what is this?", image.clone())])
        .await
        .unwrap();
    store
        .append(
            "a",
            &[
                Message::assistant("A grey square."),
                Message::tool_results([
                    ToolResult::ok("c1", "the same:").with_images(vec![image.clone()])
                ]),
            ],
        )
        .await
        .unwrap();
    store
        .append("b", &[showing("and this?", image.clone())])
        .await
        .unwrap();
    // Three messages show it; the file holds it once, and no message row
    // holds its bytes.
    let (count, bodies) = image_rows(&path);
    assert_eq!(count, 1);
    assert_eq!(bodies.len(), 4);
    for body in &bodies {
        assert!(!body.contains(&base64), "{body}");
        assert!(!body.contains(r#""source":"bytes""#), "{body}");
    }
    // Loading names the image; `load_image` reads its bytes.
    let loaded = store.load("a").await.unwrap();
    let shown: Vec<&Image> = loaded.iter().flat_map(Message::images).collect();
    assert_eq!(shown.len(), 2);
    let Image::Stored {
        id,
        media_type,
        size,
    } = shown[0]
    else {
        panic!("not stored: {shown:?}");
    };
    assert_eq!((media_type.as_str(), *size), ("image/png", 300));
    assert_eq!(shown[0], shown[1]);
    assert_eq!(store.load_image(id).await.unwrap(), image);
    // The same bytes as another type are another image.
    store
        .append("b", &[showing("as JPEG", Image::jpeg(vec![7u8; 300]))])
        .await
        .unwrap();
    assert_eq!(image_rows(&path).0, 2);
    let missing = store.load_image("nope").await.unwrap_err();
    assert!(
        matches!(&missing, HistoryError::ImageNotFound { id } if id == "nope"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn clearing_and_truncating_delete_images_no_message_shows() {
    let dir = TempDir::new("image-cleanup");
    let path = dir.file("h.db");
    let store = SqliteHistory::open(&path).await.unwrap();
    let (shared, own, late) = (picture(1), picture(2), picture(3));
    store
        .append(
            "a",
            &[showing("one", shared.clone()), showing("two", own.clone())],
        )
        .await
        .unwrap();
    store
        .append(
            "b",
            &[
                showing("three", shared.clone()),
                Message::assistant("ok"),
                showing("four", late.clone()),
            ],
        )
        .await
        .unwrap();
    assert_eq!(image_rows(&path).0, 3);
    let id_of = |messages: &[Message], at: usize| match messages[at].images().next() {
        Some(Image::Stored { id, .. }) => id.clone(),
        other => panic!("not stored: {other:?}"),
    };
    let a = store.load("a").await.unwrap();
    let (shared_id, own_id) = (id_of(&a, 0), id_of(&a, 1));

    // `b` still shows the shared image: only `a`'s own goes.
    store.clear("a").await.unwrap();
    assert_eq!(image_rows(&path).0, 2);
    assert_eq!(store.load_image(&shared_id).await.unwrap(), shared);
    assert!(matches!(
        store.load_image(&own_id).await,
        Err(HistoryError::ImageNotFound { .. })
    ));

    // Taking back the last turn takes its image along (what `/undo` does).
    let late_id = id_of(&store.load("b").await.unwrap(), 2);
    store.truncate("b", 2).await.unwrap();
    assert_eq!(image_rows(&path).0, 1);
    assert!(store.load_image(&late_id).await.is_err());

    // Showing an image again after it went stores it again.
    store
        .append("b", &[showing("five", own.clone())])
        .await
        .unwrap();
    assert_eq!(image_rows(&path).0, 2);
    store.truncate("b", 0).await.unwrap();
    assert_eq!(image_rows(&path).0, 0);
}

#[tokio::test]
async fn images_stored_inside_messages_move_out_when_migrated() {
    let dir = TempDir::new("migrate-images");
    let path = dir.file("old.db");
    let image = picture(9);
    {
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(V1_SCHEMA).unwrap();
        old.execute("INSERT INTO conversations VALUES ('old', NULL, 1, 2)", [])
            .unwrap();
        for (seq, text) in ["look", "again"].into_iter().enumerate() {
            let body = serde_json::to_string(&showing(text, image.clone())).unwrap();
            old.execute(
                "INSERT INTO messages (conversation, seq, role, body, created_at) VALUES ('old', ?1, 'user', ?2, 1)",
                rusqlite::params![seq as i64, body],
            )
            .unwrap();
        }
    }
    let store = SqliteHistory::open(&path).await.unwrap();
    let (count, bodies) = image_rows(&path);
    assert_eq!(count, 1);
    assert!(bodies.iter().all(|b| !b.contains(&image.base64().unwrap())));
    let loaded = store.load("old").await.unwrap();
    let Some(Image::Stored { id, .. }) = loaded[1].images().next() else {
        panic!("not stored: {loaded:?}");
    };
    assert_eq!(store.load_image(id).await.unwrap(), image);
    // The moved image is known to its messages: clearing deletes it.
    store.clear("old").await.unwrap();
    assert_eq!(image_rows(&path).0, 0);
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[tokio::test]
async fn a_file_that_is_not_ours_is_refused_and_left_untouched() {
    let dir = TempDir::new("foreign");
    let text = dir.file("notes.txt");
    std::fs::write(&text, "my precious notes, not a database\n".repeat(10)).unwrap();
    let error = SqliteHistory::open(&text).await.unwrap_err();
    assert!(matches!(error, HistoryError::NotOurs { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("notes.txt is not a ferrobot history database (it is not an SQLite file)"),
        "{error}"
    );
    assert_eq!(
        bytes(&text),
        "my precious notes, not a database\n"
            .repeat(10)
            .into_bytes()
    );

    let other = dir.file("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE accounts (id INTEGER); INSERT INTO accounts VALUES (7);")
        .unwrap();
    let before = bytes(&other);
    let error = SqliteHistory::open(&other).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("an SQLite database of another application"),
        "{error}"
    );
    assert_eq!(bytes(&other), before);
    assert!(!dir.file("other.db-wal").exists());
}

/// Waits until the connection of a dropped store at `path` has closed:
/// its thread closes it after the drop, and closing checkpoints the WAL into
/// the file (rewriting its first page) and removes the WAL.
async fn closed(path: &Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    for _ in 0..1000 {
        if !Path::new(&wal).exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store at {} was not closed in 10 s", path.display());
}

#[tokio::test]
async fn a_corrupt_header_is_refused() {
    let dir = TempDir::new("corrupt");
    let path = dir.file("h.db");
    SqliteHistory::open(&path)
        .await
        .unwrap()
        .append("a", &[Message::user("x")])
        .await
        .unwrap();
    // Else its closing may write the header back over the garbage.
    closed(&path).await;
    let mut data = bytes(&path);
    data[..16].copy_from_slice(b"garbage-garbage!");
    std::fs::write(&path, &data).unwrap();
    let error = SqliteHistory::open(&path).await.unwrap_err();
    assert!(matches!(error, HistoryError::NotOurs { .. }), "{error}");
}

#[tokio::test]
async fn a_newer_schema_is_refused_without_writing() {
    let dir = TempDir::new("newer");
    let path = dir.file("h.db");
    drop(SqliteHistory::open(&path).await.unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("INSERT INTO ferrobot_schema VALUES (99, 0)", [])
        .unwrap();
    let error = SqliteHistory::open(&path).await.unwrap_err();
    assert!(
        matches!(error, HistoryError::NewerSchema { found: 99, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("upgrade ferrobot"), "{error}");
}

#[tokio::test]
async fn a_read_only_location_is_a_clear_error() {
    // /sys is read-only even for root, who may write anywhere else.
    let error = SqliteHistory::open("/sys/ferrobot-test/history.db")
        .await
        .unwrap_err();
    assert!(matches!(error, HistoryError::ReadOnly { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("make it writable, or choose another path"),
        "{error}"
    );
}

#[tokio::test]
async fn many_conversations_append_concurrently() {
    let dir = TempDir::new("concurrent");
    let store = SqliteHistory::open(dir.file("h.db")).await.unwrap();
    let writes = (0..50).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            for j in 0..5 {
                store
                    .append(&format!("c{i}"), &[Message::user(format!("m{j}"))])
                    .await
                    .unwrap();
            }
        })
    });
    futures_util::future::join_all(writes).await;
    assert_eq!(store.list().await.unwrap().len(), 50);
    let texts = texts(&store, "c7").await;
    assert_eq!(texts, ["m0", "m1", "m2", "m3", "m4"]);
    let _ = Duration::ZERO;
}

/// Runs turns forever against the store named by `FERROBOT_CRASH_DB`; the
/// crash test starts it as a child process and kills it. Without that
/// variable it does nothing.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os("FERROBOT_CRASH_DB") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mock = MockProvider::from_fn(|request| match request.messages.last().map(|m| m.role) {
            Some(Role::User) => MockTurn::new()
                .text("Let me look.")
                .tool_call("echo", json!({"n": 1}))
                .tool_call("echo", json!({"n": 2})),
            _ => MockTurn::new().text("Done."),
        });
        let agent = Agent::builder()
            .provider(mock)
            .tool(from_fn("echo", "Echo.", |v: Value, _| async move {
                v.to_string()
            }))
            .history(SqliteHistory::open(&path).await.unwrap())
            .build();
        for i in 0.. {
            agent.handle(&format!("c{}", i % 3), "go").await.unwrap();
            // Each finished turn stored 4 messages; say so, for the parent.
            println!("turn done");
        }
    });
}

/// Every tool message answers exactly the calls of the assistant message
/// right before it, and every assistant message with calls is answered.
fn assert_consistent(conversation: &str, messages: &[Message]) {
    for (i, message) in messages.iter().enumerate() {
        let calls: Vec<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
        if !calls.is_empty() {
            let next = messages
                .get(i + 1)
                .unwrap_or_else(|| panic!("{conversation}: tool calls at {i} without results"));
            let answered: Vec<&str> = next
                .tool_results_iter()
                .map(|r| r.call_id.as_str())
                .collect();
            assert_eq!(
                answered,
                calls,
                "{conversation}: results at {} don't answer the calls at {i}",
                i + 1
            );
        }
        if message.role == Role::Tool {
            let before = i.checked_sub(1).map(|j| &messages[j]);
            assert!(
                before.is_some_and(|b| b.tool_calls().next().is_some()),
                "{conversation}: orphan tool results at {i}"
            );
        }
    }
}

#[test]
fn a_process_killed_mid_turn_leaves_a_consistent_store() {
    let dir = TempDir::new("crash");
    let path = dir.file("h.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut stored = 0;
    let mut reported = 0;
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for round in 0..25 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sqlite::crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("FERROBOT_CRASH_DB", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut output = String::new();
        if reported == 0 {
            // Until one turn is seen to finish (a loaded machine may start
            // the child slowly), wait for it, so the checks check something.
            while std::io::BufRead::read_line(&mut stdout, &mut output).unwrap() > 0
                && !output.ends_with("turn done\n")
            {}
        } else {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(Duration::from_millis(40 + seed % 160));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        std::io::Read::read_to_string(&mut stdout, &mut output).unwrap();
        // (The first may share its line with libtest's `test … ...`.)
        let finished_turns = output.lines().filter(|l| l.ends_with("turn done")).count();
        reported += finished_turns;
        runtime.block_on(async {
            let store = SqliteHistory::open(&path).await.unwrap();
            let mut total = 0;
            for info in store.list().await.unwrap() {
                let messages = store.load(&info.id).await.unwrap();
                assert_consistent(&info.id, &messages);
                total += messages.len();
            }
            // Every turn the child finished is there; at most the step in
            // flight (never half of it) is missing.
            let committed = stored + 4 * finished_turns;
            assert!(
                total >= committed,
                "round {round}: {committed} messages committed, {total} stored"
            );
            stored = total;
        });
    }
    assert!(
        stored > 0 && reported > 0,
        "the child never stored anything ({stored} stored, {reported} turns reported)"
    );
}

#[tokio::test]
async fn approvals_and_a_pending_turn_survive_a_restart_and_go_with_their_conversation() {
    use ferrobot::history::{PendingCall, PendingTurn};
    use ferrobot::policy::{Approval, Scope};

    let dir = TempDir::new("decisions");
    let path = dir.file("h.db");
    let call = ToolCall::new("call_1", "write", json!({"path": "/tmp/a"}));
    let pending = PendingTurn::new(
        Message::new(Role::Assistant, vec![Part::ToolCall(call.clone())]),
        vec![ToolResult::ok("call_0", "looked")],
        vec![PendingCall::new(
            call,
            "Write /tmp/a?",
            "default: the tool asks first",
        )],
        1,
        Some("ann".into()),
    );
    {
        let store = SqliteHistory::open(&path).await.unwrap();
        store
            .append("a", &[Message::user("write it")])
            .await
            .unwrap();
        store
            .add_approval("a", &Approval::new("peek", Scope::Tool).by("ann"))
            .await
            .unwrap();
        store.set_pending("a", Some(&pending)).await.unwrap();
        // A conversation with only an approval exists too.
        store
            .add_approval("b", &Approval::new("peek", Scope::Tool))
            .await
            .unwrap();
    }
    let store = SqliteHistory::open(&path).await.unwrap();
    let approvals = store.approvals("a").await.unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].granted_by.as_deref(), Some("ann"));
    assert_eq!(store.pending("a").await.unwrap(), Some(pending.clone()));
    assert_eq!(store.pending("b").await.unwrap(), None);

    // Settling stores the round and forgets the pending turn, together.
    let step = [
        pending.message.clone(),
        Message::tool_results(vec![ToolResult::ok("call_1", "wrote")]),
    ];
    store.settle_pending("a", &step).await.unwrap();
    assert_eq!(store.pending("a").await.unwrap(), None);
    assert_eq!(store.load("a").await.unwrap().len(), 3);

    store.set_pending("a", Some(&pending)).await.unwrap();
    store.clear("a").await.unwrap();
    assert!(store.approvals("a").await.unwrap().is_empty());
    assert_eq!(store.pending("a").await.unwrap(), None);
    assert_eq!(store.approvals("b").await.unwrap().len(), 1);
}

#[tokio::test]
async fn close_folds_the_log_into_the_file_once_the_last_handle_closes() {
    let dir = TempDir::new("close");
    let path = dir.file("history.db");
    let wal = dir.file("history.db-wal");
    let store = SqliteHistory::open(&path).await.unwrap();
    let other = store.clone();
    store
        .append("a", &[Message::user("written before close")])
        .await
        .unwrap();
    // Another handle is left: close folds the log into the file, and the
    // store goes on serving that handle.
    assert!(!store.close().await.unwrap(), "the clone keeps it open");
    assert_eq!(
        std::fs::metadata(&wal).unwrap().len(),
        0,
        "the log is folded in"
    );
    other
        .append("a", &[Message::user("written by the clone")])
        .await
        .unwrap();
    // The last handle: the connection closes, and with it the log.
    assert!(other.close().await.unwrap());
    assert!(
        !wal.exists(),
        "the write-ahead log was folded into the file"
    );
    // Only the file is needed now.
    let moved = dir.file("moved.db");
    std::fs::rename(&path, &moved).unwrap();
    let reopened = SqliteHistory::open(&moved).await.unwrap();
    let texts = texts(&reopened, "a").await;
    assert_eq!(texts, ["written before close", "written by the clone"]);
    assert!(reopened.close().await.unwrap());
}

#[tokio::test]
async fn close_says_busy_while_another_connection_reads_the_file() {
    let dir = TempDir::new("close-busy");
    let path = dir.file("history.db");
    let store = SqliteHistory::open(&path).await.unwrap();
    store.append("a", &[Message::user("hi")]).await.unwrap();
    // Another program in the middle of a read holds the log.
    let reader = rusqlite::Connection::open(&path).unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM sqlite_master;")
        .unwrap();
    let error = store.clone().close().await.unwrap_err();
    assert!(
        error.to_string().contains("another program is reading it"),
        "{error}"
    );
    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    assert!(store.close().await.unwrap());
}
