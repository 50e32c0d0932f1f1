#!/usr/bin/env python3
"""The programs of benches/compile_time.rs in JAX, for the compile-time
side-by-side (bench/compile_time_vs_jax.sh). Each program is lowered and compiled
once (jax.jit(f).lower(*args).compile()), with JAX's persistent compilation cache
off, and timed: `program=<name> build_s=<lower> compile_s=<compile> total_s=<sum>`.

  reset4, reset64: gymnax's CartPole reset for 4 / 64 environments, written as a
      port writes it (a key per environment, a uniform(4) each, stacked, columns
      sliced out);
  samplers: eight samplers from eight split keys;
  rnn_grad: a 100-step tanh RNN under lax.scan, value_and_grad of the mean square;
  anakin: see ../shared/bench-anchors/jax_anakin_catch.py (run separately);
  ppo_init, ppo_update: PureJaxRL's PPO on CartPole (bench/ppo_cartpole_jax.py,
      the default configuration): `init`, and a lax.scan of 122 `update`s (the
      update program of examples/ppo_cartpole.rs).

Usage: python bench/compile_time_jax.py [PROGRAM ...]
"""
import os
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax, random

jax.config.update("jax_enable_compilation_cache", False)


def reset(envs):
    def f(key):
        key, sub = random.split(key)
        keys = random.split(sub, envs)
        states = jnp.stack(
            [random.uniform(keys[i], (4,), jnp.float32, -0.05, 0.05) for i in range(envs)]
        )
        return states[:, 0], states[:, 1], states[:, 2], states[:, 3], key

    return f, (random.PRNGKey(0),)


def samplers():
    def f(key, logits):
        ks = random.split(key, 8)
        return (
            random.uniform(ks[0], (64, 64), jnp.float32, 0.0, 1.0),
            random.normal(ks[1], (64, 64), jnp.float32),
            random.bernoulli(ks[2], 0.3, (256,)).astype(jnp.float32),
            random.randint(ks[3], (128,), 0, 10).astype(jnp.float32),
            random.categorical(ks[4], logits, axis=1).astype(jnp.float32),
            random.truncated_normal(ks[5], -2.0, 2.0, (128,), jnp.float32),
            random.gumbel(ks[6], (64,), jnp.float32),
            random.permutation(ks[7], 100).astype(jnp.float32),
        )

    return f, (random.PRNGKey(0), jnp.zeros((32, 6), jnp.float32))


def rnn_grad():
    t, batch, d_in, d_h = 100, 8, 32, 64

    def loss(params, xs):
        wx, wh = params
        h0 = jnp.zeros((batch, d_h), jnp.float32)

        def step(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, h

        _, ys = lax.scan(step, h0, xs)
        return jnp.mean(ys**2)

    def f(wx, wh, xs):
        value, (gx, gh) = jax.value_and_grad(loss)((wx, wh), xs)
        return value, gx, gh

    return f, (
        jnp.zeros((d_in, d_h), jnp.float32),
        jnp.zeros((d_h, d_h), jnp.float32),
        jnp.zeros((t, batch, d_in), jnp.float32),
    )


def ppo(which):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ppo_cartpole_jax as p

    _, init, update, _ = p.make(p.CONFIG)
    key = random.PRNGKey(0)
    if which == "init":
        return init, (key,)

    def f(state):
        return lax.scan(lambda s, _: update(s), state, None, 122)

    return f, (jax.eval_shape(init, key),)


PROGRAMS = {
    "reset4": lambda: reset(4),
    "reset64": lambda: reset(64),
    "samplers": samplers,
    "rnn_grad": rnn_grad,
    "ppo_init": lambda: ppo("init"),
    "ppo_update": lambda: ppo("update"),
}

for name in sys.argv[1:] or list(PROGRAMS):
    f, args = PROGRAMS[name]()
    t0 = time.perf_counter()
    lowered = jax.jit(f).lower(*args)
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    print(f"program={name} build_s={t1 - t0:.3f} compile_s={t2 - t1:.3f} total_s={t2 - t0:.3f}")
