#!/usr/bin/env python3
"""Records optax chains applied to a small parameter tree for tests/optim_chain.rs:
tests/data/jax/optax_chain.json. For each chain: the parameters (w: f32[3, 2],
b: f32[2]) after each of 6 updates with fixed gradients (seeded numpy draws, some
steps with a global norm above the clipping threshold, some below).

Run: JAX_VENV=/work/main/target/jax-venv; $JAX_VENV/bin/python scripts/record_optax_chain.py
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

STEPS = 6
rng = np.random.default_rng(0)
w0 = rng.normal(size=(3, 2)).astype(np.float32)
b0 = rng.normal(size=(2,)).astype(np.float32)
# Alternating large and small gradients, so clipping acts on some steps only.
grads = [
    (
        (rng.normal(size=(3, 2)) * (0.6 if i % 2 == 0 else 0.05)).astype(np.float32),
        (rng.normal(size=(2,)) * (0.6 if i % 2 == 0 else 0.05)).astype(np.float32),
    )
    for i in range(STEPS)
]


def anneal(count):
    # PureJaxRL's schedule with 2 minibatches x 1 epoch and 10 updates, negated.
    return -2.5e-2 * (1.0 - (count // 2) / 10)


CHAINS = {
    "clip_adam": optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-2, eps=1e-5)),
    "clip_adam_schedule": optax.chain(
        optax.clip_by_global_norm(0.5),
        optax.scale_by_adam(eps=1e-5),
        optax.scale_by_schedule(anneal),
    ),
    "wd_nesterov_scale": optax.chain(
        optax.add_decayed_weights(1e-2), optax.trace(0.9, nesterov=True), optax.scale(-0.1)
    ),
    "clip_adamw_lr": optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.scale_by_adam(),
        optax.add_decayed_weights(1e-3),
        optax.scale_by_learning_rate(3e-3),
    ),
}

out = {
    "jax": jax.__version__,
    "optax": optax.__version__,
    "w0": w0.reshape(-1).tolist(),
    "b0": b0.tolist(),
    "grads": [{"w": g[0].reshape(-1).tolist(), "b": g[1].tolist()} for g in grads],
    "chains": {},
}
for name, tx in CHAINS.items():
    params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}
    state = tx.init(params)
    step = jax.jit(lambda p, s, g: (lambda u, s2: (optax.apply_updates(p, u), s2))(*tx.update(g, s, p)))
    seq = []
    for gw, gb in grads:
        params, state = step(params, state, {"w": jnp.asarray(gw), "b": jnp.asarray(gb)})
        seq.append({"w": np.asarray(params["w"]).reshape(-1).tolist(),
                    "b": np.asarray(params["b"]).tolist()})
    out["chains"][name] = seq

path = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "jax", "optax_chain.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", os.path.normpath(path))
