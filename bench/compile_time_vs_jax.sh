#!/usr/bin/env bash
# Compile time side by side with JAX, on the programs of benches/compile_time.rs and
# bench/compile_time_jax.py (the same programs) plus the Anakin learner
# (../shared/bench-anchors/jax_anakin_catch.py on JAX's side). Each measurement is a
# fresh process compiling one program, ours and JAX's alternating, the order
# swapped every repetition; caches off on both sides. Prints per program the
# median over the repetitions of trace+lower+compile seconds, and ours / JAX.
#
#   bench/compile_time_vs_jax.sh [REPS]      (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
PROGRAMS=${PROGRAMS:-"reset4 reset64 samplers rnn_grad anakin"}
ANAKIN=${ANAKIN:-../shared/bench-anchors/jax_anakin_catch.py}
. bench/jax_venv.sh
cargo bench --quiet --bench compile_time --no-run 2>/dev/null
OURS=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/compile_time-* | grep -v '\.d$' | head -1)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

ours() { XLACLIENT_COMPILE_CACHE=0 "$OURS" "$1" 2>/dev/null | grep -o 'total_s=[0-9.]*' | cut -d= -f2; }
jax() {
    if [ "$1" = anakin ]; then
        "$VENV/bin/python" "$ANAKIN" --calls 1 --eval-every 1000 --json 2>/dev/null | tail -1 |
            "$VENV/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print(d["lower_s"]+d["compile_s"])'
    else
        "$VENV/bin/python" bench/compile_time_jax.py "$1" 2>/dev/null | grep -o 'total_s=[0-9.]*' | cut -d= -f2
    fi
}

for rep in $(seq 1 "$REPS"); do
    for p in $PROGRAMS; do
        if [ $((rep % 2)) = 1 ]; then
            ours "$p" >>"$OUT/ours-$p"; jax "$p" >>"$OUT/jax-$p"
        else
            jax "$p" >>"$OUT/jax-$p"; ours "$p" >>"$OUT/ours-$p"
        fi
    done
done

median() { sort -g "$1" | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
printf '%-10s %10s %10s %8s   (trace+lower+compile, s; median of %s; %s)\n' program ours jax ours/jax "$REPS" "$(date -u +%F)"
for p in $PROGRAMS; do
    o=$(median "$OUT/ours-$p"); j=$(median "$OUT/jax-$p")
    printf '%-10s %10.3f %10.3f %8.2f\n' "$p" "$o" "$j" "$(echo "$o / $j" | bc -l)"
done
