"""JAX's side of benches/scan_grad.rs: the same 1,000-step RNN scan,
h' = tanh(h·W + x_t), y_t = Σ h', loss = Σ_t y_t, its forward pass alone and
value_and_grad with respect to W and h0 (jax.lax.scan, default reverse mode),
and the gradient with the body under jax.checkpoint with the policies
nothing_saveable, dots_saveable and save_only_these_names("pre").
Prints one line of key=value pairs: median ms of each over 6 timed calls after a
warm-up, the default gradient's ratio to the forward pass, and XLA's
temporary-buffer bytes of each gradient program (compiled.memory_analysis()).

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


from jax.ad_checkpoint import checkpoint_name

policies = {
    "nothing": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_saveable,
    "names": jax.checkpoint_policies.save_only_these_names("pre"),
}


def make_loss(policy=None):
    def loss(w, h0, xs):
        def body(h, x):
            h2 = jnp.tanh(checkpoint_name(h @ w + x, "pre"))
            return h2, h2.sum()

        if policy is not None:
            body = jax.checkpoint(body, policy=policy)
        _, ys = jax.lax.scan(body, h0, xs)
        return ys.sum()

    return loss


fns = {"forward": jax.jit(make_loss())}
fns["gradient"] = jax.jit(jax.value_and_grad(make_loss(), argnums=(0, 1)))
for name, p in policies.items():
    fns[name] = jax.jit(jax.value_and_grad(make_loss(p), argnums=(0, 1)))
temp = {
    k: f.lower(w, h0, xs).compile().memory_analysis().temp_size_in_bytes
    for k, f in fns.items()
    if k != "forward"
}
for f in fns.values():
    jax.block_until_ready(f(w, h0, xs))
times = {k: [] for k in fns}
for _ in range(6):
    for name, f in fns.items():
        t = time.perf_counter()
        jax.block_until_ready(f(w, h0, xs))
        times[name].append(time.perf_counter() - t)
med = {k: sorted(v)[len(v) // 2] * 1e3 for k, v in times.items()}
extra = " ".join(
    f"{k}_ms={med[k]:.2f} {k}_ratio={med[k] / med['forward']:.2f} {k}_temp_mib={temp[k] / 2**20:.1f}"
    for k in policies
)
print(
    f"who=jax forward_ms={med['forward']:.2f} gradient_ms={med['gradient']:.2f} "
    f"ratio={med['gradient'] / med['forward']:.2f} temp_mib={temp['gradient'] / 2**20:.1f} {extra}"
)
