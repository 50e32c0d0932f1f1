#!/usr/bin/env python3
"""Record jax.nn.initializers.orthogonal and flax.linen's parameter keys (jax 0.10.2,
flax 0.12.8, CPU, 64-bit types off as in PureJaxRL) for tests/nn.rs.

  orthogonal  jax.nn.initializers.orthogonal(scale, column_axis)(PRNGKey(seed), dims)
              (flax's nn.initializers.orthogonal is the same function) for square,
              tall, wide and convolution-kernel dims, column axis -1 and 0.
  keys        flax.core.scope._fold_in_static(PRNGKey(seed), suffix): the key
              flax derives for the parameter whose scope path and make_rng count
              are `suffix` (the SHA-1 of the path's names and the count, its first
              4 bytes big-endian, folded in with jax.random.fold_in); the hash too.
  network     PureJaxRL's PPO ActorCritic (purejaxrl/ppo.py: six nn.Dense layers
              with orthogonal kernels, sqrt(2), 0.01 and 1.0, zero biases),
              ActorCritic(action_dim=2).init(PRNGKey(0), zeros(4)): every
              kernel and bias flax makes; and nn.Dense(5) with flax's default
              kernel_init (lecun_normal) on PRNGKey(7), input 3.

Floats are stored as their u32 bit patterns.

Setup (once):  . bench/jax_venv.sh && $VENV/bin/pip install flax==0.12.8
Run:           $VENV/bin/python scripts/record_flax_init.py
Writes tests/data/jax/flax_init.json.
"""
import hashlib
import json
import os

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.core.scope import _fold_in_static

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "flax_init.json")


def bits(a):
    a = np.asarray(a)
    assert a.dtype in (np.float32, np.uint32), a.dtype
    return [int(v) for v in a.view(np.uint32).ravel()]


class ActorCritic(nn.Module):
    """purejaxrl/ppo.py's network, without distrax (logits instead of a Categorical)."""

    action_dim: int

    @nn.compact
    def __call__(self, x):
        orth, zero = nn.initializers.orthogonal, nn.initializers.constant(0.0)
        a = nn.Dense(64, kernel_init=orth(np.sqrt(2)), bias_init=zero)(x)
        a = nn.tanh(a)
        a = nn.Dense(64, kernel_init=orth(np.sqrt(2)), bias_init=zero)(a)
        a = nn.tanh(a)
        logits = nn.Dense(self.action_dim, kernel_init=orth(0.01), bias_init=zero)(a)
        c = nn.Dense(64, kernel_init=orth(np.sqrt(2)), bias_init=zero)(x)
        c = nn.tanh(c)
        c = nn.Dense(64, kernel_init=orth(np.sqrt(2)), bias_init=zero)(c)
        c = nn.tanh(c)
        c = nn.Dense(1, kernel_init=orth(1.0), bias_init=zero)(c)
        return logits, jnp.squeeze(c, axis=-1)


def sha1_u32(suffix):
    """flax's hash of static data, written out (flax_fix_rng_separator off)."""
    m = hashlib.sha1()
    for x in suffix:
        m.update(x.encode("utf-8") if isinstance(x, str) else x.to_bytes((x.bit_length() + 7) // 8, "big"))
    return int.from_bytes(m.digest()[:4], "big")


def main():
    assert not flax.config.flax_fix_rng_separator
    orth = []
    for seed in [0, 42]:
        key = jax.random.PRNGKey(seed)
        for dims, scale, axis in [
            ([5, 7], np.sqrt(2), -1),
            ([7, 5], np.sqrt(2), -1),
            ([6, 6], 1.0, -1),
            ([3, 2, 4, 6], 0.01, -1),
            ([6, 4], 1.0, 0),
            ([2, 3, 5], 2.0, 1),
        ]:
            w = jax.nn.initializers.orthogonal(scale, column_axis=axis)(key, tuple(dims), jnp.float32)
            orth.append({"seed": seed, "dims": dims, "scale": float(scale), "column_axis": axis, "bits": bits(w)})

    keys = []
    for seed in [0, 42]:
        root = jax.random.PRNGKey(seed)
        for suffix in [("Dense_0", 1), ("Dense_0", 2), ("Dense_5", 1), ("MLP_0", "Dense_1", 1), (1,), (300,), ("params_äö", 0)]:
            k = _fold_in_static(root, suffix)
            h = sha1_u32(suffix)
            assert bits(jax.random.fold_in(root, jnp.uint32(h))) == bits(k)
            keys.append({"seed": seed, "suffix": list(suffix), "hash": h, "key": bits(k)})

    net = []
    for seed in [0]:
        params = ActorCritic(action_dim=2).init(jax.random.PRNGKey(seed), jnp.zeros(4))["params"]
        for layer in sorted(params):
            for name in ["kernel", "bias"]:
                v = params[layer][name]
                net.append({"seed": seed, "layer": layer, "param": name, "dims": list(v.shape), "bits": bits(v)})

    # flax's default kernel_init (lecun_normal: variance_scaling(1, fan_in, truncated_normal)).
    dense = nn.Dense(5).init(jax.random.PRNGKey(7), jnp.zeros(3))["params"]
    net.append({"seed": 7, "layer": "default_dense", "param": "kernel", "dims": [3, 5], "bits": bits(dense["kernel"])})

    out = {
        "jax_version": jax.__version__,
        "flax_version": flax.__version__,
        "orthogonal": orth,
        "keys": keys,
        "network": net,
    }
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {len(orth)} orthogonal cases, {len(keys)} keys and {len(net)} network parameters to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
