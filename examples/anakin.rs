//! DeepMind's Podracer "Anakin" demo ported to Rust: a whole reinforcement-learning
//! training loop — the Catch environment, a Q-network, a 16-step rollout, the
//! TD(λ) loss, its gradient and Adam — compiled into one XLA program and called
//! with donated state, so nothing leaves the device between calls. The program is
//! built by [`xlaclient::rl::anakin`]; this is its command line.
//!
//! The defaults are the notebook's configuration (batch 128, rollout 16, 100
//! iterations per call, learning rate 1e-4, λ = 0.99, seed 42), the same workload
//! as `../shared/bench-anchors/jax_anakin_catch.py`. Layouts: the notebook's (128
//! learners, each with its own parameters and Adam state, gradients averaged
//! across them) or `--shared-params` (one copy; the same learning).
//!
//! `--set devices=N` replicates the learner over N devices with `pmap` (N CPU
//! devices of the plugin: `ClientOptions::cpu_device_count`), `batch` learners on
//! each, the gradients averaged over the batch inside each device and over the
//! devices with `pmean`, as the notebook runs it on 8 TPU cores; frames per call
//! count every device, and the run checks that every device holds the same
//! parameters at the end.
//!
//! Run: `cargo run --release --example anakin [-- --help]`; options are set with
//! `--set key=value` (or a TOML file, `--config FILE`), e.g. `--set
//! shared_params=true`, and `--help` lists every key with its default. It prints
//! the compile time and the frames per second (frames = iterations × rollout ×
//! batch per call; the median over the first `timed_calls` calls), trains on for
//! `calls` calls in all, evaluating the greedy policy exactly after each call (its
//! expected terminal reward over the 5 start columns, computed in plain Rust from
//! the downloaded parameters), and ends with
//! `eval_mean_reward=<value> fps=<value> compile_s=<value>`. It exits with an error
//! if the greedy policy's reward is below `min_reward` (0.9).
//!
//! The run's directory (`--output-dir`, by default `runs/anakin/<time>`) receives
//! the configuration, the learning curve (`metrics.csv`: per call the frames per
//! second, the loss and the greedy reward) and its plot (`curves.svg`), and
//! checkpoints of the whole state (parameters, Adam, environments, key), so that
//! `--resume` continues a run where it stopped. Progress shows as a bar on a
//! terminal, as periodic lines otherwise.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use xlaclient::rl::anakin::{Anakin, AnakinConfig};
use xlaclient::runner::{Help, Runner};
use xlaclient::{Client, ClientOptions, Plugin, Tree};

/// The run's configuration; the defaults are the notebook's.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(default, deny_unknown_fields)]
struct Config {
    /// Environments (and learners) per iteration.
    batch: i64,
    /// Steps per rollout.
    rollout_len: i64,
    /// Updates per call of the compiled program (its fori_loop).
    iterations: i32,
    /// Calls to train for (training = calls × iterations updates).
    calls: u64,
    /// Adam's learning rate.
    lr: f64,
    /// λ of the TD(λ) targets.
    lambda: f64,
    /// PRNG seed (parameters and environments).
    seed: u32,
    /// One shared parameter copy instead of one per learner (same learning).
    shared_params: bool,
    /// Differentiate through the rollout scan, as the notebook does.
    grad_through_scan: bool,
    /// Per-learner layout: one learner's update batched with vmap, as the notebook.
    vmap_learners: bool,
    /// Calls timed for the frames-per-second figure (the first ones of the process).
    timed_calls: usize,
    /// A checkpoint every this many calls (and after the last).
    checkpoint_every: u64,
    /// The greedy reward the run must reach.
    min_reward: f64,
    /// Devices the learner is replicated over (pmap), `batch` learners each.
    devices: usize,
}

impl Default for Config {
    fn default() -> Self {
        let a = AnakinConfig::default();
        Config {
            batch: a.batch,
            rollout_len: a.rollout_len,
            iterations: a.iterations,
            calls: 20,
            lr: a.lr,
            lambda: a.lambda,
            seed: a.seed,
            shared_params: a.shared_params,
            grad_through_scan: a.grad_through_scan,
            vmap_learners: a.vmap_learners,
            timed_calls: 5,
            checkpoint_every: 10,
            min_reward: 0.9,
            devices: a.devices,
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> xlaclient::rl::Result<()> {
    let help = Help {
        about: "Podracer's Anakin on Catch: environments, Q-network, rollout, TD(λ) loss, \
                gradient and Adam in one compiled XLA program (defaults: the notebook's \
                configuration)."
            .to_string(),
        keys: vec![
            ("batch", "environments (and learners) per update"),
            ("rollout_len", "steps per rollout"),
            ("iterations", "updates per call (the program's fori_loop)"),
            ("calls", "calls to train for"),
            ("lr", "Adam's learning rate"),
            ("lambda", "λ of the TD(λ) targets"),
            ("seed", "PRNG seed of parameters and environments"),
            (
                "shared_params",
                "one parameter copy instead of one per learner",
            ),
            (
                "grad_through_scan",
                "differentiate through the rollout scan, as the notebook",
            ),
            (
                "vmap_learners",
                "per-learner layout: one learner's update batched with vmap, as the notebook",
            ),
            (
                "timed_calls",
                "first calls timed for the frames-per-second figure",
            ),
            ("checkpoint_every", "a checkpoint every this many calls"),
            (
                "min_reward",
                "greedy reward the run must reach, else exit 1",
            ),
            (
                "devices",
                "devices the learner is replicated over (pmap), batch learners each",
            ),
        ],
    };
    let mut run = Runner::<Config>::from_args_with_help(&help)?;
    let c = run.config.clone();
    let config = AnakinConfig {
        batch: c.batch,
        rollout_len: c.rollout_len,
        iterations: c.iterations,
        lr: c.lr,
        lambda: c.lambda,
        seed: c.seed,
        shared_params: c.shared_params,
        grad_through_scan: c.grad_through_scan,
        vmap_learners: c.vmap_learners,
        devices: c.devices,
        ..AnakinConfig::default()
    };
    let client = if c.devices > 1 {
        let plugin = Plugin::default_plugin()?;
        Client::new(
            &plugin,
            &ClientOptions::new().cpu_device_count(c.devices as i64),
        )?
    } else {
        Client::cpu()?
    };
    let anakin = Anakin::new(&client, config.clone())?;
    let compile_s = anakin.compile_s();
    println!(
        "layout={} devices={} batch={}/device rollout={} iterations/call={} lr={} grad_through_scan={}",
        if config.shared_params {
            "shared-params"
        } else if config.vmap_learners {
            "per-learner (notebook, vmap)"
        } else {
            "per-learner (notebook)"
        },
        config.devices,
        config.batch,
        config.rollout_len,
        config.iterations,
        config.lr,
        config.grad_through_scan
    );
    println!("compile_s={compile_s:.3}");

    // One state per device; a one-device run checkpoints its state alone (as
    // before), a replicated one the list of the devices' states.
    let spec = anakin.state_spec().clone();
    let mut states = if config.devices == 1 {
        match run.restore(&client, &spec)? {
            Some(state) => vec![state],
            None => anakin.init_devices()?,
        }
    } else {
        match run.restore(&client, &vec![spec; config.devices])? {
            Some(restored) => match anakin.replicated_learner() {
                Some(pmap) => restored
                    .iter()
                    .zip(pmap.devices())
                    .map(|(s, d)| s.try_map_ref(&mut |b| b.copy_to_device(d)))
                    .collect::<Result<Vec<_>, _>>()?,
                None => restored,
            },
            None => anakin.init_devices()?,
        }
    };
    let reward = anakin.greedy_reward(&states[0])?;
    let start = run.start_step();
    println!(
        "iteration {:>6}  greedy reward {reward:+.2}",
        start * config.iterations as u64
    );
    run.set_total(c.calls);
    let mut call_s = Vec::new();
    for call in start + 1..=c.calls.max(start + 1) {
        let t = Instant::now();
        states = anakin.step_devices(states)?;
        let loss = states[0].loss.to_scalar::<f32>()? as f64;
        let secs = t.elapsed().as_secs_f64();
        if call_s.len() < c.timed_calls {
            call_s.push(secs);
        }
        let reward = anakin.greedy_reward(&states[0])?;
        let fps = config.frames_per_call() / secs;
        run.log(call, &[("fps", fps), ("loss", loss), ("reward", reward)])?;
        run.println(&format!(
            "iteration {:>6}  greedy reward {reward:+.2}  loss {loss:.4}  {fps:.3e} frames/s",
            call * config.iterations as u64
        ));
        if call % c.checkpoint_every.max(1) == 0 || call >= c.calls {
            if config.devices == 1 {
                run.checkpoint(call, &states[0])?;
            } else {
                run.checkpoint(call, &states)?;
            }
        }
    }
    call_s.sort_by(f64::total_cmp);
    let median = call_s.get(call_s.len() / 2).copied().unwrap_or(f64::NAN);
    let fps = config.frames_per_call() / median;
    run.println(&format!(
        "{} calls timed: median {median:.4} s per call ({} frames) -> {fps:.3e} frames/s",
        call_s.len(),
        config.frames_per_call()
    ));
    let reward = anakin.greedy_reward(&states[0])?;
    // Every device's copy of the parameters, compared with device 0's.
    let first = anakin.host_params(&states[0])?;
    let mut identical = true;
    for s in &states[1..] {
        identical &= anakin.host_params(s)? == first;
    }
    run.finish()?;
    println!("devices={} params_identical={identical}", config.devices);
    println!("eval_mean_reward={reward:.3} fps={fps:.4e} compile_s={compile_s:.3}");
    if !identical {
        eprintln!("the devices' parameter copies differ after training");
        std::process::exit(1);
    }
    if reward < c.min_reward {
        eprintln!(
            "the greedy policy did not learn Catch (mean reward {reward:.3} < {})",
            c.min_reward
        );
        std::process::exit(1);
    }
    Ok(())
}
