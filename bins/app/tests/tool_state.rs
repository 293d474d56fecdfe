//! The tool state file and the tools file, followed by a running agent.

use std::time::Duration;

use ferrobot::Agent;
use ferrobot::testing::MockProvider;
use ferrobot::tool::from_fn;
use ferrobot_app::{ToolState, watch_tools_file};
use serde_json::Value;

#[tokio::test]
async fn a_running_bot_applies_tool_state_changes_within_a_second() {
    let dir = std::env::temp_dir().join(format!("ferrobot-state-{}", std::process::id()));
    let path = dir.join("tool_state.json");
    let _ = std::fs::remove_dir_all(&dir);
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(from_fn("ping", "Ping.", |_: Value, _| async { "pong" }))
        .build();
    let watch = ToolState::watch(path.clone(), &agent);
    let mut state = ToolState::default();
    state.set_enabled("ping", false);
    state.save(&path).unwrap();
    let started = std::time::Instant::now();
    while agent.tools().is_enabled("ping") {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the change was not applied within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    state.set_enabled("ping", true);
    // A new modification time even on coarse clocks.
    tokio::time::sleep(Duration::from_millis(20)).await;
    state.save(&path).unwrap();
    let started = std::time::Instant::now();
    while !agent.tools().is_enabled("ping") {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "re-enabling was not applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    watch.abort();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_running_bot_follows_the_tools_file() {
    let dir = std::env::temp_dir().join(format!("ferrobot-toolsfile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tools.toml");
    let entry = |name: &str| {
        format!("[[tool]]\nname = \"{name}\"\ndescription = \"d\"\ncommand = [\"true\"]\n")
    };
    std::fs::write(&path, entry("first")).unwrap();
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tools(ferrobot::tools::CommandTool::load_file(&path).unwrap())
        .build();
    let watch = watch_tools_file(path.clone(), &agent);
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::write(&path, entry("second") + &entry("third")).unwrap();
    let started = std::time::Instant::now();
    while agent.tools().get("second").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the new tools were not loaded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        agent.tools().get("first").is_none(),
        "a removed tool is gone"
    );
    assert!(agent.tools().get("third").is_some());
    // A broken file keeps the tools as they were.
    std::fs::write(&path, "[[tool]]\nname = 3\n").unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(agent.tools().get("second").is_some());
    watch.abort();
    let _ = std::fs::remove_dir_all(dir);
}
