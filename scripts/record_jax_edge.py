#!/usr/bin/env python3
"""Record what jax 0.10.2 (XLA on CPU) computes at numeric edge cases, for
tests/ops_edge.rs: integer division and remainder by zero and of MIN by -1,
float-to-integer conversion of NaN, infinities and out-of-range values, NaN,
infinities and signed zeros through element-wise ops, sums of infinities,
argmax/argmin ties and NaNs, sort with NaNs, signed zeros and equal keys, and
conversions to pred.

Every op is a lax primitive (the HLO op itself, not a jnp wrapper that adds its own
handling) run under jax.jit on CPU with 64-bit types enabled.

Setup (once):  python3 -m venv .jaxenv && .jaxenv/bin/pip install jax==0.10.2
Run:           .jaxenv/bin/python scripts/record_jax_edge.py
Writes tests/data/jax/edge.json. Floats are stored as their IEEE bit patterns
(unsigned integers), so NaN, infinities and -0.0 survive JSON exactly.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "edge.json")

BITS = {np.dtype("float32"): np.uint32, np.dtype("float64"): np.uint64}


def enc(a):
    a = np.asarray(a)
    data = a.view(BITS[a.dtype]) if a.dtype in BITS else a
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data.ravel().tolist()}


def run(f, *args):
    return np.asarray(jax.jit(f)(*[jnp.asarray(a) for a in args]))


def main():
    cases = {}

    def case(name, f, *args, **attrs):
        out = run(f, *args)
        c = {"inputs": [enc(a) for a in args], "output": enc(out)}
        c.update(attrs)
        cases[name] = c

    # Integer division and remainder: by zero, MIN by -1, signs.
    for t in [np.int8, np.int32, np.int64]:
        lo, hi = np.iinfo(t).min, np.iinfo(t).max
        x = np.array([7, -7, 7, -7, lo, lo, 0, hi, lo, 5, -5], t)
        y = np.array([2, 2, -2, -2, -1, 0, 0, 0, 1, -1, 0], t)
        case(f"div_{np.dtype(t)}", lax.div, x, y)
        case(f"rem_{np.dtype(t)}", lax.rem, x, y)
    for t in [np.uint8, np.uint32, np.uint64]:
        hi = np.iinfo(t).max
        x = np.array([7, 0, hi, hi, 7, 1], t)
        y = np.array([2, 0, 0, 1, 0, hi], t)
        case(f"div_{np.dtype(t)}", lax.div, x, y)
        case(f"rem_{np.dtype(t)}", lax.rem, x, y)

    # Float to integer conversion.
    xs = np.array(
        [np.nan, -np.nan, np.inf, -np.inf, 300.0, -300.0, 1e10, -1e10, 2147483520.0, 2147483648.0,
         -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0, 9.2e18, -9.3e18, 1.9e19,
         -0.5, 0.5, -1.5, 1.5, 2.5, -2.5, 127.9, 128.0, -128.9, -129.0, 255.9, 256.0, -1.0,
         -0.0, 0.0, 1e-30],
        np.float32)
    for t in [np.int8, np.int32, np.uint8, np.uint32, np.int64, np.uint64]:
        case(f"convert_f32_{np.dtype(t)}", lambda v, t=t: lax.convert_element_type(v, t), xs)
    x64 = np.array([np.nan, np.inf, -np.inf, 9223372036854774784.0, 9223372036854775808.0,
                    -9223372036854775808.0, -9.3e18, -0.5, -1.5, 0.5, 1.5], np.float64)
    case("convert_f64_int64", lambda v: lax.convert_element_type(v, np.int64), x64)
    # To pred: JAX's convert is `x != 0`.
    case("convert_f32_bool", lambda v: lax.convert_element_type(v, np.bool_),
         np.array([0.0, -0.0, 0.5, np.nan, np.inf, -2.0, 1e-45], np.float32))
    case("convert_int32_bool", lambda v: lax.convert_element_type(v, np.bool_),
         np.array([0, 1, 2, -1, 256, -2147483648], np.int32))

    # Special values through element-wise ops.
    s = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.5, 3.0, 1e-45], np.float32)
    for name, f in [("exp", lax.exp), ("log", lax.log), ("sqrt", lax.sqrt), ("sign", lax.sign),
                    ("abs", lax.abs), ("neg", lax.neg), ("log1p", lax.log1p), ("expm1", lax.expm1),
                    ("tanh", lax.tanh), ("floor", lax.floor), ("ceil", lax.ceil)]:
        case(f"unary_{name}", f, s)
    px = np.repeat(s, len(s))
    py = np.tile(s, len(s))
    for name, f in [("pow", lax.pow), ("atan2", lax.atan2), ("rem", lax.rem), ("mul", lax.mul),
                    ("div", lax.div), ("add", lax.add), ("sub", lax.sub)]:
        case(f"binary_{name}", f, px, py)
    # f32 subnormal results on CPU.
    case("ftz_mul", lax.mul, np.array([1e-37, 1e-38, 1e-30, 1e-45], np.float32),
         np.array([1e-3, 1e-3, 1e-15, 1.0], np.float32))

    # Sums of infinities.
    sums = np.array([[np.inf, -np.inf], [np.inf, 1.0], [-np.inf, -np.inf], [np.nan, 1.0],
                     [np.inf, np.inf], [-0.0, -0.0], [-0.0, 0.0]], np.float32)
    case("reduce_sum", lambda v: jnp.sum(v, axis=1), sums)

    # argmax / argmin: ties take the first index; NaN counts as the extreme.
    rows = np.array([[1, 3, 3, 2], [np.nan, 1, np.nan, 0], [1, np.nan, 5, np.nan],
                     [-0.0, 0.0, -0.0, 0.0], [0.0, -0.0, 0.0, -0.0], [-np.inf] * 4,
                     [np.inf, np.nan, np.inf, 1], [2, 2, 2, 2], [5, -np.inf, np.inf, -np.inf]],
                    np.float32)
    case("argmax_f32", lambda v: jnp.argmax(v, axis=1).astype(np.int32), rows)
    case("argmin_f32", lambda v: jnp.argmin(v, axis=1).astype(np.int32), rows)
    irows = np.array([[2, 5, 5, 1], [-1, -1, -3, -3], [7, 7, 7, 7]], np.int32)
    case("argmax_int32", lambda v: jnp.argmax(v, axis=1).astype(np.int32), irows)
    case("argmin_int32", lambda v: jnp.argmin(v, axis=1).astype(np.int32), irows)

    # Sort: stable, NaNs last, -0.0 and 0.0 equal.
    keys = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, -np.nan, 0.0, 3.0, -0.0, np.inf, 1.0],
                    np.float32)
    idx = np.arange(len(keys), dtype=np.int32)
    case("sort_keys", lambda k, i: lax.sort((k, i), num_keys=1, is_stable=True)[0], keys, idx)
    case("sort_payload", lambda k, i: lax.sort((k, i), num_keys=1, is_stable=True)[1], keys, idx)

    rec = {"jax_version": jax.__version__, "backend": jax.default_backend(), "cases": cases}
    with open(OUT, "w") as fh:
        json.dump(rec, fh, indent=0)
        fh.write("\n")
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
