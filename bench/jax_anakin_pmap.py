#!/usr/bin/env python3
"""The Anakin learner on Catch replicated over N devices with jax.pmap, as the
Podracer notebook runs it: pmap over the devices (axis 'i'), inside each device a
batch of learners (vmap, axis 'j', each with its own parameters and Adam state),
the gradients averaged over both axes (lax.pmean over 'j', then over 'i'); or,
with --shared-params, one parameter copy per device, the loss averaged over the
device's batch and the gradients pmean'd over 'i'. The workload per learner is
that of ../shared/bench-anchors/jax_anakin_catch.py (Catch 10x5, Flatten ->
Linear 256 -> relu -> Linear 3, greedy actions, 16-step rollout, TD(lambda=0.99),
Adam lr 1e-4, 100 updates per call in a fori_loop), written here again so that the
script stands alone.

On the CPU, N devices come from XLA_FLAGS=--xla_force_host_platform_device_count=N
(set before JAX starts; the script sets it from --devices when XLA_FLAGS does not
name a count).

  python bench/jax_anakin_pmap.py --devices 8 [--batch 128] [--iterations 100]
      [--calls 5] [--shared-params] [--json]

Prints (with --json, one line) the compile time, the median seconds per call and
frames/s over all devices (frames = iterations * rollout * batch * devices), the
greedy policy's exact expected reward of device 0's parameters and the largest
difference between the devices' parameter copies.
"""
import argparse
import json
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128, help="learners per device")
    ap.add_argument("--rollout-len", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--lambda_", type=float, default=0.99)
    ap.add_argument("--shared-params", action="store_true")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", action="store_true")
    return ap.parse_args()


args = parse()
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.devices}").strip()

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax, random  # noqa: E402

ROWS, COLUMNS, ACTIONS = 10, 5, 3
YS = jnp.repeat(jnp.arange(ROWS), COLUMNS).reshape(ROWS, COLUMNS)
XS = jnp.tile(jnp.arange(COLUMNS), ROWS).reshape(ROWS, COLUMNS)


def initial_state(rng):
    ball_x = random.randint(rng, (), 0, COLUMNS).astype(jnp.int32)
    return jnp.stack([jnp.int32(0), ball_x, jnp.int32(ROWS - 1), jnp.int32(COLUMNS // 2)])


def render(s):
    return (((YS == s[0]) & (XS == s[1])) | ((YS == s[2]) & (XS == s[3]))).astype(jnp.float32)


def env_step(rng, s, action):
    paddle_x = jnp.clip(s[3] + action - 1, 0, COLUMNS - 1).astype(jnp.int32)
    ball_y = s[0] + 1
    terminal = ball_y == s[2]
    reward = jnp.where(terminal, jnp.where(paddle_x == s[1], 1.0, -1.0), 0.0)
    discount = jnp.where(terminal, 0.0, 1.0)
    moved = jnp.stack([ball_y, s[1], s[2], paddle_x])
    return jnp.where(terminal, initial_state(rng), moved), reward, discount


def init_params(rng, hidden=256):
    k1, k2 = random.split(rng)
    tn = lambda k, shape: random.truncated_normal(k, -2.0, 2.0, shape) / np.sqrt(shape[0])
    return {"w1": tn(k1, (ROWS * COLUMNS, hidden)), "b1": jnp.zeros(hidden),
            "w2": tn(k2, (hidden, ACTIONS)), "b2": jnp.zeros(ACTIONS)}


def forward(params, obs):
    x = obs.reshape(obs.shape[:-2] + (-1,))
    return jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def adam_init(params):
    z = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"count": jnp.zeros((), jnp.int32), "mu": z, "nu": z}


def adam_update(grads, state, params, lr, b1=0.9, b2=0.999, eps=1e-8):
    count = state["count"] + 1
    mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
    nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
    c1 = 1 - b1 ** count.astype(jnp.float32)
    c2 = 1 - b2 ** count.astype(jnp.float32)
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, mu, nu)
    return new, {"count": count, "mu": mu, "nu": nu}


def lambda_returns(r_t, d_t, v_t, lam):
    def body(acc, xs):
        r, d, v = xs
        acc = r + d * ((1 - lam) * v + lam * acc)
        return acc, acc
    _, g = lax.scan(body, v_t[-1], (r_t, d_t, v_t), reverse=True)
    return g


def make_learner(T, lr, lam, iterations, shared):
    def loss_fn(params, rng, s0):  # one trajectory
        def step_fn(s, k):
            q = forward(params, render(s))
            a = jnp.argmax(q).astype(jnp.int32)
            s, r, d = env_step(k, s, a)
            return s, (q, a, r, d)
        s, (q, a, r, d) = lax.scan(step_fn, s0, random.split(rng, T))
        qa = jnp.take_along_axis(q[:-1], a[:-1, None], axis=-1)[:, 0]
        target = lambda_returns(r[:-1], d[:-1], jnp.max(q[1:], axis=-1), lam)
        return jnp.mean((lax.stop_gradient(target) - qa) ** 2), s

    if not shared:
        def update(params, opt, rng, s):  # one learner; vmapped over 'j'
            rng, k = random.split(rng)
            (loss, s), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, k, s)
            grads = lax.pmean(lax.pmean(grads, axis_name="j"), axis_name="i")
            loss = lax.pmean(lax.pmean(loss, axis_name="j"), axis_name="i")
            params, opt = adam_update(grads, opt, params, lr)
            return params, opt, rng, s, loss

        batched = jax.vmap(update, axis_name="j")

        def learner(params, opt, rngs, states, loss):
            def body(_, c):
                return batched(*c[:4])
            return lax.fori_loop(0, iterations, body, (params, opt, rngs, states, loss))
    else:
        def batch_loss(params, rngs, states):
            ls, states = jax.vmap(loss_fn, in_axes=(None, 0, 0))(params, rngs, states)
            return jnp.mean(ls), states

        def body(_, c):
            params, opt, rngs, states, _ = c
            rngs, ks = jnp.split(jax.vmap(random.split)(rngs), 2, axis=1)
            (loss, states), grads = jax.value_and_grad(batch_loss, has_aux=True)(
                params, ks[:, 0], states)
            grads = lax.pmean(grads, axis_name="i")
            params, opt = adam_update(grads, opt, params, lr)
            return params, opt, rngs[:, 0], states, lax.pmean(loss, axis_name="i")

        def learner(params, opt, rngs, states, loss):
            return lax.fori_loop(0, iterations, body, (params, opt, rngs, states, loss))
    return jax.pmap(learner, axis_name="i", donate_argnums=(0, 1, 2, 3, 4))


def greedy_reward(params):
    def episode(ball_x):
        s0 = jnp.stack([jnp.int32(0), ball_x, jnp.int32(ROWS - 1), jnp.int32(COLUMNS // 2)])

        def body(s, _):
            a = jnp.argmax(forward(params, render(s))).astype(jnp.int32)
            s, r, _ = env_step(random.PRNGKey(0), s, a)
            return s, r
        _, rs = lax.scan(body, s0, None, length=ROWS - 1)
        return jnp.sum(rs)
    return float(jnp.mean(jax.vmap(episode)(jnp.arange(COLUMNS, dtype=jnp.int32))))


def main():
    N, B, T, I = args.devices, args.batch, args.rollout_len, args.iterations
    devices = jax.devices()[:N]
    if len(devices) < N:
        sys.exit(f"{N} devices asked, JAX has {len(jax.devices())}")
    rng, k_p = random.split(random.PRNGKey(args.seed))
    params = init_params(k_p)
    opt = adam_init(params)
    keys = random.split(rng, 2 * N * B).reshape(2, N, B, 2)
    states = jax.vmap(jax.vmap(initial_state))(keys[0])
    rngs = keys[1]
    lead = (N,) if args.shared_params else (N, B)
    rep = lambda x: jnp.broadcast_to(x, lead + x.shape)
    params, opt = jax.tree_util.tree_map(rep, params), jax.tree_util.tree_map(rep, opt)
    loss = jnp.zeros(lead, jnp.float32)
    # Leading axis N everywhere: pmap splits it over the devices.
    carry = (params, opt, rngs, states, loss)
    learner = make_learner(T, args.lr, args.lambda_, I, args.shared_params)
    t0 = time.perf_counter()
    compiled = learner.lower(*carry).compile()
    compile_s = time.perf_counter() - t0
    call_s = []
    for _ in range(args.calls):
        ts = time.perf_counter()
        carry = compiled(*carry)
        jax.block_until_ready(carry)
        call_s.append(time.perf_counter() - ts)
    leaves = jax.tree_util.tree_leaves(carry[0])
    spread = max(float(jnp.max(jnp.abs(x - x.reshape((-1,) + x.shape[len(lead):])[0])))
                 for x in leaves)
    p0 = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[len(lead):])[0], carry[0])
    frames = I * T * B * N
    med = float(np.median(call_s))
    res = {"jax": jax.__version__, "devices": N, "batch_per_device": B, "rollout_len": T,
           "iterations_per_call": I, "calls": args.calls, "shared_params": args.shared_params,
           "compile_s": compile_s, "call_s_median": med, "fps_median": frames / med,
           "greedy_reward": greedy_reward(p0), "param_copy_spread": spread,
           "loss": float(np.asarray(carry[4]).reshape(-1)[0])}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"jax {jax.__version__} devices={N} batch={B}/device compile {compile_s:.2f}s; "
              f"median {med:.3f}s per call -> {frames / med:.3e} frames/s; "
              f"greedy reward {res['greedy_reward']:+.2f}; param copy spread {spread:.1e}")


if __name__ == "__main__":
    main()
