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
Writes tests/data/jax/samplers.json (f64 cases come from a second process with
jax_enable_x64 set, see --x64).
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
    return out


def main():
    if "--x64" in sys.argv:
        json.dump(record(True), sys.stdout)
        return
    import jax
    cases = record(False)
    x64 = subprocess.run([sys.executable, os.path.abspath(__file__), "--x64"],
                         check=True, capture_output=True, text=True).stdout
    cases += json.loads(x64)
    with open(OUT, "w") as fh:
        json.dump({"jax_version": jax.__version__, "cases": cases}, fh, separators=(",", ":"),
                  allow_nan=False)
        fh.write("\n")
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
