//! `PostgresHistory` against a real PostgreSQL server: the one named by
//! `FERROBOT_TEST_POSTGRES_URL` (`.ci/postgres` starts one), each test in a
//! database of its own, so that tests run in parallel.

use std::time::{Duration, SystemTime};

use ferrobot_testkit::postgres::{Database, run_sql};

use ferrobot::history::{
    HistoryError, HistoryStore, Intake, Mark, PendingCall, PendingTurn, PostgresHistory, Stage,
};
#[cfg(feature = "schedule")]
use ferrobot::history::{LaterMessage, Recurrence, Schedule};
use ferrobot::policy::{Approval, Scope};
use ferrobot::{Image, Message, Part, Role, ToolCall, ToolResult};
use serde_json::json;

/// A store on `database`, with a small pool: tests run many at once.
async fn store_on(database: &Database) -> PostgresHistory {
    PostgresHistory::connect_with(&database.url(), 4)
        .await
        .unwrap_or_else(|e| panic!("{}", e.chain()))
}

/// A message no PostgreSQL store can keep: its image's media type holds a
/// NUL, which a `TEXT` column refuses, after the messages before it were
/// written in the same transaction.
fn unstorable() -> Message {
    Message::new(
        Role::User,
        vec![Part::image(Image::new("image/png\0", vec![1u8, 2]))],
    )
}

fn shown(text: &str, image: &Image) -> Message {
    Message::new(
        Role::User,
        vec![Part::text(text), Part::image(image.clone())],
    )
}

/// The ids of the stored images `messages` show, in order.
fn stored_ids(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| m.images().cloned().collect::<Vec<_>>())
        .map(|image| match image {
            Image::Stored { id, .. } => id,
            other => panic!("not stored: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn every_part_type_round_trips_and_an_append_is_all_or_nothing() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
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

    // The second message fails after the first was written: neither stays.
    let error = store
        .append("alice", &[Message::user("lost"), unstorable()])
        .await
        .unwrap_err();
    assert!(matches!(error, HistoryError::Storage { .. }), "{error:?}");
    assert_eq!(
        store.load("alice").await.unwrap(),
        super::fixtures::every_part()
    );
    store
        .append("alice", &[Message::user("next")])
        .await
        .unwrap();
    assert_eq!(store.load("alice").await.unwrap().len(), 6);
    db.remove().await;
}

#[tokio::test]
async fn images_are_stored_once_and_go_with_the_last_message_showing_them() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    let image = Image::png(vec![7u8; 1000]);
    store.append("a", &[shown("one", &image)]).await.unwrap();
    store
        .append("b", &[shown("two", &image), shown("three", &image)])
        .await
        .unwrap();
    let a = stored_ids(&store.load("a").await.unwrap());
    let b = stored_ids(&store.load("b").await.unwrap());
    assert_eq!(a.len(), 1);
    assert_eq!(
        b,
        [a[0].clone(), a[0].clone()],
        "one row for the same bytes"
    );
    assert_eq!(store.load_image(&a[0]).await.unwrap(), image);

    store.clear("a").await.unwrap();
    assert_eq!(store.load_image(&a[0]).await.unwrap(), image, "b shows it");
    store.truncate("b", 1).await.unwrap();
    assert_eq!(
        store.load_image(&a[0]).await.unwrap(),
        image,
        "b's first does"
    );
    store.truncate("b", 0).await.unwrap();
    let error = store.load_image(&a[0]).await.unwrap_err();
    assert!(
        matches!(error, HistoryError::ImageNotFound { .. }),
        "{error:?}"
    );
    assert!(store.list().await.unwrap().is_empty());
    db.remove().await;
}

#[tokio::test]
async fn truncate_clear_and_list_keep_order_and_titles() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    let turn = |n: u32| {
        [
            Message::user(format!("question {n}\nmore")),
            Message::assistant(format!("answer {n}")),
        ]
    };
    store.append("old", &turn(1)).await.unwrap();
    // Times are kept in seconds: the second conversation is updated later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    store.append("new", &turn(2)).await.unwrap();
    store.append("new", &turn(3)).await.unwrap();
    let list = store.list().await.unwrap();
    let summary: Vec<_> = list
        .iter()
        .map(|c| (c.id.as_str(), c.title.as_deref(), c.messages))
        .collect();
    assert_eq!(
        summary,
        [
            ("new", Some("question 2"), 4),
            ("old", Some("question 1"), 2)
        ]
    );
    assert!(list[0].updated > list[1].updated);

    store.truncate("new", 2).await.unwrap();
    assert_eq!(store.load("new").await.unwrap(), turn(2));
    store.truncate("new", 10).await.unwrap();
    assert_eq!(store.load("new").await.unwrap(), turn(2));
    store.append("new", &turn(4)).await.unwrap();
    let loaded = store.load("new").await.unwrap();
    assert_eq!(loaded[2..], turn(4));
    assert!(store.search("answer 3", 10).await.unwrap().is_empty());

    store.clear("old").await.unwrap();
    store.truncate("missing", 0).await.unwrap();
    let ids: Vec<_> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["new"]);
    db.remove().await;
}

#[tokio::test]
async fn search_finds_words_with_marked_snippets() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    store
        .append(
            "alice",
            &[
                Message::user("where are the backups?"),
                Message::tool_results([ToolResult::ok("c1", "backups live in /srv/backups")]),
            ],
        )
        .await
        .unwrap();
    store
        .append("bob", &[Message::user("C++ or Rust?")])
        .await
        .unwrap();

    let hits = store.search("backups", 10).await.unwrap();
    assert_eq!(hits.len(), 2);
    let first = hits.iter().find(|h| h.index == 0).unwrap();
    assert_eq!(first.conversation, "alice");
    assert_eq!(first.role, Role::User);
    assert_eq!(first.snippet, "where are the [backups]?");
    assert_eq!(hits.iter().find(|h| h.index == 1).unwrap().role, Role::Tool);
    assert_eq!(store.search("backups", 1).await.unwrap().len(), 1);
    // Every word must match; punctuation is never query syntax.
    assert!(store.search("backups rust", 10).await.unwrap().is_empty());
    let rust = store.search("C++ \"rust", 10).await.unwrap();
    assert_eq!(rust.len(), 1, "{rust:?}");
    assert_eq!(rust[0].snippet, "[C]++ or [Rust]?");
    assert!(store.search("  ", 10).await.unwrap().is_empty());
    assert!(store.search("!!", 10).await.unwrap().is_empty());
    db.remove().await;
}

#[tokio::test]
async fn approvals_and_a_pending_turn_settle_together() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    let call = ToolCall::new("c1", "peek", json!({}));
    let pending = PendingTurn::new(
        Message::new(Role::Assistant, vec![Part::ToolCall(call.clone())]),
        vec![],
        vec![PendingCall::new(call, "Peek?", "asks")],
        1,
        Some("ann".into()),
    );
    store
        .add_approval("a", &Approval::new("peek", Scope::Tool).by("ann"))
        .await
        .unwrap();
    store.set_pending("a", Some(&pending)).await.unwrap();
    assert_eq!(store.pending("a").await.unwrap(), Some(pending.clone()));
    assert_eq!(store.pending("b").await.unwrap(), None);
    let approvals = store.approvals("a").await.unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].granted_by.as_deref(), Some("ann"));

    // A settle that fails keeps the turn pending and stores nothing.
    let step = [
        pending.message.clone(),
        Message::tool_results([ToolResult::ok("c1", "seen")]),
    ];
    assert!(store.settle_pending("a", &[unstorable()]).await.is_err());
    assert_eq!(store.pending("a").await.unwrap(), Some(pending.clone()));
    assert!(store.load("a").await.unwrap().is_empty());
    store.settle_pending("a", &step).await.unwrap();
    assert_eq!(store.pending("a").await.unwrap(), None);
    assert_eq!(store.load("a").await.unwrap(), step);

    // Both go with their conversation.
    store.set_pending("a", Some(&pending)).await.unwrap();
    store.clear("a").await.unwrap();
    assert!(store.approvals("a").await.unwrap().is_empty());
    assert_eq!(store.pending("a").await.unwrap(), None);
    db.remove().await;
}

#[cfg(feature = "schedule")]
#[tokio::test]
async fn schedules_are_claimed_by_exactly_one_of_two_stores() {
    let Some(db) = Database::new().await else {
        return;
    };
    let (one, two) = (store_on(&db).await, store_on(&db).await);
    let start = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let hour = Duration::from_secs(3600);
    let hourly = Recurrence::Every(hour);
    let first = one
        .add_schedule(&Schedule::new(
            "ann",
            "disk",
            hourly.clone(),
            start + hour,
            start,
        ))
        .await
        .unwrap();
    let second = two
        .add_schedule(&Schedule::new(
            "bob",
            "mail",
            hourly,
            start + 2 * hour,
            start,
        ))
        .await
        .unwrap();
    assert!(second > first);
    assert_eq!(two.schedules(Some("ann")).await.unwrap()[0].prompt, "disk");
    assert_eq!(one.schedules(None).await.unwrap().len(), 2);
    assert_eq!(one.next_due().await.unwrap(), Some(start + hour));
    let due = one.due_schedules(start + hour).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].recurrence, Recurrence::Every(hour));

    // Eight claims of the same due time at once, from two stores: one wins.
    let claims = (0..8).map(|i| {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        tokio::spawn(async move {
            store
                .claim_schedule(first, Some(start + hour), Some(start + 2 * hour))
                .await
                .unwrap()
        })
    });
    let won = futures_util::future::join_all(claims)
        .await
        .into_iter()
        .filter(|claimed| *claimed.as_ref().unwrap())
        .count();
    assert_eq!(won, 1);
    assert!(
        one.claim_schedule(first, Some(start + 2 * hour), None)
            .await
            .unwrap()
    );
    assert!(
        two.claim_schedule(first, None, Some(start)).await.unwrap(),
        "from no due time"
    );

    one.record_schedule_run(first, start + hour, Some("boom"), 2)
        .await
        .unwrap();
    let recorded = &two.schedules(Some("ann")).await.unwrap()[0];
    assert_eq!(
        (
            recorded.last_run,
            recorded.last_error.as_deref(),
            recorded.attempts
        ),
        (Some(start + hour), Some("boom"), 2)
    );

    // Ids are never given twice, not even the last one removed.
    assert!(one.remove_schedule(second).await.unwrap());
    assert!(!two.remove_schedule(second).await.unwrap());
    let third = one
        .add_schedule(&Schedule::new(
            "ann",
            "x",
            Recurrence::Once(start),
            start,
            start,
        ))
        .await
        .unwrap();
    assert!(third > second);
    assert!(!one.remove_schedule(u64::MAX).await.unwrap());
    db.remove().await;
}

#[cfg(feature = "schedule")]
#[tokio::test]
async fn a_later_message_is_taken_once_by_two_stores() {
    let Some(db) = Database::new().await else {
        return;
    };
    let (one, two) = (store_on(&db).await, store_on(&db).await);
    assert_eq!(one.next_due().await.unwrap(), None);
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let id = one
        .add_later_message(&LaterMessage::new("ann", "Rebooting now.", at))
        .await
        .unwrap();
    one.add_later_message(&LaterMessage::new(
        "bob",
        "later",
        at + Duration::from_secs(60),
    ))
    .await
    .unwrap();
    assert_eq!(two.next_due().await.unwrap(), Some(at));
    let due = two.due_later_messages(at).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].id, due[0].text.as_str()), (id, "Rebooting now."));

    let takes = (0..8).map(|i| {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        tokio::spawn(async move { store.take_later_message(id).await.unwrap() })
    });
    let taken = futures_util::future::join_all(takes)
        .await
        .into_iter()
        .filter(|t| *t.as_ref().unwrap())
        .count();
    assert_eq!(taken, 1);
    assert!(one.due_later_messages(at).await.unwrap().is_empty());
    db.remove().await;
}

#[tokio::test]
async fn a_replica_claims_the_messages_of_one_that_stopped_and_no_others() {
    let Some(db) = Database::new().await else {
        return;
    };
    let (first, second, third) = (
        store_on(&db).await,
        store_on(&db).await,
        store_on(&db).await,
    );
    for id in ["t:1", "t:2", "t:3"] {
        assert!(first.receive(&Intake::new(id, "chat", "{}")).await.unwrap());
    }
    first.mark("t:2", &Mark::Delivered).await.unwrap();
    assert!(
        second
            .receive(&Intake::new("t:4", "chat", "{}"))
            .await
            .unwrap()
    );
    let started = Mark::Started {
        conversation: "c".into(),
    };
    first.mark("t:3", &started).await.unwrap();
    // A turn started and not answered: a new turn in its conversation
    // waits for it, in any replica.
    assert_eq!(second.started_in("c").await.unwrap(), ["t:3"]);
    assert_eq!(first.started_in("c").await.unwrap(), ["t:3"]);
    assert!(second.started_in("other").await.unwrap().is_empty());
    // Both run: neither takes the other's messages.
    assert!(second.claim_unfinished().await.unwrap().is_empty());
    assert!(first.claim_unfinished().await.unwrap().is_empty());

    // The first stops: once its beats are a minute old, it counts as gone.
    drop(first);
    db.sql_here("UPDATE replicas SET seen_at = now() - interval '1 minute' WHERE id NOT IN (SELECT owner FROM journal WHERE id = 't:4')")
        .await;
    let ids = |list: Vec<Intake>| list.into_iter().map(|i| i.id).collect::<Vec<_>>();
    let (one, two) = tokio::join!(second.claim_unfinished(), third.claim_unfinished());
    let (mut one, mut two) = (ids(one.unwrap()), ids(two.unwrap()));
    // Each entry to one claimant, in the order received.
    let claimed = if one.is_empty() { &mut two } else { &mut one };
    assert_eq!(*claimed, ["t:1", "t:3"]);
    claimed.clear();
    assert!(one.is_empty() && two.is_empty(), "{one:?} {two:?}");
    assert!(second.claim_unfinished().await.unwrap().is_empty());
    assert!(third.claim_unfinished().await.unwrap().is_empty());
    db.remove().await;
}

#[tokio::test]
async fn the_journal_keeps_order_marks_and_appends_with_its_mark() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    let first = Intake::new("t:1", "chat", "hello");
    assert!(store.receive(&first).await.unwrap());
    assert!(
        !store.receive(&first).await.unwrap(),
        "a redelivery is not new"
    );
    assert!(
        store
            .receive(&Intake::new("t:2", "chat", "again"))
            .await
            .unwrap()
    );
    let ids = |list: Vec<Intake>| list.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(ids(store.unfinished().await.unwrap()), ["t:1", "t:2"]);

    let calls = Message::new(
        Role::Assistant,
        vec![Part::ToolCall(ToolCall::new("c1", "disk", json!({})))],
    );
    let mut expected = store.intake("t:1").await.unwrap().unwrap();
    for mark in [
        Mark::Started {
            conversation: "chat".into(),
        },
        Mark::Calling(calls),
        Mark::Answered {
            text: "done".into(),
        },
        Mark::Reply("r1".into()),
        Mark::Delivered,
        // A delivered message stays delivered; a reply's id still sticks.
        Mark::Started {
            conversation: "other".into(),
        },
        Mark::Reply("r2".into()),
    ] {
        store.mark("t:1", &mark).await.unwrap();
        expected.apply(&mark);
        assert_eq!(
            store.intake("t:1").await.unwrap().unwrap(),
            expected,
            "{mark:?}"
        );
    }
    assert_eq!(expected.stage, Stage::Delivered);
    store.mark("unknown", &Mark::Delivered).await.unwrap();
    assert_eq!(ids(store.unfinished().await.unwrap()), ["t:2"]);

    // The mark and the messages are stored together, or neither.
    let started = Mark::Started {
        conversation: "chat".into(),
    };
    let failed = store
        .append_marked(
            "chat",
            &[Message::user("again"), unstorable()],
            "t:2",
            &started,
        )
        .await;
    assert!(failed.is_err());
    assert_eq!(
        store.intake("t:2").await.unwrap().unwrap().stage,
        Stage::Received
    );
    assert!(store.load("chat").await.unwrap().is_empty());
    store
        .append_marked("chat", &[Message::user("again")], "t:2", &started)
        .await
        .unwrap();
    assert_eq!(
        store.intake("t:2").await.unwrap().unwrap().stage,
        Stage::Started
    );
    assert_eq!(store.load("chat").await.unwrap(), [Message::user("again")]);

    // Only delivered messages received before the cut are forgotten.
    let cut = SystemTime::now() + Duration::from_secs(5);
    assert_eq!(store.forget_delivered(cut).await.unwrap(), 1);
    assert_eq!(store.intake("t:1").await.unwrap(), None);
    assert_eq!(ids(store.unfinished().await.unwrap()), ["t:2"]);
    db.remove().await;
}

#[tokio::test]
async fn replicas_migrate_once_and_a_newer_or_foreign_schema_is_refused() {
    let Some(db) = Database::new().await else {
        return;
    };
    // Four replicas starting together on a fresh database: all connect.
    let starts = (0..4).map(|_| {
        let url = db.url();
        tokio::spawn(async move { PostgresHistory::connect_with(&url, 2).await })
    });
    for started in futures_util::future::join_all(starts).await {
        started.unwrap().unwrap();
    }
    let store = store_on(&db).await;
    store.append("a", &[Message::user("kept")]).await.unwrap();
    // One row per version: the later connects changed nothing.
    db.sql_here(
        "DO $$ BEGIN
             IF (SELECT count(*) FROM ferrobot_schema) <> (SELECT max(version) FROM ferrobot_schema) THEN
                 RAISE EXCEPTION 'migrated twice';
             END IF;
         END $$",
    )
    .await;
    assert_eq!(
        store_on(&db).await.load("a").await.unwrap(),
        [Message::user("kept")]
    );

    db.sql_here("INSERT INTO ferrobot_schema VALUES (99, 0)")
        .await;
    let error = PostgresHistory::connect(&db.url()).await.unwrap_err();
    let HistoryError::NewerSchema {
        found, supported, ..
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!((*found, *supported), (99, 2));
    assert_no_password(&db, &error);

    let foreign = Database::new().await.unwrap();
    foreign.sql_here("CREATE TABLE conversations (x INT)").await;
    let error = PostgresHistory::connect(&foreign.url()).await.unwrap_err();
    assert!(matches!(error, HistoryError::NotOurs { .. }), "{error:?}");
    assert_no_password(&foreign, &error);
    foreign.remove().await;
    db.remove().await;
}

/// The test server's password, if its URL has one.
fn password_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let info = rest.split_once('@')?.0;
    Some(info.split_once(':')?.1.to_owned())
}

fn assert_no_password(db: &Database, error: &HistoryError) {
    let Some(password) = password_of(&db.server) else {
        return;
    };
    let text = format!("{} {error:?}", error.chain());
    assert!(!text.contains(&password), "{text}");
}

#[tokio::test]
async fn the_password_stays_out_of_errors_and_debug_output() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    if let Some(password) = password_of(&db.server) {
        let debug = format!("{store:?}");
        assert!(!debug.contains(&password), "{debug}");
        assert!(debug.contains(":***@"), "{debug}");
        assert!(!store.target().contains(&password));
    }

    // A wrong password: refused, said so, and not shown.
    let wrong = db
        .url()
        .replacen("://ferrobot:", "://ferrobot:wrong-s3cret-", 1);
    let error = PostgresHistory::connect(&wrong).await.unwrap_err();
    let text = format!("{} {error:?}", error.chain());
    assert!(!text.contains("wrong-s3cret"), "{text}");
    if wrong != db.url() {
        assert!(text.contains("check the user name and password"), "{text}");
    }

    // No server on the port: said what to check.
    let error = PostgresHistory::connect("postgres://bot:s3cret-pw@127.0.0.1:1/x")
        .await
        .unwrap_err();
    let text = format!("{} {error:?}", error.chain());
    assert!(!text.contains("s3cret-pw"), "{text}");
    assert!(
        text.contains("could not connect to PostgreSQL at postgres://bot:***@127.0.0.1:1/x"),
        "{text}"
    );

    // A database that doesn't exist.
    let missing = db.url().replace(&db.name, "ferrobot_no_such_database");
    let error = PostgresHistory::connect(&missing).await.unwrap_err();
    assert!(
        error.chain().contains("the database does not exist"),
        "{}",
        error.chain()
    );
    db.remove().await;
}

#[tokio::test]
async fn two_replicas_take_turns_in_a_conversation_by_its_lease() {
    use ferrobot::Agent;

    let Some(db) = Database::new().await else {
        return;
    };
    // Two stores on one database, as two replicas have.
    let (first, second) = (store_on(&db).await, store_on(&db).await);
    let slow = || super::fixtures::slow_echo(Duration::from_millis(100));
    let one = Agent::builder()
        .provider(slow())
        .history(first.clone())
        .build();
    let two = Agent::builder().provider(slow()).history(second).build();
    let questions: Vec<String> = (0..6).map(|i| format!("q{i}")).collect();
    let turns = questions.iter().enumerate().map(|(i, q)| {
        let agent = if i % 2 == 0 { one.clone() } else { two.clone() };
        async move { agent.handle("chat", q.as_str()).await }
    });
    for reply in futures_util::future::join_all(turns).await {
        reply.unwrap();
    }
    // No turn interleaved with another: each question, then its answer.
    let texts: Vec<String> = first
        .load("chat")
        .await
        .unwrap()
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(texts.len(), 12, "{texts:?}");
    for pair in texts.chunks(2) {
        assert_eq!(pair[1], format!("re: {}", pair[0]), "{texts:?}");
    }
    db.remove().await;
}

#[tokio::test]
async fn a_lease_left_by_a_crash_expires_and_a_live_one_is_waited_for() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    // A process that died mid-turn: its lease has expired.
    db.sql_here(
        "INSERT INTO turn_leases VALUES ('dead', 'gone-1', now() - interval '1 second'),
                                        ('busy', 'other-1', now() + interval '1 hour')",
    )
    .await;
    let taken = tokio::time::timeout(Duration::from_secs(5), store.lock_turn("dead"))
        .await
        .expect("an expired lease is taken at once")
        .unwrap();
    assert!(taken.is_some());
    // A live one is waited for, until its holder gives it back.
    let started = std::time::Instant::now();
    let url = db.url();
    let holder = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        run_sql(&url, "DELETE FROM turn_leases WHERE conversation = 'busy'").await;
    });
    let busy = store.lock_turn("busy").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(400));
    holder.await.unwrap();
    // Dropping a guard gives its conversation back.
    drop(busy);
    let mut left = i64::MAX;
    for _ in 0..100 {
        let (client, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        left = client
            .query_one(
                "SELECT count(*) FROM turn_leases WHERE conversation = 'busy'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        drop(client);
        let _ = connection.await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "the lease was not given back");
    drop(taken);
    db.remove().await;
}

#[tokio::test]
async fn a_table_locked_by_another_program_is_busy_and_nothing_is_stored() {
    let Some(db) = Database::new().await else {
        return;
    };
    let store = store_on(&db).await;
    store
        .append("alice", &[Message::user("one")])
        .await
        .unwrap();
    // Another program takes the messages table and keeps it: PostgreSQL
    // would wait for ever; the store waits 5 s.
    let other = db.connect().await;
    other
        .batch_execute("BEGIN; LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let error = tokio::time::timeout(
        Duration::from_secs(30),
        store.append("alice", &[Message::user("two"), Message::assistant("2")]),
    )
    .await
    .expect("the store gave up waiting for the lock")
    .unwrap_err();
    assert!(matches!(error, HistoryError::Busy { .. }), "{error:?}");
    let said = error.to_string();
    assert!(said.contains("is locked by another program"), "{said}");
    assert!(said.contains("nothing of this write was stored"), "{said}");
    other.batch_execute("ROLLBACK").await.unwrap();
    let kept = store.load("alice").await.unwrap();
    assert_eq!(kept.len(), 1, "nothing of the refused write: {kept:?}");
    store
        .append("alice", &[Message::user("two")])
        .await
        .unwrap();
    assert_eq!(
        store.load("alice").await.unwrap().len(),
        2,
        "works again once it is let go"
    );
    db.remove().await;
}

/// The certificate the test server's TLS presents (self-signed: its own
/// authority), when `.ci/postgres` started it with TLS; `None` after a
/// loud skip elsewhere, a failure under CI.
fn tls_root() -> Option<String> {
    match std::env::var("FERROBOT_TEST_POSTGRES_TLS_ROOT") {
        Ok(root) if !root.is_empty() => Some(root),
        _ => {
            ferrobot_testkit::outside::missing(
                "the test PostgreSQL server speaks no TLS: FERROBOT_TEST_POSTGRES_TLS_ROOT is \
                 not set (`. .ci/postgres; postgres_start` starts one with TLS and sets it)",
            );
            None
        }
    }
}

/// `url` with `params` added to its query.
fn with_params(url: &str, params: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}{params}")
}

/// A store on `url`, or the error's whole chain.
async fn connected(url: &str) -> Result<PostgresHistory, String> {
    PostgresHistory::connect_with(url, 2)
        .await
        .map_err(|e| e.chain())
}

#[tokio::test]
async fn tls_is_checked_against_the_authority_sslrootcert_names() {
    let Some(db) = Database::new().await else {
        return;
    };
    let Some(root) = tls_root() else {
        return;
    };
    let trusted = with_params(
        &db.url(),
        &format!("sslmode=verify-full&sslrootcert={root}"),
    );
    let store = connected(&trusted).await.unwrap_or_else(|e| panic!("{e}"));
    store
        .append("tls", &[Message::user("over TLS")])
        .await
        .unwrap();
    assert_eq!(
        store.load("tls").await.unwrap(),
        [Message::user("over TLS")]
    );
    // `require` checks nothing of it, as libpq.
    connected(&with_params(&db.url(), "sslmode=require"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // No authority the Mozilla roots hold signed it.
    let error = connected(&with_params(&db.url(), "sslmode=verify-full"))
        .await
        .expect_err("a certificate of an unknown authority is refused");
    assert!(error.contains("UnknownIssuer"), "{error}");
    // An authority file that can't be read is named.
    let error = connected(&with_params(
        &db.url(),
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .await
    .expect_err("no such file");
    assert!(
        error.contains("sslrootcert names /nonexistent/ca.pem"),
        "{error}"
    );
}

#[tokio::test]
async fn verify_ca_takes_the_authority_s_certificate_for_another_name_and_verify_full_does_not() {
    let Some(db) = Database::new().await else {
        return;
    };
    let Some(root) = tls_root() else {
        return;
    };
    // Reached at 127.0.0.1, named `db.invalid`: a name the certificate
    // (for localhost and 127.0.0.1) does not hold.
    let renamed = with_params(
        &db.url().replacen("@127.0.0.1:", "@db.invalid:", 1),
        &format!("hostaddr=127.0.0.1&sslrootcert={root}"),
    );
    let store = connected(&with_params(&renamed, "sslmode=verify-ca"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .append("ca", &[Message::user("any name")])
        .await
        .unwrap();
    assert_eq!(store.load("ca").await.unwrap().len(), 1);
    // libpq's rule: `require` with an authority file checks as verify-ca.
    connected(&with_params(&renamed, "sslmode=require"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let error = connected(&with_params(&renamed, "sslmode=verify-full"))
        .await
        .expect_err("the certificate names another host");
    assert!(
        error.contains("NotValidForName") || error.contains("not valid for name"),
        "{error}"
    );
}
