//! StableHLO emission (`Computation::to_stablehlo`, issue 22 item 1): every program
//! the fuzzer builds, compiled from its `HloModuleProto` and from its StableHLO
//! text, gives the same outputs bit for bit on the plugin under test; targeted
//! programs (control flow, collectives over several CPU devices, checkpointed
//! and host-callback programs) too. Each fuzz case runs in a child process (this
//! binary, re-invoked), as in `tests/fuzz.rs`.
//!
//! `XLACLIENT_STABLEHLO_CASES=N` runs N fuzz cases (default 120).

mod common;
#[path = "common/fuzz.rs"]
mod fuzz;

use std::time::Duration;

use fuzz::RunOptions;

/// The entry point of child processes (does nothing in a normal run).
#[test]
fn fuzz_child() {
    fuzz::child_main(&fuzz::work);
}

#[test]
fn fuzzed_programs_run_the_same_from_hlo_and_from_stablehlo() {
    let n: u64 = std::env::var("XLACLIENT_STABLEHLO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let r = run("stablehlo", n);
    let same = r.counts.get("same").copied().unwrap_or(0);
    assert!(same * 3 > n, "{}", r.summary());
}

fn run(kind: &str, n: u64) -> fuzz::Report {
    let r = fuzz::run_children(
        0..n,
        &RunOptions {
            kind,
            child_args: &["fuzz_child", "--exact", "--nocapture", "--test-threads=1"],
            jobs: 1,
            chunk: 60,
            hang: Duration::from_secs(120),
            keep_cases: false,
            verbose: true,
        },
    );
    eprintln!("{kind}: {}", r.summary());
    let shown: Vec<String> = r
        .failures
        .iter()
        .map(|f| format!("seed {}: {}\n{}", f.seed, f.what, f.hlo))
        .collect();
    assert!(r.failures.is_empty(), "{kind} failures:\n{}", shown.join("\n"));
    r
}

#[test]
fn control_flow_under_grad_runs_the_same_from_stablehlo() {
    // Loops (fori, scan, while), branches (cond, switch) and checkpoint policies,
    // with their gradients: the fuzzer's control plans.
    let r = run("stablehlo-control", 40);
    assert!(r.counts.get("same").copied().unwrap_or(0) >= 35, "{}", r.summary());
}

#[test]
fn collectives_on_eight_devices_run_the_same_from_stablehlo() {
    // psum/pmax/pmin/pmean, all-gather, reduce-scatter, all-to-all,
    // collective-permute and replica-id over random replica groups.
    let r = run("stablehlo-collectives", 80);
    assert!(r.counts.get("same").copied().unwrap_or(0) >= 30, "{}", r.summary());
}
