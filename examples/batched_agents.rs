//! Agents written as `async` code on Catch, their predictions batched into one
//! network call per tick (`xlaclient::rl::Stepper`, Alpacka's batch stepper).
//!
//! Two kinds of agents share one Q-network (an `nn::Mlp` 50 → 64 → relu → 3,
//! randomly initialised on the device: learning is not the point):
//! - **greedy**: one prediction per step, the argmax of the Q-values;
//! - **planner**: for each of the 3 actions it steps a copy of its environment and
//!   asks for the Q-values of the resulting observation, all three at once
//!   (`join_all`), and takes the action with the best `reward + discount · max Q`.
//!
//! Agent `i` of each kind plays `EPISODES + i % 3` episodes, so agents finish at
//! different times. Every tick the stepper gathers all their requests (1 per greedy
//! agent, 3 per planner) into one execution, padded to a power of two. Every 9 ticks,
//! and whenever the number of requests changes, it prints the requests gathered, the
//! batch size, the calls made, the episodes finished and the mean return of each
//! kind. The Q-values one agent received are checked against
//! the same MLP evaluated in plain Rust. The last line is `calls_per_tick=<the most
//! executable calls made in one tick>` (always 1; the example fails otherwise).
//!
//! Run: `cargo run --release --example batched_agents [-- GREEDY PLANNERS EPISODES]`
//! (default 16 16 20).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use futures::future::join_all;
use xlaclient::ClientExt;
use xlaclient::nn::{Activation, Mlp};
use xlaclient::rl::catch::{Catch, NUM_ACTIONS};
use xlaclient::rl::{BatchSizes, BatchedNet, Environment, NetHandle, Stepper};
use xlaclient::{Client, Tree};

const OBS: usize = 50;
const HID: usize = 64;

/// Episodes finished and their total return, per kind of agent.
#[derive(Default)]
struct Tally {
    episodes: [usize; 2],
    total: [f32; 2],
}

/// The observations one agent sent and the Q-values it got back.
type Seen = Rc<RefCell<Vec<(Vec<f32>, Vec<f32>)>>>;

const GREEDY: usize = 0;
const PLANNER: usize = 1;

fn argmax(xs: &[f32]) -> usize {
    (0..xs.len()).fold(0, |best, i| if xs[i] > xs[best] { i } else { best })
}

/// One prediction per step: the argmax of the Q-values. Agent 0 also keeps what it
/// saw and got, for the check against plain Rust.
async fn greedy(
    net: NetHandle,
    mut env: Catch,
    episodes: usize,
    tally: Rc<RefCell<Tally>>,
    seen: Seen,
) -> xlaclient::rl::Result<()> {
    let mut done = 0;
    let mut ret = 0.0;
    while done < episodes {
        let obs = env.observation();
        let q = net.predict(obs.as_slice()).await?;
        if net.agent() == 0 {
            seen.borrow_mut().push((obs, q.clone()));
        }
        let t = env.step(argmax(&q))?;
        ret += t.reward;
        if t.terminal {
            done += 1;
            let mut tally = tally.borrow_mut();
            tally.episodes[GREEDY] += 1;
            tally.total[GREEDY] += ret;
            ret = 0.0;
        }
    }
    Ok(())
}

/// A one-step lookahead: three predictions per step, awaited together.
async fn planner(
    net: NetHandle,
    mut env: Catch,
    episodes: usize,
    tally: Rc<RefCell<Tally>>,
) -> xlaclient::rl::Result<()> {
    let mut done = 0;
    let mut ret = 0.0;
    while done < episodes {
        let mut outcomes = Vec::with_capacity(NUM_ACTIONS);
        for a in 0..NUM_ACTIONS {
            let mut sim = env.clone();
            outcomes.push((sim.step(a)?, sim.observation()));
        }
        let qs = join_all(outcomes.iter().map(|(_, obs)| net.predict(obs.as_slice()))).await;
        let mut values = Vec::with_capacity(NUM_ACTIONS);
        for ((t, _), q) in outcomes.iter().zip(qs) {
            let q = q?;
            values.push(t.reward + t.discount * q[argmax(&q)]);
        }
        let t = env.step(argmax(&values))?;
        ret += t.reward;
        if t.terminal {
            done += 1;
            let mut tally = tally.borrow_mut();
            tally.episodes[PLANNER] += 1;
            tally.total[PLANNER] += ret;
            ret = 0.0;
        }
    }
    Ok(())
}

/// The MLP's forward pass in plain Rust (`relu(x w1 + b1) w2 + b2`).
fn reference(p: &[Vec<f32>], obs: &[f32]) -> Vec<f32> {
    let (w1, b1, w2, b2) = (&p[0], &p[1], &p[2], &p[3]);
    let h: Vec<f32> = (0..HID)
        .map(|j| (b1[j] + (0..OBS).map(|k| obs[k] * w1[k * HID + j]).sum::<f32>()).max(0.0))
        .collect();
    (0..NUM_ACTIONS)
        .map(|a| {
            b2[a]
                + (0..HID)
                    .map(|j| h[j] * w2[j * NUM_ACTIONS + a])
                    .sum::<f32>()
        })
        .collect()
}

fn main() -> xlaclient::rl::Result<()> {
    let args: Vec<Option<usize>> = std::env::args().skip(1).map(|a| a.parse().ok()).collect();
    let (n_greedy, n_planner, episodes) = match args[..] {
        [] => (16, 16, 20),
        [Some(g), Some(p), Some(e)] if g + p > 0 => (g, p, e),
        _ => {
            eprintln!("usage: batched_agents [GREEDY PLANNERS EPISODES] (numbers, some agents)");
            std::process::exit(2);
        }
    };

    let client = Client::cpu()?;
    let mlp = Mlp::new(
        &[OBS as i64, HID as i64, NUM_ACTIONS as i64],
        Activation::Relu,
    );
    let params = client
        .jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?
        .call(&())?;
    let host_params = params
        .leaves()
        .iter()
        .map(|b| b.to_vec::<f32>())
        .collect::<Result<Vec<_>, xlaclient::RuntimeError>>()?;
    let max_batch = n_greedy + NUM_ACTIONS * n_planner;
    let sizes = BatchSizes::powers_of_two(max_batch.next_power_of_two())?;
    let t = Instant::now();
    let net = BatchedNet::new(
        &client,
        params,
        &[OBS as i64],
        sizes.clone(),
        move |p, obs| mlp.apply(p, obs),
    )?;
    let mut stepper = Stepper::new(net);
    // Compiled now so that the run's figures leave compiles out.
    stepper.net_mut().compile_all()?;
    println!(
        "{n_greedy} greedy agents (1 request per step), {n_planner} planners (3 per step), \
         {episodes} to {} episodes each; batch sizes {:?} compiled in {:.2} s",
        episodes + 2,
        sizes.sizes(),
        t.elapsed().as_secs_f64()
    );

    let tally = Rc::new(RefCell::new(Tally::default()));
    let seen: Seen = Rc::new(RefCell::new(Vec::new()));
    for i in 0..n_greedy {
        let (tally, seen) = (Rc::clone(&tally), Rc::clone(&seen));
        let n = episodes + i % 3;
        stepper.spawn(move |net| greedy(net, Catch::new(i as u64), n, tally, seen));
    }
    for i in 0..n_planner {
        let tally = Rc::clone(&tally);
        let n = episodes + i % 3;
        stepper.spawn(move |net| planner(net, Catch::new((n_greedy + i) as u64), n, tally));
    }

    let mean = |t: &Tally, k: usize| t.total[k] / t.episodes[k].max(1) as f32;
    let t = Instant::now();
    let mut predictions = 0usize;
    let mut last_requests = 0;
    while stepper.running() > 0 {
        let s = stepper.tick()?;
        predictions += s.requests;
        let tick = stepper.ticks();
        if tick % 9 == 0 || s.requests != last_requests {
            last_requests = s.requests;
            let tl = tally.borrow();
            println!(
                "tick {tick:>4}  requests {:>3}  batch {:>3}  calls {}  episodes greedy {:>4} planner {:>4}  \
                 mean return greedy {:+.3} planner {:+.3}",
                s.requests,
                s.batch,
                s.calls,
                tl.episodes[GREEDY],
                tl.episodes[PLANNER],
                mean(&tl, GREEDY),
                mean(&tl, PLANNER)
            );
        }
    }
    let secs = t.elapsed().as_secs_f64();
    for (i, r) in stepper.run()?.into_iter().enumerate() {
        if let Err(e) = r {
            eprintln!("agent {i} failed: {e}");
            std::process::exit(1);
        }
    }

    // The Q-values agent 0 received, against the same MLP in plain Rust.
    let max_abs_err = seen
        .borrow()
        .iter()
        .flat_map(|(obs, q)| {
            reference(&host_params, obs)
                .into_iter()
                .zip(q.clone())
                .map(|(a, b)| (a - b).abs())
        })
        .fold(0.0f32, f32::max);
    let net = stepper.net();
    println!(
        "{} ticks, {} requests (predictions), {} executable calls, {} compiles; {:.0} predictions/s, \
         {:.0} ticks/s, {:.0}% of the time in network calls; \
         agent 0's {} Q-value rows vs plain Rust: max_abs_err={max_abs_err:.2e}",
        stepper.ticks(),
        stepper.requests(),
        net.calls(),
        net.compiles(),
        predictions as f64 / secs,
        stepper.ticks() as f64 / secs,
        100.0 * net.busy().as_secs_f64() / secs,
        seen.borrow().len()
    );
    if max_abs_err > 1e-4 {
        eprintln!("Q-values differ from the plain-Rust forward pass");
        std::process::exit(1);
    }
    let calls_per_tick = stepper.max_calls_in_a_tick();
    println!("calls_per_tick={calls_per_tick}");
    if calls_per_tick != 1 {
        std::process::exit(1);
    }
    Ok(())
}
