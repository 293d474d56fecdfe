//! The examples of `docs/schedules.md` (features `schedule` and `sqlite`).

#[tokio::test]
async fn setting_up_a_scheduler_with_its_tools() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("ferrobot-docs-schedules-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    use ferrobot::history::SqliteHistory;
    use ferrobot::schedule::{self, Scheduler};
    use ferrobot::{Agent, testing::MockProvider};

    let scheduler = Scheduler::new().time_zone("Europe/Paris")?;
    let agent = Agent::builder()
        .provider(MockProvider::replying("Disk / is 41% full."))
        .history(SqliteHistory::open(dir.join("history.db")).await?)
        .tools(schedule::tools())
        .state(scheduler.clone())
        .build();
    let post = |chat: String, text: String| async move { println!("to {chat}: {text}") };
    let running = tokio::spawn(scheduler.run(agent.clone(), post));

    // The model (or the program) makes schedules; the loop runs them.
    let made = agent.handle("alice", r#"/schedule_prompt cron="0 8 * * *" prompt="report the disk usage""#).await?;
    assert!(made.text.starts_with("Scheduled 1: “report the disk usage”, cron `0 8 * * *` (Europe/Paris); next "));
    running.abort(); // stops the loop; the schedule stays in the file
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

#[tokio::test]
async fn a_manual_clock_runs_a_schedule_in_a_test() -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};
    use ferrobot::history::Recurrence;
    use ferrobot::schedule::{ManualClock, Scheduler};
    use ferrobot::{Agent, testing::MockProvider};

    let clock = ManualClock::new(UNIX_EPOCH);
    let scheduler = Scheduler::new().clock(clock.clone());
    let agent = Agent::builder().provider(MockProvider::replying("All good.")).state(scheduler.clone()).build();
    let posted = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&posted);
    let running = tokio::spawn(scheduler.run(agent, move |chat: String, text: String| {
        sink.lock().unwrap().push(format!("{chat}: {text}"));
        async {}
    }));

    scheduler.add("alice", "check the backups", Recurrence::every(Duration::from_secs(3600))?).await?;
    clock.advance(Duration::from_secs(3600));
    while posted.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(posted.lock().unwrap()[0], "alice: All good.");
    running.abort();
    Ok(())
}
