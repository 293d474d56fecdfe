//! The files tests replay: a cassette and a bot session, any bytes.
//! Never a panic: a broken file is an error that says what to do.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};

use ferrobot::Agent;
use ferrobot::testing::{Cassette, Session};
use ferrobot_fuzz::block_on;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("ferrobot-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("{}.json", N.fetch_add(1, Ordering::Relaxed) % 4));
    if std::fs::write(&file, data).is_err() {
        return;
    }
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
