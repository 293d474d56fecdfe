//! The control panel of the running binary, in a real browser: headless
//! Chromium (Debian's `chromium` and `chromium-driver`, which `.ci/run`
//! installs) opens the address with the token, the page loads, a tool is
//! switched off, and the bot stops offering it to the model.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{ClientBuilder, Locator};
use ferrobot_app::panel::Runtime;
use ferrobot_testkit::{Home, llm, text_answer};
use serde_json::{Value, json};

use crate::support::{ANN, BIN, FakeBotApi, binary_env, runtime};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// chromedriver on a free port, stopped when dropped.
async fn chromedriver(profile: &Path) -> (tokio::process::Child, fantoccini::Client) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let driver = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            // As root in CI: no sandbox. No calls home: the machine has no
            // network, and each would fail slowly.
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-quic",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        if let Ok(client) = ClientBuilder::new(connector)
            .capabilities(capabilities.clone())
            .connect(&url)
            .await
        {
            return (driver, client);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not start a Chromium session");
}

#[tokio::test]
async fn a_tool_switched_off_in_the_browser_is_no_longer_offered() {
    if !Path::new(CHROMEDRIVER).exists() {
        // CI installs them (.ci/run); a test that can't meet its browser
        // fails there rather than passing silently.
        assert!(
            std::env::var_os("CI").is_none(),
            "{CHROMEDRIVER} is missing: apt-get install -y chromium chromium-driver"
        );
        eprintln!("skipped: no {CHROMEDRIVER} (apt-get install -y chromium chromium-driver)");
        return;
    }
    let (api, server) = FakeBotApi::start().await;
    let model = llm(vec![text_answer("First."), text_answer("Second.")]).await;
    let home = Home::new("telegram-panel");
    let mut bot = home
        .command(BIN, &binary_env(&server, &model))
        .spawn()
        .unwrap();
    api.wait_for("SetMyCommands", |_| true).await;
    api.text(ANN, ANN as i64, "first");
    api.wait_for_reply(0, |c| c["text"] == r"First\.").await;
    let offered = |n: usize| {
        let model = &model;
        async move {
            let asked = &ferrobot_testkit::chat_requests(model).await[n];
            let body: Value = serde_json::from_slice(&asked.body).unwrap();
            body["tools"].to_string()
        }
    };
    assert!(offered(0).await.contains("\"disk_usage\""));

    let runtime = runtime(&home).await;
    let profile = home.path().join("chromium");
    let (_driver, browser) = chromedriver(&profile).await;
    let address = format!(
        "http://127.0.0.1:{}/#token={}",
        runtime.port.unwrap(),
        runtime.token.as_deref().unwrap()
    );
    browser.goto(&address).await.unwrap();
    browser
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("body[data-loaded=yes]"))
        .await
        .unwrap();
    // The token left the address bar once read.
    assert!(
        !browser
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("token")
    );
    let title = browser.find(Locator::Id("title")).await.unwrap();
    assert!(title.text().await.unwrap().starts_with("ferrobot-telegram"));
    let switch = browser.find(Locator::Id("tool-disk_usage")).await.unwrap();
    assert_eq!(
        switch.prop("checked").await.unwrap().as_deref(),
        Some("true")
    );
    switch.click().await.unwrap();
    let said = browser.find(Locator::Id("message")).await.unwrap();
    for _ in 0..500 {
        if said.text().await.unwrap() == "disk_usage is off." {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(said.text().await.unwrap(), "disk_usage is off.");
    browser.close().await.unwrap();

    // The next turn is offered every tool but that one.
    api.text(ANN, ANN as i64, "second");
    api.wait_for_reply(0, |c| c["text"] == r"Second\.").await;
    let tools = offered(1).await;
    assert!(!tools.contains("\"disk_usage\""), "{tools}");
    assert!(tools.contains("\"memory\""), "{tools}");
    // Stopped as a service manager stops it, it takes its runtime file along.
    let term = std::process::Command::new("kill")
        .args(["-TERM", &bot.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert!(bot.wait().await.unwrap().success());
    assert!(Runtime::list(&home.path().join("data/ferrobot/run")).is_empty());
}
