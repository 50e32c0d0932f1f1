#!/usr/bin/env python3
"""Export a small Catch policy from JAX for examples/jax_exported_policy.rs (issue 22
item 3: train in JAX, run in Rust).

The policy is an MLP on Catch's 10 x 5 board (50 -> 64 -> relu -> 3 Q-values),
initialised in JAX (jax.random, LeCun-normal weights, zero biases; not trained: the
example checks that the Rust side computes what JAX computes). Writes, from the
repository root:
  tests/data/stablehlo/policy.mlir         jax.jit(policy).lower(params, obs).as_text()
                                          for a batch of N = 8 observations
  tests/data/stablehlo/policy.safetensors  the parameters w1, b1, w2, b2 (f32), in the
                                          safetensors format (written here by hand:
                                          8-byte header length, JSON header, data)
  tests/data/stablehlo/policy.json         a few Catch boards and JAX's Q-values on them

Run: . bench/jax_venv.sh && $VENV/bin/python scripts/export_jax_policy.py
"""
import json
import os
import struct

import numpy as np
import jax
import jax.numpy as jnp

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "stablehlo")
ROWS, COLS, HID, ACT, N = 10, 5, 64, 3, 8


def policy(w1, b1, w2, b2, obs):
    return jax.nn.relu(obs @ w1 + b1) @ w2 + b2


def board(ball_y, ball_x, paddle_x):
    """Catch's observation as xlaclient::rl::catch renders it: row-major 10 x 5,
    1.0 at the ball's and the paddle's (bottom row) cells."""
    b = np.zeros((ROWS, COLS), np.float32)
    b[ball_y, ball_x] = 1.0
    b[ROWS - 1, paddle_x] = 1.0
    return b.reshape(-1)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    k1, k2 = jax.random.split(jax.random.key(22))
    init = jax.nn.initializers.lecun_normal()
    params = {
        "w1": np.asarray(init(k1, (ROWS * COLS, HID), jnp.float32)),
        "b1": np.zeros(HID, np.float32),
        "w2": np.asarray(init(k2, (HID, ACT), jnp.float32)),
        "b2": np.zeros(ACT, np.float32),
    }
    args = [params[k] for k in ("w1", "b1", "w2", "b2")]
    rng = np.random.default_rng(22)
    obs = np.stack([board(rng.integers(0, ROWS - 1), rng.integers(0, COLS), rng.integers(0, COLS))
                    for _ in range(N)])
    text = jax.jit(policy).lower(*args, obs).as_text()
    q = np.asarray(jax.jit(policy)(*args, obs))
    with open(os.path.join(OUT, "policy.mlir"), "w") as f:
        f.write(text)
    write_safetensors(os.path.join(OUT, "policy.safetensors"), params)
    with open(os.path.join(OUT, "policy.json"), "w") as f:
        json.dump({"obs": obs.reshape(-1).tolist(), "q": q.reshape(-1).tolist(), "n": N}, f)
    print("policy.mlir", len(text), "q[0]", q[0])


if __name__ == "__main__":
    main()
