//! The HTTP endpoint every dialect talks through.
//!
//! An [`Endpoint`] holds what a model server needs whatever its dialect: the
//! base URL, the model, the API key (never shown), extra headers, default
//! sampling settings, time-outs, the [`RetryPolicy`], the client, and an
//! [`Observe`]r of the bytes on the wire. It sends requests, probes health and
//! reads metadata; a [`Dialect`](super::dialect::Dialect) says only what goes
//! in a request and how to read the answer.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use http_body_util::BodyExt as _;
use serde_json::Value;

use super::client::{Client, RequestBody, Response, USER_AGENT_VALUE, live};
use super::http::{
    CONNECT_TIMEOUT, READ_TIMEOUT, build_client, error_message, redact, retry_after,
    transport_error,
};
use super::observe::{Observe, Outcome, WireRequest, WireResponse};
#[cfg(feature = "cassette")]
use super::observe::{Replay, Replayed};
use super::timer::{Timer, Timers};
use super::{Health, ProviderError, RetryPolicy};

/// How a dialect's server takes the API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (`OpenAI`, Ollama behind a proxy, most gateways).
    Bearer,
    /// The key alone, in the header of this (lowercase) name, e.g. `x-api-key`.
    Named(&'static str),
}

/// How long health probes wait, in all.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a metadata request (a model list, a model's card) may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// One model server as every dialect sees it: where it is, how to
/// authenticate, how patient to be, and who watches the wire.
///
/// Dialects get it from [`Http`](super::dialect::Http); its getters are what
/// a [`Dialect`](super::dialect::Dialect) reads to write a request body, and
/// [`get_json`](Self::get_json), [`post_json`](Self::post_json) and
/// [`probe`](Self::probe) are what its `health` and `context_window` call.
/// Its `Debug` output never shows the key, nor the values of credential
/// headers.
#[derive(Clone)]
pub struct Endpoint {
    base_url: String,
    model: String,
    key: Option<String>,
    key_header: KeyHeader,
    /// The dialect's own headers, sent with every request.
    dialect_headers: &'static [(&'static str, &'static str)],
    /// The caller's own headers, sent with every request.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// All the headers of a request with a JSON body, built once (by the
    /// setters) rather than for every request; or why they can't be.
    sent: Result<HeaderMap, String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    retry: RetryPolicy,
    connect_timeout: Duration,
    read_timeout: Duration,
    client: Result<Client, String>,
    /// A setter's input that can't be used (a header no HTTP can carry);
    /// every request fails with it, so that it is not silently dropped.
    problem: Option<String>,
    observer: Option<Arc<dyn Observe>>,
    /// The timers of requests that are done, kept for the next ones.
    timers: Arc<Timers>,
    /// Answers from a recording instead of the network, when set.
    #[cfg(feature = "cassette")]
    replay: Option<Arc<dyn Replay>>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), shown(value)))
            .collect();
        f.debug_struct("Endpoint")
            .field("base_url", &redact(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("headers", &headers)
            .field("retry", &self.retry)
            .field("timeouts", &(self.connect_timeout, self.read_timeout))
            .field("observed", &self.observer.is_some())
            .field("replayed", &self.has_replay())
            .finish_non_exhaustive()
    }
}

/// A header value as observers and `Debug` may see it.
fn shown(value: &HeaderValue) -> &str {
    if value.is_sensitive() {
        "[redacted]"
    } else {
        value.to_str().unwrap_or("[not text]")
    }
}

/// Whether a header's name says it carries a credential.
fn is_credential(name: &HeaderName) -> bool {
    let name = name.as_str();
    ["authorization", "cookie", "password", "secret"]
        .iter()
        .any(|word| name.contains(word))
        || name == "api-key"
        || name.ends_with("-key")
        || name.ends_with("-token")
}

/// Where requests go: the URL, parsed once rather than by every request,
/// and as messages show it (without `user:password@`).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    url: Result<Uri, String>,
    /// `Authorization: Basic …` from the URL's `user:password@`, which is
    /// taken out of the URL (as browsers and curl do): a server
    /// behind a proxy with basic authentication. A key's header wins.
    basic: Option<HeaderValue>,
    shown: Arc<str>,
}

impl Target {
    /// `url`, or why no request can go there (every request fails with
    /// it as a [`ProviderError::Config`]).
    pub(crate) fn new(url: &str) -> Self {
        let shown: Arc<str> = redact(url).into();
        let unusable = |why: String| {
            Err(format!(
                "requests can't go to `{shown}`: {why}; the base URL must be an http(s) address such as `http://localhost:11434/v1`"
            ))
        };
        let mut basic = None;
        // Parsed as browsers do (international names, spaces and other
        // characters a URI can't hold encoded), then as the URI requests name.
        let url = match url::Url::parse(url) {
            Ok(url) if !matches!(url.scheme(), "http" | "https") => unusable(format!(
                "its scheme `{}` is not http or https",
                url.scheme()
            )),
            Ok(url) if !url.has_host() => unusable("it names no host".to_owned()),
            Ok(mut url) => {
                basic = basic_auth(&mut url);
                url.as_str()
                    .parse::<Uri>()
                    .or_else(|e| unusable(e.to_string()))
            }
            Err(e) => unusable(e.to_string()),
        };
        Self { url, basic, shown }
    }

    /// The URL as messages and logs show it.
    pub(crate) fn shown(&self) -> &Arc<str> {
        &self.shown
    }
}

/// The `Authorization: Basic` header of `url`'s user and password, which
/// are taken out of it; `None` when it has neither.
fn basic_auth(url: &mut url::Url) -> Option<HeaderValue> {
    use base64::Engine as _;
    let decoded = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = decoded(url.username());
    let password = url.password().map(decoded);
    if user.is_empty() && password.is_none() {
        return None;
    }
    // Both setters succeed on an http(s) URL with a host.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let pair = format!("{user}:{}", password.unwrap_or_default());
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Distinguishes the exchanges an observer sees.
static EXCHANGES: AtomicU64 = AtomicU64::new(1);

impl Endpoint {
    /// An endpoint at `base_url` (trailing slashes dropped), sending keys as
    /// `key_header` and `headers` with every request, with no model and the
    /// default time-outs and retries.
    pub fn new(
        base_url: impl Into<String>,
        key_header: KeyHeader,
        headers: &'static [(&'static str, &'static str)],
    ) -> Self {
        let mut endpoint = Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            model: String::new(),
            key: None,
            key_header,
            dialect_headers: headers,
            headers: Vec::new(),
            sent: Ok(HeaderMap::new()),
            temperature: None,
            max_tokens: None,
            retry: RetryPolicy::default(),
            connect_timeout: CONNECT_TIMEOUT,
            read_timeout: READ_TIMEOUT,
            client: build_client(CONNECT_TIMEOUT),
            problem: None,
            observer: None,
            timers: Arc::default(),
            #[cfg(feature = "cassette")]
            replay: None,
        };
        endpoint.build_headers();
        endpoint
    }

    /// The base URL, as given (with any credentials in it).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model requests ask for; empty until one is set.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The default sampling temperature, when one was set.
    pub fn temperature(&self) -> Option<f32> {
        self.temperature
    }

    /// The default bound on generated tokens, when one was set.
    pub fn max_tokens(&self) -> Option<u32> {
        self.max_tokens
    }

    /// Whether an API key is set.
    pub fn has_api_key(&self) -> bool {
        self.key.is_some()
    }

    /// The key, for tests that check where it came from.
    #[cfg(test)]
    pub(crate) fn api_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// How long to wait for each next piece of an answer.
    pub fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// When to retry failed model calls.
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    pub(crate) fn set_model(&mut self, model: String) {
        self.model = model;
    }

    pub(crate) fn set_key(&mut self, key: &str) {
        let key = key.trim();
        self.key = (!key.is_empty()).then(|| key.to_owned());
        self.build_headers();
    }

    pub(crate) fn add_header(&mut self, name: &str, value: &str) {
        let text = name.trim();
        let name = HeaderName::from_bytes(text.as_bytes());
        let value = HeaderValue::from_str(value.trim());
        match (name, value) {
            (Ok(name), Ok(mut value)) => {
                value.set_sensitive(is_credential(&name));
                self.headers.retain(|(n, _)| *n != name);
                self.headers.push((name, value));
                self.build_headers();
            }
            (Err(_), _) => {
                self.problem = Some(format!("`{text}` is not a valid HTTP header name"));
            }
            (_, Err(_)) => {
                self.problem = Some(
                    "a header value holds characters no HTTP header can carry (a line break?)"
                        .to_owned(),
                );
            }
        }
    }

    pub(crate) fn set_temperature(&mut self, temperature: f32) {
        self.temperature = Some(temperature);
    }

    pub(crate) fn set_max_tokens(&mut self, max_tokens: u32) {
        self.max_tokens = Some(max_tokens);
    }

    pub(crate) fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
    }

    pub(crate) fn set_timeouts(&mut self, connect: Duration, read: Duration) {
        self.connect_timeout = connect;
        self.read_timeout = read;
        self.client = build_client(connect);
    }

    pub(crate) fn set_observer(&mut self, observer: Arc<dyn Observe>) {
        self.observer = Some(observer);
    }

    #[cfg(feature = "cassette")]
    pub(crate) fn set_replay(&mut self, replay: Arc<dyn Replay>) {
        self.replay = Some(replay);
    }

    #[cfg(feature = "cassette")]
    fn has_replay(&self) -> bool {
        self.replay.is_some()
    }

    /// Only the `cassette` feature answers from recordings: others never
    /// carry the hook.
    #[cfg(not(feature = "cassette"))]
    fn has_replay(&self) -> bool {
        false
    }

    /// The recorded answer to `wire`, when a replay hook has one.
    #[cfg(feature = "cassette")]
    fn replayed(&self, wire: &WireRequest<'_>) -> Option<Result<Response, ProviderError>> {
        let answer = self.replay.as_ref()?.respond(wire)?;
        Some(answer.map(replayed_response))
    }

    #[cfg(not(feature = "cassette"))]
    fn replayed(&self, _: &WireRequest<'_>) -> Option<Result<Response, ProviderError>> {
        None
    }

    /// A configuration error unless a model is set; `example` names one.
    pub(crate) fn require_model(&self, example: &str) -> Result<(), ProviderError> {
        if self.model.is_empty() {
            return Err(ProviderError::Config(format!(
                "no model set for {}: call `.model(\"…\")`, e.g. `.model(\"{example}\")`",
                redact(&self.base_url)
            )));
        }
        Ok(())
    }

    /// Builds the headers every JSON request sends, after what goes into
    /// them changed.
    fn build_headers(&mut self) {
        self.sent = self.headers(true);
    }

    /// The headers of every request: `Content-Type` for a `json` body, the
    /// dialect's own, the key, the caller's (in that order, as observers
    /// and recordings list them).
    fn headers(&self, json: bool) -> Result<HeaderMap, String> {
        let headers = self.dialect_headers;
        let mut map = HeaderMap::with_capacity(headers.len() + self.headers.len() + 2);
        if json {
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        if let Some(key) = &self.key {
            let (name, value) = match self.key_header {
                KeyHeader::Bearer => (
                    AUTHORIZATION,
                    HeaderValue::from_str(&format!("Bearer {key}")),
                ),
                KeyHeader::Named(name) => {
                    (HeaderName::from_static(name), HeaderValue::from_str(key))
                }
            };
            let mut value = value.map_err(|_| {
                "the API key holds characters no HTTP header can carry; check it for stray quotes or line breaks"
                    .to_owned()
            })?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        for (name, value) in &self.headers {
            map.insert(name.clone(), value.clone());
        }
        Ok(map)
    }

    /// A timer for one request, to give [`send`](Self::send).
    pub(crate) fn timer(&self) -> Timer {
        self.timers.timer()
    }

    /// Sends one request: `body` as JSON when given, the dialect's own
    /// headers, the key and the caller's headers. Waits at most `wait` for
    /// the response head, on `timer`; an error status comes back as
    /// [`ProviderError::Status`] with the server's message. What it sends and
    /// receives goes to the observer, if any.
    pub(crate) async fn send(
        &self,
        method: Method,
        target: &Target,
        body: Option<Bytes>,
        wait: Duration,
        timer: &mut Timer,
    ) -> Result<(Response, Option<Tap>), ProviderError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ProviderError::Config(e.clone()))?;
        if let Some(problem) = &self.problem {
            return Err(ProviderError::Config(problem.clone()));
        }
        let url = target
            .url
            .as_ref()
            .map_err(|e| ProviderError::Config(e.clone()))?;
        // A chat request's headers are the ones built already.
        let mut map = match body {
            Some(_) => self.sent.clone(),
            None => self.headers(false),
        }
        .map_err(ProviderError::Config)?;
        let shown_url = &*target.shown;
        let listed_headers = (self.observer.is_some() || self.has_replay()).then(|| listed(&map));
        // The URL's own credentials, unless the key took the header (not
        // shown to observers, as they never were).
        if let Some(basic) = &target.basic
            && !map.contains_key(AUTHORIZATION)
        {
            map.insert(AUTHORIZATION, basic.clone());
        }
        let wire = WireRequest {
            method: method.as_str(),
            url: shown_url,
            headers: listed_headers.as_deref().unwrap_or_default(),
            body: body.as_deref().unwrap_or_default(),
        };
        let tap = self.observer.as_ref().map(|observer| {
            let tap = Tap::new(observer.clone());
            observer.request(tap.exchange, &wire);
            tap
        });
        let sent = match self.replayed(&wire) {
            Some(answer) => answer,
            None => {
                // What every client sends, unless the caller's headers say
                // otherwise (not shown to observers, as they never were).
                map.entry(USER_AGENT)
                    .or_insert(HeaderValue::from_static(USER_AGENT_VALUE));
                map.entry(ACCEPT).or_insert(HeaderValue::from_static("*/*"));
                if let Some(proxy) = client.proxy_authorization(url) {
                    map.entry(http::header::PROXY_AUTHORIZATION)
                        .or_insert(proxy);
                }
                let mut request = http::Request::new(RequestBody::new(body.unwrap_or_default()));
                *request.method_mut() = method;
                *request.uri_mut() = url.clone();
                *request.headers_mut() = map;
                timer.set_after(wait);
                let mut executing = std::pin::pin!(client.request(request));
                // The request first, as `tokio::time::timeout` does.
                let head = std::future::poll_fn(|cx| match executing.as_mut().poll(cx) {
                    Poll::Ready(result) => Poll::Ready(Some(result)),
                    Poll::Pending => timer.poll_elapsed(cx).map(|()| None),
                });
                match head.await {
                    Some(result) => result
                        .map(live)
                        .map_err(|e| transport_error(shown_url, wait, e)),
                    None => Err(ProviderError::Timeout {
                        endpoint: shown_url.to_string(),
                        after: wait,
                    }),
                }
            }
        };
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                if let Some(tap) = tap {
                    tap.end(Outcome::Failed(&error));
                }
                return Err(error);
            }
        };
        let status = response.status();
        if let Some(tap) = &tap {
            let headers = listed(response.headers());
            tap.observer.response(
                tap.exchange,
                &WireResponse {
                    status: status.as_u16(),
                    headers: &headers,
                },
            );
        }
        if status.is_success() {
            return Ok((response, tap));
        }
        // Boxed: the error body's read (rare) would otherwise size every
        // request's future.
        Err(Box::pin(self.refused(response, tap, wait)).await)
    }

    /// The error an answer with an error status makes: the server's message
    /// from its body, read whole within `wait` (a server that sends the head
    /// and stalls still has its status reported).
    async fn refused(&self, response: Response, tap: Option<Tap>, wait: Duration) -> ProviderError {
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let (head, body) = response.into_parts();
        let headers = head.headers;
        let body = tokio::time::timeout(wait, body.collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|body| body.to_bytes())
            .unwrap_or_default();
        // Some servers quote the key they refused: it goes no further.
        let body = self.without_key(&String::from_utf8_lossy(&body));
        if let Some(tap) = tap {
            tap.chunk(body.as_bytes());
            tap.end(Outcome::Complete);
        }
        // A redirect is not followed (a request's body would go wherever a
        // server said): it says where to point the base URL instead.
        let moved = status
            .is_redirection()
            .then(|| response_location(&headers))
            .flatten();
        let message = match moved {
            Some(to) => format!(
                "the server redirects to {to}, and requests follow no redirects: set the base URL to where it points"
            ),
            None => error_message(&body),
        };
        ProviderError::Status {
            status: status.as_u16(),
            message,
            retry_after,
        }
    }

    /// `text` with the API key, wherever it appears, as `[redacted]`. A key
    /// shorter than 8 characters (a placeholder such as `none`) is left:
    /// masking it would garble the text and hide nothing.
    fn without_key(&self, text: &str) -> String {
        match self.key.as_deref() {
            Some(key) if key.len() >= 8 && text.contains(key) => text.replace(key, "[redacted]"),
            _ => text.to_owned(),
        }
    }

    /// GETs `url` (with the key and headers) and reads the answer as JSON.
    ///
    /// # Errors
    /// As a model call's: [`ProviderError::Connect`], `Timeout` (after ten
    /// seconds), `Status` with the server's message, or `Decode` when the
    /// answer is not JSON.
    pub async fn get_json(&self, url: &str) -> Result<Value, ProviderError> {
        self.json(Method::GET, url, None, METADATA_TIMEOUT).await
    }

    /// POSTs `body` as JSON to `url` (with the key and headers) and reads the
    /// answer as JSON, e.g. Ollama's `/api/show`.
    ///
    /// # Errors
    /// As [`get_json`](Self::get_json).
    pub async fn post_json(&self, url: &str, body: &Value) -> Result<Value, ProviderError> {
        let body = Bytes::from(body.to_string());
        self.json(Method::POST, url, Some(body), METADATA_TIMEOUT)
            .await
    }

    async fn json(
        &self,
        method: Method,
        url: &str,
        body: Option<Bytes>,
        wait: Duration,
    ) -> Result<Value, ProviderError> {
        let target = Target::new(url);
        let shown_url = &*target.shown;
        let read = async {
            let (response, tap) = self
                .send(method, &target, body, wait, &mut self.timer())
                .await?;
            let bytes = response
                .into_body()
                .collect()
                .await
                .map(|body| body.to_bytes());
            if let (Some(tap), Ok(bytes)) = (&tap, &bytes) {
                tap.chunk(bytes);
            }
            let bytes = bytes.map_err(|e| transport_error(shown_url, wait, e));
            if let Some(tap) = tap {
                match &bytes {
                    Ok(_) => tap.end(Outcome::Complete),
                    Err(error) => tap.end(Outcome::Failed(error)),
                }
            }
            serde_json::from_slice(&bytes?).map_err(|e| ProviderError::Decode {
                message: format!("{e} in the answer of {shown_url}"),
            })
        };
        match tokio::time::timeout(wait, read).await {
            Ok(result) => result,
            Err(_) => Err(ProviderError::Timeout {
                endpoint: shown_url.to_owned(),
                after: wait,
            }),
        }
    }

    /// A health probe of `url` for servers whose answer says nothing more than
    /// that they are there: reachable and answering 2xx within five seconds.
    /// With `model`, `url` names that model, and a 404 means the server lacks
    /// it.
    pub async fn probe(&self, url: &str, model: Option<&str>) -> Health {
        let started = Instant::now();
        let shown_url = redact(url);
        match tokio::time::timeout(PROBE_TIMEOUT, self.get_json(url)).await {
            Err(_) => Health::unreachable(
                started.elapsed(),
                format!("{shown_url} did not answer within 5s"),
            ),
            Ok(Err(ProviderError::Status { status: 404, .. })) if model.is_some() => {
                let model = model.unwrap_or_default();
                let mut health = Health::problem(
                    started.elapsed(),
                    format!(
                        "the server has no model `{model}`; check the name against its model list"
                    ),
                );
                health.model_present = Some(false);
                health
            }
            // An answer that isn't JSON still says the server is there.
            Ok(Err(ProviderError::Decode { .. })) | Ok(Ok(_)) => {
                let mut health = Health::ok(started.elapsed());
                health.model_present = model.map(|_| true);
                health
            }
            Ok(Err(error)) => unhealthy(started, &error),
        }
    }

    /// A health probe of a model list at `url`: `listed` says whether the
    /// answer lists the model (`None` when it can't tell). An error status
    /// means the server is there but unhappy: a bad key, a proxy, a server
    /// without that path.
    pub async fn probe_list(
        &self,
        url: &str,
        listed: impl FnOnce(&Value) -> Option<bool>,
    ) -> Health {
        let started = Instant::now();
        let shown_url = redact(url);
        match tokio::time::timeout(PROBE_TIMEOUT, self.get_json(url)).await {
            Err(_) => Health::unreachable(
                started.elapsed(),
                format!("{shown_url} did not answer within 5s"),
            ),
            Ok(Ok(list)) => {
                let mut health = Health::ok(started.elapsed());
                health.model_present = listed(&list);
                health
            }
            Ok(Err(ProviderError::Decode { .. })) => {
                let mut health = Health::ok(started.elapsed());
                health.model_present = None;
                health
            }
            Ok(Err(error @ ProviderError::Status { .. })) => {
                Health::problem(started.elapsed(), format!("{shown_url}: {}", error.chain()))
            }
            Ok(Err(error)) => unhealthy(started, &error),
        }
    }
}

/// The health of a probe that failed with `error`.
fn unhealthy(started: Instant, error: &ProviderError) -> Health {
    match error {
        ProviderError::Connect { .. } | ProviderError::Timeout { .. } => {
            Health::unreachable(started.elapsed(), error.chain())
        }
        ProviderError::Config(message) => Health::problem(Duration::ZERO, message.clone()),
        other => Health::problem(started.elapsed(), other.chain()),
    }
}

#[cfg(feature = "cassette")]
/// A recorded answer as the response the network would have given: the
/// dialect's decoder reads it as it read the real one, piece by piece.
fn replayed_response(answer: Replayed) -> Response {
    use futures_util::StreamExt as _;
    let pieces = futures_util::stream::iter(answer.chunks).then(|(pause, bytes)| async move {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        Ok(hyper::body::Frame::data(bytes))
    });
    let body: super::client::Recorded = http_body_util::StreamBody::new(pieces.boxed());
    let mut response = ::http::Response::new(http_body_util::Either::Right(body));
    *response.status_mut() =
        ::http::StatusCode::from_u16(answer.status).unwrap_or(::http::StatusCode::BAD_GATEWAY);
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// A redirect's `Location`, without credentials.
fn response_location(headers: &HeaderMap) -> Option<String> {
    let location = headers.get(http::header::LOCATION)?.to_str().ok()?;
    Some(redact(location).into_owned())
}

/// Headers as observers see them, credentials redacted.
fn listed(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            let value = if value.is_sensitive() || is_credential(name) {
                "[redacted]"
            } else {
                value.to_str().unwrap_or("[not text]")
            };
            (name.as_str().to_owned(), value.to_owned())
        })
        .collect()
}

/// One exchange as its observer follows it: every chunk of the body, then
/// how it ended. Dropped before the end, it tells the observer the exchange
/// was abandoned.
pub(crate) struct Tap {
    observer: Arc<dyn Observe>,
    exchange: u64,
    ended: std::cell::Cell<bool>,
}

impl Tap {
    fn new(observer: Arc<dyn Observe>) -> Self {
        Self {
            observer,
            exchange: EXCHANGES.fetch_add(1, Ordering::Relaxed),
            ended: std::cell::Cell::new(false),
        }
    }

    /// Bytes of the body arrived.
    pub(crate) fn chunk(&self, bytes: &[u8]) {
        self.observer.chunk(self.exchange, bytes);
    }

    /// The exchange ended; later calls are ignored.
    pub(crate) fn end(&self, outcome: Outcome<'_>) {
        if !self.ended.replace(true) {
            self.observer.end(self.exchange, outcome);
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.end(Outcome::Abandoned);
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn a_server_that_never_finishes_the_handshake_fails_within_the_connect_time_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        // Takes the connection, says nothing.
        let _silent = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.expect("accept");
            std::future::pending::<()>().await;
        });
        let mut endpoint = Endpoint::new("http://unused.invalid", KeyHeader::Bearer, &[]);
        endpoint.set_timeouts(Duration::from_millis(200), Duration::from_secs(60));
        let started = Instant::now();
        let error = endpoint
            .get_json(&format!("https://{address}/v1/models"))
            .await
            .expect_err("the handshake never ends");
        assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
        // Not the metadata request's 10 s.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
