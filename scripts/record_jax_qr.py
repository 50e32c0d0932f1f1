#!/usr/bin/env python3
"""Record jnp.linalg.qr (jax 0.10.2 on CPU: LAPACK geqrf + orgqr) for tests/ops_qr.rs.

Inputs are drawn here with numpy (seeded) and stored with the outputs, so the test
feeds the very same matrices to `Op::qr`:

  cases   f32 and f64 matrices (square, tall, wide, 1x1, one column, a batch of
          two), each in mode "reduced" and "complete"; special matrices: upper
          triangular (every reflection trivial), a zero column, a negative zero on
          the diagonal, entries near 1e25 and 1e-25 in f32 (squares overflow /
          underflow: the norms must be scaled), a rank-deficient matrix (the
          reduced Q then depends on rounding; the test checks only the
          identities for it).
  grads   jax.grad of  sum(Wq * Q) + sum(Wr * R)  (mode "reduced", f64), JAX's
          QR JVP rule, for square, tall and wide matrices; Wq and Wr stored.

Run under jax.jit with 64-bit types enabled. Floats are stored as their IEEE bit
patterns (unsigned integers).

Setup (once):  . bench/jax_venv.sh   (gives $VENV with jax 0.10.2)
Run:           $VENV/bin/python scripts/record_jax_qr.py
Writes tests/data/jax/qr.json.
"""
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "qr.json")

BITS = {np.dtype("float32"): np.uint32, np.dtype("float64"): np.uint64}


def enc(a):
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.view(BITS[a.dtype]).ravel().tolist()}


def qr(a, mode):
    return jax.jit(lambda x: jnp.linalg.qr(x, mode=mode))(jnp.asarray(a))


def main():
    rng = np.random.default_rng(20240611)
    inputs = []
    for dtype in ["float32", "float64"]:
        for shape in [(4, 4), (5, 3), (3, 5), (1, 1), (6, 1), (1, 4), (2, 4, 3), (8, 8)]:
            inputs.append((f"normal_{dtype}_{'x'.join(map(str, shape))}", rng.standard_normal(shape).astype(dtype)))
    tri = np.triu(rng.standard_normal((4, 4))) + 2 * np.eye(4)
    inputs.append(("upper_triangular", tri.astype("float32")))
    zc = rng.standard_normal((5, 4))
    zc[:, 1] = 0
    inputs.append(("zero_column", zc.astype("float64")))
    nz = rng.standard_normal((3, 3))
    nz[0, 0] = -0.0
    inputs.append(("negative_zero_alpha", nz.astype("float64")))
    inputs.append(("huge_f32", (rng.standard_normal((4, 3)) * 1e25).astype("float32")))
    inputs.append(("tiny_f32", (rng.standard_normal((4, 3)) * 1e-25).astype("float32")))
    u = rng.standard_normal((5, 2))
    inputs.append(("rank_deficient", (u @ rng.standard_normal((2, 4))).astype("float64")))

    cases = []
    for name, a in inputs:
        for mode in ["reduced", "complete"]:
            q, r = qr(a, mode)
            cases.append({"name": name, "mode": mode, "a": enc(a), "q": enc(q), "r": enc(r)})

    grads = []
    for shape in [(3, 3), (5, 3), (3, 5)]:
        a = rng.standard_normal(shape)
        k = min(shape)
        wq = rng.standard_normal((shape[0], k))
        wr = rng.standard_normal((k, shape[1]))

        def loss(x):
            q, r = jnp.linalg.qr(x)
            return jnp.sum(wq * q) + jnp.sum(wr * r)

        g = jax.jit(jax.grad(loss))(jnp.asarray(a))
        grads.append({"a": enc(a), "wq": enc(wq), "wr": enc(wr), "grad": enc(g)})

    out = {"jax_version": jax.__version__, "backend": jax.default_backend(), "cases": cases, "grads": grads}
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {len(cases)} QR cases and {len(grads)} gradients to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
