"""JAX's side of benches/scan_grad.rs: the same 1,000-step RNN scan,
h' = tanh(h·W + x_t), y_t = Σ h', loss = Σ_t y_t, its forward pass alone and
value_and_grad with respect to W and h0 (jax.lax.scan, default reverse mode).
Prints one line of key=value pairs: median ms of each over 6 timed calls after a
warm-up, their ratio, and XLA's temporary-buffer bytes of the gradient program
(compiled.memory_analysis()).

    python bench/scan_grad_jax.py [STEPS BATCH WIDTH]
"""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

steps, batch, width = (int(a) for a in (sys.argv[1:4] if len(sys.argv) > 3 else (1000, 32, 128)))
rng = np.random.default_rng(0)
w = jnp.asarray(rng.uniform(-0.1, 0.1, (width, width)).astype(np.float32))
h0 = jnp.asarray(rng.uniform(-0.1, 0.1, (batch, width)).astype(np.float32))
xs = jnp.asarray(rng.uniform(-0.1, 0.1, (steps, batch, width)).astype(np.float32))


def loss(w, h0, xs):
    def body(h, x):
        h2 = jnp.tanh(h @ w + x)
        return h2, h2.sum()

    _, ys = jax.lax.scan(body, h0, xs)
    return ys.sum()


fwd = jax.jit(loss)
grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
temp = grad.lower(w, h0, xs).compile().memory_analysis().temp_size_in_bytes
for f in (fwd, grad):
    jax.block_until_ready(f(w, h0, xs))
times = {"forward": [], "gradient": []}
for _ in range(6):
    for name, f in (("forward", fwd), ("gradient", grad)):
        t = time.perf_counter()
        jax.block_until_ready(f(w, h0, xs))
        times[name].append(time.perf_counter() - t)
med = {k: sorted(v)[len(v) // 2] * 1e3 for k, v in times.items()}
print(
    f"who=jax forward_ms={med['forward']:.2f} gradient_ms={med['gradient']:.2f} "
    f"ratio={med['gradient'] / med['forward']:.2f} temp_mib={temp / 2**20:.1f}"
)
