#!/usr/bin/env bash
# Side by side across devices: the Anakin learner replicated over N CPU devices,
# JAX's pmap version (bench/jax_anakin_pmap.py, N devices from
# XLA_FLAGS=--xla_force_host_platform_device_count=N) and examples/anakin.rs with
# `--set devices=N`, the same layout and sizes, run alternately (which one goes
# first alternates between repetitions) for N = 1, 2, 4, 8. Prints per N the
# median frames/s of each (frames over all devices), the ratio (ours / JAX) and
# the compile times.
#
#   bench/anakin_devices_vs_jax.sh [REPS] [CALLS] [ITERATIONS] [LAYOUT]
#       defaults: 3 repetitions, 3 timed calls, 20 updates per call,
#       LAYOUT notebook (per-learner copies) or shared
#
# Every device runs a batch of 128 learners (BATCH=... to change), so the work
# grows with N: on a machine with fewer cores than N, frames/s cannot grow past
# the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
CALLS=${2:-3}
ITERS=${3:-20}
LAYOUT=${4:-notebook}
BATCH=${BATCH:-128}
DEVICES=${DEVICES:-"1 2 4 8"}
. bench/jax_venv.sh
cargo build --release --quiet --example anakin
OURS=${CARGO_TARGET_DIR:-target}/release/examples/anakin
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
jflag=""; oflag=""
if [ "$LAYOUT" = shared ]; then jflag="--shared-params"; oflag="--set shared_params=true"; fi

for n in $DEVICES; do
    for rep in $(seq 1 "$REPS"); do
        if [ $((rep % 2)) = 1 ]; then order="jax ours"; else order="ours jax"; fi
        for who in $order; do
            if [ "$who" = jax ]; then
                XLA_FLAGS="--xla_force_host_platform_device_count=$n" \
                    "$VENV/bin/python" bench/jax_anakin_pmap.py --devices "$n" --batch "$BATCH" \
                    --iterations "$ITERS" --calls "$CALLS" --json $jflag \
                    | tail -1 >>"$OUT/jax-$n.jsonl"
            else
                "$OURS" --set devices="$n" --set batch="$BATCH" --set iterations="$ITERS" \
                    --set calls="$CALLS" --set timed_calls="$CALLS" --set min_reward=-1 \
                    --output-dir "$OUT/run-$n-$rep" $oflag 2>/dev/null \
                    | tail -1 >>"$OUT/ours-$n.txt"
            fi
        done
        echo "devices $n: repetition $rep of $REPS done" >&2
    done
done

python3 - "$OUT" "$DEVICES" "$LAYOUT" "$BATCH" "$ITERS" <<'PY'
import json, statistics, sys
out, devices, layout, batch, iters = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
print(f"layout {layout}, {batch} learners per device, {iters} updates per call")
print(f"{'devices':>7} {'JAX fps':>10} {'ours fps':>10} {'ratio':>6} {'JAX compile s':>14} {'ours compile s':>15}")
for n in devices:
    jax = [json.loads(l) for l in open(f"{out}/jax-{n}.jsonl") if l.strip()]
    ours = []
    for line in open(f"{out}/ours-{n}.txt"):
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "fps" in kv:
            ours.append(kv)
    jf = statistics.median(r["fps_median"] for r in jax)
    jc = statistics.median(r["compile_s"] for r in jax)
    of = statistics.median(float(r["fps"]) for r in ours)
    oc = statistics.median(float(r["compile_s"]) for r in ours)
    print(f"{n:>7} {jf:>10.3e} {of:>10.3e} {of / jf:>6.2f} {jc:>14.2f} {oc:>15.2f}")
print(f"(medians over {len(jax)} runs of each per N, alternated; fps = frames/s of the median call, all devices)")
PY
