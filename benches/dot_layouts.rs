//! How XLA's CPU backend runs `Σ_k a[k, i] · c[k, j]` (`aᵀ · c`, a weight's
//! cotangent summed over rows) in each way it can be written: contracting both
//! operands' leading axis (what a gradient writes first), from an operand stored
//! transposed (the layout the plugin's fast matrix kernels take), with the
//! transpose behind an optimization barrier (what `linalg::rows_product` writes
//! when `a` is the narrower operand), with the explicit transpose XLA folds back,
//! `((cᵀ) · a)ᵀ` behind barriers (what `rows_product` writes when `c` is the
//! narrower one), as one batched product over chunks of about 512 or 2,048 rows
//! (a number of chunks dividing `K`) summed, and what the crate's gradient of
//! `Σ (a · W) ⊙ c` with respect to `W` writes (`linalg::rows_layout`'s choice).
//! Programs alternate call by call; prints the median and the 10th percentile of
//! a call in µs (about 8 µs of each is the call itself).
//!
//! With `--loop`, the ways a gradient step inside a loop would take instead: per
//! step of a 500-step loop, `a`'s rows made by a kernel first (`1.5 · a_t`, as a
//! gradient's activations are) and the product added into an accumulator, for
//! the plain product, the transposed one and the crate's gradient; prints µs a
//! step.
//!
//! Run: `cargo bench --bench dot_layouts -- K A C [--loop]` (default `2048 256
//! 3`, Anakin's second layer; `2048 50 256` is its first).

use std::time::Instant;

use xlaclient::{Buffer, Builder, Client, Computation, DotDims, LoadedExecutable, Shape};

/// The ways, named.
const WAYS: [&str; 8] = [
    "both contract axis 0",
    "a stored transposed",
    "aᵀ behind a barrier",
    "aᵀ written, folded back",
    "(cᵀ·a)ᵀ behind barriers",
    "chunks of ~512 rows",
    "chunks of ~2048 rows",
    "the crate's gradient",
];

/// The number of chunks of about `rows` rows that divide `k` rows evenly.
fn chunks(k: i64, rows: i64) -> i64 {
    let want = (k / rows).max(1);
    (1..=k)
        .filter(|s| k % s == 0)
        .min_by_key(|s| (s - want).abs())
        .unwrap_or(1)
}

fn program(way: usize, k: i64, a_cols: i64, c_cols: i64) -> Computation {
    let b = Builder::new("dot_layouts");
    let a = b.parameter(0, Shape::of::<f32>(&[k, a_cols]), "a");
    let c = b.parameter(1, Shape::of::<f32>(&[k, c_cols]), "c");
    let at = b.parameter(2, Shape::of::<f32>(&[a_cols, k]), "at");
    let w = b.parameter(3, Shape::of::<f32>(&[a_cols, c_cols]), "w");
    let fence = |v: &xlaclient::Op| b.optimization_barrier(&[v]).remove(0);
    let canonical = DotDims::contract(1, 0);
    let r = match way {
        0 => a.dot_general(&c, &DotDims::contract(0, 0)),
        1 => at.dot_general(&c, &canonical),
        2 => fence(&a.transpose(&[1, 0])).dot_general(&c, &canonical),
        3 => a.transpose(&[1, 0]).dot_general(&c, &canonical),
        4 => {
            let r = fence(&c.transpose(&[1, 0])).dot_general(&a, &canonical);
            fence(&r).transpose(&[1, 0])
        }
        5 | 6 => {
            let s = chunks(k, if way == 5 { 512 } else { 2048 });
            let d = DotDims {
                lhs_contracting: vec![1],
                rhs_contracting: vec![1],
                lhs_batch: vec![0],
                rhs_batch: vec![0],
            };
            a.reshape(&[s, k / s, a_cols])
                .dot_general(&c.reshape(&[s, k / s, c_cols]), &d)
                .reduce_sum(&[0])
        }
        _ => {
            let loss = (&a.matmul(&w) * &c).reduce_sum(&[0, 1]);
            b.grad(&loss, &w)
        }
    };
    b.build(&r).expect("the program builds")
}

/// `way` (0 plain, 2 transposed behind a barrier, 7 the crate's gradient) per
/// step of a loop over `steps` rows of `a` and `c`, summed.
fn in_loop(way: usize, steps: i64, k: i64, a_cols: i64, c_cols: i64) -> Computation {
    let b = Builder::new("dot_layouts_loop");
    let a = b.parameter(0, Shape::of::<f32>(&[steps, k, a_cols]), "a");
    let c = b.parameter(1, Shape::of::<f32>(&[steps, k, c_cols]), "c");
    let w = b.parameter(2, Shape::of::<f32>(&[a_cols, c_cols]), "w");
    let zero = b.constant(0i32);
    let acc = b.zeros(xlaclient::ElementType::F32, &[a_cols, c_cols]);
    let acc = b.fori_loop(0, steps as i32, acc, |t, acc| {
        let row = |x: &xlaclient::Op, n: i64| {
            x.dynamic_slice(&[t, &zero, &zero], &[1, k, n])
                .reshape(&[k, n])
        };
        let (p, q) = (&row(&a, a_cols) * 1.5, row(&c, c_cols));
        let r = match way {
            0 => p.dot_general(&q, &DotDims::contract(0, 0)),
            2 => b
                .optimization_barrier(&[&p.transpose(&[1, 0])])
                .remove(0)
                .dot_general(&q, &DotDims::contract(1, 0)),
            _ => {
                let loss = (&p.matmul(&w) * &q).reduce_sum(&[0, 1]);
                b.grad(&loss, &w)
            }
        };
        &acc + &r
    });
    b.build(&acc).expect("the program builds")
}

/// Calls the executables in turn on `args`, `rounds` times: the first round
/// checks that every output element is `want` (to 1e-3; `name(i)` names a
/// failing one), the others are timed. Per executable, its calls' times in µs,
/// sorted.
fn alternate(
    exes: &[LoadedExecutable],
    args: &[&Buffer],
    rounds: usize,
    want: f32,
    name: impl Fn(usize) -> &'static str,
) -> xlaclient::Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::new(); exes.len()];
    for round in 0..rounds {
        for (i, exe) in exes.iter().enumerate() {
            let t = Instant::now();
            let out = exe.execute(args)?[0].to_vec::<f32>()?;
            let dt = t.elapsed().as_secs_f64() * 1e6;
            if round == 0 {
                assert!(
                    out.iter().all(|v| (v - want).abs() <= 1e-3 * want),
                    "{}",
                    name(i)
                );
            } else {
                times[i].push(dt);
            }
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    Ok(times)
}

fn loop_main(k: i64, a_cols: i64, c_cols: i64) -> xlaclient::Result<()> {
    const STEPS: i64 = 500;
    println!("aᵀ · c with a: [{k}, {a_cols}], c: [{k}, {c_cols}] (f32), per step of a loop");
    let client = Client::cpu()?;
    let a = client.buffer_from_host(
        &vec![0.5f32; (STEPS * k * a_cols) as usize],
        &[STEPS, k, a_cols],
    )?;
    let c = client.buffer_from_host(
        &vec![0.25f32; (STEPS * k * c_cols) as usize],
        &[STEPS, k, c_cols],
    )?;
    let w =
        client.buffer_from_host(&vec![0.0f32; (a_cols * c_cols) as usize], &[a_cols, c_cols])?;
    let ways = [0, 2, 7];
    let exes = ways
        .iter()
        .map(|w| client.compile(in_loop(*w, STEPS, k, a_cols, c_cols)))
        .collect::<Result<Vec<_>, _>>()?;
    let want = (0.1875 * (k * STEPS) as f64) as f32;
    let times = alternate(&exes, &[&a, &c, &w], 21, want, |i| WAYS[ways[i]])?;
    for (way, t) in ways.iter().zip(times) {
        println!(
            "{:<26} median {:>9.2} µs a step",
            WAYS[*way],
            t[t.len() / 2] / STEPS as f64
        );
    }
    Ok(())
}

fn main() -> xlaclient::Result<()> {
    let args: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (k, a_cols, c_cols) = (
        *args.first().unwrap_or(&2048),
        *args.get(1).unwrap_or(&256),
        *args.get(2).unwrap_or(&3),
    );
    if std::env::args().any(|a| a == "--loop") {
        return loop_main(k, a_cols, c_cols);
    }
    println!("aᵀ · c with a: [{k}, {a_cols}], c: [{k}, {c_cols}] (f32)");
    let client = Client::cpu()?;
    let a = client.buffer_from_host(&vec![0.5f32; (k * a_cols) as usize], &[k, a_cols])?;
    let c = client.buffer_from_host(&vec![0.25f32; (k * c_cols) as usize], &[k, c_cols])?;
    let at = client.buffer_from_host(&vec![0.5f32; (k * a_cols) as usize], &[a_cols, k])?;
    let w0 =
        client.buffer_from_host(&vec![0.0f32; (a_cols * c_cols) as usize], &[a_cols, c_cols])?;
    let exes = (0..WAYS.len())
        .map(|w| client.compile(program(w, k, a_cols, c_cols)))
        .collect::<Result<Vec<_>, _>>()?;
    let want = (0.125 * k as f64) as f32;
    let times = alternate(&exes, &[&a, &c, &at, &w0], 300, want, |w| WAYS[w])?;
    for (name, t) in WAYS.iter().zip(times) {
        println!(
            "{name:<26} median {:>9.1} µs   p10 {:>9.1} µs",
            t[t.len() / 2],
            t[t.len() / 10]
        );
    }
    Ok(())
}
