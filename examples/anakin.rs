//! DeepMind's Podracer "Anakin" demo ported to Rust: a whole reinforcement-learning
//! training loop — the Catch environment, a Q-network, a 16-step rollout, the
//! TD(λ) loss, its gradient and Adam — compiled into one XLA program and called
//! with donated state, so nothing leaves the device between calls.
//!
//! The workload is `../shared/bench-anchors/jax_anakin_catch.py` (the notebook's
//! configuration: batch 128, rollout 16, 100 iterations per call, learning rate
//! 1e-4, λ = 0.99, seed 42):
//! - Catch (rows 10, columns 5) stepped on the device, resetting itself at the
//!   end of an episode with a random ball column;
//! - Q-network Flatten(10×5) → Linear 256 → relu → Linear 3, Haiku's default
//!   initialisation (truncated normal / √fan-in, zero biases);
//! - greedy actions; TD(λ) targets bootstrapped with max_a Q(s_{t+1}, a), held
//!   fixed by `stop_gradient`; the loss is the mean squared TD error;
//! - Adam (optax's rule, lr 1e-4);
//! - the update repeated `iterations` times by a `fori_loop` inside the program.
//!
//! Two layouts:
//! - the notebook's (default): 128 independent learners, each with its own copy of
//!   the parameters and Adam state (the notebook's `vmap`, written here with
//!   batched ops: leading axis 128 on every parameter), the gradients averaged
//!   across the batch before each learner's update (the notebook's `pmean`), so
//!   all copies stay equal;
//! - `--shared-params`: one copy, the loss averaged over the batch (the same
//!   learning, 128 times less optimizer work).
//!
//! How the gradient is computed (`--grad-through-scan` to change it): by default
//! the rollout scan records the observations, actions, rewards and discounts, and
//! the loss re-evaluates the Q-network on all 16 × 128 recorded observations at
//! once, so the gradient is one batched backward pass (XLA sees [16, 50] × [50,
//! 256] products, not 16 matrix-vector products). With `--grad-through-scan` the
//! Q-values come out of the rollout scan as the notebook computes them and the
//! gradient flows back through the scan. Both give the same gradient; the test
//! `anakin_layouts_agree` checks it.
//!
//! Run: `cargo run --release --example anakin [-- --help]`. It prints the compile
//! time and the frames per second of the notebook's configuration (frames =
//! iterations × rollout × batch per call), trains for `--calls` calls, evaluates the
//! greedy policy exactly (the expected terminal reward over the 5 start columns,
//! computed in plain Rust from the downloaded parameters), writes the learning
//! curve (CSV and SVG) and a checkpoint to `--output-dir`, and ends with
//! `eval_mean_reward=<value> fps=<value> compile_s=<value>`. It exits with an
//! error if the greedy policy's reward is below 0.9.

use std::time::Instant;

use clap::Parser;
use xlaclient::nn::{self, Activation, Mlp, MlpParams, OptState, optim};
use xlaclient::rl::catch_device::{self as catch, CatchState};
use xlaclient::{Client, ElementType, Op, Tree};

/// Options (the defaults are the notebook's configuration).
#[derive(Parser, Debug, Clone)]
#[command(about = "Podracer's Anakin on Catch: the whole training loop in one XLA program")]
struct Args {
    /// Independent environments (and learners) per iteration.
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
    /// Calls timed for the frames-per-second figure (before training goes on).
    #[arg(long, default_value_t = 5)]
    timed_calls: usize,
    /// Where the learning curve and the checkpoint go.
    #[arg(long, default_value = "target/anakin")]
    output_dir: std::path::PathBuf,
}

const HIDDEN: i64 = 256;

/// Everything one call reads and writes; donated to each call.
#[derive(Tree)]
struct Learner<T> {
    /// Q-network parameters (a leading batch axis in the per-learner layout).
    params: MlpParams<T>,
    /// Adam's state.
    opt: OptState<T, MlpParams<T>>,
    /// The PRNG key the environments' resets are drawn from.
    key: T,
    /// The environments.
    env: CatchState<T>,
    /// The last iteration's loss (mean over learners), for the learning curve.
    loss: T,
}

/// Q-values for observations `obs` of `[batch, n, 50]`: one network for all
/// (`params` as `Mlp::spec`) or, per learner, the `b`-th network for row `b`
/// (`params` with a leading batch axis).
fn q_values(net: &Mlp, params: &MlpParams<Op>, obs: &Op, per_learner: bool) -> Op {
    if !per_learner {
        return net.apply(params, obs);
    }
    // Batched matmul [B, n, in] × [B, in, out], bias [B, 1, out].
    let l1 = &params[0];
    let l2 = &params[1];
    let h = (&obs.matmul(&l1.w) + &l1.b.expand_dims(1)).relu();
    &h.matmul(&l2.w) + &l2.b.expand_dims(1)
}

/// λ-returns (rlax's `lambda_returns`) of rewards `r`, discounts `d` and bootstrap
/// values `v`, all `[batch, T]`, time on axis 1: `G_t = r_t + d_t ((1-λ) v_t + λ
/// G_{t+1})`, with `G_T = v_{T-1}`. Unrolled: T is small and static.
fn lambda_returns(r: &Op, d: &Op, v: &Op, lambda: f64) -> Op {
    let dims = r.dims().expect("checked shapes");
    let (batch, t) = (dims[0], dims[1]);
    let col = |x: &Op, i: i64| x.slice(&[0, i], &[batch, i + 1], &[1, 1]);
    let mut acc = col(v, t - 1);
    let mut out = vec![acc.clone(); t as usize];
    for i in (0..t).rev() {
        acc = &col(r, i) + &(&col(d, i) * &(&(&col(v, i) * (1.0 - lambda)) + &(&acc * lambda)));
        out[i as usize] = acc.clone();
    }
    let refs: Vec<&Op> = out.iter().collect();
    r.builder().concatenate(&refs, 1)
}

/// The TD(λ) loss per learner, `[batch]`, from the Q-values `q` `[batch, T, 3]` of a
/// rollout and its actions, rewards and discounts (`[batch, T]`).
fn td_loss(q: &Op, actions: &Op, rewards: &Op, discounts: &Op, lambda: f64) -> Op {
    let dims = q.dims().expect("checked shapes");
    let (batch, t) = (dims[0], dims[1]);
    let head = |x: &Op| {
        let mut hi = x.dims().expect("checked shapes");
        hi[1] = t - 1;
        let lo = vec![0; hi.len()];
        let strides = vec![1; hi.len()];
        x.slice(&lo, &hi, &strides)
    };
    // Q(s_t, a_t) for t < T-1.
    let qa = (&head(q) * &head(actions).one_hot(3, ElementType::F32)).sum(&[2], false);
    // max_a Q(s_{t+1}, a), held fixed.
    let v = q
        .slice(&[0, 1, 0], &[batch, t, 3], &[1, 1, 1])
        .stop_gradient()
        .amax(&[2], false);
    let target = lambda_returns(&head(rewards), &head(discounts), &v, lambda).stop_gradient();
    let td = &target - &qa;
    (&td * &td).sum(&[1], false) / (t - 1) as f64
}

fn main() -> xlaclient::Result<()> {
    let args = Args::parse();
    let client = Client::cpu()?;
    let (batch, rollout, iterations) = (args.batch, args.rollout_len, args.iterations);
    let per_learner = !args.shared_params;
    let net = Mlp::new(&[catch::OBS, HIDDEN, catch::ACTIONS], Activation::Relu);
    let opt = optim::adam(args.lr, 0.9, 0.999, 1e-8);
    let lambda = args.lambda;

    // Initial state: one Haiku-initialised network (copied per learner in the
    // notebook's layout), Adam's zeros, environments at their initial states.
    let init = client.jit("anakin_init", &(), |b, ()| {
        let keys = nn::layers::split_keys(&b.prng_key(args.seed), 3);
        let mut params = net.init(&keys[0]);
        if per_learner {
            params = params.map_ref(|p: &Op| {
                let mut dims = vec![batch];
                dims.extend(p.dims().expect("parameter shapes"));
                p.expand_dims(0).broadcast_to(&dims)
            });
        }
        let columns = keys[1].randint(&[batch], 0, catch::COLUMNS);
        Learner {
            opt: opt.init(&params),
            params,
            key: keys[2].clone(),
            env: catch::initial_state(&columns),
            loss: b.constant(f32::NAN),
        }
    })?;

    let t = Instant::now();
    let learner = client.jit_donating("anakin", init.output_spec(), |b, s: Learner<Op>| {
        b.fori_loop(0, iterations, s, |_, s| {
            let keys = nn::layers::split_keys(&s.key, 2);
            // The reset column each environment would take at each step.
            let resets = keys[1].randint(&[rollout, batch], 0, catch::COLUMNS);
            let rollout_q = |params: &MlpParams<Op>, grad: bool| {
                b.scan(s.env.clone(), resets.clone(), None, false, |env, reset| {
                    let obs = catch::render(&env);
                    let q = q_values(&net, params, &obs.expand_dims(1), per_learner)
                        .reshape(&[batch, catch::ACTIONS]);
                    let a = q.argmax(1);
                    let (next, r, d) = catch::step(&env, &a, &reset);
                    let q = if grad { q } else { obs };
                    (next, (q, a, r, d))
                })
            };
            let batch_major = |x: &Op| {
                let rank = x.dims().expect("checked shapes").len() as i64;
                let mut perm = vec![1, 0];
                perm.extend(2..rank);
                x.transpose(&perm)
            };
            let mean_over_learners = |loss: &Op| loss.sum(&[0], false) / batch as f64;
            let (loss, env, grads) = if args.grad_through_scan {
                let (loss, env, g) = b.value_and_grad(s.params.clone(), |p| {
                    let (env, (q, a, r, d)) = rollout_q(&p, true);
                    let [q, a, r, d] = [q, a, r, d].map(|x| batch_major(&x));
                    let l = td_loss(&q, &a, &r, &d, lambda);
                    let total = if per_learner {
                        l.sum(&[0], false)
                    } else {
                        mean_over_learners(&l)
                    };
                    (total, env)
                });
                (loss, env, g)
            } else {
                let (env, (obs, a, r, d)) = rollout_q(&s.params, false);
                let [obs, a, r, d] = [obs, a, r, d].map(|x| batch_major(&x));
                let (loss, (), g) = b.value_and_grad(s.params.clone(), |p| {
                    let q = q_values(&net, &p, &obs, per_learner);
                    let l = td_loss(&q, &a, &r, &d, lambda);
                    let total = if per_learner {
                        l.sum(&[0], false)
                    } else {
                        mean_over_learners(&l)
                    };
                    (total, ())
                });
                (loss, env, g)
            };
            let (grads, loss) = if per_learner {
                // The notebook's pmean over the batch axis.
                let g = grads.map_ref(|g: &Op| {
                    let dims = g.dims().expect("gradient shapes");
                    (g.sum(&[0], true) / batch as f64).broadcast_to(&dims)
                });
                (g, loss / batch as f64)
            } else {
                (grads, loss)
            };
            let (params, opt) = opt.update(&grads, s.opt, &s.params);
            Learner {
                params,
                opt,
                key: keys[0].clone(),
                env,
                loss,
            }
        })
    })?;
    let compile_s = t.elapsed().as_secs_f64();
    println!(
        "layout={} batch={batch} rollout={rollout} iterations/call={iterations} lr={} grad_through_scan={}",
        if per_learner {
            "per-learner (notebook)"
        } else {
            "shared-params"
        },
        args.lr,
        args.grad_through_scan
    );
    println!("compile_s={compile_s:.3}");

    let mut state = init.call(&())?;
    let evaluate = |state: &Learner<xlaclient::Buffer>| -> xlaclient::Result<f64> {
        let host: Vec<Vec<f32>> = state
            .params
            .leaves()
            .into_iter()
            .map(|b| b.to_vec::<f32>())
            .collect::<xlaclient::Result<_>>()?;
        // Learner 0's copy (all copies are equal).
        let (obs_n, hidden) = (catch::OBS as usize, HIDDEN as usize);
        let w1 = &host[0][..obs_n * hidden];
        let b1 = &host[1][..hidden];
        let w2 = &host[2][..hidden * 3];
        let b2 = &host[3][..3];
        Ok(catch::greedy_eval(|obs| {
            let h: Vec<f32> = (0..hidden)
                .map(|j| {
                    let s: f32 = (0..obs_n).map(|i| obs[i] * w1[i * hidden + j]).sum();
                    (s + b1[j]).max(0.0)
                })
                .collect();
            let mut q = [0f32; 3];
            for (k, qk) in q.iter_mut().enumerate() {
                *qk = h
                    .iter()
                    .enumerate()
                    .map(|(j, hj)| hj * w2[j * 3 + k])
                    .sum::<f32>()
                    + b2[k];
            }
            q
        }))
    };
    let mut curve = vec![(0usize, evaluate(&state)?, f64::NAN)];
    println!("iteration {:>6}  greedy reward {:+.2}", 0, curve[0].1);

    // Frames per second: the median of `timed_calls` calls.
    let frames = iterations as f64 * rollout as f64 * batch as f64;
    let mut call_s = Vec::new();
    let mut calls_done = 0;
    while calls_done < args.calls.max(args.timed_calls) {
        let t = Instant::now();
        state = learner.call_donated(state)?;
        let loss = state.loss.to_scalar::<f32>()? as f64;
        if call_s.len() < args.timed_calls {
            call_s.push(t.elapsed().as_secs_f64());
        }
        calls_done += 1;
        if calls_done % args.eval_every == 0 || calls_done == args.calls {
            let reward = evaluate(&state)?;
            let it = calls_done * iterations as usize;
            println!("iteration {it:>6}  greedy reward {reward:+.2}  loss {loss:.4}");
            curve.push((it, reward, loss));
        }
    }
    call_s.sort_by(f64::total_cmp);
    let median = call_s[call_s.len() / 2];
    let fps = frames / median;
    println!(
        "{} calls timed: median {:.4} s per call ({} frames) -> {fps:.3e} frames/s",
        call_s.len(),
        median,
        frames
    );
    let reward = evaluate(&state)?;
    println!("eval_mean_reward={reward:.3} fps={fps:.4e} compile_s={compile_s:.3}");
    if reward < 0.9 {
        eprintln!("the greedy policy did not learn Catch (mean reward {reward:.3} < 0.9)");
        std::process::exit(1);
    }
    Ok(())
}
