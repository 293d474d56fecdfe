//! A raw-TCP server that misbehaves on cue: a response split at chosen
//! bytes, pauses, a stall with the connection held open, a reset. For the
//! faults `wiremock` can't produce (it always answers whole and well).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One step of a scripted answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// These bytes, in one write, flushed (with Nagle off, so the client
    /// usually sees a read boundary after them; over loopback, reliably
    /// with a [`Pause`](Step::Pause) after).
    Send(Vec<u8>),
    /// Nothing for this long.
    Pause(Duration),
    /// Nothing more, with the connection held open until the client gives
    /// up or the server is dropped: a server that fell silent.
    Stall,
    /// The connection reset (RST, not a clean close): the client reads
    /// "connection reset by peer".
    Reset,
}

/// What the server does with each connection: reads one HTTP request, then
/// plays its steps; a script that ends without [`Step::Stall`] or
/// [`Step::Reset`] closes the connection cleanly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script(pub Vec<Step>);

impl Script {
    /// A script of raw bytes, sent whole.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Self {
        Self(vec![Step::Send(bytes.into())])
    }

    /// A whole HTTP/1.1 response: `status`, a `content-type`, a
    /// `content-length`, and `body`.
    pub fn http(status: u16, content_type: &str, body: impl AsRef<[u8]>) -> Self {
        let body = body.as_ref();
        let mut bytes = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            reason(status),
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        Self::raw(bytes)
    }

    /// The head of a `200` response whose body goes out in chunked transfer
    /// encoding, then one HTTP chunk per piece, each its own write: over
    /// loopback the client reads (at least) these boundaries. The body stays
    /// open: [`chunked_complete`](Self::chunked_complete) ends it, or add a
    /// fault with [`then`](Self::then).
    pub fn chunked<P: AsRef<[u8]>>(
        content_type: &str,
        pieces: impl IntoIterator<Item = P>,
    ) -> Self {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
        let mut steps = vec![Step::Send(head.into_bytes())];
        for piece in pieces {
            let piece = piece.as_ref();
            if piece.is_empty() {
                continue;
            }
            let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
            frame.extend_from_slice(piece);
            frame.extend_from_slice(b"\r\n");
            steps.push(Step::Send(frame));
        }
        Self(steps)
    }

    /// [`chunked`](Self::chunked), closed by the last chunk.
    pub fn chunked_complete<P: AsRef<[u8]>>(
        content_type: &str,
        pieces: impl IntoIterator<Item = P>,
    ) -> Self {
        Self::chunked(content_type, pieces).then(Step::Send(b"0\r\n\r\n".to_vec()))
    }

    /// This script's bytes re-cut at the given offsets (counted over all
    /// the bytes it sends), each piece a write of its own, its faults kept
    /// at the end. Offsets past the end are ignored.
    #[must_use]
    pub fn split_at(self, offsets: &[usize]) -> Self {
        let bytes: Vec<u8> = self
            .0
            .iter()
            .filter_map(|step| match step {
                Step::Send(bytes) => Some(bytes.as_slice()),
                _ => None,
            })
            .flatten()
            .copied()
            .collect();
        let mut cuts: Vec<usize> = offsets
            .iter()
            .copied()
            .filter(|&o| 0 < o && o < bytes.len())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut steps = Vec::new();
        let mut start = 0;
        for end in cuts.into_iter().chain([bytes.len()]) {
            steps.push(Step::Send(bytes[start..end].to_vec()));
            start = end;
        }
        let faults = self.0.into_iter().filter(|s| !matches!(s, Step::Send(_)));
        Self(steps.into_iter().chain(faults).collect())
    }

    /// This script with `pause` after each write: each piece surely its own
    /// read, and a client's idle timer tested between them.
    #[must_use]
    pub fn paced(self, pause: Duration) -> Self {
        let mut steps = Vec::new();
        for step in self.0 {
            let send = matches!(step, Step::Send(_));
            steps.push(step);
            if send {
                steps.push(Step::Pause(pause));
            }
        }
        Self(steps)
    }

    /// This script, then `step`.
    #[must_use]
    pub fn then(mut self, step: Step) -> Self {
        self.0.push(step);
        self
    }
}

/// A loopback server playing [`Script`]s: the first connection gets the
/// first script, the second the second, and every later one the last (so a
/// client's retry can meet a different answer). It records each request and
/// stops when dropped.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ferrobot_testkit::fault::{FaultServer, Script, Step};
/// let server = FaultServer::start([
///     Script::default().then(Step::Reset),
///     Script::http(200, "text/plain", "fine"),
/// ])
/// .await;
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// # }
/// ```
#[derive(Debug)]
pub struct FaultServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
    accepting: JoinHandle<()>,
}

impl FaultServer {
    /// Starts serving on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound, or `scripts` is empty.
    pub async fn start(scripts: impl IntoIterator<Item = Script>) -> Self {
        let scripts: Vec<Script> = scripts.into_iter().collect();
        assert!(!scripts.is_empty(), "a FaultServer needs a script");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("a bound address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let accepting = tokio::spawn(async move {
            let mut served = 0;
            let mut connections = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                let script = scripts[served.min(scripts.len() - 1)].clone();
                served += 1;
                let recorded = Arc::clone(&recorded);
                // Kept, so dropping the server ends its connections too.
                connections.push(AbortOnDrop(tokio::spawn(play(socket, script, recorded))));
            }
        });
        Self {
            addr,
            requests,
            accepting,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The requests received so far, head and body, in order.
    ///
    /// # Panics
    /// Never in practice: the lock is only held to copy.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn play(mut socket: TcpStream, script: Script, requests: Arc<Mutex<Vec<Vec<u8>>>>) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    requests.lock().expect("not poisoned").push(request);
    for step in script.0 {
        match step {
            Step::Send(bytes) => {
                if socket.write_all(&bytes).await.is_err() || socket.flush().await.is_err() {
                    return;
                }
            }
            Step::Pause(pause) => tokio::time::sleep(pause).await,
            Step::Stall => std::future::pending::<()>().await,
            Step::Reset => {
                // A zero linger makes the close send RST at once; with zero
                // it never blocks, which is what the deprecation is about.
                #[allow(deprecated)]
                let _ = socket.set_linger(Some(Duration::ZERO));
                return;
            }
        }
    }
    let _ = socket.shutdown().await;
}

/// One HTTP request, head and body (by `content-length`); `None` if the
/// client went away first.
async fn read_request(socket: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            let n = socket.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
            buf.extend_from_slice(&chunk[..n]);
        }
        return Some(buf);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
