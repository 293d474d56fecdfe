//! The files tests replay: a cassette and a bot session, any bytes.
//! Never a panic: a broken file is an error that says what to do.
#![no_main]

use ferrobot::Agent;
use ferrobot::testing::{Cassette, Session};
use ferrobot_fuzz::{Scratch, block_on};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(scratch) = Scratch::new("ferrobot-fuzz-recordings", "json", data) else {
        return;
    };
    let file = scratch.path();
    let agent = Agent::builder().provider(Cassette::replay(file)).build();
    let _ = block_on(agent.handle("fuzz", "hi"));
    if let Ok(session) = Session::open(file) {
        let agent = Agent::builder()
            .provider(Cassette::replay(file))
            .confirm(session.confirm())
            .build();
        let _ = block_on(session.replay(agent));
    }
});
