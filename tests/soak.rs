//! The concurrency soak, a short form inside `cargo test` (the long one, each run in
//! a child process, is `cargo run --release --example soak`): 8 threads mixing
//! `execute`, `execute_async`, donation chains, donation of buffers that executions
//! in flight still read, `read_in_place` / `to_vec` / `copy_to_host` from several
//! threads at once, hand-offs between threads and a dropper thread, every value
//! checked exactly against plain Rust (see `tests/common/soak.rs`).
//!
//! A mix like this, written before donation took the buffer by value (when one
//! thread could donate a buffer that another was reading), aborted the process on
//! the 0.115 CPU plugin in 5 of 8 runs of 8,000 calls; a crash here fails the test
//! binary, which is the point. Four runs of 8 threads × 3,000 operations, each with
//! a fresh client (default options, parking waits, spinning waits, a synchronous
//! client); a few seconds in a debug build.

mod common;
#[path = "common/soak.rs"]
mod soak;

use std::time::Instant;

use xlaclient::{Client, Plugin};

const RUNS: u64 = 4;
const THREADS: usize = 8;
const CALLS_PER_THREAD: usize = 3000;
const SEED: u64 = 0x50AC;

#[test]
fn threads_mixing_execution_donation_and_reads_get_exact_values() {
    let plugin = Plugin::default_plugin().expect("load the PJRT plugin under test");
    let start = Instant::now();
    let mut total = soak::Stats::default();
    for run in 0..RUNS {
        let client = Client::new(&plugin, &soak::client_options(run)).expect("create a client");
        let stats = soak::soak(&client, THREADS, CALLS_PER_THREAD, SEED + run)
            .unwrap_or_else(|e| panic!("soak run {run} (seed {}): {e}", SEED + run));
        if let Some(problem) = stats.incomplete(THREADS, CALLS_PER_THREAD) {
            panic!("soak run {run}: {problem}\n{}", stats.summary());
        }
        total.add(&stats);
    }
    assert_eq!(
        total.total_ops(),
        RUNS * (THREADS * CALLS_PER_THREAD) as u64
    );
    assert!(
        total.checks() > total.total_ops() / 2,
        "{}",
        total.summary()
    );
    eprintln!(
        "soak: plugin={} runs={RUNS} threads={THREADS} calls={} in {:.1} s: {}",
        plugin.path().display(),
        RUNS * (THREADS * CALLS_PER_THREAD) as u64,
        start.elapsed().as_secs_f64(),
        total.summary()
    );
}
