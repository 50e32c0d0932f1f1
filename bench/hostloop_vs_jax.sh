#!/usr/bin/env bash
# Side by side: the JAX host-loop anchor (../shared/bench-anchors/jax_hostloop_catch.py:
# N numpy Catch envs, a jitted MLP policy per step) and examples/catch_hostloop.rs
# (N Catch envs stepped in Rust, the same policy through PJRT), run alternately in
# one session on this machine: per repetition JAX default, JAX --sync and ours (the
# example's default mode, `split`), the order rotated each repetition. Then, unless
# COMPARE=0, our call paths side by side (catch_hostloop --compare: split, fast,
# pipelined, fast-copy, plain, plain-async), once per repetition.
#
# Prints, for N = 1, 64, 1024, the median over the repetitions of each run's median
# env-steps/s, and the ratios ours / JAX and ours / JAX --sync.
#
#   bench/hostloop_vs_jax.sh [REPS]      (default 5 repetitions)
#
# JAX is installed (pinned, as the anchors were measured) into target/jax-venv on
# the first run; JAX_VENV=/path/to/venv uses another one.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
COMPARE=${COMPARE:-1}
ANCHOR=${ANCHOR:-../shared/bench-anchors/jax_hostloop_catch.py}
. bench/jax_venv.sh
cargo build --release --quiet --example catch_hostloop
OURS=${CARGO_TARGET_DIR:-target}/release/examples/catch_hostloop
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for rep in $(seq 1 "$REPS"); do
    case $((rep % 3)) in
        1) order="jax jaxsync ours" ;;
        2) order="jaxsync ours jax" ;;
        0) order="ours jax jaxsync" ;;
    esac
    for who in $order; do
        case $who in
            jax) "$VENV/bin/python" "$ANCHOR" --json 2>/dev/null | tail -1 >>"$OUT/jax.jsonl" ;;
            jaxsync) "$VENV/bin/python" "$ANCHOR" --json --sync 2>/dev/null | tail -1 >>"$OUT/jaxsync.jsonl" ;;
            ours) "$OURS" 2>/dev/null >>"$OUT/ours.txt" ;;
        esac
    done
    if [ "$COMPARE" != 0 ]; then
        "$OURS" --compare 2>/dev/null >>"$OUT/compare.txt"
    fi
    echo "repetition $rep of $REPS done" >&2
done

python3 - "$OUT" "$REPS" <<'PY'
import json, os, statistics, sys
out, reps = sys.argv[1], sys.argv[2]

def jax(name):
    runs = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
    return {int(n): [r["results"][n]["env_steps_per_s_median"] for r in runs] for n in runs[0]["results"]}

def ours(name):
    res = {}
    for line in open(f"{out}/{name}"):
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "mode" in kv and "median" in kv:
            res.setdefault(kv["mode"], {}).setdefault(int(kv["n"]), []).append(float(kv["median"]))
    return res

mine = ours("ours.txt")
mode = next(iter(mine))  # the example's default mode: its only one
j, js, o = jax("jax"), jax("jaxsync"), mine[mode]
med = statistics.median
print(f"env-steps/s, median over {reps} alternated runs of each run's median; ours = mode {mode}")
print(f"{'N':>5} | {'JAX':>10} {'JAX --sync':>11} {'ours':>10} | {'ours/JAX':>8} {'ours/JAX-sync':>13}")
for n in sorted(o):
    a, b, c = med(j[n]), med(js[n]), med(o[n])
    print(f"{n:>5} | {a:>10.3e} {b:>11.3e} {c:>10.3e} | {c / a:>8.2f} {c / b:>13.2f}")
print("per run, ours/JAX at each N:",
      {n: [round(x / y, 2) for x, y in zip(o[n], j[n])] for n in sorted(o)})

if os.path.exists(f"{out}/compare.txt"):
    cmp = ours("compare.txt")
    modes = list(cmp)
    print()
    print("our call paths (catch_hostloop --compare, alternated within each run), median env-steps/s")
    print(f"{'N':>5} | " + " ".join(f"{m:>11}" for m in modes) + f" | {modes[0]}/plain-async")
    for n in sorted(cmp[modes[0]]):
        ms = [med(cmp[m][n]) for m in modes]
        print(f"{n:>5} | " + " ".join(f"{v:>11.3e}" for v in ms)
              + f" | {ms[0] / med(cmp['plain-async'][n]):>10.2f}")
PY
