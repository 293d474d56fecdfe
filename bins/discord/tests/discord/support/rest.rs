//! The fake REST API: records every call, answers with ids, and fails calls
//! on request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ferrobot_testkit::eventually;
use serde_json::{Value, json};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::DM;

/// Discord's REST API: records every call, answers with ids, fails calls
/// on request.
#[derive(Clone, Default)]
pub(crate) struct Rest(pub(crate) Arc<Mutex<RestState>>);

#[derive(Default)]
pub(crate) struct RestState {
    /// Method, path, body, and whether it succeeded.
    pub(crate) calls: Vec<(String, String, Value, bool)>,
    next_id: u64,
    failures: VecDeque<(String, u16, Value)>,
}

impl Respond for Rest {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let route = format!("{} {}", request.method, request.url.path());
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut state = self.0.lock().unwrap();
        if let Some(i) = state
            .failures
            .iter()
            .position(|(r, ..)| route.contains(r.as_str()))
        {
            let (_, status, failure) = state.failures.remove(i).unwrap();
            state.calls.push((
                request.method.to_string(),
                request.url.path().into(),
                body,
                false,
            ));
            let mut response = ResponseTemplate::new(status).set_body_json(&failure);
            if status == 429 {
                // What Discord sends with a 429: the bucket and when it resets.
                let after = failure["retry_after"].as_f64().unwrap_or(1.0);
                response = response
                    .insert_header("retry-after", after.ceil().to_string())
                    .insert_header("x-ratelimit-bucket", "b0")
                    .insert_header("x-ratelimit-limit", "5")
                    .insert_header("x-ratelimit-remaining", "0")
                    .insert_header("x-ratelimit-reset-after", format!("{after:.3}"))
                    .insert_header("x-ratelimit-scope", "user");
            }
            return response;
        }
        // As Discord: an interaction's response can be edited only once the
        // interaction has been acknowledged.
        let path = request.url.path();
        if let Some(token) = path
            .strip_suffix("/messages/@original")
            .and_then(|p| p.rsplit('/').next())
        {
            let acknowledged = state
                .calls
                .iter()
                .any(|(_, p, _, ok)| *ok && p.ends_with(&format!("/{token}/callback")));
            if !acknowledged {
                state
                    .calls
                    .push((request.method.to_string(), path.into(), body, false));
                return ResponseTemplate::new(404)
                    .set_body_json(json!({"message": "Unknown Webhook", "code": 10015}));
            }
        }
        state.calls.push((
            request.method.to_string(),
            request.url.path().into(),
            body.clone(),
            true,
        ));
        state.next_id += 1;
        let id = (800_000_000_000_000_000u64 + state.next_id).to_string();
        let path = request.url.path();
        if path.ends_with("/typing") || path.ends_with("/callback") {
            ResponseTemplate::new(204)
        } else if path.ends_with("/commands") {
            ResponseTemplate::new(200).set_body_json(json!([]))
        } else if path.ends_with("/users/@me/channels") {
            ResponseTemplate::new(200).set_body_json(json!({"id": DM, "type": 1}))
        } else {
            let id = path
                .rsplit('/')
                .next()
                .filter(|last| last.parse::<u64>().is_ok() && request.method.as_str() == "PATCH")
                .map_or(id, str::to_owned);
            ResponseTemplate::new(200).set_body_json(json!({"id": id, "content": body["content"]}))
        }
    }
}

impl Rest {
    pub(crate) async fn start() -> (Self, MockServer) {
        let server = MockServer::start().await;
        let rest = Self::default();
        Mock::given(path_regex("^/api/v10/"))
            .respond_with(rest.clone())
            .mount(&server)
            .await;
        (rest, server)
    }

    /// Fails the next call whose `METHOD /path` contains `route` (as
    /// `PATCH /api/v10/channels/{DM}/messages/` names any edit there).
    pub(crate) fn fail(&self, route: &str, status: u16, body: Value) {
        self.0
            .lock()
            .unwrap()
            .failures
            .push_back((route.into(), status, body));
    }

    /// Successful calls: (method, path, body).
    pub(crate) fn calls(&self) -> Vec<(String, String, Value)> {
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.3)
            .map(|(m, p, b, _)| (m.clone(), p.clone(), b.clone()))
            .collect()
    }

    pub(crate) fn attempts(&self, route: &str) -> Vec<bool> {
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, p, ..)| format!("{m} {p}").contains(route))
            .map(|c| c.3)
            .collect()
    }

    /// Bodies of successful calls whose `METHOD /path` contains `route`.
    pub(crate) fn bodies(&self, route: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|(m, p, _)| format!("{m} {p}").contains(route))
            .map(|(.., b)| b)
            .collect()
    }

    /// Waits for a successful call to `route` satisfying `wanted`, up to
    /// 30 s (a binary may start cold on a loaded machine).
    pub(crate) async fn wait_for(&self, route: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let found = || self.bodies(route).into_iter().find(|b| wanted(b));
        if let Some(body) = eventually(found).await {
            return body;
        }
        panic!("no matching {route}; calls: {:#?}", self.calls());
    }
}
