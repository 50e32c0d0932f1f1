#!/usr/bin/env bash
# Side by side: PureJaxRL's PPO on CartPole-v1 in JAX (bench/ppo_cartpole_jax.py,
# the whole training one jitted program) and in Rust (examples/ppo_cartpole.rs,
# an init program and an update program of 122 updates per call), run alternately
# in one session on this machine, the order swapped every repetition. Prints per
# repetition and as medians: environment steps per second over the training
# (compile excluded), compile seconds (JAX: lower + compile; ours: trace + compile
# of both programs) and the mean return of the last 10% of updates, with the
# ratios ours / JAX. Compilation caches are off on both sides.
#
#   bench/ppo_vs_jax.sh [REPS]      (default 2)
#
# JAX: target/jax-venv (bench/jax_venv.sh; JAX_VENV=… for another, e.g. the main
# checkout's with optax installed).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-2}
. bench/jax_venv.sh
"$VENV/bin/python" -c 'import optax' 2>/dev/null || "$VENV/bin/pip" install --quiet optax
cargo build --release --quiet --example ppo_cartpole
OURS=${CARGO_TARGET_DIR:-target}/release/examples/ppo_cartpole
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for rep in $(seq 1 "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then order="jax ours"; else order="ours jax"; fi
    for who in $order; do
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
import json, statistics, sys
out = sys.argv[1]
jax = [json.loads(l) for l in open(f"{out}/jax.jsonl") if l.strip()]
ours = []
for line in open(f"{out}/ours.txt"):
    kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
    ours.append({k: float(v) for k, v in kv.items()})
print(f"{'run':<6} {'JAX steps/s':>12} {'ours steps/s':>13} {'JAX compile s':>14} {'ours compile s':>15} {'JAX return':>11} {'ours return':>12}")
for i, (j, o) in enumerate(zip(jax, ours)):
    print(f"{i + 1:<6} {j['steps_per_s']:>12.0f} {o['steps_per_s']:>13.0f} {j['lower_s'] + j['compile_s']:>14.2f} "
          f"{o['compile_s']:>15.2f} {j['last10_mean_return']:>11.1f} {o['mean_return']:>12.1f}")
js = statistics.median(j["steps_per_s"] for j in jax)
os_ = statistics.median(o["steps_per_s"] for o in ours)
jc = statistics.median(j["lower_s"] + j["compile_s"] for j in jax)
oc = statistics.median(o["compile_s"] for o in ours)
jr = statistics.median(j["last10_mean_return"] for j in jax)
orr = statistics.median(o["mean_return"] for o in ours)
print(f"{'median':<6} {js:>12.0f} {os_:>13.0f} {jc:>14.2f} {oc:>15.2f} {jr:>11.1f} {orr:>12.1f}")
print(f"ours/JAX: steps/s {os_ / js:.2f}x, compile time {oc / jc:.2f}x, return {orr / jr:.3f}x "
      f"(medians of {len(jax)} runs each, alternated; return = mean of the last 10% of updates)")
PY
