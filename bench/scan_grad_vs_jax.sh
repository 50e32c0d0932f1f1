#!/usr/bin/env bash
# The gradient of a 1,000-step RNN scan against its forward pass, ours
# (benches/scan_grad.rs: stored values, the default, and checkpointed) next to
# JAX's (bench/scan_grad_jax.py, the same program), processes alternating, REPS
# times; prints each run's lines, then the medians of the gradient/forward ratios.
#
#   bench/scan_grad_vs_jax.sh [REPS]      (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
. bench/jax_venv.sh
cargo bench --quiet --bench scan_grad --no-run 2>/dev/null
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for rep in $(seq 1 "$REPS"); do
    if [ $((rep % 2)) = 1 ]; then order="ours jax"; else order="jax ours"; fi
    for who in $order; do
        if [ "$who" = jax ]; then
            "$VENV/bin/python" bench/scan_grad_jax.py 2>/dev/null | tail -1 | tee -a "$OUT"
        else
            XLACLIENT_COMPILE_CACHE=off cargo bench --quiet --bench scan_grad 2>/dev/null \
                | grep -E "^(forward|gradient)" | tee -a "$OUT"
        fi
    done
done
python3 - "$OUT" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
jax = [dict(p.split("=") for p in l.split()) for l in lines if l.startswith("who=jax")]
fwd = [float(re.search(r"run +([\d.]+) ms", l).group(1)) for l in lines if l.startswith("forward only")]
sto = [float(re.search(r"run +([\d.]+) ms", l).group(1)) for l in lines if l.startswith("gradient, stored")]
ckp = [float(re.search(r"run +([\d.]+) ms", l).group(1)) for l in lines if l.startswith("gradient, checkpointed")]
med = statistics.median
print(f"ours: forward {med(fwd):.1f} ms, gradient {med(sto):.1f} ms (stored, {med([s / f for s, f in zip(sto, fwd)]):.2f}x), "
      f"{med(ckp):.1f} ms (checkpointed, {med([c / f for c, f in zip(ckp, fwd)]):.2f}x)")
print(f"JAX:  forward {med(float(j['forward_ms']) for j in jax):.1f} ms, gradient "
      f"{med(float(j['gradient_ms']) for j in jax):.1f} ms ({med(float(j['ratio']) for j in jax):.2f}x), "
      f"temp {jax[0]['temp_mib']} MiB")
print(f"ours/JAX gradient speed: {med(float(j['gradient_ms']) for j in jax) / med(sto):.2f}x")
PY
