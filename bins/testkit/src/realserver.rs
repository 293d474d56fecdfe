//! The real llama.cpp server of `../shared/realserver`, started once per
//! test process and shared by its tests: for a test that must meet a server
//! nobody here wrote. See `../shared/realserver/README.md` for how its tiny
//! model answers.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::outside;

/// The first start installs the server (about a minute on 2 cores).
const READY_WITHIN: Duration = Duration::from_secs(300);

/// A running real server.
#[derive(Debug)]
pub struct RealServer {
    addr: SocketAddr,
    log: PathBuf,
}

impl RealServer {
    /// The server this test process shares, started on first use; `None`
    /// after a loud skip when it can't be had locally (under CI, a missing
    /// or failing server fails the test instead).
    ///
    /// It runs in a process group of its own with its output in a log file
    /// (never the test's), and goes away with the test process: a watchdog
    /// in its group stops the group once the test process is gone.
    ///
    /// # Panics
    /// Under CI, when the server is missing or doesn't start.
    pub fn shared() -> Option<&'static RealServer> {
        static SERVER: OnceLock<Result<RealServer, String>> = OnceLock::new();
        match SERVER.get_or_init(start) {
            Ok(server) => Some(server),
            Err(why) => {
                outside::missing(why);
                None
            }
        }
    }

    /// The OpenAI-compatible base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The model it serves.
    pub fn model(&self) -> &'static str {
        "tiny"
    }

    /// The file its output goes to.
    pub fn log(&self) -> &std::path::Path {
        &self.log
    }
}

fn start() -> Result<RealServer, String> {
    let serve = outside::shared_dir().join("realserver/serve");
    if !serve.is_file() {
        return Err(format!(
            "the real model server is missing at {}",
            serve.display()
        ));
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("the real model server found no free loopback port ({e})"))?
        .port();
    let log = std::env::temp_dir().join(format!("ferrobot-realserver-{port}.log"));
    let output = std::fs::File::create(&log).map_err(|e| {
        format!(
            "the real model server's log file {} could not be made ({e})",
            log.display()
        )
    })?;
    let errors = output
        .try_clone()
        .map_err(|e| format!("the real model server's log file could not be shared ({e})"))?;
    // The shell leads the group: it starts the server, waits while both the
    // test process and the server live, then stops the whole group.
    let watchdog = r#""$0" "$1" & server=$!
while kill -0 "$2" 2>/dev/null && kill -0 "$server" 2>/dev/null; do sleep 0.5; done
kill -TERM 0 2>/dev/null"#;
    Command::new("sh")
        .arg("-c")
        .arg(watchdog)
        .arg(&serve)
        .arg(port.to_string())
        .arg(std::process::id().to_string())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        .spawn()
        .map_err(|e| {
            format!(
                "the real model server ({}) could not be started: {e}",
                serve.display()
            )
        })?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while started.elapsed() < READY_WITHIN {
        if healthy(addr) {
            return Ok(RealServer { addr, log });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let tail: String = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .rev()
        .take(15)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    Err(format!(
        "the real model server was not ready within {} s (its log, {}, ends:\n{tail})",
        READY_WITHIN.as_secs(),
        log.display()
    ))
}

/// Whether `GET /health` answers 200.
fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
}
