#!/usr/bin/env python3
"""Record jax.random outputs (jax 0.10.2, default threefry PRNG, partitionable) for
tests/threefry.rs: keys, split, fold_in, 32-bit bits and f32 uniform.

Setup (once):  python3 -m venv .jaxenv && .jaxenv/bin/pip install jax==0.10.2
Run:           .jaxenv/bin/python scripts/record_jax_random.py
Writes tests/data/jax/random.json.
"""
import json
import os

import numpy as np
import jax

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "random.json")


def u32(a):
    return np.asarray(a, np.uint32).ravel().tolist()


def main():
    rec = {"jax_version": jax.__version__, "cases": []}
    for seed in [0, 42, 2**32 + 7]:
        key = jax.random.PRNGKey(seed)
        rec["cases"].append({
            "seed": seed,
            "key": u32(jax.random.key_data(key)),
            "split3": u32(jax.random.key_data(jax.random.split(key, 3))),
            "fold_in_7": u32(jax.random.key_data(jax.random.fold_in(key, 7))),
            "bits_5": u32(jax.random.bits(key, (5,), dtype=np.uint32)),
            "bits_2x3": u32(jax.random.bits(key, (2, 3), dtype=np.uint32)),
            "uniform_4": np.asarray(jax.random.uniform(key, (4,)), np.float32).tolist(),
            "uniform_2x3_m2_3": np.asarray(jax.random.uniform(key, (2, 3), minval=-2.0, maxval=3.0), np.float32).tolist(),
        })
    with open(OUT, "w") as fh:
        json.dump(rec, fh)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
