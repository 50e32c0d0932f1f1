//! A recurrent loop's weight products in chunks: where the state's cotangent
//! chains the steps (an RNN), the backward loop runs 2–4 steps per iteration (a
//! divisor of the step count, about 128 rows of x in all) and computes the
//! weight's cotangent of `x · W` once per iteration, as one product over those
//! steps' rows, instead of one small product and an add of W's size per step
//! (`benches/scan_grad.rs`: 3.0× → 2.95× the forward pass).
//!
//! Checked on the plugin under test: the gradients against central finite
//! differences under every checkpoint policy, for step counts that chunk by 4, 3
//! and 2 and one that does not (7), with the weight's rows from each kind of
//! stack (the state's own stored values, shifted by a step; the carry stacked;
//! a stored body value); and the structure: the backward body's products, pinned
//! per case, so that the chunks cannot silently go.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use xlaclient::{Builder, CheckpointPolicy, Computation, Op, ScanOptions, Shape};

/// Rows of the state.
const ROWS: i64 = 2;

/// `h' = tanh(h·w + x·u)` (the sum tagged "pre") over `xs`' steps; the final
/// state and each step's `h'²`, flattened. Both `w` (whose rows are the state
/// entering each step) and `u` (whose rows are the step's `x`) are weights.
fn rnn(p: &[Op], policy: &CheckpointPolicy) -> Op {
    let (h0, xs, w, u) = (&p[0], &p[1], &p[2], &p[3]);
    let b = h0.builder();
    let steps = xs.dims().unwrap()[0];
    let opts = ScanOptions::new().policy(policy.clone());
    let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
        let pre = (&h.matmul(w) + &x.matmul(u)).checkpoint_name("pre");
        let h2 = pre.tanh();
        (h2.clone(), &h2 * &h2)
    });
    b.concatenate(
        &[&h.reshape(&[ROWS * 3]), &ys.reshape(&[steps * ROWS * 3])],
        0,
    )
}

#[test]
fn chunked_gradients_match_finite_differences_under_every_policy() {
    for steps in [8i64, 6, 10, 7] {
        for (name, policy) in [
            ("everything", CheckpointPolicy::Everything),
            ("dots", CheckpointPolicy::Dots),
            ("names", CheckpointPolicy::names(&["pre"])),
            ("nothing", CheckpointPolicy::Nothing),
        ] {
            fd::check(
                &format!("chunks_{steps}_{name}"),
                &[&[ROWS, 3], &[steps, ROWS, 3], &[3, 3], &[3, 3]],
                -0.9,
                0.9,
                |p| rnn(p, &policy),
            );
        }
    }
}

/// The gradient of `Σ h'` over `steps` steps of `h' = tanh(h·w + x)` with `rows`
/// rows of `h`, with respect to `w` and `h0`; `chunk` is the scan's
/// `backward_chunk`.
fn weight_only(steps: i64, rows: i64, chunk: usize) -> Computation {
    let b = Builder::new("weight_only");
    let w = b.parameter(0, Shape::of::<f32>(&[3, 3]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[rows, 3]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[steps, rows, 3]), "xs");
    let opts = ScanOptions::new().backward_chunk(chunk);
    let (_, ys) = b.scan_with(h0.clone(), xs, &opts, |h, x| {
        let h2 = (&h.matmul(&w) + &x).tanh();
        (h2.clone(), h2.reduce_sum(&[0, 1]))
    });
    let loss = ys.reduce_sum(&[0]);
    let (gw, gh) = b.grad(&loss, &(w, h0));
    b.build_tuple(&[&gw, &gh]).expect("builds")
}

/// The most products in one computation of `m` other than the entry (a loop
/// body's).
fn most_products(m: &Computation) -> usize {
    let p = m.proto();
    p.computations
        .iter()
        .filter(|c| c.id != p.entry_computation_id)
        .map(|c| c.instructions.iter().filter(|i| i.opcode == "dot").count())
        .max()
        .unwrap_or(0)
}

#[test]
fn the_backward_body_takes_one_weight_product_per_chunk() {
    // 8 steps of 2 rows: chunks of 4, each 4 state products and 1 weight product.
    assert_eq!(most_products(&weight_only(8, 2, 0)), 5);
    // 9 steps: chunks of 3.
    assert_eq!(most_products(&weight_only(9, 2, 0)), 4);
    // 64 rows a step: chunks of 2 (128 rows).
    assert_eq!(most_products(&weight_only(8, 64, 0)), 3);
    // 7 steps (no divisor up to 4) or 128 rows a step: a step per iteration,
    // with its state product and its weight product.
    assert_eq!(most_products(&weight_only(7, 2, 0)), 2);
    assert_eq!(most_products(&weight_only(8, 128, 0)), 2);
    // Asked: one step per iteration; 8 at once (even at 128 rows a step); 3,
    // which 8 does not divide: 2.
    assert_eq!(most_products(&weight_only(8, 2, 1)), 2);
    assert_eq!(most_products(&weight_only(8, 128, 8)), 9);
    assert_eq!(most_products(&weight_only(8, 2, 3)), 3);
}

#[test]
fn chunked_and_unchunked_weight_gradients_agree() {
    // The same recurrence over 8 steps (chunked) and over the same 8 steps as a
    // scan of 7 followed by one more step written out (the 7-step scan is not
    // chunked): the gradients agree to rounding.
    let mut rng = Rng(3);
    let (w, h0, xs) = (
        rng.vec(9, -0.9, 0.9),
        rng.vec(6, -0.9, 0.9),
        rng.vec(48, -0.9, 0.9),
    );
    let args = [
        upload(&w, &[3, 3]),
        upload(&h0, &[2, 3]),
        upload(&xs, &[8, 2, 3]),
    ];
    let refs: Vec<_> = args.iter().collect();
    let chunked = run(&weight_only(8, 2, 0), &refs);
    let split = {
        let b = Builder::new("split");
        let w = b.parameter(0, Shape::of::<f32>(&[3, 3]), "w");
        let h0 = b.parameter(1, Shape::of::<f32>(&[2, 3]), "h0");
        let xs = b.parameter(2, Shape::of::<f32>(&[8, 2, 3]), "xs");
        let head = xs.slice(&[0, 0, 0], &[7, 2, 3], &[1, 1, 1]);
        let last = xs
            .slice(&[7, 0, 0], &[8, 2, 3], &[1, 1, 1])
            .reshape(&[2, 3]);
        let (h7, ys) = b.scan(h0.clone(), head, |h, x| {
            let h2 = (&h.matmul(&w) + &x).tanh();
            (h2.clone(), h2.reduce_sum(&[0, 1]))
        });
        let h8 = (&h7.matmul(&w) + &last).tanh();
        let loss = ys.reduce_sum(&[0]) + h8.reduce_sum(&[0, 1]);
        let (gw, gh) = b.grad(&loss, &(w, h0));
        b.build_tuple(&[&gw, &gh]).expect("builds")
    };
    assert_eq!(most_products(&split), 2, "the 7-step scan is not chunked");
    let unchunked = run(&split, &refs);
    for k in 0..2 {
        let (a, b) = (
            chunked[k].to_vec::<f32>().unwrap(),
            unchunked[k].to_vec::<f32>().unwrap(),
        );
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "gradient {k}[{i}]: {x} chunked, {y} step by step"
            );
        }
    }
}
