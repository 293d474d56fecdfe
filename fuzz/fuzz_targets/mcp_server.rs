//! An MCP server that answers anything: each JSON-RPC request the client
//! sends (initialize, tools/list) gets the next line of the fuzzer's bytes,
//! and the stream ends with the last. The client connects, lists the
//! tools and turns their schemas into ferrobot tools. Never a panic, never
//! a hang: a server that talks nonsense is an error saying so.
#![no_main]

use std::time::Duration;

use ferrobot::mcp::McpServer;
use ferrobot_fuzz::block_on;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let answers: Vec<Vec<u8>> = data
        .split(|&b| b == b'\n')
        .map(|line| [line, b"\n"].concat())
        .collect();
    let server = McpServer::stream("fuzz", move || {
        let (client, server) = tokio::io::duplex(1 << 20);
        let answers = answers.clone();
        tokio::spawn(async move {
            let (reader, mut writer) = tokio::io::split(server);
            let mut lines = BufReader::new(reader).lines();
            let mut answers = answers.into_iter().peekable();
            // A client that asks nothing more for a moment is waiting for
            // something this server won't send: the stream ends.
            let quiet = Duration::from_millis(20);
            while let Ok(Ok(Some(line))) = tokio::time::timeout(quiet, lines.next_line()).await {
                // Notifications get no answer.
                if !line.contains("\"id\"") {
                    continue;
                }
                let Some(answer) = answers.next() else { break };
                // After the last answer the stream ends, so that a client
                // waiting for more learns at once that none will come.
                if writer.write_all(&answer).await.is_err() || answers.peek().is_none() {
                    break;
                }
            }
        });
        client
    })
    .connect_timeout(Duration::from_millis(500))
    .timeout(Duration::from_millis(500));
    let _ = block_on(server.probe());
});
