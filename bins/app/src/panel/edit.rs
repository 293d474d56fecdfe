//! One key of the config file changed from the panel: the file's comments
//! and layout kept (`toml_edit`), the result checked as the binaries load
//! it, then written atomically.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use toml_edit::{DocumentMut, Item, Table};

use crate::config::Config;

/// What an edit did, for the panel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Edited {
    /// The file written.
    pub file: PathBuf,
    /// The key changed, e.g. `agent.max_tool_rounds`.
    pub key: String,
    /// When the change takes effect.
    pub applies: &'static str,
    /// The environment variable that overrides the file for this key in
    /// the running process, if one does.
    pub overridden_by: Option<String>,
}

/// Sets `key` (dotted, e.g. `agent.max_tool_rounds`) to `value` in the
/// config file `file` (made if missing), or removes it when `value` is
/// null, keeping everything else as written.
///
/// # Errors
/// A message for the user: a secret key (set those in the environment), a
/// value TOML can't hold, a file that isn't TOML, or a config the binaries
/// would refuse (their own message). The file is unchanged then.
pub fn set(file: &Path, key: &str, value: &Value) -> Result<Edited, String> {
    // One edit at a time: each reads what the one before wrote.
    static EDITING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = crate::run::lock(&EDITING);
    let parts: Vec<&str> = key.split('.').collect();
    let Some((last, tables)) = parts
        .split_last()
        .filter(|_| parts.iter().all(|part| !part.is_empty()))
    else {
        return Err(format!(
            "`{key}` is no key: give one such as `agent.max_tool_rounds`"
        ));
    };
    if is_secret(&parts) {
        return Err(format!(
            "`{key}` holds a secret, which the panel never shows nor writes: set it in the environment (FERROBOT_{}) or in the file by hand",
            env_name(&parts)
        ));
    }
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(format!("could not read {}: {error}", file.display())),
    };
    let mut document: DocumentMut = text.parse().map_err(|error| {
        format!(
            "{} is not valid TOML, so it is left alone; fix it by hand: {error}",
            file.display()
        )
    })?;
    if value.is_object() {
        return Err(format!(
            "`{key}`: give one value, not a table; set the keys inside it one at a time"
        ));
    }
    let mut table: &mut Table = document.as_table_mut();
    for part in tables {
        let item = table.entry(part).or_insert_with(|| {
            let mut new = Table::new();
            new.set_implicit(true);
            Item::Table(new)
        });
        table = item
            .as_table_mut()
            .ok_or_else(|| format!("`{part}` in `{key}` is a value in the file, not a section"))?;
    }
    match table.get_mut(last) {
        // A section, or a list of them (`[[permissions.rules]]`): their keys
        // may be secrets, and their comments would go.
        Some(Item::Table(_) | Item::ArrayOfTables(_)) => {
            return Err(format!(
                "`{key}` is a section of the file: set the keys inside it one at a time, or edit it by hand"
            ));
        }
        Some(Item::Value(old)) if !value.is_null() => {
            // Replaced in place: the comments above and beside it stay.
            let mut new = toml_value(value, key)?;
            *new.decor_mut() = old.decor().clone();
            *old = new;
        }
        _ if value.is_null() => {
            table.remove(last);
        }
        _ => {
            table.insert(last, Item::Value(toml_value(value, key)?));
        }
    }
    let edited = document.to_string();
    Config::check_toml(&edited).map_err(|error| error.to_string())?;
    write(file, &edited).map_err(|error| format!("could not write {}: {error}", file.display()))?;
    let variable = format!("FERROBOT_{}", env_name(&parts));
    Ok(Edited {
        file: file.to_owned(),
        key: key.to_owned(),
        applies: "at the next start of each binary reading this file",
        overridden_by: std::env::var_os(&variable).map(|_| variable),
    })
}

/// Keys whose values are secrets (tokens, keys, passwords in URLs), by
/// name: the panel neither shows nor writes them.
fn is_secret(parts: &[&str]) -> bool {
    let last = parts.last().copied().unwrap_or_default();
    matches!(last, "token" | "api_key" | "webhook_secret")
        || parts == ["history", "url"]
        || parts.iter().any(|part| matches!(*part, "env" | "headers"))
}

/// `agent.max_tool_rounds` → `AGENT__MAX_TOOL_ROUNDS`.
fn env_name(parts: &[&str]) -> String {
    parts.join("__").to_uppercase()
}

fn toml_value(value: &Value, key: &str) -> Result<toml_edit::Value, String> {
    Ok(match value {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.into(),
            (None, Some(f)) => f.into(),
            (None, None) => return Err(format!("`{key}`: {n} is too large for TOML")),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item, key)?);
            }
            array.into()
        }
        Value::Object(map) => {
            let mut inline = toml_edit::InlineTable::new();
            for (name, item) in map {
                inline.insert(name, toml_value(item, key)?);
            }
            inline.into()
        }
        Value::Null => return Err(format!("`{key}`: null inside a value has no TOML form")),
    })
}

/// Writes `text` over `file` (the file a symlink points to, if it is
/// one) through a new temporary file beside it, renamed over it: readers
/// see the old file or the new one. The temporary file is the owner's only
/// from the start, and takes the old file's permissions (it may hold keys).
fn write(file: &Path, text: &str) -> std::io::Result<()> {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let temporary = file.with_extension(format!(
        "toml.{}-{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&temporary).and_then(|mut opened| {
        opened.write_all(text.as_bytes())?;
        if let Ok(metadata) = std::fs::metadata(&file) {
            opened.set_permissions(metadata.permissions())?;
        }
        opened.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temporary, &file));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A config file holding `text` in a fresh folder, removed when dropped.
    struct Temp(PathBuf);

    impl Temp {
        fn file(&self) -> PathBuf {
            self.0.join("ferrobot.toml")
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp(name: &str, text: &str) -> Temp {
        let dir = std::env::temp_dir().join(format!("ferrobot-edit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let temp = Temp(dir);
        std::fs::write(temp.file(), text).unwrap();
        temp
    }

    #[test]
    fn a_key_is_set_and_the_comments_stay() {
        let dir = temp(
            "set",
            "# My bot.\n[agent]\n# Be brief.\nmax_tool_rounds = 4 # low\n\n[llm]\nmodel = \"qwen3:8b\"\n",
        );
        let file = dir.file();
        let edited = set(&file, "agent.max_tool_rounds", &json!(12)).unwrap();
        assert_eq!(edited.key, "agent.max_tool_rounds");
        set(&file, "context.window", &json!(32768)).unwrap();
        set(&file, "llm.model", &Value::Null).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "# My bot.\n[agent]\n# Be brief.\nmax_tool_rounds = 12 # low\n\n[llm]\n\n[context]\nwindow = 32768\n"
        );
    }

    #[test]
    fn a_bad_value_or_a_secret_leaves_the_file_alone() {
        let original = "[agent]\nmax_tool_rounds = 4\n";
        let dir = temp("bad", original);
        let file = dir.file();
        let error = set(&file, "agent.max_tool_rounds", &json!("many")).unwrap_err();
        assert!(error.contains("max_tool_rounds"), "{error}");
        let error = set(&file, "agent.no_such_key", &json!(1)).unwrap_err();
        assert!(error.contains("no_such_key"), "{error}");
        let error = set(&file, "telegram.token", &json!("123:abc")).unwrap_err();
        assert!(error.contains("FERROBOT_TELEGRAM__TOKEN"), "{error}");
        let error = set(&file, "agent.max_tool_rounds.x", &json!(1)).unwrap_err();
        assert!(error.contains("not a section"), "{error}");
        let error = set(&file, "agent", &json!(null)).unwrap_err();
        assert!(error.contains("is a section"), "{error}");
        let error = set(&file, "telegram", &json!({"token": "123:abc"})).unwrap_err();
        assert!(error.contains("not a table"), "{error}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
        let left: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }
}
