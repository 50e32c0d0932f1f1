#!/usr/bin/env python3
"""Record a corpus of StableHLO modules as JAX 0.10.2 prints them, with inputs and
JAX's own outputs, for tests/stablehlo_import.rs (xlaclient_core::stablehlo::import).

Run (from the repository root):
    . bench/jax_venv.sh && $VENV/bin/python scripts/record_stablehlo_jax.py
Writes tests/data/stablehlo/<name>.mlir (jax.jit(f).lower(*args).as_text();
mlp_export.mlir: jax.export.export(jax.jit(mlp))(*args).mlir_module()) and
<name>.json: {"inputs": [{"dims", "dtype", "data"}], "outputs": [...]} where data
holds the elements in row-major order (floats as JSON numbers written from float32
with repr, integers as numbers, bools as 0/1; uint32 as numbers).
"""
import json
import os
import sys

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "stablehlo")


def mlp(w1, b1, w2, b2, obs):
    h = jax.nn.relu(obs @ w1 + b1)
    return jnp.tanh(h @ w2 + b2)


def transformer_block(x, wq, wk, wv, wo, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    h = (x - mu) * lax.rsqrt(var + 1e-5) * g + b
    q, k, v = h @ wq, h @ wk, h @ wv
    att = jax.nn.softmax(jnp.einsum("td,sd->ts", q, k) / np.sqrt(q.shape[-1]).astype(np.float32), axis=-1)
    return x + jnp.einsum("ts,sd->td", att, v) @ wo


def scan_rnn(h0, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()
    return lax.scan(step, h0, xs)


def while_loop(x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, x))


def cond_switch(i, x):
    a = lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
    s = lax.switch(i, [jnp.sin, jnp.cos, jnp.exp], x)
    return a, s


def gather_scatter(x, i, ii):
    # x[i] and x.at[i] with a scalar index lower to dynamic slices; with an index
    # array (ii, a repeated entry included) to gather and scatter-add.
    return x[i], x.at[i].add(10.0), x[:, 1], x[ii], x.at[ii].add(1.0)


def conv(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def rng(key_data):
    key = jax.random.wrap_key_data(key_data)
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, (3, 4)), jax.random.uniform(k2, (5,)), jax.random.bits(k2, (2,))


def sort_topk(x):
    v, i = lax.top_k(x, 3)
    return jnp.sort(x, axis=-1), v, i, jnp.cumsum(x, axis=-1)


def anakin_case():
    """One update of the Anakin learner of ../shared/bench-anchors/jax_anakin_catch.py
    (Catch rollouts under vmap, TD(lambda) loss, its gradient and Adam, in a fori_loop),
    small: hidden 16, batch 2, rollout 4, one iteration."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench-anchors"))
    import jax_anakin_catch as ak
    env = ak.Catch()
    rng, k_e, k_p = jax.random.split(jax.random.PRNGKey(3), 3)
    params = ak.init_params(k_p, env.rows * env.columns, 16, env.num_actions)
    opt = ak.adam_init(params)
    rngs = jax.random.split(rng, 2)
    states = jax.vmap(env.initial_state)(jax.random.split(k_e, 2))
    learner = ak.make_learner(env, 4, 1e-2, 0.9, 1.0, 1, 0.0, True)
    args = (params, opt, rngs, states)
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]

    def flat(*ls):
        return learner(*jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(args), ls))

    return flat, leaves


def main():
    os.makedirs(OUT, exist_ok=True)
    rng_ = np.random.default_rng(22)
    f32 = lambda *s: rng_.standard_normal(s).astype(np.float32)
    cases = {
        "mlp": (mlp, [f32(5, 8), f32(8), f32(8, 3), f32(3), f32(2, 5)], 1e-5),
        "transformer_block": (transformer_block, [f32(4, 8), f32(8, 8), f32(8, 8), f32(8, 8), f32(8, 8), f32(8), f32(8)], 1e-4),
        "scan_rnn": (scan_rnn, [f32(3), f32(4, 3), f32(3, 3)], 1e-5),
        "while_loop": (while_loop, [f32(3)], 1e-5),
        "cond_switch": (cond_switch, [np.int32(1), f32(4)], 1e-5),
        "gather_scatter": (gather_scatter, [f32(4, 3), np.int32(2), np.array([3, 0, 3], np.int32)], 0.0),
        "conv": (conv, [f32(1, 5, 5, 2), f32(3, 3, 2, 3)], 1e-4),
        "rng": (rng, [np.array([0, 42], np.uint32)], 0.0),
        "sort_topk": (sort_topk, [f32(2, 6)], 1e-5),
        "anakin": (*anakin_case(), 1e-4),
    }
    for name, (f, args, tol) in cases.items():
        text = jax.jit(f).lower(*args).as_text()
        with open(os.path.join(OUT, name + ".mlir"), "w") as fh:
            fh.write(text)
        outs = jax.tree_util.tree_leaves(jax.jit(f)(*args))

        def enc(a):
            a = np.asarray(a)
            return {"dims": list(a.shape), "dtype": str(a.dtype),
                    "data": [float(v) if a.dtype.kind == "f" else int(v) for v in a.reshape(-1)]}

        with open(os.path.join(OUT, name + ".json"), "w") as fh:
            json.dump({"tolerance": tol, "inputs": [enc(a) for a in args],
                       "outputs": [enc(o) for o in outs]}, fh)
        print(name, len(text))
        if name == "mlp":
            # The same program through jax.export (its module text carries source
            # locations, `loc(...)` and `#loc` aliases, which the import skips).
            exported = jax.export.export(jax.jit(f))(*args)
            with open(os.path.join(OUT, "mlp_export.mlir"), "w") as fh:
                fh.write(exported.mlir_module())
            with open(os.path.join(OUT, "mlp_export.json"), "w") as fh:
                json.dump({"tolerance": tol, "inputs": [enc(a) for a in args],
                           "outputs": [enc(o) for o in outs]}, fh)


if __name__ == "__main__":
    main()
