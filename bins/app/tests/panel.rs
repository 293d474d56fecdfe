//! The control panel over real loopback HTTP: the runtime file (0600, port
//! and token), every refusal (no token, another site, another host, a
//! form), status, tools switched live and kept, the config shown without
//! secrets and edited with its comments kept.

#![allow(clippy::unwrap_used)]

// The model server and the config; the turn helpers are the other tests'.
#[allow(dead_code)]
mod support;

use ferrobot::confirm::ConfirmRequest;
use ferrobot_app::panel::{Panel, Runtime};
use reqwest::StatusCode;
use serde_json::{Value, json};

use support::{loaded, server, tempdir};

/// A bot's panel on a free port, its agent, its runtime file's contents,
/// and the directory of its config.
struct Running {
    panel: Option<Panel>,
    agent: ferrobot::Agent,
    runtime: Runtime,
    dir: std::path::PathBuf,
    client: reqwest::Client,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.panel.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Running {
    async fn start(name: &str, extra: &str) -> Self {
        let model = server(Some(32_768)).await;
        let dir = tempdir(name);
        let loaded = loaded(
            &model,
            &dir,
            &format!(
                "[panel]\nport = 0\n[logging]\nfolder = \".\"\n[tools]\nstate_file = \"tool_state.json\"\n{extra}"
            ),
        );
        // The server is kept by leaking it: the panel asks it for health.
        std::mem::forget(model);
        let decline = |_: ConfirmRequest| async { false };
        let notify = |_: String, _: String| async {};
        let agent = loaded.agent(decline, notify).await.unwrap();
        let panel = Panel::start(&loaded, &agent).await;
        let (runtime, _) = Runtime::list(&loaded.runtime_dir()).pop().unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            panel,
            agent,
            runtime,
            dir,
            client: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.runtime.port.unwrap())
    }

    fn token(&self) -> &str {
        self.runtime.token.as_deref().unwrap()
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(self.token())
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(self.token())
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

#[tokio::test]
async fn the_runtime_file_is_the_owners_only_and_gone_when_the_bot_stops() {
    let mut running = Running::start("panel-runtime", "").await;
    let dir = running.dir.join("run");
    let file = running.runtime.path_in(&dir);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(running.runtime.pid, std::process::id());
    assert_eq!(running.runtime.token.as_ref().unwrap().len(), 64);
    let (status, ping) = running.get("/api/ping").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ping["app"], "ferrobot");
    assert_eq!(ping["pid"], std::process::id());
    drop(running.panel.take());
    assert!(!file.exists());
}

#[tokio::test]
async fn calls_without_the_token_from_other_sites_or_hosts_or_as_forms_are_refused() {
    let running = Running::start("panel-guard", "").await;
    let client = &running.client;
    let token = running.token();
    // No token, and a wrong one.
    let none = client.get(running.url("/api/status")).send().await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let body: Value = none.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("ferrobot status"));
    let wrong = client
        .get(running.url("/api/status"))
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // A page of another site posting, even with the token (stolen or not).
    for (header, value) in [
        ("origin", "http://evil.example"),
        ("origin", "http://127.0.0.1:1"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
    ] {
        let response = client
            .post(running.url("/api/tools/disk_usage"))
            .bearer_auth(token)
            .header(header, value)
            .json(&json!({"enabled": false}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::FORBIDDEN,
            "{header}: {value}"
        );
    }
    // A name that resolves to loopback only by a rebinding DNS server.
    let rebound = client
        .get(running.url("/api/ping"))
        .bearer_auth(token)
        .header(
            "host",
            format!("evil.example:{}", running.runtime.port.unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
    // A form, which another site's page may post without asking.
    let form = client
        .post(running.url("/api/tools/disk_usage"))
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("enabled=false")
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        running.agent.tools().is_enabled("disk_usage"),
        "nothing changed"
    );
    // The page itself holds nothing secret, and is never framed.
    let page = client.get(running.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert!(page.text().await.unwrap().contains("/api/status"));
}

#[tokio::test]
async fn status_says_uptime_model_health_turns_and_problems() {
    let running = Running::start("panel-status", "").await;
    running.agent.handle("c", "hi").await.unwrap();
    let (status, body) = running.get("/api/status").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["pid"], std::process::id());
    assert!(body["uptime_secs"].as_u64().is_some());
    assert_eq!(body["model"]["reachable"], true);
    assert_eq!(body["model"]["model"], "m");
    assert_eq!(body["turns"]["turns"], 1);
    assert_eq!(body["turns"]["failed"], 0);
    assert!(body["problems"].is_array());
}

#[tokio::test]
async fn a_tool_switched_off_is_hidden_at_once_and_stays_off() {
    let running = Running::start("panel-tools", "").await;
    let (_, tools) = running.get("/api/tools").await;
    let disk = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "disk_usage")
        .unwrap();
    assert_eq!(disk["enabled"], true);
    let (status, body) = running
        .post("/api/tools/disk_usage", json!({"enabled": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!running.agent.tools().is_enabled("disk_usage"));
    let (_, tools) = running.get("/api/tools").await;
    assert!(
        tools
            .to_string()
            .contains(r#""enabled":false,"name":"disk_usage""#),
        "{tools}"
    );
    // Kept in the tool state file, which a restart reads.
    let state = ferrobot_app::ToolState::load(&running.dir.join("tool_state.json")).unwrap();
    assert!(state.is_disabled("disk_usage"));
    let (status, body) = running
        .post("/api/tools/no_such_tool", json!({"enabled": false}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "no tool named `no_such_tool`");
    let (status, _) = running
        .post("/api/tools/memory", json!({"on": false}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn the_config_is_shown_without_secrets_and_edited_with_its_comments_kept() {
    let running = Running::start(
        "panel-config",
        "# The assistant.\n[agent]\nmax_tool_rounds = 4 # keep it short\n\n[telegram]\ntoken = \"123456:SECRET-token\"\n",
    )
    .await;
    let (status, config) = running.get("/api/config").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!config.to_string().contains("SECRET-token"), "{config}");
    let token = config["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["key"] == "telegram.token")
        .unwrap();
    assert_eq!(token["value"], "[redacted]");
    assert!(config["live"].as_str().unwrap().contains("next start"));
    let file = running.dir.join("ferrobot.toml");
    let (status, edited) = running
        .post(
            "/api/config",
            json!({"key": "agent.max_tool_rounds", "value": 12}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["key"], "agent.max_tool_rounds");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("# The assistant.\n[agent]\nmax_tool_rounds = 12 # keep it short\n"),
        "{text}"
    );
    // Refused, the file unchanged: a bad value, an unknown key, a secret.
    for (key, value, says) in [
        ("agent.max_tool_rounds", json!("many"), "max_tool_rounds"),
        ("agent.max_tool_roundz", json!(3), "max_tool_roundz"),
        ("telegram.token", json!("x"), "FERROBOT_TELEGRAM__TOKEN"),
    ] {
        let (status, body) = running
            .post("/api/config", json!({"key": key, "value": value}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{key}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[tokio::test]
async fn a_taken_port_skips_the_panel_but_not_the_runtime_file() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let model = server(None).await;
    let dir = tempdir("panel-taken");
    let loaded = loaded(
        &model,
        &dir,
        &format!(
            "[panel]\nport = {port}\n[logging]\nfolder = \".\"\n[tools]\nstate_file = \"tool_state.json\"\n"
        ),
    );
    let agent = loaded
        .agent(
            |_: ConfirmRequest| async { false },
            |_: String, _: String| async {},
        )
        .await
        .unwrap();
    let panel = Panel::start(&loaded, &agent).await.unwrap();
    assert_eq!(panel.port, None);
    let (runtime, _) = Runtime::list(&loaded.runtime_dir()).pop().unwrap();
    assert_eq!((runtime.port, runtime.token), (None, None));
    drop(panel);
    let _ = std::fs::remove_dir_all(&dir);
}
