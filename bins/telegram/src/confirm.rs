//! Confirmations: `Inner::ask` posts the question with ✅ / ❌ buttons (and
//! "Always" when offered) and waits; `Inner::pressed` hands a press to the
//! waiting turn if it is the asker's.

use ferrobot::bot::{Length, Unanswered, asked, clip, decided};
use ferrobot::confirm::{ConfirmRequest, Decision};
use teloxide::payloads::setters::*;
use teloxide::prelude::{Request as _, Requester};
use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup};

use crate::place::Place;
use crate::{Inner, MESSAGE_LIMIT};

impl Inner {
    /// A ✅ / ❌ / Always press: answers the waiting confirmation if it is the asker's.
    pub(crate) async fn pressed(&self, query: CallbackQuery) {
        let answer = self.decide(&query);
        let acknowledged = self
            .call("answerCallbackQuery", || {
                let request = self.bot.answer_callback_query(query.id.clone());
                match &answer {
                    Some(text) => request.text(text).send(),
                    None => request.send(),
                }
            })
            .await;
        if let Err(error) = acknowledged {
            tracing::debug!(error = %self.redact(&error), "could not acknowledge a button press");
        }
    }

    /// Hands the decision to the waiting turn; returns what to tell the
    /// presser when it wasn't theirs to make.
    fn decide(&self, query: &CallbackQuery) -> Option<String> {
        let presser = query.from.id.0;
        let answered = if self.is_allowed(presser) {
            let data = query.data.as_deref().unwrap_or_default();
            // Where the question was asked, as its conversation names it.
            let chat = crate::updates::pressed_in(query).unwrap_or_default();
            self.questions
                .press(data, &presser.to_string(), &chat)
                .map(drop)
        } else {
            Err(Unanswered::NotTheAsker)
        };
        answered.err().map(|why| why.to_string())
    }

    pub(crate) async fn ask(&self, request: ConfirmRequest) -> Decision {
        let Ok(place) = Place::parse(&request.conversation) else {
            return Decision::Deny(None);
        };
        let question = self.questions.ask(&request);
        // Short enough to post, with room for the decision (what "always"
        // allowed names the tool, at most 64 characters, and its scope).
        let room = MESSAGE_LIMIT - 256;
        let prompt = clip(&request.prompt, room, Length::Utf16);
        let text = clip(&asked(&request), room, Length::Utf16);
        let mut row = vec![
            InlineKeyboardButton::callback("✅ Yes", &question.yes),
            InlineKeyboardButton::callback("❌ No", &question.no),
        ];
        if let Some(always) = &question.always {
            row.push(InlineKeyboardButton::callback("🔁 Always", always));
        }
        let buttons = InlineKeyboardMarkup::new([row]);
        let sent = self
            .call("sendMessage", || {
                self.message(place, &text)
                    .reply_markup(buttons.clone())
                    .send()
            })
            .await;
        let message = match sent {
            Ok(message) => message.id,
            Err(error) => {
                self.questions.forget(question.id());
                tracing::warn!(error = %self.redact(&error), "could not ask for confirmation; declined");
                return Decision::Deny(None);
            }
        };
        let decision = self.questions.wait(question, self.confirm_timeout).await;
        // The buttons go: the message now shows the decision.
        let shown = decided(
            &prompt,
            &request.tool,
            decision.clone(),
            self.confirm_timeout,
        );
        if let Err(error) = self.edit_text(place.chat, message, &shown, false).await {
            tracing::debug!(error = %self.redact(&error), "could not show the decision");
        }
        decision.unwrap_or(Decision::Deny(None))
    }
}
