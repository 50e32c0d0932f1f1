//! Stacks that a loop writes in full, row by row, before anything reads them (a
//! scan's stacked outputs, the values a loop gradient stores) start as buffers
//! left as allocated: a custom call to `UNINITIALIZED_TARGET`, whose kernel the
//! client registers with the CPU plugin, instead of a broadcast of zeros (a pass
//! over the whole stack's memory: 4% of a 1,000-step RNN gradient,
//! `benches/scan_grad.rs`). Checked here on the plugin under test:
//!
//! - the kernel registers, and the calls reach the compiled program (XLA does not
//!   merge two of them, which would make it copy one stack);
//! - the results equal those of the same program with zeros in their place (the
//!   module the client compiles on other platforms) and independent references:
//!   plain Rust for the scan, central differences for its gradient;
//! - a loop of unknown trip count (`while_loop_bounded`) keeps zeros, since rows
//!   of steps it does not run stay as they start;
//! - StableHLO text (what JAX reads) holds zeros, not the kernel.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use xlaclient::pjrt::HloModuleSource;
use xlaclient::{
    Builder, Comparison, CompileOptions, Computation, Op, ProgramFormat, Shape,
    UNINITIALIZED_TARGET,
};

const T: i64 = 7;

/// Calls of the kernel in a proto module.
fn kernel_calls(m: &xlaclient::proto::HloModuleProto) -> usize {
    m.computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| i.opcode == "custom-call" && i.custom_call_target == UNINITIALIZED_TARGET)
        .count()
}

/// An RNN over `T` steps whose stacked outputs are each step's state and the
/// state's sum; with `grad`, also the gradient of `Σ ys·ys + Σ sums` with respect
/// to the weight and the initial state.
fn rnn(grad: bool) -> Computation {
    let b = Builder::new("rnn");
    let w = b.parameter(0, Shape::of::<f32>(&[3, 3]), "w");
    let h0 = b.parameter(1, Shape::of::<f32>(&[2, 3]), "h0");
    let xs = b.parameter(2, Shape::of::<f32>(&[T, 2, 3]), "xs");
    let (_, (ys, sums)) = b.scan(h0.clone(), xs, |h, x| {
        let h2 = (&h.matmul(&w) + &x).tanh();
        let s = h2.reduce_sum(&[0, 1]);
        (h2.clone(), (h2, s))
    });
    let loss = (&ys * &ys).reduce_sum(&[0, 1, 2]) + sums.reduce_sum(&[0]);
    if grad {
        let (gw, gh) = b.grad(&loss, &(w.clone(), h0.clone()));
        b.build_tuple(&[&ys, &sums, &gw, &gh])
    } else {
        b.build_tuple(&[&ys, &sums])
    }
    .expect("the program builds")
}

fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng(11);
    (
        rng.vec(9, -0.8, 0.8),
        rng.vec(6, -0.8, 0.8),
        rng.vec((T * 6) as usize, -0.8, 0.8),
    )
}

fn outputs(module: &Computation) -> Vec<Vec<f32>> {
    let (w, h0, xs) = inputs();
    let args = [
        upload(&w, &[3, 3]),
        upload(&h0, &[2, 3]),
        upload(&xs, &[T, 2, 3]),
    ];
    run(module, &args.iter().collect::<Vec<_>>())
        .iter()
        .map(|b| b.to_vec::<f32>().expect("download"))
        .collect()
}

#[test]
fn the_kernel_registers_with_the_plugin() {
    client()
        .plugin()
        .enable_uninitialized_buffers()
        .expect("the CPU plugin takes the kernel");
    // Once registered, asking again gives the same answer.
    client()
        .plugin()
        .enable_uninitialized_buffers()
        .expect("registered");
}

#[test]
fn scan_stacks_start_uninitialized_and_hold_every_row() {
    let m = rnn(false);
    assert!(m.uses_uninitialized_buffers());
    assert_eq!(kernel_calls(&m.proto()), 2, "one per stacked output");
    let out = outputs(&m);
    // Plain Rust: the same recurrence.
    let (w, h0, xs) = inputs();
    let mut h = h0.clone();
    for t in 0..T as usize {
        let mut next = vec![0f32; 6];
        for r in 0..2 {
            for c in 0..3 {
                let dot: f32 = (0..3).map(|k| h[r * 3 + k] * w[k * 3 + c]).sum();
                next[r * 3 + c] = (dot + xs[t * 6 + r * 3 + c]).tanh();
            }
        }
        for (i, v) in next.iter().enumerate() {
            let got = out[0][t * 6 + i];
            assert!((got - v).abs() <= 1e-5, "ys[{t}][{i}]: {got} against {v}");
        }
        let sum: f32 = next.iter().sum();
        assert!((out[1][t] - sum).abs() <= 1e-5, "sums[{t}]");
        h = next;
    }
}

#[test]
fn gradient_stacks_reach_the_program_and_match_zeros() {
    let m = rnn(true);
    let calls = kernel_calls(&m.proto());
    // The scan's two stacks and the storing loop's (at least the stored state).
    assert!(calls >= 3, "{calls} uninitialized buffers");
    let exe = client().compile(&m).expect("compile");
    let optimized = exe.optimized_module().expect("the optimized module");
    // XLA drops the stacks no one reads, and keeps a call for each of the others:
    // the scan's two outputs and the stored state, the state's two of the same
    // shape not merged into one (XLA would then copy one of them).
    let same_shape = optimized
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .filter(|i| i.custom_call_target == UNINITIALIZED_TARGET)
        .filter(|i| i.shape.as_ref().is_some_and(|s| s.dimensions == [T, 2, 3]))
        .count();
    assert!(
        kernel_calls(&optimized) >= 3,
        "calls in the compiled program"
    );
    assert!(same_shape >= 2, "{same_shape} calls of shape [{T}, 2, 3]");
    // The module the client compiles where the kernel is unavailable: zeros.
    let zeroed = Computation::from_hlo_bytes(&m.hlo_module_bytes_zeroed())
        .expect("the zeroed module verifies");
    assert!(!zeroed.uses_uninitialized_buffers());
    assert_eq!(kernel_calls(&zeroed.proto()), 0);
    let (a, z) = (outputs(&m), outputs(&zeroed));
    for (k, (x, y)) in a.iter().zip(&z).enumerate() {
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!(
                (p - q).abs() <= 1e-6 * (1.0 + q.abs()),
                "output {k}[{i}]: {p} with uninitialized stacks, {q} with zeros"
            );
        }
    }
}

#[test]
fn gradient_through_uninitialized_stacks_matches_finite_differences() {
    // f64, the shared check: the loss weights every stacked output.
    fd::check(
        "uninit_rnn",
        &[&[3, 3], &[2, 3], &[T, 2, 3]],
        -0.8,
        0.8,
        |p| {
            let b = p[0].builder();
            let (w, h0, xs) = (&p[0], &p[1], &p[2]);
            let (_, ys) = b.scan(h0.clone(), xs.clone(), |h, x| {
                let h2 = (&h.matmul(w) + &x).tanh();
                (h2.clone(), h2)
            });
            ys
        },
    );
}

#[test]
fn bounded_loops_keep_zeros_for_the_steps_they_skip() {
    let b = Builder::new("bounded");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let n = b.parameter(1, Shape::of::<i32>(&[]), "n");
    let zero = b.constant(0i32);
    let (_, y) = b.while_loop_bounded(
        (zero, x.clone()),
        9,
        |(i, _): &(Op, Op)| i.compare(&n, Comparison::Lt),
        |(i, y): (Op, Op)| (&i + 1i64, (&y * &y * 0.5 + 0.25).sin()),
    );
    let loss = y.reduce_sum(&[0]);
    let g = b.grad(&loss, &x);
    let m = b.build_tuple(&[&loss, &g]).expect("builds");
    assert_eq!(
        kernel_calls(&m.proto()),
        0,
        "a bounded loop's stacks are zeros"
    );
    let xs = [0.3f32, -0.7, 1.1, 0.05];
    for steps in [0i32, 3, 9] {
        let out = run(&m, &[&upload(&xs, &[4]), &upload(&[steps], &[])]);
        let g = out[1].to_vec::<f32>().expect("download");
        // The derivative by the chain rule in plain Rust.
        for (k, x0) in xs.iter().enumerate() {
            let (mut y, mut d) = (*x0 as f64, 1f64);
            for _ in 0..steps {
                let u = y * y * 0.5 + 0.25;
                d *= u.cos() * y;
                y = u.sin();
            }
            assert!(
                (g[k] as f64 - d).abs() <= 1e-5 * (1.0 + d.abs()),
                "{steps} steps, x[{k}]: {} against {d}",
                g[k]
            );
        }
    }
}

#[test]
fn stablehlo_text_holds_zeros_and_computes_the_same() {
    let m = rnn(true);
    let text = m.to_stablehlo().expect("prints");
    assert!(
        !text.contains(UNINITIALIZED_TARGET),
        "the kernel is this runtime's; StableHLO gets zeros"
    );
    let opts = CompileOptions::new().format(ProgramFormat::StableHlo);
    let exe = client().compile_with(&m, &opts).expect("compiles");
    let (w, h0, xs) = inputs();
    let args = [
        upload(&w, &[3, 3]),
        upload(&h0, &[2, 3]),
        upload(&xs, &[T, 2, 3]),
    ];
    let via_text: Vec<Vec<f32>> = exe
        .execute(&args.iter().collect::<Vec<_>>())
        .expect("runs")
        .iter()
        .map(|b| b.to_vec::<f32>().expect("download"))
        .collect();
    for (k, (x, y)) in outputs(&m).iter().zip(&via_text).enumerate() {
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            assert!(
                (p - q).abs() <= 1e-5 * (1.0 + q.abs()),
                "output {k}[{i}]: {p} from HLO, {q} from StableHLO"
            );
        }
    }
}
