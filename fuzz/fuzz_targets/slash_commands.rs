//! What a user types, slash commands above all: the built-ins and tools
//! as commands (`/weather city=Paris`, quoted values, unknown names),
//! parsed and run. Never a panic; every input gets an answer.
#![no_main]

use ferrobot::Agent;
use ferrobot::testing::MockProvider;
use ferrobot_fuzz::block_on;

/// Echoes its arguments.
#[ferrobot::tool]
async fn echo(
    /// What to say.
    text: String,
    /// How often.
    times: Option<u8>,
) -> String {
    text.repeat(usize::from(times.unwrap_or(1).min(3)))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let agent = Agent::builder()
        .provider(MockProvider::replying("ok"))
        .tool(echo)
        .build();
    // A second message in the same conversation: `/undo`, `/new` and
    // friends act on what the first left.
    for text in [text, "/undo", text] {
        let _ = block_on(agent.handle("fuzz", text));
    }
});
