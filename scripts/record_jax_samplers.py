#!/usr/bin/env python3
"""Record jax.random's samplers (jax 0.10.2, CPU) for tests/samplers.rs.

Each case runs a sampler eagerly, as a user would, for a few seeds and small shapes,
with the default threefry2x32 keys and with the 'rbg' implementation (keys u32[4],
bits from XLA's rng-bit-generator). Array arguments (logits, probabilities, bounds)
are passed as arrays, and tests/samplers.rs passes them as parameters, so neither
side folds them at compile time. Floats are stored as their bit patterns (u32 for
f32, u64 for f64) so that NaN, infinities and signed zeros survive JSON.

Setup (once):  python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax==0.10.2
Run:           /tmp/jaxenv/bin/python scripts/record_jax_samplers.py
Writes tests/data/jax/samplers.json: the cases, SHA-256 digests of the large samples
of the statistical tests, and a probe of log1p (f64 cases come from a second
process with jax_enable_x64 set, see --x64).
"""
import json
import os
import subprocess
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "samplers.json")
SEEDS = [0, 42, 1234]
# The rbg keys share every sampler with threefry but bits and split: a subset of
# the cases shows that they agree too (and keeps tests/samplers.rs quick).
RBG_CASES = {"bits_u32", "split_3", "fold_in_5", "uniform", "uniform_m2_3", "normal", "tn_m1_2",
             "randint_0_10", "randint_full", "permutation_10", "permutation_1700", "choice_p",
             "bits_u64", "uniform_f64"}
INF = float("inf")


def enc(a):
    """An array as {dtype, dims, data}: floats by their bits."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        data = a.view(np.uint32)
    elif a.dtype == np.float64:
        data = a.view(np.uint64)
    elif a.dtype == np.bool_:
        data = a.astype(np.uint8)
    else:
        data = a
    return {"dtype": str(a.dtype), "dims": list(a.shape), "data": [int(v) for v in data.ravel()]}


def f32(x):
    return np.asarray(x, np.float32)


def cases_f32(jax, random, jnp, impl):
    """(name, args, fn(key) -> array[, seeds]) for one PRNG implementation."""
    logits = f32([[0.0, 1.0, -INF, 2.0, 0.5], [-INF, -INF, 3.0, -INF, -INF]])
    logits3 = f32([[[0.5, -1.0, 2.0], [0.0, 0.0, 0.0]], [[-INF, 1.0, 1.0], [3.0, -2.0, 0.1]]])
    p = f32([0.1, 0.0, 0.5, 0.4])
    lo_arr = f32([[-1.0], [0.5]])
    hi_arr = f32([[0.0, 1.0, 2.0]])
    probs = f32([[0.0, 0.25, 1.0], [0.5, 0.9, 0.01]])
    rlo = np.asarray([[-5], [100]], np.int32)
    rhi = np.asarray([[0, 7, 2**31 - 1]], np.int32)
    arr = np.arange(8, dtype=np.int32).reshape(4, 2) * 10
    arr2 = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = []
    c.append(("bits_u32", {}, lambda k: random.bits(k, (2, 3), jnp.uint32)))
    c.append(("split_3", {}, lambda k: random.key_data(random.split(k, 3))))
    c.append(("fold_in_5", {}, lambda k: random.key_data(random.fold_in(k, 5))))
    c.append(("uniform", {}, lambda k: random.uniform(k, (7,))))
    c.append(("uniform_m2_3", {}, lambda k: random.uniform(k, (2, 3), minval=-2.0, maxval=3.0)))
    c.append(("uniform_arrays", {"lo": enc(lo_arr), "hi": enc(hi_arr)},
              lambda k: random.uniform(k, (2, 3), minval=lo_arr, maxval=hi_arr)))
    c.append(("normal", {}, lambda k: random.normal(k, (2, 5))))
    c.append(("normal_512", {}, lambda k: random.normal(k, (512,)), [0]))
    for name, lo, hi in [("tn_m1_2", -1.0, 2.0), ("tn_minf_0", -INF, 0.0), ("tn_0_inf", 0.0, INF),
                         ("tn_minf_inf", -INF, INF), ("tn_2p5_inf", 2.5, INF), ("tn_m3_m2", -3.0, -2.0),
                         ("tn_m6_m5", -6.0, -5.0)]:
        c.append((name, {"lo": lo, "hi": hi},
                  lambda k, lo=lo, hi=hi: random.truncated_normal(k, f32(lo), f32(hi), (9,))))
    c.append(("tn_arrays", {"lo": enc(lo_arr), "hi": enc(hi_arr)},
              lambda k: random.truncated_normal(k, lo_arr, hi_arr)))
    c.append(("randint_0_10", {}, lambda k: random.randint(k, (3, 4), 0, 10)))
    for name, lo, hi in [("randint_full", -2**31, 2**31 - 1), ("randint_top", 2**31 - 3, 2**31 - 1),
                         ("randint_bottom", -2**31, -2**31 + 3), ("randint_empty", 5, 5),
                         ("randint_reversed", 9, -4), ("randint_m7_1000", -7, 1000)]:
        c.append((name, {"lo": lo, "hi": hi},
                  lambda k, lo=lo, hi=hi: random.randint(k, (6,), lo, hi)))
    c.append(("randint_arrays", {"lo": enc(rlo), "hi": enc(rhi)},
              lambda k: random.randint(k, (2, 3), rlo, rhi)))
    for name, pv in [("bernoulli_0", 0.0), ("bernoulli_1", 1.0), ("bernoulli_0p3", 0.3)]:
        c.append((name, {"p": pv}, lambda k, pv=pv: random.bernoulli(k, f32(pv), (10,))))
    c.append(("bernoulli_array", {"p": enc(probs)}, lambda k: random.bernoulli(k, probs)))
    c.append(("gumbel", {}, lambda k: random.gumbel(k, (2, 4))))
    c.append(("categorical_last", {"logits": enc(logits)}, lambda k: random.categorical(k, logits, axis=-1)))
    c.append(("categorical_axis0", {"logits": enc(logits)}, lambda k: random.categorical(k, logits, axis=0)))
    c.append(("categorical_mid", {"logits": enc(logits3)}, lambda k: random.categorical(k, logits3, axis=1)))
    c.append(("categorical_shape", {"logits": enc(logits)},
              lambda k: random.categorical(k, logits, axis=-1, shape=(3, 2))))
    c.append(("categorical_noreplace", {"logits": enc(logits3)},
              lambda k: random.categorical(k, logits3, axis=-1, shape=(2, 2, 2), replace=False)))
    c.append(("permutation_10", {}, lambda k: random.permutation(k, 10)))
    c.append(("permutation_1", {}, lambda k: random.permutation(k, 1)))
    # Above 2^(32/3) elements JAX sorts twice (two rounds of fresh keys).
    c.append(("permutation_1700", {}, lambda k: random.permutation(k, 1700), [0]))
    c.append(("shuffle_rows", {"x": enc(arr2)}, lambda k: random.permutation(k, arr2, axis=1)))
    c.append(("shuffle_independent", {"x": enc(arr2)},
              lambda k: random.permutation(k, arr2, axis=1, independent=True)))
    c.append(("choice_5", {}, lambda k: random.choice(k, 5, (3, 2))))
    c.append(("choice_5_noreplace", {}, lambda k: random.choice(k, 5, (2, 2), replace=False)))
    c.append(("choice_p", {"p": enc(p)}, lambda k: random.choice(k, 4, (9,), p=p)))
    c.append(("choice_p_noreplace", {"p": enc(p)}, lambda k: random.choice(k, 4, (3,), replace=False, p=p)))
    c.append(("choice_array_axis1", {"a": enc(arr)}, lambda k: random.choice(k, arr, (3,), axis=1)))
    c.append(("choice_array_noreplace", {"a": enc(arr)},
              lambda k: random.choice(k, arr, (3,), replace=False)))
    c.append(("choice_array_p", {"a": enc(arr), "p": enc(p)}, lambda k: random.choice(k, arr, (2, 2), p=p)))
    return c


def cases_f64(jax, random, jnp, impl):
    return [
        ("bits_u64", {}, lambda k: random.bits(k, (2, 3), jnp.uint64)),
        ("uniform_f64", {}, lambda k: random.uniform(k, (7,), jnp.float64)),
        ("uniform_f64_m2_3", {}, lambda k: random.uniform(k, (2, 3), jnp.float64, -2.0, 3.0)),
        ("gumbel_f64", {}, lambda k: random.gumbel(k, (2, 4), jnp.float64)),
    ]


def digests(jax, random, jnp, x64):
    """SHA-256 digests of the large samples drawn by the statistical tests of
    tests/samplers.rs (same keys, shapes and arguments): equality over a million
    draws without storing them."""
    import hashlib
    n = 1_000_000
    out = {}

    def key(seed, impl="threefry2x32"):
        return random.key(seed, impl=impl)

    def put(name, a):
        a = np.ascontiguousarray(np.asarray(a))
        out[name] = {"dtype": str(a.dtype), "dims": list(a.shape),
                     "sha256": hashlib.sha256(a.tobytes()).hexdigest()}

    if x64:
        put("uniform_f64", random.uniform(key(2), (200_000,), jnp.float64))
        return out
    put("uniform_m2_3", random.uniform(key(1), (n,), minval=-2.0, maxval=3.0))
    put("normal", random.normal(key(3), (n,)))
    put("normal_rbg", random.normal(key(3, "rbg"), (n,)))
    for i, (lo, hi) in enumerate([(-1.0, 2.0), (2.5, INF), (-INF, -3.0), (-0.1, 0.1)]):
        put(f"truncated_normal_{i}", random.truncated_normal(key(4), f32(lo), f32(hi), (200_000,)))
    put("gumbel", random.gumbel(key(5), (n,)))
    put("randint_0_10", random.randint(key(6), (n,), 0, 10))
    put("randint_0_10_rbg", random.randint(key(6, "rbg"), (n,), 0, 10))
    put("randint_m7_1000", random.randint(key(7), (n,), -7, 1000))
    put("bernoulli_0p3", random.bernoulli(key(8), f32(0.3), (n,)))
    logits = f32([[0.0, 2.0], [1.0, -1.0], [2.0, -INF], [-INF, 0.5], [0.5, 0.0]])
    put("categorical_columns", random.categorical(key(9), logits, axis=0, shape=(500_000, 2)))
    rows = 200_000
    logw = np.tile(f32(LOG_W), (rows, 1))
    put("categorical_noreplace", random.categorical(key(10), logw, axis=1, shape=(2, rows), replace=False))
    put("choice_p", random.choice(key(11), 4, (n,), p=f32([0.1, 0.0, 0.5, 0.4])))
    for seed, (r, m) in [(12, (400, 4)), (13, (200_000, 5))]:
        x = np.tile(np.arange(m, dtype=np.int32), (r, 1))
        put(f"shuffle_{r}x{m}", random.permutation(key(seed), x, axis=1, independent=True))
    put("permutation_5000", random.permutation(key(14), 5000))
    firsts = jax.vmap(lambda i: random.permutation(random.fold_in(key(15), i), 6)[:1])
    put("permutation_6_firsts", firsts(jnp.arange(3000, dtype=jnp.uint32)))
    # A thousand bounds over [-6, 6]: erf (built from ops in the crate) on each.
    lo = np.arange(1000, dtype=np.float32) * np.float32(0.012) - np.float32(6.0)
    put("truncated_normal_bounds", random.truncated_normal(key(18), lo, lo + np.float32(0.25)))
    put("uniform_rbg", random.uniform(key(16, "rbg"), (n,)))
    put("choice_7_rbg", random.choice(key(17, "rbg"), 7, (n,)))
    return out


# log(w) for w = 0.1, 0.2, 0.3, 0.4 as f32 (the logits of a statistical test).
LOG_W = [-2.3025851, -1.609438, -1.2039728, -0.9162907]


def record(x64):
    import jax
    if x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import random
    assert jax.__version__ == "0.10.2", jax.__version__
    assert jax.default_backend() == "cpu"
    out = []
    for impl in ["threefry2x32", "rbg"]:
        table = (cases_f64 if x64 else cases_f32)(jax, random, jnp, impl)
        for name, args, fn, *seeds in table:
            if impl == "rbg" and name not in RBG_CASES:
                continue
            for seed in (seeds[0] if seeds else SEEDS):
                key = random.key(seed, impl=impl)
                # Python floats as their repr ('-inf', '2.5'): JSON has no infinities.
                enc_args = {k: (repr(v) if isinstance(v, float) else v) for k, v in args.items()}
                out.append({"impl": impl, "name": name, "seed": seed, "args": enc_args,
                            "key": [int(v) for v in np.asarray(random.key_data(key)).ravel()],
                            "out": enc(fn(key))})
    rec = {"cases": out, "digests": digests(jax, random, jnp, x64)}
    if not x64:
        # JAX's log1p of some inputs of erf_inv's range: tells the tests whether the
        # plugin's log1p is jaxlib's (normal and truncated_normal use it).
        x = -np.square(np.random.default_rng(7).uniform(0, 1, 512).astype(np.float32))
        rec["log1p_probe"] = {"x": enc(x), "y": enc(jnp.log1p(x))}
    return rec


def main():
    if "--x64" in sys.argv:
        json.dump(record(True), sys.stdout)
        return
    import jax
    rec = record(False)
    x64 = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--x64"],
                                    check=True, capture_output=True, text=True).stdout)
    rec["cases"] += x64["cases"]
    rec["digests"].update(x64["digests"])
    with open(OUT, "w") as fh:
        json.dump({"jax_version": jax.__version__, **rec}, fh, separators=(",", ":"), allow_nan=False)
        fh.write("\n")
    print("wrote", OUT, len(rec["cases"]), "cases,", len(rec["digests"]), "digests")


if __name__ == "__main__":
    main()
