//! Cassettes at the HTTP layer: the raw bytes of each exchange, replayed
//! through the dialect's real decoder: [`WireCassette`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cassette::{
    CassetteFile, Loaded, Mode, RECORD_VAR, VERSION, differences, mismatch, write_file,
};
use super::redact::{MASK, Secrets};
use crate::provider::dialect::{Dialect, Http};
use crate::provider::{
    Observe, Outcome, ProviderError, Replay, Replayed, WireRequest, WireResponse,
};

/// Response headers that differ on every call, or say who the account is:
/// their values are masked on record.
const VOLATILE_HEADERS: [&str; 9] = [
    "date",
    "set-cookie",
    "cf-ray",
    "x-request-id",
    "request-id",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
    "x-goog-request-id",
];

/// A cassette of raw HTTP exchanges: what a dialect sent (credentials
/// redacted) and the bytes it got back, piece by piece with their timing.
/// Replayed, the bytes go through the dialect's own decoder, so a test
/// covers the wire format too — the layer below [`Cassette`](super::Cassette),
/// which keeps decoded events and works for any provider.
///
/// Modes as [`Cassette`](super::Cassette)'s (`FERROBOT_RECORD`). Exchanges
/// are matched in order by method, path and body (JSON compared field by
/// field, [`ignore`](Self::ignore) paths left out); the host and port are
/// not compared, so a recording made against a local server on any port
/// replays anywhere. Replayed at full speed unless
/// [`with_timing`](Self::with_timing). It takes the provider's observer
/// slot.
///
/// Recorded, credentials are masked as `[redacted]`: authorization and key
/// headers, keys in the query (`?key=…`), the values of headers that
/// change on every call or name the account (`date`, `set-cookie`, request
/// ids, organization ids), and whatever [`redact`](Self::redact) and
/// [`redact_header`](Self::redact_header) add — in the body too, even when
/// a secret arrived split across two pieces.
///
/// # Examples
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> ferrobot::Result<()> {
/// use ferrobot::{Agent, provider::OpenAiCompatible, testing::WireCassette};
///
/// let server = OpenAiCompatible::new("http://localhost:8080/v1").model("qwen3:8b");
/// let provider = WireCassette::new("tests/cassettes/hello.wire.json").wrap(server);
/// let agent = Agent::builder().provider(provider).build();
/// println!("{}", agent.handle("t", "hi").await?.text);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WireCassette(Arc<Inner>);

struct Inner {
    path: PathBuf,
    settings: Settings,
    state: Mutex<State>,
}

/// How the cassette records and compares.
#[derive(Clone)]
struct Settings {
    mode: Mode,
    timing: bool,
    ignored: Vec<String>,
    secrets: Secrets,
    /// Headers whose values are masked, lowercase.
    masked_headers: Vec<String>,
}

struct State {
    file: Loaded<File>,
    /// How many recorded exchanges were replayed, in order.
    played: usize,
    /// Exchanges being recorded, by the observer's number.
    recording: HashMap<u64, Recording>,
    /// When each recorded exchange's last piece came.
    last_piece: HashMap<u64, Instant>,
}

/// An exchange being recorded, with the answer's pieces as they came
/// (masked once all came) and the pause before each, in milliseconds.
struct Recording {
    exchange: Exchange,
    pieces: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct File {
    ferrobot_wire_cassette: u32,
    exchanges: Vec<Exchange>,
}

impl CassetteFile for File {
    fn version(&self) -> u32 {
        self.ferrobot_wire_cassette
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Exchange {
    method: String,
    /// The URL as sent, credentials redacted; only its path is compared.
    url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    request_headers: Vec<(String, String)>,
    /// The body: JSON when it is, else text.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    body: Value,
    status: u16,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<(String, String)>,
    pieces: Vec<Piece>,
}

/// A piece of the answer's body: text when it is UTF-8 on its own, base64
/// otherwise (a piece that ends inside a character).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Piece {
    #[serde(default)]
    after_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base64: Option<String>,
}

impl std::fmt::Debug for WireCassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireCassette")
            .field("path", &self.0.path)
            .field("mode", &self.0.settings.mode)
            .finish_non_exhaustive()
    }
}

impl WireCassette {
    /// A wire cassette at `path`, in the mode `FERROBOT_RECORD` asks for.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::build(
            path.into(),
            Settings {
                mode: Mode::from_env(),
                timing: false,
                ignored: Vec::new(),
                secrets: Secrets::default(),
                masked_headers: VOLATILE_HEADERS.map(str::to_owned).to_vec(),
            },
        )
    }

    fn build(path: PathBuf, settings: Settings) -> Self {
        Self(Arc::new(Inner {
            path,
            settings,
            state: Mutex::new(State {
                file: Loaded::default(),
                played: 0,
                recording: HashMap::new(),
                last_piece: HashMap::new(),
            }),
        }))
    }

    fn rebuild(self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = self.0.settings.clone();
        change(&mut settings);
        Self::build(self.0.path.clone(), settings)
    }

    /// Replays, records missing exchanges or records all, whatever the
    /// environment says.
    #[must_use]
    pub fn mode(self, mode: Mode) -> Self {
        self.rebuild(|settings| settings.mode = mode)
    }

    /// Replays each piece after the pause it came after, for tests of
    /// time-outs and streaming. By default, at full speed.
    #[must_use]
    pub fn with_timing(self) -> Self {
        self.rebuild(|settings| settings.timing = true)
    }

    /// Leaves a part of the request body out of the comparison: a dotted
    /// path into its JSON, `*` for any key or index (`messages.0.content`).
    #[must_use]
    pub fn ignore(self, path: impl Into<String>) -> Self {
        let path = path.into();
        self.rebuild(|settings| settings.ignored.push(path))
    }

    /// Masks `secret` as `[redacted]` wherever it appears in what is
    /// recorded (URL, headers, bodies), and in each request before it is
    /// compared. Replayed answers read `[redacted]` where it was.
    #[must_use]
    pub fn redact(self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        self.rebuild(|settings| settings.secrets.add(secret))
    }

    /// Masks the value of the header `name` (any case), in requests and
    /// answers, as `[redacted]`: a gateway's own credential header, say.
    #[must_use]
    pub fn redact_header(self, name: impl AsRef<str>) -> Self {
        let name = name.as_ref().to_ascii_lowercase();
        self.rebuild(|settings| settings.masked_headers.push(name))
    }

    /// The cassette's file.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// `provider` recording into this cassette and answered from it.
    pub fn wrap<D: Dialect>(&self, provider: Http<D>) -> Http<D> {
        provider
            .observe(Arc::new(self.clone()))
            .replay(Arc::new(self.clone()))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, message: impl Into<String>) -> ProviderError {
        ProviderError::InvalidRequest {
            provider: format!("the wire cassette {}", self.0.path.display()),
            message: message.into(),
        }
    }

    /// The file, read at the first exchange; in a recording mode a
    /// missing file starts empty.
    fn load<'s>(&self, file: &'s mut Loaded<File>) -> Result<&'s mut File, ProviderError> {
        let empty = || {
            Ok(File {
                ferrobot_wire_cassette: VERSION,
                exchanges: Vec::new(),
            })
        };
        file.get(&self.0.path, self.0.settings.mode, empty, |message| {
            self.error(message)
        })
    }
}

/// A body as the file keeps it: JSON when it is, else text.
fn body_value(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned().into())
}

/// A URL's path, without scheme, host, port or query.
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = rest.find('/').map_or("/", |at| &rest[at..]);
    path.split(['?', '#']).next().unwrap_or(path)
}

impl Replay for WireCassette {
    fn respond(&self, request: &WireRequest<'_>) -> Option<Result<Replayed, ProviderError>> {
        let mut state = self.state();
        let played = state.played;
        let file = match self.load(&mut state.file) {
            Ok(file) => file,
            Err(error) => return Some(Err(error)),
        };
        let Some(recorded) = file.exchanges.get(played) else {
            return match self.0.settings.mode {
                Mode::Replay => Some(Err(self.error(format!(
                    "it holds {} exchange(s) and this is one more: record it with {RECORD_VAR}=missing",
                    file.exchanges.len()
                )))),
                // Recording: asked of the server, and kept.
                _ => None,
            };
        };
        let wanted = serde_json::json!({
            "method": recorded.method, "path": path_of(&recorded.url), "body": recorded.body,
        });
        let mut body = body_value(request.body);
        self.0.settings.secrets.value(&mut body);
        let path = self.0.settings.secrets.text(path_of(request.url));
        let now = serde_json::json!({
            "method": request.method, "path": path, "body": body,
        });
        let ignored: Vec<String> = self
            .0
            .settings
            .ignored
            .iter()
            .map(|p| format!("body.{p}"))
            .collect();
        let differ = differences(&wanted, &now, &ignored);
        if !differ.is_empty() {
            return Some(Err(self.error(mismatch(played, &differ))));
        }
        let chunks = recorded
            .pieces
            .iter()
            .map(|piece| {
                let bytes = match (&piece.text, &piece.base64) {
                    (Some(text), _) => Bytes::from(text.clone()),
                    (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map(Bytes::from)
                        .unwrap_or_default(),
                    (None, None) => Bytes::new(),
                };
                let pause = if self.0.settings.timing {
                    Duration::from_millis(piece.after_ms)
                } else {
                    Duration::ZERO
                };
                (pause, bytes)
            })
            .collect();
        let answer = Replayed::new(recorded.status, recorded.headers.clone(), chunks);
        state.played += 1;
        Some(Ok(answer))
    }
}

impl Observe for WireCassette {
    fn request(&self, exchange: u64, request: &WireRequest<'_>) {
        // Only what goes to the network is recorded: a replayed exchange
        // is in the file already.
        let settings = &self.0.settings;
        if settings.mode == Mode::Replay {
            return;
        }
        let mut state = self.state();
        // Read now: whether this exchange is one the file answers.
        let played = state.played;
        match self.load(&mut state.file) {
            Ok(file) if played >= file.exchanges.len() => {}
            _ => return,
        }
        let mut body = body_value(request.body);
        settings.secrets.value(&mut body);
        let recorded = Exchange {
            method: request.method.to_owned(),
            url: settings
                .secrets
                .text(&redact_query(request.url))
                .into_owned(),
            request_headers: self.masked(request.headers),
            body,
            ..Exchange::default()
        };
        state.recording.insert(
            exchange,
            Recording {
                exchange: recorded,
                pieces: Vec::new(),
            },
        );
        state.last_piece.insert(exchange, Instant::now());
    }

    fn response(&self, exchange: u64, response: &WireResponse<'_>) {
        let mut state = self.state();
        let now = Instant::now();
        if let Some(Recording {
            exchange: recorded, ..
        }) = state.recording.get_mut(&exchange)
        {
            recorded.status = response.status;
            recorded.headers = self.masked(response.headers);
            state.last_piece.insert(exchange, now);
        }
    }

    fn chunk(&self, exchange: u64, bytes: &[u8]) {
        let mut state = self.state();
        let now = Instant::now();
        let after = state.last_piece.insert(exchange, now).map_or(0, |before| {
            u64::try_from(now.duration_since(before).as_millis()).unwrap_or(u64::MAX)
        });
        if let Some(recording) = state.recording.get_mut(&exchange) {
            recording.pieces.push((after, bytes.to_vec()));
        }
    }

    fn end(&self, exchange: u64, outcome: Outcome<'_>) {
        let mut state = self.state();
        state.last_piece.remove(&exchange);
        let Some(Recording {
            exchange: mut recorded,
            pieces,
        }) = state.recording.remove(&exchange)
        else {
            return;
        };
        // Kept once the whole answer came (an error status too); a call
        // given up before, or one that never got an answer, is not.
        if !matches!(outcome, Outcome::Complete) || recorded.status == 0 {
            return;
        }
        let Ok(file) = self.load(&mut state.file) else {
            return;
        };
        let bytes: Vec<Vec<u8>> = pieces.iter().map(|(_, bytes)| bytes.clone()).collect();
        let masked = self.0.settings.secrets.pieces(&bytes);
        recorded.pieces = pieces
            .iter()
            .zip(masked)
            .map(|((after_ms, _), bytes)| Piece::new(*after_ms, bytes))
            .collect();
        file.exchanges.push(recorded);
        let snapshot = file.clone();
        state.played = snapshot.exchanges.len();
        drop(state);
        if let Err(error) = write_file(&self.0.path, &snapshot) {
            tracing::warn!(%error, "the wire cassette could not be written");
        }
    }
}

impl WireCassette {
    /// Headers as recorded: the masked ones' values `[redacted]`, secrets
    /// masked in the rest.
    fn masked(&self, headers: &[(String, String)]) -> Vec<(String, String)> {
        let settings = &self.0.settings;
        headers
            .iter()
            .map(|(name, value)| {
                let masked = settings
                    .masked_headers
                    .iter()
                    .any(|masked| name.eq_ignore_ascii_case(masked));
                let value = if masked {
                    MASK.to_owned()
                } else {
                    settings.secrets.text(value).into_owned()
                };
                (name.clone(), value)
            })
            .collect()
    }
}

impl Piece {
    /// A piece as the file keeps it: text when it is UTF-8 on its own.
    fn new(after_ms: u64, bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(text) => Piece {
                after_ms,
                text: Some(text),
                base64: None,
            },
            Err(error) => Piece {
                after_ms,
                text: None,
                base64: Some(base64::engine::general_purpose::STANDARD.encode(error.as_bytes())),
            },
        }
    }
}

/// A URL with the values of query parameters that carry keys redacted
/// (`?key=…`, as some vendors take an API key).
fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _))
                if matches!(
                    name.to_ascii_lowercase().as_str(),
                    "key" | "api_key" | "apikey" | "token" | "access_token"
                ) =>
            {
                format!("{name}=[redacted]")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}
