//! Proxies named by the environment, as a program behind one meets them:
//! the variables are set for a child process (this test binary, running
//! [`proxied_in_this_process`]), and scripted loopback servers play the
//! proxies and a server reached directly, keeping what each was sent.

use std::time::Duration;

use ferrobot::Message;
use ferrobot::provider::{OpenAiCompatible, RetryPolicy};
use ferrobot::testing::text_sse;
use ferrobot_testkit::fault::{FaultServer, Script};

use crate::support::assemble;

/// The direct server's URL, for the child.
const DIRECT: &str = "FERROBOT_TEST_DIRECT_URL";

fn provider(url: &str) -> OpenAiCompatible {
    OpenAiCompatible::new(url)
        .model("m")
        .retry(RetryPolicy::none())
        .timeouts(Duration::from_secs(5), Duration::from_secs(5))
}

fn hello() -> Script {
    Script::http(200, "text/event-stream", text_sse("Hello."))
}

/// What `server` was sent, each request as text.
fn sent(server: &FaultServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|request| String::from_utf8_lossy(request).into_owned())
        .collect()
}

#[tokio::test]
async fn requests_go_through_the_proxies_the_environment_names() {
    let http_proxy = FaultServer::start([hello()]).await;
    let https_proxy = FaultServer::start([Script::http(407, "text/plain", "")]).await;
    let direct = FaultServer::start([hello()]).await;
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
    child
        .args([
            "proxy::proxied_in_this_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(
            "HTTP_PROXY",
            format!("http://me:s%40id@{}", http_proxy.addr()),
        )
        .env(
            "HTTPS_PROXY",
            format!("http://me:pw@{}", https_proxy.addr()),
        )
        .env("NO_PROXY", "127.0.0.1")
        .env(DIRECT, direct.url());
    // Only what is set here: not the lowercase names, nor a CGI request's.
    for name in [
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "no_proxy",
        "REQUEST_METHOD",
    ] {
        child.env_remove(name);
    }
    // Waited for off the runtime, which serves the proxies meanwhile.
    let output = tokio::task::spawn_blocking(move || child.output())
        .await
        .expect("the wait ends")
        .expect("the child test runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran no test: {text}");

    // An `http` server is asked for from its proxy by its whole URL.
    let [request] = &sent(&http_proxy)[..] else {
        panic!("{:?}", sent(&http_proxy));
    };
    assert!(
        request.starts_with("POST http://model.invalid:8080/v1/chat/completions HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("\r\nhost: model.invalid:8080\r\n"),
        "{request}"
    );
    // me:s@id
    assert!(
        request.contains("\r\nproxy-authorization: Basic bWU6c0BpZA==\r\n"),
        "{request}"
    );
    assert!(request.contains("\r\nuser-agent: ferrobot/"), "{request}");
    // An `https` one through a tunnel its proxy opens (refused here).
    let [tunnel] = &sent(&https_proxy)[..] else {
        panic!("{:?}", sent(&https_proxy));
    };
    assert!(
        tunnel.starts_with("CONNECT model.invalid:443 HTTP/1.1\r\n"),
        "{tunnel}"
    );
    assert!(
        tunnel.contains("\r\nproxy-authorization: Basic bWU6cHc=\r\n"),
        "{tunnel}"
    );
    assert!(tunnel.contains("\r\nuser-agent: ferrobot/"), "{tunnel}");
    // A host `NO_PROXY` names is reached directly.
    let [request] = &sent(&direct)[..] else {
        panic!("{:?}", sent(&direct));
    };
    assert!(
        request.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(!request.contains("proxy-authorization"), "{request}");
}

#[tokio::test]
#[ignore = "run by requests_go_through_the_proxies_the_environment_names, with the proxies set"]
async fn proxied_in_this_process() {
    let direct = std::env::var(DIRECT)
        .expect("run by requests_go_through_the_proxies_the_environment_names");
    let messages = [Message::user("hi")];
    let answer = assemble(&provider("http://model.invalid:8080/v1"), &messages)
        .await
        .expect("the answer, through the proxy");
    assert_eq!(answer.message.text(), "Hello.");
    let error = assemble(&provider("https://model.invalid/v1"), &messages)
        .await
        .expect_err("the proxy refuses the tunnel");
    let text = error.chain();
    assert!(
        text.contains("https://model.invalid/v1/chat/completions")
            && text.contains("proxy authorization required"),
        "{text}"
    );
    let answer = assemble(&provider(&format!("{direct}/v1")), &messages)
        .await
        .expect("the answer, directly");
    assert_eq!(answer.message.text(), "Hello.");
}
