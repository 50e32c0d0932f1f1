//! Fits a small MLP to `sin(x)` on [−π, π] with the whole training step inside one
//! compiled program: forward pass, mean squared error, its gradient (reverse mode,
//! emitted into the program), and an Adam update, repeated `STEPS_PER_CALL` times
//! by a `fori_loop` per call. The state (parameters and Adam's moments) is donated
//! to each call and never leaves the device between calls; only the last loss is
//! read back to print it.
//!
//! Run: `cargo run --release --example regression`. The last line printed is
//! `final_loss=<value>`: the mean squared error of the final parameters on the 256
//! grid points, recomputed in plain Rust from the downloaded parameters. The
//! example fails unless it is below 1e-3: ten times under the bar of 0.01,
//! and far from the 0.5 of predicting 0 (this network, 1 → 32 → 32 → 1, reaches
//! about 1e-7 in these 4,000 steps).

use std::time::Instant;

use xlaclient::{Builder, Client, Op, Shape, Tree};

const HIDDEN: i64 = 32;
const POINTS: usize = 256;
const STEPS_PER_CALL: i32 = 200;
const CALLS: usize = 20;
// Rust numbers in operators are f64 and take the other operand's type (f32 here).
const LR: f64 = 0.01;
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

/// The network: `tanh(tanh(x w1 + b1) w2 + b2) w3 + b3`.
#[derive(Tree, Clone)]
struct Mlp<T> {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
    w3: T,
    b3: T,
}

/// Everything a training step reads and writes.
#[derive(Tree, Clone)]
struct State<T> {
    params: Mlp<T>,
    m: Mlp<T>,
    v: Mlp<T>,
    step: T,
    loss: T,
}

fn shapes() -> Mlp<Shape> {
    let f = |d: &[i64]| Shape::of::<f32>(d);
    Mlp {
        w1: f(&[1, HIDDEN]),
        b1: f(&[HIDDEN]),
        w2: f(&[HIDDEN, HIDDEN]),
        b2: f(&[HIDDEN]),
        w3: f(&[HIDDEN, 1]),
        b3: f(&[1]),
    }
}

fn forward(p: &Mlp<Op>, x: &Op) -> Op {
    let h = (&x.matmul(&p.w1) + &p.b1).tanh();
    let h = (&h.matmul(&p.w2) + &p.b2).tanh();
    &h.matmul(&p.w3) + &p.b3
}

/// One Adam step (optax's `adam`: bias-corrected moments).
fn adam_step(b: &Builder, s: State<Op>, x: &Op, y: &Op) -> State<Op> {
    let (loss, (), g) = b.value_and_grad(s.params.clone(), |p| {
        let err = &forward(&p, x) - y;
        ((&err * &err).mean(&[0, 1]), ())
    });
    let step = &s.step + 1.0;
    let bb = step.builder();
    let c1 = 1.0 - &bb.constant(BETA1 as f32).pow(&step);
    let c2 = 1.0 - &bb.constant(BETA2 as f32).pow(&step);
    let zip = |p: &Mlp<Op>, f: &dyn Fn(usize, &Op) -> Op| -> Mlp<Op> {
        let leaves: Vec<Op> = p
            .leaves()
            .into_iter()
            .enumerate()
            .map(|(i, l)| f(i, l))
            .collect();
        p.rebuild(leaves).expect("one per leaf")
    };
    let gl: Vec<Op> = g.leaves().into_iter().cloned().collect();
    let m = zip(&s.m, &|i, m| &(m * BETA1) + &(&gl[i] * (1.0 - BETA1)));
    let v = zip(&s.v, &|i, v| {
        &(v * BETA2) + &(&(&gl[i] * &gl[i]) * (1.0 - BETA2))
    });
    let (ml, vl): (Vec<Op>, Vec<Op>) = (
        m.leaves().into_iter().cloned().collect(),
        v.leaves().into_iter().cloned().collect(),
    );
    let params = zip(&s.params, &|i, p| {
        let mhat = &ml[i] / &c1;
        let vhat = &vl[i] / &c2;
        p - &(&(&mhat / &(&vhat.sqrt() + EPS)) * LR)
    });
    State {
        params,
        m,
        v,
        step,
        loss,
    }
}

/// SplitMix64, for the initial weights.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn main() -> xlaclient::Result<()> {
    let client = Client::cpu()?;
    let spec = State {
        params: shapes(),
        m: shapes(),
        v: shapes(),
        step: Shape::of::<f32>(&[]),
        loss: Shape::of::<f32>(&[]),
    };
    let xs: Vec<f32> = (0..POINTS)
        .map(|i| {
            -std::f32::consts::PI + 2.0 * std::f32::consts::PI * i as f32 / (POINTS - 1) as f32
        })
        .collect();
    let ys: Vec<f32> = xs.iter().map(|x| x.sin()).collect();

    let t = Instant::now();
    let train = client.jit_donating("train", &spec, |b, s: State<Op>| {
        let x = b.constant_vec(&xs).reshape(&[POINTS as i64, 1]);
        let y = b.constant_vec(&ys).reshape(&[POINTS as i64, 1]);
        b.fori_loop(0, STEPS_PER_CALL, s, |_, s| adam_step(b, s, &x, &y))
    })?;
    println!("compile_s={:.3}", t.elapsed().as_secs_f64());

    // Uniform fan-in initialisation; zero biases and moments.
    let mut rng = Rng(7);
    let init = |s: &Shape, fan_in: bool, rng: &mut Rng| -> Vec<f32> {
        let n = s.dims().iter().product::<i64>() as usize;
        let scale = if fan_in {
            1.0 / (s.dims()[0] as f32).sqrt()
        } else {
            0.0
        };
        (0..n).map(|_| rng.uniform() * scale * 1.7).collect()
    };
    let upload = |shape: &Shape, data: &[f32]| client.buffer_from_host(data, shape.dims());
    let params = shapes().try_map_ref(&mut |s: &Shape| {
        let weight = s.rank() == 2;
        upload(s, &init(s, weight, &mut rng))
    })?;
    let zeros = || {
        shapes().try_map_ref(&mut |s: &Shape| {
            upload(s, &vec![0.0; s.dims().iter().product::<i64>() as usize])
        })
    };
    let mut state = State {
        params,
        m: zeros()?,
        v: zeros()?,
        step: client.scalar(0.0f32)?,
        loss: client.scalar(0.0f32)?,
    };

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
        .collect::<xlaclient::Result<_>>()?;
    let [w1, b1, w2, b2, w3, b3] = &down[..] else {
        unreachable!("six parameters")
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
