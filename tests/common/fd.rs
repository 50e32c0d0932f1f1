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

// ---------------------------------------------------------------------------------
// Property-driven checks: shapes, attributes and inputs drawn by proptest.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Cases per property when `XLACLIENT_PROPTEST_CASES` is not set: one, so that the
/// gradient tests cost what they did with fixed inputs (each case compiles two
/// programs).
pub const DEFAULT_CASES: u32 = 1;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

/// Cases per property: `XLACLIENT_PROPTEST_CASES`, else [`DEFAULT_CASES`].
pub fn case_count() -> u32 {
    env_u64("XLACLIENT_PROPTEST_CASES").map_or(DEFAULT_CASES, |n| n as u32)
}

/// Dimensions of rank `ranks`, each of 1 to `max` elements.
pub fn dims(ranks: std::ops::RangeInclusive<usize>, max: i64) -> BoxedStrategy<Vec<i64>> {
    prop::collection::vec(1..=max, ranks).boxed()
}

/// [`check_at`] for cases drawn from `case` (the parameters' dimensions and any
/// attributes `f` needs), with inputs drawn uniformly from `[lo, hi)`. The draws
/// are the same on every run (a seed from the name, moved by
/// `XLACLIENT_PROPTEST_SEED`); a failure is shrunk a little and reported with its
/// case.
pub fn prop<A: Clone + std::fmt::Debug + 'static>(
    name: &str,
    lo: f64,
    hi: f64,
    case: impl Strategy<Value = (Vec<Vec<i64>>, A)> + 'static,
    f: impl Fn(&[Op], &A) -> Op,
) {
    let strategy = case.prop_flat_map(move |(shapes, a)| {
        let values: Vec<_> = shapes
            .iter()
            .map(|d| prop::collection::vec(lo..hi, count(d)))
            .collect();
        (Just(shapes), Just(a), values)
    });
    let mut key = [0u8; 32];
    let seed = env_u64("XLACLIENT_PROPTEST_SEED").unwrap_or(0x9_fd);
    key[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, c) in name.bytes().enumerate() {
        key[8 + i % 24] ^= c.wrapping_mul(i as u8 | 1);
    }
    let config = Config {
        cases: case_count(),
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let result = runner.run(&strategy, |(shapes, a, inputs)| {
        let refs: Vec<&[i64]> = shapes.iter().map(Vec::as_slice).collect();
        check_at(&format!("{name} {shapes:?} {a:?}"), &refs, &inputs, |p| {
            f(p, &a)
        });
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

/// One parameter of dimensions `d`, no attributes.
pub fn one(d: BoxedStrategy<Vec<i64>>) -> BoxedStrategy<(Vec<Vec<i64>>, ())> {
    d.prop_map(|d| (vec![d], ())).boxed()
}
