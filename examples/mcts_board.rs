//! AlphaZero's loop on Connect Four, as Alpacka runs it: each iteration **collects**
//! self-play games with MCTS agents written as `async` code (one agent per game, all
//! their tree leaves batched into one network call per tick by the `Stepper`),
//! **trains** the policy-value network on a replay buffer of the positions
//! (cross-entropy to the search's visit distribution plus the squared error to the
//! game's outcome, Adam, one compiled donating train step), and **updates** the
//! stepper's network with the new parameters (no recompilation).
//!
//! At the end the trained MCTS agent plays `eval_games` games against a uniformly
//! random player and `eval_games` against the same MCTS agent with the untrained
//! network (its initial parameters), alternating who starts; the first
//! `eval_temperature_moves` moves of each MCTS side are sampled from its visit
//! counts (temperature 1) so that the games differ. A game scores 1 for a win, ½
//! for a draw; the rates come with a 95% confidence interval (Wilson's score
//! interval over the games).
//!
//! Run: `cargo run --release --example mcts_board [-- --help]`; every setting is a
//! config key (`--set simulations=64`, …). The last line is
//! `win_rate_vs_random=… win_rate_vs_random_ci95=lo..hi win_rate_vs_untrained=…
//! win_rate_vs_untrained_ci95=lo..hi`; the run fails (exit 1) when a rate is
//! below its `min_*` key.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use xlaclient::nn::{Activation, Mlp, MlpParams, optim};
use xlaclient::rl::agents::{MctsAgent, MctsConfig, SearchResult};
use xlaclient::rl::connect_four::{COLS, ConnectFour, Outcome, ROWS, TwoPlayerGame};
use xlaclient::rl::replay::{HostArray, ReplayBuffer};
use xlaclient::rl::trainer::{Trainer, policy_value_head, policy_value_loss};
use xlaclient::rl::{BatchSizes, BatchedNet, Error, NetHandle, Rng, Stepper};
use xlaclient::runner::{Help, Runner};
use xlaclient::{Client, ClientExt, Op, Tree};

/// The run's configuration.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(default, deny_unknown_fields)]
struct Config {
    iterations: u64,
    selfplay_games: usize,
    simulations: usize,
    c_puct: f64,
    dirichlet_alpha: f64,
    noise_fraction: f64,
    temperature_moves: usize,
    train_steps: usize,
    batch_size: i64,
    lr: f64,
    replay_capacity: usize,
    hidden: i64,
    eval_games: usize,
    eval_simulations: usize,
    eval_temperature_moves: usize,
    seed: u64,
    min_win_rate_vs_random: f64,
    min_win_rate_vs_untrained: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            iterations: 10,
            selfplay_games: 64,
            simulations: 32,
            c_puct: 1.5,
            dirichlet_alpha: 1.0,
            noise_fraction: 0.25,
            temperature_moves: 10,
            train_steps: 150,
            batch_size: 128,
            lr: 2e-3,
            replay_capacity: 40_000,
            hidden: 128,
            eval_games: 200,
            eval_simulations: 32,
            eval_temperature_moves: 4,
            seed: 0,
            min_win_rate_vs_random: 0.8,
            min_win_rate_vs_untrained: 0.5,
        }
    }
}

const OBS: i64 = (2 * ROWS * COLS) as i64;
const ACTIONS: usize = COLS;

/// One training position.
#[derive(Tree)]
struct Position<T> {
    obs: T,
    policy: T,
    value: T,
}

/// A self-play game: per move the observation, the search's visit distribution and
/// the player to move; and how it ended.
struct Game {
    moves: Vec<(Vec<f32>, Vec<f32>, usize)>,
    outcome: Outcome,
    predictions: usize,
}

/// One self-play game: the agent searches every move with Dirichlet noise at the
/// root, sampling moves from the visit counts for the first `temperature_moves`
/// moves, then playing the most visited.
async fn self_play(
    net: NetHandle,
    config: MctsConfig,
    temperature_moves: usize,
    seed: u64,
) -> xlaclient::rl::Result<Game> {
    let mut agent = MctsAgent::new(config.clone(), seed)?;
    let mut g = ConnectFour::new();
    let mut moves = Vec::new();
    let mut predictions = 0;
    while g.outcome().is_none() {
        if g.moves() == temperature_moves {
            agent.set_config(MctsConfig {
                temperature: 0.0,
                ..config.clone()
            })?;
        }
        let r = agent.search(&g, |obs| net.predict(obs)).await?;
        predictions += r.predictions;
        moves.push((g.observation(), r.policy, g.current_player()));
        g.play(r.action)?;
    }
    Ok(Game {
        moves,
        outcome: g.outcome().unwrap_or(Outcome::Draw),
        predictions,
    })
}

/// The board mirrored left to right (observation `[2, 6, 7]` and policy `[7]`):
/// Connect Four's symmetry, doubling the training positions.
fn mirror(obs: &[f32], policy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut o = obs.to_vec();
    for plane in 0..2 {
        for r in 0..ROWS {
            for c in 0..COLS {
                o[plane * ROWS * COLS + r * COLS + c] =
                    obs[plane * ROWS * COLS + r * COLS + (COLS - 1 - c)];
            }
        }
    }
    (o, policy.iter().rev().copied().collect())
}

fn value_for(outcome: Outcome, player: usize) -> f32 {
    match outcome {
        Outcome::Win(p) if p == player => 1.0,
        Outcome::Win(_) => -1.0,
        Outcome::Draw => 0.0,
    }
}

/// A side in the evaluation games.
enum Player {
    /// MCTS with this network (held between move phases).
    Mcts(Option<Box<BatchedNet>>),
    /// Uniformly random legal moves.
    Random,
}

/// Picks the move of every game in `todo` for `player`: for MCTS, one search per
/// game, all run by one stepper (their leaves batched per tick).
fn moves_for(
    player: &mut Player,
    games: &[ConnectFour],
    todo: &[usize],
    config: &MctsConfig,
    temperature_moves: usize,
    rng: &mut Rng,
) -> xlaclient::rl::Result<Vec<usize>> {
    match player {
        Player::Random => todo
            .iter()
            .map(|&i| {
                let legal = games[i].legal_actions();
                Ok(legal[rng.below(legal.len() as u64)? as usize])
            })
            .collect(),
        Player::Mcts(net) => {
            let Some(n) = net.take() else {
                return Err(Error::StepperClosed { agent: None });
            };
            let mut stepper: Stepper<xlaclient::rl::Result<SearchResult>> = Stepper::new(*n);
            for &i in todo {
                let g = games[i].clone();
                let mut c = config.clone();
                if g.moves() < temperature_moves {
                    c.temperature = 1.0;
                }
                let seed = rng.next_u64();
                stepper.spawn(move |net| async move {
                    MctsAgent::new(c, seed)?
                        .search(&g, |obs| net.predict(obs))
                        .await
                });
            }
            let out = stepper.run();
            *net = Some(Box::new(stepper.into_net()));
            out?.into_iter().map(|r| r.map(|r| r.action)).collect()
        }
    }
}

/// Plays `n` games of `a` against `b`, `a` starting the even ones; returns `a`'s
/// scores (1 win, ½ draw, 0 loss).
fn play_match(
    a: &mut Player,
    b: &mut Player,
    n: usize,
    config: &MctsConfig,
    temperature_moves: usize,
    seed: u64,
) -> xlaclient::rl::Result<Vec<f64>> {
    let mut rng = Rng::new(seed);
    let mut games = vec![ConnectFour::new(); n];
    // Game i: `a` plays as player i % 2.
    while games.iter().any(|g| g.outcome().is_none()) {
        for side in 0..2 {
            // side 0: games where `a` is to move; side 1: `b`.
            let todo: Vec<usize> = (0..n)
                .filter(|&i| {
                    let g = &games[i];
                    g.outcome().is_none() && ((g.current_player() == i % 2) == (side == 0))
                })
                .collect();
            if todo.is_empty() {
                continue;
            }
            let player = if side == 0 { &mut *a } else { &mut *b };
            let actions = moves_for(player, &games, &todo, config, temperature_moves, &mut rng)?;
            for (&i, m) in todo.iter().zip(actions) {
                games[i].play(m)?;
            }
        }
    }
    Ok(games
        .iter()
        .enumerate()
        .map(|(i, g)| match g.outcome() {
            Some(Outcome::Win(p)) if p == i % 2 => 1.0,
            Some(Outcome::Draw) => 0.5,
            _ => 0.0,
        })
        .collect())
}

/// The mean score and its 95% Wilson score interval (the score of a game is 1, ½
/// or 0; the interval treats the mean as a proportion of `n` games).
fn rate(scores: &[f64]) -> (f64, f64, f64) {
    let n = scores.len().max(1) as f64;
    let p = scores.iter().sum::<f64>() / n;
    let z = 1.96f64;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> xlaclient::rl::Result<()> {
    let help = Help {
        about: "AlphaZero's loop on Connect Four: MCTS self-play through the batch stepper, \
                a policy-value network trained on a replay buffer, evaluation against a \
                random player and the untrained network."
            .to_string(),
        keys: vec![
            ("iterations", "collect-train-update iterations"),
            (
                "selfplay_games",
                "self-play games per iteration (one async agent each)",
            ),
            ("simulations", "MCTS simulations per self-play move"),
            ("c_puct", "PUCT exploration constant"),
            (
                "dirichlet_alpha",
                "Dirichlet concentration of the root noise",
            ),
            (
                "noise_fraction",
                "weight of the root noise in self-play (0: none)",
            ),
            (
                "temperature_moves",
                "self-play moves sampled from the visit counts",
            ),
            ("train_steps", "train steps per iteration"),
            ("batch_size", "positions per train step"),
            ("lr", "Adam's learning rate"),
            (
                "replay_capacity",
                "positions kept in the replay buffer (FIFO)",
            ),
            ("hidden", "hidden units of the two-layer network"),
            ("eval_games", "games against each opponent at the end"),
            ("eval_simulations", "MCTS simulations per evaluation move"),
            (
                "eval_temperature_moves",
                "evaluation moves sampled from the visit counts",
            ),
            ("seed", "seed of the network, the agents and the sampling"),
            (
                "min_win_rate_vs_random",
                "the rate vs random must reach this, else exit 1",
            ),
            (
                "min_win_rate_vs_untrained",
                "the rate vs untrained must reach this, else exit 1",
            ),
        ],
    };
    let mut run = Runner::<Config>::from_args_with_help(&help)?;
    let c = run.config.clone();
    let client = Client::cpu()?;
    let mlp = Mlp::new(
        &[OBS, c.hidden, c.hidden, ACTIONS as i64 + 1],
        Activation::Relu,
    );
    let seed = c.seed as u32;
    let init = client.jit("init", &(), |b, ()| mlp.init(&b.prng_key(seed)))?;
    let spec = Position {
        obs: xlaclient::Shape::of::<f32>(&[c.batch_size, OBS]),
        policy: xlaclient::Shape::of::<f32>(&[c.batch_size, ACTIONS as i64]),
        value: xlaclient::Shape::of::<f32>(&[c.batch_size]),
    };
    let t = Instant::now();
    let m = mlp.clone();
    let mut trainer = Trainer::new(
        &client,
        init.output_spec(),
        init.call(&())?,
        &spec,
        &optim::adam(c.lr, 0.9, 0.999, 1e-8),
        move |p: &MlpParams<Op>, b: &Position<Op>| {
            policy_value_loss(&policy_value_head(&m.apply(p, &b.obs)), &b.policy, &b.value)
        },
    )?;
    let max_batch = c
        .selfplay_games
        .max(c.eval_games)
        .max(1)
        .next_power_of_two();
    let sizes = BatchSizes::powers_of_two(max_batch)?;
    let m = mlp.clone();
    let mut net = BatchedNet::new(
        &client,
        trainer.params_tree()?,
        &[OBS],
        sizes.clone(),
        move |p, obs| policy_value_head(&m.apply(p, obs)),
    )?;
    let m = mlp.clone();
    let untrained = BatchedNet::new(&client, init.call(&())?, &[OBS], sizes, move |p, obs| {
        policy_value_head(&m.apply(p, obs))
    })?;
    println!(
        "network {OBS} -> {h} -> {h} -> {} (relu; logits and tanh value); train step compiled in {:.2} s",
        ACTIONS + 1,
        t.elapsed().as_secs_f64(),
        h = c.hidden
    );
    let mcts = MctsConfig {
        simulations: c.simulations,
        c_puct: c.c_puct as f32,
        dirichlet_alpha: c.dirichlet_alpha as f32,
        noise_fraction: c.noise_fraction as f32,
        temperature: 1.0,
    };
    let mut buffer: ReplayBuffer<Position<HostArray>> = ReplayBuffer::new(c.replay_capacity)?;
    let mut rng = Rng::new(c.seed ^ 0x5eed);
    run.set_total(c.iterations);
    for it in 1..=c.iterations {
        // Collect: one async agent per self-play game.
        let t = Instant::now();
        let mut stepper: Stepper<xlaclient::rl::Result<Game>> = Stepper::new(net);
        for g in 0..c.selfplay_games {
            let (config, tm) = (mcts.clone(), c.temperature_moves);
            let s = rng.next_u64() ^ (it << 32) ^ g as u64;
            stepper.spawn(move |net| self_play(net, config, tm, s));
        }
        let games = stepper.run()?;
        let ticks = stepper.ticks();
        let calls = stepper.net().calls();
        net = stepper.into_net();
        let collect_s = t.elapsed().as_secs_f64();
        let (mut positions, mut predictions, mut first_wins, mut draws) = (0, 0, 0, 0);
        for game in games {
            let game = game?;
            predictions += game.predictions;
            match game.outcome {
                Outcome::Win(0) => first_wins += 1,
                Outcome::Draw => draws += 1,
                Outcome::Win(_) => {}
            }
            for (obs, policy, player) in game.moves {
                let z = value_for(game.outcome, player);
                let (mo, mp) = mirror(&obs, &policy);
                for (o, p) in [(obs, policy), (mo, mp)] {
                    buffer.push(Position {
                        obs: HostArray::f32(&[OBS], o)?,
                        policy: HostArray::f32(&[ACTIONS as i64], p)?,
                        value: HostArray::scalar_f32(z),
                    })?;
                    positions += 1;
                }
            }
        }
        // Train on batches sampled from the buffer.
        let t = Instant::now();
        let mut loss = 0.0;
        for _ in 0..c.train_steps {
            let batch = buffer.sample(c.batch_size as usize, &mut rng)?;
            loss += trainer.step_host(&batch)? as f64 / c.train_steps.max(1) as f64;
        }
        let train_s = t.elapsed().as_secs_f64();
        // Update: the stepper's network gets the new parameters.
        trainer.publish(&mut net)?;
        run.log(
            it,
            &[
                ("loss", loss),
                ("positions", buffer.len() as f64),
                ("predictions_per_s", predictions as f64 / collect_s),
                ("collect_s", collect_s),
                ("train_s", train_s),
            ],
        )?;
        run.println(&format!(
            "iteration {it:>3}: {} games ({first_wins} first-player wins, {draws} draws), +{positions} positions \
             (buffer {}), {predictions} predictions in {ticks} ticks / {calls} calls, {collect_s:.2} s \
             ({:.0} predictions/s); {} train steps loss {loss:.4} in {train_s:.2} s",
            c.selfplay_games,
            buffer.len(),
            predictions as f64 / collect_s,
            c.train_steps,
        ));
    }
    let compiles = net.compiles();

    // Evaluation.
    let t = Instant::now();
    let eval = MctsConfig {
        simulations: c.eval_simulations,
        noise_fraction: 0.0,
        temperature: 0.0,
        ..mcts
    };
    let mut trained = Player::Mcts(Some(Box::new(net)));
    let vs_random = play_match(
        &mut trained,
        &mut Player::Random,
        c.eval_games,
        &eval,
        c.eval_temperature_moves,
        c.seed ^ 1,
    )?;
    let mut baseline = Player::Mcts(Some(Box::new(untrained)));
    let vs_untrained = play_match(
        &mut trained,
        &mut baseline,
        c.eval_games,
        &eval,
        c.eval_temperature_moves,
        c.seed ^ 2,
    )?;
    let (r, rlo, rhi) = rate(&vs_random);
    let (u, ulo, uhi) = rate(&vs_untrained);
    let count = |s: &[f64], v: f64| s.iter().filter(|&&x| x == v).count();
    run.println(&format!(
        "evaluation ({} games each, {} simulations, {:.1} s): vs random {} wins {} draws {} losses; \
         vs untrained {} wins {} draws {} losses; compiles of the stepper's network: {compiles}",
        c.eval_games,
        c.eval_simulations,
        t.elapsed().as_secs_f64(),
        count(&vs_random, 1.0),
        count(&vs_random, 0.5),
        count(&vs_random, 0.0),
        count(&vs_untrained, 1.0),
        count(&vs_untrained, 0.5),
        count(&vs_untrained, 0.0),
    ));
    run.finish()?;
    println!(
        "win_rate_vs_random={r:.3} win_rate_vs_random_ci95={rlo:.3}..{rhi:.3} \
         win_rate_vs_untrained={u:.3} win_rate_vs_untrained_ci95={ulo:.3}..{uhi:.3}"
    );
    if r < c.min_win_rate_vs_random || u < c.min_win_rate_vs_untrained {
        eprintln!(
            "below the bar: vs random {r:.3} (min {}), vs untrained {u:.3} (min {})",
            c.min_win_rate_vs_random, c.min_win_rate_vs_untrained
        );
        std::process::exit(1);
    }
    Ok(())
}
