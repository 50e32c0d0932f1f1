#!/usr/bin/env python3
"""Record small NumPy files for tests/npy.rs: one .npy per dtype XLA shares with
NumPy (bool, int8-int64, uint8-uint64, float16, float32, float64), a big-endian
float32, a Fortran-order array, a 0-d array, an empty array, and .npz archives
(np.savez with nested keys `layers/0/w`, np.savez_compressed with dotted keys,
np.savez of one positional array). Every array is a formula of its row-major
index i, written to tests/data/npy/manifest.json with its values as NumPy reads
them back (C order), so the test checks the Rust reader against NumPy's own.

Run (from the repository root, with the JAX venv's numpy):
    JAX_VENV=/path/to/jax-venv; . bench/jax_venv.sh; $VENV/bin/python scripts/record_npy.py
"""
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy")


def values(a):
    """C-order values as JSON numbers (bools as 0/1)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.dtype == np.bool_:
        return [int(x) for x in flat]
    if flat.dtype.kind == "f":
        return [float(x) for x in flat]
    return [int(x) for x in flat]


def pattern(dtype, shape):
    """Element i (row-major) of an array of `dtype`: signed and float types take
    negative values, unsigned ones their extremes, bools alternate."""
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        v = (i % 3) == 1
    elif dt.kind == "f":
        v = (i - 2) * 1.5
    elif dt.kind == "i":
        info = np.iinfo(dt)
        v = np.where(i == 0, info.min, np.where(i == n - 1, info.max, i - 2))
    else:
        info = np.iinfo(dt)
        v = np.where(i == n - 1, info.max, i * 7)
    return np.asarray(v).astype(dt).reshape(shape)


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"numpy": np.__version__, "npy": [], "npz": []}

    def npy(name, a):
        path = os.path.join(OUT, name)
        np.save(path, a)
        back = np.load(path)
        manifest["npy"].append({
            "file": name,
            "dtype": back.dtype.name,
            "shape": list(back.shape),
            "fortran_order": bool(np.isfortran(a) and a.ndim > 1),
            "values": values(back),
        })

    for dt in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "float16", "float32", "float64"]:
        npy(f"{dt}.npy", pattern(dt, (2, 3)))
    npy("float32_big_endian.npy", pattern("float32", (3, 2)).astype(">f4"))
    npy("int32_big_endian.npy", pattern("int32", (4,)).astype(">i4"))
    npy("fortran_float32.npy", np.asfortranarray(pattern("float32", (2, 3, 4))))
    npy("fortran_int64.npy", np.asfortranarray(pattern("int64", (3, 2))))
    npy("scalar_float64.npy", np.array(3.25, dtype=np.float64))
    npy("empty_float32.npy", np.zeros((0, 3), dtype=np.float32))
    npy("rank4_float16.npy", pattern("float16", (2, 1, 3, 2)))

    def npz(name, arrays, compressed=False, positional=False):
        path = os.path.join(OUT, name)
        if positional:
            np.savez(path, *arrays.values())
        elif compressed:
            np.savez_compressed(path, **arrays)
        else:
            np.savez(path, **arrays)
        with np.load(path) as f:
            manifest["npz"].append({
                "file": name,
                "arrays": [{"key": k, "dtype": f[k].dtype.name, "shape": list(f[k].shape),
                            "values": values(f[k])} for k in f.files],
            })

    layers = {
        "layers/0/w": pattern("float32", (3, 4)),
        "layers/0/b": pattern("float32", (4,)),
        "layers/1/w": pattern("float32", (4, 2)),
        "layers/1/b": pattern("float32", (2,)),
        "step": np.array(7, dtype=np.int64),
    }
    npz("nested.npz", layers)
    npz("dotted_compressed.npz", {k.replace("/", "."): v for k, v in layers.items()},
        compressed=True)
    npz("positional.npz", {"x": np.asfortranarray(pattern("float64", (2, 2)))}, positional=True)
    npz("mixed.npz", {"half": pattern("float16", (2,)), "flag": np.array([True, False]),
                      "count": pattern("uint8", (3,))})

    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
