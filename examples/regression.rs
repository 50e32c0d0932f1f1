//! Fits a small MLP to `sin(x)` on [−π, π] with the whole training step inside one
//! compiled program, written with the crate's neural-network library
//! ([`xlaclient::nn`]): LeCun-uniform initialisation drawn on the device from a
//! PRNG key, the network's forward pass, the mean squared error, its gradient
//! (reverse mode, emitted into the program) and optax's Adam update, repeated
//! `STEPS_PER_CALL` times by a `fori_loop` per call. The state (parameters and
//! Adam's moments and step count) is one tree, donated to each call, that never
//! leaves the device between calls; only the last loss is read back to print it.
//!
//! Run: `cargo run --release --example regression`. The last line printed is
//! `final_loss=<value>`: the mean squared error of the final parameters on the 256
//! grid points, recomputed in plain Rust from the downloaded parameters. The
//! example fails unless it is below 1e-3: ten times under the bar of 0.01,
//! and far from the 0.5 of predicting 0.

use std::time::Instant;

use xlaclient::ClientExt;
use xlaclient::nn::{Activation, Mlp, MlpParams, OptState, init, losses, optim};
use xlaclient::{Client, Op, Tree};

const HIDDEN: i64 = 32;
const POINTS: usize = 256;
const STEPS_PER_CALL: i32 = 200;
const CALLS: usize = 20;

/// Everything a training step reads and writes.
#[derive(Tree)]
struct TrainState<T> {
    params: MlpParams<T>,
    opt: OptState<T, MlpParams<T>>,
    loss: T,
}

fn main() -> xlaclient::Result<()> {
    let client = Client::cpu()?;
    // 1 → 32 → tanh → 32 → tanh → 1, LeCun-uniform weights and zero biases,
    // trained with optax.adam(0.01).
    let net = Mlp::new(&[1, HIDDEN, HIDDEN, 1], Activation::Tanh)
        .with_init(init::lecun_uniform(), init::zeros());
    let opt = optim::adam(0.01, 0.9, 0.999, 1e-8);
    let xs: Vec<f32> = (0..POINTS)
        .map(|i| {
            -std::f32::consts::PI + 2.0 * std::f32::consts::PI * i as f32 / (POINTS - 1) as f32
        })
        .collect();
    let ys: Vec<f32> = xs.iter().map(|x| x.sin()).collect();

    let t = Instant::now();
    // Initialisation is a program too: its outputs are the first state.
    let init = client.jit("init", &(), |b, ()| {
        let params = net.init(&b.prng_key(7));
        TrainState {
            opt: opt.init(&params),
            params,
            loss: b.constant(f32::NAN),
        }
    })?;
    // The training step: TrainState<Op> -> TrainState<Op>, updated in place.
    let train = client.jit_donating("train", init.output_spec(), |b, s: TrainState<Op>| {
        let x = b.constant_vec(&xs).reshape(&[POINTS as i64, 1]);
        let y = b.constant_vec(&ys).reshape(&[POINTS as i64, 1]);
        b.fori_loop(0, STEPS_PER_CALL, s, |_, s| {
            let (loss, (), grads) = b.value_and_grad(s.params.clone(), |p| {
                (losses::mse(&net.apply(&p, &x), &y), ())
            });
            let (params, opt) = opt.update(&grads, s.opt, &s.params);
            TrainState { params, opt, loss }
        })
    })?;
    println!("compile_s={:.3}", t.elapsed().as_secs_f64());

    let mut state = init.call(&())?;
    let t = Instant::now();
    for call in 1..=CALLS {
        state = train.call_donated(state)?;
        if call % 2 == 0 || call == CALLS {
            let loss = state.loss.to_scalar::<f32>()?;
            println!(
                "step {:>5}  loss {loss:.3e}",
                call * STEPS_PER_CALL as usize
            );
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let steps = CALLS * STEPS_PER_CALL as usize;
    println!(
        "{steps} steps in {secs:.2} s ({:.0} steps/s)",
        steps as f64 / secs
    );
    // The final parameters, checked on the host: the same loss from plain Rust.
    let down: Vec<Vec<f32>> = state
        .params
        .leaves()
        .into_iter()
        .map(|b| b.to_vec::<f32>())
        .collect::<Result<_, xlaclient::RuntimeError>>()?;
    let [w1, b1, w2, b2, w3, b3] = &down[..] else {
        unreachable!("three layers of w and b")
    };
    let h = HIDDEN as usize;
    let host_loss = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| {
            let h1: Vec<f32> = (0..h).map(|j| (x * w1[j] + b1[j]).tanh()).collect();
            let h2: Vec<f32> = (0..h)
                .map(|k| ((0..h).map(|j| h1[j] * w2[j * h + k]).sum::<f32>() + b2[k]).tanh())
                .collect();
            let out = (0..h).map(|k| h2[k] * w3[k]).sum::<f32>() + b3[0];
            (out - y) * (out - y)
        })
        .sum::<f32>()
        / POINTS as f32;
    println!("host_loss={host_loss:.3e} (the final parameters' loss computed in plain Rust)");
    let loss = host_loss;
    println!("final_loss={loss:.3e}");
    if loss.is_nan() || loss >= 1e-3 {
        eprintln!("the fit did not converge below 1e-3");
        std::process::exit(1);
    }
    Ok(())
}
