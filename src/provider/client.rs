//! The HTTP client every dialect sends through: hyper's pooled HTTP/1.1
//! client (h2 with the `http2` feature) over rustls, connecting directly or
//! through the proxies the environment names.
//!
//! Not reqwest, though it is built on the same parts: each of its requests
//! parsed the URL twice more (its redirect layer, then its response),
//! passed through its redirect and retry layers, and copied its headers
//! into a request of its own — a fifth of the instructions of a tool turn
//! against a local server, and code the caches held for nothing. A model
//! call follows no redirects and is retried by [`RetryPolicy`](super::RetryPolicy);
//! the request here is built whole, from a URI parsed once.
//!
//! Proxies as reqwest and curl read them: `HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY` (and lowercase), with `NO_PROXY`; read when the client is
//! built. An `https` server is reached through a `CONNECT` tunnel, an
//! `http` one by asking the proxy for the absolute URL; a proxy URL's
//! `user:password@` becomes `Proxy-Authorization`.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{PROXY_AUTHORIZATION, USER_AGENT};
use http::uri::Scheme;
use http::{HeaderMap, HeaderValue, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ClientConfig;
use tokio::net::TcpStream;

use crate::BoxError;

/// The `User-Agent` of every request, unless the caller's headers name one.
pub(crate) const USER_AGENT_VALUE: &str = concat!("ferrobot/", env!("CARGO_PKG_VERSION"));

/// A request's body: the encoded JSON, or nothing.
pub(crate) type RequestBody = Full<Bytes>;

/// An answer's body as the dialects read it: the server's.
#[cfg(not(feature = "cassette"))]
pub(crate) type Body = Incoming;

/// An answer's body as the dialects read it: the server's, or a
/// recording's.
#[cfg(feature = "cassette")]
pub(crate) type Body = http_body_util::Either<Incoming, Recorded>;

/// A recorded answer's body, piece by piece as it was recorded.
#[cfg(feature = "cassette")]
pub(crate) type Recorded = http_body_util::StreamBody<
    futures_util::stream::BoxStream<
        'static,
        Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
    >,
>;

/// An answer, its body to read.
pub(crate) type Response = http::Response<Body>;

/// The server's answer as the dialects read it.
pub(crate) fn live(response: http::Response<Incoming>) -> Response {
    #[cfg(feature = "cassette")]
    let response = response.map(http_body_util::Either::Left);
    response
}

/// The pooled client.
#[derive(Clone)]
pub(crate) struct Client {
    hyper: hyper_util::client::legacy::Client<Connector, RequestBody>,
    proxies: Option<Arc<Matcher>>,
}

impl Client {
    /// A client whose connections take at most `connect` to open, with
    /// `tls` for `https` servers and the environment's proxies.
    pub(crate) fn new(connect: Duration, tls: ClientConfig) -> Self {
        let proxies = proxies_from_env();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        // Each address's own try; `Connector` bounds the whole connection.
        http.set_connect_timeout(Some(connect));
        // As reqwest and curl: a request's last bytes go out at once.
        http.set_nodelay(true);
        // As reqwest: a pooled connection whose peer went away (a server
        // restarted, a NAT that forgot the flow) is found out within a
        // minute, not by the next request's time-out.
        http.set_keepalive(Some(Duration::from_secs(15)));
        http.set_keepalive_interval(Some(Duration::from_secs(15)));
        http.set_keepalive_retries(Some(3));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        // A proxy's own TLS offers no protocol by ALPN: what is asked of
        // it (`CONNECT`) is HTTP/1.1 whatever the server behind speaks.
        let to_proxy = proxies.is_some().then(|| {
            let mut plain = tls.clone();
            plain.alpn_protocols.clear();
            HttpsConnector::from((http.clone(), Arc::new(plain)))
        });
        let tls = Arc::new(tls);
        let connector = Connector {
            direct: HttpsConnector::from((http, Arc::clone(&tls))),
            to_proxy,
            tls,
            proxies: proxies.clone(),
            connect,
        };
        let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            // Idle connections close after 90 s, as reqwest's.
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Self { hyper, proxies }
    }

    /// Sends `request`; the answer's head comes back, its body to read.
    pub(crate) fn request(
        &self,
        request: http::Request<RequestBody>,
    ) -> hyper_util::client::legacy::ResponseFuture {
        self.hyper.request(request)
    }

    /// The `Proxy-Authorization` a request to `url` carries: an `http`
    /// server reached through a proxy with credentials is asked for through
    /// it (an `https` one's tunnel carries them instead).
    pub(crate) fn proxy_authorization(&self, url: &Uri) -> Option<HeaderValue> {
        let proxies = self.proxies.as_ref()?;
        if url.scheme() != Some(&Scheme::HTTP) {
            return None;
        }
        proxies.intercept(url)?.basic_auth().cloned()
    }
}

/// The proxies the environment names, `None` where it names none (most
/// programs: no lookup then, per connection or request).
fn proxies_from_env() -> Option<Arc<Matcher>> {
    const NAMES: [&str; 6] = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ];
    NAMES
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
        .then(|| Arc::new(Matcher::from_env()))
}

/// Opens connections: directly, or through the proxy the environment names
/// for the server.
#[derive(Clone)]
pub(crate) struct Connector {
    direct: HttpsConnector<HttpConnector>,
    /// To the proxies (`Some` where there are any).
    to_proxy: Option<HttpsConnector<HttpConnector>>,
    tls: Arc<ClientConfig>,
    proxies: Option<Arc<Matcher>>,
    /// How long opening a connection may take in all: the name's lookup,
    /// the TCP connection, the proxy's tunnel and the TLS handshake.
    connect: Duration,
}

type Connecting = Pin<Box<dyn Future<Output = Result<Io, BoxError>> + Send>>;

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Connectors made per call are always ready, as `HttpConnector` is.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, server: Uri) -> Self::Future {
        let connect = self.connect;
        let proxy = self
            .proxies
            .as_ref()
            .and_then(|proxies| proxies.intercept(&server));
        let to_proxy = self.to_proxy.as_mut();
        let (connecting, proxied): (Connecting, bool) = match (proxy, to_proxy) {
            (Some(proxy), Some(to_proxy)) if server.scheme() == Some(&Scheme::HTTPS) => {
                // TLS to the server inside a tunnel through the proxy
                // (itself reached over TLS when its URL is `https`).
                let mut headers = HeaderMap::new();
                headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
                if let Some(auth) = proxy.basic_auth() {
                    headers.insert(PROXY_AUTHORIZATION, auth.clone());
                }
                let tunnel =
                    Tunnel::new(proxy.uri().clone(), to_proxy.clone()).with_headers(headers);
                let tunneled = HttpsConnector::from((tunnel, Arc::clone(&self.tls))).call(server);
                let connecting = async move { Ok(Io::Secure(Box::new(tunneled.await?))) };
                (Box::pin(connecting), false)
            }
            // The proxy is asked for the server's absolute URL.
            (Some(proxy), Some(to_proxy)) => {
                let connecting = to_proxy.call(proxy.uri().clone());
                (
                    Box::pin(async move { Ok(Io::from(connecting.await?)) }),
                    true,
                )
            }
            _ => {
                let connecting = self.direct.call(server);
                (
                    Box::pin(async move { Ok(Io::from(connecting.await?)) }),
                    false,
                )
            }
        };
        Box::pin(async move {
            // As reqwest: a server that takes the connection and never
            // finishes its handshake fails the request within `connect`.
            match tokio::time::timeout(connect, connecting).await {
                Ok(io) => Ok(Conn { io: io?, proxied }),
                Err(_) => {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "connecting timed out").into())
                }
            }
        })
    }
}

/// One connection, to the server or to a proxy asked for it.
pub(crate) struct Conn {
    io: Io,
    /// Requests on it name the absolute URL (a proxy's connection).
    proxied: bool,
}

/// A connection's stream. TLS's is boxed: its state is a kilobyte, which
/// every plain connection (each in its own task) would otherwise hold too.
enum Io {
    Plain(TokioIo<TcpStream>),
    Secure(Box<dyn Stream>),
}

/// What a connection is read and written through.
trait Stream: Read + Write + Connection + Unpin + Send {}

impl<T: Read + Write + Connection + Unpin + Send> Stream for T {}

impl From<MaybeHttpsStream<TokioIo<TcpStream>>> for Io {
    fn from(stream: MaybeHttpsStream<TokioIo<TcpStream>>) -> Self {
        match stream {
            MaybeHttpsStream::Http(tcp) => Io::Plain(tcp),
            secure @ MaybeHttpsStream::Https(_) => Io::Secure(Box::new(secure)),
        }
    }
}

impl Conn {
    fn stream(&mut self) -> Pin<&mut dyn Stream> {
        match &mut self.io {
            Io::Plain(tcp) => Pin::new(tcp),
            Io::Secure(stream) => Pin::new(&mut **stream),
        }
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        let connected = match &self.io {
            Io::Plain(tcp) => tcp.connected(),
            Io::Secure(stream) => stream.connected(),
        };
        connected.proxy(self.proxied)
    }
}

impl Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_read(cx, buf)
    }
}

impl Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().stream().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().stream().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(tcp) => tcp.is_write_vectored(),
            Io::Secure(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().stream().poll_shutdown(cx)
    }
}
