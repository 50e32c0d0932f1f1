//! Reverse-mode gradients on the real plugin, each checked against central finite
//! differences of the same program in f64, through every op with a rule, loops,
//! conditionals, calls and second order; JAX's conventions at kinks; and the errors.
//!
//! **Tolerance.** A gradient element passes when `|autodiff − fd| ≤ 1e-6 · (1 +
//! |fd|)`, where `fd = (L(x + h·e_i) − L(x − h·e_i)) / 2h` with `h = 1e-6` and `L =
//! Σ f(x) ⊙ W` for a fixed random `W` (`tests/common/fd.rs`). In f64 the truncation
//! error of central differences is `O(h²·L''')` ≈ 1e-12 and the rounding error
//! `O(ε·|L|/h)` ≈ 1e-10 for the small, O(1) inputs used here, so 1e-6 leaves three to
//! four orders of margin while a wrong rule (a missing factor, a transposed axis, a
//! cotangent sent to the wrong element) is off by O(1). The gradient program's loss
//! must also equal the loss alone to 1e-12.
//!
//! **Drawn cases.** The per-op tests (`prop`) draw the parameters' dimensions (small:
//! ranks 0–4, at most 7 per axis), the op's attributes (axes, permutations, slices,
//! padding, windows) and the f64 inputs with proptest strategies, uniformly within
//! ranges that keep away from kinks (ties, 0 for abs, integer steps, bounds) except
//! where a test is about them — a kink within `h` of a draw is possible but has
//! probability of order 1e-6. `XLACLIENT_PROPTEST_CASES=N` runs `N` cases per
//! property (default [`fd::DEFAULT_CASES`], 1: each case compiles two programs, and
//! one keeps the suite's time what it was with fixed inputs);
//! `XLACLIENT_PROPTEST_SEED=S` draws other cases (the default seed makes every run
//! the same). Loops, conditionals, custom rules, index edge cases and ties keep
//! hand-picked inputs, which is what they test.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use fd::{check, check_at, dims, one, prop};
use proptest::prelude::*;
use proptest::sample::subsequence;
use xlaclient::ops::window::WindowDim;
use xlaclient::{Builder, Comparison, DotDims, ElementType, Op, Shape, TakeMode};

/// Two-parameter cases: dimensions drawn, no attributes.
fn two(
    a: impl Strategy<Value = Vec<i64>> + 'static,
) -> impl Strategy<Value = (Vec<Vec<i64>>, ())> + 'static {
    a.prop_map(|d| (vec![d.clone(), d], ()))
}

/// One parameter of dimensions `d` and a non-empty set of its axes.
fn with_axes(d: BoxedStrategy<Vec<i64>>) -> BoxedStrategy<(Vec<Vec<i64>>, Vec<i64>)> {
    d.prop_flat_map(|d| {
        let r = d.len();
        let axes = subsequence((0..r as i64).collect::<Vec<_>>(), 1..=r);
        (Just(vec![d]), axes)
    })
    .boxed()
}

/// One parameter of dimensions `d` and one of its axes.
fn with_axis(d: BoxedStrategy<Vec<i64>>) -> BoxedStrategy<(Vec<Vec<i64>>, i64)> {
    d.prop_flat_map(|d| {
        let r = d.len() as i64;
        (Just(vec![d]), 0..r)
    })
    .boxed()
}

#[test]
fn unary_ops() {
    let s = || one(dims(0..=3, 3));
    prop("neg", -2.0, 2.0, s(), |p, _| -&p[0]);
    prop("exp", -2.0, 2.0, s(), |p, _| p[0].exp());
    prop("log", 0.5, 3.0, s(), |p, _| p[0].log());
    prop("tanh", -2.0, 2.0, s(), |p, _| p[0].tanh());
    prop("abs", 0.1, 2.0, s(), |p, _| (&p[0] - 1.0).abs());
    prop("sqrt", 0.5, 3.0, s(), |p, _| p[0].sqrt());
    prop("rsqrt", 0.5, 3.0, s(), |p, _| p[0].rsqrt());
    prop("sin", -3.0, 3.0, s(), |p, _| p[0].sin());
    prop("cos", -3.0, 3.0, s(), |p, _| p[0].cos());
    prop("logistic", -3.0, 3.0, s(), |p, _| p[0].logistic());
    prop("expm1", -1.0, 1.0, s(), |p, _| p[0].expm1());
    prop("log1p", -0.5, 2.0, s(), |p, _| p[0].log1p());
    // Piecewise constant: zero gradient away from the steps.
    prop("floor", 0.1, 0.9, s(), |p, _| &p[0].floor() + &p[0]);
    prop("ceil_sign", 0.1, 0.9, s(), |p, _| {
        &(&p[0].ceil() + &p[0].sign()) * &p[0]
    });
    prop("round", 0.1, 0.4, s(), |p, _| {
        &(&p[0].round() + &p[0].round_even()) + &p[0]
    });
    prop("cbrt", 0.5, 3.0, s(), |p, _| p[0].cbrt());
    prop("tan", -1.0, 1.0, s(), |p, _| p[0].tan());
    prop("erf", -2.0, 2.0, s(), |p, _| p[0].erf());
}

#[test]
fn binary_ops_with_broadcasting() {
    // `[m, n]` with `[n]`, broadcast along the leading axis.
    let s = || (1i64..=3, 1i64..=4).prop_map(|(m, n)| (vec![vec![m, n], vec![n]], ()));
    prop("add", -2.0, 2.0, s(), |p, _| &p[0] + &p[1]);
    prop("sub", -2.0, 2.0, s(), |p, _| &p[1] - &p[0]);
    prop("mul", -2.0, 2.0, s(), |p, _| &p[0] * &p[1]);
    prop("div", 0.5, 2.0, s(), |p, _| &p[0] / &p[1]);
    prop("max", -2.0, 2.0, s(), |p, _| p[0].max(&p[1]));
    prop("min", -2.0, 2.0, s(), |p, _| p[1].min(&p[0]));
    prop("pow", 0.5, 2.0, s(), |p, _| p[0].pow(&p[1]));
    prop("rem", 1.1, 1.9, s(), |p, _| (&p[0] * 3.0).rem(&p[1]));
    prop("atan2", -2.0, 2.0, s(), |p, _| p[0].atan2(&p[1]));
    // Through complex numbers (real/imag/complex, and complex mul/div/exp between).
    prop("complex", -2.0, 2.0, s(), |p, _| {
        let z = p[0].complex(&p[1]);
        let w = p[1].complex(&p[0].sin());
        let zw = z.mul(&w).add(&z.div(&w.exp()));
        &(&zw.real() + &(&zw.imag() * &p[0])) + &(&p[0].real() + &p[1].imag())
    });
    // A real array converted to complex: the real part of the cotangent comes back.
    check("complex_convert", &[&[3]], -2.0, 2.0, |p| {
        let z = p[0].convert(ElementType::C128);
        z.mul(&z).exp().imag()
    });
    prop("scalar_ops", 0.5, 2.0, one(dims(0..=2, 4)), |p, _| {
        &(&(2.0 - &p[0]) * 3.0) / &(&p[0] + 1.0)
    });
}

#[test]
fn select_and_compare() {
    prop("select", -1.0, 1.0, two(dims(1..=2, 4)), |p, _| {
        let c = p[0].compare(&p[1], Comparison::Gt);
        p[0].builder().select(&c, &(&p[0] * 2.0), &p[1].exp())
    });
    prop("relu", -1.0, 1.0, one(dims(1..=2, 6)), |p, _| p[0].relu());
}

#[test]
fn shape_ops() {
    let sizes = || (1i64..=3, 1i64..=3, 1i64..=4);
    prop(
        "broadcast_in_dim",
        -1.0,
        1.0,
        sizes().prop_map(|(x, a, y)| (vec![vec![a, 1]], [x, a, y])),
        |p, out| p[0].broadcast_in_dim(out, &[1, 2]),
    );
    // Input axes 0 and 1 go to output axes 2 and 0.
    prop(
        "broadcast_permuting",
        -1.0,
        1.0,
        sizes().prop_map(|(a, b, c)| (vec![vec![a, b]], [b, c, a])),
        |p, out| p[0].broadcast_in_dim(out, &[2, 0]),
    );
    prop(
        "reshape",
        -1.0,
        1.0,
        (1i64..=3, 1i64..=4).prop_map(|(a, b)| (vec![vec![a, b]], [b, a])),
        |p, out| p[0].reshape(out).exp(),
    );
    prop(
        "transpose",
        -1.0,
        1.0,
        (dims(3..=3, 3), Just(vec![0i64, 1, 2]).prop_shuffle())
            .prop_map(|(d, perm)| (vec![d], perm)),
        |p, perm| p[0].transpose(perm).sin(),
    );
    prop(
        "convert_roundtrip",
        -1.0,
        1.0,
        one(dims(0..=2, 4)),
        |p, _| (&p[0] * &p[0]).convert(xlaclient::ElementType::F64).tanh(),
    );
}

#[test]
fn dot_general() {
    let mkn = || (1i64..=4, 1i64..=4, 1i64..=4);
    prop(
        "matmul",
        -1.0,
        1.0,
        mkn().prop_map(|(m, k, n)| (vec![vec![m, k], vec![k, n]], ())),
        |p, _| p[0].matmul(&p[1]),
    );
    prop(
        "matvec",
        -1.0,
        1.0,
        mkn().prop_map(|(m, k, _)| (vec![vec![m, k], vec![k]], ())),
        |p, _| p[0].matmul(&p[1]),
    );
    // Batch axis first on one side, last on the other; contracting axes out of order.
    prop(
        "dot_general",
        -1.0,
        1.0,
        (1i64..=2, 1i64..=3, 1i64..=3, 1i64..=3, 1i64..=3)
            .prop_map(|(b, c1, c0, x, y)| (vec![vec![b, c1, c0, x], vec![c0, y, c1, b]], ())),
        |p, _| {
            let d = DotDims {
                lhs_contracting: vec![2, 1],
                rhs_contracting: vec![0, 2],
                lhs_batch: vec![0],
                rhs_batch: vec![3],
            };
            p[0].dot_general(&p[1], &d)
        },
    );
    prop(
        "batched_matmul",
        -1.0,
        1.0,
        (1i64..=3, mkn()).prop_map(|(b, (m, k, n))| (vec![vec![b, m, k], vec![b, k, n]], ())),
        |p, _| p[0].matmul(&p[1]),
    );
}

#[test]
fn reductions() {
    let s = || with_axes(dims(1..=3, 3));
    prop("reduce_sum", -1.0, 1.0, s(), |p, axes| {
        p[0].reduce_sum(axes)
    });
    prop("reduce_max", -1.0, 1.0, s(), |p, axes| {
        p[0].reduce_max(axes)
    });
    prop("reduce_min", -1.0, 1.0, s(), |p, axes| {
        p[0].reduce_min(axes)
    });
    prop("mean", -1.0, 1.0, s(), |p, axes| p[0].mean(axes, false));
    prop("prod", 0.5, 1.5, s(), |p, axes| p[0].prod(axes, false));
    // A zero among the factors: the others' product, no division by it.
    check_at(
        "prod_with_zero",
        &[&[2, 3]],
        &[vec![0.0, 2.0, 3.0, 0.5, 0.0, 0.0]],
        |p| p[0].prod(&[1], false),
    );
    let a = || with_axis(dims(1..=3, 4));
    prop("logsumexp", -2.0, 2.0, a(), |p, axis| {
        p[0].logsumexp(*axis, false)
    });
    prop("softmax", -2.0, 2.0, a(), |p, axis| p[0].softmax(*axis));
}

#[test]
fn slicing_ops() {
    // Per axis of 2 to 6 elements: a start, a limit after it and a stride.
    let strided = dims(1..=3, 6)
        .prop_map(|d| d.into_iter().map(|n| n + 1).collect::<Vec<i64>>())
        .prop_flat_map(|d| {
            let axes: Vec<_> = d
                .iter()
                .map(|n| {
                    let n = *n;
                    (0..n).prop_flat_map(move |s| (Just(s), s + 1..=n, 1i64..=3))
                })
                .collect();
            (Just(vec![d]), axes)
        });
    prop("slice_strided", -1.0, 1.0, strided, |p, axes| {
        let start: Vec<i64> = axes.iter().map(|a| a.0).collect();
        let limit: Vec<i64> = axes.iter().map(|a| a.1).collect();
        let stride: Vec<i64> = axes.iter().map(|a| a.2).collect();
        p[0].slice(&start, &limit, &stride)
    });
    // Padding of -1 to 2 before, 0 to 2 after and 0 to 2 inside, per axis.
    let padded = dims(1..=2, 4)
        .prop_map(|d| d.into_iter().map(|n| n + 1).collect::<Vec<i64>>())
        .prop_flat_map(|d| {
            let r = d.len();
            (
                Just(vec![d]),
                prop::collection::vec((-1i64..=2, 0i64..=2, 0i64..=2), r),
            )
        });
    prop("pad", -1.0, 1.0, padded, |p, config| {
        let v = p[0].builder().constant(0.5f64);
        let config: Vec<_> = config
            .iter()
            .map(|(lo, hi, interior)| xlaclient::ops::slicing::PadDim {
                lo: *lo,
                hi: *hi,
                interior: *interior,
            })
            .collect();
        p[0].pad(&v, &config)
    });
    prop(
        "concatenate",
        -1.0,
        1.0,
        (1i64..=3, 1i64..=3, 1i64..=3).prop_map(|(a, b, c)| (vec![vec![a, b], vec![a, c]], ())),
        |p, _| p[0].builder().concatenate(&[&p[0], &p[1], &p[0]], 1),
    );
    prop(
        "reverse",
        -1.0,
        1.0,
        with_axes(dims(1..=3, 3)),
        |p, axes| p[0].reverse(axes).exp(),
    );
    // Starts from -1 to past the end: clamped, as XLA does.
    let window = (2i64..=5, 2i64..=5).prop_flat_map(|(a, b)| {
        (
            Just(vec![vec![a, b]]),
            (1..=a, 1..=b, -1i64..=a + 1, -1i64..=b + 1),
        )
    });
    prop("dynamic_slice", -1.0, 1.0, window, |p, (sa, sb, i, j)| {
        let b = p[0].builder();
        p[0].dynamic_slice(
            &[&b.constant(*i as i32), &b.constant(*j as i32)],
            &[*sa, *sb],
        )
    });
    let update = (1i64..=4, 1i64..=4)
        .prop_flat_map(|(ua, ub)| (Just(vec![vec![4, 4], vec![ua, ub]]), (-1i32..=5, -1i32..=5)));
    prop("dynamic_update_slice", -1.0, 1.0, update, |p, (i, j)| {
        let b = p[0].builder();
        (&p[0] * &p[0]).dynamic_update_slice(&p[1].exp(), &[&b.constant(*i), &b.constant(*j)])
    });
}

#[test]
fn a_small_network_and_its_loss() {
    // tanh MLP with a softmax cross-entropy: the gradient of every parameter.
    check("mlp", &[&[4, 3], &[5, 3], &[5], &[3, 5]], -1.0, 1.0, |p| {
        let (x, w1, b1, w2) = (&p[0], &p[1], &p[2], &p[3]);
        let h = (&x.matmul(&w1.transpose(&[1, 0])) + b1).tanh();
        let logits = h.matmul(&w2.transpose(&[1, 0]));
        let lse = logits.logsumexp(1, true);
        (&logits - &lse).reduce_sum(&[1])
    });
}

/// JAX's conventions where the derivative is not defined: `max`/`min` and
/// `reduce_max` split the cotangent evenly among tied elements; `abs` passes it
/// unchanged at 0; `relu` at 0 gives 0 (`jax.nn.relu`'s own rule).
#[test]
fn kinks_follow_jax() {
    let b = Builder::new("kinks");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let m = x.reduce_max(&[0]);
    let t = x.max(&x.reverse(&[0])).reduce_sum(&[0]);
    let a = x.abs().reduce_sum(&[0]);
    let r = x.relu().reduce_sum(&[0]);
    let gm = b.grad(&m, &x);
    let gt = b.grad(&t, &x);
    let ga = b.grad(&a, &x);
    let gr = b.grad(&r, &x);
    let module = b.build_tuple(&[&gm, &gt, &ga, &gr, &x.relu()]).unwrap();
    let out = run(&module, &[&upload(&[1.0f64, 3.0, 3.0], &[3])]);
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![0.0, 0.5, 0.5]);
    // max(x, rev(x)) = [3, 3, 3]: x0=1 loses to x2=3; x1 ties with itself (1/2 +
    // 1/2); x2 wins against x0 and is reached twice (as x2 and as rev's x2).
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![0.0, 1.0, 2.0]);
    let out = run(&module, &[&upload(&[0.0f64, -2.0, 2.0], &[3])]);
    assert_eq!(out[2].to_vec::<f64>().unwrap(), vec![1.0, -1.0, 1.0]);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), vec![0.0, 0.0, 1.0]);
    // relu's values are still max(x, 0): NaN stays NaN, -0 becomes +0.
    let out = run(&module, &[&upload(&[f64::NAN, -0.0, 2.0], &[3])]);
    let r: Vec<f64> = out[4].to_vec().unwrap();
    assert!(r[0].is_nan() && r[1].to_bits() == 0 && r[2] == 2.0, "{r:?}");
}

#[test]
fn stop_gradient_and_trees() {
    let b = Builder::new("sg");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let c = b.parameter(1, Shape::of::<f64>(&[]), "c");
    // d/dx Σ x·sg(x) = sg(x) = x, not 2x; d/dc Σ c·x = Σ x.
    let (loss, aux, (gx, gc)) = b.value_and_grad((x.clone(), c.clone()), |(x, c)| {
        let l = (&x * &x.stop_gradient()).reduce_sum(&[0]) + &(&c * &x).reduce_sum(&[0]);
        (l, x.reduce_max(&[0]))
    });
    let m = b.build_tuple(&[&loss, &aux, &gx, &gc]).unwrap();
    let xs = [0.5f64, -1.5, 2.0];
    let out = run(&m, &[&upload(&xs, &[3]), &upload(&[3.0f64], &[])]);
    let want_gx: Vec<f64> = xs.iter().map(|v| v + 3.0).collect();
    assert_eq!(out[2].to_vec::<f64>().unwrap(), want_gx);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), vec![1.0]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![2.0]);
}

#[test]
fn gradient_errors_name_the_value_and_the_line() {
    // The loss is an integer.
    let b = Builder::new("e1");
    let x = b.parameter(0, Shape::of::<i32>(&[3]), "x");
    let line = line!() + 1;
    let g = b.grad(&x.reduce_sum(&[0]), &x);
    let e = b.build(&g).unwrap_err().to_string();
    assert!(
        e.contains("s32") && e.contains(&format!("grad.rs:{line}")),
        "{e}"
    );
    // With respect to an integer.
    let b = Builder::new("e2");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let k = b.parameter(1, Shape::of::<i32>(&[3]), "k");
    let loss = (&x * &k.convert(xlaclient::ElementType::F32)).reduce_sum(&[0]);
    let e = b.build(&b.grad(&loss, &k)).unwrap_err().to_string();
    assert!(e.contains("only floating-point"), "{e}");
    // A non-scalar loss.
    let b = Builder::new("e3");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let e = b.build(&b.grad(&x.exp(), &x)).unwrap_err().to_string();
    assert!(e.contains("scalar"), "{e}");
    // An op without a rule yet names itself and the line that built it.
    let b = Builder::new("e4");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    // A select-and-scatter that scatters by multiplying has no rule: the error names
    // it and the line that built it.
    let src = b.parameter(1, Shape::of::<f32>(&[3]), "src");
    let built = line!() + 1;
    let s = x.select_and_scatter(
        &src,
        &b.constant(1f32),
        &[xlaclient::ops::window::WindowDim::new(2, 1)],
        |a, e| a.compare(e, Comparison::Ge),
        |a, e| a * e,
    );
    let err = b.build(&b.grad(&s.reduce_sum(&[0]), &src)).unwrap_err();
    assert!(
        matches!(&err, xlaclient::Error::NoGradient { op: "select-and-scatter", location: Some(l), .. } if l.line() == built),
        "{err:?}"
    );
    let e = err.to_string();
    assert!(
        e.contains("`select-and-scatter`") && e.contains(&format!("grad.rs:{built}")),
        "{e}"
    );
}

#[test]
fn through_fori_loop_with_a_captured_weight() {
    check("fori", &[&[3], &[3]], -1.0, 1.0, |p| {
        let (x0, w) = (&p[0], &p[1]);
        let b = x0.builder();
        b.fori_loop(0, 5, x0.clone(), |_, x| &(&x * w).sin() + &(&x * 0.5))
    });
}

#[test]
fn through_scan_with_several_carries_and_outputs() {
    // h' = tanh(a·h + x_t), c' = c + h'·x_t; ys = (h'², c'); over 6 steps, with
    // unrolling and backwards too: the same gradients each way.
    // Without checkpointing the backward pass reads the body's stored values; with
    // it, it recomputes them from the stored carry: both must agree with finite
    // differences.
    for (reverse, unroll, checkpoint) in [
        (false, 1, false),
        (true, 1, false),
        (false, 4, false),
        (false, 1, true),
        (true, 4, true),
    ] {
        let name = format!("scan_{reverse}_{unroll}_{checkpoint}");
        check(&name, &[&[2], &[6, 2], &[2]], -1.0, 1.0, |p| {
            let (h0, xs, a) = (&p[0], &p[1], &p[2]);
            let b = h0.builder();
            let c0 = b.zeros(xlaclient::ElementType::F64, &[2]);
            let opts = xlaclient::ScanOptions::new()
                .reverse(reverse)
                .unroll(unroll)
                .checkpoint(checkpoint);
            let ((h, c), (sq, cs)) =
                b.scan_with((h0.clone(), c0), xs.clone(), &opts, |(h, c), x| {
                    let h2 = (&(a * &h) + &x).tanh();
                    let c2 = &c + &(&h2 * &x);
                    ((h2.clone(), c2.clone()), (&h2 * &h2, c2))
                });
            b.concatenate(&[&h, &c, &sq.reshape(&[12]), &cs.reshape(&[12])], 0)
        });
    }
}

/// The scan body of the deferred-dot tests: a weight the loop does not change in
/// every position a dot can hold it. `x_t · w` (the weight on the right, the rows
/// of a batch on the left), `v · h'ᵀ` (on the left), `x_t · wb` batched over the
/// rows (one weight matrix per row), and `w` also read element-wise. With
/// `recurrent` the state `h` is carried from step to step; without, every step
/// starts from `h0` (no float cotangent flows between steps).
fn weights_in_dots(p: &[Op], checkpoint: bool, recurrent: bool) -> Op {
    let (h0, xs, w, v, wb) = (&p[0], &p[1], &p[2], &p[3], &p[4]);
    let b = h0.builder();
    let per_row = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
    };
    let opts = xlaclient::ScanOptions::new().checkpoint(checkpoint);
    let (h, ys) = b.scan_with(h0.clone(), xs.clone(), &opts, |h, x| {
        let pre = &(&h + &x.matmul(w)) + &x.dot_general(wb, &per_row);
        let h2 = (&pre + &w.reduce_sum(&[0])).tanh();
        let y = v.dot_general(&h2, &DotDims::contract(1, 1));
        (if recurrent { h2 } else { h }, y)
    });
    b.concatenate(&[&h.reshape(&[6]), &ys.reshape(&[30])], 0)
}

/// A dot's cotangent for a weight the loop does not change is summed over the steps
/// after the loop, in one product over the stacked rows (stored values), instead of
/// one product and an add per step, where no float cotangent flows between steps.
/// Every way (summed after; per step in a recurrent loop; checkpointed) against
/// finite differences, and the summed products are in the entry computation only
/// in the first (whose independent backward steps run batched, without a loop).
#[test]
fn through_scan_dots_with_loop_invariant_weights() {
    let shapes: &[&[i64]] = &[&[3, 2], &[5, 3, 4], &[4, 2], &[2, 2], &[3, 4, 2]];
    let cases = [
        (false, false, true),
        (false, true, false),
        (true, false, false),
    ];
    for (checkpoint, recurrent, _) in cases {
        check(
            &format!("weights_{checkpoint}_{recurrent}"),
            shapes,
            -1.0,
            1.0,
            |p| weights_in_dots(p, checkpoint, recurrent),
        );
    }
    for (checkpoint, recurrent, summed_outside) in cases {
        let b = Builder::new("where");
        let p: Vec<Op> = shapes
            .iter()
            .enumerate()
            .map(|(i, d)| b.parameter(i, Shape::of::<f64>(d), &format!("p{i}")))
            .collect();
        let loss = weights_in_dots(&p, checkpoint, recurrent).reduce_sum(&[0]);
        let g = b.grad(&loss, &(p[2].clone(), p[3].clone(), p[4].clone()));
        let text = b.build_tuple(&[&g.0, &g.1, &g.2]).unwrap().to_hlo_text();
        let entry = &text[text.find("ENTRY").expect("an entry")..];
        let entry = &entry[..entry.find("\n}").unwrap_or(entry.len())];
        // Summed outside: the three weights' products over the stacked rows and,
        // as the steps are independent there and run batched (no backward loop),
        // the backward step's own product (`y`'s cotangent through `v`) over all
        // the steps at once.
        assert_eq!(
            entry.matches(" dot(").count(),
            if summed_outside { 4 } else { 0 },
            "checkpoint={checkpoint} recurrent={recurrent}\n{entry}"
        );
        assert_eq!(
            text.matches(" while(").count(),
            if summed_outside { 1 } else { 2 },
            "checkpoint={checkpoint} recurrent={recurrent}\n{text}"
        );
    }
}

/// A matrix weight's gradient over many rows (`x · W`, `x · Wᵀ`, the rows in one or
/// two axes of `x`) is written in the CPU backend's fast layout where that pays
/// (`linalg::rows_layout`, `benches/dot_layouts.rs`): against central differences,
/// and no product of the optimized gradient module contracts its left operand's
/// axis 0. It pays for a narrow head (`[40, 20] · [20, 3]`: few outputs on a wide
/// layer, from 32 rows; `[256, 16] · [16, 64]`) and for a small transposed side at
/// least 64 wide (`[256, 64] · [64, 64]`), and for fewer rows with both sides at
/// least 16 wide (`[32, 64] · [64, 64]`: a recurrent step's weight product). It does not for two narrow sides (`[100, 5] · [5, 2]`) nor for many rows of a
/// wide layer (`[1024, 64] · [64, 64]`, where XLA's transpose costs more than the
/// fast layout saves): the transpose rule's product contracting both axes 0
/// stays. Central differences for every element of the smaller cases (the
/// largest runs the plain product, whose gradient the other tests check).
#[test]
fn weight_gradients_over_many_rows_take_the_fast_layout() {
    let nt = DotDims::contract(1, 1);
    let cases: [(&str, &[&[i64]], bool, bool); 8] = [
        ("rows_xw", &[&[256, 16], &[16, 64]], false, true),
        ("rows_square", &[&[256, 64], &[64, 64]], false, true),
        ("narrow_head", &[&[40, 20], &[20, 3]], false, true),
        ("rows_xwt", &[&[60, 20], &[3, 20]], true, true),
        ("rows_3d", &[&[2, 30, 20], &[20, 3]], false, true),
        ("rows_step", &[&[32, 64], &[64, 64]], false, true),
        ("rows_few", &[&[100, 5], &[5, 2]], false, false),
        ("rows_wide", &[&[1024, 64], &[64, 64]], false, false),
    ];
    for (name, shapes, transposed, fast) in cases {
        let f = |p: &[Op]| {
            let y = if transposed {
                p[0].dot_general(&p[1], &nt)
            } else {
                p[0].matmul(&p[1])
            };
            y.tanh()
        };
        if shapes
            .iter()
            .map(|d| d.iter().product::<i64>())
            .sum::<i64>()
            <= 25_000
        {
            check(name, shapes, -1.0, 1.0, f);
        }

        let b = Builder::new(name);
        let p: Vec<Op> = shapes
            .iter()
            .enumerate()
            .map(|(i, d)| b.parameter(i, Shape::of::<f32>(d), "p"))
            .collect();
        let y = f(&p);
        let axes: Vec<i64> = (0..y.rank().unwrap() as i64).collect();
        let g = b.grad(&y.reduce_sum(&axes), &p[1]);
        let m = b.build(&g).unwrap();
        let leading = leading_axis_products(&m).len();
        assert_eq!(
            leading == 0,
            fast,
            "{name}: {leading} products contract axis 0"
        );
    }
}

/// The same in a loop that stops early (rows past the steps taken stay zero) and
/// differentiated twice.
#[test]
fn deferred_weight_cotangents_in_bounded_loops_and_second_order() {
    check_at(
        "bounded_dot",
        &[&[2, 2], &[2, 2]],
        &[vec![0.3, 0.2, 0.1, 0.25], vec![1.2, 0.1, -0.2, 1.1]],
        |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            let (v, acc) = b.while_loop_bounded(
                (x.clone(), b.constant(0f64)),
                50,
                |(v, _)| {
                    (v * v)
                        .reduce_sum(&[0, 1])
                        .compare(&v.builder().constant(4f64), Comparison::Lt)
                },
                |(v, acc)| {
                    let v2 = &v.matmul(w) + &(&v.tanh() * 0.1);
                    let acc2 = &acc + &v2.reduce_sum(&[0, 1]);
                    (v2, acc2)
                },
            );
            b.concatenate(&[&v.reshape(&[4]), &acc.reshape(&[1])], 0)
        },
    );
    let u = [0.3f64, -0.6, 0.8, 0.1];
    check("hvp_weights", &[&[2, 2], &[4, 2, 2]], -1.0, 1.0, |p| {
        let (w, xs) = (&p[0], &p[1]);
        let b = w.builder();
        let h0 = b.zeros(ElementType::F64, &[2, 2]);
        let (h, _) = b.scan(h0, xs.clone(), |h, x| {
            let h2 = (&h.matmul(w) + &x).sin();
            (h2, ())
        });
        let g = b.grad(&h.reduce_sum(&[0, 1]), w);
        &g.reshape(&[4]) * &b.constant_vec(&u)
    });
}

#[test]
fn through_nested_loops() {
    // A fori_loop inside a scan body, using the scan's carry and an outside weight.
    check("nested", &[&[2], &[4, 2], &[2]], -1.0, 1.0, |p| {
        let (h0, xs, w) = (&p[0], &p[1], &p[2]);
        let b = h0.builder();
        let (h, ys) = b.scan(h0.clone(), xs.clone(), |h, x| {
            let inner = h
                .builder()
                .fori_loop(0, 3, h.clone(), |_, v| (&(&v * w) + &x).sin());
            (inner.clone(), &inner * &x)
        });
        b.concatenate(&[&h, &ys.reshape(&[8])], 0)
    });
}

/// How many while loops a module runs (each `while` instruction of its HLO text).
fn whiles(m: &xlaclient::Computation) -> usize {
    m.to_hlo_text().matches(" while(").count()
}

/// The forward scan of the loop tests below in plain Rust: `h' = tanh(w·h + x_t)`,
/// `y_t = h'²`; returns the final `h` and the `ys`.
fn rnn_reference(w: &[f64], h0: &[f64], xs: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut h = h0.to_vec();
    let mut ys = Vec::new();
    for x in xs.chunks(h.len()) {
        for j in 0..h.len() {
            h[j] = (w[j] * h[j] + x[j]).tanh();
        }
        ys.extend(h.iter().map(|v| v * v));
    }
    (h, ys)
}

#[test]
fn value_and_grad_through_a_scan_runs_the_forward_loop_once() {
    // loss = Σ ys + Σ h_final, with (h_final, ys) also returned as auxiliary
    // outputs: the program has one forward loop (which stores the residuals and
    // serves the loss and the auxiliary values) and one backward loop, stored or
    // checkpointed. Values against the plain-Rust forward pass, gradients against
    // its central differences.
    let (w, h0) = ([0.7f64, -1.2], [0.3f64, -0.5]);
    let xs = [0.1f64, 0.4, -0.3, 0.2, 0.5, -0.6, 0.05, 0.9, -0.2, 0.3];
    let rust_loss = |w: &[f64], h0: &[f64]| {
        let (h, ys) = rnn_reference(w, h0, &xs);
        ys.iter().sum::<f64>() + h.iter().sum::<f64>()
    };
    for checkpoint in [false, true] {
        let b = Builder::new("vg_scan");
        let wp = b.parameter(0, Shape::of::<f64>(&[2]), "w");
        let hp = b.parameter(1, Shape::of::<f64>(&[2]), "h0");
        let xsp = b.constant_vec(&xs).reshape(&[5, 2]);
        let opts = xlaclient::ScanOptions::new().checkpoint(checkpoint);
        let (loss, (h, ys), (gw, gh)) = b.value_and_grad((wp, hp), |(w, h0)| {
            let (h, ys) = b.scan_with(h0, xsp.clone(), &opts, |h, x| {
                let h2 = (&(&w * &h) + &x).tanh();
                (h2.clone(), &h2 * &h2)
            });
            (&ys.reduce_sum(&[0, 1]) + &h.reduce_sum(&[0]), (h, ys))
        });
        let m = b.build_tuple(&[&loss, &h, &ys, &gw, &gh]).unwrap();
        assert_eq!(
            whiles(&m),
            2,
            "checkpoint {checkpoint}: {}",
            m.to_hlo_text()
        );
        let out = run(&m, &[&upload(&w, &[2]), &upload(&h0, &[2])]);
        let got = |k: usize| -> Vec<f64> { out[k].to_vec().unwrap() };
        let (h_want, ys_want) = rnn_reference(&w, &h0, &xs);
        let close = |a: &[f64], b: &[f64], tol: f64| {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{a:?} vs {b:?}");
            }
        };
        close(&got(0), &[rust_loss(&w, &h0)], 1e-12);
        close(&got(1), &h_want, 1e-12);
        close(&got(2), &ys_want, 1e-12);
        for (k, x) in [(3usize, &w), (4, &h0)] {
            let fd: Vec<f64> = (0..2)
                .map(|i| {
                    let moved = |d: f64| {
                        let mut v = *x;
                        v[i] += d;
                        if k == 3 {
                            rust_loss(&v, &h0)
                        } else {
                            rust_loss(&w, &v)
                        }
                    };
                    (moved(1e-6) - moved(-1e-6)) / 2e-6
                })
                .collect();
            close(&got(k), &fd, 1e-6);
        }
    }
}

#[test]
fn each_loop_runs_forward_once_nested_bounded_and_twice_differentiated() {
    // The number of while instructions of each gradient program: every forward
    // loop once (the loop storing residuals serves the original's results).
    let b = Builder::new("counts");
    let x = b.parameter(0, Shape::of::<f64>(&[2]), "x");
    let w = b.parameter(1, Shape::of::<f64>(&[2]), "w");
    // A plain loop and its gradient: one forward, one backward.
    let y = b.fori_loop(0, 4, x.clone(), |_, v| (&v * &w).sin());
    let loss = y.reduce_sum(&[0]);
    let g = b.grad(&loss, &w);
    let m = b.build_tuple(&[&loss, &y, &g]).unwrap();
    assert_eq!(whiles(&m), 2, "{}", m.to_hlo_text());
    // The gradient alone, the forward results unused: still one forward loop.
    assert_eq!(whiles(&b.build(&g).unwrap()), 2);
    // Only the forward value: the original loop, storing nothing.
    assert_eq!(whiles(&b.build(&loss).unwrap()), 1);
    // A second gradient of the same loop reuses the first one's stored values.
    let g2 = b.grad(&(&loss * 2.0), &x);
    assert_eq!(whiles(&b.build_tuple(&[&g, &g2]).unwrap()), 3);
    // Grad of grad: the first gradient's storing loop is served by the one the
    // second gradient builds for it, and the first backward loop by its own
    // storing copy: the forward steps run once, the first backward steps once, plus
    // the second gradient's two backward loops.
    let hv = b.grad(&(&g * &w).reduce_sum(&[0]), &w);
    assert_eq!(whiles(&b.build_tuple(&[&loss, &g, &hv]).unwrap()), 4);
    // A bounded while: one forward loop, one backward.
    let z = b.while_loop_bounded(
        x.clone(),
        20,
        |v| {
            v.reduce_sum(&[0])
                .compare(&b.constant(3f64), Comparison::Lt)
        },
        |v| &v * &w.exp(),
    );
    let gz = b.grad(&z.reduce_sum(&[0]), &w);
    assert_eq!(whiles(&b.build_tuple(&[&z, &gz]).unwrap()), 2);
    // A loop in a scan body: forward, the inner loop inside it; backward, the
    // inner loop's storing loop and its backward loop (the body's recomputed
    // inner loop is served by the storing one).
    let (h, ys) = b.scan_with(
        x.clone(),
        (),
        &xlaclient::ScanOptions::new().length(3),
        |h, ()| {
            let inner = h
                .builder()
                .fori_loop(0, 2, h.clone(), |_, v| (&v * &w).sin());
            (inner.clone(), &inner * &inner)
        },
    );
    let ln = &h.reduce_sum(&[0]) + &ys.reduce_sum(&[0, 1]);
    let gn = b.grad(&ln, &w);
    assert_eq!(whiles(&b.build_tuple(&[&ln, &gn]).unwrap()), 5);
}

#[test]
fn a_loop_gradient_equals_the_unrolled_programs() {
    // The same recurrence as a fori_loop and written out step by step: gradients
    // agree to rounding.
    let b = Builder::new("same");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let w = b.parameter(1, Shape::of::<f64>(&[3]), "w");
    let step = |v: &Op| (&(v * &w) + 0.1).tanh();
    let looped = b
        .fori_loop(0, 7, x.clone(), |_, v| step(&v))
        .reduce_sum(&[0]);
    let mut v = x.clone();
    for _ in 0..7 {
        v = step(&v);
    }
    let unrolled = v.reduce_sum(&[0]);
    let (gl, gu) = (
        b.grad(&looped, &(x.clone(), w.clone())),
        b.grad(&unrolled, &(x.clone(), w.clone())),
    );
    let m = b.build_tuple(&[&gl.0, &gl.1, &gu.0, &gu.1]).unwrap();
    let out = run(
        &m,
        &[
            &upload(&[0.3f64, -0.7, 1.1], &[3]),
            &upload(&[0.9f64, 1.3, -0.4], &[3]),
        ],
    );
    for k in 0..2 {
        let (l, u): (Vec<f64>, Vec<f64>) = (out[k].to_vec().unwrap(), out[k + 2].to_vec().unwrap());
        for (a, c) in l.iter().zip(&u) {
            assert!((a - c).abs() < 1e-12, "{l:?} vs {u:?}");
        }
    }
}

#[test]
fn a_while_loop_without_a_trip_count_is_an_error() {
    let b = Builder::new("unbounded");
    let x = b.parameter(0, Shape::of::<f64>(&[]), "x");
    let built = line!() + 1;
    let y = b.while_loop(
        x.clone(),
        |v| v.compare(&v.builder().constant(10f64), Comparison::Lt),
        |v| &v * 2.0,
    );
    let e = b.build(&b.grad(&y, &x)).unwrap_err().to_string();
    assert!(
        e.contains("static trip count") && e.contains(&format!("grad.rs:{built}")),
        "{e}"
    );
}

/// Second derivatives: the gradient program is differentiable again. Each case
/// checks `∂/∂x (∂L/∂x · v)` (a Hessian-vector product) against central differences
/// of the first derivative.
#[test]
fn second_order() {
    type Case = (&'static str, Box<dyn Fn(&Op) -> Op>);
    let cases: Vec<Case> = vec![
        (
            "elementwise",
            Box::new(|x: &Op| (&x.sin() * &x.exp()).tanh()),
        ),
        (
            "dot_reduce",
            Box::new(|x: &Op| {
                let m = x.reshape(&[2, 2]);
                m.matmul(&m).reduce_max(&[1]).logistic()
            }),
        ),
        (
            "scan",
            Box::new(|x: &Op| {
                let b = x.builder();
                let (h, ys) = b.scan_with(
                    x.clone(),
                    (),
                    &xlaclient::ScanOptions::new().length(4),
                    |h, ()| {
                        let h2 = (&h * 0.9).sin() + 0.1;
                        (h2.clone(), &h2 * &h2)
                    },
                );
                &h + &ys.reduce_sum(&[0])
            }),
        ),
    ];
    for (name, f) in cases {
        let v = [0.3f64, -0.6, 0.8, 0.1];
        check(&format!("hvp_{name}"), &[&[4]], -1.0, 1.0, |p| {
            let b = p[0].builder();
            let axes = [0i64];
            let inner = f(&p[0]).reduce_sum(&axes);
            let g = b.grad(&inner, &p[0]);
            &g * &b.constant_vec(&v)
        });
    }
}

#[test]
fn through_conditionals() {
    // The gradient flows through the branch taken; the others' inputs get zeros.
    for (name, lo, hi) in [("cond_true", 0.2, 1.0), ("cond_false", -1.0, -0.2)] {
        check(name, &[&[3], &[3]], lo, hi, |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            let positive = x
                .reduce_sum(&[0])
                .compare(&b.constant(0f64), Comparison::Gt);
            b.cond(
                &positive,
                x.clone(),
                |x| (&x * w).sin(),
                |x| &x.exp() * &(w * 2.0),
            )
        });
    }
    for k in 0..3i32 {
        check(&format!("switch_{k}"), &[&[2], &[2]], -1.0, 1.0, |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            let idx = b.constant(k);
            b.switch(
                &idx,
                (x.clone(), w.clone()),
                Box::new(|(x, w): (Op, Op)| &x * &w),
                vec![
                    Box::new(|(x, w): (Op, Op)| (&x + &w).tanh()),
                    Box::new(|(x, _): (Op, Op)| x.exp()),
                ],
            )
        });
    }
    // A conditional inside a scan body.
    check("cond_in_scan", &[&[2], &[5, 2]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let (h, ys) = b.scan(p[0].clone(), p[1].clone(), |h, x| {
            let bb = h.builder();
            let up = x
                .reduce_sum(&[0])
                .compare(&bb.constant(0f64), Comparison::Gt);
            let h2 = bb.cond(
                &up,
                (h.clone(), x.clone()),
                |(h, x)| (&h + &x).sin(),
                |(h, x)| &h * &x,
            );
            (h2.clone(), h2)
        });
        b.concatenate(&[&h, &ys.reshape(&[10])], 0)
    });
}

#[test]
fn through_a_bounded_while_loop() {
    // Grows until |v|² ≥ 4 (a data-dependent count, 8 steps here), with a captured
    // weight; the gradient of the steps taken against finite differences.
    check_at(
        "bounded",
        &[&[2], &[2]],
        &[vec![0.3, 0.2], vec![1.2, 1.1]],
        |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            let (v, acc) = b.while_loop_bounded(
                (x.clone(), b.constant(0f64)),
                50,
                |(v, _)| {
                    (v * v)
                        .reduce_sum(&[0])
                        .compare(&v.builder().constant(4f64), Comparison::Lt)
                },
                |(v, acc)| {
                    let v2 = &(&v * w) + &(&v.tanh() * 0.1);
                    let acc2 = &acc + &v2.reduce_sum(&[0]);
                    (v2, acc2)
                },
            );
            b.concatenate(&[&v, &acc.reshape(&[1])], 0)
        },
    );
    // The bound stops it: the same as a fori_loop of that many steps.
    let b = Builder::new("cut");
    let x = b.parameter(0, Shape::of::<f64>(&[2]), "x");
    let step = |v: &Op| (v * 1.5).sin();
    let always = |v: &Op| {
        v.reduce_sum(&[0])
            .compare(&v.builder().constant(1e9f64), Comparison::Lt)
    };
    let bounded = b.while_loop_bounded(x.clone(), 3, |v| always(v), |v| step(&v));
    let counted = b.fori_loop(0, 3, x.clone(), |_, v| step(&v));
    let gb = b.grad(&bounded.reduce_sum(&[0]), &x);
    let gc = b.grad(&counted.reduce_sum(&[0]), &x);
    let m = b.build_tuple(&[&gb, &gc]).unwrap();
    let out = run(&m, &[&upload(&[0.4f64, -0.2], &[2])]);
    assert_eq!(
        out[0].to_vec::<f64>().unwrap(),
        out[1].to_vec::<f64>().unwrap()
    );
}

#[test]
fn through_calls_and_functions() {
    check("call", &[&[3], &[3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let out = b.call("f", &[&p[0], &p[1], &p[0]], |_, a| {
            vec![(&a[0] * &a[1]).sin(), &a[2].exp() * &a[1]]
        });
        &out[0] + &out[1]
    });
    check(
        "function_twice_and_in_a_loop",
        &[&[3], &[3]],
        -1.0,
        1.0,
        |p| {
            let b = p[0].builder();
            let w = p[1].clone();
            let layer = b.function("layer", &[Shape::of::<f64>(&[3])], move |_, a| {
                vec![(&a[0] * &w).tanh()]
            });
            let h = layer.call(&[&p[0]])[0].clone();
            let h = layer.call(&[&h])[0].clone();
            b.fori_loop(0, 2, h, |_, h| layer.call(&[&h])[0].clone())
        },
    );
}

#[test]
fn custom_vjp_uses_the_given_rule() {
    let b = Builder::new("custom");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    // Identity forward; backward clips the cotangent to [-1, 1].
    let y = b.custom_vjp(
        "clip_grad",
        &[&x],
        |_, a| vec![a[0].clone()],
        |_, _, ct| vec![ct[0].clip(-1.0, 1.0)],
    );
    let c = b.constant_vec(&[3.0f64, -0.5, -2.0]);
    let g = b.grad(&(&y[0] * &c).reduce_sum(&[0]), &x);
    let m = b.build_tuple(&[&y[0], &g]).unwrap();
    let out = run(&m, &[&upload(&[0.1f64, 0.2, 0.3], &[3])]);
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![0.1, 0.2, 0.3]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![1.0, -0.5, -1.0]);
    // A rule returning the wrong shape is an error naming it.
    let b = Builder::new("bad_rule");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let y = b.custom_vjp(
        "f",
        &[&x],
        |_, a| vec![a[0].exp()],
        |_, _, ct| vec![ct[0].reduce_sum(&[0])],
    );
    let e = b
        .build(&b.grad(&y[0].reduce_sum(&[0]), &x))
        .unwrap_err()
        .to_string();
    assert!(e.contains("backward rule returns f64[]"), "{e}");
}

#[test]
fn through_gather_and_scatter_add() {
    // take with repeated and out-of-range (clipped) indices: the cotangents of
    // repeated rows add up; in JAX's default fill mode, with a negative index from
    // the end (an index still out of range would give NaN: not differentiated).
    check("take", &[&[4, 3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        p[0].take_with(&b.constant_vec(&[2i32, 0, 2, 7, -1]), 0, TakeMode::Clip)
    });
    check("take_fill", &[&[4, 3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        p[0].take(&b.constant_vec(&[2i32, 0, 2, -1, -4]), 0)
    });
    check("take_along_axis", &[&[4, 3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let i = b
            .constant_vec(&[2i32, 0, 1, 1, 0, 2, 5, -1])
            .reshape(&[4, 2]);
        p[0].take_along_axis_with(&i, 1, TakeMode::Wrap)
    });
    // Scatter-add into x of u at rows [2, 0, 2, 9]: row 9 is out of range and
    // dropped, so its update gets no gradient.
    check("scatter_add", &[&[4, 2], &[4, 2]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let dims = xlaclient::ops::indexing::ScatterDims {
            update_window_dims: vec![1],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let idx = b.constant_vec(&[2i32, 0, 2, 9]);
        let out = b.scatter(
            &[&p[0]],
            &idx,
            &[&p[1].sin()],
            &dims,
            false,
            false,
            |o, u| vec![&o[0] + &u[0]],
        );
        &out[0] * &out[0]
    });
}

/// Rows [2, 0, 2, 9] of a `[4, 2]` array (row 2 twice, row 9 out of range and
/// dropped) combined with `f`.
#[track_caller]
fn scatter_rows(x: &Op, u: &Op, unique: bool, rows: &[i32], f: fn(&Op, &Op) -> Op) -> Op {
    let b = x.builder();
    let dims = xlaclient::ops::indexing::ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let idx = b.constant_vec(rows);
    b.scatter(&[x], &idx, &[u], &dims, false, unique, |o, v| {
        vec![f(&o[0], &v[0])]
    })
    .remove(0)
}

#[test]
fn through_scatter_with_other_combiners() {
    const ROWS: [i32; 4] = [2, 0, 2, 9];
    // Multiply with unique indices (row 9 dropped): both gradients.
    check("scatter_mul", &[&[4, 2], &[3, 2]], -1.0, 1.0, |p| {
        scatter_rows(&p[0], &p[1].sin(), true, &[2, 0, 9], |o, v| o * v)
    });
    // Multiply with a repeated row: the operand's gradient (the updates are
    // constants here, as JAX has no updates' gradient without unique indices).
    check("scatter_mul_repeated", &[&[4, 2]], -1.0, 1.0, |p| {
        let u = p[0]
            .builder()
            .constant_vec(&[0.5f64, -1.5, 2.0, 0.7, -0.3, 1.1, 0.9, 3.0]);
        scatter_rows(&p[0], &u.reshape(&[4, 2]), false, &ROWS, |o, v| o * v)
    });
    // Max, min and replace with the repeated row.
    for (name, f) in [
        (
            "scatter_max",
            (|o: &Op, v: &Op| o.max(v)) as fn(&Op, &Op) -> Op,
        ),
        ("scatter_min", |o, v| o.min(v)),
        ("scatter_replace", |_, v| v.clone()),
    ] {
        check(name, &[&[4, 2], &[4, 2]], -1.0, 1.0, |p| {
            let out = scatter_rows(&p[0], &p[1].sin(), false, &ROWS, f);
            &out * &out
        });
    }
    // Two-way ties of a max: the operand and an update (row 2, column 0), two
    // updates (row 2, column 1). Each gets half the cotangent, which is what
    // central differences give at a two-way tie.
    let x = vec![0.1, 0.2, -0.4, 0.6, 0.5, -0.3, 0.8, -0.7];
    let u = vec![0.5, 0.2, 0.9, -0.2, -0.9, 0.2, 0.3, 0.4];
    check_at("scatter_max_ties", &[&[4, 2], &[4, 2]], &[x, u], |p| {
        scatter_rows(&p[0], &p[1], false, &ROWS, |o, v| o.max(v))
    });
    // The updates' gradient of a multiplying scatter without unique indices is an
    // error naming the op and the line.
    let b = Builder::new("mul_err");
    let x = b.parameter(0, Shape::of::<f64>(&[4, 2]), "x");
    let u = b.parameter(1, Shape::of::<f64>(&[4, 2]), "u");
    let line = line!() + 1;
    let out = scatter_rows(&x, &u, false, &ROWS, |o, v| o * v);
    let e = b
        .build(&b.grad(&out.reduce_sum(&[0, 1]), &u))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unique indices")
            && e.contains("`scatter`")
            && e.contains(&format!("grad.rs:{line}")),
        "{e}"
    );
}

#[test]
fn through_pooling() {
    let w = |size, stride, lo, hi| WindowDim {
        size,
        stride,
        padding_low: lo,
        padding_high: hi,
        window_dilation: 1,
        base_dilation: 1,
    };
    // Per axis of 3 to 6 elements: a window of 1 to 3 (2 to 3 for max pooling, so
    // that every window holds an element), a stride of 1 or 2, padding of 0 or 1
    // each side.
    let windows = |min: i64| {
        dims(2..=2, 4)
            .prop_map(|d| d.into_iter().map(|n| n + 2).collect::<Vec<i64>>())
            .prop_flat_map(move |d| {
                let axes = prop::collection::vec((min..=3i64, 1i64..=2, 0i64..=1, 0i64..=1), 2);
                (Just(vec![d]), axes)
            })
    };
    prop("sum_pool", -1.0, 1.0, windows(1), |p, ws| {
        let ws: Vec<WindowDim> = ws.iter().map(|(s, t, l, h)| w(*s, *t, *l, *h)).collect();
        p[0].sum_pool(&ws)
    });
    prop("max_pool_drawn", -1.0, 1.0, windows(2), |p, ws| {
        let ws: Vec<WindowDim> = ws.iter().map(|(s, t, l, h)| w(*s, *t, *l, *h)).collect();
        p[0].max_pool(&ws)
    });
    check("sum_pool_dilated", &[&[7, 5]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let mut d = w(2, 2, 1, 0);
        d.window_dilation = 2;
        let mut e = w(2, 1, 0, 1);
        e.base_dilation = 2;
        p[0].reduce_window(&b.constant(0f64), &[d, e], |a, x| a + x)
    });
    check("max_pool", &[&[6, 6]], -1.0, 1.0, |p| {
        p[0].max_pool(&[w(2, 2, 0, 0), w(3, 1, 1, 1)])
    });
    // Dilated max and min pooling (window dilation, base dilation, padding; every
    // window holds at least one element, so every output is finite).
    let mut d = w(2, 1, 1, 0);
    d.window_dilation = 2;
    let mut e = w(3, 2, 1, 1);
    e.base_dilation = 2;
    let mut f = w(2, 1, 0, 0);
    f.window_dilation = 3;
    f.base_dilation = 2;
    check("max_pool_dilated", &[&[5, 6]], -1.0, 1.0, |p| {
        p[0].max_pool(&[d, e])
    });
    check("max_pool_both_dilations", &[&[4, 7]], -1.0, 1.0, |p| {
        p[0].max_pool(&[f, w(3, 2, 0, 0)])
    });
    check("min_pool_dilated", &[&[5, 6]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        p[0].reduce_window(&b.constant(f64::INFINITY), &[d, e], |a, x| a.min(x))
    });
}

#[test]
fn through_select_and_scatter() {
    // The source's gradient gathers the cotangent at each window's pick, for the
    // four comparisons; the initial value's is the cotangent's sum; the operand
    // only picks (its finite differences are zero away from ties).
    let mut pad = WindowDim::new(3, 2);
    pad.padding_low = 1;
    pad.padding_high = 1;
    for (name, dir) in [
        ("sas_ge", Comparison::Ge),
        ("sas_gt", Comparison::Gt),
        ("sas_le", Comparison::Le),
        ("sas_lt", Comparison::Lt),
    ] {
        check(name, &[&[6, 6], &[3, 3], &[]], -1.0, 1.0, |p| {
            p[0].select_and_scatter(
                &p[1],
                &p[2],
                &[WindowDim::new(2, 2), pad],
                |a, e| a.compare(e, dir),
                |a, e| a + e,
            )
        });
        // With ties in the operand (a constant here), the picks follow XLA's own:
        // the first of equal elements for `>=`/`<=`, the last for `>`/`<`. The
        // result is linear in the source, so finite differences are exact there.
        let ties: Vec<f64> = (0..36).map(|i| ((i * 5) % 3) as f64).collect();
        check(&format!("{name}_ties"), &[&[3, 3], &[]], -1.0, 1.0, |p| {
            let b = p[0].builder();
            let x = b.constant_vec(&ties).reshape(&[6, 6]);
            x.select_and_scatter(
                &p[0],
                &p[1],
                &[WindowDim::new(2, 2), pad],
                |a, e| a.compare(e, dir),
                |a, e| a + e,
            )
        });
    }
}

#[test]
fn second_order_through_pooling() {
    // Hessian-vector products through max pooling (whose gradient is a
    // select-and-scatter), plain and dilated, against central differences of the
    // first derivative.
    let mut dil = WindowDim::new(2, 1);
    dil.window_dilation = 2;
    let windows = [
        ("plain", [WindowDim::new(2, 2), WindowDim::new(3, 1)]),
        ("dilated", [dil, WindowDim::new(2, 1)]),
    ];
    for (name, window) in windows {
        let v: Vec<f64> = (0..24)
            .map(|i| ((i * 7) % 11) as f64 / 10.0 - 0.5)
            .collect();
        check(&format!("hvp_pool_{name}"), &[&[4, 6]], -1.0, 1.0, |p| {
            let b = p[0].builder();
            let pooled = p[0].sin().max_pool(&window);
            let inner = (&pooled * &pooled * &pooled).reduce_sum(&[0, 1]);
            let g = b.grad(&inner, &p[0]);
            &g * &b.constant_vec(&v).reshape(&[4, 6])
        });
    }
}

#[test]
fn through_sort() {
    prop(
        "sort_ascending",
        -1.0,
        1.0,
        with_axis(dims(1..=2, 5)),
        |p, axis| p[0].sort_ascending(*axis).exp(),
    );
    // Two operands sorted by the first, descending, with a captured threshold in the
    // comparator: both get their cotangents back in place.
    check("sort_pairs", &[&[6], &[6]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let t = p[1].reduce_sum(&[0]);
        let out = b.sort(&[&p[0], &p[1]], 0, true, |l, r| {
            (&l[0] * &t).compare(&(&r[0] * &t), Comparison::Gt)
        });
        &out[0] * &out[1].sin()
    });
}

#[test]
fn through_clamp() {
    // x in (-1, 1), bounds lo in (-0.9, -0.1) and hi in (0.1, 0.9): every element
    // is below, inside or above, none on a bound.
    check_at(
        "clamp",
        &[&[6], &[6], &[6]],
        &[
            vec![-0.95, -0.5, 0.0, 0.3, 0.95, -0.2],
            vec![-0.8, -0.6, -0.5, -0.1, -0.3, -0.7],
            vec![0.5, 0.2, 0.4, 0.9, 0.6, 0.1],
        ],
        |p| p[0].clamp(&p[1], &p[2]).exp(),
    );
    prop("clip", -2.0, 2.0, one(dims(1..=2, 5)), |p, _| {
        p[0].clip(-1.0, 1.0).sin()
    });
}

#[test]
fn through_map_and_optimization_barrier() {
    prop("map", 0.5, 1.5, two(dims(0..=2, 3)), |p, _| {
        let b = p[0].builder();
        b.map(&[&p[0], &p[1]], |q| (&q[0] * &q[1]).sin() + q[0].log())
    });
    check("opt_barrier", &[&[3], &[3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let v = b.optimization_barrier(&[&p[0].exp(), &p[1]]);
        &v[0] * &v[1]
    });
}

/// `(best value, its flat index)` over `axes` of `x` with a variadic reduce built
/// directly: the body compares the values (`>` for a maximum, `<` for a minimum),
/// breaks ties by the smaller index (a total order, so XLA may combine in any
/// grouping) and selects value and index together.
fn arg_best(x: &Op, axes: &[i64], max: bool) -> (Op, Op) {
    let b = x.builder();
    let dims = x.dims().unwrap();
    let n: i64 = dims.iter().product();
    let idx = b.iota(ElementType::S32, &[n], 0).reshape(&dims);
    let (better, worst) = if max {
        (Comparison::Gt, f64::NEG_INFINITY)
    } else {
        (Comparison::Lt, f64::INFINITY)
    };
    let out = b.reduce_many(
        &[x, &idx],
        &[&b.constant(worst), &b.constant(i32::MAX)],
        axes,
        |a, e| {
            let bb = a[0].builder();
            let wins = e[0].compare(&a[0], better);
            let tie = e[0]
                .compare(&a[0], Comparison::Eq)
                .and(&e[1].compare(&a[1], Comparison::Lt));
            let take = wins.or(&tie);
            vec![
                bb.select(&take, &e[0], &a[0]),
                bb.select(&take, &e[1], &a[1]),
            ]
        },
    );
    (out[0].clone(), out[1].clone())
}

#[test]
fn through_a_variadic_reduce_that_selects() {
    // Distinct random values: the value result's gradient goes to the chosen
    // element; the index (added as a float) is piecewise constant, no gradient.
    let cases: [(&str, &[i64], &[i64], bool); 6] = [
        ("argmax_rows", &[3, 4], &[1], true),
        ("argmax_cols", &[3, 4], &[0], true),
        ("argmax_3d_outer", &[2, 3, 4], &[0, 2], true),
        ("argmax_3d_all", &[2, 3, 4], &[0, 1, 2], true),
        ("argmin_3d_middle", &[2, 3, 4], &[1], false),
        ("argmin_3d_last_two", &[2, 3, 4], &[1, 2], false),
    ];
    for (name, shape, axes, max) in cases {
        check(name, &[shape], -1.0, 1.0, |p| {
            let (v, i) = arg_best(&p[0], axes, max);
            &v.exp() + &(&i.convert(ElementType::F64) * 0.01)
        });
    }
    // Two results chosen independently (a maximum of one input, a minimum of the
    // other): no position holds both, each result's cotangent goes to where its
    // own input equals it.
    check("max_and_min_apart", &[&[3, 4], &[3, 4]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let out = b.reduce_many(
            &[&p[0], &p[1]],
            &[&b.constant(f64::NEG_INFINITY), &b.constant(f64::INFINITY)],
            &[1],
            |a, e| {
                let bb = a[0].builder();
                vec![
                    bb.select(&e[0].compare(&a[0], Comparison::Gt), &e[0], &a[0]),
                    bb.select(&e[1].compare(&a[1], Comparison::Lt), &e[1], &a[1]),
                ]
            },
        );
        &out[0] * &out[1]
    });
    // The value chosen by `max`, the index by `select` (as `Builder::reduce_many`'s
    // example), and a one-operand reduce whose body selects.
    check("max_and_select", &[&[4, 3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let idx = b.iota(ElementType::S32, &[4, 3], 0);
        let out = b.reduce_many(
            &[&p[0], &idx],
            &[&b.constant(f64::NEG_INFINITY), &b.constant(0i32)],
            &[0],
            |a, e| {
                let take = e[0].compare(&a[0], Comparison::Gt);
                vec![a[0].max(&e[0]), e[0].builder().select(&take, &e[1], &a[1])]
            },
        );
        out[0].sin()
    });
    // A result that always keeps its accumulator is the initial value, whatever
    // the input: no gradient even where the input equals it (y[1] = 0.5 here).
    check_at(
        "keeps_the_accumulator",
        &[&[4], &[4]],
        &[vec![0.3, -0.2, 0.9, 0.1], vec![0.1, 0.5, -0.4, 0.7]],
        |p| {
            let b = p[0].builder();
            let out = b.reduce_many(
                &[&p[0], &p[1]],
                &[&b.constant(f64::NEG_INFINITY), &b.constant(0.5f64)],
                &[0],
                |a, e| {
                    let take = e[0].compare(&a[0], Comparison::Gt);
                    vec![a[0].builder().select(&take, &e[0], &a[0]), a[1].clone()]
                },
            );
            &out[0] * &out[1]
        },
    );
    check("select_one_operand", &[&[3, 4]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        p[0].reduce(&b.constant(f64::INFINITY), &[1], |a, e| {
            a.builder().select(&e.compare(a, Comparison::Lt), e, a)
        })
    });
}

/// Ties in the values with distinct indices: the index makes the choice unique,
/// and the whole cotangent goes to the position the forward pass picked (the first
/// among equals), not split. Ties in every operand split it, as `reduce_max`.
#[test]
fn a_variadic_reduce_that_selects_at_ties() {
    let b = Builder::new("arg_ties");
    let x = b.parameter(0, Shape::of::<f64>(&[2, 4]), "x");
    let w = b.constant_vec(&[1.0f64, 2.0]);
    let (vmax, imax) = arg_best(&x, &[1], true);
    let (vmin, imin) = arg_best(&x, &[1], false);
    let gmax = b.grad(&(&vmax * &w).reduce_sum(&[0]), &x);
    let gmin = b.grad(&(&vmin * &w).reduce_sum(&[0]), &x);
    let m = b
        .build_tuple(&[&vmax, &imax, &gmax, &vmin, &imin, &gmin])
        .unwrap();
    let xs = [1.0f64, 3.0, 3.0, 1.0, 2.0, 2.0, -1.0, -1.0];
    let out = run(&m, &[&upload(&xs, &[2, 4])]);
    // Plain Rust: the first best per row, as a flat index.
    let first = |better: fn(f64, f64) -> bool| {
        let mut v = Vec::new();
        let mut i = Vec::new();
        for r in 0..2 {
            let row = &xs[4 * r..4 * r + 4];
            let k = (1..4).fold(0, |k, c| if better(row[c], row[k]) { c } else { k });
            v.push(row[k]);
            i.push((4 * r + k) as i32);
        }
        (v, i)
    };
    let (want_vmax, want_imax) = first(|a, b| a > b);
    let (want_vmin, want_imin) = first(|a, b| a < b);
    assert_eq!(want_imax, vec![1, 4]);
    assert_eq!(want_imin, vec![0, 6]);
    assert_eq!(out[0].to_vec::<f64>().unwrap(), want_vmax);
    assert_eq!(out[1].to_vec::<i32>().unwrap(), want_imax);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), want_vmin);
    assert_eq!(out[4].to_vec::<i32>().unwrap(), want_imin);
    let one_hot = |at: &[i32]| {
        let mut g = vec![0.0f64; 8];
        for (r, k) in at.iter().enumerate() {
            g[*k as usize] = [1.0, 2.0][r];
        }
        g
    };
    assert_eq!(out[2].to_vec::<f64>().unwrap(), one_hot(&want_imax));
    assert_eq!(out[5].to_vec::<f64>().unwrap(), one_hot(&want_imin));

    // Two float operands chosen by the first alone, tied in both at positions 0
    // and 2: each gets half, as `reduce_max` splits ties.
    let b = Builder::new("tuple_ties");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let y = b.parameter(1, Shape::of::<f64>(&[3]), "y");
    let out = b.reduce_many(
        &[&x, &y],
        &[&b.constant(f64::NEG_INFINITY), &b.constant(0f64)],
        &[0],
        |a, e| {
            let take = e[0].compare(&a[0], Comparison::Gt);
            let bb = a[0].builder();
            vec![
                bb.select(&take, &e[0], &a[0]),
                bb.select(&take, &e[1], &a[1]),
            ]
        },
    );
    let (gx, gy) = b.grad(&(&out[0] + &(&out[1] * 3.0)), &(x.clone(), y.clone()));
    let m = b.build_tuple(&[&out[0], &out[1], &gx, &gy]).unwrap();
    let out = run(
        &m,
        &[
            &upload(&[3.0f64, 1.0, 3.0], &[3]),
            &upload(&[5.0f64, 0.0, 5.0], &[3]),
        ],
    );
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![3.0]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![5.0]);
    assert_eq!(out[2].to_vec::<f64>().unwrap(), vec![0.5, 0.0, 0.5]);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), vec![1.5, 0.0, 1.5]);
}

#[test]
fn a_variadic_reduce_that_computes_has_no_gradient() {
    // A body that adds is no selection: the error names `reduce` and the line.
    let b = Builder::new("variadic_sum");
    let x = b.parameter(0, Shape::of::<f64>(&[2, 3]), "x");
    let idx = b.iota(ElementType::S32, &[2, 3], 1);
    let built = line!() + 1;
    let out = b.reduce_many(
        &[&x, &idx],
        &[&b.constant(0f64), &b.constant(0i32)],
        &[1],
        |a, e| vec![&a[0] + &e[0], &a[1] + &e[1]],
    );
    let e = b
        .build(&b.grad(&out[0].reduce_sum(&[0]), &x))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("variadic `reduce`") && e.contains(&format!("grad.rs:{built}")),
        "{e}"
    );
    // A result taken from another position's parameter is no selection either.
    let b = Builder::new("variadic_swap");
    let x = b.parameter(0, Shape::of::<f64>(&[2, 3]), "x");
    let y = b.parameter(1, Shape::of::<f64>(&[2, 3]), "y");
    let built = line!() + 1;
    let out = b.reduce_many(
        &[&x, &y],
        &[&b.constant(0f64), &b.constant(0f64)],
        &[1],
        |a, e| vec![e[1].clone(), a[0].clone()],
    );
    let e = b
        .build(&b.grad(&out[0].reduce_sum(&[0]), &x))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("variadic `reduce`") && e.contains(&format!("grad.rs:{built}")),
        "{e}"
    );
}

#[test]
fn argmax_used_as_an_integer_needs_no_rule() {
    // `argmax`'s index only counts as an integer: no cotangent reaches its reduce.
    let b = Builder::new("argmax_int");
    let x = b.parameter(0, Shape::of::<f64>(&[2, 3]), "x");
    let k = x.argmax(1).convert(ElementType::F64);
    let loss = (&x * &x).reduce_sum(&[0, 1]) + k.reduce_sum(&[0]);
    let g = b.grad(&loss, &x);
    let m = b.build_tuple(&[&g, &k]).unwrap();
    let xs = [0.5f64, -1.0, 2.0, 3.0, 3.0, -2.0];
    let out = run(&m, &[&upload(&xs, &[2, 3])]);
    let want: Vec<f64> = xs.iter().map(|v| 2.0 * v).collect();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), want);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![2.0, 0.0]);
}

/// `(best value, its flat index)` of each window of `x` with a variadic
/// reduce-window whose body selects (as [`arg_best`]).
fn arg_best_pool(x: &Op, window: &[WindowDim], max: bool) -> (Op, Op) {
    let b = x.builder();
    let dims = x.dims().unwrap();
    let n: i64 = dims.iter().product();
    let idx = b.iota(ElementType::S32, &[n], 0).reshape(&dims);
    let (better, worst) = if max {
        (Comparison::Gt, f64::NEG_INFINITY)
    } else {
        (Comparison::Lt, f64::INFINITY)
    };
    let out = b.reduce_window_many(
        &[x, &idx],
        &[&b.constant(worst), &b.constant(i32::MAX)],
        window,
        |a, e| {
            let bb = a[0].builder();
            let wins = e[0].compare(&a[0], better);
            let tie = e[0]
                .compare(&a[0], Comparison::Eq)
                .and(&e[1].compare(&a[1], Comparison::Lt));
            let take = wins.or(&tie);
            vec![
                bb.select(&take, &e[0], &a[0]),
                bb.select(&take, &e[1], &a[1]),
            ]
        },
    );
    (out[0].clone(), out[1].clone())
}

#[test]
fn through_a_variadic_reduce_window_that_selects() {
    let w = |size, stride, lo, hi, wd, bd| WindowDim {
        size,
        stride,
        padding_low: lo,
        padding_high: hi,
        window_dilation: wd,
        base_dilation: bd,
    };
    // Overlapping windows (an element in several gets each window's cotangent),
    // padding, window and base dilation, a negative padding.
    let cases: [(&str, &[i64], Vec<WindowDim>, bool); 5] = [
        (
            "argmax_pool_overlapping",
            &[4, 5],
            vec![w(2, 1, 0, 0, 1, 1), w(3, 1, 0, 0, 1, 1)],
            true,
        ),
        (
            "argmax_pool_strided_padded",
            &[5, 4],
            vec![w(3, 2, 1, 1, 1, 1), w(2, 2, 0, 1, 1, 1)],
            true,
        ),
        (
            "argmin_pool_window_dilated",
            &[5, 5],
            vec![w(2, 1, 0, 0, 2, 1), w(3, 2, 1, 0, 2, 1)],
            false,
        ),
        (
            "argmax_pool_base_dilated",
            &[3, 4],
            vec![w(3, 1, 1, 1, 1, 2), w(2, 1, -1, 0, 1, 1)],
            true,
        ),
        ("argmin_pool_1d", &[7], vec![w(3, 2, 1, 1, 1, 1)], false),
    ];
    for (name, shape, window, max) in cases {
        check(name, &[shape], -1.0, 1.0, |p| {
            let (v, i) = arg_best_pool(&p[0], &window, max);
            &v.exp() + &(&i.convert(ElementType::F64) * 0.01)
        });
    }
    // A one-input reduce-window whose body selects by a captured scalar: the
    // capture makes it variadic.
    check("select_pool_captured", &[&[6], &[]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let s = p[1].exp();
        p[0].reduce_window(
            &b.constant(f64::NEG_INFINITY),
            &[WindowDim::new(3, 1)],
            |a, e| {
                a.builder()
                    .select(&(e * &s).compare(&(a * &s), Comparison::Gt), e, a)
            },
        ) * &p[1]
    });
}

/// Ties within windows: the index picks the first, which gets the whole cotangent;
/// a window of padding only gets nothing.
#[test]
fn a_variadic_reduce_window_that_selects_at_ties() {
    let b = Builder::new("pool_ties");
    let x = b.parameter(0, Shape::of::<f64>(&[6]), "x");
    let window = [WindowDim {
        size: 2,
        stride: 2,
        padding_low: 0,
        padding_high: 2,
        window_dilation: 1,
        base_dilation: 1,
    }];
    let (v, i) = arg_best_pool(&x, &window, true);
    let g = b.grad(
        &(&v * &b.constant_vec(&[1.0f64, 2.0, 3.0, 4.0])).reduce_sum(&[0]),
        &x,
    );
    let m = b.build_tuple(&[&v, &i, &g]).unwrap();
    let out = run(&m, &[&upload(&[2.0f64, 2.0, -1.0, 5.0, 4.0, 4.0], &[6])]);
    assert_eq!(
        out[0].to_vec::<f64>().unwrap(),
        vec![2.0, 5.0, 4.0, f64::NEG_INFINITY]
    );
    assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![0, 3, 4, i32::MAX]);
    assert_eq!(
        out[2].to_vec::<f64>().unwrap(),
        vec![1.0, 0.0, 0.0, 2.0, 3.0, 0.0]
    );
    // A body that adds: the error names `reduce-window` and the line.
    let b = Builder::new("pool_sum");
    let x = b.parameter(0, Shape::of::<f64>(&[6]), "x");
    let idx = b.iota(ElementType::S32, &[6], 0);
    let built = line!() + 1;
    let out = b.reduce_window_many(
        &[&x, &idx],
        &[&b.constant(0f64), &b.constant(0i32)],
        &[WindowDim::new(2, 1)],
        |a, e| vec![&a[0] + &e[0], &a[1] + &e[1]],
    );
    let e = b
        .build(&b.grad(&out[0].reduce_sum(&[0]), &x))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`reduce-window`") && e.contains(&format!("grad.rs:{built}")),
        "{e}"
    );
}
