"""JAX's side of examples/sharded_mlp.rs: the same MLP SGD step (64 -> 256 -> relu
-> 8, mean squared error, lr 0.05) on 8 host CPU devices, on one device, with the
batch split over a data=8 mesh, and with w1 split over `model` (data=2 x model=4),
through jax.jit with in_shardings/out_shardings. Prints the median step time of
each (the step's loss read back every step, as the Rust example does).

Run: bench/sharded_mlp_vs_jax.sh (or XLA_FLAGS=--xla_force_host_platform_device_count=8
python bench/sharded_mlp_jax.py [batch] [steps]).
"""
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

IN, HIDDEN, OUTS, LR = 64, 256, 8, 0.05


def step(params, x, y):
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jnp.mean(jnp.square(h @ p["w2"] + p["b2"] - y))

    loss, g = jax.value_and_grad(loss_fn)(params)
    return {k: params[k] - LR * g[k] for k in params}, loss


def run(name, batch, steps, mesh=None, pspecs=None):
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.uniform(-0.2, 0.2, (IN, HIDDEN)).astype(np.float32),
        "b1": rng.uniform(-0.2, 0.2, (HIDDEN,)).astype(np.float32),
        "w2": rng.uniform(-0.2, 0.2, (HIDDEN, OUTS)).astype(np.float32),
        "b2": rng.uniform(-0.2, 0.2, (OUTS,)).astype(np.float32),
    }
    x = rng.uniform(-1, 1, (batch, IN)).astype(np.float32)
    y = rng.uniform(-1, 1, (batch, OUTS)).astype(np.float32)
    if mesh is None:
        f = jax.jit(step)
        params = jax.device_put(params)
        x, y = jax.device_put(x), jax.device_put(y)
    else:
        s = lambda spec: NamedSharding(mesh, spec)
        ps = {k: s(v) for k, v in pspecs.items()}
        rows = s(P("data", None))
        f = jax.jit(step, in_shardings=(ps, rows, rows), out_shardings=(ps, s(P())))
        params = {k: jax.device_put(v, ps[k]) for k, v in params.items()}
        x, y = jax.device_put(x, rows), jax.device_put(y, rows)
    t = time.perf_counter()
    f.lower(params, x, y).compile()
    compile_s = time.perf_counter() - t
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        params, loss = f(params, x, y)
        float(loss)
        times.append(time.perf_counter() - t)
    times.sort()
    print(f"{name:<28} compile {compile_s:.3f} s, median step {times[len(times) // 2] * 1e3:.3f} ms")


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    devs = np.array(jax.devices())
    assert len(devs) == 8, devs
    print(f"jax {jax.__version__}, batch {batch}, {steps} steps, MLP {IN}-{HIDDEN}-{OUTS}")
    run("one device", batch, steps)
    rep = P()
    run("data=8 (batch split)", batch, steps, Mesh(devs, ("data",)),
        {"w1": rep, "b1": rep, "w2": rep, "b2": rep})
    run("data=2 x model=4 (w1 split)", batch, steps, Mesh(devs.reshape(2, 4), ("data", "model")),
        {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None), "b2": rep})


if __name__ == "__main__":
    main()
