//! The fake gateway: a WebSocket server speaking HELLO, IDENTIFY, READY,
//! RESUME and heartbeats, and the dispatches a test sends through it.

use std::sync::{Arc, Mutex};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_websockets::{CloseCode, Message as Frame, ServerBuilder};

use crate::support::{APP, BOT, DM, TOKEN};

/// A Discord gateway: HELLO on connect, READY after IDENTIFY (with a
/// `resume_gateway_url` pointing back here), missed dispatches replayed after
/// RESUME, heartbeats acknowledged. Dispatches pushed while no session is
/// connected wait for the resume.
#[derive(Clone)]
pub(crate) struct Gateway {
    pub(crate) url: String,
    pub(crate) state: Arc<Mutex<Session>>,
}

#[derive(Default)]
pub(crate) struct Session {
    /// Every dispatch: sequence number and frame.
    sent: Vec<(u64, Value)>,
    seq: u64,
    live: Option<mpsc::UnboundedSender<Out>>,
    pub(crate) identifies: usize,
    pub(crate) resumes: Vec<Value>,
}

enum Out {
    Frame(String),
    /// Cut the connection without a close frame, as a network failure would.
    Drop,
}

impl Gateway {
    pub(crate) async fn start() -> Self {
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
    pub(crate) fn dispatch(&self, kind: &str, data: Value) {
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
    pub(crate) fn drop_connection(&self) {
        if let Some(live) = self.state.lock().unwrap().live.take() {
            let _ = live.send(Out::Drop);
        }
    }

    pub(crate) fn message(
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
    pub(crate) fn message_data(
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

    pub(crate) fn press(&self, user: u64, id: &str, custom_id: &str) {
        self.interaction(
            user,
            id,
            3,
            json!({"custom_id": custom_id, "component_type": 2}),
        );
    }

    pub(crate) fn slash(&self, user: u64, id: &str, name: &str, options: Value) {
        self.interaction(
            user,
            id,
            2,
            json!({"id": "800000000000000001", "name": name, "type": 1, "options": options}),
        );
    }
}
