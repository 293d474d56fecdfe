//! A config file, any text: read as the binaries read theirs (over the
//! built-in defaults, the policy's rules checked, every value validated).
//! Never a panic: a bad file is an error naming the key and what to write.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = ferrobot_app::Config::check_toml(text) {
        // The message is what the user reads: it must say something.
        assert!(!error.to_string().trim().is_empty(), "{error:?}");
    }
});
