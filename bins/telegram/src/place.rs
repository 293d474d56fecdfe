//! Where a message goes: a chat and, in a forum supergroup, the topic.

use std::fmt;

use ferrobot::bot::{ChannelError, chat_of};
use teloxide::types::{ChatId, Message, MessageId, ThreadId};

/// A chat and, in a forum supergroup, the topic. As a conversation's chat
/// it reads `CHAT` or `CHAT/TOPIC`, so each topic is its own conversation
/// and its replies, prompts and later messages land in the topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) chat: ChatId,
    pub(crate) topic: Option<ThreadId>,
}

impl Place {
    /// Where `message` was written. The thread of a reply in an ordinary
    /// group is not a topic: an answer there goes to the chat.
    pub(crate) fn of(message: &Message) -> Self {
        Self {
            chat: message.chat.id,
            topic: message.thread_id.filter(|_| message.is_topic_message),
        }
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
        })
    }

    /// The place of a conversation (`CHAT`, `CHAT/TOPIC`, either with a
    /// `/new` suffix).
    pub(crate) fn parse(conversation: &str) -> Result<Self, ChannelError> {
        let chat = chat_of(conversation);
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
        match self.topic {
            Some(ThreadId(MessageId(topic))) => write!(f, "{}/{topic}", self.chat),
            None => write!(f, "{}", self.chat),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_reads_back_as_written() {
        for text in ["111", "-1001293752024", "-1001293752024/4"] {
            assert_eq!(Place::parse(text).unwrap().to_string(), text);
        }
        let place = Place::parse("-100123/7~1764510000000").unwrap();
        assert_eq!(place.chat, ChatId(-100123));
        assert_eq!(place.topic, Some(ThreadId(MessageId(7))));
    }

    #[test]
    fn anything_else_is_refused_with_what_was_given() {
        for text in ["", "abc", "-100/x", "1/2/3"] {
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
