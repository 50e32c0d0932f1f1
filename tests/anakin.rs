//! Catch on the device and the Anakin learner (`xlaclient::rl::{catch_device,
//! anakin}`): the device's Catch against a plain-Rust Catch for the same actions,
//! the TD(λ) pieces against plain-Rust recurrences, the two layouts and the two
//! ways to the gradient against each other, and a short training run whose loss
//! falls and whose greedy policy improves.

mod common;

use common::{Rng, client};
use xlaclient::ClientExt;
use xlaclient::rl::anakin::{Anakin, AnakinConfig, lambda_returns, td_loss};
use xlaclient::rl::catch_device::{self as catch, CatchState};
use xlaclient::{Op, Shape, Tree};

/// Catch in plain Rust, written from the rules (not from the device code): state
/// (ball_y, ball_x, paddle_y, paddle_x); returns the reward and discount.
fn host_step(s: &mut [i32; 4], action: i32, reset: i32) -> (f32, f32) {
    let paddle_x = (s[3] + action - 1).clamp(0, 4);
    let ball_y = s[0] + 1;
    if ball_y == s[2] {
        let reward = if paddle_x == s[1] { 1.0 } else { -1.0 };
        *s = [0, reset, 9, 2];
        (reward, 0.0)
    } else {
        *s = [ball_y, s[1], s[2], paddle_x];
        (0.0, 1.0)
    }
}

fn host_board(s: &[i32; 4]) -> Vec<f32> {
    let mut b = vec![0f32; 50];
    b[(s[0] * 5 + s[1]) as usize] = 1.0;
    b[(s[2] * 5 + s[3]) as usize] = 1.0;
    b
}

#[test]
fn device_catch_equals_the_host_catch_for_the_same_actions() {
    let (batch, steps) = (6i64, 40i64);
    let mut rng = Rng(7);
    let starts: Vec<i32> = (0..batch).map(|_| (rng.next_u64() % 5) as i32).collect();
    let actions: Vec<i32> = (0..batch * steps)
        .map(|_| (rng.next_u64() % 3) as i32)
        .collect();
    let resets: Vec<i32> = (0..batch * steps)
        .map(|_| (rng.next_u64() % 5) as i32)
        .collect();
    let spec = (
        Shape::of::<i32>(&[batch]),
        Shape::of::<i32>(&[steps, batch]),
        Shape::of::<i32>(&[steps, batch]),
    );
    let run = client()
        .jit("catch_steps", &spec, |b, (start, a, r): (Op, Op, Op)| {
            let init = catch::initial_state(&start);
            let (_, (boards, rewards, discounts)) = b.scan(init, (a, r), |s, (a, r)| {
                let board = catch::render(&s);
                let (next, reward, discount) = catch::step(&s, &a, &r);
                (next, (board, reward, discount))
            });
            (boards, rewards, discounts)
        })
        .expect("compile");
    let args = (
        client().buffer_from_host(&starts, &[batch]).unwrap(),
        client()
            .buffer_from_host(&actions, &[steps, batch])
            .unwrap(),
        client().buffer_from_host(&resets, &[steps, batch]).unwrap(),
    );
    let (boards, rewards, discounts) = run.call(&args).expect("run");
    let (boards, rewards, discounts) = (
        boards.to_vec::<f32>().unwrap(),
        rewards.to_vec::<f32>().unwrap(),
        discounts.to_vec::<f32>().unwrap(),
    );
    let mut terminals = 0;
    for (e, &start) in starts.iter().enumerate() {
        let mut s = [0, start, 9, 2];
        for t in 0..steps as usize {
            let i = t * batch as usize + e;
            let board = &boards[i * 50..(i + 1) * 50];
            assert_eq!(board, host_board(&s), "board of env {e} at step {t}");
            // The crate's host Catch (`rl::catch`) agrees too.
            let lib = xlaclient::rl::catch::CatchState::from_array(s).unwrap();
            assert_eq!(
                lib.render().to_vec(),
                host_board(&s),
                "host render, env {e} step {t}"
            );
            let (lib_next, lib_r, lib_d) =
                xlaclient::rl::catch::step(lib, actions[i] as usize, resets[i] as usize).unwrap();
            let (r, d) = host_step(&mut s, actions[i], resets[i]);
            assert_eq!((rewards[i], discounts[i]), (r, d), "env {e} step {t}");
            assert_eq!(
                (lib_next.to_array(), lib_r, lib_d),
                (s, r, d),
                "host Catch, env {e} step {t}"
            );
            terminals += (d == 0.0) as usize;
        }
    }
    // 40 steps of 6 environments end 4 episodes each (every 9 steps).
    assert_eq!(terminals, 24);
}

#[test]
fn greedy_eval_scores_a_perfect_and_a_lazy_policy() {
    // Follow the ball: move toward its column (read from the board).
    let perfect = xlaclient::rl::catch::greedy_eval(|board| {
        let ball = board[..45].iter().position(|&v| v == 1.0).unwrap() % 5;
        let paddle = board[45..].iter().position(|&v| v == 1.0).unwrap();
        let mut q = [0f32; 3];
        q[((ball as i64 - paddle as i64).signum() + 1) as usize] = 1.0;
        q
    });
    assert_eq!(perfect, 1.0);
    // Always stay: catches only balls in the middle column (1 of 5).
    let lazy = xlaclient::rl::catch::greedy_eval(|_| [0.0, 1.0, 0.0]);
    assert!((lazy - (1.0 - 4.0) / 5.0).abs() < 1e-12, "{lazy}");
}

#[test]
fn lambda_returns_and_td_loss_equal_plain_rust() {
    let (batch, t, lambda) = (3i64, 6i64, 0.9);
    let mut rng = Rng(11);
    let q = rng.vec((batch * t * 3) as usize, -1.0, 1.0);
    let a: Vec<i32> = (0..batch * t)
        .map(|_| (rng.next_u64() % 3) as i32)
        .collect();
    let r = rng.vec((batch * t) as usize, -1.0, 1.0);
    let d: Vec<f32> = (0..batch * t)
        .map(|_| (rng.next_u64() % 4 != 0) as i32 as f32)
        .collect();
    let spec = (
        Shape::of::<f32>(&[batch, t, 3]),
        Shape::of::<i32>(&[batch, t]),
        Shape::of::<f32>(&[batch, t]),
        Shape::of::<f32>(&[batch, t]),
    );
    let f = client()
        .jit("td", &spec, |_, (q, a, r, d): (Op, Op, Op, Op)| {
            let v = q.amax(&[2], false);
            (
                lambda_returns(&r, &d, &v, lambda),
                td_loss(&q, &a, &r, &d, lambda),
            )
        })
        .unwrap();
    let up = |x: &[f32], dims: &[i64]| client().buffer_from_host(x, dims).unwrap();
    let (g, loss) = f
        .call(&(
            up(&q, &[batch, t, 3]),
            client().buffer_from_host(&a, &[batch, t]).unwrap(),
            up(&r, &[batch, t]),
            up(&d, &[batch, t]),
        ))
        .unwrap();
    let (g, loss) = (g.to_vec::<f32>().unwrap(), loss.to_vec::<f32>().unwrap());
    let (bu, tu) = (batch as usize, t as usize);
    for b in 0..bu {
        let qv = |i: usize, k: usize| q[(b * tu + i) * 3 + k] as f64;
        let vmax = |i: usize| (0..3).map(|k| qv(i, k)).fold(f64::MIN, f64::max);
        let (rb, db) = (&r[b * tu..(b + 1) * tu], &d[b * tu..(b + 1) * tu]);
        // lambda_returns over all T steps with v_t = max_a q_t.
        let mut acc = vmax(tu - 1);
        let mut want = vec![0.0; tu];
        for i in (0..tu).rev() {
            acc = rb[i] as f64 + db[i] as f64 * ((1.0 - lambda) * vmax(i) + lambda * acc);
            want[i] = acc;
        }
        for i in 0..tu {
            assert!((g[b * tu + i] as f64 - want[i]).abs() < 1e-5, "G[{b},{i}]");
        }
        // td_loss: targets from steps 0..T-1 bootstrapped with v_{t+1}.
        let mut acc = vmax(tu - 1);
        let mut sq = 0.0;
        let mut targets = vec![0.0; tu - 1];
        for i in (0..tu - 1).rev() {
            acc = rb[i] as f64 + db[i] as f64 * ((1.0 - lambda) * vmax(i + 1) + lambda * acc);
            targets[i] = acc;
        }
        for (i, target) in targets.iter().enumerate() {
            let e = target - qv(i, a[b * tu + i] as usize);
            sq += e * e;
        }
        let want = sq / (tu - 1) as f64;
        assert!(
            (loss[b] as f64 - want).abs() < 1e-5 * want.max(1.0),
            "loss[{b}]"
        );
    }
}

fn small(shared_params: bool, grad_through_scan: bool) -> AnakinConfig {
    AnakinConfig {
        batch: 8,
        rollout_len: 16,
        iterations: 10,
        hidden: 32,
        lr: 1e-3,
        shared_params,
        grad_through_scan,
        ..AnakinConfig::default()
    }
}

fn params_after(config: AnakinConfig, calls: usize) -> Vec<Vec<f32>> {
    let anakin = Anakin::new(client(), config).expect("compile");
    let mut state = anakin.init().unwrap();
    for _ in 0..calls {
        state = anakin.step(state).unwrap();
    }
    state
        .params
        .leaves()
        .into_iter()
        .map(|b| b.to_vec::<f32>().unwrap())
        .collect()
}

fn assert_near(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 2e-4 * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

#[test]
fn the_vmapped_single_learner_update_learns_what_the_hand_batched_one_does() {
    // The notebook's layout written as the notebook writes it (one learner's
    // update, vmapped over the learners, pmean over the vmapped axis) against the
    // hand-batched program: the same parameters after 20 updates, both gradients.
    for through_scan in [false, true] {
        let hand = params_after(
            AnakinConfig {
                vmap_learners: false,
                ..small(false, through_scan)
            },
            2,
        );
        let vmapped = params_after(
            AnakinConfig {
                vmap_learners: true,
                ..small(false, through_scan)
            },
            2,
        );
        for (i, (a, b)) in vmapped.iter().zip(&hand).enumerate() {
            assert_near(
                a,
                b,
                &format!("vmapped leaf {i} (through scan {through_scan})"),
            );
        }
    }
}

#[test]
fn the_two_layouts_and_the_two_gradients_learn_the_same_parameters() {
    // The per-learner layout's copies stay equal (the gradient is averaged over
    // learners), and equal the shared layout's one copy; differentiating through
    // the rollout scan gives the same parameters as the loss on the recorded
    // rollout. 20 updates with Adam at lr 1e-3 move the parameters by about 2e-2;
    // the tolerance (2e-4 relative) is f32 reassociation between the programs.
    let shared = params_after(small(true, false), 2);
    let per_learner = params_after(small(false, false), 2);
    let through_scan = params_after(small(true, true), 2);
    let per_learner_through_scan = params_after(small(false, true), 2);
    let batch = 8;
    for (i, s) in shared.iter().enumerate() {
        let copies = &per_learner[i];
        assert_eq!(copies.len(), s.len() * batch);
        for c in 0..batch {
            assert_eq!(
                &copies[c * s.len()..(c + 1) * s.len()],
                &copies[..s.len()],
                "learner {c}'s copy of leaf {i} differs from learner 0's"
            );
        }
        assert_near(&copies[..s.len()], s, &format!("per-learner leaf {i}"));
        assert_near(&through_scan[i], s, &format!("through-scan leaf {i}"));
        assert_near(
            &per_learner_through_scan[i][..s.len()],
            s,
            &format!("per-learner through-scan leaf {i}"),
        );
    }
    // And they moved: the test would pass trivially if nothing were learned.
    let init = params_after(small(true, false), 0);
    let moved: f32 = init[0]
        .iter()
        .zip(&shared[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(moved > 1e-3, "w1 moved by only {moved}");
}

#[test]
fn a_replicated_learner_keeps_identical_copies_and_takes_the_one_device_steps() {
    // Two devices × 4 learners each against one device × 8: every device draws
    // the random numbers of the whole batch of 8 and keeps its block, so the two
    // runs step the same environments, and the batch mean inside each device
    // followed by the pmean over the devices is the mean over all 8 (up to f32
    // reassociation). After training, both devices hold the same parameters.
    for shared in [true, false] {
        let one = Anakin::new(client(), small(shared, false)).expect("compile");
        let two = Anakin::new(
            client(),
            AnakinConfig {
                batch: 4,
                devices: 2,
                ..small(shared, false)
            },
        )
        .expect("compile for 2 devices");
        assert!(two.learner().is_none() && one.replicated_learner().is_none());
        assert!(
            two.init().is_err(),
            "one state is not the init of 2 devices"
        );
        let mut s1 = one.init().unwrap();
        let mut s2 = two.init_devices().unwrap();
        let devices = two.replicated_learner().unwrap().devices().to_vec();
        assert_eq!(s2.len(), 2);
        for _ in 0..2 {
            s1 = one.step(s1).unwrap();
            s2 = two.step_devices(s2).unwrap();
        }
        for (d, s) in s2.iter().enumerate() {
            assert_eq!(s.key.device().unwrap(), devices[d]);
        }
        let leaves = |s: &xlaclient::rl::anakin::AnakinState<xlaclient::Buffer>| -> Vec<Vec<f32>> {
            s.params
                .leaves()
                .into_iter()
                .map(|b| b.to_vec::<f32>().unwrap())
                .collect()
        };
        let (p0, p1) = (leaves(&s2[0]), leaves(&s2[1]));
        assert_eq!(p0.len(), leaves(&s1).len());
        assert_eq!(p0, p1, "shared={shared}: the devices' copies differ");
        assert_eq!(
            two.host_params(&s2[0]).unwrap(),
            two.host_params(&s2[1]).unwrap()
        );
        // Learner 0's copy against the one-device run's.
        let mine = two.host_params(&s2[0]).unwrap();
        for (i, (a, b)) in mine.iter().zip(one.host_params(&s1).unwrap()).enumerate() {
            assert_near(a, &b, &format!("shared={shared}, leaf {i}"));
        }
        if !shared {
            // Per learner: 4 equal copies per device.
            let n = mine[0].len();
            assert_eq!(p0[0].len(), 4 * n);
            assert!((1..4).all(|c| p0[0][c * n..(c + 1) * n] == p0[0][..n]));
        }
        assert_eq!(
            s2[0].loss.to_scalar::<f32>().unwrap(),
            s2[1].loss.to_scalar::<f32>().unwrap()
        );
        let (l1, l2) = (
            s1.loss.to_scalar::<f32>().unwrap(),
            s2[0].loss.to_scalar::<f32>().unwrap(),
        );
        assert!(
            (l1 - l2).abs() <= 1e-4 * (1.0 + l1.abs()),
            "loss {l2} vs {l1}"
        );
        // The environments: device d's are block d of the one-device run's.
        let env = |s: &CatchState<xlaclient::Buffer>| -> Vec<Vec<i32>> {
            s.leaves()
                .into_iter()
                .map(|b| b.to_vec::<i32>().unwrap())
                .collect()
        };
        let whole = env(&s1.env);
        for (d, s) in s2.iter().enumerate() {
            let block: Vec<Vec<i32>> = whole
                .iter()
                .map(|f| f[d * 4..(d + 1) * 4].to_vec())
                .collect();
            assert_eq!(env(&s.env), block, "device {d}'s environments");
        }
        // Moved at all (2 calls of 10 updates at lr 1e-3).
        let init = one.host_params(&one.init().unwrap()).unwrap();
        let moved = init[0]
            .iter()
            .zip(&mine[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(moved > 1e-3, "w1 moved by only {moved}");
    }
    // More devices than the client has is an error, not a crash.
    assert!(
        Anakin::new(
            client(),
            AnakinConfig {
                devices: 3,
                ..small(true, false)
            }
        )
        .is_err()
    );
}

#[test]
fn a_short_anakin_run_lowers_its_loss_and_improves_its_policy() {
    let config = AnakinConfig {
        batch: 32,
        iterations: 50,
        lr: 1e-3,
        shared_params: true,
        ..AnakinConfig::default()
    };
    let anakin = Anakin::new(client(), config).expect("compile");
    let mut state = anakin.init().unwrap();
    let before = anakin.greedy_reward(&state).unwrap();
    let mut losses = Vec::new();
    for _ in 0..6 {
        state = anakin.step(state).unwrap();
        losses.push(state.loss.to_scalar::<f32>().unwrap());
    }
    let after = anakin.greedy_reward(&state).unwrap();
    assert!(
        losses[5] < losses[0] / 2.0,
        "the loss did not halve: {losses:?}"
    );
    assert!(after > before, "greedy reward {before} -> {after}");
    assert!(after >= 0.6, "greedy reward {after} after 300 updates");
    // The environments kept running: states are valid Catch states.
    let CatchState {
        ball_y, paddle_x, ..
    } = &state.env;
    assert!(
        ball_y
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .all(|y| (0..9).contains(y))
    );
    assert!(
        paddle_x
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .all(|x| (0..5).contains(x))
    );
}

/// The learner's loops: the `fori_loop` and the rollout's scan only. By default
/// the loss reuses the recorded rollout and no gradient enters the scan; with
/// `grad_through_scan` the gradient goes through it, but its steps are independent
/// (the environment's state is discrete, no float cotangent chains them), so the
/// backward steps run batched over the steps, not as a backward loop, and the
/// forward loop runs once (it is the one that stores what they need).
#[test]
fn the_learner_runs_the_rollout_once_and_reverses_it_only_when_asked() {
    for (grad_through_scan, loops) in [(false, 2), (true, 2)] {
        for shared_params in [false, true] {
            let anakin = Anakin::new(
                client(),
                AnakinConfig {
                    iterations: 1,
                    ..small(shared_params, grad_through_scan)
                },
            )
            .unwrap();
            let text = anakin.computation().to_hlo_text();
            // The learner's own loops: not the 5-step loops of the Threefry hashes
            // behind its samplers (whose bodies are the only ones that rotate bits).
            let mut bodies = std::collections::HashMap::<String, String>::new();
            let mut current = String::new();
            for line in text.lines() {
                if let Some(name) = line.strip_prefix('%').and_then(|l| l.split(' ').next()) {
                    current = name.to_string();
                }
                bodies.entry(current.clone()).or_default().push_str(line);
            }
            let own = text
                .lines()
                .filter(|l| l.contains(" while("))
                .filter(|l| {
                    let body = l
                        .split("body=%")
                        .nth(1)
                        .and_then(|b| b.split([',', ' ']).next());
                    !body.is_some_and(|b| bodies.get(b).is_some_and(|t| t.contains("shift-left(")))
                })
                .count();
            assert_eq!(
                own, loops,
                "grad_through_scan {grad_through_scan}, shared {shared_params}"
            );
        }
    }
}

/// Bad configurations, TD inputs of the wrong rank and a state of another
/// configuration are errors naming what is wrong, never panics.
#[test]
fn bad_configs_inputs_and_states_are_errors() {
    use xlaclient::rl::Error;
    for (config, what) in [
        (
            AnakinConfig {
                batch: 0,
                ..small(true, false)
            },
            "batch",
        ),
        (
            AnakinConfig {
                hidden: -3,
                ..small(true, false)
            },
            "hidden",
        ),
        (
            AnakinConfig {
                rollout_len: 1,
                ..small(true, false)
            },
            "rollout_len",
        ),
        (
            AnakinConfig {
                iterations: -1,
                ..small(true, false)
            },
            "iterations",
        ),
    ] {
        match Anakin::new(client(), config) {
            Err(Error::InvalidArgument { what: w, reason }) => {
                assert_eq!(w, what);
                assert!(
                    reason.contains(&format!("AnakinConfig::{what}")),
                    "{reason}"
                );
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    }

    // The TD pieces on arrays of the wrong rank or too few steps: an error at the
    // caller's line.
    let b = xlaclient::Builder::new("td");
    let f32s = |dims: &[i64]| b.zeros(xlaclient::ElementType::F32, dims);
    let line = line!() + 1;
    let g = lambda_returns(&f32s(&[4]), &f32s(&[4]), &f32s(&[4]), 0.9);
    let e = b.build(&g).unwrap_err();
    assert!(
        e.to_string()
            .contains("lambda_returns: rewards of dims [4]"),
        "{e}"
    );
    assert_eq!(
        e.location().map(|l| (l.file(), l.line())),
        Some((file!(), line))
    );
    let b = xlaclient::Builder::new("td");
    let (q, r) = (
        b.zeros(xlaclient::ElementType::F32, &[2, 1, 3]),
        b.zeros(xlaclient::ElementType::F32, &[2, 1]),
    );
    let a = b.zeros(xlaclient::ElementType::S32, &[2, 1]);
    let line = line!() + 1;
    let loss = td_loss(&q, &a, &r, &r, 0.9);
    let e = b.build(&loss).unwrap_err();
    assert!(
        e.to_string()
            .contains("td_loss: Q-values of dims [2, 1, 3]"),
        "{e}"
    );
    assert_eq!(
        e.location().map(|l| (l.file(), l.line())),
        Some((file!(), line))
    );

    // A state of another configuration: its parameters are not this learner's.
    let client = client();
    let anakin = Anakin::new(
        client,
        AnakinConfig {
            iterations: 1,
            ..small(true, false)
        },
    )
    .unwrap();
    let mut state = anakin.init().unwrap();
    assert!(anakin.greedy_reward(&state).is_ok());
    state.params[0].w = client.buffer_from_host(&[0f32; 4], &[2, 2]).unwrap();
    let e = anakin.greedy_reward(&state).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { what: "state", reason } if reason.contains("f32[2,2]")),
        "{e}"
    );
    state.params.pop();
    assert!(matches!(
        anakin.host_params(&state),
        Err(Error::InvalidArgument { what: "state", .. })
    ));
}
