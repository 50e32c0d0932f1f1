//! MCTS agents through the async stepper against a plain batched loop doing the
//! same predictions, for 1, 8 and 64 agents (env `AGENTS`, comma-separated).
//!
//! Workload: each agent searches one Connect Four position (the empty board
//! after `i % 7` random moves) with `SIMS` simulations (default 64) per move and
//! plays `MOVES` moves (default 4), with a randomly initialised policy-value MLP
//! 84 → 64 → relu → 8 (logits and tanh value):
//!   - `stepper`: one `async` agent per game awaiting `net.predict(leaf)` for
//!     each simulation (`MctsAgent::search`), run by `Stepper`: all agents' leaves
//!     of a tick in one batched call;
//!   - `plain`: one loop over the games with the same search as a state machine
//!     (`MctsAgent::start`, `Search::next_leaf`/`give`): gather every game's next
//!     leaf, one `BatchedNet::predict_batch`, hand each its row.
//!
//! Same seeds and network, so both make the same predictions and moves (the bench
//! checks the visit counts are equal). An agent step is one move (one search).
//! Rounds alternate; the median agent steps per second of each and their ratio
//! are printed, with the predictions per second.
//!
//! Run: `cargo bench --bench mcts_stepper` (env `AGENTS`, `SIMS`, `MOVES`,
//! `ROUNDS` default 5).

use std::time::Instant;

use xlaclient::Client;
use xlaclient::ClientExt;
use xlaclient::nn::{Activation, Mlp};
use xlaclient::rl::Result;
use xlaclient::rl::agents::{MctsAgent, MctsConfig, SearchResult};
use xlaclient::rl::connect_four::{ConnectFour, TwoPlayerGame};
use xlaclient::rl::trainer::policy_value_head;
use xlaclient::rl::{BatchSizes, BatchedNet, Rng, Stepper};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn net(client: &Client, n: usize) -> Result<BatchedNet> {
    let mlp = Mlp::new(&[84, 64, 8], Activation::Relu);
    let params = client
        .jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?
        .call(&())?;
    let mut net = BatchedNet::new(
        client,
        params,
        &[84],
        BatchSizes::powers_of_two(n)?,
        move |p, obs| policy_value_head(&mlp.apply(p, obs)),
    )?;
    net.compile_all()?;
    Ok(net)
}

fn positions(n: usize) -> Result<Vec<ConnectFour>> {
    let mut rng = Rng::new(1);
    (0..n)
        .map(|i| {
            let mut g = ConnectFour::new();
            for _ in 0..i % 7 {
                let legal = g.legal_actions();
                g.play(legal[rng.below(legal.len() as u64)? as usize])?;
            }
            Ok(g)
        })
        .collect()
}

fn config(sims: usize) -> MctsConfig {
    MctsConfig {
        simulations: sims,
        ..MctsConfig::default()
    }
}

/// Stepper: one async agent per game. Returns the visit counts of every search.
fn stepper(
    net: BatchedNet,
    games: &[ConnectFour],
    sims: usize,
    moves: usize,
) -> Result<(Vec<Vec<u32>>, BatchedNet, usize)> {
    let mut stepper: Stepper<Result<Vec<Vec<u32>>>> = Stepper::new(net);
    for (i, g) in games.iter().enumerate() {
        let mut g = g.clone();
        stepper.spawn(move |net| async move {
            let mut agent = MctsAgent::new(config(sims), i as u64)?;
            let mut visits = Vec::new();
            for _ in 0..moves {
                if g.outcome().is_some() {
                    break;
                }
                let r: SearchResult = agent.search(&g, |obs| net.predict(obs)).await?;
                g.play(r.action)?;
                visits.push(r.visits);
            }
            Ok(visits)
        });
    }
    let out = stepper.run()?;
    let requests = stepper.requests();
    let net = stepper.into_net();
    let mut all = vec![Vec::new(); moves];
    for v in out {
        for (m, vis) in v?.into_iter().enumerate() {
            all[m].push(vis);
        }
    }
    Ok((all.into_iter().flatten().collect(), net, requests))
}

/// Plain loop: the same searches as state machines, leaves gathered by hand.
fn plain(
    net: &mut BatchedNet,
    games: &[ConnectFour],
    sims: usize,
    moves: usize,
) -> Result<Vec<Vec<u32>>> {
    let mut games = games.to_vec();
    let mut agents: Vec<MctsAgent> = (0..games.len())
        .map(|i| MctsAgent::new(config(sims), i as u64))
        .collect::<Result<_>>()?;
    let mut visits = Vec::new();
    for _ in 0..moves {
        let live: Vec<usize> = (0..games.len())
            .filter(|&i| games[i].outcome().is_none())
            .collect();
        let mut searches = Vec::new();
        for (i, (a, g)) in agents.iter_mut().zip(&games).enumerate() {
            if g.outcome().is_none() {
                searches.push(a.start(g)?);
            } else {
                debug_assert!(!live.contains(&i));
            }
        }
        let mut obs = Vec::new();
        loop {
            obs.clear();
            let mut waiting = Vec::new();
            for (k, s) in searches.iter_mut().enumerate() {
                if let Some(o) = s.next_leaf()? {
                    obs.extend_from_slice(&o);
                    waiting.push(k);
                }
            }
            if waiting.is_empty() {
                break;
            }
            let rows = net.predict_batch(&obs, waiting.len())?;
            for (j, &k) in waiting.iter().enumerate() {
                searches[k].give(&rows[j * 8..(j + 1) * 8])?;
            }
        }
        let results = searches
            .into_iter()
            .map(|s| s.finish())
            .collect::<Result<Vec<_>>>()?;
        for (&i, r) in live.iter().zip(results) {
            games[i].play(r.action)?;
            visits.push(r.visits);
        }
    }
    Ok(visits)
}

fn main() -> Result<()> {
    let sims = env_or("SIMS", 64);
    let moves = env_or("MOVES", 4);
    let rounds = env_or("ROUNDS", 5);
    let agents: Vec<usize> = std::env::var("AGENTS")
        .unwrap_or_else(|_| "1,8,64".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let client = Client::cpu()?;
    println!("{sims} simulations per move, {moves} moves per agent, {rounds} rounds (median)");
    println!("agents  stepper steps/s  plain steps/s  stepper/plain  predictions/s (stepper)");
    for &n in &agents {
        let games = positions(n)?;
        let mut net_s = net(&client, n)?;
        let mut net_p = net(&client, n)?;
        let (mut ts, mut tp) = (Vec::new(), Vec::new());
        let mut predictions = 0;
        for _ in 0..rounds {
            let t = Instant::now();
            let (vs, back, requests) = stepper(net_s, &games, sims, moves)?;
            ts.push(t.elapsed().as_secs_f64());
            net_s = back;
            predictions = requests;
            let t = Instant::now();
            let vp = plain(&mut net_p, &games, sims, moves)?;
            tp.push(t.elapsed().as_secs_f64());
            let mut a = vs.clone();
            let mut b = vp.clone();
            a.sort();
            b.sort();
            if a != b {
                eprintln!("the stepper and the plain loop searched differently");
                std::process::exit(1);
            }
        }
        ts.sort_by(f64::total_cmp);
        tp.sort_by(f64::total_cmp);
        let (ms, mp) = (ts[ts.len() / 2], tp[tp.len() / 2]);
        let steps = (n * moves) as f64;
        println!(
            "{n:>6}  {:>15.1}  {:>13.1}  {:>13.2}  {:>10.0}",
            steps / ms,
            steps / mp,
            mp / ms,
            predictions as f64 / ms
        );
    }
    Ok(())
}
