//! Webhook mode: Telegram posts each update to `[telegram] webhook_url`.
//! The endpoint checks the secret Telegram sends with it, journals the
//! update's message (`Inner::take`, as polling does) and only then answers
//! 200: an update whose request a crash cut off is posted again, to any
//! replica, and the journal answers it once. Polling's `getUpdates` and a
//! webhook exclude each other; each replica registers the same webhook.
//! Telegram posts an album's photos one update each: those reaching one
//! replica within `ALBUM_WAIT` of the first are one message.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use ferrobot::bot::{ChannelError, Handler};
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::{AllowedUpdate, Update};
use teloxide::{ApiError, RequestError};
use tokio::sync::watch;
use url::Url;

use crate::updates::{ALBUM_WAIT, album_of};
use crate::{Inner, Telegram};

/// The header Telegram sends the webhook's secret in.
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Where Telegram posts updates, and the secret proving a request is
/// Telegram's.
pub(crate) struct Webhook {
    pub(crate) url: Url,
    pub(crate) listen: SocketAddr,
    pub(crate) secret: ferrobot_app::Secret,
}

/// What each request to the endpoint needs.
#[derive(Clone)]
struct Endpoint {
    inner: Arc<Inner>,
    handler: Handler,
    /// The albums being gathered, by their id.
    albums: Arc<Mutex<HashMap<String, Album>>>,
}

/// An album's photos so far, and `true` once they are journaled.
type Album = (Vec<Update>, watch::Receiver<bool>);

impl Telegram {
    /// Listens on `webhook.listen`, registers the webhook with Telegram,
    /// then serves updates until the server fails.
    pub(crate) async fn serve_webhook(
        &self,
        webhook: &Webhook,
        handler: Handler,
    ) -> Result<(), ChannelError> {
        let inner = &self.inner;
        // Listening first: Telegram posts as soon as the webhook is set.
        let listener = tokio::net::TcpListener::bind(webhook.listen)
            .await
            .map_err(|e| ChannelError::Other {
                message: format!(
                    "could not listen on {} for Telegram's webhook ({e}): free the port, or set telegram.webhook_listen to another",
                    webhook.listen
                ),
                source: Some(Box::new(e)),
            })?;
        inner.register(webhook).await?;
        inner.connected.send_replace(true);
        tracing::info!(url = %webhook.url, listen = %webhook.listen, "taking Telegram's updates by webhook");
        let endpoint = Endpoint {
            inner: Arc::clone(inner),
            handler,
            albums: Arc::default(),
        };
        let app = Router::new()
            .route(webhook.url.path(), post(update))
            .with_state(endpoint);
        axum::serve(listener, app)
            .await
            .map_err(|e| ChannelError::Other {
                message: format!("the webhook endpoint on {} stopped: {e}", webhook.listen),
                source: Some(Box::new(e)),
            })
    }
}

impl Inner {
    /// Tells Telegram to post updates to the webhook, with its secret;
    /// retries while Telegram can't be reached, and stops on a refusal
    /// (an http:// URL, a port Telegram won't post to), saying why.
    async fn register(&self, webhook: &Webhook) -> Result<(), ChannelError> {
        let mut wait = Duration::from_secs(1);
        loop {
            let set = self
                .bot
                .set_webhook(webhook.url.clone())
                .secret_token(webhook.secret.expose().to_owned())
                .allowed_updates([AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
                .send()
                .await;
            match set {
                Ok(_) => return Ok(()),
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(ChannelError::Unauthorized);
                }
                Err(RequestError::Api(refused)) => {
                    return Err(ChannelError::Other {
                        message: format!(
                            "Telegram refused the webhook {} ({refused}): telegram.webhook_url must be a public HTTPS URL on port 443, 80, 88 or 8443",
                            webhook.url
                        ),
                        source: None,
                    });
                }
                Err(error) => {
                    tracing::warn!(error = %self.redact(&error), retry_in_s = wait.as_secs(), "could not set the webhook; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(60));
                }
            }
        }
    }
}

/// One update from Telegram: refused without the secret, answered once
/// its message is journaled.
async fn update(State(endpoint): State<Endpoint>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let given = headers.get(SECRET_HEADER).map(|v| v.as_bytes());
    let webhook = endpoint.inner.webhook.as_ref();
    if !given.is_some_and(|given| webhook.is_some_and(|webhook| webhook.secret.matches(given))) {
        refused();
        return StatusCode::UNAUTHORIZED;
    }
    let update: Update = match serde_json::from_slice(&body) {
        Ok(update) => update,
        Err(error) => {
            // Sending it again would not help.
            tracing::warn!(%error, "a webhook request holds no update; dropped");
            return StatusCode::BAD_REQUEST;
        }
    };
    match album_of(&update) {
        Some(album) => endpoint.gather(album, update).await,
        None => {
            endpoint.inner.take(vec![update], &endpoint.handler).await;
            StatusCode::OK
        }
    }
}

impl Endpoint {
    /// Adds a photo to its album; the album's first photo starts a task
    /// that takes the album as one message after [`ALBUM_WAIT`]. Every
    /// photo's request is answered once the album is journaled (500 if
    /// that task failed, so that Telegram posts them again).
    async fn gather(&self, album: String, update: Update) -> StatusCode {
        let mut done = {
            let mut albums = self.albums.lock().unwrap_or_else(PoisonError::into_inner);
            match albums.get_mut(&album) {
                Some((photos, done)) => {
                    photos.push(update);
                    done.clone()
                }
                None => {
                    let (finished, done) = watch::channel(false);
                    albums.insert(album.clone(), (vec![update], done.clone()));
                    // Apart from this request: it may be cut off, the others not.
                    let endpoint = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(ALBUM_WAIT).await;
                        let photos = endpoint
                            .albums
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&album)
                            .map(|(photos, _)| photos)
                            .unwrap_or_default();
                        endpoint.inner.take(photos, &endpoint.handler).await;
                        finished.send_replace(true);
                    });
                    done
                }
            }
        };
        match done.wait_for(|done| *done).await {
            Ok(_) => StatusCode::OK,
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// Logs a request refused for want of the secret: a warning at most once
/// a minute (anyone can post to a public URL, and scanners do), the rest
/// at debug level.
fn refused() {
    static LAST_WARNED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    let mut last = LAST_WARNED.lock().unwrap_or_else(PoisonError::into_inner);
    if last.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
        *last = Some(std::time::Instant::now());
        tracing::warn!(
            "refused a webhook request without the secret: not from Telegram (more are logged at debug level for a minute)"
        );
    } else {
        tracing::debug!("refused a webhook request without the secret");
    }
}
