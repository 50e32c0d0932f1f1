#!/usr/bin/env bash
# Side by side: Anakin's notebook layout (128 learners, a parameter copy each)
# written by hand with the batch axis in every op, against the same update written
# for one learner and batched with `vmap` (`--set vmap_learners=true`), alternated in
# one session, for both gradients (the hand-derived loss, and grad_through_scan).
# Prints the median frames/s of each and the ratio vmap / hand.
#
#   bench/anakin_vmap.sh [REPS] [CALLS]      (defaults 5 repetitions, 5 timed calls)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
CALLS=${2:-5}
cargo build --release --quiet --example anakin
OURS=target/release/examples/anakin
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for grad in false true; do
    for rep in $(seq 1 "$REPS"); do
        order="hand vmap"; [ $((rep % 2)) = 0 ] && order="vmap hand"
        for who in $order; do
            v=false; [ "$who" = vmap ] && v=true
            XLACLIENT_COMPILE_CACHE=0 "$OURS" --set calls="$CALLS" --set timed_calls="$CALLS" \
                --set min_reward=-1 --set grad_through_scan=$grad --set vmap_learners=$v \
                --output-dir "$OUT/run-$grad-$rep-$who" 2>/dev/null | tail -1 >>"$OUT/$who-$grad.txt"
        done
        echo "grad_through_scan=$grad: repetition $rep of $REPS done" >&2
    done
done
python3 - "$OUT" <<'PY'
import statistics, sys
out = sys.argv[1]
def fps(name):
    v = []
    for line in open(name):
        kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if "fps" in kv:
            v.append(float(kv["fps"]))
    return v
for grad in ("false", "true"):
    h, m = fps(f"{out}/hand-{grad}.txt"), fps(f"{out}/vmap-{grad}.txt")
    print(f"grad_through_scan={grad}: hand {statistics.median(h):.4g} frames/s, "
          f"vmap {statistics.median(m):.4g} frames/s, vmap/hand {statistics.median(m)/statistics.median(h):.3f} "
          f"(runs {len(h)}, {len(m)})")
PY
