//! The files tests replay: a cassette and a bot session, any bytes.
//! Never a panic: a broken file is an error that says what to do.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};

use ferrobot::Agent;
use ferrobot::testing::{Cassette, Session};
use ferrobot_fuzz::block_on;

/// Removes the file when the input is done with, even after a panic.
struct Removed<'a>(&'a std::path::Path);

impl Drop for Removed<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    static N: AtomicU64 = AtomicU64::new(0);
    // One folder for every run; each input's file is removed after it.
    let dir = std::env::temp_dir().join("ferrobot-fuzz-recordings");
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!(
        "{}-{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::write(&file, data).is_err() {
        return;
    }
    let _removed = Removed(&file);
    let agent = Agent::builder().provider(Cassette::replay(&file)).build();
    let _ = block_on(agent.handle("fuzz", "hi"));
    if let Ok(session) = Session::open(&file) {
        let agent = Agent::builder()
            .provider(Cassette::replay(&file))
            .confirm(session.confirm())
            .build();
        let _ = block_on(session.replay(agent));
    }
});
