//! What recordings mask before anything reaches a file: secrets a test
//! names, wherever they appear.

use std::borrow::Cow;

use serde_json::Value;

/// What a masked secret reads as in a recording.
pub(super) const MASK: &str = "[redacted]";

/// The secrets a recording masks: each occurrence of one, in any text it
/// keeps, becomes [`MASK`].
#[derive(Debug, Clone, Default)]
pub(super) struct Secrets(Vec<String>);

impl Secrets {
    /// Masks `secret` too; an empty one masks nothing.
    pub(super) fn add(&mut self, secret: String) {
        if !secret.is_empty() && !self.0.contains(&secret) {
            // The longest first: a secret holding another is masked whole.
            self.0.push(secret);
            self.0.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every secret masked.
    pub(super) fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for secret in &self.0 {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), MASK));
            }
        }
        text
    }

    /// Masks every secret in the string values of `value` (not in keys:
    /// two keys masked alike would become one).
    pub(super) fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.string(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.value(item)),
            _ => {}
        }
    }

    /// Masks every secret in `text`, in place.
    pub(super) fn string(&self, text: &mut String) {
        if let Cow::Owned(masked) = self.text(text) {
            *text = masked;
        }
    }

    /// The bytes of `pieces` with every secret masked, split where they
    /// were as far as can be: a boundary inside a secret moves to its end,
    /// so a secret split across pieces is masked too.
    #[cfg(any(test, feature = "__http"))]
    pub(super) fn pieces(&self, pieces: &[Vec<u8>]) -> Vec<Vec<u8>> {
        if self.is_empty() {
            return pieces.to_vec();
        }
        let whole: Vec<u8> = pieces.concat();
        // Where each piece ended, in the whole.
        let mut ends = Vec::with_capacity(pieces.len());
        let mut at = 0;
        for piece in pieces {
            at += piece.len();
            ends.push(at);
        }
        let mut masked = Vec::with_capacity(whole.len());
        // Each boundary's new place, filled in as the whole is copied.
        let mut new_ends = Vec::with_capacity(ends.len());
        let mut next_end = ends.iter().peekable();
        let mut i = 0;
        while i <= whole.len() {
            // Boundaries at `i` (outside any secret) stay at its copy.
            while next_end.peek().is_some_and(|&&end| end <= i) {
                next_end.next();
                new_ends.push(masked.len());
            }
            if i == whole.len() {
                break;
            }
            let found = self
                .0
                .iter()
                .find(|secret| whole[i..].starts_with(secret.as_bytes()));
            match found {
                Some(secret) => {
                    masked.extend_from_slice(MASK.as_bytes());
                    i += secret.len();
                    // Boundaries inside the secret land after the mask.
                    while next_end.peek().is_some_and(|&&end| end < i) {
                        next_end.next();
                        new_ends.push(masked.len());
                    }
                }
                None => {
                    masked.push(whole[i]);
                    i += 1;
                }
            }
        }
        let mut start = 0;
        new_ends
            .into_iter()
            .map(|end| {
                let piece = masked[start..end].to_vec();
                start = end;
                piece
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(list: &[&str]) -> Secrets {
        let mut secrets = Secrets::default();
        for secret in list {
            secrets.add((*secret).to_owned());
        }
        secrets
    }

    #[test]
    fn a_secret_split_across_pieces_is_masked_and_the_other_boundaries_stay() {
        let secrets = secrets(&["sk-123"]);
        let pieces: Vec<Vec<u8>> = ["data: a", "b sk-1", "23 c", "d"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let masked = secrets.pieces(&pieces);
        let text: Vec<String> = masked
            .iter()
            .map(|p| String::from_utf8(p.clone()).unwrap())
            .collect();
        assert_eq!(text, ["data: a", "b [redacted]", " c", "d"]);
    }

    #[test]
    fn the_longest_secret_is_masked_whole_and_values_are_walked() {
        let secrets = secrets(&["abc", "abcdef"]);
        assert_eq!(secrets.text("x abcdef y abc"), "x [redacted] y [redacted]");
        let mut value = serde_json::json!({"k": ["abc", {"abcdef": "abcdef!"}], "n": 2});
        secrets.value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"k": ["[redacted]", {"abcdef": "[redacted]!"}], "n": 2})
        );
    }

    #[test]
    fn without_secrets_the_pieces_are_unchanged() {
        let pieces = vec![b"a".to_vec(), Vec::new(), b"bc".to_vec()];
        assert_eq!(Secrets::default().pieces(&pieces), pieces);
        assert_eq!(secrets(&["zz"]).pieces(&pieces), pieces);
    }
}
