//! Helpers shared by the integration tests.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ferrobot::Message;
use ferrobot::provider::{Assembled, Assembler, ChatRequest, Provider, ProviderError, StreamEvent};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Runs one model call and returns its events, stopping at the first error.
pub(crate) async fn events(
    provider: &dyn Provider,
    messages: &[Message],
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut stream = provider.stream(ChatRequest::new(messages));
    let mut out = Vec::new();
    while let Some(event) = stream.next().await {
        out.push(event?);
    }
    Ok(out)
}

/// Runs one model call and assembles its message.
pub(crate) async fn assemble(
    provider: &dyn Provider,
    messages: &[Message],
) -> Result<Assembled, ProviderError> {
    let mut assembler = Assembler::new();
    for event in events(provider, messages).await? {
        assembler.push(&event);
    }
    Ok(assembler.finish())
}

/// A loopback HTTP server answering every request with `body` sent as
/// chunked transfer encoding, one HTTP chunk per piece, so the client sees
/// (at least) the given read boundaries.
pub(crate) async fn serve_pieces(pieces: Vec<Vec<u8>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let pieces = pieces.clone();
            tokio::spawn(async move {
                socket.set_nodelay(true).unwrap();
                read_request(&mut socket).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                socket.write_all(head.as_bytes()).await.unwrap();
                for piece in pieces.iter().filter(|p| !p.is_empty()) {
                    let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
                    frame.extend_from_slice(piece);
                    frame.extend_from_slice(b"\r\n");
                    socket.write_all(&frame).await.unwrap();
                    socket.flush().await.unwrap();
                }
                socket.write_all(b"0\r\n\r\n").await.unwrap();
            });
        }
    });
    addr
}

async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.unwrap();
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + length {
                let n = socket.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            return;
        }
        if n == 0 {
            return;
        }
    }
}

/// The folder of one category of the shared recorded traffic; `None` when it
/// is missing outside CI (see [`outside_part`]).
pub(crate) fn corpus(category: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(category);
    outside_part(dir, "the recorded traffic corpus")
}

/// `path`, where a part of a test's setup lives outside this repository: the
/// recorded traffic in `../shared/corpus`, and later a real model server or
/// a Postgres database. `what` names the part in messages.
///
/// Every test that needs such a part follows one rule when it is missing.
/// Under CI (the `CI` environment variable set, and not empty, `false` or
/// `0`) the test fails, naming the path: a suite that passes by skipping its
/// replays proves nothing. Elsewhere the test skips loudly: it prints a line
/// starting with `SKIPPED:` that names the test and the path, and returns
/// without checking anything, so a checkout without the part still runs the
/// rest. A silent skip, the old way, looked the same as a pass.
///
/// # Panics
/// Under CI, when `path` does not exist.
pub(crate) fn outside_part(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    // libtest runs each test on a thread named after it.
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("a test");
    match when_missing(&path, what, test, std::env::var("CI").ok().as_deref()) {
        Missing::Fail(message) => panic!("{message}"),
        Missing::Skip(message) => {
            eprintln!("{message}");
            None
        }
    }
}

/// What a test does when an outside part is missing.
#[derive(Debug, PartialEq)]
enum Missing {
    /// Under CI: it fails with this message.
    Fail(String),
    /// Elsewhere: it prints this line and returns.
    Skip(String),
}

/// [`outside_part`]'s decision for a missing `path`, given the value of the
/// `CI` variable, so that both ways can be tested on any machine.
fn when_missing(path: &Path, what: &str, test: &str, ci: Option<&str>) -> Missing {
    let path = path.display();
    match ci.filter(|v| is_ci(v)) {
        Some(ci) => Missing::Fail(format!(
            "{what} is missing at {path}, and it is required under CI (CI={ci})"
        )),
        None => Missing::Skip(format!("SKIPPED: {test}: {what} is missing at {path}")),
    }
}

/// Whether a value of the `CI` variable means the tests run under CI: any
/// value but empty, `false` or `0`.
fn is_ci(value: &str) -> bool {
    let value = value.trim();
    !(value.is_empty() || value.eq_ignore_ascii_case("false") || value == "0")
}

/// The JSON bodies of every request `server` received, in order.
pub(crate) async fn bodies(server: &wiremock::MockServer) -> Vec<serde_json::Value> {
    let requests = server.received_requests().await.unwrap();
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// One recording of the corpus: its folder's name, the folder, and what a
/// correct client assembles from it.
pub(crate) struct Recording {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) expected: serde_json::Value,
}

impl Recording {
    /// A loopback server answering POSTs to `route` with this recording's
    /// `response.txt` as an event stream.
    pub(crate) async fn serve_stream(&self, route: &str) -> wiremock::MockServer {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .and(wiremock::matchers::path(route))
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw(
                std::fs::read(self.dir.join("response.txt")).unwrap(),
                "text/event-stream",
            ))
            .mount(&server)
            .await;
        server
    }

    /// Asserts that `message` has the text and reasoning `expected.json`
    /// names (absent counts as empty).
    pub(crate) fn assert_text(&self, message: &Message) {
        let name = &self.name;
        assert_eq!(
            message.text(),
            self.expected["content"].as_str().unwrap_or_default(),
            "{name}: content"
        );
        assert_eq!(
            message.reasoning().unwrap_or_default(),
            self.expected["reasoning"].as_str().unwrap_or_default(),
            "{name}: reasoning"
        );
    }
}

/// Every recording of a corpus category, in name order; none when the corpus
/// is missing outside CI (see [`outside_part`]).
pub(crate) fn recordings(category: &str) -> Vec<Recording> {
    let Some(dir) = corpus(category) else {
        return Vec::new();
    };
    let mut dirs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "{} holds no recordings", dir.display());
    dirs.into_iter()
        .map(|dir| Recording {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            expected: serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap())
                .unwrap(),
            dir,
        })
        .collect()
}

/// A loopback server that sends the response head and `first`, then stays
/// silent with the connection open.
pub(crate) async fn serve_then_stall(first: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_request(&mut socket).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let frame = format!("{head}{:x}\r\n{first}\r\n", first.len());
                socket.write_all(frame.as_bytes()).await.unwrap();
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            });
        }
    });
    addr
}

/// Runs one turn over `provider` with a `count` tool and a cap of one tool
/// round, against a `server` that calls `count` while tools are on offer and
/// answers "Still zero." once they are not; returns the two request bodies.
pub(crate) async fn last_round_bodies(
    provider: impl Provider + 'static,
    server: &wiremock::MockServer,
) -> Vec<serde_json::Value> {
    let count = ferrobot::tool::from_fn("count", "Count.", |_: serde_json::Value, _| async { 0 });
    let agent = ferrobot::Agent::builder()
        .provider(provider)
        .tool(count)
        .max_tool_rounds(1)
        .build();
    let reply = agent.handle("a", "count again").await.unwrap();
    assert_eq!(reply.text, "Still zero.");
    let bodies = bodies(server).await;
    assert_eq!(bodies.len(), 2, "one tool round, then the last answer");
    bodies
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::{Missing, corpus, is_ci, outside_part, when_missing};

    #[test]
    fn ci_is_any_value_but_empty_false_or_zero() {
        for value in ["true", "1", "TRUE", "yes"] {
            assert!(is_ci(value), "{value:?}");
        }
        for value in ["", " ", "false", "False", "0"] {
            assert!(!is_ci(value), "{value:?}");
        }
    }

    #[test]
    fn a_missing_outside_part_fails_under_ci_and_skips_loudly_elsewhere() {
        let path = Path::new("/nonexistent/ferrobot/corpus/01");
        let decide = |ci| when_missing(path, "the recorded traffic corpus", "replay", ci);
        assert_eq!(
            decide(Some("true")),
            Missing::Fail(
                "the recorded traffic corpus is missing at /nonexistent/ferrobot/corpus/01, \
                 and it is required under CI (CI=true)"
                    .to_owned()
            )
        );
        assert!(matches!(decide(Some("1")), Missing::Fail(_)));
        for ci in [None, Some(""), Some("false"), Some("0")] {
            assert_eq!(
                decide(ci),
                Missing::Skip(
                    "SKIPPED: replay: the recorded traffic corpus is missing at \
                     /nonexistent/ferrobot/corpus/01"
                        .to_owned()
                ),
                "CI={ci:?}"
            );
        }
    }

    /// The decision above, wired to this process's own `CI` variable, on a
    /// corpus category that does not exist: run with and without `CI=true`
    /// to see both ways.
    #[test]
    fn a_missing_corpus_follows_this_process_ci_variable() {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(outside_part(here.clone(), "this checkout"), Some(here));
        let found = std::panic::catch_unwind(|| corpus("no_such_category"));
        if std::env::var("CI").is_ok_and(|v| is_ci(&v)) {
            assert!(found.is_err(), "under CI a missing part fails the test");
        } else {
            assert_eq!(found.ok(), Some(None), "elsewhere it is skipped");
        }
    }
}
