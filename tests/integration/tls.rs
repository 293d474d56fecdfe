//! HTTPS to a model server: the library's own TLS set-up meets a real
//! rustls server over loopback, agrees a cipher suite and a key exchange,
//! streams an answer from a server whose certificate the system trusts, and
//! refuses one that no trusted root vouches for.
//!
//! The server's certificate and key (`tests/fixtures/tls/`) are a
//! self-signed pair for `localhost` and `127.0.0.1`, made for these tests
//! only, by `openssl req -x509 -newkey ec -pkeyopt
//! ec_paramgen_curve:prime256v1 -nodes -days 36500 -subj "/O=ferrobot
//! tests/CN=ferrobot test server" -addext
//! "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext
//! "basicConstraints=critical,CA:FALSE" -addext "extendedKeyUsage=serverAuth"`
//! (a subject no system root shares). The system's roots are read as the
//! platform verifier reads them: `SSL_CERT_FILE` names them where it is
//! set, so the test that trusts the certificate runs in a child process
//! with it set.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::Message;
use ferrobot::provider::{OpenAiCompatible, RetryPolicy};
use ferrobot::testing::text_sse;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use crate::support::assemble;

const CERT_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tls/localhost.cert.pem"
);
const CERT: &[u8] = include_bytes!("../fixtures/tls/localhost.cert.pem");
const KEY: &[u8] = include_bytes!("../fixtures/tls/localhost.key.pem");

/// What the server saw of each connection: the protocol, suite and group
/// it agreed, or why the handshake ended.
type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTPS model server on loopback with the self-signed certificate,
/// answering every request with a streamed "Hello over TLS."; its URL and
/// what it saw.
async fn server() -> (String, Seen) {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from_pem_slice(CERT).expect("test certificate")],
        PrivateKeyDer::from_pem_slice(KEY).expect("test key"),
    )
    .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let stream = match acceptor.accept(socket).await {
                    Ok(stream) => stream,
                    Err(error) => {
                        log.lock().unwrap().push(format!("ended: {error}"));
                        return;
                    }
                };
                let (_, connection) = stream.get_ref();
                log.lock().unwrap().push(format!(
                    "{:?} {:?} {:?} {}",
                    connection.protocol_version(),
                    connection.negotiated_cipher_suite().map(|s| s.suite()),
                    connection.negotiated_key_exchange_group().map(|g| g.name()),
                    String::from_utf8_lossy(connection.alpn_protocol().unwrap_or(b"-")),
                ));
                let log = Arc::clone(&log);
                let respond = service_fn(move |request: hyper::Request<Incoming>| {
                    log.lock().unwrap().push(format!("{:?}", request.version()));
                    async {
                        let response = hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Full::new(Bytes::from(text_sse("Hello over TLS."))))
                            .expect("a response");
                        Ok::<_, hyper::Error>(response)
                    }
                });
                // HTTP/1.1, or h2 where the client asked for it by ALPN.
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), respond)
                    .await;
            });
        }
    });
    (format!("https://localhost:{port}/v1"), seen)
}

/// What the server saw, once it has seen a connection (it reads the
/// client's alert on its own task).
async fn first_seen(seen: &Seen) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen.lock().unwrap().clone()
}

fn provider(url: String) -> OpenAiCompatible {
    OpenAiCompatible::new(url)
        .model("m")
        .retry(RetryPolicy::none())
}

#[tokio::test]
async fn a_certificate_no_trusted_root_vouches_for_is_refused() {
    let (url, seen) = server().await;
    let error = assemble(&provider(url), &[Message::user("hi")])
        .await
        .expect_err("a certificate no trusted root signed must be refused");
    let text = error.chain();
    assert!(
        text.contains("certificate") && text.contains("UnknownIssuer"),
        "the error should say the certificate isn't trusted: {text}"
    );
    // The client got as far as reading the certificate (a suite and a
    // group agreed with the library's provider), then sent the alert that
    // ended the handshake.
    let seen = first_seen(&seen).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("UnknownCA"), "{seen:?}");
}

/// Runs [`trusted_in_this_process`] in a child process whose
/// `SSL_CERT_FILE` names the test certificate.
#[test]
fn a_server_the_system_trusts_streams_its_answer() {
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "tls::trusted_in_this_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("SSL_CERT_FILE", CERT_FILE)
        .env_remove("SSL_CERT_DIR")
        .output()
        .expect("the child test runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran no test: {text}");
}

#[tokio::test]
#[ignore = "run by a_server_the_system_trusts_streams_its_answer, with SSL_CERT_FILE set"]
async fn trusted_in_this_process() {
    assert_eq!(
        std::env::var_os("SSL_CERT_FILE").as_deref(),
        Some(std::ffi::OsStr::new(CERT_FILE)),
        "run by a_server_the_system_trusts_streams_its_answer"
    );
    let (url, seen) = server().await;
    let assembled = assemble(&provider(url), &[Message::user("hi")])
        .await
        .expect("a trusted server's answer");
    assert_eq!(assembled.message.text(), "Hello over TLS.");
    let seen = first_seen(&seen).await;
    // TLS 1.3 with AES-GCM and X25519: what a current server and the
    // library's provider agree on; h2 with the `http2` feature (offered by
    // ALPN, and spoken), else HTTP/1.1.
    let (alpn, version) = if cfg!(feature = "http2") {
        ("h2", "HTTP/2.0")
    } else {
        ("http/1.1", "HTTP/1.1")
    };
    assert_eq!(
        seen,
        [
            format!("Some(TLSv1_3) Some(TLS13_AES_256_GCM_SHA384) Some(X25519) {alpn}"),
            version.to_owned(),
        ],
        "{seen:?}"
    );
}
