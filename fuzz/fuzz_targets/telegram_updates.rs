//! A Telegram webhook request's body (polling reads the same), any bytes:
//! parsed as an update and turned into the message the bot would take —
//! where it was written, who wrote it, its text and files — or the place
//! a button was pressed. Never a panic: what isn't an update is dropped.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ferrobot_telegram::read_update(data);
});
