//! A minimal HTTP/1.1 server on loopback, shared by the benches that need a
//! real endpoint.
//!
//! It understands just enough HTTP for reqwest: a request head ended by a
//! blank line, a `content-length` body, keep-alive. Every answer is prepared
//! in full (head and body) before the benchmark starts, so the server costs
//! one `write_all` per request. wiremock would work too, but it routes
//! through hyper and a matcher chain on every request, which would add
//! server-side time to both sides of the agent-versus-floor comparison and
//! blur the ratio.

pub(crate) mod floor;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// Picks the prepared response for a request body.
type Route = dyn Fn(&[u8]) -> Bytes + Send + Sync;

/// A running server; it stops when dropped.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    // Owns the worker threads; dropping it stops the server.
    _runtime: Runtime,
}

/// A complete `200 OK` response carrying `body` as an event stream.
pub(crate) fn sse_response(body: &str) -> Bytes {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
        body.len()
    );
    let mut response = Vec::with_capacity(head.len() + body.len());
    response.extend_from_slice(head.as_bytes());
    response.extend_from_slice(body.as_bytes());
    Bytes::from(response)
}

/// Starts a server on `127.0.0.1:0` whose answer to each request is
/// `route(request_body)`, on its own two-thread runtime.
pub(crate) fn serve(route: impl Fn(&[u8]) -> Bytes + Send + Sync + 'static) -> Server {
    let route: Arc<Route> = Arc::new(route);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    let addr = listener.local_addr().expect("local address");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-server")
        .enable_all()
        .build()
        .expect("server runtime");
    runtime.spawn(async move {
        let listener = TcpListener::from_std(listener).expect("tokio listener");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let route = Arc::clone(&route);
            tokio::spawn(async move {
                // A client closing its connection ends the loop; nothing to report.
                let _ = connection(stream, &*route).await;
            });
        }
    });
    Server {
        addr,
        _runtime: runtime,
    }
}

/// Answers the requests of one keep-alive connection until the client closes it.
async fn connection(mut stream: TcpStream, route: &Route) -> std::io::Result<()> {
    // Without it the last partial segment of a response can wait for the
    // client's delayed ACK (up to 40 ms on Linux).
    stream.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    loop {
        let head_end = loop {
            if let Some(at) = find(&buf, b"\r\n\r\n") {
                break at + 4;
            }
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        let body_end = head_end + content_length(&buf[..head_end]);
        while buf.len() < body_end {
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let response = route(&buf[head_end..body_end]);
        buf.drain(..body_end);
        stream.write_all(&response).await?;
    }
}

/// The value of the `content-length` header, or 0 without one.
fn content_length(head: &[u8]) -> usize {
    let head = std::str::from_utf8(head).expect("ASCII request head");
    head.split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, value)| {
            value.trim().parse().expect("numeric content-length")
        })
}

/// Where `needle` first occurs in `haystack`.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
