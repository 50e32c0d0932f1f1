#!/usr/bin/env python3
"""PPO on CartPole-v1, PureJaxRL's algorithm (`ppo.py`) with gymnax's CartPole
dynamics, written here with plain JAX and optax (no flax, gymnax or distrax: the
MLPs, the environment and the categorical distribution are written out). The
reference for examples/ppo_cartpole.rs and tests/ppo.rs.

The environment: Euler steps of the cart-pole (gravity 9.8, cart mass 1.0, pole
mass 0.1, half-length 0.5, force 10, tau 0.02), terminal when |x| > 2.4, |theta| >
12 degrees or after 500 steps; reward 1 - (previous state terminal); reset draws
the 4 state values uniformly from [-0.05, 0.05); each environment's step splits
its key and resets automatically from the second half when the step is terminal
(gymnax's `Environment.step`). Episode returns are tracked as gymnax's LogWrapper
does (`returned_episode_returns`).

The agent: separate actor and critic MLPs 4-64-64 (tanh), orthogonal(sqrt 2)
hidden kernels, orthogonal(0.01) actor head, orthogonal(1.0) critic head, zero
biases; optax.chain(clip_by_global_norm(0.5), adam(lr, eps=1e-5)) with lr annealed
as PureJaxRL: LR * (1 - (count // (minibatches * epochs)) / num_updates).

Programs: `init(rng) -> state` and `update(state) -> (state, metrics)` (one PPO
update: rollout of NUM_STEPS x NUM_ENVS by lax.scan, GAE by reverse scan, epochs x
minibatches over a permutation); `train(rng)` = init then a scan of NUM_UPDATES
updates, jitted as one program. The return of an update is the mean over its
rollout (steps x envs) of `returned_episode_returns`, as PureJaxRL plots it.

Usage:
  ppo_cartpole_jax.py [--seed N] [--json]      train, print per-update returns,
                                              steps/s, lower+compile seconds, CPU
                                              seconds and when it solved (the mean
                                              return of 10 updates first >= 475)
  ppo_cartpole_jax.py --record DIR             write DIR/ppo_*.json for tests/ppo.rs
"""
import argparse
import json
import math
import os
import sys
import time

import jax
import jax.numpy as jnp
import optax
from jax import lax, random

jax.config.update("jax_enable_compilation_cache", False)

CONFIG = dict(
    LR=2.5e-4,
    NUM_ENVS=4,
    NUM_STEPS=128,
    TOTAL_TIMESTEPS=500_000,
    UPDATE_EPOCHS=4,
    NUM_MINIBATCHES=4,
    GAMMA=0.99,
    GAE_LAMBDA=0.95,
    CLIP_EPS=0.2,
    ENT_COEF=0.01,
    VF_COEF=0.5,
    MAX_GRAD_NORM=0.5,
    ANNEAL_LR=True,
    HIDDEN=64,
)

# gymnax CartPole-v1 parameters.
GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSCART + MASSPOLE
LENGTH = 0.5
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
MAX_STEPS = 500

# Solved: the mean return of the last SOLVE_WINDOW updates reaches SOLVED.
SOLVED = 475.0
SOLVE_WINDOW = 10


# ---------------------------------------------------------------- environment
def env_reset(key):
    s = random.uniform(key, (4,), jnp.float32, -0.05, 0.05)
    return dict(x=s[0], x_dot=s[1], theta=s[2], theta_dot=s[3], time=jnp.int32(0))


def env_obs(s):
    return jnp.stack([s["x"], s["x_dot"], s["theta"], s["theta_dot"]])


def env_terminal(s):
    done1 = (s["x"] < -X_THRESHOLD) | (s["x"] > X_THRESHOLD)
    done2 = (s["theta"] < -THETA_THRESHOLD) | (s["theta"] > THETA_THRESHOLD)
    return done1 | done2 | (s["time"] >= MAX_STEPS)


def env_step_plain(s, action):
    prev_terminal = env_terminal(s)
    force = FORCE_MAG * action - FORCE_MAG * (1 - action)
    costheta = jnp.cos(s["theta"])
    sintheta = jnp.sin(s["theta"])
    temp = (force + POLEMASS_LENGTH * s["theta_dot"] ** 2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    n = dict(
        x=s["x"] + TAU * s["x_dot"],
        x_dot=s["x_dot"] + TAU * xacc,
        theta=s["theta"] + TAU * s["theta_dot"],
        theta_dot=s["theta_dot"] + TAU * thetaacc,
        time=s["time"] + 1,
    )
    reward = 1.0 - prev_terminal.astype(jnp.float32)
    return n, reward, env_terminal(n)


def env_step(key, s, action):
    """gymnax's Environment.step: step, and reset from the key's second half when done."""
    key, key_reset = random.split(key)
    n, reward, done = env_step_plain(s, action)
    r = env_reset(key_reset)
    n = jax.tree_util.tree_map(lambda a, b: lax.select(done, a, b), r, n)
    return env_obs(n), n, reward, done


# ---------------------------------------------------------------- network
def orthogonal(scale):
    return jax.nn.initializers.orthogonal(scale)


def init_params(key, hidden):
    ks = random.split(key, 6)
    dims = [(4, hidden), (hidden, hidden), (hidden, 2), (4, hidden), (hidden, hidden), (hidden, 1)]
    scales = [math.sqrt(2), math.sqrt(2), 0.01, math.sqrt(2), math.sqrt(2), 1.0]
    layers = [
        dict(w=orthogonal(s)(k, d, jnp.float32), b=jnp.zeros((d[1],), jnp.float32))
        for k, d, s in zip(ks, dims, scales)
    ]
    return dict(actor=layers[:3], critic=layers[3:])


def mlp(layers, x):
    for i, l in enumerate(layers):
        x = x @ l["w"] + l["b"]
        if i + 1 < len(layers):
            x = jnp.tanh(x)
    return x


def apply(params, obs):
    logits = mlp(params["actor"], obs)
    value = mlp(params["critic"], obs)[..., 0]
    return logits, value


# ---------------------------------------------------------------- PPO
def make(config):
    c = dict(config)
    c["NUM_UPDATES"] = c["TOTAL_TIMESTEPS"] // c["NUM_STEPS"] // c["NUM_ENVS"]
    c["MINIBATCH_SIZE"] = c["NUM_ENVS"] * c["NUM_STEPS"] // c["NUM_MINIBATCHES"]
    n_envs = c["NUM_ENVS"]

    def schedule(count):
        frac = 1.0 - (count // (c["NUM_MINIBATCHES"] * c["UPDATE_EPOCHS"])) / c["NUM_UPDATES"]
        return c["LR"] * frac

    lr = schedule if c["ANNEAL_LR"] else c["LR"]
    tx = optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]), optax.adam(lr, eps=1e-5))

    def init(rng):
        rng, k = random.split(rng)
        params = init_params(k, c["HIDDEN"])
        rng, k = random.split(rng)
        env = jax.vmap(env_reset)(random.split(k, n_envs))
        rng, k = random.split(rng)
        zeros = jnp.zeros((n_envs,), jnp.float32)
        return dict(
            params=params,
            opt=tx.init(params),
            env=env,
            obs=jax.vmap(env_obs)(env),
            episode_returns=zeros,
            returned_episode_returns=zeros,
            rng=k,
        )

    def update(state):
        params = state["params"]

        def env_step_all(carry, _):
            env, obs, ep_ret, ret_ret, rng = carry
            rng, k = random.split(rng)
            logits, value = apply(params, obs)
            action = random.categorical(k, logits)
            log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
            rng, k = random.split(rng)
            obs2, env, reward, done = jax.vmap(env_step)(random.split(k, n_envs), env, action)
            # gymnax's LogWrapper.
            new_ret = ep_ret + reward
            donef = done.astype(jnp.float32)
            ep_ret = new_ret * (1 - donef)
            ret_ret = ret_ret * (1 - donef) + new_ret * donef
            tr = dict(done=done, action=action, value=value, reward=reward, log_prob=log_prob,
                      obs=obs, ret=ret_ret)
            return (env, obs2, ep_ret, ret_ret, rng), tr

        carry = (state["env"], state["obs"], state["episode_returns"],
                 state["returned_episode_returns"], state["rng"])
        (env, last_obs, ep_ret, ret_ret, rng), traj = lax.scan(
            env_step_all, carry, None, c["NUM_STEPS"])
        _, last_val = apply(params, last_obs)

        def gae_step(carry, tr):
            gae, next_value = carry
            notdone = 1.0 - tr["done"].astype(jnp.float32)
            delta = tr["reward"] + c["GAMMA"] * next_value * notdone - tr["value"]
            gae = delta + c["GAMMA"] * c["GAE_LAMBDA"] * notdone * gae
            return (gae, tr["value"]), gae

        _, advantages = lax.scan(gae_step, (jnp.zeros_like(last_val), last_val),
                                 dict(done=traj["done"], value=traj["value"], reward=traj["reward"]),
                                 reverse=True, unroll=16)
        targets = advantages + traj["value"]

        def loss_fn(params, mb):
            logits, value = apply(params, mb["obs"])
            logp_all = jax.nn.log_softmax(logits)
            log_prob = jnp.take_along_axis(logp_all, mb["action"][:, None], 1)[:, 0]
            v_clipped = mb["value"] + (value - mb["value"]).clip(-c["CLIP_EPS"], c["CLIP_EPS"])
            v_loss = 0.5 * jnp.maximum(jnp.square(value - mb["targets"]),
                                       jnp.square(v_clipped - mb["targets"])).mean()
            ratio = jnp.exp(log_prob - mb["log_prob"])
            gae = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
            a1 = ratio * gae
            a2 = jnp.clip(ratio, 1.0 - c["CLIP_EPS"], 1.0 + c["CLIP_EPS"]) * gae
            a_loss = -jnp.minimum(a1, a2).mean()
            entropy = (-(jnp.exp(logp_all) * logp_all).sum(-1)).mean()
            total = a_loss + c["VF_COEF"] * v_loss - c["ENT_COEF"] * entropy
            return total, (v_loss, a_loss, entropy)

        def minibatch(ts, mb):
            params, opt = ts
            (total, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, mb)
            upd, opt = tx.update(grads, opt, params)
            return (optax.apply_updates(params, upd), opt), total

        batch = dict(obs=traj["obs"], action=traj["action"], value=traj["value"],
                     log_prob=traj["log_prob"], adv=advantages, targets=targets)
        size = c["NUM_STEPS"] * n_envs
        batch = jax.tree_util.tree_map(lambda x: x.reshape((size,) + x.shape[2:]), batch)

        def epoch(carry, _):
            ts, rng = carry
            rng, k = random.split(rng)
            perm = random.permutation(k, size)
            mbs = jax.tree_util.tree_map(
                lambda x: jnp.take(x, perm, axis=0).reshape(
                    (c["NUM_MINIBATCHES"], -1) + x.shape[1:]), batch)
            ts, losses = lax.scan(minibatch, ts, mbs)
            return (ts, rng), losses

        ((params, opt), rng), losses = lax.scan(
            epoch, ((params, state["opt"]), rng), None, c["UPDATE_EPOCHS"])
        new = dict(params=params, opt=opt, env=env, obs=last_obs, episode_returns=ep_ret,
                   returned_episode_returns=ret_ret, rng=rng)
        metrics = dict(mean_return=traj["ret"].mean(), loss=losses.mean())
        return new, metrics

    def train(rng):
        state = init(rng)
        state, metrics = lax.scan(lambda s, _: update(s), state, None, c["NUM_UPDATES"])
        return state, metrics

    return c, init, update, train


def flat_params(params):
    out = {}
    for net in ("actor", "critic"):
        for i, l in enumerate(params[net]):
            out[f"{net}_{i}_w"] = l["w"].reshape(-1).tolist()
            out[f"{net}_{i}_b"] = l["b"].reshape(-1).tolist()
    return out


def record(out_dir):
    """Small configurations for tests/ppo.rs (4 environments, 16 steps, 2 epochs
    of 2 minibatches, 16 hidden units): the initial state from seed 0 and the
    state after each of 3 updates, with a constant and an annealed LR."""
    os.makedirs(out_dir, exist_ok=True)
    cases = {
        "ppo_small_const": dict(CONFIG, NUM_ENVS=4, NUM_STEPS=16, TOTAL_TIMESTEPS=4 * 16 * 10,
                                UPDATE_EPOCHS=2, NUM_MINIBATCHES=2, ANNEAL_LR=False, HIDDEN=16),
        "ppo_small_anneal": dict(CONFIG, NUM_ENVS=4, NUM_STEPS=16, TOTAL_TIMESTEPS=4 * 16 * 10,
                                 UPDATE_EPOCHS=2, NUM_MINIBATCHES=2, ANNEAL_LR=True, HIDDEN=16),
    }
    for name, cfg in cases.items():
        c, init, update, _ = make(cfg)
        state = jax.jit(init)(random.PRNGKey(0))
        env0 = {k: v.tolist() for k, v in state["env"].items()}
        rec = dict(
            config={k: v for k, v in c.items()},
            seed=0,
            init_params=flat_params(state["params"]),
            init_env=env0,
            init_rng=state["rng"].tolist(),
            updates=[],
        )
        upd = jax.jit(update)
        for _ in range(3):
            state, m = upd(state)
            rec["updates"].append(dict(
                params=flat_params(state["params"]),
                env={k: v.tolist() for k, v in state["env"].items()},
                rng=state["rng"].tolist(),
                mean_return=float(m["mean_return"]),
                loss=float(m["loss"]),
                episode_returns=state["episode_returns"].tolist(),
            ))
        path = os.path.join(out_dir, f"{name}.json")
        with open(path, "w") as f:
            json.dump(rec, f)
        print(f"wrote {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON line at the end only")
    ap.add_argument("--record", metavar="DIR")
    ap.add_argument("--total-timesteps", type=int, default=CONFIG["TOTAL_TIMESTEPS"])
    args = ap.parse_args()
    if args.record:
        record(args.record)
        return
    c, _, _, train = make(dict(CONFIG, TOTAL_TIMESTEPS=args.total_timesteps))
    rng = random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    lowered = jax.jit(train).lower(rng)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    cpu0 = time.process_time()
    state, metrics = compiled(rng)
    returns = jax.block_until_ready(metrics["mean_return"])
    t3 = time.perf_counter()
    cpu_s = time.process_time() - cpu0
    steps = c["NUM_UPDATES"] * c["NUM_STEPS"] * c["NUM_ENVS"]
    returns = [float(r) for r in returns]
    tail = returns[-max(1, len(returns) // 10):]
    # Solved: the first update at which the mean return of the last SOLVE_WINDOW
    # updates reaches SOLVED; its time is the training's seconds shared evenly among
    # the updates (one program: every update costs the same).
    solve_update, solve_s = -1, -1.0
    for u in range(SOLVE_WINDOW, len(returns) + 1):
        if sum(returns[u - SOLVE_WINDOW:u]) / SOLVE_WINDOW >= SOLVED:
            solve_update, solve_s = u, (t3 - t2) * u / len(returns)
            break
    out = dict(
        returns=returns,
        last10_mean_return=sum(tail) / len(tail),
        steps=steps,
        run_s=t3 - t2,
        steps_per_s=steps / (t3 - t2),
        cpu_s=cpu_s,
        solve_update=solve_update,
        solve_s=solve_s,
        lower_s=t1 - t0,
        compile_s=t2 - t1,
        jax=jax.__version__,
    )
    if not args.json:
        for i, r in enumerate(returns):
            print(f"update {i + 1:4d} mean_return {r:8.2f}", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
