//! The `ferrobot` binary, run for real against a loopback model server.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use ferrobot::testing::{OpenAiStream, text_sse};
use ferrobot_testkit::{Home, llm};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The `ferrobot` binary in `home`, its terminal output at the CLI's own
/// level (warnings), not the `info` the bots' tests read.
fn command(home: &Home, env: &[(&str, String)]) -> Command {
    let mut command = home.std_command(env!("CARGO_BIN_EXE_ferrobot"), env);
    command.env_remove("FERROBOT_LOG");
    // The tests count the model server's requests: the context window is
    // not asked of it (`bins/app/tests/context.rs` tests that).
    command.env("FERROBOT_CONTEXT__WINDOW", "32768");
    command
}

/// `ferrobot ARGS` in `home`, run to the end.
fn ferrobot(home: &Home, args: &[&str]) -> Output {
    ferrobot_with_env(home, args, &[])
}

fn ferrobot_with_env(home: &Home, args: &[&str], env: &[(&str, String)]) -> Output {
    command(home, env).args(args).output().unwrap()
}

/// The chat (`ferrobot` with no command) against the model at `url`, fed
/// `input` on a pipe, run to the end.
fn chat(home: &Home, url: &str, input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = command(home, &[])
        .args(["--base-url", url, "--model", "m"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A model server that asks for one tool call, then answers `answer` once
/// the tool's result comes back.
async fn tool_round_server(
    tool: &'static str,
    arguments: serde_json::Value,
    answer: &'static str,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |request: &wiremock::Request| {
            let body = String::from_utf8_lossy(&request.body);
            let sse = if body.contains(r#""role":"tool""#) {
                text_sse(answer)
            } else {
                ferrobot::testing::tool_call_sse("c1", tool, &arguments)
            };
            ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
        })
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn run_prints_the_answer_and_remembers_the_conversation() {
    let home = Home::new("cli-run");
    let server = llm(vec![text_sse("You have 42 GB free."); 2]).await;
    let url = format!("{}/v1", server.uri());
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "test",
            "run",
            "how much disk space is left?",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "You have 42 GB free.\n");

    let second = ferrobot(
        &home,
        &["--base-url", &url, "--model", "test", "run", "and now?"],
    );
    assert!(second.status.success());
    let requests = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    let sent: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        &sent[1..],
        [
            "how much disk space is left?",
            "You have 42 GB free.",
            "and now?"
        ]
    );

    let list = ferrobot(&home, &["history", "list"]);
    assert!(
        stdout(&list).starts_with("cli\t4 messages\thow much disk space is left?"),
        "{}",
        stdout(&list)
    );
    let search = ferrobot(&home, &["history", "search", "disk"]);
    assert!(
        stdout(&search).contains("cli#0\thow much [disk] space is left?"),
        "{}",
        stdout(&search)
    );
    let shown = ferrobot(&home, &["history", "show", "cli"]);
    assert_eq!(
        stdout(&shown),
        "#0\tyou: how much disk space is left?\n#1\tassistant: You have 42 GB free.\n\
         #2\tyou: and now?\n#3\tassistant: You have 42 GB free.\n"
    );
    let missing = ferrobot(&home, &["history", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no conversation `nope`"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test]
async fn run_json_prints_one_event_per_line() {
    let home = Home::new("cli-json");
    let body = OpenAiStream::new()
        .reasoning("hmm")
        .text("Hello")
        .text(" there")
        .finish("stop")
        .usage(3, 2)
        .into_sse();
    let server = llm(vec![body]).await;
    let url = format!("{}/v1", server.uri());
    let output = ferrobot(
        &home,
        &["--base-url", &url, "--model", "test", "run", "--json", "hi"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "text", "text", "usage", "done"]);
    assert_eq!(events[4]["text"], "Hello there");
    assert_eq!(events[3]["input_tokens"], 3);
}

/// Writes `schema` to a file in `home`, for `--output-schema`.
fn schema_file(home: &Home, schema: &serde_json::Value) -> String {
    let path = home.path().join("schema.json");
    std::fs::write(&path, schema.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// A schema with nested objects, arrays, enums and integer ranges.
fn forecast_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "sky": {"enum": ["sunny", "cloudy", "rain"]},
                    "celsius": {"type": "integer", "minimum": -30, "maximum": 45}
                },
                "required": ["sky", "celsius"]
            }, "minItems": 1, "maxItems": 3}
        },
        "required": ["city", "days"]
    })
}

#[tokio::test]
async fn run_output_schema_prints_one_checked_json_value() {
    let home = Home::new("cli-typed");
    let answer = r#"{"city": "Oslo", "days": [{"sky": "rain", "celsius": 7}]}"#;
    // Tools are offered first; the typed answer is asked for without them.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |request: &wiremock::Request| {
            let body = String::from_utf8_lossy(&request.body);
            let sse = if body.contains("response_format") {
                text_sse(answer)
            } else {
                text_sse("Rain all day, 7 degrees.")
            };
            ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
        })
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let schema = schema_file(&home, &forecast_schema());
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--output-schema",
            &schema,
            "Oslo?",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let printed: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        printed,
        serde_json::from_str::<serde_json::Value>(answer).unwrap()
    );
    assert_eq!(stdout(&output).lines().count(), 1);

    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2, "a tool round, then the typed answer");
    let first: serde_json::Value = requests[0].body_json().unwrap();
    let last: serde_json::Value = requests[1].body_json().unwrap();
    assert!(first.get("tools").is_some() && first.get("response_format").is_none());
    assert!(last.get("tools").is_none());
    assert_eq!(last["response_format"]["json_schema"]["strict"], true);
}

#[tokio::test]
async fn run_output_schema_says_why_no_answer_fits_and_exits_1() {
    let home = Home::new("cli-typed-bad");
    let server = llm(vec![text_sse(r#"{"city": "Oslo"}"#); 4]).await;
    let url = format!("{}/v1", server.uri());
    let schema = schema_file(&home, &forecast_schema());
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--output-schema",
            &schema,
            "Oslo?",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("`days` is missing"),
        "{}",
        stderr(&output)
    );

    let map = serde_json::json!({"type": "object", "additionalProperties": {"type": "integer"}});
    let unportable = schema_file(&home, &map);
    let refused = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--output-schema",
            &unportable,
            "x",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("a map with free keys"),
        "{}",
        stderr(&refused)
    );
}

/// The first bytes of a PNG file: enough for ferrobot to know the format.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// The images of the last user message a request sent, as data URIs.
fn sent_images(request: &wiremock::Request) -> Vec<String> {
    let body: serde_json::Value = request.body_json().unwrap();
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    user["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["image_url"]["url"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn run_image_sends_the_file_with_the_prompt() {
    let home = Home::new("cli-image");
    let server = llm(vec![text_sse("A login page.")]).await;
    let url = format!("{}/v1", server.uri());
    let shot = home.path().join("shot.png");
    std::fs::write(&shot, PNG).unwrap();
    let shot = shot.to_string_lossy().into_owned();
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--image",
            &shot,
            "what is this?",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "A login page.\n");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        sent_images(&requests[0]),
        ["data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="]
    );

    let notes = home.path().join("notes.txt");
    std::fs::write(&notes, "not an image").unwrap();
    let refused = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--image",
            &notes.to_string_lossy(),
            "x",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("not a PNG, JPEG, GIF or WebP image"),
        "{}",
        stderr(&refused)
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_friendly_error_and_exit_code_1() {
    let home = Home::new("cli-down");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let output = ferrobot(&home, &["--base-url", &url, "run", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("LLM unavailable: gave up after 3 attempts"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("slash commands still work"));
    // Slash commands don't need the model.
    let slash = ferrobot(&home, &["--base-url", &url, "run", "/uptime"]);
    assert!(slash.status.success(), "{}", stderr(&slash));
    assert!(stdout(&slash).starts_with("up "), "{}", stdout(&slash));
    let doctor = ferrobot(&home, &["--base-url", &url, "doctor"]);
    assert_eq!(doctor.status.code(), Some(3));
    assert!(
        stdout(&doctor).contains("status:  unreachable"),
        "{}",
        stdout(&doctor)
    );
}

#[test]
fn config_check_shows_each_value_and_its_source() {
    let home = Home::new("cli-config");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[llm]\nmodel = \"llama3.2\"\napi_key = \"sk-hidden\"\n\
         [telegram]\ntoken = \"123456:TG-hidden\"\nwebhook_secret = \"hook-hidden\"\n\
         [discord]\ntoken = \"MTA5.discord-hidden\"\n",
    )
    .unwrap();
    let output = ferrobot(
        &home,
        &["--base-url", "http://gpu:8000/v1", "config", "check"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("llm.model = llama3.2    # TOML file"),
        "{text}"
    );
    assert!(
        text.contains("llm.base_url = http://gpu:8000/v1    # command-line flag"),
        "{text}"
    );
    assert!(text.contains("llm.api_key = [redacted]"), "{text}");
    let everything = format!("{text}{}", stderr(&output));
    for secret in ["sk-hidden", "TG-hidden", "hook-hidden", "discord-hidden"] {
        assert!(!everything.contains(secret), "{secret}: {everything}");
    }
}

#[test]
fn a_bad_config_exits_2_naming_the_problem() {
    let home = Home::new("cli-badconfig");
    std::fs::write(home.path().join("ferrobot.toml"), "[llm]\nmodle = \"x\"\n").unwrap();
    let output = ferrobot(&home, &["config", "check"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown field: found `modle`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn tools_can_be_listed_disabled_and_enabled() {
    let home = Home::new("cli-tools");
    let list = stdout(&ferrobot(&home, &["tools"]));
    assert!(
        list.lines()
            .any(|l| l.starts_with("disk_usage") && l.contains("enabled")),
        "{list}"
    );
    let off = ferrobot(&home, &["disable", "disk_usage"]);
    assert!(off.status.success(), "{}", stderr(&off));
    let list = stdout(&ferrobot(&home, &["tools"]));
    assert!(
        list.lines()
            .any(|l| l.starts_with("disk_usage") && l.contains("disabled")),
        "{list}"
    );
    assert!(ferrobot(&home, &["enable", "disk_usage"]).status.success());
    assert!(
        stdout(&ferrobot(&home, &["tools"]))
            .lines()
            .any(|l| l.starts_with("disk_usage") && l.contains(" enabled"))
    );
    let unknown = ferrobot(&home, &["disable", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("no tool named `nope`; the tools are: disk_usage"),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test]
async fn a_tool_round_runs_a_system_tool_and_disabled_tools_are_not_offered() {
    let home = Home::new("cli-toolround");
    let server = tool_round_server("uptime", serde_json::json!({}), "Up and running.").await;
    let url = format!("{}/v1", server.uri());
    assert!(ferrobot(&home, &["disable", "memory"]).status.success());
    let output = ferrobot(
        &home,
        &["--base-url", &url, "--model", "m", "run", "is it up?"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Up and running.\n");
    assert!(
        stderr(&output).contains("→ uptime({})"),
        "{}",
        stderr(&output)
    );
    let requests = server.received_requests().await.unwrap();
    let first: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"uptime") && !offered.contains(&"memory"),
        "{offered:?}"
    );
    let second: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        result["content"].as_str().unwrap().starts_with("up "),
        "{result}"
    );
}

#[tokio::test]
async fn a_budget_from_the_config_withdraws_the_tools_once_used_up() {
    let home = Home::new("cli-budget");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &wiremock::Request| {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let sse = if body.get("tools").is_some() {
                ferrobot::testing::tool_call_sse("c1", "uptime", &serde_json::json!({}))
            } else {
                text_sse("Up, from what I saw.")
            };
            ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
        })
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let output = ferrobot_with_env(
        &home,
        &["--base-url", &url, "--model", "m", "run", "is it up?"],
        &[("FERROBOT_AGENT__BUDGET_TOOL_OUTPUT_BYTES", "1".into())],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Up, from what I saw.\n");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2, "one tool round, then the answer");
}

#[tokio::test]
async fn command_tools_from_the_tools_file_are_offered_and_ask_before_running() {
    let home = Home::new("cli-commandtools");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[tools]\nfile = \"my-tools.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("my-tools.toml"),
        r#"
            [[tool]]
            name = "say"
            description = "Say something."
            command = ["echo", "{text}"]
            confirm = "Say {text}?"
            [tool.params.text]
            type = "string"
            required = true
        "#,
    )
    .unwrap();
    assert!(
        stdout(&ferrobot(&home, &["tools"]))
            .lines()
            .any(|l| l.starts_with("say"))
    );
    // A tools-file tool is switched off and on like a system tool.
    let off = ferrobot(&home, &["disable", "say"]);
    assert!(off.status.success(), "{}", stderr(&off));
    assert!(
        stdout(&ferrobot(&home, &["tools"]))
            .lines()
            .any(|l| l.starts_with("say") && l.contains("disabled"))
    );
    assert!(ferrobot(&home, &["enable", "say"]).status.success());
    let server = tool_round_server(
        "say",
        serde_json::json!({"text": "hello; rm -rf /"}),
        "Said.",
    )
    .await;
    let url = format!("{}/v1", server.uri());
    // Without --yes the tool is declined.
    let declined = ferrobot(
        &home,
        &["--base-url", &url, "--model", "m", "run", "say hello"],
    );
    assert!(
        stderr(&declined).contains("[declined] Say hello; rm -rf /?"),
        "{}",
        stderr(&declined)
    );
    let tool_message = |request: &wiremock::Request| {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap()["content"]
            .clone()
    };
    let requests = server.received_requests().await.unwrap();
    assert_eq!(tool_message(&requests[1]), "Cancelled by user.");
    // With --yes it runs, and the text stays one argument.
    let approved = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "run",
            "--yes",
            "--new",
            "say hello",
        ],
    );
    assert!(approved.status.success(), "{}", stderr(&approved));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        tool_message(&requests[3]),
        "exit status 0\nhello; rm -rf /\n"
    );
}

#[tokio::test]
async fn the_chat_reads_piped_lines_and_asks_before_tools_that_want_it() {
    let home = Home::new("cli-chat");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[tools]\nfile = \"t.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("t.toml"),
        "[[tool]]\nname = \"say\"\ndescription = \"Say.\"\ncommand = [\"echo\", \"{text}\"]\nconfirm = true\n[tool.params.text]\ntype = \"string\"\nrequired = true\n",
    )
    .unwrap();
    let server = tool_round_server("say", serde_json::json!({"text": "hi"}), "Done saying.").await;
    let url = format!("{}/v1", server.uri());
    // The question, the answer to the confirmation, then quit.
    let output = chat(&home, &url, b"say hi please\ny\nexit\n");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Done saying."),
        "{}",
        stdout(&output)
    );
    // The chat probes the server first (GET /models); the turn's requests follow.
    let requests: Vec<_> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST")
        .collect();
    let body: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    let result = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(result["content"], "exit status 0\nhi\n");
    assert!(
        home.path()
            .join("data/ferrobot/input_history.txt")
            .is_file()
    );
}

#[tokio::test]
async fn image_in_the_chat_goes_with_the_next_message() {
    let home = Home::new("cli-chat-image");
    let server = llm(vec![text_sse("A cat."), text_sse("Yes.")]).await;
    let url = format!("{}/v1", server.uri());
    let photo = home.path().join("cat.png");
    std::fs::write(&photo, PNG).unwrap();
    let input = format!(
        ":image {}\n:image missing.png\nwhat is this?\nsure?\n",
        photo.display()
    );
    let output = chat(&home, &url, input.as_bytes());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("Attached"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("could not read the image missing.png"),
        "{}",
        stderr(&output)
    );
    // The chat's model calls, not its health probe.
    let requests: Vec<_> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path().ends_with("/chat/completions"))
        .collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(sent_images(&requests[0]).len(), 1);
    // Only the next message: the one after has none of its own.
    let second: serde_json::Value = requests[1].body_json().unwrap();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "sure?");
}

#[tokio::test]
async fn new_in_the_chat_starts_a_fresh_conversation() {
    let home = Home::new("cli-chat-new");
    let server = llm(vec![text_sse("Hello."), text_sse("Hello again.")]).await;
    let url = format!("{}/v1", server.uri());
    let output = chat(
        &home,
        &url,
        b"first question\n/new\nsecond question\nexit\n",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Started a fresh conversation (cli-"),
        "{}",
        stderr(&output)
    );
    let posts: Vec<serde_json::Value> = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(posts.len(), 2, "/new never reaches the model");
    let said = |body: &serde_json::Value| -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(said(&posts[1]), ["second question"], "a fresh conversation");
    // Both conversations are kept.
    let listed = ferrobot(&home, &["history", "list"]);
    assert_eq!(stdout(&listed).lines().count(), 2, "{}", stdout(&listed));
}

/// Turns in the chat run one after another, so `/stop` between them finds
/// nothing to stop (Ctrl-C stops the one in progress) and never reaches
/// the model.
#[tokio::test]
async fn stop_in_the_chat_says_nothing_is_running() {
    let home = Home::new("cli-chat-stop");
    let server = llm(vec![text_sse("Hello.")]).await;
    let url = format!("{}/v1", server.uri());
    let output = chat(
        &home,
        &url,
        b"/stop
hi
exit
",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Nothing is running."),
        "{}",
        stdout(&output)
    );
    let posts = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.method.as_str() == "POST")
        .count();
    assert_eq!(posts, 1, "/stop never reaches the model");
}

/// One `ferrobot run` against the real llama.cpp server of
/// `../shared/realserver`: its tiny model calls one of the system tools,
/// then answers from the result.
#[test]
fn run_against_a_real_llama_cpp_server() {
    let Some(server) = ferrobot_testkit::realserver::RealServer::shared() else {
        return;
    };
    let home = Home::new("cli-real");
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &server.base_url(),
            "--model",
            server.model(),
            "run",
            "--json",
            "how is the machine?",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"tool_call"), "{kinds:?}");
    assert!(kinds.contains(&"tool_result"), "{kinds:?}");
    let done = events.iter().find(|e| e["type"] == "done").unwrap();
    assert_eq!(
        done["text"].as_str().unwrap().trim(),
        "The weather is sunny."
    );
}

/// `--output-schema` against the real llama.cpp server: its grammar keeps
/// the tiny model's answer inside a schema with nested objects, arrays,
/// enums and integer ranges; the tool round comes first.
#[test]
fn run_output_schema_against_a_real_llama_cpp_server() {
    let Some(server) = ferrobot_testkit::realserver::RealServer::shared() else {
        return;
    };
    let home = Home::new("cli-real-typed");
    let schema = schema_file(&home, &forecast_schema());
    let base = [
        "--base-url",
        &server.base_url(),
        "--model",
        server.model(),
        "run",
    ];
    let output = ferrobot(
        &home,
        &[
            &base[..],
            &["--json", "--output-schema", &schema, "how is the machine?"],
        ]
        .concat(),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let (call, done) = (
        kinds.iter().position(|k| *k == "tool_call"),
        kinds.iter().position(|k| *k == "done"),
    );
    assert!(call.is_some() && call < done, "{kinds:?}");
    let value = &events[done.unwrap()]["output"];
    assert_fits_forecast(value);

    // Without --json: exactly one JSON value on stdout.
    let plain = ferrobot(
        &home,
        &[
            &base[..],
            &["--new", "--output-schema", &schema, "and Oslo?"],
        ]
        .concat(),
    );
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert_fits_forecast(&serde_json::from_str(&stdout(&plain)).unwrap());
}

fn assert_fits_forecast(value: &serde_json::Value) {
    assert!(value["city"].is_string(), "{value}");
    let days = value["days"].as_array().unwrap();
    assert!((1..=3).contains(&days.len()), "{value}");
    for day in days {
        assert!(
            ["sunny", "cloudy", "rain"].contains(&day["sky"].as_str().unwrap()),
            "{value}"
        );
        assert!(
            (-30..=45).contains(&day["celsius"].as_i64().unwrap()),
            "{value}"
        );
    }
}

#[tokio::test]
async fn each_turn_is_traced_as_one_json_line_and_logged() {
    let home = Home::new("cli-trace");
    let server = llm(vec![text_sse("Fine.")]).await;
    let url = format!("{}/v1", server.uri());
    assert!(
        ferrobot(
            &home,
            &["--base-url", &url, "--model", "m", "run", "all good?"]
        )
        .status
        .success()
    );
    assert!(
        ferrobot(
            &home,
            &["--base-url", &url, "--model", "m", "run", "/uptime"]
        )
        .status
        .success()
    );
    let traces = std::fs::read_to_string(home.path().join("data/ferrobot/traces.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = traces
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["prompt"], "all good?");
    assert_eq!(records[0]["reply"], "Fine.");
    assert_eq!(records[0]["model_calls"][0]["input_tokens"], 10);
    assert_eq!(records[1]["tool_calls"][0]["name"], "uptime");
    assert!(records[1]["tool_calls"][0]["duration_ms"].is_u64());
    let logs = std::fs::read_dir(home.path().join("data/ferrobot/logs"))
        .unwrap()
        .count();
    assert_eq!(logs, 1, "one daily log file");
}

/// The chat in a real pseudo-terminal: the answer rendered as it streams, a
/// confirmation answered, Ctrl-C cancelling a slow turn, then `exit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_in_a_terminal() {
    use expectrl::{ControlCode, Expect, Session};
    use std::time::Duration;
    let home = Home::new("cli-pty");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[tools]\nfile = \"t.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join("t.toml"),
        "[[tool]]\nname = \"say\"\ndescription = \"Say.\"\ncommand = [\"echo\", \"{text}\"]\nconfirm = \"Say {text}?\"\n[tool.params.text]\ntype = \"string\"\nrequired = true\n",
    )
    .unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|request: &wiremock::Request| {
            let body = String::from_utf8_lossy(&request.body);
            let last_user = body.rfind(r#""role":"user""#).unwrap_or(0);
            if body[last_user..].contains("say it")
                && !body[last_user..].contains(r#""role":"tool""#)
            {
                let sse = ferrobot::testing::tool_call_sse(
                    "c2",
                    "say",
                    &serde_json::json!({"text": "hello"}),
                );
                ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
            } else if body[last_user..].contains("say it") {
                ResponseTemplate::new(200).set_body_raw(text_sse("I said it."), "text/event-stream")
            } else if body[last_user..].contains("slow please") {
                ResponseTemplate::new(200)
                    .set_delay(Duration::from_secs(30))
                    .set_body_raw(text_sse("too late"), "text/event-stream")
            } else if body.contains(r#""role":"tool""#) {
                ResponseTemplate::new(200)
                    .set_body_raw(text_sse("The machine is **up**."), "text/event-stream")
            } else {
                let sse = ferrobot::testing::tool_call_sse("c1", "uptime", &serde_json::json!({}));
                ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
            }
        })
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let mut command = command(&home, &[("TERM", "xterm".into())]);
    command.args(["--base-url", &url, "--model", "m"]);
    let transcript = tokio::task::spawn_blocking(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(Duration::from_secs(15)));
        session.expect("› ").unwrap();
        session.send_line("is it up?").unwrap();
        session.expect("→ uptime").unwrap();
        // The bold text arrives rendered, without its asterisks.
        let answer = session.expect("› ").unwrap();
        let answer = String::from_utf8_lossy(answer.before()).into_owned();
        assert!(answer.contains("The machine is"), "{answer:?}");
        assert!(
            !answer.contains("**up**"),
            "Markdown was not rendered: {answer:?}"
        );
        session.send_line("say it").unwrap();
        session.expect("Say hello?").unwrap();
        // `[y/n/a]`, or `[y/N]` once a command tool is approved one call at a time.
        session.expect("[y/").unwrap();
        session.send_line("y").unwrap();
        session.expect("I said it.").unwrap();
        session.expect("› ").unwrap();
        session.send_line("slow please").unwrap();
        // Once the turn is under way (however slowly the machine got there).
        session.expect("Thinking").unwrap();
        session.send(ControlCode::EndOfText).unwrap();
        session.expect("Cancelled.").unwrap();
        session.expect("› ").unwrap();
        session.send_line("exit").unwrap();
        session.expect(expectrl::Eof).unwrap();
    })
    .await;
    transcript.unwrap();
    let stored = std::fs::read_to_string(home.path().join("data/ferrobot/traces.jsonl")).unwrap();
    assert!(stored.contains(r#""error":"turn cancelled""#), "{stored}");
}

#[tokio::test]
async fn the_ollama_dialect_is_chosen_by_name() {
    let home = Home::new("cli-ollama");
    let server = MockServer::start().await;
    let line = serde_json::json!({"message": {"role": "assistant", "content": "Native hello."}, "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 2});
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(format!("{line}\n"), "application/x-ndjson"),
        )
        .mount(&server)
        .await;
    // A base URL ending in /v1 (the OpenAI-compatible default) still finds /api/chat.
    let url = format!("{}/v1", server.uri());
    let output = ferrobot(
        &home,
        &[
            "--provider",
            "ollama",
            "--base-url",
            &url,
            "--model",
            "llama3.2",
            "run",
            "hi",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Native hello.\n");
}

#[tokio::test]
async fn the_anthropic_dialect_takes_its_key_from_the_environment() {
    let home = Home::new("cli-anthropic");
    let server = MockServer::start().await;
    let events = [
        serde_json::json!({"type": "message_start", "message": {"usage": {"input_tokens": 4, "output_tokens": 0}}}),
        serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Claude says hi."}}),
        serde_json::json!({"type": "content_block_stop", "index": 0}),
        serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        serde_json::json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(wiremock::matchers::header("x-api-key", "sk-ant-from-env"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    std::fs::write(
        home.path().join("anthropic.toml"),
        "[llm]\napi_key_env = \"FERROBOT_TEST_ANTHROPIC_KEY\"\ntemperature = 0.25\n",
    )
    .unwrap();
    let config = home.path().join("anthropic.toml");
    let output = ferrobot_with_env(
        &home,
        &[
            "--config",
            config.to_str().unwrap(),
            "--provider",
            "anthropic",
            "--base-url",
            &server.uri(),
            "--model",
            "claude-test",
            "run",
            "hi",
        ],
        &[("FERROBOT_TEST_ANTHROPIC_KEY", "sk-ant-from-env".into())],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Claude says hi.\n");
    let requests = server.received_requests().await.unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(sent["temperature"], 0.25);
    assert_eq!(sent["model"], "claude-test");
}

/// The chat (`ferrobot ARGS`, no command) against the model at `url`, fed
/// `input` on a pipe, run to the end.
fn chat_with(home: &Home, url: &str, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = command(home, &[])
        .args(["--base-url", url, "--model", "m"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// What the model was told of the turn's last tool call.
fn last_tool_result(server_requests: &[wiremock::Request]) -> serde_json::Value {
    let body: serde_json::Value =
        serde_json::from_slice(&server_requests.last().unwrap().body).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .clone()
}

const ASK_UPTIME: &str = "[[permissions.rules]]\ntool = \"uptime\"\npermission = \"ask\"\n";

#[tokio::test]
async fn the_chat_offers_always_says_what_it_covers_and_the_trace_keeps_the_decision() {
    let home = Home::new("cli-always");
    std::fs::write(home.path().join("ferrobot.toml"), ASK_UPTIME).unwrap();
    let server = tool_round_server("uptime", serde_json::json!({}), "Up a while.").await;
    let url = format!("{}/v1", server.uri());
    let output = chat_with(&home, &url, &[], b"how long up?\na\nexit\n");
    assert!(output.status.success(), "{}", stderr(&output));
    let asked = stderr(&output);
    assert!(asked.contains("why: rule 1: ask uptime"), "{asked}");
    assert!(
        asked.contains("a = always allow every call of `uptime` in this conversation"),
        "{asked}"
    );
    let requests = server.received_requests().await.unwrap();
    assert_ne!(last_tool_result(&requests), "Cancelled by user.", "it ran");
    assert!(
        stdout(&output).contains("Up a while."),
        "{}",
        stdout(&output)
    );

    let traces = std::fs::read_to_string(home.path().join("data/ferrobot/traces.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(traces.lines().last().unwrap()).unwrap();
    let call = &record["tool_calls"][0];
    assert_eq!(
        call["verdict"],
        serde_json::json!({"permission": "ask", "layer": "application", "rule": "rule 1: ask uptime"})
    );
    assert_eq!(
        call["decision"],
        serde_json::json!({"label": "always", "scope": {"kind": "tool"}})
    );
}

#[tokio::test]
async fn no_with_a_reason_in_the_chat_tells_the_model_why() {
    let home = Home::new("cli-deny-reason");
    std::fs::write(home.path().join("ferrobot.toml"), ASK_UPTIME).unwrap();
    let server = tool_round_server("uptime", serde_json::json!({}), "Fine, I won't.").await;
    let url = format!("{}/v1", server.uri());
    let output = chat_with(
        &home,
        &url,
        &[],
        b"how long up?\nn not during the backup\nexit\n",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.received_requests().await.unwrap();
    let told = last_tool_result(&requests);
    assert!(
        told.as_str().unwrap().contains("not during the backup"),
        "{told}"
    );
    let traces = std::fs::read_to_string(home.path().join("data/ferrobot/traces.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(traces.lines().last().unwrap()).unwrap();
    assert_eq!(
        record["tool_calls"][0]["decision"],
        serde_json::json!({"label": "deny", "reason": "not during the backup"})
    );
}

#[test]
fn permissions_lists_the_rules_with_their_source_and_each_tools_default() {
    let home = Home::new("cli-permissions");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        format!("{ASK_UPTIME}\n[[permissions.rules]]\ntool = \"disk_*\"\npermission = \"deny\"\n"),
    )
    .unwrap();
    let output = ferrobot(&home, &["permissions"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    // figment names the file relative to the working directory.
    assert!(
        text.contains("   1  ask uptime    # permissions.rules[1], TOML file (ferrobot.toml)"),
        "{text}"
    );
    assert!(
        text.contains("   2  deny disk_*    # permissions.rules[2]"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("disk_usage")
                && l.contains("allow  default: a read-only tool runs")),
        "{text}"
    );
    assert!(
        text.contains("\"Always\" approvals, by conversation:\n  none"),
        "{text}"
    );
}

#[test]
fn permissions_test_says_what_decides_and_exits_by_the_answer() {
    let home = Home::new("cli-permissions-test");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        format!("{ASK_UPTIME}\n[[permissions.rules]]\ntool = \"disk_*\"\npermission = \"deny\"\n"),
    )
    .unwrap();
    let asked = ferrobot(&home, &["permissions", "test", "uptime"]);
    assert_eq!(asked.status.code(), Some(4), "{}", stderr(&asked));
    assert_eq!(stdout(&asked), "ask (rule 1: ask uptime)\n");
    let denied = ferrobot(
        &home,
        &["permissions", "test", "disk_usage", "path=/my dir"],
    );
    assert_eq!(denied.status.code(), Some(5), "{}", stderr(&denied));
    assert_eq!(stdout(&denied), "deny (rule 2: deny disk_*)\n");
    let denied = ferrobot(
        &home,
        &[
            "permissions",
            "test",
            "disk_usage",
            r#"{"path": "/"}"#,
            "--conversation",
            "cli",
        ],
    );
    assert_eq!(denied.status.code(), Some(5), "{}", stderr(&denied));

    std::fs::remove_file(home.path().join("ferrobot.toml")).unwrap();
    let allowed = ferrobot(&home, &["permissions", "test", "uptime"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert_eq!(stdout(&allowed), "allow (default: a read-only tool runs)\n");
    let unknown = ferrobot(&home, &["permissions", "test", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("no tool named `nope`"),
        "{}",
        stderr(&unknown)
    );
    let bad = ferrobot(&home, &["permissions", "test", "uptime", "nope=1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("unknown parameter `nope`"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_bad_permission_rule_exits_2_naming_its_key() {
    let home = Home::new("cli-badrule");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[[permissions.rules]]\ntool = \"uptime\"\npermission = \"maybe\"\n",
    )
    .unwrap();
    let output = ferrobot(&home, &["config", "check"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            r#"`permissions.rules[1].permission`: expected "allow", "ask" or "deny", got "maybe""#
        ),
        "{}",
        stderr(&output)
    );
}

/// A config with npm's `server-everything` (stdio) as `everything`, a
/// server that can't start, a disabled one and one whose token isn't set;
/// or `None` after a loud skip when the npm servers aren't installed.
fn mcp_config(home: &Home) -> Option<()> {
    let entry = ferrobot_testkit::outside::mcp_server("server-everything")?;
    std::fs::write(
        home.path().join("ferrobot.toml"),
        format!(
            r#"
[mcp.servers.everything]
command = "node"
args = ["{}", "stdio"]

[mcp.servers.broken]
command = "/nonexistent/mcp-server"

[mcp.servers.off]
command = "node"
enabled = false

[mcp.servers.remote]
url = "http://127.0.0.1:9/mcp"
bearer_token_env = "FERROBOT_TEST_UNSET_TOKEN"
"#,
            entry.display()
        ),
    )
    .unwrap();
    Some(())
}

#[test]
fn mcp_list_shows_each_servers_state_and_tools() {
    let home = Home::new("cli-mcp-list");
    let Some(()) = mcp_config(&home) else {
        return;
    };
    let output = ferrobot(&home, &["mcp", "list", "--wait", "60"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("broken: failed: could not start `/nonexistent/mcp-server`"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("everything: connected (node "),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  everything__echo ")
                && l.ends_with("Echoes back the input string")),
        "{out}"
    );
    assert!(lines.contains(&"off: disabled"), "{out}");
    assert!(
        lines.contains(
            &"remote: not started: `mcp.servers.remote.bearer_token_env` names `FERROBOT_TEST_UNSET_TOKEN`, which is not set; set it or remove the key"
        ),
        "{out}"
    );
}

#[test]
fn doctor_connects_to_each_mcp_server_and_says_how_it_went() {
    let home = Home::new("cli-mcp-doctor");
    let Some(()) = mcp_config(&home) else {
        return;
    };
    let output = ferrobot(&home, &["--base-url", "http://127.0.0.1:9/v1", "doctor"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("\nmcp everything: ok, "), "{out}");
    assert!(
        out.contains(
            "\nmcp broken: failed: could not connect to the MCP server `broken`: could not start"
        ),
        "{out}"
    );
    assert!(
        out.contains("\nmcp remote: failed: `mcp.servers.remote.bearer_token_env` names"),
        "{out}"
    );
    assert!(!out.contains("mcp off"), "{out}");
}

#[tokio::test]
async fn run_offers_the_mcp_servers_tools_and_runs_read_only_ones_headless() {
    let home = Home::new("cli-mcp-run");
    let Some(()) = mcp_config(&home) else {
        return;
    };
    let server = tool_round_server(
        "everything__echo",
        serde_json::json!({"message": "from the cli"}),
        "It echoed.",
    )
    .await;
    let url = format!("{}/v1", server.uri());
    assert!(
        ferrobot(&home, &["disable", "everything__get-env"])
            .status
            .success()
    );
    let output = ferrobot(
        &home,
        &["--base-url", &url, "--model", "m", "run", "echo something"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "It echoed.\n");
    let requests = server.received_requests().await.unwrap();
    let first: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    let offered = first["tools"].to_string();
    assert!(offered.contains("everything__echo"), "{offered}");
    assert!(
        !offered.contains("everything__get-env"),
        "disabled: {offered}"
    );
    let second: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(result["content"], "Echo: from the cli");
}

#[test]
fn an_mcp_servers_tool_can_be_disabled_by_name() {
    let home = Home::new("cli-mcp-disable");
    std::fs::write(
        home.path().join("ferrobot.toml"),
        "[mcp.servers.files]\ncommand = \"npx\"\n",
    )
    .unwrap();
    let off = ferrobot(&home, &["disable", "files__write_file"]);
    assert!(off.status.success(), "{}", stderr(&off));
    assert_eq!(stdout(&off), "files__write_file disabled\n");
    let unknown = ferrobot(&home, &["disable", "other__write_file"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[tokio::test]
async fn a_run_killed_mid_turn_is_finished_by_the_next_run_in_its_conversation() {
    let home = Home::new("cli-recover");
    // The first request hangs (the run is killed while it waits); the
    // others are answered with the prompt they finish.
    let server = MockServer::start().await;
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    Mock::given(method("POST"))
        .respond_with(move |request: &wiremock::Request| {
            let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
            let last = body["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let answer = ResponseTemplate::new(200)
                .set_body_raw(text_sse(&format!("Answered: {last}")), "text/event-stream");
            if first {
                answer.set_delay(std::time::Duration::from_secs(60))
            } else {
                answer
            }
        })
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let mut killed = command(&home, &[])
        .args(["--base-url", &url, "--model", "m", "run", "first question"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the model was asked: the user's message is stored.
    for _ in 0..1500 {
        if calls.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    let output = ferrobot(
        &home,
        &["--base-url", &url, "--model", "m", "run", "second question"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "The last turn in this conversation was interrupted; finishing it first: first question"
        ),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "Answered: first question\nAnswered: second question\n"
    );
    // The history holds each turn once, in order.
    let shown = ferrobot(&home, &["history", "show", "cli"]);
    assert_eq!(
        stdout(&shown),
        "#0\tyou: first question\n#1\tassistant: Answered: first question\n\
         #2\tyou: second question\n#3\tassistant: Answered: second question\n"
    );
    // Nothing is left to recover.
    let third = ferrobot(&home, &["--base-url", &url, "--model", "m", "run", "third"]);
    assert!(
        !stderr(&third).contains("interrupted"),
        "{}",
        stderr(&third)
    );
}

#[tokio::test]
async fn history_export_and_import_move_the_file_to_postgresql_once() {
    use ferrobot::history::{HistoryStore, LaterMessage, PostgresHistory, SqliteHistory};
    use ferrobot::policy::{Approval, Scope};
    use ferrobot::{Image, Message, Part, Role};

    let Some(db) = ferrobot_testkit::postgres::Database::new().await else {
        return;
    };
    let home = Home::new("cli-transfer");
    // A conversation with an image, an approval and a later message, in
    // the SQLite file the CLI uses by default.
    let png = Image::png(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec());
    let file = SqliteHistory::open(home.path().join("data/ferrobot/history.db"))
        .await
        .unwrap();
    let asked = Message::new(
        Role::User,
        vec![Part::text("what is this?"), Part::image(png)],
    );
    file.append("ops", &[asked, Message::assistant("A tiny PNG.")])
        .await
        .unwrap();
    file.append("cli", &[Message::user("hello")]).await.unwrap();
    let approval = Approval::new("disk_usage", Scope::Tool).by("ann");
    file.add_approval("ops", &approval).await.unwrap();
    let later = LaterMessage::new("ops", "Rebooting now.", std::time::SystemTime::now());
    file.add_later_message(&later).await.unwrap();

    let dump = home.path().join("history.jsonl");
    let exported = ferrobot(&home, &["history", "export", "-o", dump.to_str().unwrap()]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    assert!(
        stderr(&exported)
            .contains("exported 2 conversations (3 messages), 0 schedules, 1 later messages"),
        "{}",
        stderr(&exported)
    );

    let to_db = [("FERROBOT_HISTORY__URL", db.url())];
    let dump = dump.to_str().unwrap();
    let imported = ferrobot_with_env(&home, &["history", "import", dump], &to_db);
    assert!(imported.status.success(), "{}", stderr(&imported));
    assert!(
        stdout(&imported).contains("imported 2 conversations (3 messages), 0 schedules, 1 later messages into the history database: postgres://"),
        "{}",
        stdout(&imported)
    );
    assert!(!stdout(&imported).contains(&password_of(&db.url())));

    let database = PostgresHistory::connect(&db.url()).await.unwrap();
    for conversation in ["ops", "cli"] {
        let (there, here) = (
            database.load(conversation).await.unwrap(),
            file.load(conversation).await.unwrap(),
        );
        let texts = |m: &[Message]| m.iter().map(Message::text).collect::<Vec<_>>();
        assert_eq!(texts(&there), texts(&here));
    }
    let image = database.load("ops").await.unwrap()[0]
        .images()
        .next()
        .cloned()
        .unwrap();
    let Image::Stored { id, .. } = image else {
        panic!("not stored apart: {image:?}")
    };
    assert_eq!(
        database.load_image(&id).await.unwrap(),
        Image::png(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".to_vec())
    );
    assert_eq!(database.approvals("ops").await.unwrap(), [approval]);
    let far = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    let pending = database.due_later_messages(far).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].text, "Rebooting now.");

    // Twice: nothing added, and it says so.
    let again = ferrobot_with_env(&home, &["history", "import", dump], &to_db);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("imported 0 conversations"),
        "{}",
        stdout(&again)
    );
    assert!(
        stdout(&again).contains("already there: ops, cli, later message “Rebooting now.”"),
        "{}",
        stdout(&again)
    );
    assert_eq!(database.load("ops").await.unwrap().len(), 2);
    assert_eq!(database.due_later_messages(far).await.unwrap().len(), 1);

    // The CLI reads the database it is configured with.
    let listed = ferrobot_with_env(&home, &["history", "list"], &to_db);
    assert!(
        stdout(&listed).contains("ops\t2 messages"),
        "{}",
        stdout(&listed)
    );

    // Not an export: refused, naming the line.
    std::fs::write(
        home.path().join("bad.jsonl"),
        "{\"kind\":\"conversation\"}\n",
    )
    .unwrap();
    let bad_path = home.path().join("bad.jsonl");
    let bad = ferrobot_with_env(
        &home,
        &["history", "import", bad_path.to_str().unwrap()],
        &to_db,
    );
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("line 1"), "{}", stderr(&bad));
    drop(database);
    db.remove().await;
}

/// The password in a `postgres://user:password@…` URL.
fn password_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let info = rest.split_once('@').unwrap().0;
    info.split_once(':').unwrap().1.to_owned()
}

/// `ferrobot status` before any bot ran, beside a running one (a panel
/// served by this test process, as a bot serves it), and beside one that
/// was killed.
#[tokio::test]
async fn status_finds_running_and_stopped_bots_through_their_runtime_files() {
    use ferrobot_app::panel::{Panel, Runtime};
    let home = Home::new("cli-status");
    let model = llm(vec![ferrobot_testkit::text_answer("Fine.")]).await;
    let config = home.path().join("ferrobot.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\nbase_url = \"{}/v1\"\nmodel = \"m\"\n[history]\npath = \"history.db\"\n\
             [logging]\nfolder = \".\"\n[panel]\nport = 0\n[context]\nwindow = 32768\n",
            model.uri()
        ),
    )
    .unwrap();
    let nothing = ferrobot(&home, &["status"]);
    assert_eq!(nothing.status.code(), Some(3), "{}", stderr(&nothing));
    assert!(stdout(&nothing).starts_with("No bot has run with this config"));

    // A bot that was killed: its file stays, its process is gone.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let stale: Runtime = serde_json::from_value(serde_json::json!({
        "bot": "ferrobot-discord", "pid": gone_pid, "version": "0.1.0",
        "started_at": 1_796_277_600u64, "config": null, "port": null, "token": null,
    }))
    .unwrap();
    stale.write(&home.path().join("run")).unwrap();
    let stopped = ferrobot(&home, &["status"]);
    assert_eq!(stopped.status.code(), Some(3));
    assert!(
        stdout(&stopped).starts_with(&format!(
            "ferrobot-discord (pid {gone_pid}): stopped, last seen "
        )),
        "{}",
        stdout(&stopped)
    );

    // A running bot, and one turn it answered.
    let loaded =
        ferrobot_app::Config::load(&ferrobot_app::ConfigSource::defaults_only().file(&config))
            .unwrap();
    let agent = loaded
        .agent(
            |_: ferrobot::confirm::ConfirmRequest| async { false },
            |_: String, _: String| async {},
        )
        .await
        .unwrap();
    let panel = Panel::start(&loaded, &agent).await.unwrap();
    agent.handle("c", "hi").await.unwrap();
    // Run beside the panel, which answers on this test's runtime.
    let status = |args: &[&str]| {
        let mut status = command(&home, &[]);
        status.args(args);
        tokio::task::spawn_blocking(move || status.output().unwrap())
    };
    let output = status(&["status"]).await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let me = std::process::id();
    assert!(
        text.contains(&format!("(pid {me}): running since ")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "  panel:    http://127.0.0.1:{}/#token=",
            panel.port.unwrap()
        )),
        "{text}"
    );
    assert!(text.contains("  model:    m at http"), "{text}");
    assert!(text.contains("reachable ("), "{text}");
    assert!(
        text.contains("  turns:    1 ended, 0 failed, 0 running"),
        "{text}"
    );
    let json = status(&["status", "--json"]).await.unwrap();
    let seen: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let running = seen
        .as_array()
        .unwrap()
        .iter()
        .find(|bot| bot["pid"] == me)
        .unwrap();
    assert_eq!(running["running"], true);
    assert_eq!(running["status"]["turns"]["turns"], 1);
    assert_eq!(running["status"]["model"]["reachable"], true);
    // A bot starting forgot the file of the one that was killed.
    assert_eq!(seen.as_array().unwrap().len(), 1, "{seen}");
    drop(panel);
}

/// With `[logging] otlp_endpoint`, the turn's spans reach the collector
/// over OTLP/HTTP (protobuf) before the CLI exits, named and described as
/// the GenAI conventions say.
#[cfg(feature = "otel")]
#[tokio::test]
async fn spans_are_exported_to_an_otlp_collector_over_http() {
    let home = Home::new("cli-otel");
    let model = llm(vec![text_sse("Fine.")]).await;
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let url = format!("{}/v1", model.uri());
    let output = ferrobot_with_env(
        &home,
        &["--base-url", &url, "--model", "m", "run", "/uptime"],
        &[("FERROBOT_LOGGING__OTLP_ENDPOINT", collector.uri())],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let output = ferrobot_with_env(
        &home,
        &["--base-url", &url, "--model", "m", "run", "all good?"],
        &[("FERROBOT_LOGGING__OTLP_ENDPOINT", collector.uri())],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let exported = collector.received_requests().await.unwrap();
    assert!(!exported.is_empty(), "no spans reached the collector");
    assert_eq!(
        exported[0].headers["content-type"],
        "application/x-protobuf"
    );
    // Protobuf keeps strings as they are: the attributes can be read off.
    let bytes: Vec<u8> = exported.iter().flat_map(|r| r.body.clone()).collect();
    let has = |text: &str| bytes.windows(text.len()).any(|w| w == text.as_bytes());
    for expected in [
        "service.name",
        "ferrobot",
        "execute_tool uptime",
        "gen_ai.tool.name",
        "chat m",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.conversation.id",
    ] {
        assert!(has(expected), "no `{expected}` in the exported spans");
    }
}

/// `doctor --conformance` against a server that only ever answers in
/// text: the table, and exit 3 since tool calling is not usable.
#[tokio::test]
async fn doctor_conformance_says_when_tool_calling_is_not_usable() {
    let home = Home::new("cli-conformance");
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(text_sse("Hello."), "text/event-stream"),
        )
        .mount(&model)
        .await;
    let url = format!("{}/v1", model.uri());
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "doctor",
            "--conformance",
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("streamed_text        pass"), "{text}");
    assert!(
        text.contains(
            "tool_call            fail      the model never called the tool, even when required"
        ),
        "{text}"
    );
    assert!(text.ends_with("tool calling: not usable\n"), "{text}");
}

/// `doctor --conformance --json` against the real llama.cpp server.
#[test]
fn doctor_conformance_against_a_real_llama_cpp_server() {
    let Some(server) = ferrobot_testkit::realserver::RealServer::shared() else {
        return;
    };
    let home = Home::new("cli-conformance-real");
    let output = ferrobot(
        &home,
        &[
            "--base-url",
            &server.base_url(),
            "--model",
            server.model(),
            "doctor",
            "--conformance",
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let scenarios: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let verdict = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["verdict"].as_str().unwrap().to_owned())
    };
    assert_eq!(verdict("tool_call").as_deref(), Some("pass"));
    assert_eq!(verdict("tool_result").as_deref(), Some("pass"));
    assert_eq!(verdict("non_streamed_text").as_deref(), Some("pass"));
    assert_eq!(verdict("error_status").as_deref(), Some("skipped"));
}

/// A session as a bot records it: "hi" answered with `reply`.
fn session(reply: &str) -> String {
    serde_json::json!({
        "ferrobot_session": 1,
        "recorded_at": 1_796_000_000,
        "limit": 4096,
        "length": "utf16",
        "events": [
            {"message": {"conversation": "111", "user": "111", "text": "hi"}},
            {"reply": {"chat": "111", "text": reply}},
        ],
    })
    .to_string()
}

#[test]
fn replay_says_whether_a_recorded_session_still_answers_alike() {
    let home = Home::new("cli-replay");
    std::fs::write(home.path().join("chat.json"), session("Hello!")).unwrap();
    // The model's answer; its request is left out of the comparison below
    // (it holds this machine's tools and facts).
    let model = serde_json::json!({
        "ferrobot_cassette": 1, "provider": "openai", "model": "m",
        "interactions": [{"request": {}, "events": [{"text": "Hello!"}, {"finish": "stop"}]}],
    });
    std::fs::write(home.path().join("chat.model.json"), model.to_string()).unwrap();
    let ignore = [
        "--ignore",
        "system",
        "--ignore",
        "messages",
        "--ignore",
        "tools",
        "--ignore",
        "tool_choice",
    ];
    let replay = |file: &str| {
        let mut args = vec!["replay", file];
        args.extend(ignore);
        ferrobot(&home, &args)
    };
    let output = replay("chat.json");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "chat.json: the bot answered as recorded\n");

    std::fs::write(home.path().join("chat.json"), session("Bye!")).unwrap();
    let output = replay("chat.json");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = stderr(&output);
    assert!(
        report.contains("in 111, after the message \"hi\" (its message 1):\n    recorded the reply \"Bye!\"\n    now      the reply \"Hello!\""),
        "{report}"
    );

    let output = replay("none.json");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("there is no such file: record one with"),
        "{}",
        stderr(&output)
    );
}
