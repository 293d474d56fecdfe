//! The system prompt of the agent a config describes: the base prompt, the
//! instruction files in order (a missing one left out), then the facts
//! that change, last.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

mod support;

use ferrobot::agent::TurnRequest;

use support::{ask, chats, loaded, server, tempdir};

/// The system prompt of the one chat request a turn asking `request` sends
/// with `toml` (the window given, so the server isn't asked).
async fn system_prompt(dir: &std::path::Path, toml: &str, request: TurnRequest) -> String {
    let server = server(None).await;
    let loaded = loaded(&server, dir, &format!("[context]\nwindow = 32768\n{toml}"));
    ask(&loaded, request).await;
    let sent = chats(&server).await;
    sent[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_prompt_is_the_base_then_the_files_then_todays_facts() {
    let dir = tempdir("prompt-order");
    std::fs::write(dir.join("AGENTS.md"), "Backups are in /srv/backup.").unwrap();
    std::fs::write(dir.join("HOUSE.md"), "Never reboot on Fridays.").unwrap();
    let toml = "[agent]\nsystem_prompt = \"You are the house bot.\"\n\
                instruction_files = [\"AGENTS.md\", \"missing.md\", \"HOUSE.md\"]\n";
    let request = TurnRequest::new("hi").user("111").user_name("Ann");
    let system = system_prompt(&dir, toml, request).await;
    let parts: Vec<&str> = system.split("\n\n").collect();
    assert_eq!(parts.len(), 4, "{system}");
    assert_eq!(parts[0], "You are the house bot.");
    assert_eq!(parts[1], "Backups are in /srv/backup.");
    assert_eq!(parts[2], "Never reboot on Fridays.");
    assert!(parts[3].starts_with("Today is "), "{system}");
    assert!(parts[3].contains(" You run on "), "{system}");
    assert!(parts[3].ends_with(" The user is Ann."), "{system}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn without_facts_the_prompt_is_the_same_every_day() {
    let dir = tempdir("prompt-nofacts");
    let toml = "[agent]\nsystem_prompt = \"Be terse.\"\nprompt_facts = false\n";
    let system = system_prompt(&dir, toml, TurnRequest::new("hi").user_name("Ann")).await;
    assert_eq!(system, "Be terse.");
    std::fs::remove_dir_all(&dir).ok();
}
