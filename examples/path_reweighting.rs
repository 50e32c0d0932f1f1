//! Path-space reweighting ([`xlaclient::rl::reweight`]) on a small gridworld, run
//! by the experiment runner ([`xlaclient::runner`]).
//!
//! **The world.** An 8 × 8 grid (`grid`). Each path starts at a uniformly random
//! cell with a uniformly random target cell (a different one), and lasts exactly
//! `horizon` = 16 steps. Each step the agent picks one of four moves (up, down,
//! left, right); a move into the border leaves it in place; on the target it stays
//! there for the rest of the path. The policy sees `(x, y, tx − x, ty − y) / grid`.
//!
//! **The quality.** `q = exp(−beta · d)` with `d` the smallest Manhattan distance to
//! the target along the path (0 once reached) and `beta` = 1: 1 for a path that
//! reaches the target, less the further it stayed. A uniformly random policy reaches
//! the target in few paths (its mean `q` is printed as round 1).
//!
//! **The algorithm.** Each round: simulate `paths` = 256 paths with the policy `W`
//! (a 4 → 32 → tanh → 32 → tanh → 4 MLP giving action logits; one compiled call per
//! time step for all paths, the parameters resident on the device), score them,
//! resample 256 paths with probability ∝ `q` (systematic resampling, seeded), and fit
//! `W` to the resampled paths' (observation, action) pairs: `fit_steps` = 20 Adam
//! steps (`lr` = 0.01) on their mean negative log-likelihood, one compiled call with
//! the parameters and Adam's state donated. `rounds` = 15 rounds, then the final
//! policy is scored on 256 fresh paths.
//!
//! Per round it prints `round R mean_q=… divergence_bits=… nll=…`: the mean quality
//! of the round's paths, `D(Q‖P)` estimated as `log2 N − H(q/Σq)` in bits
//! ([`reweight::divergence_bits`]), and the fit's last mean negative log-likelihood.
//! The last line is `final_mean_q=<value>`.
//!
//! **The criterion, fixed before running it:** the final policy's mean `q` must be at
//! least the first round's (the random initial policy's) mean `q` plus `margin` =
//! 0.3, for seeds 0, 1, 2 and 3 (`--set seed=S`); the example exits with status 1
//! otherwise.
//!
//! Run: `cargo run --release --example path_reweighting [-- --set seed=2
//! --output-dir runs/pr --resume …]` (`-- --help` lists the options and config keys).
//! The runner writes `config.toml`, `metrics.csv` (one row per round), `curves.svg`
//! and a checkpoint of the policy and optimizer state per round into the output
//! directory; `--resume` continues after the latest round saved. Each round's paths
//! are drawn from a generator seeded by `(seed, round)`, so a resumed run draws the
//! same paths as an uninterrupted one.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt as _, SeedableRng as _};
use serde::{Deserialize, Serialize};
use xlaclient::Client;
use xlaclient::nn::{Activation, Mlp, MlpParams, optim};
use xlaclient::rl::reweight::{self, PolicyFit, Resampling};
use xlaclient::runner::Runner;

/// The experiment's configuration (every key settable with `--set key=value`).
#[derive(Serialize, Deserialize)]
#[serde(default)]
struct Config {
    /// Paths per round (N).
    paths: usize,
    /// Rounds of simulate, resample, fit.
    rounds: u64,
    /// Steps per path.
    horizon: usize,
    /// Grid side.
    grid: i32,
    /// `q = exp(-beta · closest Manhattan distance to the target)`.
    beta: f64,
    /// Adam's learning rate.
    lr: f64,
    /// Adam steps per round, on all resampled pairs.
    fit_steps: u32,
    /// Hidden width of the policy MLP (two hidden layers).
    hidden: i64,
    /// `"systematic"` or `"multinomial"`.
    resampling: String,
    /// Seeds the simulation, the resampling and the initial parameters.
    seed: u64,
    /// The improvement the criterion asks for: final mean q ≥ first-round mean q + margin.
    margin: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            paths: 256,
            rounds: 15,
            horizon: 16,
            grid: 8,
            beta: 1.0,
            lr: 0.01,
            fit_steps: 20,
            hidden: 32,
            resampling: "systematic".into(),
            seed: 0,
            margin: 0.3,
        }
    }
}

const OBS: usize = 4;
const ACTIONS: usize = 4;
const MOVES: [(i32, i32); ACTIONS] = [(0, 1), (0, -1), (-1, 0), (1, 0)];

/// N simulated paths: every step's observation and action, and each path's quality.
struct Paths {
    obs: Vec<f32>,
    actions: Vec<i32>,
    q: Vec<f64>,
}

fn observe(c: &Config, pos: (i32, i32), target: (i32, i32)) -> [f32; OBS] {
    let g = c.grid as f32;
    [
        pos.0 as f32 / g,
        pos.1 as f32 / g,
        (target.0 - pos.0) as f32 / g,
        (target.1 - pos.1) as f32 / g,
    ]
}

/// Simulates `c.paths` paths with the policy, one batched policy call per step.
fn simulate(
    c: &Config,
    fit: &PolicyFit,
    params: &MlpParams<xlaclient::Buffer>,
    stream: u64,
) -> xlaclient::rl::Result<Paths> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(c.seed.wrapping_mul(1_000_003) ^ stream);
    let n = c.paths;
    let mut pos: Vec<(i32, i32)> = Vec::with_capacity(n);
    let mut target: Vec<(i32, i32)> = Vec::with_capacity(n);
    for _ in 0..n {
        let p = (rng.random_range(0..c.grid), rng.random_range(0..c.grid));
        let mut t = p;
        while t == p {
            t = (rng.random_range(0..c.grid), rng.random_range(0..c.grid));
        }
        pos.push(p);
        target.push(t);
    }
    let dist = |p: (i32, i32), t: (i32, i32)| (p.0 - t.0).abs() + (p.1 - t.1).abs();
    let mut closest: Vec<i32> = pos.iter().zip(&target).map(|(p, t)| dist(*p, *t)).collect();
    // Stored path-major: path i's step t at row i * horizon + t.
    let mut obs = vec![0f32; n * c.horizon * OBS];
    let mut actions = vec![0i32; n * c.horizon];
    let mut step_obs = vec![0f32; n * OBS];
    for t in 0..c.horizon {
        for i in 0..n {
            let o = observe(c, pos[i], target[i]);
            step_obs[i * OBS..(i + 1) * OBS].copy_from_slice(&o);
            let row = i * c.horizon + t;
            obs[row * OBS..(row + 1) * OBS].copy_from_slice(&o);
        }
        let probs = fit.probs(params, &step_obs)?;
        for i in 0..n {
            let u: f32 = rng.random();
            let p = &probs[i * ACTIONS..(i + 1) * ACTIONS];
            let mut acc = 0.0;
            let a = p
                .iter()
                .position(|pa| {
                    acc += pa;
                    u < acc
                })
                .unwrap_or(ACTIONS - 1);
            actions[i * c.horizon + t] = a as i32;
            if pos[i] != target[i] {
                let (dx, dy) = MOVES[a];
                let next = (pos[i].0 + dx, pos[i].1 + dy);
                if (0..c.grid).contains(&next.0) && (0..c.grid).contains(&next.1) {
                    pos[i] = next;
                }
                closest[i] = closest[i].min(dist(pos[i], target[i]));
            }
        }
    }
    let q = closest
        .iter()
        .map(|d| (-c.beta * f64::from(*d)).exp())
        .collect();
    Ok(Paths { obs, actions, q })
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> xlaclient::rl::Result<()> {
    let mut run = Runner::<Config>::from_args()?;
    let c = &run.config;
    let method = match c.resampling.as_str() {
        "systematic" => Resampling::Systematic,
        "multinomial" => Resampling::Multinomial,
        other => {
            return Err(xlaclient::rl::Error::InvalidArgument {
                what: "resampling",
                reason: format!("{other:?}; use \"systematic\" or \"multinomial\""),
            });
        }
    };
    if c.paths == 0 || c.horizon == 0 || c.grid < 2 {
        return Err(xlaclient::rl::Error::InvalidArgument {
            what: "paths/horizon/grid",
            reason: "paths and horizon need 1 or more, grid 2 or more".into(),
        });
    }
    let client = Client::cpu()?;
    let t0 = std::time::Instant::now();
    let net = Mlp::new(
        &[OBS as i64, c.hidden, c.hidden, ACTIONS as i64],
        Activation::Tanh,
    );
    let pairs = c.paths * c.horizon;
    let fit = PolicyFit::new(
        &client,
        net,
        optim::adam(c.lr, 0.9, 0.999, 1e-8),
        pairs,
        c.fit_steps,
        c.paths,
    )?;
    let mut state = match run.restore(&client, fit.state_spec())? {
        Some(s) => s,
        None => fit.init(c.seed as u32)?,
    };
    println!(
        "compile_s={:.2} paths={} horizon={} rounds={} start_round={}",
        t0.elapsed().as_secs_f64(),
        c.paths,
        c.horizon,
        c.rounds,
        run.start_step() + 1
    );
    let rounds = run.config.rounds;
    run.set_total(rounds);
    for round in run.start_step() + 1..=rounds {
        let c = &run.config;
        let paths = simulate(c, &fit, &state.params, round)?;
        let mean_q = mean(&paths.q);
        let d = reweight::divergence_bits(&paths.q)?;
        let picked = reweight::resample(&paths.q, c.paths, method, c.seed ^ (round << 32))?;
        let mut obs = Vec::with_capacity(pairs * OBS);
        let mut actions = Vec::with_capacity(pairs);
        for &i in &picked {
            let rows = i * c.horizon..(i + 1) * c.horizon;
            obs.extend_from_slice(&paths.obs[rows.start * OBS..rows.end * OBS]);
            actions.extend_from_slice(&paths.actions[rows]);
        }
        state = fit.fit(state, &obs, &actions)?;
        let nll = f64::from(state.loss.to_scalar::<f32>()?);
        run.println(&format!(
            "round {round} mean_q={mean_q:.4} divergence_bits={d:.3} nll={nll:.4}"
        ));
        run.log(
            round,
            &[("mean_q", mean_q), ("divergence_bits", d), ("nll", nll)],
        )?;
        run.checkpoint(round, &state)?;
    }
    // The final policy on fresh paths (a stream no round uses).
    let final_q = mean(&simulate(&run.config, &fit, &state.params, u64::MAX)?.q);
    let first_q = run.metrics().1.first().map(|(_, v)| v[0]);
    let margin = run.config.margin;
    let secs = t0.elapsed().as_secs_f64();
    run.finish()?;
    println!("total_s={secs:.2}");
    let first_q = first_q.unwrap_or(f64::NAN);
    println!(
        "criterion: final mean q >= first-round mean q + {margin} ({first_q:.4} + {margin} = {:.4})",
        first_q + margin
    );
    println!("final_mean_q={final_q:.4}");
    if final_q.is_nan() || final_q < first_q + margin {
        eprintln!("the criterion was not met");
        std::process::exit(1);
    }
    Ok(())
}
