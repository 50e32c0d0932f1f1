#!/usr/bin/env bash
# The gradient of a 1,000-step RNN scan against its forward pass, ours
# (benches/scan_grad.rs: stored values, the default, and the checkpoint policies
# Nothing, Dots and Names("pre")) next to JAX's (bench/scan_grad_jax.py, the same
# program, jax.checkpoint with nothing_saveable, dots_saveable and
# save_only_these_names), processes alternating, REPS times; prints each run's
# lines, then the medians of the gradient/forward ratios and temp buffers, the
# default gradient with a weight product per step (backward_chunk(1)), and the
# bench's two hand-written programs (the same backward pass, and the floor without
# the weight's product).
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
                | grep -E "^(forward|gradient|by hand|per-round)" | tee -a "$OUT"
        fi
    done
done
python3 - "$OUT" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
jax = [dict(p.split("=") for p in l.split()) for l in lines if l.startswith("who=jax")]
med = statistics.median
def ours(prefix):
    ms = [float(re.search(r"run +([\d.]+) ms", l).group(1)) for l in lines if l.startswith(prefix)]
    mib = [float(re.search(r"temp buffers +([\d.]+) MiB", l).group(1)) for l in lines if l.startswith(prefix)]
    return ms, mib
fwd, _ = ours("forward only")
print(f"ours: forward {med(fwd):.1f} ms")
for label, prefix, key in [
    ("everything (default)", "gradient, stored", ""),
    ("nothing", "gradient, checkpointed", "nothing_"),
    ("dots", "gradient, dots", "dots_"),
    ("names(pre)", "gradient, names", "names_"),
]:
    ms, mib = ours(prefix)
    jms = med(float(j[f"{key}ms" if key else "gradient_ms"]) for j in jax)
    jratio = med(float(j[f"{key}ratio" if key else "ratio"]) for j in jax)
    jtemp = jax[0][f"{key}temp_mib" if key else "temp_mib"]
    print(f"  {label:<21} ours {med(ms):7.1f} ms ({med([s / f for s, f in zip(ms, fwd)]):.2f}x fwd, "
          f"temp {mib[0]:.1f} MiB)   JAX {jms:7.1f} ms ({jratio:.2f}x fwd, temp {jtemp} MiB)   "
          f"ours/JAX speed {jms / med(ms):.2f}x")
for label, prefix in [
    ("weight product per step", "gradient, product a step"),
    ("by hand, same backward", "by hand, same"),
    ("by hand, no weight grad", "by hand, no"),
]:
    ms, _ = ours(prefix)
    print(f"  {label:<23} ours {med(ms):7.1f} ms ({med([s / f for s, f in zip(ms, fwd)]):.2f}x fwd)")
paired = [float(re.search(r"stored ([\d.]+)x", l).group(1)) for l in lines if l.startswith("per-round")]
print(f"  default gradient, median of each run's per-round ratios: {med(paired):.2f}x fwd")
print(f"JAX:  forward {med(float(j['forward_ms']) for j in jax):.1f} ms")
PY
