//! The control panel's config edit (`POST /api/config {"key", "value"}`),
//! any body, on a config file that is itself any text: the edit is written
//! only when the file it leaves loads, else the file is left as it was.
#![no_main]

use ferrobot_app::Config;
use ferrobot_app::panel::edit;
use ferrobot_fuzz::Scratch;
use serde::Deserialize;
use serde_json::Value;

/// The panel's request body.
#[derive(Deserialize)]
struct Edit {
    key: String,
    value: Value,
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The file before `\0`, the request body after it.
    let (file_text, body) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&[][..], data),
    };
    let Ok(edit) = serde_json::from_slice::<Edit>(body) else {
        return;
    };
    let Some(scratch) = Scratch::new("ferrobot-fuzz-panel", "toml", file_text) else {
        return;
    };
    let file = scratch.path();
    let edited = edit::set(file, &edit.key, &edit.value);
    let after = std::fs::read(file).expect("the config file is still there");
    match edited {
        Ok(_) => {
            let text = std::str::from_utf8(&after).expect("an edit writes UTF-8");
            if let Err(error) = Config::check_toml(text) {
                panic!("an edit wrote a file that doesn't load: {error}\n{text}");
            }
        }
        Err(message) => {
            assert_eq!(after, file_text, "a refused edit changed the file");
            assert!(!message.trim().is_empty());
        }
    }
});
