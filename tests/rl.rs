//! `xlaclient::rl`: Catch against hand-written trajectories, the environments' bad
//! input, and the batch stepper on the real plugin: one call per tick, each answer
//! routed to the agent that asked (checked against a plain-Rust computation of the
//! network), agents finishing at different times, several requests per agent per
//! tick, padding sizes compiled once, determinism, and errors instead of panics.

use std::cell::RefCell;
use std::rc::Rc;

use futures::future::join_all;
use xlaclient::ClientExt;
use xlaclient::nn::{Activation, Mlp};
use xlaclient::rl::catch::{self, Catch, CatchState, LEFT, RIGHT, STAY};
use xlaclient::rl::{BatchSizes, BatchedNet, Environment, Rng, Stepper, VecEnv};
use xlaclient::rl::{Error, NetworkOutputError};
use xlaclient::{Client, Op, Shape};

fn client() -> Client {
    Client::cpu().expect("CPU plugin")
}

fn st(a: [i32; 4]) -> CatchState {
    CatchState {
        ball_y: a[0],
        ball_x: a[1],
        paddle_y: a[2],
        paddle_x: a[3],
    }
}

// ---------------------------------------------------------------- Catch dynamics

#[test]
fn catch_follows_a_hand_written_trajectory() {
    // Ball in column 3; the paddle goes right, stays, left, right ×3 (clamped at the
    // wall on the third), stays twice, then moves left under the ball on the last
    // step: +1 (the paddle's new column counts), and the episode restarts in the
    // reset column 1 with the paddle back in the middle.
    let actions = [RIGHT, STAY, LEFT, RIGHT, RIGHT, RIGHT, STAY, STAY, LEFT];
    let expected = [
        ([1, 3, 9, 3], 0.0, 1.0),
        ([2, 3, 9, 3], 0.0, 1.0),
        ([3, 3, 9, 2], 0.0, 1.0),
        ([4, 3, 9, 3], 0.0, 1.0),
        ([5, 3, 9, 4], 0.0, 1.0),
        ([6, 3, 9, 4], 0.0, 1.0), // clamped at column 4
        ([7, 3, 9, 4], 0.0, 1.0),
        ([8, 3, 9, 4], 0.0, 1.0),
        ([0, 1, 9, 2], 1.0, 0.0), // terminal, caught (4 -> 3); reset to column 1
    ];
    let mut s = catch::initial_state(3).unwrap();
    assert_eq!(s.to_array(), [0, 3, 9, 2]);
    for (a, (want, r, d)) in actions.iter().zip(expected) {
        let (next, reward, discount) = catch::step(s, *a, 1).unwrap();
        assert_eq!(
            (next.to_array(), reward, discount),
            (want, r, d),
            "action {a} from {s:?}"
        );
        s = next;
    }
    // Second episode: always left; the paddle reaches column 0 and stays clamped
    // there; the ball (column 1) is missed: −1, reset to column 4.
    let mut paddle = 2;
    for t in 1..=9 {
        let (next, reward, discount) = catch::step(s, LEFT, 4).unwrap();
        paddle = (paddle - 1).max(0);
        if t < 9 {
            assert_eq!(
                (next.to_array(), reward, discount),
                ([t, 1, 9, paddle], 0.0, 1.0)
            );
        } else {
            assert_eq!(
                (next.to_array(), reward, discount),
                ([0, 4, 9, 2], -1.0, 0.0)
            );
        }
        s = next;
    }
    // The reset column is used only on the terminal step.
    let (a, _, _) = catch::step(st([2, 0, 9, 2]), STAY, 0).unwrap();
    let (b, _, _) = catch::step(st([2, 0, 9, 2]), STAY, 4).unwrap();
    assert_eq!(a, b);
}

/// The anchor's own numpy Catch (`NumpyCatch` of `jax_hostloop_catch.py`), recorded
/// by `scripts/record_catch_anchor.py`: 8 environments, 60 random actions each, with
/// the reset columns it drew. Replayed through `catch::step` with the same columns.
#[test]
fn catch_matches_the_anchors_numpy_catch() {
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/catch_anchor.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let ints = |v: &serde_json::Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    };
    let ones = |v: &serde_json::Value| -> Vec<Vec<i64>> {
        v.as_array().unwrap().iter().map(ints).collect()
    };
    assert_eq!(
        (data["rows"].as_i64(), data["columns"].as_i64()),
        (Some(10), Some(5))
    );
    let n = data["envs"].as_u64().unwrap() as usize;
    let mut columns = ints(&data["columns_drawn"]).into_iter();
    let board_ones = |s: &CatchState| -> Vec<i64> {
        let b = s.render();
        (0..50).filter(|&i| b[i] == 1.0).map(|i| i as i64).collect()
    };
    let init = &data["initial"];
    let mut states: Vec<CatchState> = (0..n)
        .map(|_| catch::initial_state(columns.next().unwrap() as usize).unwrap())
        .collect();
    assert_eq!(
        states.iter().map(|s| s.ball_x as i64).collect::<Vec<_>>(),
        ints(&init["ball_x"])
    );
    assert_eq!(
        states.iter().map(board_ones).collect::<Vec<_>>(),
        ones(&init["board_ones"])
    );
    let mut terminals = 0;
    for (t, step) in data["steps"].as_array().unwrap().iter().enumerate() {
        let actions = ints(&step["actions"]);
        let term: Vec<bool> = step["terminal"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_bool().unwrap())
            .collect();
        let reward: Vec<f64> = step["reward"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        for i in 0..n {
            // The anchor draws a column for each terminal environment, in order.
            let column = if term[i] {
                columns.next().unwrap() as usize
            } else {
                0
            };
            let (next, r, d) = catch::step(states[i], actions[i] as usize, column).unwrap();
            assert_eq!(r as f64, reward[i], "step {t} env {i}");
            assert_eq!(d == 0.0, term[i], "step {t} env {i}");
            states[i] = next;
            terminals += term[i] as usize;
        }
        let got =
            |f: fn(&CatchState) -> i32| states.iter().map(|s| f(s) as i64).collect::<Vec<_>>();
        assert_eq!(got(|s| s.ball_y), ints(&step["ball_y"]), "step {t}");
        assert_eq!(got(|s| s.ball_x), ints(&step["ball_x"]), "step {t}");
        assert_eq!(got(|s| s.paddle_x), ints(&step["paddle_x"]), "step {t}");
        assert_eq!(
            states.iter().map(board_ones).collect::<Vec<_>>(),
            ones(&step["board_ones"]),
            "step {t}"
        );
    }
    assert_eq!(terminals, 6 * n);
    assert!(columns.next().is_none(), "every recorded column was used");
}

#[test]
fn catch_board_marks_ball_and_paddle() {
    let board = st([4, 1, 9, 3]).render();
    let mut want = [0.0f32; 50];
    want[4 * 5 + 1] = 1.0;
    want[9 * 5 + 3] = 1.0;
    assert_eq!(board, want);
    let env = Catch::from_state(st([4, 1, 9, 3]), Rng::new(0)).unwrap();
    assert_eq!(env.observation(), want.to_vec());
    assert_eq!(env.observation_dims(), [10, 5]);
    assert_eq!(env.num_actions(), 3);
}

#[test]
fn catch_env_draws_columns_from_its_seeded_rng() {
    // Independent reference: the same generator drawn by hand.
    let mut reference = Rng::new(42);
    let mut env = Catch::new(42);
    assert_eq!(
        env.state(),
        catch::initial_state(reference.below(5).unwrap() as usize).unwrap()
    );
    let mut episodes = 0;
    let mut s = env.state();
    let mut rng_actions = Rng::new(9);
    for _ in 0..200 {
        let a = rng_actions.below(3).unwrap() as usize;
        let t = env.step(a).unwrap();
        // The pure step with the column the reference generator gives on terminal
        // steps must agree with the environment.
        let terminal = s.ball_y == 8;
        let column = if terminal {
            reference.below(5).unwrap() as usize
        } else {
            0
        };
        let (next, r, d) = catch::step(s, a, column).unwrap();
        assert_eq!(
            (env.state(), t.reward, t.discount, t.terminal),
            (next, r, d, terminal)
        );
        episodes += terminal as usize;
        s = next;
    }
    assert_eq!(episodes, 200 / 9);
    // Same seed, same run; a clone sees the same future.
    let mut a = Catch::new(5);
    let mut b = a.clone();
    for i in 0..30 {
        assert_eq!(a.step(i % 3).unwrap(), b.step(i % 3).unwrap());
        assert_eq!(a.state(), b.state());
    }
}

#[test]
fn rng_is_uniform_enough_and_seeded() {
    let mut r = Rng::new(1);
    let n = 50_000;
    let mut counts = [0usize; 5];
    for _ in 0..n {
        counts[r.below(5).unwrap() as usize] += 1;
    }
    // Binomial(n, 1/5): mean 10,000, sd 89.4; 5 sd.
    for c in counts {
        assert!((c as f64 - 10_000.0).abs() < 5.0 * 89.5, "{counts:?}");
    }
    assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    assert!(Rng::new(0).below(0).is_err());
    let u = Rng::new(3).uniform();
    assert!((0.0..1.0).contains(&u));
}

#[test]
fn vec_env_steps_each_environment() {
    let mut envs = VecEnv::new((0..6).map(Catch::new).collect()).unwrap();
    let mut singles: Vec<Catch> = (0..6).map(Catch::new).collect();
    for t in 0..25 {
        let actions: Vec<usize> = (0..6).map(|i| (i + t) % 3).collect();
        let got = envs.step(&actions).unwrap();
        let want: Vec<_> = singles
            .iter_mut()
            .zip(&actions)
            .map(|(e, &a)| e.step(a).unwrap())
            .collect();
        assert_eq!(got, want);
        let obs: Vec<f32> = singles.iter().flat_map(|e| e.observation()).collect();
        assert_eq!(envs.observations(), obs);
    }
}

#[test]
fn environments_refuse_bad_input_with_errors() {
    let msg = |e: Error| e.to_string();
    let s = catch::initial_state(2).unwrap();
    assert!(matches!(
        catch::step(s, 3, 0),
        Err(Error::InvalidAction {
            action: 3,
            actions: 3,
            ..
        })
    ));
    assert!(matches!(
        catch::step(s, 0, 5),
        Err(Error::InvalidArgument { what: "column", .. })
    ));
    assert!(msg(catch::step(s, 0, 5).unwrap_err()).contains("ball column 5"));
    let e = catch::step(st([9, 0, 9, 2]), 0, 0).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InvalidState {
                env: "Catch",
                field: "ball_y",
                value: 9,
                range,
            } if *range == (0..9)
        ),
        "{e}"
    );
    assert_eq!(msg(e), "invalid Catch state: ball_y = 9, must be in 0..9");
    assert!(matches!(
        catch::step(st([0, 0, 9, -1]), 0, 0),
        Err(Error::InvalidState {
            field: "paddle_x",
            value: -1,
            ..
        })
    ));
    assert!(matches!(
        CatchState::from_array([0, 0, 8, 2]),
        Err(Error::InvalidState {
            field: "paddle_y",
            value: 8,
            ..
        })
    ));
    assert!(msg(catch::initial_state(7).unwrap_err()).contains("ball column 7"));
    assert!(CatchState::from_array([0, 5, 9, 2]).is_err());
    assert!(Catch::from_state(st([0, 0, 8, 2]), Rng::new(0)).is_err());

    // A refused action leaves the environment (state and generator) unchanged.
    let mut env = Catch::from_state(st([8, 0, 9, 2]), Rng::new(3)).unwrap();
    let before = env.clone();
    assert!(matches!(
        env.step(7),
        Err(Error::InvalidAction { action: 7, .. })
    ));
    assert_eq!(env, before);
    let mut out = [0.0f32; 49];
    assert!(matches!(
        env.observe(&mut out),
        Err(Error::Length {
            given: 49,
            expected: 50,
            ..
        })
    ));

    let mut envs = VecEnv::new(vec![Catch::new(0), Catch::new(1)]).unwrap();
    let before = envs.envs().to_vec();
    assert!(matches!(
        envs.step(&[0]),
        Err(Error::Length {
            given: 1,
            expected: 2,
            ..
        })
    ));
    assert!(msg(envs.step(&[0, 3]).unwrap_err()).contains("environment 1: action 3"));
    assert_eq!(envs.envs(), &before[..]);
}

// ---------------------------------------------------------------- the stepper

/// The known network: `obs [B, 4] @ W [4, 2]`, W resident on the device.
const W: [f32; 8] = [2.0, 1.0, 0.5, -3.0, 1.0, 0.0, -1.0, 4.0];

/// The same function in plain Rust, for one observation.
fn reference(obs: &[f32]) -> Vec<f32> {
    (0..2)
        .map(|j| (0..4).map(|k| obs[k] * W[k * 2 + j]).sum())
        .collect()
}

fn linear_net(client: &Client, sizes: BatchSizes) -> BatchedNet {
    let w = client.buffer_from_host(&W, &[4, 2]).unwrap();
    BatchedNet::new(client, w, &[4], sizes, |w: &Op, obs: &Op| obs.matmul(w)).unwrap()
}

/// An observation that names its agent and request: answers are exact in f32.
fn obs(agent: usize, step: usize, k: usize) -> Vec<f32> {
    vec![agent as f32, step as f32, k as f32, 1.0]
}

/// What an agent saw: (observation, answer) for each of its requests.
type Seen = Vec<(Vec<f32>, Vec<f32>)>;

fn check_answers(all: &[Seen]) {
    for seen in all {
        for (o, a) in seen {
            assert_eq!(*a, reference(o), "answer to {o:?}");
        }
    }
}

#[test]
fn one_call_per_tick_and_each_agent_gets_its_own_answer() {
    let client = client();
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(16).unwrap()));
    let agents = 10;
    for _ in 0..agents {
        stepper.spawn(|net| async move {
            let mut seen = Seen::new();
            for step in 0..5 {
                let o = obs(net.agent(), step, 0);
                let a = net.predict(o.clone()).await.unwrap();
                seen.push((o, a));
            }
            seen
        });
    }
    let mut ticks = Vec::new();
    while stepper.running() > 0 {
        ticks.push(stepper.tick().unwrap());
    }
    // Five ticks of 10 requests at batch 16, each one call; a last tick in which all
    // finish and nothing is asked.
    assert_eq!(ticks.len(), 6);
    for t in &ticks[..5] {
        assert_eq!((t.requests, t.batch, t.calls, t.running), (10, 16, 1, 10));
    }
    assert_eq!(
        (ticks[5].requests, ticks[5].calls, ticks[5].running),
        (0, 0, 0)
    );
    assert_eq!(ticks[5].finished, (0..agents).collect::<Vec<_>>());
    assert_eq!(stepper.net().calls(), 5);
    assert_eq!(stepper.max_calls_in_a_tick(), 1);
    assert_eq!(stepper.requests(), 50);
    let all = stepper.run().unwrap();
    assert_eq!(all.len(), agents);
    for (i, seen) in all.iter().enumerate() {
        assert_eq!(seen.len(), 5);
        for (step, (o, _)) in seen.iter().enumerate() {
            assert_eq!(*o, obs(i, step, 0));
        }
    }
    check_answers(&all);
}

#[test]
fn agents_finishing_at_different_times() {
    let client = client();
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(8).unwrap()));
    let agents = 7;
    for i in 0..agents {
        // Agent i asks i + 1 times.
        stepper.spawn(move |net| async move {
            let mut seen = Seen::new();
            for step in 0..=i {
                let o = obs(i, step, 0);
                seen.push((o.clone(), net.predict(o).await.unwrap()));
            }
            seen
        });
    }
    for t in 0..=agents {
        let stats = stepper.tick().unwrap();
        // Tick t: agents t.. still ask (agent i asks at ticks 0..=i); agent t - 1
        // got its last answer at tick t - 1 and finishes now.
        assert_eq!(stats.requests, agents - t);
        assert_eq!(stats.calls, usize::from(t < agents));
        let finished: Vec<usize> = if t == 0 { vec![] } else { vec![t - 1] };
        assert_eq!(stats.finished, finished, "tick {t}");
    }
    assert_eq!(stepper.running(), 0);
    assert_eq!(stepper.net().calls(), agents);
    let all = stepper.run().unwrap();
    assert_eq!(
        all.iter().map(Vec::len).collect::<Vec<_>>(),
        (1..=agents).collect::<Vec<_>>()
    );
    check_answers(&all);
}

#[test]
fn several_requests_per_agent_per_tick_are_one_call() {
    let client = client();
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(64).unwrap()));
    // Agent i asks k_i predictions at once, three rounds; agent 4 asks 40 at once
    // (join_all then runs them through FuturesOrdered, which may yield and wake
    // itself: polled again within the tick).
    let ks = [1usize, 2, 3, 1, 40];
    for (i, &k) in ks.iter().enumerate() {
        stepper.spawn(move |net| async move {
            let mut seen = Seen::new();
            for round in 0..3 {
                let asked: Vec<Vec<f32>> = (0..k).map(|j| obs(i, round, j)).collect();
                let answers = join_all(asked.iter().map(|o| net.predict(o.as_slice()))).await;
                for (o, a) in asked.into_iter().zip(answers) {
                    seen.push((o, a.unwrap()));
                }
            }
            seen
        });
    }
    let total: usize = ks.iter().sum();
    for _ in 0..3 {
        let t = stepper.tick().unwrap();
        assert_eq!((t.requests, t.batch, t.calls), (total, 64, 1));
    }
    let all = stepper.run().unwrap();
    assert_eq!(stepper.net().calls(), 3);
    assert_eq!(stepper.max_calls_in_a_tick(), 1);
    for (i, seen) in all.iter().enumerate() {
        assert_eq!(seen.len(), 3 * ks[i]);
        for (n, (o, _)) in seen.iter().enumerate() {
            assert_eq!(*o, obs(i, n / ks[i], n % ks[i]));
        }
    }
    check_answers(&all);
}

#[test]
fn padding_sizes_are_compiled_once_each() {
    let client = client();
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(16).unwrap()));
    // 11 agents, agent i asks i + 1 times: 11, 10, …, 1 requests per tick.
    let spawn_all = |stepper: &mut Stepper<Seen>| {
        for i in 0..11 {
            stepper.spawn(move |net| async move {
                let mut seen = Seen::new();
                for step in 0..=i {
                    let o = obs(i, step, 1);
                    seen.push((o.clone(), net.predict(o).await.unwrap()));
                }
                seen
            });
        }
    };
    spawn_all(&mut stepper);
    let mut batches = Vec::new();
    while stepper.running() > 0 {
        let t = stepper.tick().unwrap();
        if t.calls == 1 {
            batches.push((t.requests, t.batch));
        }
    }
    let want: Vec<(usize, usize)> = (1..=11usize)
        .rev()
        .map(|n| (n, n.next_power_of_two()))
        .collect();
    assert_eq!(batches, want);
    assert_eq!(stepper.net().compiled_sizes(), [1, 2, 4, 8, 16]);
    assert_eq!(stepper.net().compiles(), 5);
    assert_eq!(stepper.net().calls(), 11);
    check_answers(&stepper.run().unwrap());
    // The same mix again: 11 more calls, no compile.
    spawn_all(&mut stepper);
    let all = stepper.run().unwrap();
    check_answers(&all);
    assert_eq!((stepper.net().compiles(), stepper.net().calls()), (5, 22));
}

#[test]
fn compile_all_and_direct_batches() {
    let client = client();
    let mut net = linear_net(&client, BatchSizes::new(&[3, 1]).unwrap());
    net.compile_all().unwrap();
    assert_eq!((net.compiles(), net.compiled_sizes()), (2, vec![1, 3]));
    let rows: Vec<f32> = [obs(1, 2, 3), obs(4, 5, 6)].concat();
    let got = net.predict_batch(&rows, 2).unwrap();
    let want: Vec<f32> = [reference(&rows[..4]), reference(&rows[4..])].concat();
    assert_eq!(got, want);
    assert_eq!((net.compiles(), net.calls()), (2, 1));
    assert_eq!(net.predict_batch(&[], 0).unwrap(), Vec::<f32>::new());
    assert_eq!(net.calls(), 1);
}

/// Greedy agents on Catch with a random-init MLP: the total return and the
/// per-tick request counts of one run.
fn greedy_run(client: &Client, seed: u32) -> (Vec<f32>, Vec<usize>) {
    let mlp = Mlp::new(&[50, 64, 3], Activation::Relu);
    let params = client
        .jit("init", &(), |b, ()| mlp.init(&b.prng_key(seed)))
        .unwrap()
        .call(&())
        .unwrap();
    let net = BatchedNet::new(
        client,
        params,
        &[50],
        BatchSizes::powers_of_two(8).unwrap(),
        move |p, o| mlp.apply(p, o),
    )
    .unwrap();
    let mut stepper = Stepper::new(net);
    for i in 0..6u64 {
        stepper.spawn(move |net| async move {
            let mut env = Catch::new(100 + i);
            let mut total = 0.0;
            // Agent i plays i + 1 episodes.
            let mut episodes = 0;
            while episodes <= i {
                let q = net.predict(env.observation()).await.unwrap();
                let a = (0..3).max_by(|&x, &y| q[x].total_cmp(&q[y])).unwrap();
                let t = env.step(a).unwrap();
                total += t.reward;
                episodes += t.terminal as u64;
            }
            total
        });
    }
    let mut requests = Vec::new();
    while stepper.running() > 0 {
        requests.push(stepper.tick().unwrap().requests);
    }
    (stepper.run().unwrap(), requests)
}

#[test]
fn runs_with_a_fixed_seed_are_equal() {
    let client = client();
    let (returns_a, requests_a) = greedy_run(&client, 0);
    let (returns_b, requests_b) = greedy_run(&client, 0);
    assert_eq!(returns_a, returns_b);
    assert_eq!(requests_a, requests_b);
    // Agent i plays i + 1 episodes of 9 steps each: a request per step.
    let want: Vec<usize> = (0..54).map(|t| 6 - t / 9).chain([0]).collect();
    assert_eq!(requests_a, want);
    // Each episode's return is +1 or −1.
    for (i, r) in returns_a.iter().enumerate() {
        assert!(
            r.abs() <= (i + 1) as f32 && (r + (i + 1) as f32) % 2.0 == 0.0,
            "{returns_a:?}"
        );
    }
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let client = client();
    // An observation of the wrong shape: that prediction fails with a clear error,
    // nothing is queued, the other agents go on.
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(4).unwrap()));
    let l = Rc::clone(&log);
    stepper.spawn(move |net| async move {
        let e = net.predict(vec![1.0; 3]).await.unwrap_err();
        l.borrow_mut().push(e.to_string());
    });
    let l = Rc::clone(&log);
    stepper.spawn(move |net| async move {
        let o = obs(1, 0, 0);
        let a = net.predict(o.clone()).await.unwrap();
        l.borrow_mut().push(format!("{:?}", a == reference(&o)));
    });
    let t = stepper.tick().unwrap();
    assert_eq!((t.requests, t.finished.clone()), (1, vec![0]));
    stepper.run().unwrap();
    assert_eq!(
        *log.borrow(),
        [
            "agent 0: observation values (the network takes [4]): 3 given, 4 needed",
            "true"
        ]
    );

    // More requests in a tick than the largest batch: the tick fails and every
    // agent of that batch gets the error.
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(4).unwrap()));
    for i in 0..5 {
        stepper.spawn(move |net| async move { net.predict(obs(i, 0, 0)).await.map(|_| ()) });
    }
    let e = stepper.tick().unwrap_err();
    assert!(
        matches!(
            e,
            Error::BatchTooLarge {
                requests: 5,
                max: 4
            }
        ),
        "{e}"
    );
    assert_eq!(stepper.net().calls(), 0);
    let outs = stepper.run().unwrap();
    assert_eq!(outs.len(), 5);
    assert!(
        outs.iter()
            .all(|r| matches!(r, Err(Error::BatchTooLarge { .. })))
    );

    // An agent waiting on something the stepper cannot wake: an error, not a hang.
    let mut stepper: Stepper<()> =
        Stepper::new(linear_net(&client, BatchSizes::powers_of_two(4).unwrap()));
    stepper.spawn(|_net| futures::future::pending::<()>());
    let e = stepper.run().unwrap_err();
    assert!(matches!(e, Error::Stalled { running: 1, .. }), "{e}");

    // A network whose output is not f32[B, ...], and bad batch sizes.
    let w = client.buffer_from_host(&W, &[4, 2]).unwrap();
    let e = BatchedNet::new(
        &client,
        w,
        &[4],
        BatchSizes::powers_of_two(4).unwrap(),
        |w: &Op, o: &Op| o.matmul(w).reduce_sum(&[0, 1]),
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::NetworkOutput(NetworkOutputError::Shape { batch: 1, found })
                if *found == Shape::of::<f32>(&[])
        ),
        "{e}"
    );
    assert!(e.to_string().contains("it must be f32[1, ...]"), "{e}");
    // Observation dimensions whose values do not fit in memory: refused before
    // anything is traced.
    let w = client.buffer_from_host(&W, &[4, 2]).unwrap();
    let e = BatchedNet::new(
        &client,
        w,
        &[i64::MAX, 4],
        BatchSizes::powers_of_two(4).unwrap(),
        |w: &Op, o: &Op| o.matmul(w),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                what: "obs_dims",
                ..
            }
        ),
        "{e}"
    );
    let w = client.buffer_from_host(&W, &[4, 2]).unwrap();
    let e = BatchedNet::new(
        &client,
        w,
        &[5],
        BatchSizes::powers_of_two(4).unwrap(),
        |w: &Op, o: &Op| o.matmul(w),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Core(xlaclient::Error::Shape(_))), "{e}");
    assert!(BatchSizes::new(&[]).is_err());
    assert!(BatchSizes::new(&[0, 4]).is_err());
    assert!(BatchSizes::powers_of_two(0).is_err());
    let mut net = linear_net(&client, BatchSizes::powers_of_two(4).unwrap());
    assert!(matches!(
        net.predict_batch(&[0.0; 7], 2),
        Err(Error::Length { given: 7, .. })
    ));
}

#[test]
fn agents_spawned_between_ticks_join_the_next_batch() {
    let client = client();
    let mut stepper = Stepper::new(linear_net(&client, BatchSizes::powers_of_two(8).unwrap()));
    let agent = |i: usize| {
        move |net: xlaclient::rl::NetHandle| async move {
            let mut seen = Seen::new();
            for step in 0..3 {
                let o = obs(i, step, 2);
                seen.push((o.clone(), net.predict(o).await.unwrap()));
            }
            seen
        }
    };
    assert_eq!(stepper.spawn(agent(0)), 0);
    assert_eq!(stepper.tick().unwrap().requests, 1);
    assert_eq!(stepper.spawn(agent(1)), 1);
    // Agent 0's second request and agent 1's first: one call.
    let t = stepper.tick().unwrap();
    assert_eq!((t.requests, t.calls), (2, 1));
    assert_eq!(stepper.tick().unwrap().requests, 2);
    // Agent 0 finishes; agent 1 asks its third.
    let t = stepper.tick().unwrap();
    assert_eq!((t.requests, t.finished), (1, vec![0]));
    let all = stepper.run().unwrap();
    assert_eq!(all.len(), 2);
    check_answers(&all);
    assert_eq!(stepper.net().calls(), 4);

    // The network, compiled sizes included, goes on to a new stepper.
    let net = stepper.into_net();
    let compiled = net.compiled_sizes();
    assert_eq!(compiled, [1, 2]);
    let mut again = Stepper::new(net);
    again.spawn(agent(5));
    again.spawn(agent(6));
    check_answers(&again.run().unwrap());
    assert_eq!((again.net().compiles(), again.net().calls()), (2, 7));
}

#[test]
fn handles_that_outlive_the_stepper_get_errors() {
    use futures::FutureExt;
    let client = client();
    let kept = Rc::new(RefCell::new(None));
    let pending = Rc::new(RefCell::new(None));
    let mut stepper: Stepper<()> =
        Stepper::new(linear_net(&client, BatchSizes::powers_of_two(4).unwrap()));
    let (k, p) = (Rc::clone(&kept), Rc::clone(&pending));
    stepper.spawn(move |net| {
        // The handle and an unanswered prediction leave the agent.
        *p.borrow_mut() = Some(net.predict(obs(0, 0, 0)));
        *k.borrow_mut() = Some(net);
        async {}
    });
    drop(stepper);
    // The queued request was dropped with the stepper: its prediction ends.
    let answer = pending.borrow_mut().take().unwrap().now_or_never();
    let e = answer
        .expect("a dropped stepper's prediction is ready")
        .unwrap_err();
    assert!(matches!(e, Error::StepperClosed { agent: None }), "{e}");
    // A new prediction through the kept handle fails at once.
    let net = kept.borrow_mut().take().unwrap();
    let e = net
        .predict(obs(0, 1, 0))
        .now_or_never()
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, Error::StepperClosed { agent: Some(_) }), "{e}");
}
