//! What the async batch stepper costs over a plain batched loop, side by side.
//!
//! Workload: `N` Catch environments, each played greedily (argmax of the Q-values)
//! by a randomly initialised MLP 50 → 64 → relu → 3, for `TICKS` steps:
//!   - `plain`: one loop over the batch: `VecEnv::observations` →
//!     `BatchedNet::predict_batch` → argmax → `VecEnv::step` (the anchors' host loop,
//!     `jax_hostloop_catch.py`, in Rust);
//!   - `stepper`: `N` agents written as `async` code, each awaiting one prediction per
//!     step of its own environment, driven by `Stepper::tick`.
//!
//! Same seeds and the same network, so both make the same moves: the bench checks
//! that their returns are equal. Rounds alternate between the two; it prints the
//! median µs per tick (one batched call each) and their ratio, and the median µs per
//! tick spent outside the network call (`BatchedNet::busy`: padding, upload,
//! execute, download), i.e. on the host: environments, observations and, for the
//! stepper, polling the agents, the oneshot channels and copying each answer; the
//! last column is the stepper's extra host time per agent per tick. The host
//! figures move less than the ticks on a loaded machine, where the network call's
//! wait dominates and varies.
//!
//! Run: `cargo bench --bench stepper_overhead` (env `TICKS`, default 900 = 100
//! episodes; `ROUNDS`, default 7; `WAIT=spin` or `WAIT=park` for another
//! `WaitPolicy` than the default `auto`).

use std::time::{Duration, Instant};

use xlaclient::ClientExt;
use xlaclient::nn::{Activation, Mlp};
use xlaclient::pjrt::WaitPolicy;
use xlaclient::rl::Result;
use xlaclient::rl::catch::Catch;
use xlaclient::rl::{BatchSizes, BatchedNet, Environment, Stepper, VecEnv};
use xlaclient::{Client, ClientOptions, Plugin};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn argmax(q: &[f32]) -> usize {
    (0..q.len()).fold(0, |best, i| if q[i] > q[best] { i } else { best })
}

fn net(client: &Client, n: usize) -> Result<BatchedNet> {
    let mlp = Mlp::new(&[50, 64, 3], Activation::Relu);
    let params = client
        .jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?
        .call(&())?;
    let mut net = BatchedNet::new(
        client,
        params,
        &[50],
        BatchSizes::new(&[n])?,
        move |p, obs| mlp.apply(p, obs),
    )?;
    net.compile_all()?;
    Ok(net)
}

/// The plain loop: (seconds, total return).
fn plain(net: &mut BatchedNet, n: usize, ticks: usize) -> Result<(Duration, f32)> {
    let mut envs = VecEnv::new((0..n as u64).map(Catch::new).collect())?;
    let mut total = 0.0;
    let start = Instant::now();
    for _ in 0..ticks {
        let q = net.predict_batch(&envs.observations(), n)?;
        let actions: Vec<usize> = q.chunks_exact(3).map(argmax).collect();
        total += envs.step(&actions)?.iter().map(|t| t.reward).sum::<f32>();
    }
    Ok((start.elapsed(), total))
}

/// The stepper, a new one on `net` (compiled already): (seconds, total return,
/// seconds in the network calls) and the network back.
fn stepper(
    net: BatchedNet,
    n: usize,
    ticks: usize,
) -> Result<(Duration, f32, Duration, BatchedNet)> {
    let mut stepper = Stepper::new(net);
    for i in 0..n as u64 {
        stepper.spawn(move |net| async move {
            let mut env = Catch::new(i);
            let mut total = 0.0;
            for _ in 0..ticks {
                let q = net.predict(env.observation()).await?;
                total += env.step(argmax(&q))?.reward;
            }
            Ok(total)
        });
    }
    let busy = stepper.net().busy();
    let start = Instant::now();
    // `ticks` ticks with a call each, and one in which the agents finish.
    let returns = stepper.run()?;
    let elapsed = start.elapsed();
    let total = returns.into_iter().sum::<Result<f32>>()?;
    let busy = stepper.net().busy() - busy;
    Ok((elapsed, total, busy, stepper.into_net()))
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<()> {
    let ticks = env_or("TICKS", 900);
    let rounds = env_or("ROUNDS", 7);
    let (name, policy) = match std::env::var("WAIT").as_deref() {
        Ok("spin") => (
            "spin (poll up to 1 ms)",
            WaitPolicy::Spin(Duration::from_millis(1)),
        ),
        Ok("park") => ("park", WaitPolicy::Park),
        _ => ("auto", WaitPolicy::Auto),
    };
    let client = Client::new(
        &Plugin::default_plugin()?,
        &ClientOptions::new().wait_policy(policy),
    )?;
    println!(
        "Catch, greedy MLP 50 -> 64 -> relu -> 3, {ticks} ticks per round, {rounds} rounds, wait {name}"
    );
    println!(
        "µs per tick (one batched call), median over rounds; host = the tick outside the network call"
    );
    println!(
        "{:>5} | {:>13} | {:>13} | {:>13} | {:>15} | {:>20} | {:>12}",
        "N",
        "plain tick",
        "stepper tick",
        "stepper/plain",
        "host plain",
        "host stepper",
        "extra/agent"
    );
    for n in [1usize, 16, 64, 256] {
        let mut plain_net = net(&client, n)?;
        let stepper_net = net(&client, n)?;
        // Warm-up, and the check that both make the same moves.
        let (_, want) = plain(&mut plain_net, n, 90)?;
        let (_, got, _, mut stepper_net) = stepper(stepper_net, n, 90)?;
        assert_eq!(want, got, "plain and stepper runs differ");
        let (mut tp, mut ts, mut hp, mut hs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let busy = plain_net.busy();
            let (d, r1) = plain(&mut plain_net, n, ticks)?;
            let busy = plain_net.busy() - busy;
            tp.push(d.as_secs_f64() * 1e6 / ticks as f64);
            hp.push((d - busy).as_secs_f64() * 1e6 / ticks as f64);
            let (d, r2, busy, back) = stepper(stepper_net, n, ticks)?;
            stepper_net = back;
            // Per batched call (the last tick, in which the agents finish, has none).
            ts.push(d.as_secs_f64() * 1e6 / ticks as f64);
            hs.push((d - busy).as_secs_f64() * 1e6 / ticks as f64);
            if r1 != r2 {
                eprintln!("plain and stepper returns differ: {r1} vs {r2}");
                std::process::exit(1);
            }
        }
        let (tp, ts, hp, hs) = (
            median(&mut tp),
            median(&mut ts),
            median(&mut hp),
            median(&mut hs),
        );
        println!(
            "{n:>5} | {tp:>13.1} | {ts:>13.1} | {:>13.3} | {hp:>15.2} | {hs:>20.2} | {:>9.0} ns",
            ts / tp,
            (hs - hp) * 1e3 / n as f64
        );
    }
    Ok(())
}
