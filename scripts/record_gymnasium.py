"""Records episodes of gymnasium's CartPole-v1 and Acrobot-v1 for tests/classic_control.rs.

Run from the repository root with the JAX venv (which pins gymnasium, see
bench/jax_venv.sh; this script installs nothing):

    . bench/jax_venv.sh && $VENV/bin/python scripts/record_gymnasium.py

It writes tests/data/gymnasium_cartpole.json and tests/data/gymnasium_acrobot.json:

    {"gymnasium": "<version>", "env": "CartPole-v1", "episodes": [
        {"seed": s, "initial_state": [f64 x 4], "initial_observation": [f32 ...],
         "actions": [...], "observations": [[...], ...], "rewards": [...],
         "terminated": [...], "truncated": [...]}, ...]}

`initial_state` is the environment's float64 state after `reset(seed=s)` (printed with
`repr`, so it reads back bit-exact); `observations[t]` is what `step(actions[t])`
returned (float32 values, each written as the shortest decimal that reads back to it), before any reset. Each episode
runs until terminated or truncated (the 500-step TimeLimit of both tasks).

The actions are fixed by seeds: each episode draws from `numpy.random.default_rng(
seed + 1000)`. Purely random actions end CartPole in ~20 steps and almost never end
Acrobot before its limit, so some episodes mix a simple controller with random actions
(chosen by the same generator) to get long CartPole episodes (one reaches the 500-step
truncation, one ends by the cart leaving the track) and Acrobot episodes that end by reaching the line. Only the recorded actions
matter to the tests.
"""

import json
import os

import gymnasium as gym
import numpy as np


def cartpole_action(obs, rng, mode):
    if mode == "random":
        return int(rng.integers(2))
    if mode == "drift":
        # Balances the pole tilted a little, so the cart runs off the track (the
        # |x| > 2.4 termination).
        return int(float(obs[2]) + 0.5 * float(obs[3]) + 0.05 > 0.0)
    # A PD controller on the pole's angle and angular velocity (and a little on the
    # cart), with a random action now and then.
    if rng.random() < (0.1 if mode == "controller" else 0.6):
        return int(rng.integers(2))
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.05 * x_dot > 0.0)


def acrobot_action(obs, rng, mode):
    if mode == "random":
        return int(rng.integers(3))
    # Energy pumping: torque in the direction of the second joint's swing, with a
    # random action one step in five.
    if rng.random() < 0.2:
        return int(rng.integers(3))
    dtheta2 = float(obs[5])
    return 2 if dtheta2 > 0.0 else 0


def short(v):
    """A float32 value as the shortest decimal that reads back to it (the JSON stays
    small; the value is the float32 exactly)."""
    return float(np.format_float_positional(np.float32(v), unique=True))


def record(env_id, policy, modes, path):
    env = gym.make(env_id)
    episodes = []
    for seed, mode in modes:
        rng = np.random.default_rng(seed + 1000)
        obs, _ = env.reset(seed=seed)
        ep = {
            "seed": seed,
            "policy": mode,
            "initial_state": [float(v) for v in env.unwrapped.state],
            "initial_observation": [short(v) for v in obs],
            "actions": [],
            "observations": [],
            "rewards": [],
            "terminated": [],
            "truncated": [],
        }
        while True:
            a = policy(obs, rng, mode)
            obs, reward, terminated, truncated, _ = env.step(a)
            ep["actions"].append(a)
            ep["observations"].append([short(v) for v in obs])
            ep["rewards"].append(float(reward))
            ep["terminated"].append(bool(terminated))
            ep["truncated"].append(bool(truncated))
            if terminated or truncated:
                break
        episodes.append(ep)
        print(
            f"{env_id} seed {seed} ({mode}): {len(ep['actions'])} steps, "
            f"terminated={ep['terminated'][-1]} truncated={ep['truncated'][-1]}"
        )
    out = {"gymnasium": gym.__version__, "numpy": np.__version__, "env": env_id,
           "script": "scripts/record_gymnasium.py", "episodes": episodes}
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    data = os.path.join(root, "tests", "data")
    record("CartPole-v1", cartpole_action,
           [(0, "random"), (1, "random"), (2, "random"), (3, "controller"), (4, "noisy controller"),
            (5, "drift")],
           os.path.join(data, "gymnasium_cartpole.json"))
    record("Acrobot-v1", acrobot_action,
           [(0, "random"), (1, "pump"), (2, "pump"), (3, "pump"), (4, "pump")],
           os.path.join(data, "gymnasium_acrobot.json"))


if __name__ == "__main__":
    main()
