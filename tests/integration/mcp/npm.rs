//! Against npm's reference servers, which nobody here wrote
//! (`@modelcontextprotocol/server-everything` and `server-filesystem`,
//! installed once by `.ci/run`; see `ferrobot_testkit::outside`): stdio,
//! streamable HTTP started late, a server killed mid-session, the minimal
//! environment, trust from real annotations.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::agent::ToolOutcome;
use ferrobot::mcp::{Mcp, McpServer, ServerState};
use ferrobot::testing::{MockProvider, MockTurn};
use ferrobot_testkit::outside::mcp_server;
use serde_json::{Value, json};

use super::{eventually, results};

/// npm starts slowly on a busy machine.
const WAIT: Duration = Duration::from_secs(60);

fn everything(entry: &Path) -> McpServer {
    McpServer::stdio("everything", "node").args([entry.display().to_string(), "stdio".into()])
}

/// Sends `SIGKILL` to the process group `pgid`, as a crash would.
fn kill_group(pgid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn everything_echo_runs_through_the_agent_with_its_instructions_and_image() {
    let Some(entry) = mcp_server("server-everything") else {
        return;
    };
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call(
                    "everything__echo",
                    json!({"message": "hello from ferrobot"}),
                )
                .tool_call("everything__get-tiny-image", json!({})),
        )
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder()
        .provider(mock.clone())
        .system_prompt("Be terse.")
        .build();
    let mcp = Mcp::start(&agent, [everything(&entry)]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    let status = &mcp.status()[0];
    assert!(
        status.tools.iter().any(|t| t == "everything__echo"),
        "{status:?}"
    );
    assert!(status.pid.is_some());

    let reply = agent.handle("alice", "echo").await.unwrap();
    assert_eq!(reply.text, "done");
    let sent = results(&mock.requests()[1]);
    assert_eq!(sent[0].content, "Echo: hello from ferrobot");
    assert!(!sent[1].is_error, "{}", sent[1].content);
    assert_eq!(sent[1].images.len(), 1, "{}", sent[1].content);
    let system = mock.requests()[0].system.clone().unwrap();
    assert!(
        system.starts_with("Be terse.\n\n") && system.len() > "Be terse.\n\n".len() + 20,
        "{system}"
    );
}

#[tokio::test]
async fn a_stdio_server_sees_only_path_home_and_its_configured_variables() {
    let Some(entry) = mcp_server("server-everything") else {
        return;
    };
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("everything__get-env", json!({})))
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = everything(&entry).env("FERROBOT_NAMED", "yes");
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    agent.handle("alice", "env").await.unwrap();
    let sent = results(&mock.requests()[1]);
    let env: Value = serde_json::from_str(&sent[0].content).unwrap();
    let keys: BTreeSet<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = BTreeSet::from(["FERROBOT_NAMED", "PATH"]);
    if std::env::var_os("HOME").is_some() {
        expected.insert("HOME");
    }
    assert_eq!(keys, expected);
    assert_eq!(env["FERROBOT_NAMED"], "yes");
    // This process has more (cargo sets CARGO_PKG_NAME for tests).
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
}

#[tokio::test]
async fn a_killed_server_is_unavailable_then_reconnected() {
    let Some(entry) = mcp_server("server-everything") else {
        return;
    };
    let mock = MockProvider::new()
        .then(MockTurn::new().tool_call("everything__echo", json!({"message": "one"})))
        .then(MockTurn::new().text("first"))
        .then(MockTurn::new().tool_call("everything__echo", json!({"message": "two"})))
        .then(MockTurn::new().text("second"));
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = everything(&entry).reconnect_delay(Duration::from_secs(2), Duration::from_secs(4));
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    let pid = mcp.status()[0].pid.unwrap();

    kill_group(pid);
    assert!(
        eventually(WAIT, || matches!(
            mcp.status()[0].state,
            ServerState::Reconnecting(_)
        ))
        .await,
        "{:?}",
        mcp.status()
    );
    agent.handle("alice", "echo one").await.unwrap();
    let sent = results(&mock.requests()[1]);
    assert!(
        sent[0].content.starts_with(
            "Tool `everything__echo` is unavailable here: the MCP server `everything`"
        ),
        "{}",
        sent[0].content
    );

    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    assert_ne!(mcp.status()[0].pid, Some(pid));
    let reply = agent.handle("alice", "echo two").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(results(&mock.requests()[3])[0].content, "Echo: two");
}

#[tokio::test]
async fn dropping_the_handle_stops_the_servers_process_group() {
    let Some(entry) = mcp_server("server-everything") else {
        return;
    };
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let mcp = Mcp::start(&agent, [everything(&entry)]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    let pid = mcp.status()[0].pid.unwrap();
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
    assert!(alive());
    drop(mcp);
    assert!(
        eventually(Duration::from_secs(10), || !alive()).await,
        "the server outlived its handle"
    );
    assert!(agent.tools().is_empty());
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// A free loopback port: one the system just gave out.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process started by a test, in its own process group, stopped with it.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// `server-everything` over streamable HTTP on `port`, its output in a
/// file, in its own process group.
fn everything_http(entry: &Path, port: u16) -> Started {
    use std::os::unix::process::CommandExt as _;

    let log = std::env::temp_dir().join(format!("ferrobot-mcp-http-{port}.log"));
    let log = std::fs::File::create(log).unwrap();
    Started(
        std::process::Command::new("node")
            .args([entry.display().to_string(), "streamableHttp".into()])
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap(),
    )
}

#[tokio::test]
async fn an_http_server_started_late_is_usable_from_the_next_turn() {
    let Some(entry) = mcp_server("server-everything") else {
        return;
    };
    let port = free_port();
    let mock = MockProvider::new()
        .then(MockTurn::new().text("no tools yet"))
        .then(MockTurn::new().tool_call("everything__echo", json!({"message": "over http"})))
        .then(MockTurn::new().text("done"));
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = McpServer::http("everything", format!("http://127.0.0.1:{port}/mcp"))
        .header("X-Ferrobot-Test", "1")
        .bearer_token("not-a-real-token")
        .reconnect_delay(Duration::from_millis(200), Duration::from_secs(1));
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_settled(WAIT).await);
    assert!(
        matches!(mcp.status()[0].state, ServerState::Failed(_)),
        "{:?}",
        mcp.status()
    );
    // Nothing waits for it.
    assert_eq!(
        agent.handle("alice", "hi").await.unwrap().text,
        "no tools yet"
    );
    assert!(mock.requests()[0].tools.is_empty());

    let server = everything_http(&entry, port);
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    let reply = agent.handle("alice", "echo").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(results(&mock.requests()[2])[0].content, "Echo: over http");

    // It goes away: the next call fails, the tools turn unavailable, and
    // once it is back they are usable again.
    drop(server);
    mock.push(MockTurn::new().tool_call("everything__echo", json!({"message": "gone?"})));
    mock.push(MockTurn::new().text("it failed"));
    let reply = agent.handle("alice", "echo again").await.unwrap();
    assert_ne!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert!(
        eventually(WAIT, || matches!(
            mcp.status()[0].state,
            ServerState::Reconnecting(_)
        ))
        .await,
        "{:?}",
        mcp.status()
    );
    assert!(
        agent
            .tools()
            .get("everything__echo")
            .unwrap()
            .availability()
            .is_err()
    );
    let _server = everything_http(&entry, port);
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    mock.push(MockTurn::new().tool_call("everything__echo", json!({"message": "back"})));
    mock.push(MockTurn::new().text("done"));
    let reply = agent.handle("alice", "echo once more").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_eq!(results(&mock.requests()[6])[0].content, "Echo: back");
}

#[tokio::test]
async fn filesystem_reads_run_headless_and_writes_ask_as_annotated() {
    let Some(entry) = mcp_server("server-filesystem") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("ferrobot-mcp-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("note.txt"), "remember the milk").unwrap();
    let note = dir.join("note.txt").display().to_string();
    let other = dir.join("other.txt").display().to_string();
    let mock = MockProvider::new()
        .then(
            MockTurn::new()
                .tool_call("files__read_text_file", json!({"path": note}))
                .tool_call("files__write_file", json!({"path": other, "content": "x"})),
        )
        .then(MockTurn::new().text("done"));
    // No confirmation handler: what asks doesn't run.
    let agent = Agent::builder().provider(mock.clone()).build();
    let server = McpServer::stdio("files", "node")
        .args([entry.display().to_string(), dir.display().to_string()]);
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    let reply = agent.handle("alice", "read the note").await.unwrap();
    assert_eq!(reply.tool_calls[0].outcome, ToolOutcome::Ok);
    assert_ne!(reply.tool_calls[1].outcome, ToolOutcome::Ok);
    let sent = results(&mock.requests()[1]);
    assert_eq!(sent[0].content, "remember the milk");
    assert!(
        sent[1]
            .content
            .starts_with("Not run: `files__write_file` needs the user's confirmation"),
        "{}",
        sent[1].content
    );
    assert!(!dir.join("other.txt").exists());
    drop(mcp);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The processes of the process group `pgid` still running (zombies left
/// out), from `/proc`.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                // After the command's name: state, ppid, pgrp, …
                let fields: Vec<&str> = stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str())
            })
        })
        .collect()
}

#[tokio::test]
async fn an_npx_started_server_runs_with_the_minimal_environment_and_stops_whole() {
    if mcp_server("server-everything").is_none() {
        return;
    }
    // `npx` finds the installed package's binary from the install folder,
    // fetching nothing; it starts `node` in turn: two processes, one group.
    let home = ferrobot_testkit::outside::mcp_home();
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .build();
    let server = McpServer::stdio("everything", "npx")
        .args(["--no-install", "mcp-server-everything", "stdio"])
        .cwd(&home);
    let mcp = Mcp::start(&agent, [server]).unwrap();
    assert!(mcp.wait_connected(WAIT).await, "{:?}", mcp.status());
    assert!(agent.tools().get("everything__echo").is_some());
    let pgid = mcp.status()[0].pid.unwrap();
    assert!(!group_members(pgid).is_empty());
    drop(mcp);
    assert!(
        eventually(Duration::from_secs(10), || group_members(pgid).is_empty()).await,
        "left running: {:?}",
        group_members(pgid)
    );
}
