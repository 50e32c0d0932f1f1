//! Leak check: many execute calls with an upload and a download each, then many
//! compile-and-drop cycles, then many executions on an asynchronous client whose
//! futures are polled once (registering a waker with the plugin's completion
//! callback) and dropped while pending; resident memory (from `/proc/self/statm`)
//! is sampled after a warm-up and at the end of each phase. Exits with status 1 if
//! any phase grew by more than 1% after its warm-up.
//!
//! `cargo run --release --example leak_check -- [CALLS] [COMPILES] [DROPS]`
//! (defaults 1,000,000, 10,000 and 100,000; smaller counts for a quick run). The
//! warm-up is a tenth of each phase (at least one call). The plugin is `PJRT_PLUGIN_PATH` or the default
//! CPU plugin. `scripts/leak_check.sh` runs it.

use std::time::Instant;

use futures::FutureExt;

use xlaclient::{Builder, Client, Computation, Shape};

/// Resident set size in bytes (`/proc/self/statm`, second field, in pages).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    pages * page_size()
}

/// The kernel's page size (4 KiB on x86-64, up to 64 KiB on some AArch64
/// kernels), as `/proc/self/smaps` states it for the first mapping.
fn page_size() -> u64 {
    std::fs::read_to_string("/proc/self/smaps")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("KernelPageSize:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(4096, |kb| kb * 1024)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn module(i: usize) -> Computation {
    let b = Builder::new(&format!("m{i}"));
    let x = b.parameter(0, Shape::of::<f32>(&[16]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[16]), "w");
    // A module that differs per cycle (a constant), so no compile cache hides work.
    b.build(&((&x * &w).tanh() + i as f64))
        .expect("module builds")
}

/// `k` chained 64×64 matmuls with a tanh each.
fn chain(k: usize) -> Computation {
    let b = Builder::new("chain");
    let x = b.parameter(0, Shape::of::<f32>(&[64, 64]), "x");
    let mut y = x.clone();
    for _ in 0..k {
        y = y.matmul(&x).tanh();
    }
    b.build(&y).expect("module builds")
}

/// Runs `n` steps of `step`, sampling RSS after the first tenth; returns the
/// growth after warm-up as a fraction and prints the phase's line.
fn phase(name: &str, n: usize, mut step: impl FnMut(usize)) -> f64 {
    let warm = (n / 10).max(1).min(n);
    let t = Instant::now();
    for i in 0..warm {
        step(i);
    }
    let after_warm = rss();
    for i in warm..n {
        step(i);
    }
    let end = rss();
    let growth = (end as f64 - after_warm as f64) / after_warm as f64;
    println!(
        "{name}: {n} in {:.1} s; RSS after warm-up ({warm}) {:.1} MiB, at the end {:.1} MiB, growth {:+.3}%",
        t.elapsed().as_secs_f64(),
        mib(after_warm),
        mib(end),
        growth * 100.0
    );
    growth
}

fn main() -> xlaclient::Result<()> {
    let mut args = std::env::args().skip(1);
    let calls: usize = args.next().map_or(1_000_000, |a| a.parse().expect("CALLS"));
    let compiles: usize = args.next().map_or(10_000, |a| a.parse().expect("COMPILES"));
    let drops: usize = args.next().map_or(100_000, |a| a.parse().expect("DROPS"));
    let client = Client::cpu()?;
    println!(
        "plugin {} (PJRT C API {:?}); RSS at start {:.1} MiB",
        client.plugin().path().display(),
        client.plugin().api_version(),
        mib(rss())
    );
    let exe = client.compile(module(0))?;
    let w = client.buffer_from_host(&[0.5f32; 16], &[16])?;
    let mut host = vec![0.0f32; 16];
    let mut out = vec![0.0f32; 16];
    let g_exec = phase("execute (upload, execute, download)", calls, |i| {
        host[i % 16] = i as f32 * 1e-6;
        let x = client.buffer_from_host(&host, &[16]).expect("upload");
        let r = exe.execute(&[&x, &w]).expect("execute");
        r[0].copy_to_host(&mut out).expect("download");
    });
    let x = client.buffer_from_host(&host, &[16])?;
    let g_comp = phase("compile, run once and drop", compiles, |i| {
        let e = client.compile(module(i + 1)).expect("compile");
        let r = e.execute(&[&x, &w]).expect("execute");
        r[0].copy_to_host(&mut out).expect("download");
    });
    // An asynchronous client, so that executions are still running when their
    // futures are polled once and dropped.
    let async_client = Client::new(
        client.plugin(),
        &xlaclient::ClientOptions::new().asynchronous(true),
    )?;
    // Long enough (eight 64×64 matmuls) to be still running when first polled.
    let a_exe = async_client.compile(chain(8))?;
    let ax = async_client.buffer_from_host(&[0.01f32; 64 * 64], &[64, 64])?;
    let mut pending_drops = 0usize;
    let g_drop = phase("execute_async, poll once, drop", drops, |_| {
        let running = a_exe.execute_async(&[&ax]).expect("launch");
        if running.now_or_never().is_none() {
            pending_drops += 1;
        }
        // A second execution waited for, so that dropped work does not pile up
        // in the plugin's queue faster than it runs.
        let out = a_exe.execute(&[&ax]).expect("launch");
        out[0].ready().expect("ready");
    });
    println!("  ({pending_drops} of {drops} were still pending when dropped)");
    let limit = 0.01;
    if g_exec > limit || g_comp > limit || g_drop > limit {
        println!("FAIL: resident memory grew by more than 1% after warm-up");
        std::process::exit(1);
    }
    println!("ok: growth after warm-up within 1%");
    Ok(())
}
