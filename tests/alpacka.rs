//! Alpacka's loop on the real plugin: the [`Trainer`]'s compiled train step
//! (gradients against plain-Rust derivatives, loss falling on a fixed dataset), new
//! parameters reaching the stepper's network without recompiling, and the MCTS
//! and shooting agents running through the stepper (one batched call per tick,
//! the same search as with a plain-Rust evaluator).

use std::cell::RefCell;
use std::rc::Rc;

use futures::FutureExt;
use xlaclient::nn::{Activation, Mlp, MlpParams, optim};
use xlaclient::rl::agents::{MctsAgent, MctsConfig, ShootingAgent, ShootingConfig};
use xlaclient::rl::catch::Catch;
use xlaclient::rl::connect_four::{ConnectFour, TwoPlayerGame};
use xlaclient::rl::replay::{HostArray, ReplayBuffer};
use xlaclient::rl::trainer::{Trainer, policy_value_head, policy_value_loss, q_learning_loss};
use xlaclient::rl::{BatchSizes, BatchedNet, Environment, Error, Rng, Stepper};
use xlaclient::{Client, ClientExt, Op, Shape, Tree};

fn client() -> Client {
    Client::cpu().expect("CPU plugin")
}

#[derive(Tree)]
struct Xy<T> {
    x: T,
    y: T,
}

/// `x · w + b` in plain Rust for one row.
fn linear(w: &[f32], b: &[f32], x: &[f32], out: usize) -> Vec<f32> {
    (0..out)
        .map(|j| {
            b[j] + x
                .iter()
                .enumerate()
                .map(|(k, xk)| xk * w[k * out + j])
                .sum::<f32>()
        })
        .collect()
}

fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tol * (1.0 + y.abs()))
}

#[test]
fn sgd_step_matches_the_plain_rust_gradient_of_mse() -> Result<(), Error> {
    // One linear layer 3 → 2, loss mean((x w + b − y)²); SGD with lr 0.1 moves the
    // parameters by −0.1 · grad, grad computed here by hand.
    let c = client();
    let mlp = Mlp::new(&[3, 2], Activation::Relu);
    let init = c.jit("init", &(), |b, ()| mlp.init(&b.prng_key(3)))?;
    let spec = Xy {
        x: Shape::of::<f32>(&[4, 3]),
        y: Shape::of::<f32>(&[4, 2]),
    };
    let lr = 0.1f32;
    let m = mlp.clone();
    let mut trainer = Trainer::new(
        &c,
        init.output_spec(),
        init.call(&())?,
        &spec,
        &optim::sgd(f64::from(lr), 0.0, false),
        move |p: &MlpParams<Op>, b: &Xy<Op>| xlaclient::nn::losses::mse(&m.apply(p, &b.x), &b.y),
    )?;
    let before = trainer.host_params()?;
    let (w, bias) = (&before[0], &before[1]);
    let xs: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    let ys: Vec<f32> = (0..8).map(|i| (i as f32 * 0.91).cos()).collect();
    // Plain Rust: loss and gradient.
    let (mut loss, mut gw, mut gb) = (0.0f32, vec![0.0f32; 6], vec![0.0f32; 2]);
    let n = 8.0; // mean over all 4 × 2 outputs
    for r in 0..4 {
        let x = &xs[r * 3..r * 3 + 3];
        let out = linear(w, bias, x, 2);
        for j in 0..2 {
            let e = out[j] - ys[r * 2 + j];
            loss += e * e / n;
            gb[j] += 2.0 * e / n;
            for k in 0..3 {
                gw[k * 2 + j] += 2.0 * e * x[k] / n;
            }
        }
    }
    let got_loss = trainer.step_host(&Xy {
        x: HostArray::f32(&[4, 3], xs.clone())?,
        y: HostArray::f32(&[4, 2], ys.clone())?,
    })?;
    assert!((got_loss - loss).abs() < 1e-5, "loss {got_loss} vs {loss}");
    let after = trainer.host_params()?;
    let want_w: Vec<f32> = w.iter().zip(&gw).map(|(p, g)| p - lr * g).collect();
    let want_b: Vec<f32> = bias.iter().zip(&gb).map(|(p, g)| p - lr * g).collect();
    assert!(
        close(&after[0], &want_w, 1e-5),
        "{:?} vs {want_w:?}",
        after[0]
    );
    assert!(
        close(&after[1], &want_b, 1e-5),
        "{:?} vs {want_b:?}",
        after[1]
    );
    assert_eq!(trainer.steps(), 1);
    // A batch of the wrong shape is refused, naming it.
    let e = trainer
        .step_host(&Xy {
            x: HostArray::f32(&[2, 3], vec![0.0; 6])?,
            y: HostArray::f32(&[4, 2], ys)?,
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("f32[2,3]") && e.contains("f32[4,3]"), "{e}");
    Ok(())
}

#[derive(Tree)]
struct PolicyValue<T> {
    policy: T,
    value: T,
}

#[test]
fn policy_value_loss_and_gradient_against_plain_rust() -> Result<(), Error> {
    // The parameters are the network's output itself ([B, A + 1]), so the gradient
    // SGD applies is the loss's gradient with respect to the output:
    // (softmax(logits) − π) / B for the logits and 2 (v − z) / B for the value.
    let (bsz, a) = (3usize, 4usize);
    let c = client();
    let out0: Vec<f32> = (0..bsz * (a + 1))
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.2)
        .collect();
    let pi: Vec<f32> = vec![
        0.1, 0.2, 0.3, 0.4, //
        1.0, 0.0, 0.0, 0.0, //
        0.25, 0.25, 0.25, 0.25,
    ];
    let z = vec![1.0f32, -1.0, 0.0];
    let pspec = Shape::of::<f32>(&[bsz as i64, a as i64 + 1]);
    let bspec = PolicyValue {
        policy: Shape::of::<f32>(&[bsz as i64, a as i64]),
        value: Shape::of::<f32>(&[bsz as i64]),
    };
    let mut trainer = Trainer::new(
        &c,
        &pspec,
        c.buffer_from_host(&out0, &[bsz as i64, a as i64 + 1])?,
        &bspec,
        &optim::sgd(1.0, 0.0, false),
        |p: &Op, b: &PolicyValue<Op>| policy_value_loss(p, &b.policy, &b.value),
    )?;
    let loss = trainer.step_host(&PolicyValue {
        policy: HostArray::f32(&[bsz as i64, a as i64], pi.clone())?,
        value: HostArray::f32(&[bsz as i64], z.clone())?,
    })?;
    let mut want_loss = 0.0f32;
    let mut grad = vec![0.0f32; out0.len()];
    for r in 0..bsz {
        let row = &out0[r * (a + 1)..(r + 1) * (a + 1)];
        let max = row[..a].iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f32 = row[..a].iter().map(|l| (l - max).exp()).sum();
        for k in 0..a {
            let p = (row[k] - max).exp() / s;
            want_loss -= pi[r * a + k] * (p.ln()) / bsz as f32;
            grad[r * (a + 1) + k] = (p - pi[r * a + k]) / bsz as f32;
        }
        let e = row[a] - z[r];
        want_loss += e * e / bsz as f32;
        grad[r * (a + 1) + a] = 2.0 * e / bsz as f32;
    }
    assert!((loss - want_loss).abs() < 1e-5, "{loss} vs {want_loss}");
    let after = &trainer.host_params()?[0];
    let got_grad: Vec<f32> = out0.iter().zip(after).map(|(o, n)| o - n).collect();
    assert!(close(&got_grad, &grad, 1e-5), "{got_grad:?} vs {grad:?}");
    Ok(())
}

#[derive(Tree)]
struct Td<T> {
    obs: T,
    action: T,
    reward: T,
    discount: T,
    next_obs: T,
}

#[test]
fn q_learning_target_is_computed_by_the_network_and_held_constant() -> Result<(), Error> {
    // A Q-table W [S, A] read through one-hot observations: Q(s) = onehot(s) W.
    // The loss is mean((W[s, a] − (r + γ d max W[s']))²) / 2; its gradient flows
    // into W[s, a] only (the target is held constant).
    let (s_n, a_n, bsz, gamma) = (3usize, 2usize, 4usize, 0.9f32);
    let c = client();
    let w0: Vec<f32> = vec![0.5, -0.2, 0.1, 0.8, -0.4, 0.3];
    let states = [0usize, 1, 2, 1];
    let actions = [1i32, 0, 1, 1];
    let rewards = [1.0f32, 0.0, -1.0, 0.5];
    let discounts = [1.0f32, 1.0, 0.0, 1.0];
    let next = [1usize, 2, 0, 1];
    let onehot = |ss: &[usize]| -> Vec<f32> {
        ss.iter()
            .flat_map(|&s| (0..s_n).map(move |k| if k == s { 1.0 } else { 0.0 }))
            .collect()
    };
    let dims = [bsz as i64, s_n as i64];
    let batch = Td {
        obs: HostArray::f32(&dims, onehot(&states))?,
        action: HostArray::i32(&[bsz as i64], actions.to_vec())?,
        reward: HostArray::f32(&[bsz as i64], rewards.to_vec())?,
        discount: HostArray::f32(&[bsz as i64], discounts.to_vec())?,
        next_obs: HostArray::f32(&dims, onehot(&next))?,
    };
    let bspec = batch.map_ref(HostArray::shape);
    let mut trainer = Trainer::new(
        &c,
        &Shape::of::<f32>(&[s_n as i64, a_n as i64]),
        c.buffer_from_host(&w0, &[s_n as i64, a_n as i64])?,
        &bspec,
        &optim::sgd(1.0, 0.0, false),
        |w: &Op, b: &Td<Op>| {
            let q = b.obs.matmul(w);
            let q_next = b.next_obs.matmul(w);
            q_learning_loss(&q, &b.action, &b.reward, &b.discount, &q_next, gamma)
        },
    )?;
    let loss = trainer.step_host(&batch)?;
    let mut want = 0.0f32;
    let mut grad = [0.0f32; 6];
    for i in 0..bsz {
        let (s, a, s2) = (states[i], actions[i] as usize, next[i]);
        let max_next = w0[s2 * a_n].max(w0[s2 * a_n + 1]);
        let y = rewards[i] + gamma * discounts[i] * max_next;
        let e = w0[s * a_n + a] - y;
        want += 0.5 * e * e / bsz as f32;
        grad[s * a_n + a] += e / bsz as f32;
    }
    assert!((loss - want).abs() < 1e-6, "{loss} vs {want}");
    let after = &trainer.host_params()?[0];
    let got: Vec<f32> = w0.iter().zip(after).map(|(o, n)| o - n).collect();
    assert!(close(&got, &grad, 1e-5), "{got:?} vs {grad:?}");
    Ok(())
}

const OBS: i64 = 84;
const ACTIONS: usize = 7;

fn pv_mlp() -> Mlp {
    Mlp::new(&[OBS, 32, ACTIONS as i64 + 1], Activation::Relu)
}

#[test]
fn loss_falls_on_a_fixed_dataset_from_the_replay_buffer() -> Result<(), Error> {
    // 64 random Connect Four positions with fixed random targets; Adam on batches
    // of 32 sampled from the buffer: the mean loss over all 64 falls by half.
    let c = client();
    let mlp = pv_mlp();
    let mut rng = Rng::new(9);
    let mut buffer = ReplayBuffer::new(64)?;
    for _ in 0..64 {
        let mut g = ConnectFour::new();
        for _ in 0..rng.below(20)? {
            let legal = g.legal_actions();
            if legal.is_empty() {
                break;
            }
            g.play(legal[rng.below(legal.len() as u64)? as usize])?;
        }
        let mut pi: Vec<f32> = (0..ACTIONS).map(|_| rng.uniform()).collect();
        let s: f32 = pi.iter().sum();
        pi.iter_mut().for_each(|p| *p /= s);
        buffer.push(PvItem {
            obs: HostArray::f32(&[OBS], g.observation())?,
            policy: HostArray::f32(&[ACTIONS as i64], pi)?,
            value: HostArray::scalar_f32(if rng.uniform() < 0.5 { -1.0 } else { 1.0 }),
        })?;
    }
    let init = c.jit("init", &(), |b, ()| mlp.init(&b.prng_key(0)))?;
    let m = mlp.clone();
    let spec = buffer.batch_spec(32).ok_or(Error::PolledAfterCompletion)?;
    let mut trainer = Trainer::new(
        &c,
        init.output_spec(),
        init.call(&())?,
        &spec,
        &optim::adam(3e-3, 0.9, 0.999, 1e-8),
        move |p: &MlpParams<Op>, b: &PvItem<Op>| {
            policy_value_loss(&policy_value_head(&m.apply(p, &b.obs)), &b.policy, &b.value)
        },
    )?;
    let all: Vec<usize> = (0..64).collect();
    let full = buffer.gather(&all)?;
    let mean_loss = |t: &Trainer<MlpParams<Shape>>| -> Result<f32, Error> {
        // The loss of the current parameters on all 64, from a second program.
        let params = t.params_tree()?;
        let f = c.jit(
            "eval",
            &(t.param_spec().clone(), full.map_ref(HostArray::shape)),
            |_, (p, b): (MlpParams<Op>, PvItem<Op>)| {
                policy_value_loss(
                    &policy_value_head(&mlp.apply(&p, &b.obs)),
                    &b.policy,
                    &b.value,
                )
            },
        )?;
        let batch = full.try_map_ref(&mut |a: &HostArray| a.to_buffer(&c))?;
        Ok(f.call(&(params, batch))?.to_scalar::<f32>()?)
    };
    // The cross-entropy cannot fall below the targets' entropy: what can be
    // learned is the loss above that floor (the KL divergence plus the value's
    // squared error), computed here in plain Rust.
    let floor: f32 = full
        .policy
        .as_f32()
        .unwrap_or(&[])
        .iter()
        .map(|p| -p * p.ln() / 64.0)
        .sum();
    let first = mean_loss(&trainer)? - floor;
    for _ in 0..300 {
        let b = buffer.sample(32, &mut rng)?;
        trainer.step_host(&b)?;
    }
    let last = mean_loss(&trainer)? - floor;
    assert!(
        last > -1e-4 && last < 0.5 * first,
        "loss above the floor {floor}: {first} -> {last}"
    );
    Ok(())
}

#[derive(Tree)]
struct PvItem<T> {
    obs: T,
    policy: T,
    value: T,
}

/// The policy-value MLP with its head in plain Rust.
fn forward(p: &[Vec<f32>], obs: &[f32]) -> Vec<f32> {
    let h: Vec<f32> = linear(&p[0], &p[1], obs, 32)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    let mut out = linear(&p[2], &p[3], &h, ACTIONS + 1);
    out[ACTIONS] = out[ACTIONS].tanh();
    out
}

#[test]
fn published_parameters_reach_the_stepper_without_recompiling() -> Result<(), Error> {
    let c = client();
    let mlp = pv_mlp();
    let init = c.jit("init", &(), |b, ()| mlp.init(&b.prng_key(1)))?;
    let spec = PvItem {
        obs: Shape::of::<f32>(&[8, OBS]),
        policy: Shape::of::<f32>(&[8, ACTIONS as i64]),
        value: Shape::of::<f32>(&[8]),
    };
    let m = mlp.clone();
    let mut trainer = Trainer::new(
        &c,
        init.output_spec(),
        init.call(&())?,
        &spec,
        &optim::adam(1e-2, 0.9, 0.999, 1e-8),
        move |p: &MlpParams<Op>, b: &PvItem<Op>| {
            policy_value_loss(&policy_value_head(&m.apply(p, &b.obs)), &b.policy, &b.value)
        },
    )?;
    let net = BatchedNet::new(
        &c,
        trainer.params_tree()?,
        &[OBS],
        BatchSizes::powers_of_two(4)?,
        move |p, obs| policy_value_head(&mlp.apply(p, obs)),
    )?;
    let mut stepper: Stepper<Result<Vec<f32>, Error>> = Stepper::new(net);
    let obs = ConnectFour::from_moves(&[3, 3, 4])?.observation();
    let ask = |stepper: &mut Stepper<Result<Vec<f32>, Error>>| -> Result<Vec<f32>, Error> {
        let o = obs.clone();
        stepper.spawn(move |net| async move { net.predict(o).await });
        stepper
            .run()?
            .pop()
            .unwrap_or(Err(Error::PolledAfterCompletion))
    };
    let before = ask(&mut stepper)?;
    assert!(close(
        &before,
        &forward(&trainer.host_params()?, &obs),
        1e-4
    ));
    let compiles = stepper.net().compiles();
    // Train a few steps towards "play 0, value −1", then publish.
    let batch = PvItem {
        obs: HostArray::f32(&[8, OBS], obs.repeat(8))?,
        policy: HostArray::f32(
            &[8, ACTIONS as i64],
            (0..8)
                .flat_map(|_| (0..ACTIONS).map(|k| if k == 0 { 1.0 } else { 0.0 }))
                .collect(),
        )?,
        value: HostArray::f32(&[8], vec![-1.0; 8])?,
    };
    for _ in 0..5 {
        trainer.step_host(&batch)?;
    }
    trainer.publish(stepper.net_mut())?;
    let after = ask(&mut stepper)?;
    let direct = forward(&trainer.host_params()?, &obs);
    assert!(close(&after, &direct, 1e-4), "{after:?} vs {direct:?}");
    assert!(
        !close(&after, &before, 1e-3),
        "the prediction did not change"
    );
    assert!(after[ACTIONS] < before[ACTIONS] && after[0] > before[0]);
    assert_eq!(
        stepper.net().compiles(),
        compiles,
        "recompiled after set_params"
    );
    assert_eq!(stepper.net().param_updates(), 1);
    // Publishing without a new step hands over a copy of the same parameters.
    trainer.publish(stepper.net_mut())?;
    assert!(close(&ask(&mut stepper)?, &direct, 1e-4));
    // Parameters of other shapes are refused, naming the leaf.
    let other = Mlp::new(&[OBS, 16, ACTIONS as i64 + 1], Activation::Relu);
    let wrong = c
        .jit("init2", &(), |b, ()| other.init(&b.prng_key(1)))?
        .call(&())?;
    let e = stepper.net_mut().set_params(wrong).unwrap_err().to_string();
    assert!(e.contains("parameter 0") && e.contains("f32[84,16]"), "{e}");
    Ok(())
}

fn zero_net(c: &Client, max_batch: usize) -> Result<BatchedNet, Error> {
    let mlp = pv_mlp();
    let zeros = c
        .jit("zeros", &(), |b, ()| {
            mlp.init(&b.prng_key(0)).map_ref(|p: &Op| p * 0.0)
        })?
        .call(&())?;
    BatchedNet::new(
        c,
        zeros,
        &[OBS],
        BatchSizes::powers_of_two(max_batch)?,
        move |p, obs| policy_value_head(&mlp.apply(p, obs)),
    )
}

#[test]
fn mcts_agents_through_the_stepper_batch_their_leaves_and_search_as_in_plain_rust()
-> Result<(), Error> {
    // Four agents search different positions with a zero network (uniform prior,
    // value 0): each tick holds one leaf per agent still searching, in one call,
    // and each agent's visit counts are those of the same search with a plain-Rust
    // uniform evaluator.
    let c = client();
    let mut stepper = Stepper::new(zero_net(&c, 4)?);
    let positions: Vec<Vec<usize>> = vec![
        vec![],
        vec![3],
        vec![2, 5, 2, 5, 2, 6],
        vec![0, 4, 1, 4, 6, 4],
    ];
    let config = MctsConfig {
        simulations: 60,
        ..MctsConfig::default()
    };
    for moves in &positions {
        let game = ConnectFour::from_moves(moves)?;
        let config = config.clone();
        stepper.spawn(move |net| async move {
            let mut agent = MctsAgent::new(config, 0)?;
            agent.search(&game, |obs| net.predict(obs)).await
        });
    }
    let mut most = 0;
    while stepper.running() > 0 {
        let s = stepper.tick()?;
        assert!(s.calls <= 1);
        most = most.max(s.requests);
    }
    assert_eq!(most, 4, "one leaf per agent per tick");
    let results = stepper.run()?;
    assert_eq!(results.len(), 4);
    for (moves, got) in positions.iter().zip(results) {
        let got = got?;
        let game = ConnectFour::from_moves(moves)?;
        let uniform = |_: Vec<f32>| async { Ok(vec![0.0f32; ACTIONS + 1]) };
        let want = MctsAgent::new(config.clone(), 0)?
            .search(&game, uniform)
            .now_or_never()
            .unwrap_or(Err(Error::PolledAfterCompletion))?;
        assert_eq!(got.visits, want.visits, "after {moves:?}");
        assert_eq!(got.action, want.action);
        assert_eq!(got.predictions, want.predictions);
    }
    assert_eq!(stepper.max_calls_in_a_tick(), 1);
    Ok(())
}

#[test]
fn shooting_sends_all_leaves_of_a_decision_in_one_call() -> Result<(), Error> {
    // Catch with a network whose "value" is x · w + b for a fixed w: the agent's
    // mean returns equal the same rollouts (same seed) scored in plain Rust, and
    // one decision of 3 actions × 5 rollouts is one tick of 15 requests.
    let c = client();
    let w: Vec<f32> = (0..50).map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.1).collect();
    let params = c.buffer_from_host(&w, &[50, 1])?;
    let net = BatchedNet::new(
        &c,
        params,
        &[50],
        BatchSizes::powers_of_two(16)?,
        |p: &Op, obs| obs.matmul(p),
    )?;
    let config = ShootingConfig {
        rollouts: 5,
        depth: 4,
        discount: 0.9,
        value_index: 0,
    };
    let env = Catch::new(4);
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut stepper = Stepper::new(net);
    {
        let (config, env, log) = (config.clone(), env.clone(), Rc::clone(&log));
        stepper.spawn(move |net| async move {
            let mut agent = ShootingAgent::new(config, 7)?;
            let r = agent.plan(&env, |obs| net.predict(obs)).await?;
            log.borrow_mut().push(r);
            Ok::<(), Error>(())
        });
    }
    let first = stepper.tick()?;
    assert_eq!((first.requests, first.calls), (15, 1));
    for r in stepper.run()? {
        r?;
    }
    let value = |obs: Vec<f32>| {
        let v: f32 = obs.iter().zip(&w).map(|(o, w)| o * w).sum();
        async move { Ok(vec![v]) }
    };
    let want = ShootingAgent::new(config, 7)?
        .plan(&env, value)
        .now_or_never()
        .unwrap_or(Err(Error::PolledAfterCompletion))?;
    let got = log.borrow()[0].clone();
    assert_eq!(got.action, want.action);
    assert!(
        close(&got.returns, &want.returns, 1e-5),
        "{:?} vs {:?}",
        got.returns,
        want.returns
    );
    // Depth 4 from the start never ends a Catch episode (10 rows): every rollout
    // needs its leaf scored.
    assert_eq!(got.predictions, 15);
    // Depth 1, one rollout: the return of action a is r(a) + 0.9 · v(obs after a),
    // computed here from the environment directly.
    let one = ShootingConfig {
        rollouts: 1,
        depth: 1,
        ..ShootingConfig::default()
    };
    let r = ShootingAgent::new(
        ShootingConfig {
            discount: 0.9,
            ..one
        },
        0,
    )?
    .plan(&env, value)
    .now_or_never()
    .unwrap_or(Err(Error::PolledAfterCompletion))?;
    for a in 0..3 {
        let mut e = env.clone();
        let t = e.step(a)?;
        let v: f32 = e.observation().iter().zip(&w).map(|(o, w)| o * w).sum();
        assert!((r.returns[a] - (t.reward + 0.9 * v)).abs() < 1e-6);
    }
    Ok(())
}

#[test]
fn a_loss_that_is_not_a_scalar_and_a_bad_replay_item_are_errors() -> Result<(), Error> {
    let c = client();
    let spec = Shape::of::<f32>(&[3]);
    let r = Trainer::new(
        &c,
        &spec,
        c.buffer_from_host(&[1.0f32, 2.0, 3.0], &[3])?,
        &Shape::of::<f32>(&[3]),
        &optim::sgd(0.1, 0.0, false),
        |p: &Op, x: &Op| p * x, // a vector: no gradient of it
    );
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("the loss is f32[3]") && e.contains("f32 scalar"),
        "{e}"
    );
    // Parameters that do not match their spec are refused before anything runs.
    let r = Trainer::new(
        &c,
        &spec,
        c.buffer_from_host(&[1.0f32, 2.0], &[2])?,
        &Shape::of::<f32>(&[3]),
        &optim::sgd(0.1, 0.0, false),
        |p: &Op, x: &Op| (p * x).sum(&[0], false),
    );
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("f32[2]") && e.contains("f32[3]"), "{e}");
    Ok(())
}
