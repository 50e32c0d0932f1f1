#!/usr/bin/env python3
"""Record what jax 0.10.2 (XLA on CPU) computes for complex sqrt, log and log1p,
for tests/complex_math.rs.

JAX lowers lax.sqrt / lax.log / lax.log1p on complex values to StableHLO, whose
complex math expander writes them as accurate real formulas before XLA compiles
them; the crate's HLO lowering writes the same formulas (ir/complex_math.rs), so
its outputs must equal these bit for bit (a NaN matching any NaN).

The inputs are every pair (re, im) of a list of special values: zeros of both
signs, +-1, -2, halves, tiny and huge magnitudes, subnormals, the largest finite
values, infinities and NaN.

Run:  . bench/jax_venv.sh && "$VENV/bin/python" scripts/record_jax_complex_math.py
Writes tests/data/jax/complex_math.json; floats as their IEEE bit patterns.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax",
                   "complex_math.json")


def specials(t):
    fi = np.finfo(t)
    return np.array([0.0, -0.0, 1.0, -1.0, -2.0, 0.5, -0.5, 2.0, -1.5, 0.1, 1e-30, -1e-30, 1e30,
                     -1e30, fi.max, -fi.max, fi.tiny, fi.tiny / 8, np.sqrt(fi.max), 0.999, -0.999,
                     1.0 + fi.eps, np.inf, -np.inf, np.nan], t)


def main():
    out = {"jax": jax.__version__}
    for ct, rt, bits in [(np.complex64, np.float32, np.uint32), (np.complex128, np.float64, np.uint64)]:
        s = specials(rt)
        re = np.repeat(s, len(s))
        im = np.tile(s, len(s))
        z = np.empty(len(re), ct)
        z.real, z.imag = re, im  # signed zeros and NaNs kept as given
        entry = {"re": re.view(bits).tolist(), "im": im.view(bits).tolist()}
        for name, f in [("sqrt", lax.sqrt), ("log", lax.log), ("log1p", lax.log1p)]:
            y = np.asarray(jax.jit(f)(jnp.asarray(z)))
            entry[name] = {"re": np.ascontiguousarray(y.real).view(bits).tolist(),
                           "im": np.ascontiguousarray(y.imag).view(bits).tolist()}
        out[np.dtype(ct).name] = entry
    with open(OUT, "w") as f:
        json.dump(out, f)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
