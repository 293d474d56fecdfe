//! The names MCP tools get in the agent: `server__tool`, fitted to every
//! dialect's rule (`^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`: `OpenAI`'s, with the
//! leading letter Gemini wants).

/// The longest name every dialect takes.
pub(crate) const MAX_LEN: usize = 64;

/// Checks a server's name: a letter, then letters, digits, `_` or `-`, at
/// most 32 characters and no `__` (which separates it from the tool's).
pub(crate) fn check_server_name(name: &str) -> Result<(), String> {
    let fits = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__");
    if fits {
        Ok(())
    } else {
        Err(format!(
            "the MCP server name {name:?} can't prefix tool names: use a letter, then letters, \
             digits, `_` or `-` (at most 32, no `__`)"
        ))
    }
}

/// `server__tool`, with characters the dialects refuse replaced by `_`;
/// shortened to 64 characters with a hash of the tool's own name at the end
/// when longer, so that two long names stay apart.
pub(crate) fn prefixed(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{server}__{clean}");
    if full.len() <= MAX_LEN && clean == tool {
        return full;
    }
    if full.len() <= MAX_LEN {
        // Replaced characters could make two names one ("a.b", "a/b"): the
        // hash keeps them apart, where it fits.
        let tagged = format!("{full}_{:08x}", hash(tool) as u32);
        return if tagged.len() <= MAX_LEN {
            tagged
        } else {
            full
        };
    }
    let tag = format!("_{:08x}", hash(tool) as u32);
    let keep = MAX_LEN - tag.len();
    // ASCII only by now, so any byte index is a char boundary.
    format!("{}{tag}", &full[..keep])
}

/// FNV-1a: small, and stable across Rust versions and runs (the standard
/// hasher is neither promised).
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn portable(name: &str) -> bool {
        (1..=MAX_LEN).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn short_clean_names_are_prefixed_as_they_are() {
        assert_eq!(prefixed("everything", "get-env"), "everything__get-env");
    }

    #[test]
    fn long_names_are_shortened_with_a_hash_and_stay_apart() {
        let a = prefixed("files", &format!("{}_a", "x".repeat(80)));
        let b = prefixed("files", &format!("{}_b", "x".repeat(80)));
        assert_eq!(a.len(), 64);
        assert!(a.starts_with("files__xxx"));
        assert_ne!(a, b);
        assert!(portable(&a) && portable(&b));
        assert_eq!(a, prefixed("files", &format!("{}_a", "x".repeat(80))));
    }

    #[test]
    fn unportable_characters_are_replaced_and_tagged() {
        let dotted = prefixed("git", "repo.status");
        let slashed = prefixed("git", "repo/status");
        assert!(dotted.starts_with("git__repo_status_"));
        assert_ne!(dotted, slashed);
        assert!(portable(&dotted));
    }

    #[test]
    fn server_names_must_fit_the_prefix_rule() {
        assert!(check_server_name("files-2").is_ok());
        for bad in ["", "2files", "my server", "a__b", &"x".repeat(33)] {
            assert!(check_server_name(bad).is_err(), "{bad:?}");
        }
    }
}
