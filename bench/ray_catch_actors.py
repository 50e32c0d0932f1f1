#!/usr/bin/env python3
"""The Ray twin of issue 26's distributed Catch: an Alpacka-style Ray actor pool.

The same workload as the Rust actors/learner over NATS JetStream, on Ray's Python
API, for the side-by-side env steps/s at equal actor counts.

Workload (fixed; the flags below change only how long and with how many actors):
- Catch, 10 rows x 5 columns, as crates/xlaclient-rl/src/catch.rs: the ball starts on
  the top row in a random column and falls one row per step; the paddle on the bottom
  row moves left / stays / moves right (actions 0, 1, 2, clamped to the board); when
  the ball reaches the paddle's row the step ends the episode with reward +1 if the
  paddle is under the ball, -1 if not, discount 0, and the next state is a new start
  (random column, paddle in the middle). Observation: the 10x5 board, 50 f32, 1.0 at
  the ball's and the paddle's cells.
- Q-network: MLP 50 -> 64 -> 3, ReLU, f32.
- Actors: ACTORS `@ray.remote(num_cpus=1)` classes (one process each). Each steps
  B=32 Catch environments (numpy, vectorised; episodes run on across trajectories)
  with an epsilon-greedy policy (epsilon=0.1) through a `jax.jit` forward pass, and
  returns trajectories of T=16 steps, time-major: observations [T+1, B, 50] (the
  last one the bootstrap observation), actions, rewards, discounts [T, B], and the
  parameter version it acted with. The exploration draws of a batch are made at its
  start.
- Learner (the driver): takes trajectories as they come (`ray.wait`), adds them to a
  ring-buffer replay (REPLAY sequences of one environment each), and per received
  trajectory runs one jitted Q(lambda) train step on a batch of 32 sequences drawn
  uniformly from the replay: TD(lambda) errors of Q(s_t, a_t) against lambda-returns
  (lambda=0.99) bootstrapped with max_a Q(s_{t+1}, a), targets held fixed, mean squared
  TD error (as `lambda_returns` / `td_loss` in crates/xlaclient-rl/src/anakin.rs),
  Adam (optax, lr 1e-3). Every K=4 train steps it publishes the parameters with
  `ray.put`; actors pick up the newest published parameters between batches (they come
  with each rollout request, as in Alpacka's RayBatchStepper, which passes the
  `ray.put` parameter id to every `run_episode_batch` call).
- Each actor has INFLIGHT rollout requests queued (default 2: it starts the next
  batch as soon as it returns one, while the learner trains on the last); the queued
  request carries the parameters published when it was made.

Measured after a warm-up (every actor has compiled and returned one trajectory, the
learner has compiled its step): env steps/s = trajectories received and trained in the
window x B x T / window seconds. Policy lag of a trajectory = the learner's train
steps done when it trains on it minus the train steps behind the parameters it was
collected with (in learner updates; one parameter version = K updates).

Prints
  actors=N env_steps_per_s=... trajectories=... policy_lag_p50=... policy_lag_p99=...
then a line of details (train steps, learner_busy: the share of the window the driver
spent training rather than waiting on Ray, the median time an actor took for one
batch of T steps, load averages) and the greedy evaluation: the
fraction of caught balls over 100 episodes of the learner's final parameters.

--actors 0 runs the same loop in one process without Ray (one CatchActor, a rollout
then a train step, alternately): the baseline that shows what Ray's transport costs.
--check checks the vectorised Catch against a transcription of catch.rs's step and the
loss against a scalar float64 loop, then exits.

Usage (from the repository root):
  . bench/ray_venv.sh
  "$RAY_PY" bench/ray_catch_actors.py --check
  for n in 0 1 2 4; do "$RAY_PY" bench/ray_catch_actors.py --actors $n --seconds 25; done
"""
import argparse
import os
import time

import numpy as np

ROWS, COLS, OBS, HID, ACT = 10, 5, 50, 64, 3
B, T, K = 32, 16, 4
LAMBDA, LR, EPSILON = 0.99, 1e-3, 0.1
TRAIN_BATCH = 32

# One XLA CPU thread per process: an actor has num_cpus=1, and the machine's cores
# are shared by the actors and the learner. Set before jax is imported (the actors'
# processes get it through the runtime environment).
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


class NumpyCatch:
    """n Catch environments, vectorised, as catch.rs's `step` (ball_y, ball_x, paddle_x;
    the paddle's row is always ROWS - 1)."""

    def __init__(self, n, rng):
        self.n, self.rng = n, rng
        self.idx = np.arange(n)
        self.ball_y = np.zeros(n, np.int64)
        self.ball_x = rng.integers(0, COLS, n)
        self.paddle_x = np.full(n, COLS // 2, np.int64)

    def render(self, out):
        """Writes the boards, row after row, into `out` ([n, 50] f32, C-contiguous)."""
        out.fill(0.0)
        out[self.idx, self.ball_y * COLS + self.ball_x] = 1.0
        out[self.idx, (ROWS - 1) * COLS + self.paddle_x] = 1.0

    def step(self, action):
        """Moves the paddles, drops the balls; returns (reward, discount), f32 [n]."""
        self.paddle_x = np.clip(self.paddle_x + action - 1, 0, COLS - 1)
        self.ball_y += 1
        term = self.ball_y == ROWS - 1
        caught = self.paddle_x == self.ball_x
        reward = term * np.where(caught, np.float32(1.0), np.float32(-1.0))
        discount = (~term).astype(np.float32)
        if term.any():
            k = int(term.sum())
            self.ball_y[term] = 0
            self.ball_x[term] = self.rng.integers(0, COLS, k)
            self.paddle_x[term] = COLS // 2
        return reward, discount


def q_values(params, obs):
    """The Q-network, 50 -> 64 relu -> 3, on observations [..., 50]."""
    import jax.numpy as jnp

    w1, b1, w2, b2 = params
    return jnp.maximum(obs @ w1 + b1, 0.0) @ w2 + b2


def init_params(seed):
    """Weights drawn from N(0, 1/fan_in), zero biases, as numpy f32."""
    rng = np.random.default_rng(seed)
    return (
        (rng.standard_normal((OBS, HID)) / np.sqrt(OBS)).astype(np.float32),
        np.zeros(HID, np.float32),
        (rng.standard_normal((HID, ACT)) / np.sqrt(HID)).astype(np.float32),
        np.zeros(ACT, np.float32),
    )


class CatchActor:
    """One Ray actor: B environments, the policy jitted locally."""

    def __init__(self, index, seed):
        import jax

        self.index = index
        self.rng = np.random.default_rng(seed + 1000 * (index + 1))
        self.env = NumpyCatch(B, self.rng)
        self.forward = jax.jit(q_values)
        self.version = -1
        self.params = None

    def pid(self):
        return os.getpid()

    def rollout(self, published):
        """T steps of the B environments with the parameters `published` ((version,
        params), from the learner's `ray.put`, resolved by Ray before the call)."""
        import jax

        t0 = time.perf_counter()
        version, params = published
        if version != self.version:  # new parameters: picked up between batches
            self.params = jax.device_put(params)
            self.version = version
        env, rng = self.env, self.rng
        # Time-major, so that each step's observations are one contiguous block.
        obs = np.empty((T + 1, B, OBS), np.float32)
        actions = np.empty((T, B), np.int32)
        rewards = np.empty((T, B), np.float32)
        discounts = np.empty((T, B), np.float32)
        # The exploration draws of the whole batch at once.
        explore = rng.random((T, B)) < EPSILON
        random_actions = rng.integers(0, ACT, (T, B))
        for t in range(T):
            env.render(obs[t])
            q = np.asarray(self.forward(self.params, obs[t]))
            a = np.where(explore[t], random_actions[t], q.argmax(axis=1))
            actions[t] = a
            rewards[t], discounts[t] = env.step(a)
        env.render(obs[T])
        seconds = time.perf_counter() - t0
        return self.index, self.version, seconds, obs, actions, rewards, discounts


class Replay:
    """A ring buffer of single-environment sequences (T+1 observations, T actions,
    rewards, discounts)."""

    def __init__(self, capacity, rng):
        self.capacity, self.rng = capacity, rng
        self.obs = np.zeros((capacity, T + 1, OBS), np.float32)
        self.actions = np.zeros((capacity, T), np.int32)
        self.rewards = np.zeros((capacity, T), np.float32)
        self.discounts = np.zeros((capacity, T), np.float32)
        self.next, self.size = 0, 0

    def add(self, obs, actions, rewards, discounts):
        """Adds a time-major trajectory (obs [T+1, n, 50], the others [T, n]) as n sequences."""
        n = obs.shape[1]
        idx = (self.next + np.arange(n)) % self.capacity
        self.obs[idx] = obs.swapaxes(0, 1)
        self.actions[idx] = actions.T
        self.rewards[idx], self.discounts[idx] = rewards.T, discounts.T
        self.next = (self.next + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, m):
        idx = self.rng.integers(0, self.size, m)
        return self.obs[idx], self.actions[idx], self.rewards[idx], self.discounts[idx]


def lambda_returns(r, d, v):
    """lambda-returns of rewards r, discounts d, bootstrap values v ([M, T], time on
    axis 1): G_t = r_t + d_t ((1 - lambda) v_t + lambda G_{t+1}), G_T = v_{T-1}."""
    import jax.numpy as jnp

    acc = v[:, -1]
    out = []
    for i in reversed(range(r.shape[1])):
        acc = r[:, i] + d[:, i] * ((1.0 - LAMBDA) * v[:, i] + LAMBDA * acc)
        out.append(acc)
    return jnp.stack(out[::-1], axis=1)


def td_loss(params, obs, actions, rewards, discounts):
    """Mean over the batch of each sequence's mean squared TD(lambda) error: obs
    [M, T+1, 50], the others [M, T]; targets bootstrapped with max_a Q(s_{t+1}, a)
    and held fixed."""
    import jax
    import jax.numpy as jnp

    q = q_values(params, obs)  # [M, T+1, 3]
    qa = jnp.take_along_axis(q[:, :-1], actions[..., None], axis=2)[..., 0]
    v = jax.lax.stop_gradient(q[:, 1:].max(axis=2))
    target = jax.lax.stop_gradient(lambda_returns(rewards, discounts, v))
    td = target - qa
    return jnp.mean(jnp.mean(td * td, axis=1))


def make_learner():
    """The optimizer and the jitted Q(lambda) train step."""
    import jax
    import optax

    opt = optax.adam(LR)

    @jax.jit
    def train_step(params, opt_state, obs, actions, rewards, discounts):
        loss, grads = jax.value_and_grad(td_loss)(params, obs, actions, rewards, discounts)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return opt, train_step


def self_check():
    """Checks the pieces against plain-Python transcriptions: the vectorised Catch
    against catch.rs's `advance` one environment at a time (and its doc example), and
    the TD(lambda) loss against a scalar loop in float64. Raises on a mismatch."""
    import jax

    def advance(state, action, reset_column):  # catch.rs, one environment
        ball_y, ball_x, paddle_x = state
        paddle_x = min(max(paddle_x + action - 1, 0), COLS - 1)
        if ball_y + 1 == ROWS - 1:
            return (0, reset_column, COLS // 2), (1.0 if paddle_x == ball_x else -1.0), 0.0
        return (ball_y + 1, ball_x, paddle_x), 0.0, 1.0

    assert advance((0, 3, 2), 2, 0) == ((1, 3, 3), 0.0, 1.0)  # catch.rs's doc example
    n, steps = 7, 200
    # Reset columns drawn from a twin of the environment's generator, in its order.
    env = NumpyCatch(n, np.random.default_rng(5))
    twin = np.random.default_rng(5)
    states = [(0, int(c), COLS // 2) for c in twin.integers(0, COLS, n)]
    act_rng = np.random.default_rng(6)
    board = np.zeros((n, OBS), np.float32)
    for _ in range(steps):
        env.render(board)
        for i, (by, bx, px) in enumerate(states):
            want = np.zeros(OBS, np.float32)
            want[by * COLS + bx] = want[(ROWS - 1) * COLS + px] = 1.0
            assert (board[i] == want).all(), (i, states[i], board[i])
        a = act_rng.integers(0, ACT, n)
        r, d = env.step(a)
        ends = [i for i in range(n) if states[i][0] + 1 == ROWS - 1]
        resets = dict(zip(ends, (int(c) for c in twin.integers(0, COLS, len(ends))))) if ends else {}
        for i in range(n):
            states[i], ri, di = advance(states[i], int(a[i]), resets.get(i, 0))
            assert (r[i], d[i]) == (ri, di), (i, r[i], d[i], ri, di)

    rng = np.random.default_rng(7)
    params = tuple(p + rng.standard_normal(p.shape).astype(np.float32) * 0.1 for p in init_params(3))
    m = 3
    obs = rng.random((m, T + 1, OBS)).astype(np.float32)
    actions = rng.integers(0, ACT, (m, T)).astype(np.int32)
    rewards = rng.choice([-1.0, 0.0, 1.0], (m, T)).astype(np.float32)
    discounts = rng.choice([0.0, 1.0], (m, T)).astype(np.float32)
    got = float(jax.jit(td_loss)(params, obs, actions, rewards, discounts))
    w1, b1, w2, b2 = (np.asarray(p, np.float64) for p in params)
    total = 0.0
    for j in range(m):
        q = [np.maximum(obs[j, t] @ w1 + b1, 0.0) @ w2 + b2 for t in range(T + 1)]
        g = max(q[T])  # G_T = v_{T-1} = max_a Q(s_T, a)
        err = 0.0
        for t in reversed(range(T)):
            g = rewards[j, t] + discounts[j, t] * ((1 - LAMBDA) * max(q[t + 1]) + LAMBDA * g)
            err += (g - q[t][actions[j, t]]) ** 2
        total += err / T
    want = total / m
    assert abs(got - want) <= 1e-5 * max(1.0, abs(want)), (got, want)
    print(f"self-check: Catch matches catch.rs's step over {n}x{steps} steps; td_loss {got:.6f} vs {want:.6f}")


def greedy_eval(params, episodes, seed):
    """Fraction of caught balls over `episodes` greedy episodes (one from each reset)."""
    import jax

    forward = jax.jit(q_values)
    env = NumpyCatch(episodes, np.random.default_rng(seed))
    obs = np.zeros((episodes, OBS), np.float32)
    for _ in range(ROWS - 1):  # every episode lasts ROWS - 1 steps
        env.render(obs)
        reward, discount = env.step(np.asarray(forward(params, obs)).argmax(axis=1))
    assert not discount.any()
    return float((reward > 0).mean())


class Learner:
    """The driver's learner: replay, jitted train step, parameters published every K
    steps through `put` (`ray.put`, or the identity in process)."""

    def __init__(self, seed, replay, put):
        import jax

        self.put = put
        self.params = jax.device_put(init_params(seed))
        self.opt, self.train_step = make_learner()
        self.opt_state = self.opt.init(self.params)
        self.replay = Replay(replay, np.random.default_rng(seed))
        self.updates = 0
        self.loss = float("nan")
        self.busy_s = 0.0  # time in train (replay, step, publishing)
        self.published = self.publish()

    def publish(self):
        import jax

        # The version is the count of train steps behind these parameters.
        return self.put((self.updates, jax.device_get(self.params)))

    def train(self, obs, actions, rewards, discounts):
        t0 = time.perf_counter()
        self._train(obs, actions, rewards, discounts)
        self.busy_s += time.perf_counter() - t0

    def _train(self, obs, actions, rewards, discounts):
        self.replay.add(obs, actions, rewards, discounts)
        batch = self.replay.sample(TRAIN_BATCH)
        self.params, self.opt_state, self.loss = self.train_step(self.params, self.opt_state, *batch)
        self.updates += 1
        if self.updates % K == 0:
            self.published = self.publish()


def run_ray(args, learner):
    """The actor pool; returns (trajectories, policy lags, rollout seconds each, window
    seconds)."""
    import jax
    import ray

    Actor = ray.remote(num_cpus=1)(CatchActor)
    actors = [Actor.remote(i, args.seed) for i in range(args.actors)]
    pids = ray.get([a.pid.remote() for a in actors])
    assert len(set(pids)) == args.actors and os.getpid() not in pids, "one process per actor"

    # Warm-up: every actor compiles and returns one trajectory; the learner compiles.
    for _, _, _, *traj in ray.get([a.rollout.remote(learner.published) for a in actors]):
        learner.train(*traj)
    jax.block_until_ready(learner.params)

    pending = {}
    for a in actors:
        for _ in range(args.inflight):
            pending[a.rollout.remote(learner.published)] = a
    lags, rollout_s = [], []
    learner.busy_s = 0.0
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    while True:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(deadline - time.perf_counter(), 0))
        if not ready:
            break
        ref = ready[0]
        actor = pending.pop(ref)
        pending[actor.rollout.remote(learner.published)] = actor  # this actor's next batch
        _, version, seconds, *traj = ray.get(ref)
        rollout_s.append(seconds)
        lags.append(learner.updates - version)
        learner.train(*traj)
        if time.perf_counter() >= deadline:
            break
    jax.block_until_ready(learner.params)
    return len(lags), lags, rollout_s, time.perf_counter() - t0


def run_inprocess(args, learner):
    """The baseline without Ray: one CatchActor in the driver's process, a rollout
    then a train step, alternately; returns as `run_ray`."""
    import jax

    actor = CatchActor(0, args.seed)
    learner.train(*actor.rollout(learner.published)[3:])  # warm-up: both compile
    jax.block_until_ready(learner.params)
    lags, rollout_s = [], []
    learner.busy_s = 0.0
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    while time.perf_counter() < deadline:
        _, version, seconds, *traj = actor.rollout(learner.published)
        rollout_s.append(seconds)
        lags.append(learner.updates - version)
        learner.train(*traj)
    jax.block_until_ready(learner.params)
    return len(lags), lags, rollout_s, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, help="Ray actor processes (0: the in-process baseline, no Ray)")
    ap.add_argument("--seconds", type=float, default=25.0, help="measured window, after the warm-up")
    ap.add_argument("--inflight", type=int, default=2, help="rollout requests queued per actor")
    ap.add_argument("--replay", type=int, default=4096, help="replay capacity, in sequences")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-episodes", type=int, default=100)
    ap.add_argument("--check", action="store_true", help="check Catch and the loss, then exit")
    args = ap.parse_args()
    if args.check:
        self_check()
        return
    if args.actors is None:
        ap.error("--actors is required (or --check)")
    if args.actors < 0 or args.inflight < 1 or args.seconds <= 0 or args.replay < TRAIN_BATCH:
        ap.error(f"need --actors >= 0, --inflight >= 1, --seconds > 0, --replay >= {TRAIN_BATCH}")

    os.environ["XLA_FLAGS"] = SINGLE_THREAD_XLA
    import jax

    load_start = os.getloadavg()[0]
    if args.actors == 0:
        learner = Learner(args.seed, args.replay, lambda x: x)
        trajectories, lags, rollout_s, elapsed = run_inprocess(args, learner)
        versions = "in-process (no Ray)"
    else:
        import ray

        ray.init(
            num_cpus=max(args.actors, os.cpu_count() or 1),  # logical: one per actor
            include_dashboard=False,
            object_store_memory=256 * 1024 * 1024,
            runtime_env={"env_vars": {"XLA_FLAGS": SINGLE_THREAD_XLA}},
            logging_level="ERROR",
            log_to_driver=False,
        )
        try:
            learner = Learner(args.seed, args.replay, ray.put)
            trajectories, lags, rollout_s, elapsed = run_ray(args, learner)
        finally:
            ray.shutdown()
        versions = f"ray={ray.__version__}"
    load_end = os.getloadavg()[0]

    lags = np.array(lags)
    print(
        f"actors={args.actors} env_steps_per_s={trajectories * B * T / elapsed:.0f} "
        f"trajectories={trajectories} "
        f"policy_lag_p50={np.percentile(lags, 50):.0f} policy_lag_p99={np.percentile(lags, 99):.0f}"
    )
    print(
        f"  window_s={elapsed:.1f} train_steps_total={learner.updates} "
        f"lag_unit=updates(K={K}) lag_max={lags.max()} learner_busy={learner.busy_s / elapsed:.2f} "
        f"rollout_ms_median={np.median(rollout_s) * 1e3:.1f} "
        f"inflight={args.inflight} B={B} T={T} "
        f"last_loss={float(learner.loss):.4f} load1_start={load_start:.2f} load1_end={load_end:.2f} "
        f"cpus={os.cpu_count()} {versions} jax={jax.__version__}"
    )
    caught = greedy_eval(learner.params, args.eval_episodes, args.seed + 1)
    print(f"  eval: caught={caught:.2f} of {args.eval_episodes} greedy episodes")


if __name__ == "__main__":
    main()
