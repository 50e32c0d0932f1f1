//! Finite-difference checks of gradients, shared by the gradient tests (include
//! with `#[path = "common/fd.rs"] mod fd;` next to `mod common;`).
//!
//! [`check`] builds `out = f(params)` for f64 parameters of random values, reduces
//! it to a scalar `loss = Σ out ⊙ W` with a fixed random `W` (so every output
//! element counts with its own weight), and compares `grad(loss)` computed inside
//! the program with `(loss(x + h·e_i) − loss(x − h·e_i)) / 2h` for every input
//! element `i`, `h = 1e-6`. In f64 the truncation error is `O(h²)` ≈ 1e-12 and the
//! rounding error `O(ε/h)` ≈ 1e-10 relative to the loss, so a tolerance of 1e-6
//! (absolute plus relative) leaves three orders of margin and still fails on any
//! wrong rule.

#![allow(dead_code)]

use crate::common::{Rng, client, count, run, upload};
use xlaclient::{Builder, Op, Shape};

pub const H: f64 = 1e-6;
pub const TOL: f64 = 1e-6;

pub fn rand_vec(rng: &mut Rng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n)
        .map(|_| lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// The gradient of `Σ f(params) ⊙ W` inside the program vs central differences.
pub fn check(name: &str, shapes: &[&[i64]], lo: f64, hi: f64, f: impl Fn(&[Op]) -> Op) {
    let mut rng = Rng(name.len() as u64 * 7919 + 17);
    let inputs: Vec<Vec<f64>> = shapes
        .iter()
        .map(|d| rand_vec(&mut rng, count(d), lo, hi))
        .collect();
    check_at(name, shapes, &inputs, f);
}

pub fn check_at(name: &str, shapes: &[&[i64]], inputs: &[Vec<f64>], f: impl Fn(&[Op]) -> Op) {
    let build = |with_grad: bool| {
        let b = Builder::new(name);
        let ps: Vec<Op> = shapes
            .iter()
            .enumerate()
            .map(|(i, d)| b.parameter(i, Shape::of::<f64>(d), &format!("p{i}")))
            .collect();
        let out = f(&ps);
        let dims = out.dims().unwrap_or_else(|e| panic!("{name}: {e}"));
        let w = rand_vec(&mut Rng(5), count(&dims), -1.0, 1.0);
        let wc = b.constant_vec(&w).reshape(&dims);
        let axes: Vec<i64> = (0..dims.len() as i64).collect();
        let loss = (&out * &wc).reduce_sum(&axes);
        if with_grad {
            let g = b.grad(&loss, &ps);
            let outs: Vec<&Op> = std::iter::once(&loss).chain(&g).collect();
            b.build_tuple(&outs)
        } else {
            b.build(&loss)
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let grad_module = build(true);
    let loss_module = client().compile(build(false)).unwrap();
    let bufs: Vec<_> = inputs
        .iter()
        .zip(shapes)
        .map(|(v, d)| upload(v, d))
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let outs = run(&grad_module, &refs);
    // The gradient program computes the loss too (through the loops that store
    // residuals, which serve the forward values): the same as the loss alone.
    let loss: f64 = outs[0].to_vec::<f64>().unwrap()[0];
    let alone: f64 = loss_module.execute(&refs).unwrap()[0]
        .to_vec::<f64>()
        .unwrap()[0];
    assert!(
        (loss - alone).abs() <= 1e-12 * (1.0 + alone.abs()),
        "{name}: the gradient program's loss {loss} vs the loss alone {alone}"
    );
    for (k, d) in shapes.iter().enumerate() {
        let got: Vec<f64> = outs[k + 1].to_vec().unwrap();
        assert_eq!(got.len(), count(d), "{name}: gradient {k} size");
        for i in 0..count(d) {
            let at = |delta: f64| {
                let mut v = inputs[k].clone();
                v[i] += delta;
                let moved = upload(&v, d);
                let args: Vec<_> = bufs
                    .iter()
                    .enumerate()
                    .map(|(j, b)| if j == k { &moved } else { b })
                    .collect();
                loss_module.execute(&args).unwrap()[0]
                    .to_vec::<f64>()
                    .unwrap()[0]
            };
            let fd = (at(H) - at(-H)) / (2.0 * H);
            assert!(
                (got[i] - fd).abs() <= TOL * (1.0 + fd.abs()),
                "{name}: d/d p{k}[{i}]: autodiff {} vs finite differences {fd}",
                got[i]
            );
        }
    }
}
