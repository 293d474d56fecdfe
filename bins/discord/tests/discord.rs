//! The Discord bot end to end: a fake gateway (a WebSocket server speaking
//! HELLO, IDENTIFY, READY, RESUME and heartbeats) and a fake REST API
//! (wiremock) over loopback, real payloads, and assertions on the REST calls
//! the bot makes.

// Helpers outside `#[test]` functions panic on setup failures, like the tests.
#![allow(clippy::unwrap_used)]
// Payload builders take JSON by value, so call sites read as the payload.
#![allow(clippy::needless_pass_by_value)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrobot::Agent;
use ferrobot::bot::{Channel, serve};
use ferrobot::testing::{MockProvider, MockTurn, OpenAiStream};
use ferrobot::tool::{IntoTool as _, from_fn};
use ferrobot_app::{Config, ConfigSource};
use ferrobot_discord::Discord;
use ferrobot_testkit::{Home, Recording, agent, eventually, llm, openai, recordings, text_answer};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_websockets::{CloseCode, Message as Frame, ServerBuilder};
use wiremock::matchers::path_regex;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TOKEN: &str = "MTA5.TEST.discord-token_secret";
const BIN: &str = env!("CARGO_BIN_EXE_ferrobot-discord");
const APP: &str = "910254320740610069";
const BOT: &str = "714902836760019017";
const ANN: u64 = 111_111_111_111;
const BOB: u64 = 222_222_222_222;
const STRANGER: u64 = 999_999_999_999;
const DM: &str = "500000000000000001";
const GUILD: &str = "600000000000000001";
const GUILD_CHANNEL: &str = "600000000000000002";

// ---------------------------------------------------------------- gateway

/// A Discord gateway: HELLO on connect, READY after IDENTIFY (with a
/// `resume_gateway_url` pointing back here), missed dispatches replayed after
/// RESUME, heartbeats acknowledged. Dispatches pushed while no session is
/// connected wait for the resume.
#[derive(Clone)]
struct Gateway {
    url: String,
    state: Arc<Mutex<Session>>,
}

#[derive(Default)]
struct Session {
    /// Every dispatch: sequence number and frame.
    sent: Vec<(u64, Value)>,
    seq: u64,
    live: Option<mpsc::UnboundedSender<Out>>,
    identifies: usize,
    resumes: Vec<Value>,
}

enum Out {
    Frame(String),
    /// Cut the connection without a close frame, as a network failure would.
    Drop,
}

impl Gateway {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let gateway = Self {
            url,
            state: Arc::default(),
        };
        let serving = gateway.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serving.clone().connection(stream));
            }
        });
        gateway
    }

    async fn connection(self, stream: tokio::net::TcpStream) {
        let Ok((_, mut ws)) = ServerBuilder::new().accept(stream).await else {
            return;
        };
        let hello = json!({"op": 10, "d": {"heartbeat_interval": 41250}, "s": null, "t": null});
        let _ = ws.send(Frame::text(hello.to_string())).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(Ok(frame)) = frame else { break };
                    let Some(text) = frame.as_text() else { continue };
                    let payload: Value = serde_json::from_str(text).unwrap();
                    match payload["op"].as_u64() {
                        Some(1) => {
                            let _ = ws.send(Frame::text(json!({"op": 11, "d": null}).to_string())).await;
                        }
                        Some(2) => {
                            // twilight sends the token as `Bot …`, as Discord accepts it.
                            let token = payload["d"]["token"].as_str().unwrap_or_default();
                            if token.trim_start_matches("Bot ") != TOKEN {
                                let close = Frame::close(CloseCode::try_from(4004).ok(), "Authentication failed.");
                                let _ = ws.send(close).await;
                                break;
                            }
                            let ready = self.ready(&tx);
                            let _ = ws.send(Frame::text(ready)).await;
                        }
                        Some(6) => {
                            for frame in self.resume(&payload["d"], &tx) {
                                let _ = ws.send(Frame::text(frame)).await;
                            }
                        }
                        _ => {}
                    }
                }
                out = rx.recv() => match out {
                    Some(Out::Frame(frame)) => {
                        let _ = ws.send(Frame::text(frame)).await;
                    }
                    Some(Out::Drop) | None => break,
                }
            }
        }
    }

    fn ready(&self, live: &mpsc::UnboundedSender<Out>) -> String {
        let mut state = self.state.lock().unwrap();
        state.identifies += 1;
        state.live = Some(live.clone());
        state.seq += 1;
        json!({"op": 0, "t": "READY", "s": state.seq, "d": {
            "v": 10,
            "user": {"id": BOT, "username": "ferrobot", "discriminator": "0", "avatar": null, "bot": true,
                     "verified": true, "mfa_enabled": false, "flags": 0},
            "guilds": [], "session_id": "session-1", "resume_gateway_url": self.url,
            "shard": [0, 1], "application": {"id": APP, "flags": 0},
        }})
        .to_string()
    }

    /// Frames for a RESUME: what the session missed, then RESUMED.
    fn resume(&self, resume: &Value, live: &mpsc::UnboundedSender<Out>) -> Vec<String> {
        let mut state = self.state.lock().unwrap();
        state.resumes.push(resume.clone());
        state.live = Some(live.clone());
        let after = resume["seq"].as_u64().unwrap_or_default();
        let mut frames: Vec<String> = state
            .sent
            .iter()
            .filter(|(seq, _)| *seq > after)
            .map(|(_, frame)| frame.to_string())
            .collect();
        state.seq += 1;
        frames.push(json!({"op": 0, "t": "RESUMED", "s": state.seq, "d": {}}).to_string());
        frames
    }

    /// Sends a dispatch, or keeps it for the resume when nobody is connected.
    fn dispatch(&self, kind: &str, data: Value) {
        let mut state = self.state.lock().unwrap();
        state.seq += 1;
        let frame = json!({"op": 0, "t": kind, "s": state.seq, "d": data});
        let seq = state.seq;
        state.sent.push((seq, frame.clone()));
        if let Some(live) = &state.live {
            let _ = live.send(Out::Frame(frame.to_string()));
        }
    }

    /// Cuts the current connection.
    fn drop_connection(&self) {
        if let Some(live) = self.state.lock().unwrap().live.take() {
            let _ = live.send(Out::Drop);
        }
    }

    fn message(
        &self,
        author: u64,
        channel: &str,
        guild: Option<&str>,
        content: &str,
        mentions_bot: bool,
    ) {
        let data = self.message_data(author, channel, guild, content, mentions_bot);
        self.dispatch("MESSAGE_CREATE", data);
    }

    /// A `MESSAGE_CREATE`'s data, for tests that change it before sending.
    fn message_data(
        &self,
        author: u64,
        channel: &str,
        guild: Option<&str>,
        content: &str,
        mentions_bot: bool,
    ) -> Value {
        let mut data = json!({
            "id": format!("{}", 700_000_000_000_000_000u64 + self.state.lock().unwrap().seq),
            "type": 0, "tts": false, "timestamp": "2026-11-30T12:00:00.000000+00:00",
            "pinned": false, "mention_everyone": false, "mention_roles": [], "attachments": [],
            "embeds": [], "edited_timestamp": null, "flags": 0, "components": [],
            "channel_id": channel, "content": content,
            "author": {"id": author.to_string(), "username": "ann", "discriminator": "0", "avatar": null, "global_name": "Ann"},
            "mentions": if mentions_bot {
                json!([{"id": BOT, "username": "ferrobot", "discriminator": "0", "avatar": null, "bot": true}])
            } else { json!([]) },
        });
        if let Some(guild) = guild {
            data["guild_id"] = json!(guild);
            data["member"] = json!({"roles": [], "joined_at": "2020-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false, "flags": 0});
        }
        data
    }

    fn interaction(&self, user: u64, id: &str, kind: u8, data: Value) {
        self.dispatch(
            "INTERACTION_CREATE",
            json!({
                "id": id, "application_id": APP, "type": kind, "token": format!("token-{id}"),
                "version": 1, "channel_id": DM, "channel": {"id": DM, "type": 1},
                "user": {"id": user.to_string(), "username": "ann", "discriminator": "0", "avatar": null},
                "data": data, "locale": "en-GB", "entitlements": [], "authorizing_integration_owners": {},
                "attachment_size_limit": 8_388_608,
            }),
        );
    }

    fn press(&self, user: u64, id: &str, custom_id: &str) {
        self.interaction(
            user,
            id,
            3,
            json!({"custom_id": custom_id, "component_type": 2}),
        );
    }

    fn slash(&self, user: u64, id: &str, name: &str, options: Value) {
        self.interaction(
            user,
            id,
            2,
            json!({"id": "800000000000000001", "name": name, "type": 1, "options": options}),
        );
    }
}

// ------------------------------------------------------------------- REST

/// Discord's REST API: records every call, answers with ids, fails calls
/// on request.
#[derive(Clone, Default)]
struct Rest(Arc<Mutex<RestState>>);

#[derive(Default)]
struct RestState {
    /// Method, path, body, and whether it succeeded.
    calls: Vec<(String, String, Value, bool)>,
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
            .position(|(r, ..)| route.ends_with(r.as_str()))
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
    async fn start() -> (Self, MockServer) {
        let server = MockServer::start().await;
        let rest = Self::default();
        Mock::given(path_regex("^/api/v10/"))
            .respond_with(rest.clone())
            .mount(&server)
            .await;
        (rest, server)
    }

    /// Fails the next call whose `METHOD /path` ends with `route`.
    fn fail(&self, route: &str, status: u16, body: Value) {
        self.0
            .lock()
            .unwrap()
            .failures
            .push_back((route.into(), status, body));
    }

    /// Successful calls: (method, path, body).
    fn calls(&self) -> Vec<(String, String, Value)> {
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.3)
            .map(|(m, p, b, _)| (m.clone(), p.clone(), b.clone()))
            .collect()
    }

    fn attempts(&self, route: &str) -> Vec<bool> {
        self.0
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, p, ..)| format!("{m} {p}").contains(route))
            .map(|c| c.3)
            .collect()
    }

    /// Bodies of successful calls whose `METHOD /path` ends with `route`.
    fn bodies(&self, route: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|(m, p, _)| format!("{m} {p}").contains(route))
            .map(|(.., b)| b)
            .collect()
    }

    /// Waits for a successful call to `route` satisfying `wanted`, up to
    /// 30 s (a binary may start cold on a loaded machine).
    async fn wait_for(&self, route: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let found = || self.bodies(route).into_iter().find(|b| wanted(b));
        if let Some(body) = eventually(found).await {
            return body;
        }
        panic!("no matching {route}; calls: {:#?}", self.calls());
    }
}

// ---------------------------------------------------------------- helpers

fn settings(rest: &MockServer, gateway: &Gateway, allowed: &[u64]) -> ferrobot_app::DiscordConfig {
    let mut settings = Config::load(&ConfigSource::defaults_only())
        .unwrap()
        .config
        .discord;
    settings.api_url = rest.uri();
    settings.gateway_url = gateway.url.clone();
    settings.allowed_user_ids = allowed.to_vec();
    settings.edit_interval_ms = 40;
    settings.confirm_timeout_secs = 5;
    settings
}

/// Starts the bot on fresh fakes; returns them once READY is through.
async fn start(
    allowed: &[u64],
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> (Gateway, Rest, MockServer) {
    start_with(allowed, |_| {}, build).await
}

/// [`start`], with the settings changed by `adjust` first.
async fn start_with(
    allowed: &[u64],
    adjust: impl FnOnce(&mut ferrobot_app::DiscordConfig),
    build: impl FnOnce(Arc<dyn Channel>) -> Agent,
) -> (Gateway, Rest, MockServer) {
    install_crypto();
    let gateway = Gateway::start().await;
    let (rest, server) = Rest::start().await;
    let mut settings = settings(&server, &gateway, allowed);
    adjust(&mut settings);
    let discord = Discord::new(&settings, TOKEN).unwrap();
    let channel: Arc<dyn Channel> = Arc::new(discord.clone());
    let agent = build(Arc::clone(&channel));
    tokio::spawn(async move { serve(agent, channel).await.unwrap() });
    tokio::time::timeout(Duration::from_secs(10), discord.connected())
        .await
        .unwrap();
    (gateway, rest, server)
}

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn messages_to(channel: &str) -> String {
    format!("POST /api/v10/channels/{channel}/messages")
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn a_dm_is_answered_streamed_by_edits_with_typing_first() {
    let model = MockProvider::new().then(
        MockTurn::new()
            .text("Disk / has **42.5 GB** free.")
            .chunked(6)
            .delay(Duration::from_millis(80)),
    );
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, DM, None, "how much disk is left?", false);
    let done = rest
        .wait_for("PATCH", |b| b["content"] == "Disk / has **42.5 GB** free.")
        .await;
    assert_eq!(
        done["content"], "Disk / has **42.5 GB** free.",
        "Discord reads Markdown as is"
    );
    let posted = rest.bodies(&messages_to(DM));
    assert_eq!(posted.len(), 1, "one message, edited: {posted:?}");
    assert!(
        posted[0].get("message_reference").is_none(),
        "no reply in a DM"
    );
    assert!("Disk / has **42.5 GB** free.".starts_with(posted[0]["content"].as_str().unwrap()));
    let edits = rest
        .calls()
        .into_iter()
        .filter(|(m, p, _)| {
            m == "PATCH" && p.starts_with(&format!("/api/v10/channels/{DM}/messages/"))
        })
        .count();
    assert!(edits >= 2, "edited while streaming, then finished");
    assert!(
        !rest
            .bodies(&format!("POST /api/v10/channels/{DM}/typing"))
            .is_empty()
    );
    assert_eq!(
        recorded.requests()[0].messages[0].text(),
        "how much disk is left?"
    );
}

#[tokio::test]
async fn in_a_server_only_mentions_are_answered_with_the_mention_stripped() {
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Pong."));
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, GUILD_CHANNEL, Some(GUILD), "just chatting", false);
    gateway.message(
        ANN,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> ping?"),
        true,
    );
    let answer = rest
        .wait_for(&messages_to(GUILD_CHANNEL), |b| b["content"] == "Pong.")
        .await;
    // A reply to the message that asked, sent anyway if it was deleted.
    let reference = &answer["message_reference"];
    assert_eq!(reference["channel_id"], GUILD_CHANNEL, "{answer}");
    assert!(reference["message_id"].as_str().is_some(), "{answer}");
    assert_eq!(reference["fail_if_not_exists"], false, "{answer}");
    assert_eq!(
        answer["allowed_mentions"],
        json!({"parse": []}),
        "nobody is pinged, the author included: {answer}"
    );
    let asked = recorded.requests();
    assert_eq!(asked.len(), 1, "the unmentioned message was left alone");
    assert_eq!(asked[0].messages.last().unwrap().text(), "ping?");
}

#[tokio::test]
async fn strangers_and_other_servers_are_refused_once_and_reach_nothing() {
    let model = MockProvider::replying("secret");
    let recorded = model.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let ping = from_fn("ping", "Ping.", move |_: Value, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "pong" }
    });
    let (gateway, rest, _server) = start_with(
        &[ANN],
        |settings| settings.allowed_guild_ids = vec![1234],
        |channel| agent(model, &channel, vec![ping.into_tool()]),
    )
    .await;
    gateway.message(STRANGER, DM, None, "hello", false);
    gateway.message(STRANGER, DM, None, "/ping", false);
    gateway.slash(STRANGER, "900000000000000001", "ping", json!([]));
    // Ann, but in a server that isn't allowed.
    gateway.message(
        ANN,
        GUILD_CHANNEL,
        Some(GUILD),
        &format!("<@{BOT}> /ping"),
        true,
    );
    let refusal = rest
        .wait_for(
            "/interactions/900000000000000001/token-900000000000000001/callback",
            |_| true,
        )
        .await;
    assert_eq!(refusal["type"], 4);
    assert_eq!(refusal["data"]["flags"], 64, "only the stranger sees it");
    rest.wait_for(&messages_to(GUILD_CHANNEL), |b| {
        b["content"].as_str().unwrap().contains("private bot")
    })
    .await;
    rest.wait_for(&messages_to(DM), |_| true).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let to_dm = rest.bodies(&messages_to(DM));
    assert_eq!(to_dm.len(), 1, "one refusal for the stranger: {to_dm:?}");
    assert!(
        to_dm[0]["content"]
            .as_str()
            .unwrap()
            .contains("private bot")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(recorded.requests().is_empty());
}

#[tokio::test]
async fn a_tool_asks_with_buttons_and_runs_only_after_the_asker_says_yes() {
    let model = llm(vec![
        OpenAiStream::new()
            .tool_call("call_1", "reboot", &json!({}))
            .into_sse(),
        text_answer("Rebooting in a minute."),
    ])
    .await;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let reboot = from_fn(
        "reboot",
        "Reboot this machine.",
        move |_: Value, ctx: ferrobot::ToolContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                ctx.notify_later("Rebooting now.", Duration::from_millis(50))
                    .map(|()| "scheduled")
            }
        },
    )
    .confirm("Reboot this machine?");
    let (gateway, rest, _server) = start(&[ANN, BOB], |channel| {
        agent(openai(&model), &channel, vec![reboot.into_tool()])
    })
    .await;
    gateway.message(ANN, DM, None, "please reboot", false);
    let question = rest
        .wait_for(&messages_to(DM), |b| b["content"] == "Reboot this machine?")
        .await;
    let buttons = &question["components"][0]["components"];
    assert_eq!(buttons[0]["label"], "✅ Yes");
    assert_eq!(buttons[1]["label"], "❌ No");
    let yes = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    gateway.press(BOB, "900000000000000011", &yes);
    let refused = rest
        .wait_for(
            "/interactions/900000000000000011/token-900000000000000011/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        refused["data"]["content"],
        "Only the person who asked can answer this."
    );
    assert_eq!(refused["data"]["flags"], 64);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "not run before the asker's yes"
    );
    gateway.press(ANN, "900000000000000012", &yes);
    let approved = rest
        .wait_for(
            "/interactions/900000000000000012/token-900000000000000012/callback",
            |_| true,
        )
        .await;
    assert_eq!(approved["type"], 7, "the question itself is updated");
    assert_eq!(
        approved["data"]["content"],
        "Reboot this machine?\n\n✅ Approved"
    );
    assert_eq!(approved["data"]["components"], json!([]));
    rest.wait_for(&messages_to(DM), |b| {
        b["content"] == "Rebooting in a minute."
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Rebooting now.")
        .await;
}

#[tokio::test]
async fn slash_commands_are_registered_typed_and_answered_through_the_interaction() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        /// How many lines.
        lines: u32,
        /// Only lines containing this.
        filter: Option<String>,
    }
    let tail = from_fn(
        "tail_log",
        "Show the end of the log.\nMore.",
        |a: Args, _| async move {
            format!(
                "{} lines{}",
                a.lines,
                a.filter.map(|f| format!(" with {f}")).unwrap_or_default()
            )
        },
    );
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let mut running = None;
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        let agent = agent(model, &channel, vec![tail.into_tool()]);
        running = Some(agent.clone());
        agent
    })
    .await;
    let menu = rest
        .wait_for(&format!("PUT /api/v10/applications/{APP}/commands"), |_| {
            true
        })
        .await;
    assert_eq!(
        menu,
        json!([
            {"type": 1, "name": "new", "description": "Start a fresh conversation"},
            {"type": 1, "name": "undo", "description": "Take back your last message and its answer"},
            {"type": 1, "name": "help", "description": "List the commands"},
            {"type": 1, "name": "tail_log", "description": "Show the end of the log.", "options": [
                {"type": 4, "name": "lines", "description": "How many lines.", "required": true},
                {"type": 3, "name": "filter", "description": "Only lines containing this.", "required": false},
            ]},
        ])
    );
    gateway.slash(
        ANN,
        "900000000000000021",
        "tail_log",
        json!([{"name": "lines", "type": 4, "value": 5}, {"name": "filter", "type": 3, "value": "disk full"}]),
    );
    let deferred = rest
        .wait_for(
            "/interactions/900000000000000021/token-900000000000000021/callback",
            |_| true,
        )
        .await;
    assert_eq!(
        deferred["type"], 5,
        "acknowledged at once, answer to follow"
    );
    let answer = rest
        .wait_for(
            &format!("PATCH /api/v10/webhooks/{APP}/token-900000000000000021/messages/@original"),
            |_| true,
        )
        .await;
    assert_eq!(
        answer["content"], "```\n5 lines with disk full\n```",
        "tool output shown verbatim"
    );
    assert!(
        recorded.requests().is_empty(),
        "the tool ran without the model"
    );
    // A tool switched off while the bot runs leaves the commands.
    running.unwrap().tools().set_enabled("tail_log", false);
    let menu = rest
        .wait_for(&format!("PUT /api/v10/applications/{APP}/commands"), |m| {
            m.as_array().unwrap().len() == 3
        })
        .await;
    assert!(!menu.to_string().contains("tail_log"), "{menu}");
}

#[tokio::test]
async fn a_long_reply_is_split_at_2000_characters_without_breaking_code_blocks() {
    let code = "let size = disk.available(); // 🚀\n".repeat(80);
    let prose = "Everything looks fine on this machine, nothing to worry about. ".repeat(30);
    let reply = format!("{prose}\n\n```rust\n{code}```\n\n{prose}That is all.");
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        agent(MockProvider::replying(reply.clone()), &channel, vec![])
    })
    .await;
    gateway.message(ANN, DM, None, "report", false);
    rest.wait_for("", |b| {
        b["content"]
            .as_str()
            .is_some_and(|t| t.trim_end().ends_with("That is all."))
    })
    .await;
    let posted = rest.bodies(&messages_to(DM));
    assert!(posted.len() >= 3, "{} messages", posted.len());
    let finished: Vec<String> = rest
        .calls()
        .into_iter()
        .filter(|(m, ..)| m == "PATCH")
        .map(|(.., b)| b["content"].as_str().unwrap().to_owned())
        .collect();
    for piece in posted
        .iter()
        .map(|b| b["content"].as_str().unwrap().to_owned())
        .chain(finished)
    {
        assert!(
            piece.chars().count() <= 2000,
            "a piece of {}",
            piece.chars().count()
        );
        assert_eq!(
            piece.matches("```").count() % 2,
            0,
            "fences balanced in {piece:.60}…"
        );
    }
}

#[tokio::test]
async fn an_attachment_alone_in_a_dm_is_told_that_only_text_is_read() {
    let model = MockProvider::replying("unused");
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    // A pin is Discord's announcement, not a message to answer.
    let mut pin = gateway.message_data(ANN, DM, None, "", false);
    pin["type"] = json!(6);
    gateway.dispatch("MESSAGE_CREATE", pin);
    gateway.message(ANN, DM, None, "", false);
    let note = rest.wait_for(&messages_to(DM), |_| true).await;
    assert!(
        note["content"].as_str().unwrap().contains("only read text"),
        "{note}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        rest.bodies(&messages_to(DM)).len(),
        1,
        "the pin is left alone"
    );
    assert!(recorded.requests().is_empty(), "the model saw nothing");
}

#[tokio::test]
async fn a_dropped_connection_is_resumed_with_nothing_lost_or_answered_twice() {
    let model = MockProvider::from_fn(|request| {
        MockTurn::new().text(format!(
            "Answer to {}",
            request.messages.last().unwrap().text()
        ))
    });
    let (gateway, rest, _server) = start(&[ANN], |channel| agent(model, &channel, vec![])).await;
    gateway.message(ANN, DM, None, "one", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Answer to one")
        .await;
    gateway.drop_connection();
    // Sent while the bot is away: delivered on resume.
    gateway.message(ANN, DM, None, "two", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Answer to two")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers: Vec<String> = rest
        .bodies(&messages_to(DM))
        .iter()
        .map(|b| b["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        answers,
        ["Answer to one", "Answer to two"],
        "each answered once"
    );
    let state = gateway.state.lock().unwrap();
    assert_eq!(state.identifies, 1, "resumed, not identified again");
    assert_eq!(state.resumes.len(), 1);
    assert_eq!(state.resumes[0]["session_id"], "session-1");
}

#[tokio::test]
async fn rate_limits_are_waited_out_and_the_reply_still_arrives() {
    let (gateway, rest, _server) = start(&[ANN], |channel| {
        agent(MockProvider::replying("Fine."), &channel, vec![])
    })
    .await;
    rest.fail(
        &messages_to(DM),
        429,
        json!({"message": "You are being rate limited.", "retry_after": 0.5, "global": false}),
    );
    let asked = std::time::Instant::now();
    gateway.message(ANN, DM, None, "status?", false);
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Fine.")
        .await;
    assert!(
        asked.elapsed() >= Duration::from_millis(500),
        "waited as told: {:?} {:?}",
        asked.elapsed(),
        rest.0.lock().unwrap().calls
    );
    assert_eq!(rest.attempts(&messages_to(DM)), [false, true]);
}

/// Every recorded dispatch (guild messages with and without a mention, a
/// 2017 DM without a gateway envelope, slash commands with options and
/// subcommands, a button press for another bot) is answered or left alone
/// as Discord's rules and the allow-list require.
#[tokio::test]
async fn recorded_dispatches_are_answered_or_left_alone_as_their_kind_requires() {
    let Some(recordings) = recordings("08_discord_gateway") else {
        return;
    };
    let recordings: Vec<(String, String, Value, Value)> = recordings
        .into_iter()
        .map(
            |Recording {
                 name,
                 response,
                 expected,
             }| {
                let (kind, data) = match response.get("op") {
                    Some(_) => (
                        response["t"].as_str().unwrap().to_owned(),
                        response["d"].clone(),
                    ),
                    None if expected.get("message").is_some() => {
                        ("MESSAGE_CREATE".to_owned(), response)
                    }
                    None => ("INTERACTION_CREATE".to_owned(), response),
                };
                (name, kind, data, expected)
            },
        )
        .collect();
    assert!(recordings.len() >= 9, "{} recordings", recordings.len());
    let authors: Vec<u64> = recordings
        .iter()
        .filter_map(|(.., expected)| {
            let who = expected
                .get("message")
                .map_or(&expected["interaction"]["user"], |m| &m["author"]);
            who["id"].as_str()?.parse().ok()
        })
        .collect();
    let model = MockProvider::from_fn(|_| MockTurn::new().text("Noted."));
    let recorded = model.clone();
    let (gateway, rest, _server) = start(&authors, |channel| agent(model, &channel, vec![])).await;
    for (name, kind, data, expected) in recordings {
        eprintln!("replaying {name}");
        match kind.as_str() {
            "READY" => {
                // The fake gateway sends its own READY; this one (API v6,
                // no resume URL) is what an old gateway sent.
                assert_eq!(expected["ready"]["user"]["bot"], true, "{name}");
            }
            "MESSAGE_CREATE" => {
                let message = &expected["message"];
                let channel = message["channel_id"].as_str().unwrap().to_owned();
                let content = message["content"].as_str().unwrap();
                let asked = recorded.requests().len();
                gateway.dispatch("MESSAGE_CREATE", data.clone());
                if message["is_dm"] == false {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    assert!(
                        rest.bodies(&messages_to(&channel)).is_empty(),
                        "{name}: not addressed to the bot"
                    );
                    // The same message, mentioning the bot.
                    let mut mentioned = data.clone();
                    mentioned["content"] = json!(format!("<@{BOT}> {content}"));
                    mentioned["mentions"] = json!([{"id": BOT, "username": "ferrobot", "discriminator": "0", "bot": true}]);
                    gateway.dispatch("MESSAGE_CREATE", mentioned);
                }
                let reply = rest.wait_for(&messages_to(&channel), |_| true).await;
                assert_eq!(reply["content"], "Noted.", "{name}");
                let requests = recorded.requests();
                assert_eq!(requests.len(), asked + 1, "{name}");
                assert_eq!(
                    requests.last().unwrap().messages.last().unwrap().text(),
                    content,
                    "{name}"
                );
            }
            "INTERACTION_CREATE" => {
                let interaction = &expected["interaction"];
                let (id, token) = (
                    interaction["interaction_id"].as_str().unwrap(),
                    data["token"].as_str().unwrap(),
                );
                gateway.dispatch("INTERACTION_CREATE", data.clone());
                let callback = rest
                    .wait_for(&format!("/interactions/{id}/{token}/callback"), |_| true)
                    .await;
                if interaction["type"] == 3 {
                    assert_eq!(callback["type"], 4, "{name}");
                    assert_eq!(
                        callback["data"]["content"], "This button isn't mine to answer.",
                        "{name}"
                    );
                    assert_eq!(callback["data"]["flags"], 64, "{name}");
                } else {
                    assert_eq!(callback["type"], 5, "{name}: deferred");
                    let command = interaction["command"]["name"].as_str().unwrap();
                    let answer = rest
                        .wait_for(
                            &format!(
                                "/webhooks/{}/{token}/messages/@original",
                                interaction["application_id"].as_str().unwrap()
                            ),
                            |_| true,
                        )
                        .await;
                    assert!(
                        answer["content"]
                            .as_str()
                            .unwrap()
                            .starts_with(&format!("Unknown command /{command}")),
                        "{name}: {answer}"
                    );
                }
            }
            other => panic!("{name}: unexpected {other}"),
        }
    }
}

#[tokio::test]
async fn the_binary_runs_from_the_environment_alone() {
    let gateway = Gateway::start().await;
    let (rest, server) = Rest::start().await;
    let model = llm(vec![text_answer("All good.")]).await;
    let home = Home::new("discord-env");
    let mut bot = home
        .command(
            BIN,
            &[
                ("FERROBOT_DISCORD__TOKEN", TOKEN.into()),
                ("FERROBOT_DISCORD__API_URL", server.uri()),
                ("FERROBOT_DISCORD__GATEWAY_URL", gateway.url.clone()),
                ("FERROBOT_DISCORD__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_DISCORD__EDIT_INTERVAL_MS", "50".into()),
                ("FERROBOT_LLM__BASE_URL", format!("{}/v1", model.uri())),
                ("FERROBOT_LLM__MODEL", "test-model".into()),
            ],
        )
        .spawn()
        .unwrap();
    // Once connected, the start-up report goes to a DM with the first allowed user.
    let dm = rest
        .wait_for("POST /api/v10/users/@me/channels", |_| true)
        .await;
    assert_eq!(dm["recipient_id"], ANN.to_string());
    let notice = rest
        .wait_for(&messages_to(DM), |b| {
            b["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("ferrobot is online"))
        })
        .await;
    assert!(
        notice["content"].as_str().unwrap().contains("Memory"),
        "{notice}"
    );
    // The system tools are offered as slash commands.
    let menu = rest.wait_for("/commands", |_| true).await;
    assert!(menu.to_string().contains("\"disk_usage\""), "{menu}");
    gateway.message(ANN, DM, None, "all good?", false);
    rest.wait_for("", |b| b["content"] == "All good.").await;
    let asked = &model.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&asked.body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert!(body["messages"].to_string().contains("all good?"));
    bot.start_kill().unwrap();
    let output = bot.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("connected to Discord"), "{log}");
    assert!(
        !log.contains(TOKEN) && !log.contains("discord-token_secret"),
        "the token stays out of the log"
    );
}

#[tokio::test]
async fn a_refused_token_stops_the_bot_with_a_clear_message() {
    let gateway = Gateway::start().await;
    let (_rest, server) = Rest::start().await;
    let home = Home::new("discord-refused");
    let output = home
        .command(
            BIN,
            &[
                ("FERROBOT_DISCORD__TOKEN", "not-the-token".into()),
                ("FERROBOT_DISCORD__API_URL", server.uri()),
                ("FERROBOT_DISCORD__GATEWAY_URL", gateway.url.clone()),
                ("FERROBOT_DISCORD__ALLOWED_USER_IDS", format!("[{ANN}]")),
                ("FERROBOT_DISCORD__STARTUP_NOTICE", "false".into()),
            ],
        )
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), output)
        .await
        .unwrap()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("Discord refused the bot token"), "{log}");
    assert!(!log.contains("not-the-token"), "{log}");
}

#[tokio::test]
async fn without_a_token_the_bot_says_where_to_put_one() {
    let home = Home::new("discord-no-token");
    let output = home.command(BIN, &[]).output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("FERROBOT_DISCORD__TOKEN"), "{log}");
}

#[tokio::test]
async fn a_question_nobody_answers_is_declined_after_the_time_out() {
    let model = MockProvider::new()
        .then(MockTurn::new().tool_call("reboot", json!({})))
        .then(MockTurn::new().text("Left it running."));
    let recorded = model.clone();
    let reboot = from_fn("reboot", "Reboot.", |_: Value, _| async { "rebooted" })
        .confirm("Reboot this machine?");
    let (gateway, rest, _server) = start_with(
        &[ANN],
        |settings| settings.confirm_timeout_secs = 1,
        |channel| agent(model, &channel, vec![reboot.into_tool()]),
    )
    .await;
    gateway.message(ANN, DM, None, "reboot", false);
    let shown = rest
        .wait_for("PATCH", |b| {
            b["content"] == "Reboot this machine?\n\n⌛ No answer within 1 s: declined"
        })
        .await;
    assert_eq!(shown["components"], json!([]), "the buttons go");
    rest.wait_for(&messages_to(DM), |b| b["content"] == "Left it running.")
        .await;
    assert!(format!("{:?}", recorded.requests()[1].messages).contains("Cancelled by user."));
}
