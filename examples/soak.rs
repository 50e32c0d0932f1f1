//! Long concurrency soak runs: threads mixing `execute`, `execute_async`, donation
//! chains, donation of buffers that executions in flight still read,
//! `read_in_place` / `to_vec` / `copy_to_host` from several threads at once,
//! hand-offs between threads and a dropper thread, every value checked exactly
//! against plain Rust (the workload is `tests/common/soak.rs`). Each run is a child
//! process (this program, re-invoked), so that a crash of the plugin (an abort, a
//! segfault) is counted rather than fatal.
//!
//! ```text
//! cargo run --release --example soak -- --runs 8 --calls 8000 --threads 8 [--seed S]
//!     [--hang-secs 600]
//! ```
//!
//! `--calls` is the number of operations of each run, all threads together
//! (`--calls / --threads` per thread). Run `r` uses seed `S + r` and a fresh client
//! whose options take turns (default, parking waits, spinning waits, synchronous).
//! Prints one line per run (ok / crashed / failed) and then
//! `soak: plugin=… runs=R calls=C crashes=K failures=F …`; exits non-zero if any run
//! crashed, hung or failed. The plugin is `PJRT_PLUGIN_PATH` or the pinned CPU
//! plugin.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/soak.rs"]
mod soak;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xlaclient::{Client, Plugin};

/// The environment variable that makes this program a soak child:
/// `<run> <threads> <calls_per_thread> <seed>`.
const CHILD_ENV: &str = "XLACLIENT_SOAK_CHILD";
/// The line a child prints last: `SOAK-RESULT ok <summary>` or `SOAK-RESULT fail <why>`.
const RESULT: &str = "SOAK-RESULT";

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |name: &str, default: u64| common::flag_number(&args, name, default);
    if args.iter().any(|a| a == "--help" || a == "-h") {
        eprintln!("usage: soak [--runs R] [--calls C] [--threads T] [--seed S] [--hang-secs H]");
        std::process::exit(2);
    }
    let runs = num("--runs", 8);
    let calls = num("--calls", 8000);
    let threads = num("--threads", 8).max(1);
    let seed = num("--seed", 0);
    let hang = Duration::from_secs(num("--hang-secs", 600));
    let per_thread = calls.div_ceil(threads);
    let plugin = match std::env::var("PJRT_PLUGIN_PATH") {
        Ok(p) if !p.is_empty() => p,
        _ => match xlaclient::install::default_plugin_path() {
            Ok(p) => format!("default ({})", p.display()),
            Err(_) => "default".into(),
        },
    };
    println!(
        "soak: plugin={plugin}: {runs} runs of {} calls ({threads} threads × {per_thread})",
        per_thread * threads
    );
    let exe = std::env::current_exe().expect("current exe");
    let start = Instant::now();
    let (mut crashes, mut failures, mut ops) = (0u64, 0u64, 0u64);
    for run in 0..runs {
        let t = Instant::now();
        let out = run_child(&exe, run, threads, per_thread, seed + run, hang);
        let secs = t.elapsed().as_secs_f64();
        match out {
            Outcome::Ok(summary) => {
                ops += summary
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("ops="))
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                println!(
                    "run {run} (seed {}): ok in {secs:.1} s: {summary}",
                    seed + run
                );
            }
            Outcome::Failed(why) => {
                failures += 1;
                println!(
                    "run {run} (seed {}): FAILED in {secs:.1} s: {why}",
                    seed + run
                );
            }
            Outcome::Crashed(why) => {
                crashes += 1;
                println!(
                    "run {run} (seed {}): CRASHED in {secs:.1} s: {why}",
                    seed + run
                );
            }
        }
    }
    println!(
        "soak: plugin={plugin} runs={runs} calls={} crashes={crashes} failures={failures} \
         threads={threads} ops_checked={ops} seconds={:.1}",
        per_thread * threads,
        start.elapsed().as_secs_f64()
    );
    if crashes + failures > 0 {
        std::process::exit(1);
    }
}

enum Outcome {
    Ok(String),
    /// A wrong value, an error, a panic, or a hang.
    Failed(String),
    /// Killed by a signal (abort, segfault), or an exit without a result.
    Crashed(String),
}

/// Runs one soak run in a child process and classifies how it ended.
fn run_child(
    exe: &std::path::Path,
    run: u64,
    threads: u64,
    per_thread: u64,
    seed: u64,
    hang: Duration,
) -> Outcome {
    let mut child = Command::new(exe)
        .env(CHILD_ENV, format!("{run} {threads} {per_thread} {seed}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child");
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let (status, hung) = loop {
        if let Some(st) = child.try_wait().expect("wait for the child") {
            break (st, false);
        }
        if t.elapsed() > hang {
            let _ = child.kill();
            break (child.wait().expect("wait for the child"), true);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let result = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT))
        .map(str::trim);
    if hung {
        return Outcome::Failed(format!(
            "hung (no result after {hang:?}); stderr: {}",
            tail(&stderr)
        ));
    }
    if let Some(sig) = status.signal() {
        return Outcome::Crashed(format!(
            "killed by signal {sig} ({}); stderr: {}",
            signal_name(sig),
            tail(&stderr)
        ));
    }
    match result {
        Some(r) if status.success() => match r.strip_prefix("ok ") {
            Some(summary) => Outcome::Ok(summary.to_string()),
            None => Outcome::Failed(format!("unexpected result line: {r}")),
        },
        Some(r) => Outcome::Failed(r.strip_prefix("fail ").unwrap_or(r).to_string()),
        None => Outcome::Crashed(format!(
            "exited with {status} and no result; stderr: {}",
            tail(&stderr)
        )),
    }
}

/// XLA's fatal log line when there is one ("F0000 … Check failed: …"), else the
/// last lines of `stderr`.
fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let t = match lines
        .iter()
        .find(|l| (l.starts_with('F') && l.contains("] ")) || l.contains("Check failed"))
    {
        Some(l) => l.to_string(),
        None => lines[lines.len().saturating_sub(3)..].join(" | "),
    };
    t.chars().take(600).collect()
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// A child: one soak run; prints its result line and exits (never returns).
fn child(spec: &str) -> ! {
    let n: Vec<u64> = spec
        .split_whitespace()
        .map(|x| x.parse().expect("a number in the child spec"))
        .collect();
    let [run, threads, per_thread, seed] = n[..] else {
        panic!("child spec `{spec}`: expected run threads calls seed");
    };
    let result = Plugin::default_plugin()
        .map_err(|e| format!("load the plugin: {e}"))
        .and_then(|plugin| {
            Client::new(&plugin, &soak::client_options(run))
                .map_err(|e| format!("create a client: {e}"))
        })
        .and_then(|client| {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                soak::soak(&client, threads as usize, per_thread as usize, seed)
            }));
            match caught {
                Ok(r) => r,
                Err(p) => Err(format!(
                    "panic: {}",
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                )),
            }
        })
        .and_then(
            |stats| match stats.incomplete(threads as usize, per_thread as usize) {
                Some(problem) => Err(format!("incomplete: {problem}: {}", stats.summary())),
                None => Ok(stats),
            },
        );
    match result {
        Ok(stats) => {
            println!("{RESULT} ok {}", stats.summary());
            std::process::exit(0);
        }
        Err(e) => {
            println!("{RESULT} fail {}", e.replace('\n', " | "));
            std::process::exit(1);
        }
    }
}
