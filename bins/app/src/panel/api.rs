//! The panel's routes: the page, and the JSON API behind the guard.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use ferrobot::Agent;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Runtime;
use super::edit;
use crate::activity::{Activity, recent_problems, unix_secs};
use crate::{LoadedConfig, Secret, ToolState};

const OTHER_SITE: &str = "requests from other sites are refused";

/// How long a model server's health is reused before it is asked again.
const HEALTH_FOR: Duration = Duration::from_secs(15);

/// What every handler shares.
#[derive(Clone)]
struct Panel(Arc<Inner>);

struct Inner {
    runtime: Runtime,
    token: Secret,
    port: u16,
    agent: Agent,
    loaded: LoadedConfig,
    /// The config file edits go to: the one read, else the per-user one.
    config_file: Option<PathBuf>,
    health: tokio::sync::Mutex<Option<(Instant, Value)>>,
}

pub(super) fn router(loaded: &LoadedConfig, agent: &Agent, runtime: &Runtime) -> Router {
    let panel = Panel(Arc::new(Inner {
        runtime: runtime.clone(),
        token: Secret::new(runtime.token.clone().unwrap_or_default()),
        port: runtime.port.unwrap_or_default(),
        agent: agent.clone(),
        loaded: loaded.clone(),
        config_file: loaded.file.clone().or_else(crate::user_config_file),
        health: tokio::sync::Mutex::new(None),
    }));
    Router::new()
        .route("/", get(page))
        .route("/api/ping", get(ping))
        .route("/api/status", get(status))
        .route("/api/tools", get(tools))
        .route("/api/tools/{name}", axum::routing::post(switch_tool))
        .route("/api/config", get(config).post(edit_config))
        .layer(middleware::from_fn_with_state(panel.clone(), guard))
        .with_state(panel)
}

/// A refusal or failure, as JSON: `{"error": "…"}`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// Lets a request through only when it comes to a loopback name (no DNS
/// rebinding) and, for the API, carries the token and was not sent by
/// another site's page.
async fn guard(State(panel): State<Panel>, request: Request, next: Next) -> Response {
    let api = request.uri().path().starts_with("/api/");
    if let Err((status, message)) = panel.admit(request.headers(), api) {
        return error(status, message);
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    // Never framed by another page, never cached, no referrer sent on.
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

impl Panel {
    /// Why a request is refused, if it is.
    fn admit(&self, headers: &HeaderMap, api: bool) -> Result<(), (StatusCode, String)> {
        let port = self.0.port;
        let origins = [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|host| origins.iter().any(|o| o == host)) {
            return Err((
                StatusCode::FORBIDDEN,
                format!("the panel answers to 127.0.0.1:{port} and localhost:{port} only"),
            ));
        }
        if !api {
            return Ok(());
        }
        let site = headers.get("sec-fetch-site").and_then(|h| h.to_str().ok());
        if site.is_some_and(|site| site != "same-origin" && site != "none") {
            return Err((StatusCode::FORBIDDEN, OTHER_SITE.to_owned()));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .ok()
                .and_then(|origin| origin.strip_prefix("http://"))
                .is_some_and(|origin| origins.iter().any(|o| o == origin));
            if !allowed {
                return Err((StatusCode::FORBIDDEN, OTHER_SITE.to_owned()));
            }
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        if !given.is_some_and(|given| self.0.token.matches(given.as_bytes())) {
            return Err((
                StatusCode::UNAUTHORIZED,
                "the panel needs this process's token: `ferrobot status` gives the address with it"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

async fn page() -> Response {
    let mut response = Html(include_str!("page.html")).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    response
}

async fn ping(State(panel): State<Panel>) -> Json<Value> {
    let runtime = &panel.0.runtime;
    Json(json!({
        "app": "ferrobot",
        "bot": runtime.bot,
        "pid": runtime.pid,
        "version": runtime.version,
    }))
}

async fn status(State(panel): State<Panel>) -> Json<Value> {
    let inner = &panel.0;
    let runtime = &inner.runtime;
    let turns = inner
        .agent
        .state::<Activity>()
        .map(|activity| activity.counts());
    Json(json!({
        "bot": runtime.bot,
        "pid": runtime.pid,
        "version": runtime.version,
        "started_at": runtime.started_at,
        "uptime_secs": unix_secs(SystemTime::now()).saturating_sub(runtime.started_at),
        "model": panel.health().await,
        "turns": turns,
        "problems": recent_problems(),
    }))
}

impl Panel {
    /// The model server's health, asked at most every [`HEALTH_FOR`].
    async fn health(&self) -> Value {
        let mut cached = self.0.health.lock().await;
        if let Some((at, health)) = cached.as_ref()
            && at.elapsed() < HEALTH_FOR
        {
            return health.clone();
        }
        let llm = &self.0.loaded.config.llm;
        let health = self.0.agent.provider().health().await;
        let value = json!({
            "provider": llm.provider,
            "model": llm.model,
            "base_url": llm.base_url,
            "reachable": health.reachable,
            "model_present": health.model_present,
            "latency_ms": health.latency.as_millis() as u64,
            "detail": health.detail,
            "checked_at": unix_secs(SystemTime::now()),
        });
        *cached = Some((Instant::now(), value.clone()));
        value
    }
}

async fn tools(State(panel): State<Panel>) -> Json<Value> {
    let registry = panel.0.agent.tools();
    let mut listed: Vec<Value> = registry
        .tools()
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name(),
                "description": tool.spec().description,
                "enabled": registry.is_enabled(tool.name()),
            })
        })
        .collect();
    listed.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Json(Value::Array(listed))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Switch {
    enabled: bool,
}

/// Switches a tool on or off: at once in this process, and in the tool
/// state file, which every process on it follows and a restart keeps.
async fn switch_tool(
    State(panel): State<Panel>,
    Path(name): Path<String>,
    body: Result<Json<Switch>, JsonRejection>,
) -> Response {
    let Json(switch) = match body {
        Ok(body) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let agent = &panel.0.agent;
    if agent.tools().get(&name).is_none() {
        return error(StatusCode::NOT_FOUND, format!("no tool named `{name}`"));
    }
    let path = panel.0.loaded.tool_state_path();
    let saved = ToolState::load(&path).and_then(|mut state| {
        state.set_enabled(&name, switch.enabled);
        state.save(&path)
    });
    if let Err(failure) = saved {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not write {}: {failure}", path.display()),
        );
    }
    agent.tools().set_enabled(&name, switch.enabled);
    tracing::info!(tool = %name, enabled = switch.enabled, "tool switched from the control panel");
    Json(json!({ "name": name, "enabled": switch.enabled })).into_response()
}

async fn config(State(panel): State<Panel>) -> Json<Value> {
    let rows: Vec<Value> = panel
        .0
        .loaded
        .explain()
        .into_iter()
        .map(|(key, value, source)| {
            json!({ "key": key, "value": without_userinfo(&value), "source": source })
        })
        .collect();
    Json(json!({
        "file": panel.0.config_file,
        "values": rows,
        "live": "Tools switched here apply at once. Edits of the file apply at the next start; environment variables (FERROBOT_SECTION__KEY) and flags still override the file.",
    }))
}

/// `value` with any `user:password@` of a URL in it as `***@`: a key
/// written into `base_url` stays out of the page too.
fn without_userinfo(value: &str) -> String {
    let mut shown = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        shown.push_str(head);
        let authority = tail.find(['/', '?', '#', ' ', '"']).unwrap_or(tail.len());
        match tail[..authority].rfind('@') {
            Some(user_end) => {
                shown.push_str("***");
                rest = &tail[user_end..];
            }
            None => rest = tail,
        }
    }
    shown.push_str(rest);
    shown
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    key: String,
    /// The new value; null removes the key.
    value: Value,
}

async fn edit_config(
    State(panel): State<Panel>,
    body: Result<Json<Edit>, JsonRejection>,
) -> Response {
    let Json(change) = match body {
        Ok(body) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let Some(file) = &panel.0.config_file else {
        return error(
            StatusCode::CONFLICT,
            "this system has no per-user config folder: start the bot with --config FILE to edit it here",
        );
    };
    // Files are read and written on a blocking thread, not the panel's.
    let file = file.clone();
    let edited =
        tokio::task::spawn_blocking(move || edit::set(&file, &change.key, &change.value)).await;
    match edited {
        Ok(Ok(edited)) => {
            tracing::info!(key = %edited.key, file = %edited.file.display(), "config edited from the control panel");
            Json(edited).into_response()
        }
        Ok(Err(message)) => error(StatusCode::UNPROCESSABLE_ENTITY, message),
        Err(failure) => error(StatusCode::INTERNAL_SERVER_ERROR, failure.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn credentials_in_urls_are_hidden() {
        assert_eq!(
            without_userinfo("https://me:sk-123@api.example.com/v1"),
            "https://***@api.example.com/v1"
        );
        assert_eq!(
            without_userinfo("http://localhost:11434/v1"),
            "http://localhost:11434/v1"
        );
        assert_eq!(
            without_userinfo(r#"["--url", "wss://u:p@h/x", "http://a/b?x=1@2"]"#),
            r#"["--url", "wss://***@h/x", "http://a/b?x=1@2"]"#
        );
    }
}
