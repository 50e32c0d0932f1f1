//! The fuzzer, a short run inside `cargo test` (the long one is `cargo run --release
//! --example fuzz`): random graphs over every opcode, each either rejected by the
//! builder or compiled and run on the real plugin with outputs of the inferred
//! types and dims; and mutated serialized modules, each compiled to `Ok` or `Err`.
//! Every case runs in a child process (this binary, re-invoked), so a crash of the
//! plugin is reported with its seed and module instead of killing the suite.

mod common;
#[path = "common/fuzz.rs"]
mod fuzz;

use std::collections::HashSet;
use std::time::Duration;

use fuzz::{Mutation, Report, RunOptions};
use xlaclient::ir::Opcode;

/// The entry point of child processes (does nothing in a normal run).
#[test]
fn fuzz_child() {
    fuzz::child_main(&fuzz::work);
}

fn run(kind: &str, range: std::ops::Range<u64>) -> Report {
    fuzz::run_children(
        range,
        &RunOptions {
            kind,
            child_args: &["fuzz_child", "--exact", "--nocapture", "--test-threads=1"],
            jobs: 2,
            chunk: 100,
            hang: Duration::from_secs(120),
            keep_cases: false,
            verbose: true,
        },
    )
}

#[test]
fn every_opcode_is_generated_and_built() {
    // In-process, build only: the generator reaches every entry of the opcode table
    // in modules the builder accepts, and the builder never panics.
    let mut seen: HashSet<Opcode> = HashSet::new();
    let (mut accepted, mut rejected, mut nested) = (0, 0, 0);
    for seed in 0..3000 {
        match fuzz::no_panic(|| fuzz::generate(seed)) {
            Err(p) => panic!("seed {seed}: the builder panicked: {p}"),
            Ok((Ok(m), _)) => {
                accepted += 1;
                for c in &m.ir().comps {
                    seen.extend(c.instrs.iter().map(|i| i.kind.opcode()));
                }
            }
            Ok((Err(e), _)) => {
                rejected += 1;
                nested += e.to_string().contains("nested tuple") as u32;
            }
        }
    }
    // Custom calls name plugin kernels the CPU plugins do not have: not generated
    // (tests/ops_misc.rs builds one and checks the plugin's error).
    let missing: Vec<&Opcode> = Opcode::ALL
        .iter()
        .filter(|o| !seen.contains(o) && **o != Opcode::CustomCall)
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    eprintln!("{accepted} accepted, {rejected} rejected ({nested} for a nested-tuple result)");
    // (Nested-tuple results are rare with the larger op set; tests/ops_types.rs
    // checks that they are refused.)
    assert!(accepted > 1000 && rejected > 300);
}

#[test]
fn random_graphs_build_or_run_with_the_inferred_shapes() {
    let r = run("graphs", 0..300);
    fuzz::check("graphs", &r);
    assert!(
        r.counts.get("ran").copied().unwrap_or(0) > 100,
        "{}",
        r.summary()
    );
}

#[test]
fn random_control_flow_under_grad_builds_and_matches_finite_differences() {
    // Zero trips, zero lengths, size-0 outputs, out-of-range switch indices, and
    // cond/switch/scan/while nested under `grad`: every program builds (or, with a
    // plain `while_loop`, is refused with its no-gradient error) and its gradient
    // matches central finite differences.
    let r = run("control", 0..60);
    fuzz::check("control", &r);
    let ran = r.counts.get("ran").copied().unwrap_or(0);
    assert!(ran > 40, "{}", r.summary());
}

#[test]
fn random_collectives_on_eight_devices_are_refused_or_run_right() {
    // Random all-reduces, gathers, scatters, all-to-alls, permutes and replica ids
    // over random (sometimes broken) replica groups, axes and replica counts on an
    // eight-device client: each refused with an error naming the op or the groups,
    // or run on every device with outputs of the inferred dims (the all-reduces'
    // values against plain Rust); a crash or a hang is a failure.
    let r = run("collectives", 0..200);
    fuzz::check("collectives", &r);
    let ran = r.counts.get("ran").copied().unwrap_or(0);
    let refused = r.counts.get("rejected").copied().unwrap_or(0);
    assert!(ran > 60 && refused > 10, "{}", r.summary());
}

#[test]
fn dynamic_entries_and_roots_moved_to_parameters_are_refused_or_run() {
    // The classes that aborted the 0.81 plugin at run time: compiled modules are
    // run too (on arguments of their parameters' shapes).
    let r = run("modules:DynamicDim,RootToParam", 0..120);
    fuzz::check("modules:DynamicDim,RootToParam", &r);
    let refused = r
        .details
        .iter()
        .filter(|(k, _)| k.starts_with("err DynamicDim"))
        .map(|(_, v)| v)
        .sum::<u64>();
    assert!(refused > 10, "{:?}", r.details);
}

#[test]
fn damaged_serialized_executables_are_refused_by_the_guard() {
    let r = run("executables", 0..150);
    fuzz::check("executables", &r);
    // Every kind of damage was tried and refused in the guard.
    for k in fuzz::Damage::ALL {
        assert!(
            r.details
                .keys()
                .any(|d| d.starts_with(&format!("err {k:?}"))),
            "{k:?} never refused: {:?}",
            r.details
        );
    }
}

#[test]
fn damaged_cache_entries_are_refused_and_compiled_again() {
    let r = run("cache", 0..60);
    fuzz::check("cache", &r);
    assert!(
        r.counts.get("err").copied().unwrap_or(0) > 40,
        "{}",
        r.summary()
    );
}

#[test]
fn mutated_modules_compile_or_fail_cleanly() {
    // Every mutation kind: the proto check refuses what would crash the plugin.
    let _ = Mutation::ALL;
    let r = run("modules", 0..200);
    fuzz::check("modules", &r);
}
