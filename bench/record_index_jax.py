#!/usr/bin/env python3
"""Records JAX 0.10.2's answers for numpy indexing (`x[idx]`) and the functional
updates `x.at[idx].get/set/add/multiply/min/max` with their modes (issue 24);
tests/numpy_index.rs builds the same index with the crate's `ix!` entries and
compares, on both CPU plugins.

    JAX_VENV=/work/main/target/jax-venv; $JAX_VENV/bin/python bench/record_index_jax.py

Writes tests/data/index_jax.json: {"jax_version", "cases": [{name, op, mode,
index, x, value?, out, grads?}]}. `index` is a list of entries: {"int": k},
{"slice": [start, stop, step]} (null for a missing part), {"newaxis": 1},
{"ellipsis": 1}, {"array": A} (an integer array, passed to the program as a
parameter), {"mask": A} (a constant boolean mask). Arrays are {dtype, shape,
data} (row-major; floats as numbers or "nan"). `grads`, where present, are JAX's
gradients of sum(out * w) with w = 1 + arange(out.size)/10 reshaped, for x (and
the value). CPU backend, 64-bit types off.
"""
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_platforms", "cpu")
assert jax.__version__ == "0.10.2", jax.__version__


def enc(a):
    a = np.asarray(a)
    if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
        data = [int(v) for v in a.ravel()]
    else:
        data = []
        for v in a.ravel().astype(np.float64):
            if math.isnan(v):
                data.append("nan")
            elif math.isinf(v):
                data.append("inf" if v > 0 else "-inf")
            else:
                data.append(float(f"{v:.9g}"))
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


NEW, ELL = "newaxis", "ellipsis"


def s(start=None, stop=None, step=None):
    return ("slice", start, stop, step)


def arr(v):
    return ("array", np.asarray(v, np.int32))


def mask(v):
    return ("mask", np.asarray(v, bool))


def to_py(entries, dyn):
    """The index as JAX takes it; index arrays come from `dyn` (traced)."""
    out, k = [], 0
    for e in entries:
        if e == NEW:
            out.append(None)
        elif e == ELL:
            out.append(Ellipsis)
        elif isinstance(e, int):
            out.append(e)
        elif e[0] == "slice":
            out.append(slice(e[1], e[2], e[3]))
        elif e[0] == "array":
            out.append(dyn[k])
            k += 1
        elif e[0] == "mask":
            out.append(e[1])
    return tuple(out)


def to_json(entries):
    out = []
    for e in entries:
        if e == NEW:
            out.append({"newaxis": 1})
        elif e == ELL:
            out.append({"ellipsis": 1})
        elif isinstance(e, int):
            out.append({"int": e})
        elif e[0] == "slice":
            out.append({"slice": [e[1], e[2], e[3]]})
        elif e[0] == "array":
            out.append({"array": enc(e[1])})
        elif e[0] == "mask":
            out.append({"mask": enc(e[1])})
    return out


cases = []
X = np.arange(60, dtype=np.float32).reshape(3, 4, 5) / 4 - 3
XI = np.arange(24, dtype=np.int32).reshape(4, 6) - 10


def weights(shape):
    n = int(np.prod(shape))
    return (1 + np.arange(n, dtype=np.float32) / 10).reshape(shape)


def case(name, op, entries, x=X, mode=None, value=None, grads=False):
    arrays = [e[1] for e in entries if isinstance(e, tuple) and e[0] == "array"]

    def f(x, value, *dyn):
        idx = to_py(entries, dyn)
        if op == "index":
            return x[idx]
        at = x.at[idx]
        kw = {} if mode is None else {"mode": mode}
        if op == "get":
            return at.get(**kw)
        return getattr(at, op)(value, **kw)

    v = None if value is None else jnp.asarray(value)
    out = f(jnp.asarray(x), v, *[jnp.asarray(a) for a in arrays])
    c = {"name": name, "op": op, "mode": mode, "index": to_json(entries),
         "x": enc(x), "out": enc(out)}
    if value is not None:
        c["value"] = enc(np.asarray(value))
    if grads:
        w = weights(out.shape)
        if value is None:
            g = jax.grad(lambda x: (f(x, None, *arrays) * w).sum())(jnp.asarray(x))
            c["grads"] = [enc(g)]
        else:
            gx, gv = jax.grad(lambda x, v: (f(x, v, *arrays) * w).sum(), argnums=(0, 1))(
                jnp.asarray(x), jnp.asarray(value, np.float32))
            c["grads"] = [enc(gx), enc(gv)]
    cases.append(c)


# Basic indices.
case("int", "index", [0], grads=True)
case("neg_int", "index", [-1])
case("two_ints", "index", [1, 2])
case("ellipsis_int", "index", [ELL, -1])
case("range", "index", [s(1, 3)])
case("reverse", "index", [s(None, None, -1)], grads=True)
case("strided_int", "index", [s(None, None, 2), 1])
case("neg_step_from", "index", [s(1, None, -1)])
case("neg_bounds", "index", [s(-3, -1)])
case("neg_step_bounds", "index", [slice_ := s(None, None, 1), s(4, 0, -2)])
case("step3_clip", "index", [s(None, None, 1), s(None, None, 1), s(-10, 10, 3)])
case("empty_range", "index", [s(1, 1)])
case("newaxis_front", "index", [NEW])
case("newaxis_end", "index", [ELL, NEW])
case("int_ell_newaxis", "index", [0, ELL, NEW])
case("newaxis_mid", "index", [NEW, 1, NEW, s(None, None, -2)])
# Index arrays.
case("array", "index", [arr([0, 2])], grads=True)
case("array_clip", "index", [arr([-1, 0, 7, -9])])
case("array_bcast", "index", [arr([[0], [2]]), arr([1, 3])])
case("array_second", "index", [s(None), arr([0, 3, 3])], grads=True)
case("arrays_apart", "index", [arr([0, 2]), s(None), arr([1, 4])])
case("array_int_adjacent", "index", [arr([0, 2]), 1])
case("arrays_range_between", "index", [arr([0, 2]), s(1, 3), arr([1, 4])])
case("int_apart_array", "index", [1, s(None), arr([0, 4])])
case("reverse_array", "index", [s(None, None, -1), arr([0, 1])])
case("array_strided", "index", [arr([0, 1]), s(None, None, 2)])
case("scalar_array", "index", [arr(-1)])
case("scalar_array_clip", "index", [s(None), arr(9)])
case("array_newaxis", "index", [arr([2, 0]), NEW, arr([1, 1])])
case("array_2d_mid", "index", [s(None), arr([[0, 1], [2, 3]]), s(1, 4, 2)])
case("empty_array", "index", [arr(np.zeros((0,), np.int32))])
# Masks.
case("mask_last", "index", [ELL, mask([True, False, True, True, False])])
case("mask_2d", "index", [mask([[True, False, False, True],
                                [False, False, True, False],
                                [True, True, False, False]])], grads=True)
case("mask_mid", "index", [s(None), mask([False, True, True, False]), 0])
# get with modes.
case("get_fill", "get", [arr([-1, 2, 3, -4, 7])], mode="fill")
case("get_fill_int", "get", [s(None), arr([[5, -6], [6, -7]])], x=XI, mode="fill")
case("get_clip", "get", [arr([-5, 9])], mode="clip")
case("get_default", "get", [1, arr([8])])
# Updates.
case("set_int", "set", [1], value=np.float32(7), grads=True)
case("set_column", "set", [s(None), 0], value=np.arange(15, dtype=np.float32).reshape(3, 5))
case("set_row_bcast", "set", [0], value=np.arange(5, dtype=np.float32))
case("add_dups", "add", [arr([0, 0, 2])], value=np.float32(1), grads=True)
case("mul", "multiply", [s(None), arr([1, 3])], value=np.float32(-2))
case("min", "min", [ELL, arr([0, 4])], value=np.float32(0))
case("max", "max", [2, s(1, 3)], value=np.arange(10, dtype=np.float32).reshape(2, 5) - 5)
case("set_drop", "set", [arr([-1, 5, -9, 1])], value=np.float32(100))
case("add_drop_default", "add", [s(None), arr([4, -5, 2])], value=np.float32(1))
case("set_clip", "set", [arr([-1, 5, -9])], mode="clip",
     value=np.arange(60, 120, dtype=np.float32).reshape(3, 4, 5))
case("add_clip", "add", [s(None), arr([9, -9])], mode="clip", value=np.float32(1))
case("set_strided", "set", [s(None, None, 2), 1], value=np.float32(9))
case("set_reversed", "set", [1, s(None, None, -1)],
     value=np.arange(20, dtype=np.float32).reshape(4, 5), grads=True)
case("set_step_range", "set", [s(None), s(3, 0, -2), s(1, None, 3)],
     value=np.arange(12, dtype=np.float32).reshape(3, 2, 2))
case("add_mask", "add", [mask([[True, False, False, True],
                              [False, False, True, False],
                              [True, True, False, False]])],
     value=np.arange(5, dtype=np.float32) * 10)
case("add_apart", "add", [arr([0, 2]), s(None), arr([1, 4])],
     value=np.arange(8, dtype=np.float32).reshape(2, 4), grads=True)
case("set_newaxis", "set", [NEW, 0, ELL], value=np.float32(-1))
case("set_scalar_array", "set", [arr(-2)], value=np.float32(3))
case("set_int_x", "set", [arr([1, -1]), s(2, 5)], x=XI, value=np.int32(99))
case("add_empty", "add", [s(2, 2)], value=np.float32(5))
case("max_dups", "max", [arr([1, 1, 1]), 0], value=np.array([[3], [-5], [9]], np.float32))

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "tests", "data", "index_jax.json")
with open(path, "w") as f:
    json.dump({"jax_version": jax.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {os.path.normpath(path)}")
