//! A program built here, emitted as StableHLO and run by JAX 0.10.2
//! (`scripts/run_stablehlo_in_jax.py`, wrapping the text in a `jax.export.Exported`
//! called under `jax.jit`), gives the outputs the PJRT plugin gives. Runs when the
//! JAX virtual environment exists (`JAX_VENV`, else `target/jax-venv`, as
//! `bench/jax_venv.sh` makes it) and says it skipped otherwise.

mod common;
#[allow(dead_code)]
#[path = "../examples/stablehlo_to_jax.rs"]
mod example;

use std::path::{Path, PathBuf};
use std::process::Command;

fn venv_python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = std::env::var("JAX_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target/jax-venv"));
    let py = venv.join("bin/python");
    py.is_file().then_some(py)
}

#[test]
fn a_program_emitted_as_stablehlo_runs_in_jax_with_the_plugins_outputs() {
    let dir = tempfile::tempdir().unwrap();
    // The case is written (and the text printed) whether or not JAX is here.
    let text = example::write_case(common::client(), dir.path()).unwrap();
    assert!(text.contains("\"stablehlo.while\"") && text.contains("\"stablehlo.if\""));
    let Some(py) = venv_python() else {
        eprintln!(
            "skipped: no JAX virtual environment (set JAX_VENV or run `. bench/jax_venv.sh`)"
        );
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/run_stablehlo_in_jax.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(dir.path())
        .env("JAX_PLATFORMS", "cpu")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.starts_with("max_abs_err="), "{stdout}");
    // Integers equal, floats within 1e-6 (the script checks each output).
    let err: f64 = last["max_abs_err=".len()..].parse().unwrap();
    assert!(err <= 1e-6, "{stdout}");
}
