#!/usr/bin/env python3
"""Record jax.lax.top_k outputs (jax 0.10.2 on CPU) for tests/ops_sorting.rs: ties,
NaN of either sign, +-0, +-inf, integer types, f64, rank 1 to 3, k from 0 to the
whole axis, zero-size arrays.

Setup (once):  python3 -m venv .jaxenv && .jaxenv/bin/pip install jax==0.10.2
Run:           .jaxenv/bin/python scripts/record_jax_topk.py
Writes tests/data/jax/topk.json. Floats are written as their bit patterns (u32 for
f32, u64 for f64, as decimal numbers) so that NaN signs and -0.0 survive JSON.
"""
import json
import os

import numpy as np
import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "topk.json")

NAN = np.float32(np.nan)
NEG_NAN = -np.float32(np.nan)


def bits(a):
    a = np.asarray(a)
    if a.dtype == np.float32:
        return a.view(np.uint32).ravel().tolist()
    if a.dtype == np.float64:
        return a.view(np.uint64).ravel().tolist()
    return a.ravel().tolist()


def case(name, x, ks):
    x = jnp.asarray(x)
    out = {"name": name, "dtype": str(x.dtype), "dims": list(x.shape), "x": bits(x), "k": []}
    for k in ks:
        v, i = jax.jit(lambda a, k=k: lax.top_k(a, k))(x)
        assert str(i.dtype) == "int32"
        out["k"].append({"k": k, "values": bits(v), "indices": bits(i)})
    return out


def main():
    rng = np.random.default_rng(7)
    special = np.array([1.0, NAN, 3.0, -0.0, 0.0, 3.0, NEG_NAN, np.inf, -np.inf, 0.0, -0.0, NAN, 1.0],
                       dtype=np.float32)
    cases = [
        case("f32 specials", special, [0, 1, 3, 6, 9, 13]),
        case("f32 specials, 3 rows", np.stack([special, special[::-1], np.roll(special, 4)]), [2, 5, 13]),
        case("f32 ties", np.array([[2, 1, 2, 2, 0, 1], [5, 5, 5, 5, 5, 5], [-1, -1, -2, -2, -1, -3]],
                                  dtype=np.float32), [1, 3, 6]),
        case("f32 rank 3", rng.integers(-3, 4, size=(2, 3, 5)).astype(np.float32), [2, 5]),
        case("f32 large", np.array([3.0e38, -3.0e38, 1e-45, -1e-45, 1.17549435e-38, 0.0, 16777216.0,
                                    16777217.0], dtype=np.float32), [4, 8]),
        case("f64 specials", special.astype(np.float64), [4, 13]),
        case("s32 ties", np.array([[3, -1, 3, 2147483647, -2147483648, 0, 3]], dtype=np.int32), [3, 7]),
        case("u8", np.array([200, 7, 255, 0, 7, 128], dtype=np.uint8), [2, 6]),
        case("s64", np.array([-(2**62), 2**62, 5, 5, -5], dtype=np.int64), [3]),
        case("f32 zero rows", np.zeros((0, 4), np.float32), [0, 2]),
        case("f32 empty axis", np.zeros((3, 0), np.float32), [0]),
    ]
    rec = {"jax_version": jax.__version__, "cases": cases}
    with open(OUT, "w") as fh:
        json.dump(rec, fh, indent=0)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
