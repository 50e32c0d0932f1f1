//! PureJaxRL's PPO on CartPole-v1 (gymnax's dynamics), ported to Rust: the
//! environments, the actor and critic, the rollout, GAE and the epochs of clipped
//! minibatch updates with Adam run inside compiled programs, the state donated
//! from call to call. The programs are built by [`xlaclient::rl::ppo`]; this is
//! its command line. `bench/ppo_cartpole_jax.py` is the same algorithm in JAX, and
//! `bench/ppo_vs_jax.sh` runs the two side by side.
//!
//! The defaults are PureJaxRL's CartPole configuration (4 environments × 128 steps
//! per update, 976 updates = 500k steps, 4 epochs of 4 minibatches, learning rate
//! 2.5e-4 annealed to 0, γ 0.99, λ 0.95, clip 0.2, entropy 0.01, value 0.5,
//! gradient norm 0.5). The update program runs `updates_per_call` updates per call.
//!
//! Run: `cargo run --release --example ppo_cartpole [-- --help]`; options are set
//! with `--set key=value` (or a TOML file, `--config FILE`). It prints the trace and
//! compile seconds of the two programs, the return of every update (the mean over
//! the update's rollout of each environment's last finished episode return, as
//! PureJaxRL plots it), the environment steps per second over the whole training
//! (compile excluded), the update at which the mean return of the last 10 updates
//! first reaches 475 (solved) and the training seconds until then, and ends with
//! `mean_return=<last 10% of updates> steps_per_s=<…> compile_s=<…> run_s=<training
//! seconds> cpu_s=<CPU seconds of the training, all threads> solve_update=<…>
//! solve_s=<…>` (-1 where not solved or not measured). It exits with status 1 if
//! `mean_return` is below `min_return` (400).
//!
//! The run's directory (`--output-dir`, by default `runs/ppo_cartpole/<time>`)
//! receives the configuration, `metrics.csv` (per update: return and loss), its plot
//! and a checkpoint of the state after each call (`--resume` continues).
//!
//! The client has one CPU device and one worker thread (`worker_threads=1`,
//! [`ClientOptions::worker_threads`]): the program's small kernels run on one
//! worker instead of being handed between several (about a third less CPU time on
//! a 2-core VM; guide 12, "The worker threads"). `--set worker_threads=0` keeps the
//! plugin's default pool (one worker per CPU, or `NPROC`). Sizing the pool is
//! implemented on Linux only: elsewhere the default is 0 (the plugin's pool), and
//! asking for a number is an error.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use xlaclient::rl::ppo::{Ppo, PpoConfig};
use xlaclient::runner::{Help, Runner};
use xlaclient::{Client, ClientOptions, Plugin};

/// The run's configuration; the defaults are PureJaxRL's for CartPole-v1.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(default, deny_unknown_fields)]
struct Config {
    lr: f64,
    num_envs: i64,
    num_steps: i64,
    total_timesteps: i64,
    update_epochs: i64,
    num_minibatches: i64,
    gamma: f64,
    gae_lambda: f64,
    clip_eps: f64,
    ent_coef: f64,
    vf_coef: f64,
    max_grad_norm: f64,
    anneal_lr: bool,
    hidden: i64,
    seed: u32,
    updates_per_call: i64,
    /// Worker threads of the CPU plugin's pool (0: the plugin's default, one per
    /// CPU).
    worker_threads: usize,
    /// The mean return of the last 10% of updates the run must reach.
    min_return: f64,
    /// Print every update's return (else every call's last).
    print_every_update: bool,
}

impl Default for Config {
    fn default() -> Self {
        let p = PpoConfig::default();
        Config {
            lr: p.lr,
            num_envs: p.num_envs,
            num_steps: p.num_steps,
            total_timesteps: p.total_timesteps,
            update_epochs: p.update_epochs,
            num_minibatches: p.num_minibatches,
            gamma: p.gamma,
            gae_lambda: p.gae_lambda,
            clip_eps: p.clip_eps,
            ent_coef: p.ent_coef,
            vf_coef: p.vf_coef,
            max_grad_norm: p.max_grad_norm,
            anneal_lr: p.anneal_lr,
            hidden: p.hidden,
            seed: p.seed,
            updates_per_call: p.updates_per_call,
            // The option is implemented on Linux only (elsewhere it is an error).
            worker_threads: if cfg!(target_os = "linux") { 1 } else { 0 },
            min_return: 400.0,
            print_every_update: true,
        }
    }
}

/// The mean return over the last `SOLVE_WINDOW` updates that counts as solved.
const SOLVED: f64 = 475.0;
/// Updates averaged for the solved criterion.
const SOLVE_WINDOW: usize = 10;

/// CPU seconds (user + system, all threads) this process has used, from
/// `/proc/self/stat` (Linux; `None` elsewhere). In clock ticks of 1/100 s.
fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) close with ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> xlaclient::rl::Result<()> {
    let help = Help {
        about: "PureJaxRL's PPO on gymnax's CartPole-v1: rollout, GAE and clipped minibatch \
                updates with Adam in compiled programs (defaults: PureJaxRL's configuration)."
            .to_string(),
        keys: vec![
            ("lr", "Adam's learning rate (start of the annealing)"),
            ("num_envs", "environments stepped together"),
            ("num_steps", "steps per rollout"),
            ("total_timesteps", "environment steps in all"),
            ("update_epochs", "passes over each rollout"),
            ("num_minibatches", "minibatches per pass"),
            ("gamma", "discount"),
            ("gae_lambda", "GAE's lambda"),
            ("clip_eps", "clipping range of the ratio and the value"),
            ("ent_coef", "entropy bonus coefficient"),
            ("vf_coef", "value loss coefficient"),
            ("max_grad_norm", "global gradient norm clip"),
            ("anneal_lr", "anneal the learning rate linearly to 0"),
            ("hidden", "hidden units per layer (actor and critic)"),
            ("seed", "PRNG seed"),
            ("updates_per_call", "updates per call of the update program"),
            (
                "worker_threads",
                "worker threads of the CPU plugin's pool (default 1 on Linux, else 0; 0: one per CPU)",
            ),
            (
                "min_return",
                "last-10% mean return the run must reach, else exit 1",
            ),
            ("print_every_update", "print every update's return"),
        ],
    };
    let mut run = Runner::<Config>::from_args_with_help(&help)?;
    let c = run.config.clone();
    let config = PpoConfig {
        lr: c.lr,
        num_envs: c.num_envs,
        num_steps: c.num_steps,
        total_timesteps: c.total_timesteps,
        update_epochs: c.update_epochs,
        num_minibatches: c.num_minibatches,
        gamma: c.gamma,
        gae_lambda: c.gae_lambda,
        clip_eps: c.clip_eps,
        ent_coef: c.ent_coef,
        vf_coef: c.vf_coef,
        max_grad_norm: c.max_grad_norm,
        anneal_lr: c.anneal_lr,
        hidden: c.hidden,
        seed: c.seed,
        updates_per_call: c.updates_per_call,
    };
    // One CPU device, as JAX's default CPU client has (the plugin's default of
    // four gives it four worker threads), and one worker thread unless
    // `worker_threads` says otherwise: the program's kernels are small, and handed
    // from thread to thread they cost a third more CPU time on a 2-core machine.
    let mut options = ClientOptions::new().cpu_device_count(1);
    if c.worker_threads > 0 {
        options = options.worker_threads(c.worker_threads);
    }
    let client = Client::new(&Plugin::default_plugin()?, &options)?;
    let ppo = Ppo::new(&client, config.clone())?;
    let (init_s, update_s) = ppo.compile_s();
    let compile_s = init_s + update_s;
    let num_updates = config.num_updates() as u64;
    let per_call = config.updates_per_call as u64;
    println!(
        "envs={} steps={} updates={num_updates} epochs={} minibatches={} updates/call={per_call}",
        config.num_envs, config.num_steps, config.update_epochs, config.num_minibatches
    );
    println!("trace+compile: init {init_s:.3} s, update {update_s:.3} s");

    let mut state = match run.restore(&client, ppo.update_program().input_spec())? {
        Some(state) => state,
        None => ppo.init()?,
    };
    let mut done = run.start_step();
    run.set_total(num_updates);
    let mut returns: Vec<f64> = Vec::new();
    let (mut run_s, mut steps) = (0.0, 0u64);
    let cpu_start = process_cpu_s();
    // The first update at which the mean return of the last `SOLVE_WINDOW` updates
    // reaches `SOLVED`, and the training seconds until then (the call's time
    // shared evenly among its updates).
    let mut solved: Option<(u64, f64)> = None;
    // Calls of `updates_per_call` updates while they fit in the training (the last
    // partial call is left out: its program has a fixed number of updates).
    while done + per_call <= num_updates {
        let t = Instant::now();
        let (next, metrics) = ppo.step(state)?;
        state = next;
        let ret = metrics.mean_return.to_vec::<f32>()?;
        let loss = metrics.loss.to_vec::<f32>()?;
        let call_s = t.elapsed().as_secs_f64();
        steps += config.steps_per_call() as u64;
        for (i, (r, l)) in ret.iter().zip(&loss).enumerate() {
            let u = done + i as u64 + 1;
            run.log(u, &[("return", *r as f64), ("loss", *l as f64)])?;
            if c.print_every_update || i + 1 == ret.len() {
                run.println(&format!("update {u:>5}  return {r:8.2}  loss {l:8.4}"));
            }
            returns.push(*r as f64);
            if solved.is_none() && returns.len() >= SOLVE_WINDOW {
                let recent = &returns[returns.len() - SOLVE_WINDOW..];
                if recent.iter().sum::<f64>() / SOLVE_WINDOW as f64 >= SOLVED {
                    solved = Some((u, run_s + call_s * (i + 1) as f64 / ret.len() as f64));
                }
            }
        }
        run_s += call_s;
        done += per_call;
        run.checkpoint(done, &state)?;
    }
    let cpu_s = process_cpu_s()
        .zip(cpu_start)
        .map(|(end, start)| end - start);
    let steps_per_s = steps as f64 / run_s;
    let tail = &returns[returns.len() - (returns.len() / 10).max(1).min(returns.len())..];
    let mean_return = tail.iter().sum::<f64>() / tail.len().max(1) as f64;
    run.println(&format!(
        "{} updates ({steps} environment steps) in {run_s:.2} s: {steps_per_s:.0} steps/s",
        returns.len()
    ));
    match solved {
        Some((u, s)) => run.println(&format!(
            "solved (mean return of {SOLVE_WINDOW} updates ≥ {SOLVED}) at update {u}, {s:.2} s of training"
        )),
        None => run.println(&format!("not solved (mean return of {SOLVE_WINDOW} updates < {SOLVED})")),
    }
    run.finish()?;
    // -1: not measured (no /proc) or not solved.
    let (solve_update, solve_s) = solved.map_or((-1, -1.0), |(u, s)| (u as i64, s));
    println!(
        "mean_return={mean_return:.2} steps_per_s={steps_per_s:.0} compile_s={compile_s:.3} \
         run_s={run_s:.3} cpu_s={:.2} solve_update={solve_update} solve_s={solve_s:.3}",
        cpu_s.unwrap_or(-1.0)
    );
    if mean_return.is_nan() || mean_return < c.min_return {
        eprintln!(
            "PPO did not learn CartPole: mean return of the last 10% of updates {mean_return:.2} < {}",
            c.min_return
        );
        std::process::exit(1);
    }
    Ok(())
}
