//! Classic control (`xlaclient::rl::classic`): the host CartPole-v1 and Acrobot-v1
//! replay episodes recorded from gymnasium 1.4.0 (`scripts/record_gymnasium.py`,
//! `tests/data/gymnasium_{cartpole,acrobot}.json`: the same initial state and actions
//! give every observation to 1e-6, the rewards, terminations and truncations
//! exactly); the device CartPole (`rl::cartpole`, f32) and the device Acrobot
//! (`rl::classic::acrobot`, f32) against the host ones (f64) on the CPU plugin;
//! automatic resets, truncation's discount, clones, and bad input refused with errors.

mod common;

use common::{Rng as TestRng, client};
use serde_json::Value;
use xlaclient::rl::classic::{AcrobotEnv, CartPoleEnv, EpisodeStep, acrobot};
use xlaclient::rl::{Environment, Error, Rng, VecEnv, cartpole};
use xlaclient::{ClientExt, ElementType, Op, Shape};

// ------------------------------------------------------------ the recordings

fn recording(name: &str) -> Value {
    let path = format!(
        "{}/tests/data/gymnasium_{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read"))
        .expect("parse the recording");
    assert_eq!(
        v["gymnasium"], "1.4.0",
        "recorded with the pinned gymnasium"
    );
    v
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

fn state4(v: &Value) -> [f64; 4] {
    f64s(v).try_into().expect("four values")
}

/// Replays every recorded episode through `make(initial state)` with
/// `step_episode`; returns (episodes, steps, terminated, truncated, worst |Δobs|).
fn replay<E: Environment>(
    name: &str,
    make: impl Fn([f64; 4]) -> E,
    step: impl Fn(&mut E, usize) -> xlaclient::rl::Result<EpisodeStep>,
    ended: impl Fn(&E) -> bool,
) -> (usize, usize, usize, usize, f64) {
    let rec = recording(name);
    let (mut steps, mut terms, mut truncs, mut worst) = (0, 0, 0, 0f64);
    let episodes = rec["episodes"].as_array().expect("episodes");
    for ep in episodes {
        let seed = &ep["seed"];
        let mut env = make(state4(&ep["initial_state"]));
        let check_obs = |env: &E, want: &Value, what: &str, worst: &mut f64| {
            let want = f64s(want);
            let got = env.observation();
            assert_eq!(got.len(), want.len());
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let d = (f64::from(*g) - w).abs();
                *worst = worst.max(d);
                assert!(
                    d <= 1e-6,
                    "{name} seed {seed} {what} value {k}: ours {g}, gymnasium {w}"
                );
            }
        };
        check_obs(
            &env,
            &ep["initial_observation"],
            "initial observation",
            &mut worst,
        );
        let n = ep["actions"].as_array().expect("actions").len();
        for t in 0..n {
            let a = ep["actions"][t].as_u64().expect("action") as usize;
            let s = step(&mut env, a).expect("step");
            let want = EpisodeStep {
                reward: ep["rewards"][t].as_f64().expect("reward") as f32,
                terminated: ep["terminated"][t].as_bool().expect("bool"),
                truncated: ep["truncated"][t].as_bool().expect("bool"),
            };
            assert_eq!(s, want, "{name} seed {seed} step {t}");
            check_obs(
                &env,
                &ep["observations"][t],
                &format!("step {t}"),
                &mut worst,
            );
            // Only the last recorded step ends the episode.
            assert_eq!(ended(&env), t + 1 == n, "{name} seed {seed} step {t}");
            terms += s.terminated as usize;
            truncs += s.truncated as usize;
        }
        steps += n;
        // An ended episode refuses further steps until reset.
        let err = step(&mut env, 0).expect_err("stepping an ended episode");
        assert!(err.to_string().contains("reset"), "{err}");
    }
    (episodes.len(), steps, terms, truncs, worst)
}

#[test]
fn cartpole_replays_gymnasium_episodes() {
    let (episodes, steps, terms, truncs, worst) = replay(
        "cartpole",
        |s| CartPoleEnv::from_state(s, Rng::new(0)).expect("finite state"),
        CartPoleEnv::step_episode,
        CartPoleEnv::episode_ended,
    );
    // The recording ends episodes both ways: by falling or leaving the track, and by
    // the 500-step limit.
    assert_eq!(episodes, 6);
    assert!(
        terms >= 4 && truncs >= 1,
        "{terms} terminated, {truncs} truncated"
    );
    eprintln!("CartPole: {episodes} episodes, {steps} steps, worst |obs - gymnasium| = {worst:e}");
}

#[test]
fn acrobot_replays_gymnasium_episodes() {
    let (episodes, steps, terms, truncs, worst) = replay(
        "acrobot",
        |s| AcrobotEnv::from_state(s, Rng::new(0)).expect("valid state"),
        AcrobotEnv::step_episode,
        AcrobotEnv::episode_ended,
    );
    assert_eq!(episodes, 5);
    assert!(
        terms >= 4 && truncs >= 1,
        "{terms} terminated, {truncs} truncated"
    );
    eprintln!("Acrobot: {episodes} episodes, {steps} steps, worst |obs - gymnasium| = {worst:e}");
}

// ----------------------------------------------- the Environment trait's view

#[test]
fn environment_step_resets_and_keeps_discount_one_at_truncation() {
    // gymnasium's 500-step controller episode through Environment::step: 499
    // ordinary steps, then terminal with discount 1 (truncated), and a fresh episode.
    let rec = recording("cartpole");
    let ep = &rec["episodes"][3];
    assert_eq!(ep["truncated"][499], true);
    let mut env = CartPoleEnv::from_state(state4(&ep["initial_state"]), Rng::new(5)).unwrap();
    for t in 0..500 {
        let a = ep["actions"][t].as_u64().unwrap() as usize;
        let tr = env.step(a).unwrap();
        assert_eq!(tr.reward, 1.0);
        assert_eq!((tr.terminal, tr.discount), (t == 499, 1.0), "step {t}");
    }
    assert_eq!(env.steps(), 0);
    assert!(!env.episode_ended());
    assert!(
        env.state().iter().all(|v| v.abs() < 0.05),
        "{:?}",
        env.state()
    );
    // A termination: discount 0, and the reset draws from the environment's
    // generator (the same draws as a fresh environment of that seed, after its own).
    let ep = &rec["episodes"][1];
    let mut env = CartPoleEnv::from_state(state4(&ep["initial_state"]), Rng::new(9)).unwrap();
    let n = ep["actions"].as_array().unwrap().len();
    for t in 0..n {
        let tr = env
            .step(ep["actions"][t].as_u64().unwrap() as usize)
            .unwrap();
        assert_eq!(
            (tr.terminal, tr.discount),
            (t + 1 == n, if t + 1 == n { 0.0 } else { 1.0 })
        );
    }
    assert_eq!(env.state(), CartPoleEnv::new(9).state());

    // Acrobot: the pumping episode's last step terminates (reward 0, discount 0).
    let rec = recording("acrobot");
    let ep = &rec["episodes"][1];
    let mut env = AcrobotEnv::from_state(state4(&ep["initial_state"]), Rng::new(2)).unwrap();
    let n = ep["actions"].as_array().unwrap().len();
    for t in 0..n {
        let tr = env
            .step(ep["actions"][t].as_u64().unwrap() as usize)
            .unwrap();
        let last = t + 1 == n;
        assert_eq!(
            (tr.reward, tr.terminal, tr.discount),
            if last {
                (0.0, true, 0.0)
            } else {
                (-1.0, false, 1.0)
            },
            "step {t}"
        );
    }
    assert_eq!(env.state(), AcrobotEnv::new(2).state());
    // Reset states are f32 values in [-0.1, 0.1), as gymnasium's.
    assert!(
        env.state()
            .iter()
            .all(|&v| v.abs() < 0.1 && v == v as f32 as f64)
    );
}

#[test]
fn clones_simulate_the_same_future() {
    // A copy stepped ahead (a planner's simulation) sees what the original then sees,
    // across resets: the generator is copied with the state.
    let mut rng = TestRng(3);
    let actions: Vec<usize> = (0..400).map(|_| (rng.next_u64() % 2) as usize).collect();
    let original = CartPoleEnv::new(17);
    let mut ahead = original.clone();
    let mut env = original;
    let mut ends = 0;
    for &a in &actions {
        let (x, y) = (ahead.step(a).unwrap(), env.step(a).unwrap());
        assert_eq!(x, y);
        assert_eq!(ahead.observation(), env.observation());
        ends += x.terminal as usize;
    }
    assert!(ends >= 5, "{ends} episodes ended");
    let mut a = AcrobotEnv::new(4);
    let mut b = a.clone();
    for t in 0..600 {
        let act = t % 3;
        assert_eq!(a.step(act).unwrap(), b.step(act).unwrap());
        assert_eq!(a.state(), b.state());
    }
}

// ------------------------------------------------------------------ bad input

#[test]
fn bad_input_is_an_error() {
    let e = CartPoleEnv::from_state([0.0, f64::NAN, 0.0, 0.0], Rng::new(0)).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { what: "state", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("x_dot = NaN"), "{e}");
    let e = CartPoleEnv::from_state([0.0, 0.0, 0.0, f64::INFINITY], Rng::new(0)).unwrap_err();
    assert!(e.to_string().contains("theta_dot = inf"), "{e}");
    let e = AcrobotEnv::from_state([0.0, f64::NEG_INFINITY, 0.0, 0.0], Rng::new(0)).unwrap_err();
    assert!(e.to_string().contains("theta2 = -inf"), "{e}");
    let e = AcrobotEnv::from_state([4.0, 0.0, 0.0, 0.0], Rng::new(0)).unwrap_err();
    assert!(e.to_string().contains("theta1 = 4"), "{e}");
    let e = AcrobotEnv::from_state([0.0, 0.0, 0.0, 30.0], Rng::new(0)).unwrap_err();
    assert!(e.to_string().contains("dtheta2 = 30"), "{e}");

    let mut env = CartPoleEnv::new(1);
    let before = env.clone();
    let e = env.step(2).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidAction {
                action: 2,
                actions: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(env, before, "a refused action leaves the state");
    let mut out = [0.0f32; 3];
    assert!(matches!(
        env.observe(&mut out),
        Err(Error::Length {
            given: 3,
            expected: 4,
            ..
        })
    ));

    let mut env = AcrobotEnv::new(1);
    let e = env.step_episode(3).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidAction {
                action: 3,
                actions: 3,
                ..
            }
        ),
        "{e}"
    );
    let mut out = [0.0f32; 4];
    assert!(matches!(
        env.observe(&mut out),
        Err(Error::Length {
            given: 4,
            expected: 6,
            ..
        })
    ));
}

// ------------------------------------------------------- device against host

#[test]
fn device_cartpole_agrees_with_the_gymnasium_host_cartpole() {
    // gymnax's f32 CartPole ops (rl::cartpole) against CartPoleEnv (f64, gymnasium's
    // dynamics): same starts, actions and reset rows, 300 steps of 6 environments.
    // The two differ only in precision (f32 vs f64), so the states agree to 1e-4
    // (relative to 1 + |value|), and the ends of the episodes exactly.
    let (batch, steps) = (6i64, 300i64);
    let mut rng = TestRng(21);
    let starts = rng.vec((batch * 4) as usize, -0.05, 0.05);
    let resets = rng.vec((steps * batch * 4) as usize, -0.05, 0.05);
    let actions: Vec<i32> = (0..steps * batch)
        .map(|t| {
            let r = rng.next_u64();
            // Mostly a balancing push pattern (alternating), with random runs.
            if r % 3 == 0 {
                (r >> 8) as i32 & 1
            } else {
                (t / batch) as i32 & 1
            }
        })
        .collect();
    let spec = (
        Shape::of::<f32>(&[batch, 4]),
        Shape::of::<i32>(&[steps, batch]),
        Shape::of::<f32>(&[steps, batch, 4]),
    );
    let run = client()
        .jit(
            "cartpole_vs_gymnasium",
            &spec,
            |b, (start, a, r): (Op, Op, Op)| {
                let init = cartpole::from_rows(&start);
                let (_, (obs, dones)) = b.scan(init, (a, r), |s, (a, r)| {
                    let (next, obs, _, done) = cartpole::step(&s, &a, &r);
                    (next, (obs, done.convert(ElementType::S32)))
                });
                (obs, dones)
            },
        )
        .expect("compile");
    let args = (
        client().buffer_from_host(&starts, &[batch, 4]).unwrap(),
        client()
            .buffer_from_host(&actions, &[steps, batch])
            .unwrap(),
        client()
            .buffer_from_host(&resets, &[steps, batch, 4])
            .unwrap(),
    );
    let (obs, dones) = run.call(&args).expect("run");
    let (obs, dones) = (obs.to_vec::<f32>().unwrap(), dones.to_vec::<i32>().unwrap());
    let row =
        |v: &[f32], i: usize| -> [f64; 4] { std::array::from_fn(|k| f64::from(v[i * 4 + k])) };
    let (mut ends, mut worst) = (0, 0f64);
    for e in 0..batch as usize {
        let mut env = CartPoleEnv::from_state(row(&starts, e), Rng::new(0)).unwrap();
        for t in 0..steps as usize {
            let i = t * batch as usize + e;
            let s = env.step_episode(actions[i] as usize).unwrap();
            assert_eq!(dones[i] != 0, s.ended(), "env {e} step {t}");
            if s.ended() {
                env = CartPoleEnv::from_state(row(&resets, i), Rng::new(0)).unwrap();
                ends += 1;
            }
            for (k, h) in env.state().iter().enumerate() {
                let d = (f64::from(obs[i * 4 + k]) - h).abs();
                worst = worst.max(d / (1.0 + h.abs()));
                assert!(
                    d <= 1e-4 * (1.0 + h.abs()),
                    "env {e} step {t} value {k}: device {} host {h}",
                    obs[i * 4 + k]
                );
            }
        }
    }
    assert!(ends >= 2 * batch as usize, "{ends} episodes ended");
    eprintln!(
        "device CartPole (f32) vs CartPoleEnv (f64): {ends} episodes, worst relative {worst:e}"
    );
}

/// Runs the device Acrobot for `steps` steps of `batch` environments from `starts`
/// with `actions` and reset rows `resets`; returns the observations, rewards,
/// terminations and truncations, flattened `[steps, batch, ...]`.
fn device_acrobot(
    starts: &[f32],
    actions: &[i32],
    resets: &[f32],
    batch: i64,
    steps: i64,
) -> (Vec<f32>, Vec<f32>, Vec<i32>, Vec<i32>) {
    let spec = (
        Shape::of::<f32>(&[batch, 4]),
        Shape::of::<i32>(&[steps, batch]),
        Shape::of::<f32>(&[steps, batch, 4]),
    );
    let run = client()
        .jit("acrobot_steps", &spec, |b, (start, a, r): (Op, Op, Op)| {
            let init = acrobot::from_rows(&start);
            let (_, (obs, rewards, terms, truncs)) = b.scan(init, (a, r), |s, (a, r)| {
                let (next, obs, reward, term, trunc) = acrobot::step(&s, &a, &r);
                (
                    next,
                    (
                        obs,
                        reward,
                        term.convert(ElementType::S32),
                        trunc.convert(ElementType::S32),
                    ),
                )
            });
            (obs, rewards, terms, truncs)
        })
        .expect("compile");
    let args = (
        client().buffer_from_host(starts, &[batch, 4]).unwrap(),
        client().buffer_from_host(actions, &[steps, batch]).unwrap(),
        client()
            .buffer_from_host(resets, &[steps, batch, 4])
            .unwrap(),
    );
    let (o, r, te, tr) = run.call(&args).expect("run");
    (
        o.to_vec().unwrap(),
        r.to_vec().unwrap(),
        te.to_vec().unwrap(),
        tr.to_vec().unwrap(),
    )
}

#[test]
fn device_acrobot_follows_the_host_acrobot_for_60_steps() {
    // The recorded pumping episodes on the device in f32 from gymnasium's initial
    // states with its actions, free running, against AcrobotEnv (f64). The double
    // pendulum is chaotic and these episodes swing hard, so f32 and f64 drift apart
    // (by ~1e-2 relative after 90 steps); over the first 60 steps the observations
    // agree to 1e-4 relative (to 1 + |value|), and no episode ends. The step from every
    // state of the full episodes is checked in the next test.
    let rec = recording("acrobot");
    let eps: Vec<&Value> = rec["episodes"].as_array().unwrap()[1..].iter().collect();
    let (batch, steps) = (eps.len() as i64, 60i64);
    let starts: Vec<f32> = eps
        .iter()
        .flat_map(|e| state4(&e["initial_state"]).map(|v| v as f32))
        .collect();
    let mut actions = vec![1i32; (steps * batch) as usize];
    for (e, ep) in eps.iter().enumerate() {
        for t in 0..steps as usize {
            actions[t * batch as usize + e] = ep["actions"][t].as_i64().unwrap() as i32;
        }
    }
    let resets = vec![0.0f32; (steps * batch * 4) as usize];
    let (obs, rewards, terms, truncs) = device_acrobot(&starts, &actions, &resets, batch, steps);
    let mut worst = 0f64;
    for (e, ep) in eps.iter().enumerate() {
        let mut env = AcrobotEnv::from_state(state4(&ep["initial_state"]), Rng::new(0)).unwrap();
        for t in 0..steps as usize {
            let i = t * batch as usize + e;
            let s = env.step_episode(actions[i] as usize).unwrap();
            assert_eq!((s.reward, s.terminated, s.truncated), (-1.0, false, false));
            assert_eq!(
                (rewards[i], terms[i], truncs[i]),
                (-1.0, 0, 0),
                "episode {e} step {t}"
            );
            for (k, h) in env.observation().iter().enumerate() {
                let d = f64::from((obs[i * 6 + k] - h).abs()) / (1.0 + f64::from(h.abs()));
                worst = worst.max(d);
                assert!(
                    d <= 1e-4,
                    "episode {e} step {t} value {k}: device {} host {h}",
                    obs[i * 6 + k]
                );
            }
        }
    }
    eprintln!(
        "device Acrobot (f32) vs AcrobotEnv (f64), 4 episodes x 60 steps: worst relative {worst:e}"
    );
}

#[test]
fn device_acrobot_step_matches_the_host_step_along_gymnasium_episodes() {
    // One device step (acrobot::step_env, f32) from every state of the five recorded
    // episodes (the host's f64 state rounded to f32, and its step count), with the
    // recorded action, against the host's step from the f64 state: next states to
    // 1e-5 relative (to 1 + |value|), rewards, terminations and truncations exactly
    // (the last step of each episode ends it: four by the line, one by the limit).
    let rec = recording("acrobot");
    let eps = rec["episodes"].as_array().unwrap();
    let batch = eps.len() as i64;
    let spec = (
        Shape::of::<f32>(&[batch, 4]),
        Shape::of::<i32>(&[batch]),
        Shape::of::<i32>(&[batch]),
    );
    let one_step = client()
        .jit(
            "acrobot_one_step",
            &spec,
            |b, (rows, time, a): (Op, Op, Op)| {
                let s = acrobot::AcrobotState {
                    time,
                    ..acrobot::from_rows(&rows)
                };
                let (n, reward, term, trunc) = acrobot::step_env(&s, &a);
                let next = b.stack(&[&n.theta1, &n.theta2, &n.dtheta1, &n.dtheta2], 1);
                (
                    next,
                    reward,
                    term.convert(ElementType::S32),
                    trunc.convert(ElementType::S32),
                )
            },
        )
        .expect("compile");
    let mut envs: Vec<AcrobotEnv> = eps
        .iter()
        .map(|e| AcrobotEnv::from_state(state4(&e["initial_state"]), Rng::new(0)).unwrap())
        .collect();
    let lens: Vec<usize> = eps
        .iter()
        .map(|e| e["actions"].as_array().unwrap().len())
        .collect();
    let (mut worst, mut checked, mut ends) = (0f64, 0usize, 0usize);
    for t in 0..*lens.iter().max().unwrap() {
        let rows: Vec<f32> = envs
            .iter()
            .flat_map(|e| e.state().map(|v| v as f32))
            .collect();
        let time: Vec<i32> = envs.iter().map(|e| e.steps() as i32).collect();
        let actions: Vec<i32> = (0..eps.len())
            .map(|e| {
                if t < lens[e] {
                    eps[e]["actions"][t].as_i64().unwrap() as i32
                } else {
                    1
                }
            })
            .collect();
        let args = (
            client().buffer_from_host(&rows, &[batch, 4]).unwrap(),
            client().buffer_from_host(&time, &[batch]).unwrap(),
            client().buffer_from_host(&actions, &[batch]).unwrap(),
        );
        let (next, reward, term, trunc) = one_step.call(&args).expect("run");
        let (next, reward, term, trunc) = (
            next.to_vec::<f32>().unwrap(),
            reward.to_vec::<f32>().unwrap(),
            term.to_vec::<i32>().unwrap(),
            trunc.to_vec::<i32>().unwrap(),
        );
        for (e, env) in envs.iter_mut().enumerate() {
            if t >= lens[e] {
                continue;
            }
            let s = env.step_episode(actions[e] as usize).unwrap();
            assert_eq!(
                s.ended(),
                t + 1 == lens[e],
                "the recording's end, episode {e}"
            );
            assert_eq!(
                (reward[e], term[e] != 0, trunc[e] != 0),
                (s.reward, s.terminated, s.truncated),
                "episode {e} step {t}"
            );
            for (k, h) in env.state().iter().enumerate() {
                let mut d = (f64::from(next[e * 4 + k]) - h).abs();
                if k < 2 {
                    // Angles: the same point of the circle (a wrap at ±π may differ).
                    d = d.min((d - 2.0 * std::f64::consts::PI).abs());
                }
                let d = d / (1.0 + h.abs());
                worst = worst.max(d);
                assert!(
                    d <= 1e-5,
                    "episode {e} step {t} value {k}: device {} host {h}",
                    next[e * 4 + k]
                );
            }
            checked += 1;
            ends += s.ended() as usize;
        }
    }
    assert_eq!((checked, ends), (lens.iter().sum::<usize>(), eps.len()));
    eprintln!("device Acrobot step vs host step: {checked} states, worst relative {worst:e}");
}

#[test]
fn device_acrobot_truncates_at_500_steps_and_resets() {
    // No torque from small angles: the links swing gently (never near the line, and
    // not chaotic), so f32 and f64 stay within 1e-4 over 510 steps; every row is
    // truncated at its 500th step (reward -1, not terminated) and restarts from its
    // reset row.
    let (batch, steps) = (4i64, 510i64);
    let mut rng = TestRng(8);
    let starts = rng.vec((batch * 4) as usize, -0.1, 0.1);
    let resets = rng.vec((steps * batch * 4) as usize, -0.1, 0.1);
    let actions = vec![1i32; (steps * batch) as usize];
    let (obs, rewards, terms, truncs) = device_acrobot(&starts, &actions, &resets, batch, steps);
    let row =
        |v: &[f32], i: usize| -> [f64; 4] { std::array::from_fn(|k| f64::from(v[i * 4 + k])) };
    let mut worst = 0f64;
    for e in 0..batch as usize {
        let mut env = AcrobotEnv::from_state(row(&starts, e), Rng::new(0)).unwrap();
        for t in 0..steps as usize {
            let i = t * batch as usize + e;
            let s = env.step_episode(1).unwrap();
            assert_eq!(
                (s.terminated, s.truncated),
                (false, t == 499),
                "row {e} step {t}"
            );
            assert_eq!(
                (rewards[i], terms[i], truncs[i]),
                (-1.0, 0, (t == 499) as i32)
            );
            if s.ended() {
                env = AcrobotEnv::from_state(row(&resets, i), Rng::new(0)).unwrap();
            }
            for (k, h) in env.observation().iter().enumerate() {
                let d = f64::from((obs[i * 6 + k] - h).abs());
                worst = worst.max(d);
                assert!(
                    d <= 1e-4,
                    "row {e} step {t} value {k}: device {} host {h}",
                    obs[i * 6 + k]
                );
            }
        }
    }
    eprintln!("device Acrobot hanging, 510 steps: worst {worst:e}");
}

#[test]
fn device_resets_draw_from_keys_within_the_bounds() {
    // acrobot::reset and step_with_keys compile and run; the draws are f32 values in
    // [-0.1, 0.1), distinct per key, and a step from them is the host's step.
    let batch = 64i64;
    let run = client()
        .jit("acrobot_reset", &(), |b, ()| {
            let keys = b.prng_key(7).random_split(batch);
            let s = acrobot::reset(&keys);
            let a = b.zeros(ElementType::S32, &[batch]);
            let (_, obs, reward, _, _) = acrobot::step_with_keys(&s, &a, &keys);
            let rows = b.stack(&[&s.theta1, &s.theta2, &s.dtheta1, &s.dtheta2], 1);
            (rows, obs, reward)
        })
        .expect("compile");
    let (rows, obs, reward) = run.call(&()).expect("run");
    let (rows, obs, reward) = (
        rows.to_vec::<f32>().unwrap(),
        obs.to_vec::<f32>().unwrap(),
        reward.to_vec::<f32>().unwrap(),
    );
    assert!(rows.iter().all(|v| (-0.1..0.1).contains(v)), "{rows:?}");
    let mut distinct = rows.clone();
    distinct.sort_by(f32::total_cmp);
    distinct.dedup();
    assert!(distinct.len() > 250, "{} distinct of 256", distinct.len());
    for e in 0..batch as usize {
        let start: [f64; 4] = std::array::from_fn(|k| f64::from(rows[e * 4 + k]));
        let mut env = AcrobotEnv::from_state(start, Rng::new(0)).unwrap();
        let s = env.step_episode(0).unwrap();
        assert_eq!(reward[e], s.reward);
        for (k, h) in env.observation().iter().enumerate() {
            assert!((obs[e * 6 + k] - h).abs() <= 1e-5, "row {e} value {k}");
        }
    }
}

#[test]
fn vec_env_steps_many_classic_environments() {
    // VecEnv over the classic tasks: one action each, observations [n, 4] / [n, 6],
    // each environment as it steps alone.
    let mut envs = VecEnv::new((0..3).map(CartPoleEnv::new).collect()).unwrap();
    let mut alone: Vec<CartPoleEnv> = (0..3).map(CartPoleEnv::new).collect();
    for t in 0..100 {
        let actions = [t % 2, (t / 3) % 2, 1];
        let steps = envs.step(&actions).unwrap();
        for (e, env) in alone.iter_mut().enumerate() {
            assert_eq!(steps[e], env.step(actions[e]).unwrap());
        }
    }
    let obs = envs.observations();
    assert_eq!(obs.len(), 12);
    for (e, env) in alone.iter().enumerate() {
        assert_eq!(obs[e * 4..e * 4 + 4], env.observation()[..]);
    }
    let mut acrobots = VecEnv::new((0..2).map(AcrobotEnv::new).collect()).unwrap();
    assert_eq!(acrobots.observations().len(), 12);
    assert!(matches!(
        acrobots.step(&[0, 3]),
        Err(Error::InvalidAction { action: 3, .. })
    ));
}
