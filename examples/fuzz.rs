//! Long fuzz runs: random graphs over every opcode (each rejected by the builder, or
//! compiled and run with outputs of the inferred types and dims), mutated
//! serialized modules (each compiled to `Ok` or `Err`, and run when compiled) and
//! damaged serialized executables (each refused by the guard), random control flow
//! under `grad` (each built and checked against finite differences), random
//! collectives on eight devices (each refused, or run with the right values), and
//! the same graphs, control plans and collectives compiled from their StableHLO
//! text as well as from HLO (outputs equal bit for bit: `--stablehlo`,
//! `--stablehlo-control`, `--stablehlo-collectives`), every case in a child
//! process so that a crash of the plugin is reported with its seed.
//!
//! ```text
//! cargo run --release --example fuzz -- --graphs 100000 --modules 20000 --executables 5000
//!     --control 2000 --collectives 2000 --stablehlo 5000 --stablehlo-control 500
//!     --stablehlo-collectives 500 --jobs 2 [--seed N] [--kinds BitFlip,Opcode] [--out DIR]
//! ```
//!
//! Prints the counts and each failure's seed; with `--out`, writes each failure's
//! module text to `DIR/<graphs|modules>-<seed>.hlo`. Re-run one case with
//! `--seed S --graphs 1`. The plugin is `PJRT_PLUGIN_PATH` or the pinned CPU plugin.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/fuzz.rs"]
mod fuzz;

use std::time::{Duration, Instant};

use fuzz::RunOptions;

fn main() {
    if fuzz::child_main(&fuzz::work) {
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| common::flag_value(&args, name);
    let num = |name: &str, default: u64| common::flag_number(&args, name, default);
    let graphs = num("--graphs", 0);
    let modules = num("--modules", 0);
    let executables = num("--executables", 0);
    let caches = num("--cache", 0);
    let control = num("--control", 0);
    let collectives = num("--collectives", 0);
    let stablehlo = num("--stablehlo", 0);
    let stablehlo_control = num("--stablehlo-control", 0);
    let stablehlo_collectives = num("--stablehlo-collectives", 0);
    let seed = num("--seed", 0);
    let jobs = num("--jobs", 1) as usize;
    let out = get("--out").map(std::path::PathBuf::from);
    let module_kind = match get("--kinds") {
        Some(k) => format!("modules:{k}"),
        None => "modules".to_string(),
    };
    if graphs == 0
        && modules == 0
        && executables == 0
        && caches == 0
        && control == 0
        && collectives == 0
        && stablehlo + stablehlo_control + stablehlo_collectives == 0
    {
        eprintln!(
            "usage: fuzz [--graphs N] [--modules N] [--executables N] [--cache N] [--control N] [--collectives N] [--stablehlo N] [--stablehlo-control N] [--stablehlo-collectives N] [--seed S] [--jobs J] [--kinds K1,K2] [--out DIR]"
        );
        std::process::exit(2);
    }
    let mut failed = 0;
    for (kind, n, label) in [
        ("graphs", graphs, "graphs"),
        (module_kind.as_str(), modules, "modules"),
        ("executables", executables, "executables"),
        ("cache", caches, "cache"),
        ("control", control, "control"),
        ("collectives", collectives, "collectives"),
        ("stablehlo", stablehlo, "stablehlo"),
        ("stablehlo-control", stablehlo_control, "stablehlo-control"),
        (
            "stablehlo-collectives",
            stablehlo_collectives,
            "stablehlo-collectives",
        ),
    ] {
        if n == 0 {
            continue;
        }
        let t = Instant::now();
        let r = fuzz::run_children(
            seed..seed + n,
            &RunOptions {
                kind,
                child_args: &[],
                jobs,
                chunk: 200,
                hang: Duration::from_secs(300),
                keep_cases: false,
                verbose: true,
            },
        );
        let secs = t.elapsed().as_secs_f64();
        let c = |k: &str| r.counts.get(k).copied().unwrap_or(0);
        if label.starts_with("stablehlo") {
            println!(
                "{label} {seed}..{}: rejected by builder {}, equal bit for bit {}, not compiled from HLO {}, failures {} ({} crashes) in {secs:.0} s",
                seed + n,
                c("rejected"),
                c("same"),
                c("err"),
                r.failures.len(),
                c("crash"),
            );
        } else if label == "graphs" || label == "control" || label == "collectives" {
            println!(
                "{label} {seed}..{}: rejected by builder {}, compiled and ran {}, failures {} ({} crashes) in {secs:.0} s",
                seed + n,
                c("rejected"),
                c("ran"),
                r.failures.len(),
                c("crash"),
            );
        } else if label == "executables" || label == "cache" {
            println!(
                "{label} {seed}..{}: refused by the guard {}, loaded unchanged {}, skipped {}, failures {} ({} crashes) in {secs:.0} s",
                seed + n,
                c("err"),
                c("ok"),
                c("skip"),
                r.failures.len(),
                c("crash"),
            );
            for (k, v) in &r.details {
                println!("  {k}: {v}");
            }
        } else {
            println!(
                "modules {seed}..{} ({kind}): compile Ok {}, compile Err {}, failures {} ({} crashes) in {secs:.0} s",
                seed + n,
                c("ok"),
                c("err"),
                r.failures.len(),
                c("crash"),
            );
            for (k, v) in &r.details {
                println!("  {k}: {v}");
            }
        }
        for f in &r.failures {
            println!("  FAIL {label} seed {}: {}", f.seed, f.what);
            if let Some(dir) = &out {
                let _ = std::fs::create_dir_all(dir);
                let _ = std::fs::write(dir.join(format!("{label}-{}.hlo", f.seed)), &f.hlo);
            }
        }
        failed += r.failures.len();
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
