//! The bot runtime both bot binaries share (`bot::serve`): what it costs to
//! answer chat messages, apart from the network. 100 messages over 10 chats,
//! each answered with a 400-character reply streamed in 40 deltas, against
//! a channel whose calls do nothing: once with an edit after every delta
//! (the worst case of streaming), once posting whole replies.
//!
//! Run with: `cargo bench --bench bot --features bot`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrobot::Agent;
use ferrobot::bot::{Channel, ChannelError, Handler, Incoming, serve};
use ferrobot::testing::{MockProvider, MockTurn};
use futures_util::future::{BoxFuture, join_all};

const MESSAGES: usize = 100;

/// Delivers the messages at once and counts what the bot sends.
struct Counting {
    edit_interval: Option<Duration>,
    calls: AtomicUsize,
}

impl Channel for Counting {
    fn start(&self, handler: Handler) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let turns = (0..MESSAGES).map(|i| {
                handler.answer(Incoming::new(format!("chat-{}", i % 10), "ann", "status?"))
            });
            join_all(turns).await;
            Ok(())
        })
    }

    fn post<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move { Ok(n.to_string()) })
    }

    fn edit<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Ok(()) })
    }

    fn edit_interval(&self) -> Option<Duration> {
        self.edit_interval
    }
}

fn answer_all(edit_interval: Option<Duration>) -> impl std::future::Future<Output = usize> {
    let reply = "Disk / has 42.5 GB free of 100 GB; nothing to worry about. ".repeat(7);
    let agent = Agent::builder()
        .provider(MockProvider::from_fn(move |_| {
            MockTurn::new().text(reply.clone()).chunked(10)
        }))
        .build();
    let channel = Arc::new(Counting {
        edit_interval,
        calls: AtomicUsize::new(0),
    });
    async move {
        serve(agent, channel.clone())
            .await
            .expect("the channel ends cleanly");
        channel.calls.load(Ordering::Relaxed)
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let mut group = c.benchmark_group("bot");
    group.throughput(Throughput::Elements(MESSAGES as u64));
    group.bench_function("100_messages_edit_every_delta", |b| {
        b.to_async(&runtime)
            .iter(|| answer_all(Some(Duration::ZERO)));
    });
    group.bench_function("100_messages_whole_replies", |b| {
        b.to_async(&runtime).iter(|| answer_all(None));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
