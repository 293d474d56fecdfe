//! What the Telegram bot adds to a reply before it goes out: the model's
//! Markdown rewritten as MarkdownV2, and a long reply split to Telegram's
//! 4,096 UTF-16 units and rewritten piece by piece.
//!
//! Run with: `cargo bench -p ferrobot-telegram`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferrobot::bot::{Length, split_message};
use ferrobot_telegram::markdown::to_markdown_v2;

/// A typical answer: prose with emphasis, a list, inline code, a code block.
fn reply(paragraphs: usize) -> String {
    let block = "Disk `/` has **42.5 GB** free (of 100 GB); _nothing_ to worry about.\n\n\
                 - `/var/log` is 3.1 GB: rotate it.\n- `/home` grew by 12% this week!\n\n\
                 ```sh\ndu -sh /var/log/* | sort -h | tail -n 5\n```\n\n";
    block.repeat(paragraphs)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("telegram");
    let short = reply(4);
    group.throughput(Throughput::Bytes(short.len() as u64));
    group.bench_function("markdown_v2_1kb", |b| {
        b.iter(|| to_markdown_v2(black_box(&short)))
    });
    let long = reply(120);
    group.throughput(Throughput::Bytes(long.len() as u64));
    group.bench_function("split_and_format_30kb", |b| {
        b.iter(|| {
            split_message(black_box(&long), 4096, Length::Utf16)
                .iter()
                .map(|piece| to_markdown_v2(piece))
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
