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
//! Run: `cargo run --release --example anakin [-- --help]`. It prints the compile
//! time and the frames per second (frames = iterations × rollout × batch per call,
//! the median over `--timed-calls` calls), trains on for `--calls` calls in all,
//! evaluating the greedy policy exactly every `--eval-every` calls (its expected
//! terminal reward over the 5 start columns, computed in plain Rust from the
//! downloaded parameters), and ends with
//! `eval_mean_reward=<value> fps=<value> compile_s=<value>`. It exits with an error
//! if the greedy policy's reward is below 0.9.

use std::time::Instant;

use clap::Parser;
use xlaclient::Client;
use xlaclient::rl::anakin::{Anakin, AnakinConfig};

/// Podracer's Anakin on Catch: the whole training loop in one XLA program.
#[derive(Parser, Debug, Clone)]
struct Args {
    /// Environments (and learners) per iteration.
    #[arg(long, default_value_t = 128)]
    batch: i64,
    /// Steps per rollout.
    #[arg(long, default_value_t = 16)]
    rollout_len: i64,
    /// Updates per call of the compiled program (its fori_loop).
    #[arg(long, default_value_t = 100)]
    iterations: i32,
    /// Calls to train for (training = calls × iterations updates).
    #[arg(long, default_value_t = 20)]
    calls: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 1e-4)]
    lr: f64,
    /// λ of the TD(λ) targets.
    #[arg(long, default_value_t = 0.99)]
    lambda: f64,
    /// PRNG seed (parameters and environments).
    #[arg(long, default_value_t = 42)]
    seed: u32,
    /// One shared parameter copy instead of one per learner (same learning).
    #[arg(long)]
    shared_params: bool,
    /// Differentiate through the rollout scan, as the notebook does.
    #[arg(long)]
    grad_through_scan: bool,
    /// Evaluate the greedy policy every this many calls.
    #[arg(long, default_value_t = 5)]
    eval_every: usize,
    /// Calls timed for the frames-per-second figure (the first calls).
    #[arg(long, default_value_t = 5)]
    timed_calls: usize,
}

fn main() -> xlaclient::Result<()> {
    let args = Args::parse();
    let config = AnakinConfig {
        batch: args.batch,
        rollout_len: args.rollout_len,
        iterations: args.iterations,
        lr: args.lr,
        lambda: args.lambda,
        seed: args.seed,
        shared_params: args.shared_params,
        grad_through_scan: args.grad_through_scan,
        ..AnakinConfig::default()
    };
    let client = Client::cpu()?;
    let anakin = Anakin::new(&client, config.clone())?;
    let compile_s = anakin.compile_s();
    println!(
        "layout={} batch={} rollout={} iterations/call={} lr={} grad_through_scan={}",
        if config.shared_params {
            "shared-params"
        } else {
            "per-learner (notebook)"
        },
        config.batch,
        config.rollout_len,
        config.iterations,
        config.lr,
        config.grad_through_scan
    );
    println!("compile_s={compile_s:.3}");

    let mut state = anakin.init()?;
    let reward = anakin.greedy_reward(&state)?;
    println!("iteration {:>6}  greedy reward {reward:+.2}", 0);
    let mut call_s = Vec::new();
    let calls = args.calls.max(args.timed_calls).max(1);
    for call in 1..=calls {
        let t = Instant::now();
        state = anakin.step(state)?;
        let loss = state.loss.to_scalar::<f32>()?;
        if call_s.len() < args.timed_calls {
            call_s.push(t.elapsed().as_secs_f64());
        }
        if call % args.eval_every.max(1) == 0 || call == calls {
            let reward = anakin.greedy_reward(&state)?;
            let it = call * config.iterations as usize;
            println!("iteration {it:>6}  greedy reward {reward:+.2}  loss {loss:.4}");
        }
    }
    call_s.sort_by(f64::total_cmp);
    let median = call_s.get(call_s.len() / 2).copied().unwrap_or(f64::NAN);
    let fps = config.frames_per_call() / median;
    println!(
        "{} calls timed: median {median:.4} s per call ({} frames) -> {fps:.3e} frames/s",
        call_s.len(),
        config.frames_per_call()
    );
    let reward = anakin.greedy_reward(&state)?;
    println!("eval_mean_reward={reward:.3} fps={fps:.4e} compile_s={compile_s:.3}");
    if reward < 0.9 {
        eprintln!("the greedy policy did not learn Catch (mean reward {reward:.3} < 0.9)");
        std::process::exit(1);
    }
    Ok(())
}
