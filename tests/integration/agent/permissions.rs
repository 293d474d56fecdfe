//! The policy in the turn: rules, defaults from effects, the user's
//! decisions (edit, deny with a reason, always), the repeated-call guard,
//! deferred calls resumed later, and the audit on each record.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferrobot::agent::ToolOutcome;
use ferrobot::confirm::{ConfirmRequest, Decision};
use ferrobot::history::{HistoryStore, MemoryHistory};
use ferrobot::policy::{Approval, Layer, Permission, Policy, Rule, Scope};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot::tool::{Effects, FnTool, from_fn};
use ferrobot::{Agent, Error, PendingError};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::results_of;

/// A tool that records the paths it was run with.
fn writer(ran: &Arc<Mutex<Vec<String>>>) -> FnTool {
    let ran = Arc::clone(ran);
    from_fn("write", "Write a file.", move |v: Value, _| {
        let path = v["path"].as_str().unwrap_or_default().to_owned();
        ran.lock().unwrap().push(path.clone());
        async move { format!("wrote {path}") }
    })
}

/// A handler that answers each question with the next decision, and
/// counts the questions.
fn answering(
    decisions: Vec<Decision>,
) -> (impl ferrobot::confirm::ConfirmHandler, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&asked);
    let decisions = Arc::new(Mutex::new(decisions.into_iter()));
    let handler = move |_: ConfirmRequest| {
        count.fetch_add(1, Ordering::SeqCst);
        let next = decisions
            .lock()
            .unwrap()
            .next()
            .unwrap_or(Decision::Deny(None));
        async move { next }
    };
    (handler, asked)
}

fn calls(paths: &[&str]) -> MockProvider {
    let mut mock = MockProvider::new();
    for path in paths {
        mock = mock.then(MockTurn::new().tool_call("write", json!({"path": path})));
    }
    mock.then(MockTurn::new().text("done"))
}

#[tokio::test]
async fn a_rule_that_denies_stops_the_call_and_the_model_reads_which_rule() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mock = calls(&["/secret/key"]);
    let (handler, asked) = answering(vec![Decision::Approve]);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(writer(&ran))
        .policy(Policy::new().rule(Rule::deny("write").argument("path", "/secret/**")))
        .confirm(handler)
        .build();
    let reply = agent.handle("a", "write it").await.unwrap();
    assert!(ran.lock().unwrap().is_empty());
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "a denied call is not asked about"
    );
    let record = &reply.tool_calls[0];
    assert_eq!(record.outcome, ToolOutcome::Denied);
    let verdict = record.verdict.as_ref().unwrap();
    assert_eq!(
        (verdict.permission, verdict.layer),
        (Permission::Deny, Layer::Application)
    );
    let (content, is_error) = &results_of(&mock.requests()[1])[0];
    assert!(is_error);
    assert!(content.contains("rule 1: deny write"), "{content}");
}

#[tokio::test]
async fn effects_set_the_defaults_destructive_asks_read_only_and_undeclared_run() {
    for (effects, asks) in [
        (Effects::DESTRUCTIVE, true),
        (Effects::READ_ONLY, false),
        (Effects::NONE, false),
    ] {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let (handler, asked) = answering(vec![Decision::Approve]);
        let agent = Agent::builder()
            .provider(calls(&["/tmp/a"]))
            .tool(writer(&ran).effects(effects))
            .confirm(handler)
            .build();
        agent.handle("a", "go").await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst) == 1, asks, "{effects:?}");
        assert_eq!(ran.lock().unwrap().len(), 1, "{effects:?}");
    }
}

#[tokio::test]
async fn an_allow_rule_runs_a_destructive_tool_headless() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .provider(calls(&["/tmp/a"]))
        .tool(writer(&ran).effects(Effects::DESTRUCTIVE))
        .policy(Policy::new().rule(Rule::allow("write").argument("path", "/tmp/*")))
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(*ran.lock().unwrap(), ["/tmp/a"]);
}

#[tokio::test]
async fn edited_arguments_run_and_edits_into_a_denied_call_are_refused() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (handler, _) = answering(vec![
        Decision::Edit(json!({"path": "/tmp/safer"})),
        Decision::Edit(json!({"path": "/secret/x"})),
        Decision::Edit(json!("just text")),
    ]);
    let agent = Agent::builder()
        .provider(calls(&["/tmp/a", "/tmp/b", "/tmp/c"]))
        .tool(writer(&ran).confirm("Write {path}?"))
        .policy(Policy::new().rule(Rule::deny("write").argument("path", "/secret/**")))
        .confirm(handler)
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(*ran.lock().unwrap(), ["/tmp/safer"]);
    let outcomes: Vec<ToolOutcome> = reply.tool_calls.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ToolOutcome::Ok,
            ToolOutcome::Denied,
            ToolOutcome::InvalidArguments
        ]
    );
    assert_eq!(
        reply.tool_calls[0].decision,
        Some(Decision::Edit(json!({"path": "/tmp/safer"})))
    );
    assert!(
        reply.tool_calls[1]
            .content
            .contains("edited arguments are denied")
    );
}

#[tokio::test]
async fn a_denial_with_a_reason_reaches_the_model() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mock = calls(&["/tmp/a"]);
    let (handler, _) = answering(vec![Decision::deny("not that folder")]);
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(writer(&ran).confirm("Write {path}?"))
        .confirm(handler)
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    let (content, _) = &results_of(&mock.requests()[1])[0];
    assert_eq!(content, "Declined by the user: not that folder");
}

#[tokio::test]
async fn always_is_stored_with_the_conversation_and_covers_later_calls_only_there() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mock = calls(&["/tmp/a", "/tmp/b"])
        .then(MockTurn::new().tool_call("write", json!({"path": "/tmp/c"})))
        .then(MockTurn::new().text("not written"));
    let (handler, asked) = answering(vec![Decision::Always(Scope::Tool), Decision::Deny(None)]);
    let agent = Agent::builder()
        .provider(mock)
        .tool(writer(&ran).confirm("Write {path}?"))
        .confirm(handler)
        .build();
    agent.handle("a", "go").await.unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "asked once, then always allowed"
    );
    assert_eq!(*ran.lock().unwrap(), ["/tmp/a", "/tmp/b"]);
    let approvals = agent.history().approvals("a").await.unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(
        (approvals[0].tool.as_str(), &approvals[0].scope),
        ("write", &Scope::Tool)
    );
    // Another conversation is asked again (and this answer is no).
    agent.handle("b", "go").await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert_eq!(ran.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn an_approval_never_beats_a_written_deny() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .provider(calls(&["/secret/x"]))
        .tool(writer(&ran))
        .policy(Policy::new().rule(Rule::deny("write").argument("path", "/secret/**")))
        .build();
    agent
        .history()
        .add_approval("a", &Approval::new("write", Scope::Tool))
        .await
        .unwrap();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Denied);
    assert!(ran.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_same_call_a_third_time_in_a_row_is_asked_about() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (handler, asked) = answering(vec![Decision::Deny(None)]);
    let agent = Agent::builder()
        .provider(calls(&["/tmp/a", "/tmp/a", "/tmp/a"]))
        .tool(writer(&ran))
        .confirm(handler)
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(ran.lock().unwrap().len(), 2);
    let third = &reply.tool_calls[2];
    assert_eq!(third.outcome, ToolOutcome::Declined);
    assert_eq!(third.verdict.as_ref().unwrap().layer, Layer::Guard);
}

#[tokio::test]
async fn a_deferred_call_waits_with_the_conversation_and_resume_runs_it() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("write", json!({"path": "/tmp/a"}))
                .tool_call("peek", json!({})),
        )
        .then(MockTurn::new().text("All written."));
    let peek = from_fn("peek", "Look.", |_: Value, _| async { "looked" });
    let agent = Agent::builder()
        .provider(mock.clone())
        .tool(writer(&ran).confirm("Write {path}?"))
        .tool(peek)
        .confirm(|_: ConfirmRequest| async { Decision::Defer })
        .build();

    let waiting = agent.handle("a", "write it").await.unwrap();
    assert!(ran.lock().unwrap().is_empty());
    assert_eq!(waiting.pending.len(), 1);
    assert_eq!(waiting.pending[0].prompt, "Write /tmp/a?");
    assert!(waiting.text.contains("Write /tmp/a?"), "{}", waiting.text);
    // Nothing of the waiting round is in the conversation yet.
    assert_eq!(agent.history().load("a").await.unwrap().len(), 1);

    let refused = agent.handle("a", "and another thing").await.unwrap_err();
    assert!(
        matches!(refused, Error::Pending(PendingError::Waiting { .. })),
        "{refused}"
    );
    let wrong = agent
        .resume("a", [("nope", Decision::Approve)])
        .await
        .unwrap_err();
    assert!(
        matches!(wrong, Error::Pending(PendingError::UnknownCall { .. })),
        "{wrong}"
    );
    let none = agent.resume::<&str>("a", []).await.unwrap_err();
    assert!(
        matches!(none, Error::Pending(PendingError::Undecided { .. })),
        "{none}"
    );

    let id = waiting.pending[0].call_id.clone();
    let reply = agent.resume("a", [(id, Decision::Approve)]).await.unwrap();
    assert_eq!(reply.text, "All written.");
    assert_eq!(*ran.lock().unwrap(), ["/tmp/a"]);
    // Both results went back, in the model's order.
    let results = results_of(&mock.requests()[1]);
    assert_eq!(results[0].0, "wrote /tmp/a");
    assert_eq!(results[1].0, "looked");
    let stored = agent.history().load("a").await.unwrap();
    assert_eq!(stored.len(), 4, "user, calls, results, answer");
    let again = agent
        .resume("a", [("x", Decision::Approve)])
        .await
        .unwrap_err();
    assert!(
        matches!(again, Error::Pending(PendingError::NothingPending)),
        "{again}"
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_deferred_turn_survives_a_restart_with_sqlite() {
    let dir = tempdir();
    let path = dir.join("history.db");
    let first_model =
        MockProvider::new().then(MockTurn::new().tool_call("write", json!({"path": "/tmp/a"})));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let id = {
        let agent = Agent::builder()
            .provider(first_model)
            .tool(writer(&ran).confirm("Write {path}?"))
            .history(ferrobot::history::SqliteHistory::open(&path).await.unwrap())
            .confirm(|_: ConfirmRequest| async { Decision::Defer })
            .build();
        let waiting = agent.handle("a", "write it").await.unwrap();
        waiting.pending[0].call_id.clone()
    };
    // Another process, later: a new agent on the same file.
    let agent = Agent::builder()
        .provider(MockProvider::replying("Written."))
        .tool(writer(&ran).confirm("Write {path}?"))
        .history(ferrobot::history::SqliteHistory::open(&path).await.unwrap())
        .build();
    let reply = agent
        .resume("a", [(id, Decision::deny("not today"))])
        .await
        .unwrap();
    assert_eq!(reply.text, "Written.");
    assert!(ran.lock().unwrap().is_empty());
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    assert!(agent.history().pending("a").await.unwrap().is_none());
    assert_eq!(agent.history().load("a").await.unwrap().len(), 4);
}

#[tokio::test]
async fn a_store_that_keeps_no_pending_turns_declines_deferred_calls() {
    #[derive(Debug)]
    struct Forgetful(MemoryHistory);
    impl HistoryStore for Forgetful {
        fn load<'a>(
            &'a self,
            c: &'a str,
        ) -> futures_util::future::BoxFuture<
            'a,
            Result<Vec<ferrobot::Message>, ferrobot::history::HistoryError>,
        > {
            self.0.load(c)
        }
        fn append<'a>(
            &'a self,
            c: &'a str,
            m: &'a [ferrobot::Message],
        ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>>
        {
            self.0.append(c, m)
        }
        fn clear<'a>(
            &'a self,
            c: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<(), ferrobot::history::HistoryError>>
        {
            self.0.clear(c)
        }
        fn list(
            &self,
        ) -> futures_util::future::BoxFuture<
            '_,
            Result<Vec<ferrobot::history::ConversationInfo>, ferrobot::history::HistoryError>,
        > {
            self.0.list()
        }
    }
    let ran = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .provider(calls(&["/tmp/a"]))
        .tool(writer(&ran).confirm("Write {path}?"))
        .history(Forgetful(MemoryHistory::new()))
        .confirm(|_: ConfirmRequest| async { Decision::Defer })
        .build();
    let reply = agent.handle("a", "go").await.unwrap();
    assert!(reply.pending.is_empty());
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Declined);
    assert!(ran.lock().unwrap().is_empty());
}

#[cfg(feature = "sqlite")]
fn tempdir() -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ferrobot-permissions-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a user may answer, in the property below.
fn any_decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        Just(Decision::Approve),
        Just(Decision::Deny(None)),
        Just(Decision::Always(Scope::Tool)),
        Just(Decision::Always(Scope::Prefix {
            argument: "path".into(),
            prefix: "/".into()
        })),
        Just(Decision::Defer),
        prop_oneof![Just("/tmp/ok"), Just("/secret/edited")]
            .prop_map(|path| Decision::Edit(json!({ "path": path }))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// No sequence of calls, answers (always, edits, deferrals and their
    /// resumes) lets a call the rules deny run.
    #[test]
    fn no_sequence_of_decisions_runs_a_denied_call(
        steps in prop::collection::vec(
            (prop_oneof![Just("/tmp/a"), Just("/secret/a")], any_decision(), any_decision()),
            1..8,
        )
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let ran = Arc::new(Mutex::new(Vec::new()));
            let mock = MockProvider::new();
            let answers: Vec<Decision> = steps.iter().map(|(_, first, _)| first.clone()).collect();
            let (handler, _) = answering(answers);
            let agent = Agent::builder()
                .provider(mock.clone())
                .tool(writer(&ran).confirm("Write {path}?"))
                .policy(Policy::new().rule(Rule::deny("write").argument("path", "/secret/**")))
                .confirm(handler)
                .build();
            for (path, _, later) in &steps {
                mock.push(MockTurn::new().tool_call("write", json!({"path": path})));
                mock.push(MockTurn::new().text("ok"));
                let reply = agent.handle("a", "write").await.unwrap();
                if let Some(waiting) = reply.pending.first() {
                    let later = match later {
                        Decision::Defer => Decision::Approve,
                        other => other.clone(),
                    };
                    agent.resume("a", [(waiting.call_id.clone(), later)]).await.unwrap();
                }
                while mock.remaining() > 0 {
                    // A turn the rules ended early leaves its answer unused.
                    let _ = agent.handle("a", "next").await;
                }
            }
            let ran = ran.lock().unwrap();
            prop_assert!(ran.iter().all(|p| !p.starts_with("/secret")), "ran: {:?}", *ran);
            Ok(())
        })?;
    }
}
