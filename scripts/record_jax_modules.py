#!/usr/bin/env python3
"""Record small JAX programs as serialized HloModuleProtos, with inputs and JAX's own
outputs, for tests/jax_modules.rs (modules from outside must pass the crate's checks,
compile and give JAX's answers).

Setup (once):  python3 -m venv .jaxenv && .jaxenv/bin/pip install jax==0.10.2
Run:           .jaxenv/bin/python scripts/record_jax_modules.py
Writes tests/data/jax/<name>.hlo.pb (jax.jit(f).lower(*args).compiler_ir('hlo')
.as_serialized_hlo_module_proto()) and <name>.json ({"inputs": [{"dims", "f32"}],
"outputs": [...]}, float32 values).
"""
import json
import os

import numpy as np
import jax
import jax.numpy as jnp

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax")


def mlp(w1, b1, w2, b2, obs):
    h = jnp.maximum(obs @ w1 + b1, 0.0)
    return h @ w2 + b2


def softmax(x):
    z = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(z)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def leaky(x):
    return jnp.where(x > 0, x, 0.1 * x), jnp.mean(jnp.tanh(x).T.reshape(-1))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    cases = {
        "mlp": (mlp, [f32(5, 8), f32(8), f32(8, 3), f32(3), f32(2, 5)]),
        "softmax": (softmax, [f32(3, 4)]),
        "leaky": (leaky, [f32(2, 3)]),
    }
    for name, (f, args) in cases.items():
        lowered = jax.jit(f).lower(*args)
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        with open(os.path.join(OUT, name + ".hlo.pb"), "wb") as fh:
            fh.write(proto)
        outs = f(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        rec = {
            "jax_version": jax.__version__,
            "inputs": [{"dims": list(a.shape), "f32": a.ravel().tolist()} for a in args],
            "outputs": [
                {"dims": list(np.shape(o)), "f32": np.asarray(o, np.float32).ravel().tolist()}
                for o in outs
            ],
        }
        with open(os.path.join(OUT, name + ".json"), "w") as fh:
            json.dump(rec, fh)
        print(name, len(proto), "bytes")


if __name__ == "__main__":
    main()
