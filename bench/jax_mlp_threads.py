#!/usr/bin/env python3
"""The anchor jax_mlp_latency.py's timed call, made by several Python threads at once.

Same network, parameters and call as ../shared/bench-anchors/jax_mlp_latency.py (its
`mlp` and `init_params` are imported from it): a numpy observation batch ->
jitted fn (the host->device copy inside the call) -> np.asarray(out). Each thread
busy-waits --gap-us before each call (not timed), then times the call; all threads
call at once (one jitted function, one parameter set, each thread its own
observations). Python threads share the GIL; JAX releases it while it waits for a
computation.

Prints the anchor's --json shape: {"info": {...}, "results": {batch: {"e2e": {...},
"calls_per_s": ...}}} with the medians over all calls of all threads, and the calls
per second of all threads together (host gaps included).

Usage: python jax_mlp_threads.py --anchor DIR [--threads 4] [--batches 1 64 1024]
       [--calls N] [--gap-us G] [--sync]
"""
import argparse
import json
import sys
import threading
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchor", required=True, help="folder of jax_mlp_latency.py")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024])
    ap.add_argument("--calls", type=int, default=1000, help="timed calls per batch and thread (1024: a quarter)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--gap-us", type=float, default=0.0)
    ap.add_argument("--sync", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, args.anchor)
    import jax
    import jax_mlp_latency as anchor

    if args.sync:
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    gap_ns = int(args.gap_us * 1000)
    perf = time.perf_counter_ns
    params = jax.device_put(anchor.init_params(0))
    jax.block_until_ready(params)
    jitted = jax.jit(anchor.mlp)
    rng = np.random.default_rng(1)
    results = {}
    for b in args.batches:
        per_thread = args.calls if b < 1024 else max(args.calls // 4, 25)
        pools = [[rng.standard_normal((b, anchor.OBS)).astype(np.float32) for _ in range(16)]
                 for _ in range(args.threads)]
        np.asarray(jitted(params, pools[0][0]))  # compile
        times = [np.empty(per_thread, dtype=np.int64) for _ in range(args.threads)]
        spans = [(0, 0)] * args.threads
        barrier = threading.Barrier(args.threads)

        def run(t):
            pool = pools[t]
            for i in range(args.warmup):
                np.asarray(jitted(params, pool[i & 15]))
            barrier.wait()
            start = perf()
            for i in range(per_thread):
                o = pool[i & 15]
                if gap_ns:
                    tg = perf()
                    while perf() - tg < gap_ns:
                        pass
                t0 = perf()
                np.asarray(jitted(params, o))
                times[t][i] = perf() - t0
            spans[t] = (start, perf())

        threads = [threading.Thread(target=run, args=(t,)) for t in range(args.threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall_s = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9
        results[b] = {"e2e": anchor.stats_us(np.concatenate(times)),
                      "calls_per_s": per_thread * args.threads / wall_s}
    info = {"jax": jax.__version__, "threads": args.threads, "sync": args.sync, "gap_us": args.gap_us}
    print(json.dumps({"info": info, "results": results}))


if __name__ == "__main__":
    main()
