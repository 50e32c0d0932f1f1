#!/usr/bin/env python3
"""Record Haiku's initializers and jax.nn's activations (jax 0.10.2, CPU) for tests/nn.rs.

Haiku is not needed: each initializer is Haiku's formula (haiku/_src/initializers.py,
basic.py) written out with plain jax.random calls on the key Haiku would pass:

  TruncatedNormal(stddev, mean)  s * jax.random.truncated_normal(key, -2., 2., shape) + m
  RandomNormal(stddev, mean)     m + s * jax.random.normal(key, shape)
  RandomUniform(lo, hi)          jax.random.uniform(key, shape, minval=lo, maxval=hi)
  VarianceScaling(scale, mode, distribution): scale /= max(1, fan); truncated_normal
                                 stddev = sqrt(scale) / f32(.87962566103423978);
                                 normal stddev = sqrt(scale); uniform limit = sqrt(3 scale)
  hk.Linear's default w_init     TruncatedNormal(stddev = 1 / sqrt(fan_in))

(with s and m converted to f32 as Haiku does), run eagerly, op by op, as
`hk.transform(f).init` runs outside `jax.jit`. Where XLA fuses a multiply with the
add after it (`m + s·x` with a nonzero mean; `jax.random.uniform`'s
`floats·(hi−lo) + lo` in some vector tails) a compiled program may round once
(a fused multiply-add) where this recording rounds twice: tests/nn.rs allows that
one rounding of the distribution's scale. Floats are stored as their u32 bit
patterns.

Setup (once):  python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install jax==0.10.2
Run:           /tmp/jaxenv/bin/python scripts/record_jax_nn.py
Writes tests/data/jax/nn.json.
"""
import json
import os

import numpy as np
import jax
import jax.numpy as jnp

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "jax", "nn.json")
F32 = jnp.float32


def bits(a):
    a = np.asarray(a, np.float32)
    return [int(v) for v in a.view(np.uint32).ravel()]


def compute_fans(shape):
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    rf = int(np.prod(shape[:-2]))
    return shape[-2] * rf, shape[-1] * rf


def truncated_normal(key, shape, stddev, mean=0.0):
    m = jax.lax.convert_element_type(mean, F32)
    s = jax.lax.convert_element_type(stddev, F32)
    return s * jax.random.truncated_normal(key, -2.0, 2.0, shape, F32) + m


def random_normal(key, shape, stddev, mean=0.0):
    m = jax.lax.convert_element_type(mean, F32)
    s = jax.lax.convert_element_type(stddev, F32)
    return m + s * jax.random.normal(key, shape, F32)


def random_uniform(key, shape, lo, hi):
    return jax.random.uniform(key, shape, F32, lo, hi)


def variance_scaling(key, shape, scale, mode, distribution):
    fan_in, fan_out = compute_fans(shape)
    if mode == "fan_in":
        scale /= max(1.0, fan_in)
    elif mode == "fan_out":
        scale /= max(1.0, fan_out)
    else:
        scale /= max(1.0, (fan_in + fan_out) / 2.0)
    if distribution == "truncated_normal":
        stddev = np.sqrt(scale) / np.asarray(.87962566103423978, dtype=np.float32)
        return truncated_normal(key, shape, stddev)
    if distribution == "normal":
        return random_normal(key, shape, np.sqrt(scale))
    limit = np.sqrt(3.0 * scale)
    return random_uniform(key, shape, -limit, limit)


INITS = {
    # name in src/nn/init.rs: Haiku's definition
    "truncated_normal_fan_in": lambda k, s: truncated_normal(k, s, 1.0 / np.sqrt(compute_fans(s)[0])),
    "uniform_fan_in": lambda k, s: variance_scaling(k, s, 1.0 / 3.0, "fan_in", "uniform"),
    "normal_fan_in": lambda k, s: variance_scaling(k, s, 1.0, "fan_in", "normal"),
    "glorot_uniform": lambda k, s: variance_scaling(k, s, 1.0, "fan_avg", "uniform"),
    "glorot_normal": lambda k, s: variance_scaling(k, s, 1.0, "fan_avg", "truncated_normal"),
    "he_uniform": lambda k, s: variance_scaling(k, s, 2.0, "fan_in", "uniform"),
    "he_normal": lambda k, s: variance_scaling(k, s, 2.0, "fan_in", "truncated_normal"),
    "lecun_uniform": lambda k, s: variance_scaling(k, s, 1.0, "fan_in", "uniform"),
    "lecun_normal": lambda k, s: variance_scaling(k, s, 1.0, "fan_in", "truncated_normal"),
    "fan_out_normal": lambda k, s: variance_scaling(k, s, 0.5, "fan_out", "normal"),
    "truncated_normal_2_1": lambda k, s: truncated_normal(k, s, 2.0, 1.0),
    "normal_3_m1": lambda k, s: random_normal(k, s, 3.0, -1.0),
}
SHAPES = [[5, 7], [3, 2, 4, 6], [9]]
SEEDS = [0, 42]

ACT_X = np.asarray([-6.0, -2.5, -1.0, -0.3, -1e-3, 0.0, 1e-3, 0.3, 1.0, 2.5, 6.0, 30.0, -30.0], np.float32)
ACTS = {
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "gelu": jax.nn.gelu,  # approximate=True, the default
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
    "leaky_relu": jax.nn.leaky_relu,  # negative_slope=0.01
    "softplus": jax.nn.softplus,
    "tanh": jnp.tanh,
}


def main():
    cases = []
    for seed in SEEDS:
        key = jax.random.PRNGKey(seed)
        for shape in SHAPES:
            for name, f in INITS.items():
                values = f(key, tuple(shape))
                cases.append({"init": name, "seed": seed, "dims": shape, "bits": bits(values)})
    acts = {name: bits(f(jnp.asarray(ACT_X))) for name, f in ACTS.items()}
    out = {
        "jax_version": jax.__version__,
        "inits": cases,
        "act_x": bits(ACT_X),
        "acts": acts,
    }
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {len(cases)} initializer cases and {len(acts)} activations to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
