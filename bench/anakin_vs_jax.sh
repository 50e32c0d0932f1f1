#!/usr/bin/env bash
# Side by side: the plain-JAX Anakin anchor (../shared/bench-anchors/jax_anakin_catch.py)
# and examples/anakin.rs, run alternately in one session on this machine, for both
# layouts (the notebook's 128 parameter copies, and one shared copy). Prints, per
# layout, the median frames/s of each over the repetitions, the ratio (ours / JAX),
# and the compile times (JAX: lower + compile; ours: trace + compile). Ours runs
# twice per repetition: the default (the hand-derived batched loss) and
# `grad_through_scan=true` (the notebook's program: the general gradient through
# the rollout scan, what the JAX anchor computes).
#
#   bench/anakin_vs_jax.sh [REPS] [CALLS]      (defaults 5 repetitions, 5 timed calls each)
#
# JAX is installed (pinned, as the anchors were measured) into target/jax-venv on
# the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
CALLS=${2:-5}
ANCHOR=${ANCHOR:-../shared/bench-anchors/jax_anakin_catch.py}
. bench/jax_venv.sh
cargo build --release --quiet --example anakin
OURS=${CARGO_TARGET_DIR:-target}/release/examples/anakin
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for layout in notebook shared; do
    flag=""; ours_flag=""
    [ "$layout" = shared ] && flag="--shared-params" && ours_flag="--set shared_params=true"
    for rep in $(seq 1 "$REPS"); do
        # Alternate which goes first, so neither always runs on a warmer machine.
        case $((rep % 3)) in
            1) order="jax ours scan" ;;
            2) order="ours scan jax" ;;
            0) order="scan jax ours" ;;
        esac
        for who in $order; do
            if [ "$who" = jax ]; then
                "$VENV/bin/python" "$ANCHOR" --calls "$CALLS" --eval-every 1000000 --json $flag \
                    | tail -1 >>"$OUT/jax-$layout.jsonl"
            else
                extra=""; [ "$who" = scan ] && extra="--set grad_through_scan=true"
                "$OURS" --set calls="$CALLS" --set timed_calls="$CALLS" --set min_reward=-1 \
                    --output-dir "$OUT/run-$layout-$rep-$who" $ours_flag $extra 2>/dev/null \
                    | tail -1 >>"$OUT/$who-$layout.txt"
            fi
        done
        echo "layout $layout: repetition $rep of $REPS done" >&2
    done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def ours(name):
    rows = []
    for line in open(name):
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "fps" in kv:
            rows.append(kv)
    return rows

print(f"{'layout':<10} {'JAX fps':>10} {'ours fps':>10} {'ratio':>6} {'scan fps':>10} {'ratio':>6} "
      f"{'scan/ours':>9} {'JAX compile s':>14} {'ours compile s':>15} {'scan compile s':>15}")
for layout in ("notebook", "shared"):
    jax = [json.loads(l) for l in open(f"{out}/jax-{layout}.jsonl") if l.strip()]
    o, sc = ours(f"{out}/ours-{layout}.txt"), ours(f"{out}/scan-{layout}.txt")
    jf = statistics.median(r["fps_median"] for r in jax)
    jc = statistics.median(r["lower_s"] + r["compile_s"] for r in jax)
    of = statistics.median(float(r["fps"]) for r in o)
    oc = statistics.median(float(r["compile_s"]) for r in o)
    sf = statistics.median(float(r["fps"]) for r in sc)
    scc = statistics.median(float(r["compile_s"]) for r in sc)
    print(f"{layout:<10} {jf:>10.3e} {of:>10.3e} {of / jf:>6.2f} {sf:>10.3e} {sf / jf:>6.2f} "
          f"{sf / of:>9.2f} {jc:>14.2f} {oc:>15.2f} {scc:>15.2f}")
print(f"(medians over {len(jax)} runs of each, alternated; fps = frames per second of a call's median;")
print(" ours = the hand-derived batched loss, scan = grad_through_scan=true, the anchor's program)")
PY
