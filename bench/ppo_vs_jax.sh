#!/usr/bin/env bash
# Side by side: PureJaxRL's PPO on CartPole-v1 in JAX (bench/ppo_cartpole_jax.py,
# the whole training one jitted program) and in Rust (examples/ppo_cartpole.rs,
# an init program and an update program of 122 updates per call), run alternately
# in one session on this machine, the order swapped every repetition. Prints per
# repetition and as medians: environment steps per second over the training
# (compile excluded), the training's wall and CPU seconds (all threads), compile
# seconds (JAX: lower + compile; ours: trace + compile of both programs), when each
# solved CartPole (the first update at which the mean return of the last 10
# updates reaches 475; the training seconds until then, and the wall seconds to
# solve = compile + those), the mean return of the last 10% of updates, the ratios
# ours / JAX and the load average before the runs. Compilation caches are off on
# both sides.
#
#   bench/ppo_vs_jax.sh [REPS]      (default 2; CARGO_JOBS=N passes -j N to cargo)
#   NPROC=1 bench/ppo_vs_jax.sh 3   (both sides with one XLA worker thread: the CPU
#                                    plugin and jaxlib size their pool from NPROC)
#
# Ours makes its client with one worker thread by default (the example's
# `worker_threads=1`, ClientOptions::worker_threads); JAX keeps its defaults.
#
# JAX: target/jax-venv (bench/jax_venv.sh; JAX_VENV=… for another, e.g. the main
# checkout's with optax installed).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-2}
. bench/jax_venv.sh
"$VENV/bin/python" -c 'import optax' 2>/dev/null || "$VENV/bin/pip" install --quiet optax
cargo build --release --quiet ${CARGO_JOBS:+-j "$CARGO_JOBS"} --example ppo_cartpole
OURS=${CARGO_TARGET_DIR:-target}/release/examples/ppo_cartpole
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for rep in $(seq 1 "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then order="jax ours"; else order="ours jax"; fi
    for who in $order; do
        cut -d' ' -f1 /proc/loadavg >>"$OUT/load.txt"
        if [ "$who" = jax ]; then
            "$VENV/bin/python" bench/ppo_cartpole_jax.py --json | tail -1 >>"$OUT/jax.jsonl"
        else
            XLACLIENT_COMPILE_CACHE=0 "$OURS" --set print_every_update=false --set min_return=-1 \
                --output-dir "$OUT/run-$rep" 2>/dev/null | tail -1 >>"$OUT/ours.txt"
        fi
    done
    echo "repetition $rep of $REPS done" >&2
done

python3 - "$OUT" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
jax = [json.loads(l) for l in open(f"{out}/jax.jsonl") if l.strip()]
ours = []
for line in open(f"{out}/ours.txt"):
    kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
    ours.append({k: float(v) for k, v in kv.items()})
loads = [float(l) for l in open(f"{out}/load.txt")]
for j in jax:
    j["compile"] = j["lower_s"] + j["compile_s"]
    j["return"] = j["last10_mean_return"]
for o in ours:
    o["compile"] = o["compile_s"]
    o["return"] = o["mean_return"]
# Wall time to solve: compile plus the training seconds until the mean return of
# the last 10 updates first reached 475 (NaN: not solved).
for r in jax + ours:
    r["to_solve"] = r["compile"] + r["solve_s"] if r["solve_s"] >= 0 else float("nan")
cols = [("steps/s", "steps_per_s", ".0f"), ("train s", "run_s", ".2f"), ("CPU s", "cpu_s", ".2f"),
        ("compile s", "compile", ".2f"), ("solved at", "solve_update", ".0f"),
        ("train s to solve", "solve_s", ".2f"), ("wall s to solve", "to_solve", ".2f"),
        ("return", "return", ".1f")]
print("per run, JAX then ours: " + ", ".join(n for n, _, _ in cols))
for i, (j, o) in enumerate(zip(jax, ours)):
    print(f"{i + 1:<7}" + " | ".join(f"{j[k]:>8{f}} {o[k]:>8{f}}" for _, k, f in cols))
med = lambda rs, k: statistics.median(r[k] for r in rs)
print(f"{'median':<7}" + " | ".join(f"{med(jax, k):>8{f}} {med(ours, k):>8{f}}" for _, k, f in cols))
ratios = [o["steps_per_s"] / j["steps_per_s"] for j, o in zip(jax, ours)]
print(f"ours/JAX steps/s per repetition: {' '.join(f'{r:.2f}' for r in ratios)} "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
print(f"ours/JAX: steps/s {med(ours, 'steps_per_s') / med(jax, 'steps_per_s'):.2f}x, "
      f"CPU seconds {med(ours, 'cpu_s') / med(jax, 'cpu_s'):.2f}x, "
      f"training seconds to solve {med(jax, 'solve_s') / med(ours, 'solve_s'):.2f}x faster, "
      f"wall seconds to solve (compile included) {med(jax, 'to_solve') / med(ours, 'to_solve'):.2f}x faster, "
      f"compile time {med(ours, 'compile') / med(jax, 'compile'):.2f}x, "
      f"return {med(ours, 'return') / med(jax, 'return'):.3f}x "
      f"(medians of {len(jax)} runs each, alternated; return = mean of the last 10% of updates; "
      f"1-minute load average before the runs {min(loads):.1f} to {max(loads):.1f}, {os.cpu_count()} cores, "
      f"NPROC={os.environ.get('NPROC', 'unset')})")
PY
