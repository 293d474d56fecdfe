//! Confirmations: `Inner::ask` posts the question with ✅ / ❌ buttons (and
//! "Always" when offered) and waits; `Inner::pressed` answers it when the
//! asker presses one.

use ferrobot::bot::{Length, Unanswered, asked, chat_of, decided};
use ferrobot::confirm::{ConfirmRequest, Decision};
use serde_json::json;
use twilight_model::channel::message::Component;
use twilight_model::http::interaction::{
    InteractionResponse, InteractionResponseData, InteractionResponseType,
};
use twilight_model::id::Id;

use crate::interaction::ephemeral;
use crate::rest::{Target, target};
use crate::{Inner, MESSAGE_LIMIT};

impl Inner {
    /// A ✅ / ❌ / Always press: answers the waiting confirmation if it is the
    /// asker's, and edits the question to show the decision.
    pub(crate) fn pressed(
        &self,
        custom_id: &str,
        presser: u64,
        channel: Option<u64>,
    ) -> InteractionResponse {
        let answered = if self.allowed_users.contains(&presser) {
            let channel = channel.map(|c| c.to_string()).unwrap_or_default();
            self.questions
                .press(custom_id, &presser.to_string(), &channel)
        } else {
            Err(Unanswered::NotTheAsker)
        };
        match answered {
            Ok(answered) => InteractionResponse {
                kind: InteractionResponseType::UpdateMessage,
                data: Some(InteractionResponseData {
                    content: Some(decided(
                        &clip(&answered.prompt),
                        &answered.tool,
                        Some(answered.decision),
                        self.confirm_timeout,
                    )),
                    components: Some(Vec::new()),
                    ..InteractionResponseData::default()
                }),
            },
            Err(why) => ephemeral(&why.to_string()),
        }
    }

    pub(crate) async fn ask(&self, request: ConfirmRequest) -> Decision {
        let Ok(Target::Channel(channel, _)) = target(chat_of(&request.conversation)) else {
            return Decision::Deny(None);
        };
        let question = self.questions.ask(&request);
        let mut row = vec![
            json!({"type": 2, "style": 3, "label": "✅ Yes", "custom_id": question.yes}),
            json!({"type": 2, "style": 4, "label": "❌ No", "custom_id": question.no}),
        ];
        if let Some(always) = &question.always {
            row.push(json!({"type": 2, "style": 1, "label": "🔁 Always", "custom_id": always}));
        }
        let buttons: Vec<Component> = match serde_json::from_value(json!([{
            "type": 1,
            "components": row,
        }])) {
            Ok(buttons) => buttons,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(%error, "could not build the confirmation buttons; declined");
                return Decision::Deny(None);
            }
        };
        let sent = self
            .call("create message", || {
                self.http
                    .create_message(channel)
                    .content(&clip(&asked(&request)))
                    .components(&buttons)
                    .into_future()
            })
            .await;
        let message = match sent {
            Ok(response) => self.id_of(response).await,
            Err(error) => Err(self.channel_error(&error)),
        };
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(%error, "could not ask for confirmation; declined");
                return Decision::Deny(None);
            }
        };
        let decision = self.questions.wait(question, self.confirm_timeout).await;
        if decision.is_none() {
            // A press already showed its decision on the question; a
            // time-out is shown here, and the buttons go.
            let shown = decided(
                &clip(&request.prompt),
                &request.tool,
                None,
                self.confirm_timeout,
            );
            let edited = match message.parse::<u64>().ok().and_then(Id::new_checked) {
                Some(id) => self
                    .call("update message", || {
                        self.http
                            .update_message(channel, id)
                            .content(Some(&shown))
                            .components(Some(&[]))
                            .into_future()
                    })
                    .await
                    .map(drop)
                    .map_err(|e| self.redact(&e)),
                None => Err(format!("`{message}` is not a message id")),
            };
            if let Err(error) = edited {
                tracing::debug!(%error, "could not show the time-out");
            }
        }
        decision.unwrap_or(Decision::Deny(None))
    }
}

/// A confirmation prompt short enough to post, with room for the decision
/// (what "always" allowed names the tool, at most 64 characters, and its
/// scope).
fn clip(prompt: &str) -> String {
    ferrobot::bot::clip(prompt, MESSAGE_LIMIT - 256, Length::Chars)
}
