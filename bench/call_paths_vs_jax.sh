#!/usr/bin/env bash
# The call-path grid of benches/call_paths.rs (our default path, the jit tree call
# and the raw C floor, side by side in one process) next to JAX making the same
# call: the anchor ../shared/bench-anchors/jax_mlp_latency.py (one thread; default
# dispatch and --sync) and bench/jax_mlp_threads.py (the anchor's call from four
# Python threads). Processes alternate: for each host gap (0, 100, 1000 µs) ours,
# JAX, JAX --sync, JAX 4 threads and JAX 4 threads --sync run one after the other,
# the order rotated from gap to gap and repetition to repetition.
#
# Prints one table: per threads × client × batch × gap the medians (µs per call) of
# ours (default, jit, raw) and of JAX in the same mode (our asynchronous client
# next to JAX's default dispatch, our synchronous client, the default, next to JAX
# --sync), with ratios; medians over the repetitions of each run's median. With
# four threads also the calls per second of all threads together (host gaps
# included): JAX's Python threads share the GIL, so its four callers mostly take
# turns while ours run at once, and per-call latencies measure different things.
#
#   bench/call_paths_vs_jax.sh [REPS]      (default 1 repetition)
#
# Environment: CALLS (timed calls per path, cell and thread, default 1000; the
# anchor's one thread makes CALLS calls per batch, half at 1024), GAPS (default
# "0 100 1000"), JAX_VENV (see bench/jax_venv.sh), ANCHORS (default
# ../shared/bench-anchors), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-1}
CALLS=${CALLS:-1000}
GAPS=${GAPS:-"0 100 1000"}
ANCHORS=${ANCHORS:-../shared/bench-anchors}
. bench/jax_venv.sh
OURS=$(cargo bench --bench call_paths --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "call_paths" and m.get("executable"):
        print(m["executable"])')
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

n=0
for rep in $(seq 1 "$REPS"); do
    for gap in $GAPS; do
        runs=(ours jax jaxsync jax4 jax4sync)
        k=$((n % ${#runs[@]}))
        n=$((n + 1))
        for who in "${runs[@]:k}" "${runs[@]:0:k}"; do
            case $who in
                ours) CALLS=$CALLS GAPS=$gap "$OURS" 2>/dev/null | grep '^cell ' >>"$OUT/ours.txt" ;;
                jax) "$VENV/bin/python" "$ANCHORS/jax_mlp_latency.py" --json --calls "$CALLS" --gap-us "$gap" 2>/dev/null |
                    tail -1 >>"$OUT/jax.jsonl" ;;
                jaxsync) "$VENV/bin/python" "$ANCHORS/jax_mlp_latency.py" --json --sync --calls "$CALLS" --gap-us "$gap" 2>/dev/null |
                    tail -1 >>"$OUT/jaxsync.jsonl" ;;
                jax4) "$VENV/bin/python" bench/jax_mlp_threads.py --anchor "$ANCHORS" --threads 4 --calls "$CALLS" --gap-us "$gap" 2>/dev/null |
                    tail -1 >>"$OUT/jax4.jsonl" ;;
                jax4sync) "$VENV/bin/python" bench/jax_mlp_threads.py --anchor "$ANCHORS" --threads 4 --sync --calls "$CALLS" --gap-us "$gap" 2>/dev/null |
                    tail -1 >>"$OUT/jax4sync.jsonl" ;;
            esac
        done
        echo "repetition $rep, gap $gap µs done" >&2
    done
done

python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], sys.argv[2]
med = statistics.median

ours, ours_rate = {}, {}
for line in open(f"{out}/ours.txt"):
    kv = dict(p.split("=", 1) for p in line.split()[1:])
    key = (int(kv["threads"]), kv["client"], int(kv["batch"]), int(float(kv["gap_us"])))
    ours.setdefault(key, {}).setdefault(kv["path"], []).append(float(kv["median_us"]))
    ours_rate.setdefault(key, {}).setdefault(kv["path"], []).append(float(kv["calls_per_s"]))

jax, jax_rate = {}, {}
for name, threads, mode in [("jax", 1, "async"), ("jaxsync", 1, "sync"), ("jax4", 4, "async"), ("jax4sync", 4, "sync")]:
    try:
        lines = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
    except FileNotFoundError:
        continue
    for r in lines:
        gap = int(float(r["info"]["gap_us"]))
        for b, v in r["results"].items():
            jax.setdefault((threads, mode, int(b), gap), []).append(v["e2e"]["median_us"])
            if "calls_per_s" in v:
                jax_rate.setdefault((threads, mode, int(b), gap), []).append(v["calls_per_s"])

print(f"median µs per call, median over {reps} alternated run(s); JAX in the same mode: "
      "async = JAX's default dispatch, sync = --sync")
hdr = (f"{'threads':>7} {'client':>6} {'batch':>5} {'gap':>5} | {'default':>8} {'jit':>8} {'raw':>8} {'JAX':>8} | "
       f"{'default/raw':>11} {'jit/raw':>7} {'JAX/default':>11} {'JAX/jit':>7} | "
       f"{'calls/s default':>15} {'JAX':>8}")
print(hdr)
nan = float("nan")
for key in sorted(ours, key=lambda k: (k[0], k[1] != "async", k[2], k[3])):
    p = ours[key]
    d, j, r = (med(p[x]) if x in p else nan for x in ("default", "jit", "raw"))
    jm = med(jax[key]) if key in jax else nan
    rd = med(ours_rate[key]["default"]) if "default" in ours_rate.get(key, {}) else nan
    rj = med(jax_rate[key]) if key in jax_rate else nan
    print(f"{key[0]:>7} {key[1]:>6} {key[2]:>5} {key[3]:>5} | {d:>8.1f} {j:>8.1f} {r:>8.1f} {jm:>8.1f} | "
          f"{d / r:>11.3f} {j / r:>7.3f} {jm / d:>11.3f} {jm / j:>7.3f} | {rd:>15.0f} {rj:>8.0f}")
PY
