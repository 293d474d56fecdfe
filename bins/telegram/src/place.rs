//! Where a message goes: a chat and, in a forum supergroup, the topic.

use std::fmt;

use ferrobot::bot::{ChannelError, chat_of};
use teloxide::types::{ChatId, Message, MessageId, ThreadId};

/// A chat and, in a forum supergroup, the topic. As a conversation's chat
/// it reads `CHAT` or `CHAT/TOPIC`, so each topic is its own conversation
/// and its replies, prompts and later messages land in the topic. As where
/// a reply goes it may also name the message answered, `CHAT#MESSAGE`, so
/// that in a group the answer is threaded to its question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) chat: ChatId,
    pub(crate) topic: Option<ThreadId>,
    pub(crate) reply_to: Option<MessageId>,
}

impl Place {
    /// Where `message` was written. The thread of a reply in an ordinary
    /// group is not a topic: an answer there goes to the chat.
    pub(crate) fn of(message: &Message) -> Self {
        Self {
            chat: message.chat.id,
            topic: message.thread_id.filter(|_| message.is_topic_message),
            reply_to: None,
        }
    }

    /// The same place, answering `message`.
    pub(crate) fn replying_to(self, message: MessageId) -> Self {
        Self {
            reply_to: Some(message),
            ..self
        }
    }

    /// Where the answer to `message` goes when not simply to its place: in
    /// a group, as a reply to it, so that it is clear what it answers.
    pub(crate) fn answering(message: &Message) -> Option<Self> {
        (!message.chat.is_private()).then(|| Self::of(message).replying_to(message.id))
    }

    /// The same from a message in raw JSON.
    pub(crate) fn answering_raw(message: &serde_json::Value) -> Option<Self> {
        let chat = message.get("chat")?;
        if chat.get("type").and_then(serde_json::Value::as_str) == Some("private") {
            return None;
        }
        let id = i32::try_from(message.get("message_id")?.as_i64()?).ok()?;
        Some(Self::of_raw(message)?.replying_to(MessageId(id)))
    }

    /// The same from a message in raw JSON, for updates teloxide can't type.
    pub(crate) fn of_raw(message: &serde_json::Value) -> Option<Self> {
        let is_topic = message.get("is_topic_message") == Some(&serde_json::Value::Bool(true));
        let topic = message
            .get("message_thread_id")
            .and_then(serde_json::Value::as_i64)
            .and_then(|id| i32::try_from(id).ok())
            .filter(|_| is_topic)
            .map(|id| ThreadId(MessageId(id)));
        Some(Self {
            chat: ChatId(message.get("chat")?.get("id")?.as_i64()?),
            topic,
            reply_to: None,
        })
    }

    /// The place of a conversation (`CHAT`, `CHAT/TOPIC`, either with a
    /// `/new` suffix) or of a reply (`…#MESSAGE`).
    pub(crate) fn parse(conversation: &str) -> Result<Self, ChannelError> {
        let chat = chat_of(conversation);
        let (chat, reply_to) = match chat.split_once('#') {
            Some((chat, message)) => (chat, Some(message)),
            None => (chat, None),
        };
        let (chat, topic) = match chat.split_once('/') {
            Some((chat, topic)) => (chat, Some(topic)),
            None => (chat, None),
        };
        let place = || -> Option<Self> {
            Some(Self {
                chat: ChatId(chat.parse().ok()?),
                topic: match topic {
                    Some(topic) => Some(ThreadId(MessageId(topic.parse().ok()?))),
                    None => None,
                },
                reply_to: match reply_to {
                    Some(message) => Some(MessageId(message.parse().ok()?)),
                    None => None,
                },
            })
        };
        place().ok_or_else(|| ChannelError::Other {
            message: format!("`{conversation}` is not a Telegram chat id (or `CHAT/TOPIC`)"),
            source: None,
        })
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.chat)?;
        if let Some(ThreadId(MessageId(topic))) = self.topic {
            write!(f, "/{topic}")?;
        }
        if let Some(MessageId(message)) = self.reply_to {
            write!(f, "#{message}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_reads_back_as_written() {
        for text in [
            "111",
            "-1001293752024",
            "-1001293752024/4",
            "-100/4#77",
            "-100#77",
        ] {
            assert_eq!(Place::parse(text).unwrap().to_string(), text);
        }
        let place = Place::parse("-100123/7~1764510000000").unwrap();
        assert_eq!(place.chat, ChatId(-100123));
        assert_eq!(place.topic, Some(ThreadId(MessageId(7))));
    }

    #[test]
    fn anything_else_is_refused_with_what_was_given() {
        for text in ["", "abc", "-100/x", "1/2/3", "-100#x"] {
            let error = Place::parse(text).unwrap_err().to_string();
            assert!(error.contains(&format!("`{text}`")), "{error}");
        }
    }

    #[test]
    fn only_forum_topics_are_places_of_their_own() {
        let topic = serde_json::json!({"chat": {"id": -100}, "message_thread_id": 4, "is_topic_message": true});
        let reply = serde_json::json!({"chat": {"id": -100}, "message_thread_id": 4});
        assert_eq!(Place::of_raw(&topic).unwrap().to_string(), "-100/4");
        assert_eq!(Place::of_raw(&reply).unwrap().to_string(), "-100");
    }
}
