//! Alpacka's `ShootingAgent` on CartPole: before every move the agent runs, for
//! each of the two actions, `rollouts` random rollouts of `depth` steps in copies
//! of its environment, scores each by its discounted rewards plus the discounted
//! network value of its last state, and takes the action with the best mean. All
//! the leaves of one decision go to the network together, and all agents' leaves
//! of a tick in one batched call (the `Stepper`).
//!
//! The loop (the runner's iteration): **collect** `collect_episodes` episodes with
//! the shooting agents, **train** the value network (`value_scale` · MLP 4 →
//! hidden → 1) on the episodes' discounted returns (squared error in units of
//! `value_scale`, Adam; a compiled donating train step; the last states of an
//! episode cut at 500 steps left out), **update** the stepper's network with the new parameters (no
//! recompilation). Then `episodes` evaluation episodes, one agent each, report
//! the mean return. The value network starts at zero; with `iterations=0` (the
//! default, as Alpacka's `shooting_random_cartpole` configuration) it stays there:
//! pure random shooting, which solves the task. Training the value between rounds
//! (`--set iterations=2`) runs the whole loop but currently makes the agent worse
//! (mean 456.7 against 496.7 on the 2-core VM, 2026-11-26): the fitted returns are
//! nearly flat over the states the agent visits, and the network's error outweighs
//! the differences between the rollouts.
//!
//! CartPole is the crate's `CartPoleEnv`: gymnasium's `CartPole-v1` (reward 1 per
//! step, truncated at 500 steps), resets drawn from a seeded `Rng`; a clone of it
//! is the agent's simulator.
//!
//! Run: `cargo run --release --example cartpole_planning [-- --help]`; the last
//! line is `mean_return=… min_return=… decisions_per_s=…`; the run fails (exit 1)
//! when the mean is below `min_mean_return` (475).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use xlaclient::nn::{Activation, Mlp, MlpParams, losses, optim};
use xlaclient::rl::agents::{ShootingAgent, ShootingConfig};
use xlaclient::rl::replay::{HostArray, ReplayBuffer};
use xlaclient::rl::trainer::Trainer;
use xlaclient::rl::{BatchSizes, BatchedNet, CartPoleEnv, Environment, NetHandle, Rng, Stepper};
use xlaclient::runner::{Help, Runner};
use xlaclient::{Client, ClientExt, Op, Shape, Tree};

/// The run's configuration.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(default, deny_unknown_fields)]
struct Config {
    rollouts: usize,
    depth: usize,
    discount: f64,
    iterations: u64,
    collect_episodes: usize,
    train_steps: usize,
    batch_size: i64,
    lr: f64,
    hidden: i64,
    value_scale: f64,
    episodes: usize,
    seed: u64,
    min_mean_return: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rollouts: 16,
            depth: 20,
            discount: 0.99,
            iterations: 0,
            collect_episodes: 16,
            train_steps: 300,
            batch_size: 256,
            lr: 1e-2,
            hidden: 32,
            value_scale: 100.0,
            episodes: 100,
            seed: 0,
            min_mean_return: 475.0,
        }
    }
}

/// One visited state and its discounted return.
#[derive(Tree)]
struct Sample<T> {
    obs: T,
    ret: T,
}

/// One episode played by a shooting agent: the return, the states and rewards.
struct Episode {
    ret: f32,
    states: Vec<(Vec<f32>, f32)>,
    predictions: usize,
}

async fn episode(
    net: NetHandle,
    mut env: CartPoleEnv,
    config: ShootingConfig,
    seed: u64,
) -> xlaclient::rl::Result<Episode> {
    let mut agent = ShootingAgent::new(config, seed)?;
    let (mut ret, mut states, mut predictions) = (0.0, Vec::new(), 0);
    loop {
        let plan = agent.plan(&env, |obs| net.predict(obs)).await?;
        predictions += plan.predictions;
        let obs = env.observation();
        let t = env.step(plan.action)?;
        ret += t.reward;
        states.push((obs, t.reward));
        if t.terminal {
            return Ok(Episode {
                ret,
                states,
                predictions,
            });
        }
    }
}

/// Runs `n` episodes, one agent each, through one stepper.
fn play(
    net: BatchedNet,
    n: usize,
    config: &ShootingConfig,
    seed: u64,
) -> xlaclient::rl::Result<(Vec<Episode>, BatchedNet, usize, f64)> {
    let t = Instant::now();
    let mut stepper: Stepper<xlaclient::rl::Result<Episode>> = Stepper::new(net);
    for i in 0..n {
        let config = config.clone();
        let s = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        stepper.spawn(move |net| episode(net, CartPoleEnv::new(s), config, s ^ 0xabc));
    }
    let out = stepper.run()?;
    let ticks = stepper.ticks();
    let secs = t.elapsed().as_secs_f64();
    let episodes = out.into_iter().collect::<xlaclient::rl::Result<Vec<_>>>()?;
    Ok((episodes, stepper.into_net(), ticks, secs))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> xlaclient::rl::Result<()> {
    let help = Help {
        about: "Alpacka's ShootingAgent on CartPole: random rollouts in copies of the \
                environment scored by a value network, all leaves batched through the stepper; \
                the value network trained on the collected returns between rounds."
            .to_string(),
        keys: vec![
            ("rollouts", "random rollouts per action per decision"),
            ("depth", "steps per rollout"),
            ("discount", "discount of rewards and of the leaf value"),
            (
                "iterations",
                "collect-train-update iterations before the evaluation",
            ),
            ("collect_episodes", "episodes collected per iteration"),
            ("train_steps", "value train steps per iteration"),
            ("batch_size", "states per train step"),
            ("lr", "Adam's learning rate"),
            ("hidden", "hidden units of the value network"),
            (
                "value_scale",
                "the value is value_scale · MLP(obs) (returns reach 1/(1 − discount))",
            ),
            ("episodes", "evaluation episodes"),
            (
                "seed",
                "seed of the environments, the agents and the network",
            ),
            (
                "min_mean_return",
                "the evaluation's mean return must reach this, else exit 1",
            ),
        ],
    };
    let mut run = Runner::<Config>::from_args_with_help(&help)?;
    let c = run.config.clone();
    let client = Client::cpu()?;
    let mlp = Mlp::new(&[4, c.hidden, 1], Activation::Relu);
    // The value network starts at zero: its first rounds are pure random shooting.
    let m = mlp.clone();
    let seed = c.seed as u32;
    let init = client.jit("init", &(), |b, ()| {
        m.init(&b.prng_key(seed)).map_ref(|p: &Op| p * 0.0)
    })?;
    let spec = Sample {
        obs: Shape::of::<f32>(&[c.batch_size, 4]),
        ret: Shape::of::<f32>(&[c.batch_size]),
    };
    let m = mlp.clone();
    let scale = c.value_scale;
    let mut trainer = Trainer::new(
        &client,
        init.output_spec(),
        init.call(&())?,
        &spec,
        &optim::adam(c.lr, 0.9, 0.999, 1e-8),
        move |p: &MlpParams<Op>, b: &Sample<Op>| {
            let v = m.apply(p, &b.obs).reshape(&[-1]);
            losses::mse(&v, &(&b.ret * (1.0 / scale)))
        },
    )?;
    let leaves = 2 * c.rollouts * c.episodes.max(c.collect_episodes);
    let mut sizes = vec![];
    let mut s = 16usize;
    while s < leaves {
        sizes.push(s);
        s *= 4;
    }
    sizes.push(leaves.max(1));
    let m = mlp.clone();
    let mut net = BatchedNet::new(
        &client,
        trainer.params_tree()?,
        &[4],
        BatchSizes::new(&sizes)?,
        move |p, obs| &m.apply(p, obs) * scale,
    )?;
    // Every batch size compiled before any timing.
    let t = std::time::Instant::now();
    net.compile_all()?;
    println!(
        "batch sizes {sizes:?} compiled in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let shooting = ShootingConfig {
        rollouts: c.rollouts,
        depth: c.depth,
        discount: c.discount as f32,
        value_index: 0,
    };
    let gamma = c.discount as f32;
    let mut buffer: ReplayBuffer<Sample<HostArray>> = ReplayBuffer::new(200_000)?;
    let mut rng = Rng::new(c.seed ^ 0x5eed);
    run.set_total(c.iterations);
    for it in 1..=c.iterations {
        let (episodes, n, ticks, secs) =
            play(net, c.collect_episodes, &shooting, c.seed + it * 7919)?;
        net = n;
        let mean =
            episodes.iter().map(|e| e.ret as f64).sum::<f64>() / episodes.len().max(1) as f64;
        for e in &episodes {
            // An episode cut at the time limit: the returns of its last states
            // (within about 1/(1 − discount) steps of the cut) reflect the clock,
            // which the observation does not show; they are left out.
            let cut = if e.states.len() >= 500 {
                (1.0 / (1.0 - c.discount)).round() as usize
            } else {
                0
            };
            let mut g = 0.0f32;
            for (k, (obs, r)) in e.states.iter().rev().enumerate() {
                g = r + gamma * g;
                if k < cut {
                    continue;
                }
                buffer.push(Sample {
                    obs: HostArray::f32(&[4], obs.clone())?,
                    ret: HostArray::scalar_f32(g),
                })?;
            }
        }
        let mut loss = 0.0;
        for _ in 0..c.train_steps {
            let b = buffer.sample(c.batch_size as usize, &mut rng)?;
            loss += trainer.step_host(&b)? as f64 / c.train_steps.max(1) as f64;
        }
        trainer.publish(&mut net)?;
        run.log(it, &[("collect_mean_return", mean), ("value_loss", loss)])?;
        run.println(&format!(
            "iteration {it}: {} episodes, mean return {mean:.1} ({ticks} ticks, {secs:.2} s); \
             {} value steps, loss {loss:.3}",
            episodes.len(),
            c.train_steps
        ));
    }
    let (compiles, calls) = (net.compiles(), net.calls());
    let (episodes, net, ticks, secs) = play(net, c.episodes, &shooting, c.seed ^ 0xe7a1)?;
    let returns: Vec<f64> = episodes.iter().map(|e| e.ret as f64).collect();
    let mean = returns.iter().sum::<f64>() / returns.len().max(1) as f64;
    let min = returns.iter().copied().fold(f64::INFINITY, f64::min);
    let decisions: usize = episodes.iter().map(|e| e.states.len()).sum();
    let predictions: usize = episodes.iter().map(|e| e.predictions).sum();
    run.println(&format!(
        "evaluation: {} episodes, {decisions} decisions, {predictions} leaf predictions in {ticks} ticks \
         ({} calls), {secs:.2} s; network compiles {} ({} before the evaluation)",
        returns.len(),
        net.calls() - calls,
        net.compiles(),
        compiles
    ));
    run.finish()?;
    println!(
        "mean_return={mean:.1} min_return={min:.0} decisions_per_s={:.0}",
        decisions as f64 / secs
    );
    if mean < c.min_mean_return {
        eprintln!("mean return {mean:.1} below {}", c.min_mean_return);
        std::process::exit(1);
    }
    Ok(())
}
