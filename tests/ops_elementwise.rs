//! Element-wise ops on the real plugin: every unary and binary op against plain-Rust
//! references (rounding, cbrt, tan, erf and is_finite also at NaN, infinities, signed
//! zeros, huge values, rank 0 and empty arrays), integer arithmetic (s32, u8, u32,
//! s64) and f64, Rust operators with scalars on either side, numpy broadcasting,
//! compare in all directions, select, clamp, relu and `pred` buffers.

mod common;
use common::*;

use xlaclient::{Buffer, Builder, Comparison, ElementType, NativeType, Op, Shape};

/// Asserts `got[i]` is within `rel` of `want[i]` relative to `|want[i]|` (plus a
/// denormal-sized absolute slack): for values near zero, where `assert_close` is
/// effectively absolute.
fn assert_rel(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs() + 1e-30,
            "{what}: element {i}: got {g:e}, want {w:e} (relative tol {rel})"
        );
    }
}

fn assert_close64(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs() || g == w,
            "{what}: element {i}: got {g:e}, want {w:e} (relative tol {rel})"
        );
    }
}

// Reference functions (kept in tables with their names).
type F64Un = fn(f64) -> f64;
type F64Bin = fn(f64, f64) -> f64;
type F32Bin = fn(f32, f32) -> f32;
type I32Un = fn(i32) -> i32;
type I32Bin = fn(i32, i32) -> i32;

fn map<T: Copy, U>(xs: &[T], f: impl Fn(T) -> U) -> Vec<U> {
    xs.iter().map(|x| f(*x)).collect()
}

fn zip<T: Copy, U>(xs: &[T], ys: &[T], f: impl Fn(T, T) -> U) -> Vec<U> {
    xs.iter().zip(ys).map(|(x, y)| f(*x, *y)).collect()
}

// ---------------------------------------------------------------------------------
// Unary ops.

struct Unary {
    name: &'static str,
    op: fn(&Op) -> Op,
    reference: fn(f32) -> f32,
    /// Inputs in the function's domain.
    inputs: Vec<f32>,
    /// `assert_close` tolerance (0 = exact).
    tol: f32,
}

#[test]
fn every_unary_op_f32_matches_std() {
    const N: usize = 24;
    let mut rng = Rng(11);
    let mut dom = |lo: f32, hi: f32, special: &[f32]| {
        let mut v = special.to_vec();
        v.extend(rng.vec(N - special.len(), lo, hi));
        v
    };
    let signed = [-2.5, -2.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0];
    let halves = [-2.5, -1.5, -0.5, -0.4, -0.0, 0.0, 0.5, 1.5, 2.5, 0.49999997];
    let table = vec![
        Unary {
            name: "neg",
            op: |x| x.neg(),
            reference: |x| -x,
            inputs: dom(-50.0, 50.0, &signed),
            tol: 0.0,
        },
        Unary {
            name: "exp",
            op: |x| x.exp(),
            reference: f32::exp,
            inputs: dom(-20.0, 20.0, &[0.0, 1.0, -1.0, 1e-3]),
            tol: 1e-5,
        },
        Unary {
            name: "log",
            op: |x| x.log(),
            reference: f32::ln,
            inputs: dom(1e-3, 1e3, &[1.0, 2.0, 0.5, 1e-6, 1e6]),
            tol: 1e-5,
        },
        Unary {
            name: "tanh",
            op: |x| x.tanh(),
            reference: f32::tanh,
            inputs: dom(-6.0, 6.0, &[0.0, 1e-3, -1e-3, 10.0, -10.0]),
            tol: 1e-5,
        },
        Unary {
            name: "abs",
            op: |x| x.abs(),
            reference: f32::abs,
            inputs: dom(-50.0, 50.0, &signed),
            tol: 0.0,
        },
        Unary {
            name: "sqrt",
            op: |x| x.sqrt(),
            reference: f32::sqrt,
            inputs: dom(0.0, 100.0, &[0.0, 1.0, 4.0, 2.0, 1e-8]),
            tol: 1e-6,
        },
        Unary {
            name: "rsqrt",
            op: |x| x.rsqrt(),
            reference: |x| 1.0 / x.sqrt(),
            inputs: dom(1e-2, 100.0, &[1.0, 4.0, 0.25]),
            tol: 1e-5,
        },
        Unary {
            name: "sin",
            op: |x| x.sin(),
            reference: f32::sin,
            inputs: dom(-10.0, 10.0, &[0.0, 1e-3, std::f32::consts::FRAC_PI_2]),
            tol: 1e-5,
        },
        Unary {
            name: "cos",
            op: |x| x.cos(),
            reference: f32::cos,
            inputs: dom(-10.0, 10.0, &[0.0, 1e-3, std::f32::consts::PI]),
            tol: 1e-5,
        },
        Unary {
            name: "logistic",
            op: |x| x.logistic(),
            reference: |x| 1.0 / (1.0 + (-x).exp()),
            inputs: dom(-15.0, 15.0, &[0.0, 1.0, -1.0]),
            tol: 1e-5,
        },
        Unary {
            name: "floor",
            op: |x| x.floor(),
            reference: f32::floor,
            inputs: dom(-50.0, 50.0, &signed),
            tol: 0.0,
        },
        Unary {
            name: "ceil",
            op: |x| x.ceil(),
            reference: f32::ceil,
            inputs: dom(-50.0, 50.0, &signed),
            tol: 0.0,
        },
        Unary {
            name: "sign",
            op: |x| x.sign(),
            // Rust's signum maps ±0 to ±1; XLA's sign keeps ±0.
            reference: |x| if x == 0.0 { x } else { x.signum() },
            inputs: dom(-50.0, 50.0, &signed),
            tol: 0.0,
        },
        Unary {
            name: "expm1",
            op: |x| x.expm1(),
            reference: f32::exp_m1,
            inputs: dom(-5.0, 5.0, &[0.0, 1e-4, -1e-4, 0.3]),
            tol: 1e-5,
        },
        Unary {
            name: "log1p",
            op: |x| x.log1p(),
            reference: f32::ln_1p,
            inputs: dom(-0.9, 100.0, &[0.0, 1e-4, -1e-4, 0.3]),
            tol: 1e-5,
        },
        Unary {
            name: "round",
            op: |x| x.round(),
            reference: f32::round,
            inputs: dom(-50.0, 50.0, &halves),
            tol: 0.0,
        },
        Unary {
            name: "round_even",
            op: |x| x.round_even(),
            reference: f32::round_ties_even,
            inputs: dom(-50.0, 50.0, &halves),
            tol: 0.0,
        },
        Unary {
            name: "cbrt",
            op: |x| x.cbrt(),
            reference: f32::cbrt,
            inputs: dom(
                -1000.0,
                1000.0,
                &[-8.0, 27.0, 0.0, -0.0, 1e-6, -1e-30, 1e30],
            ),
            tol: 1e-6,
        },
        Unary {
            name: "tan",
            op: |x| x.tan(),
            reference: |x| f64::from(x).tan() as f32,
            inputs: dom(-1.5, 1.5, &[0.0, -0.0, 1e-3, 0.5, -1.0, 1.5]),
            tol: 1e-5,
        },
        Unary {
            name: "erf",
            op: |x| x.erf(),
            reference: |x| erf_ref(f64::from(x)) as f32,
            inputs: dom(-4.0, 4.0, &[0.0, -0.0, 0.5, -0.5, 1e-4, 3.0, -3.0, 5.0]),
            tol: 2e-6,
        },
        // Of a real array: itself and zeros (complex operands: below).
        Unary {
            name: "real",
            op: |x| x.real(),
            reference: |x| x,
            inputs: dom(-4.0, 4.0, &[0.0, -0.0, f32::INFINITY]),
            tol: 0.0,
        },
        Unary {
            name: "imag",
            op: |x| x.imag(),
            reference: |_| 0.0,
            inputs: dom(-4.0, 4.0, &[0.0, f32::INFINITY]),
            tol: 0.0,
        },
    ];
    // Every unary op but is_finite (a `pred` result: tested below).
    assert_eq!(
        table.len() + 1,
        xlaclient::ops::elementwise::UnaryOp::ALL.len(),
        "table covers every unary op"
    );

    let b = Builder::new("unary");
    let outs: Vec<Op> = table
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let x = b.parameter(i, Shape::of::<f32>(&[N as i64]), u.name);
            let y = (u.op)(&x);
            assert_eq!(
                y.shape().ok(),
                Some(Shape::of::<f32>(&[N as i64])),
                "{}",
                u.name
            );
            y
        })
        .collect();
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let inputs: Vec<Buffer> = table
        .iter()
        .map(|u| upload(&u.inputs, &[N as i64]))
        .collect();
    let res = run(&module, &inputs.iter().collect::<Vec<_>>());
    assert_eq!(res.len(), table.len());
    for (u, buf) in table.iter().zip(&res) {
        let got = fetch::<f32>(buf, &[N as i64], u.name);
        let want = map(&u.inputs, u.reference);
        if u.tol == 0.0 {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "{}({}): got {g:?}, want {w:?} (element {i})",
                    u.name,
                    u.inputs[i]
                );
            }
        } else {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= u.tol * (1.0 + w.abs()),
                    "{}({}): got {g}, want {w} (element {i}, tol {})",
                    u.name,
                    u.inputs[i],
                    u.tol
                );
            }
        }
    }
}

#[test]
fn expm1_and_log1p_are_accurate_near_zero() {
    // Relative accuracy where `exp(x) - 1` and `log(1 + x)` would lose most digits.
    let xs: Vec<f32> = vec![1e-7, -1e-7, 3e-6, -3e-6, 1e-4, -2e-4, 1e-2, -1e-2];
    let b = Builder::new("near_zero");
    let x = b.parameter(0, Shape::of::<f32>(&[8]), "x");
    let module = b.build_tuple(&[&x.expm1(), &x.log1p()]).unwrap();
    let res = run(&module, &[&upload(&xs, &[8])]);
    assert_rel(
        &fetch::<f32>(&res[0], &[8], "expm1"),
        &map(&xs, f32::exp_m1),
        1e-5,
        "expm1",
    );
    assert_rel(
        &fetch::<f32>(&res[1], &[8], "log1p"),
        &map(&xs, f32::ln_1p),
        1e-5,
        "log1p",
    );
}

#[test]
fn unary_ops_f64_keep_double_precision() {
    let xs: Vec<f64> = vec![0.1, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 1e-9];
    let b = Builder::new("unary64");
    let x = b.parameter(0, Shape::of::<f64>(&[8]), "x");
    let outs = [
        x.exp(),
        x.log(),
        x.sqrt(),
        x.tanh(),
        x.sin(),
        x.neg(),
        x.log1p(),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&xs, &[8])]);
    let refs: [(&str, F64Un); 7] = [
        ("exp", f64::exp),
        ("log", f64::ln),
        ("sqrt", f64::sqrt),
        ("tanh", f64::tanh),
        ("sin", f64::sin),
        ("neg", |x| -x),
        ("log1p", f64::ln_1p),
    ];
    for ((name, f), buf) in refs.iter().zip(&res) {
        // 1e-12 cannot be met by an f32 computation (f32 epsilon is 1.2e-7).
        assert_close64(&fetch::<f64>(buf, &[8], name), &map(&xs, f), 1e-12, name);
    }
}

/// The error function in f64, for reference: its Maclaurin series below 2.5 (terms
/// no larger than 16, so the sum keeps 15 digits), else `1 - erfc` with `erfc` from
/// its continued fraction (Abramowitz and Stegun 7.1.14), both with the sign of `x`.
fn erf_ref(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() || a == 0.0 {
        return x;
    }
    let r = if a < 2.5 {
        // erf(a) = 2/sqrt(pi) * sum_n (-1)^n a^(2n+1) / (n! (2n+1))
        let (mut sum, mut term, mut n) = (0.0, a, 0.0);
        loop {
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() <= 1e-18 * sum {
                break;
            }
            n += 1.0;
            term *= -a * a / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else if a.is_infinite() {
        1.0
    } else {
        // erfc(a) = exp(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
        let mut t = a;
        for k in (1..200).rev() {
            t = a + (k as f64 / 2.0) / t;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / t
    };
    r.copysign(x)
}

#[test]
fn the_erf_reference_matches_known_values() {
    // Values to 16 digits from tables of the error function.
    for (x, want) in [
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (2.5, 0.999593047982555),
        (3.0, 0.9999779095030014),
        (-1.0, -0.8427007929497149),
    ] {
        let got = erf_ref(x);
        assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
    }
}

/// Asserts `got` equals `want` bit for bit (any NaN matching any NaN).
fn assert_bits(got: &[f32], want: &[f32], inputs: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{what}({:?}): got {g:?}, want {w:?} (element {i})",
            inputs[i]
        );
    }
}

/// Asserts `got` is within `rel` of `want`, where NaN, infinities and zeros (with
/// their sign) must match exactly.
fn assert_near_exact_edges(got: &[f32], want: &[f32], inputs: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || *w == 0.0 {
            g.to_bits() == w.to_bits()
        } else {
            (g - w).abs() <= rel * w.abs()
        };
        assert!(
            ok,
            "{what}({:?}): got {g:?}, want {w:?} (element {i})",
            inputs[i]
        );
    }
}

#[test]
fn rounding_cbrt_tan_erf_and_is_finite_at_edge_values_f32() {
    let tiny = f32::from_bits(1); // the smallest subnormal
    let xs: Vec<f32> = vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        -0.4,
        0.4,
        -0.5,
        0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999997,
        -0.49999997,
        8388609.0, // 2^23 + 1: every float from 2^23 up is an integer
        -8388609.0,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        -8.0,
        27.0,
        tiny,
    ];
    let n = xs.len() as i64;
    let b = Builder::new("edges32");
    let x = b.parameter(0, Shape::of::<f32>(&[n]), "x");
    let m = b
        .build_tuple(&[
            &x.round(),
            &x.round_even(),
            &x.cbrt(),
            &x.tan(),
            &x.erf(),
            &x.is_finite(),
        ])
        .unwrap();
    let r = run(&m, &[&upload(&xs, &[n])]);
    let got = |i: usize, name: &str| fetch::<f32>(&r[i], &[n], name);
    assert_bits(&got(0, "round"), &map(&xs, f32::round), &xs, "round");
    assert_bits(
        &got(1, "round_even"),
        &map(&xs, f32::round_ties_even),
        &xs,
        "round_even",
    );
    // XLA's cbrt is wrong on subnormals (cbrt(1e-45) is 1.1e-15; the 0.115 CPU
    // plugin gives -5.6e-16): the last input is left out of the checks of computed
    // values. The 0.81 plugin's cbrt is within 1e-6 (7e-7 off at 1e30).
    let m1 = xs.len() - 1;
    assert_near_exact_edges(
        &got(2, "cbrt")[..m1],
        &map(&xs[..m1], f32::cbrt),
        &xs,
        1e-6,
        "cbrt",
    );
    // tan of the huge inputs depends on the argument reduction: checked for NaN,
    // infinities and zeros only (and |x| <= 2.5, where f64 gives the reference).
    let tan_ref: Vec<f32> = map(&xs[..m1], |v| f64::from(v).tan() as f32);
    let near: Vec<usize> = (0..m1)
        .filter(|i| !xs[*i].is_finite() || xs[*i].abs() <= 2.5)
        .collect();
    let tan = got(3, "tan");
    assert_near_exact_edges(
        &near.iter().map(|i| tan[*i]).collect::<Vec<_>>(),
        &near.iter().map(|i| tan_ref[*i]).collect::<Vec<_>>(),
        &near.iter().map(|i| xs[*i]).collect::<Vec<_>>(),
        2e-6,
        "tan",
    );
    assert_near_exact_edges(
        &got(4, "erf")[..m1],
        &map(&xs[..m1], |v| erf_ref(f64::from(v)) as f32),
        &xs,
        2e-6,
        "erf",
    );
    assert_eq!(
        fetch::<bool>(&r[5], &[n], "is_finite"),
        map(&xs, f32::is_finite),
        "is_finite of {xs:?}"
    );
}

#[test]
fn rounding_cbrt_tan_erf_and_is_finite_at_edge_values_f64() {
    let xs: Vec<f64> = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        -0.4,
        2.5,
        -2.5,
        3.5,
        0.49999999999999994,
        4503599627370497.0, // 2^52 + 1
        -1e300,
        f64::MAX,
        f64::MIN_POSITIVE,
        -27.0,
        0.1,
        1.2,
        -2.0,
    ];
    let n = xs.len() as i64;
    let b = Builder::new("edges64");
    let x = b.parameter(0, Shape::of::<f64>(&[n]), "x");
    let m = b
        .build_tuple(&[
            &x.round(),
            &x.round_even(),
            &x.cbrt(),
            &x.tan(),
            &x.erf(),
            &x.is_finite(),
        ])
        .unwrap();
    let r = run(&m, &[&upload(&xs, &[n])]);
    let got = |i: usize, name: &str| fetch::<f64>(&r[i], &[n], name);
    let check = |got: Vec<f64>, f: fn(f64) -> f64, rel: f64, what: &str, only: fn(f64) -> bool| {
        for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
            let w = f(*x);
            if !only(*x) {
                continue;
            }
            let ok = if w.is_nan() {
                g.is_nan()
            } else if rel == 0.0 || w.is_infinite() || w == 0.0 {
                g.to_bits() == w.to_bits()
            } else {
                (g - w).abs() <= rel * w.abs()
            };
            assert!(ok, "{what}({x:?}): got {g:?}, want {w:?} (element {i})");
        }
    };
    let all = |_: f64| true;
    check(got(0, "round"), f64::round, 0.0, "round", all);
    check(
        got(1, "round_even"),
        f64::round_ties_even,
        0.0,
        "round_even",
        all,
    );
    // The 0.81 plugin's cbrt is 1.3e-14 off at -1e300.
    check(got(2, "cbrt"), f64::cbrt, 1e-13, "cbrt", all);
    check(got(3, "tan"), f64::tan, 1e-14, "tan", |x| {
        !x.is_finite() || x.abs() <= 2.5
    });
    check(got(4, "erf"), erf_ref, 1e-14, "erf", all);
    assert_eq!(
        fetch::<bool>(&r[5], &[n], "is_finite"),
        map(&xs, f64::is_finite)
    );
}

// ---------------------------------------------------------------------------------
// Binary ops.

#[test]
fn every_binary_op_f32_matches_std() {
    const N: usize = 32;
    let mut rng = Rng(23);
    // Mixed signs, equal pairs, and zeros for x in atan2(y, x).
    let mut x = vec![-3.5, 3.5, -7.25, 7.25, 2.0, -0.0, 0.0, 1.0];
    let mut y = vec![2.0, -2.0, -2.5, 2.5, 2.0, 1.0, -1.0, 1.0];
    x.extend(rng.vec(N - x.len(), -10.0, 10.0));
    y.extend((y.len()..N).map(|i| {
        let v = rng.uniform(0.25, 10.0);
        if i % 2 == 0 { v } else { -v }
    }));
    // pow: positive bases, exponents of both signs.
    let base: Vec<f32> = rng.vec(N, 0.05, 5.0);
    let expo: Vec<f32> = rng.vec(N, -3.0, 3.0);

    let b = Builder::new("binary");
    let s = Shape::of::<f32>(&[N as i64]);
    let px = b.parameter(0, s.clone(), "x");
    let py = b.parameter(1, s.clone(), "y");
    let pb = b.parameter(2, s.clone(), "base");
    let pe = b.parameter(3, s, "expo");
    let outs = [
        px.add(&py),
        px.sub(&py),
        px.mul(&py),
        px.div(&py),
        px.max(&py),
        px.min(&py),
        px.rem(&py),
        py.atan2(&px),
        pb.pow(&pe),
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let bufs = [
        upload(&x, &[N as i64]),
        upload(&y, &[N as i64]),
        upload(&base, &[N as i64]),
        upload(&expo, &[N as i64]),
    ];
    let res = run(&module, &bufs.iter().collect::<Vec<_>>());
    let get = |i: usize, name: &str| fetch::<f32>(&res[i], &[N as i64], name);

    // IEEE-exact ops must agree bit for bit.
    let exact: [(&str, F32Bin); 7] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("max", f32::max),
        ("min", f32::min),
        ("rem", |a, b| a % b),
    ];
    for (i, (name, f)) in exact.iter().enumerate() {
        let got = get(i, name);
        let want = zip(&x, &y, f);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            // max/min of -0 and 0 may return either zero.
            let same =
                g.to_bits() == w.to_bits() || (*g == 0.0 && *w == 0.0 && name.starts_with('m'));
            assert!(same, "{name}({}, {}): got {g:?}, want {w:?}", x[k], y[k]);
        }
    }
    assert_close(&get(7, "atan2"), &zip(&y, &x, f32::atan2), 1e-5);
    assert_close(&get(8, "pow"), &zip(&base, &expo, f32::powf), 1e-5);
}

#[test]
fn binary_ops_f64() {
    let x = [0.1f64, -2.5, 1e10, 3.0];
    let y = [0.2f64, 0.75, 3.0, -7.0];
    let b = Builder::new("binary64");
    let px = b.parameter(0, Shape::of::<f64>(&[4]), "x");
    let py = b.parameter(1, Shape::of::<f64>(&[4]), "y");
    let module = b
        .build_tuple(&[&(&px + &py), &(&px * &py), &(&px / &py), &px.rem(&py)])
        .unwrap();
    let res = run(&module, &[&upload(&x, &[4]), &upload(&y, &[4])]);
    // Exact IEEE double results (0.1 + 0.2 = 0.30000000000000004 in f64, not f32).
    let refs: [(&str, F64Bin); 4] = [
        ("add", |a, b| a + b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("rem", |a, b| a % b),
    ];
    for ((name, f), buf) in refs.iter().zip(&res) {
        assert_eq!(fetch::<f64>(buf, &[4], name), zip(&x, &y, f), "{name}");
    }
}

#[test]
fn integer_arithmetic_s32_truncates_toward_zero() {
    let x: Vec<i32> = vec![7, -7, 7, -7, 0, 100, -100, i32::MAX, 9, -9, 13, 1];
    let y: Vec<i32> = vec![2, 2, -2, -2, 5, 7, 7, 2, 3, -3, -5, 1];
    let n = x.len() as i64;
    let b = Builder::new("s32");
    let px = b.parameter(0, Shape::of::<i32>(&[n]), "x");
    let py = b.parameter(1, Shape::of::<i32>(&[n]), "y");
    let pw = b.parameter(2, Shape::of::<i32>(&[n]), "w");
    let outs = [
        &px + &py,
        &px - &py,
        &px * &py,
        &px / &py,
        px.rem(&py),
        px.max(&py),
        px.min(&py),
        px.neg(),
        px.abs(),
        px.sign(),
        py.pow(&pw),
    ];
    for o in &outs {
        assert_eq!(o.element_type().ok(), Some(ElementType::S32));
    }
    let w: Vec<i32> = vec![0, 1, 2, 3, 4, 5, 0, 3, 2, 3, 1, 7];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(
        &module,
        &[&upload(&x, &[n]), &upload(&y, &[n]), &upload(&w, &[n])],
    );
    let bin: [(&str, I32Bin); 7] = [
        ("add", i32::wrapping_add),
        ("sub", i32::wrapping_sub),
        ("mul", i32::wrapping_mul),
        ("div", |a, b| a / b),
        ("rem", |a, b| a % b),
        ("max", |a, b| a.max(b)),
        ("min", |a, b| a.min(b)),
    ];
    for (i, (name, f)) in bin.iter().enumerate() {
        assert_eq!(
            fetch::<i32>(&res[i], &[n], name),
            zip(&x, &y, f),
            "{name} of {x:?} and {y:?}"
        );
    }
    // Spelled out for the truncation/sign rules: -7/2 = -3, 7/-2 = -3, -7%2 = -1, 7%-2 = 1.
    assert_eq!(fetch::<i32>(&res[3], &[n], "div")[..4], [3, -3, -3, 3]);
    assert_eq!(fetch::<i32>(&res[4], &[n], "rem")[..4], [1, -1, 1, -1]);
    let un: [(&str, I32Un); 3] = [
        ("neg", i32::wrapping_neg),
        ("abs", i32::wrapping_abs),
        ("sign", i32::signum),
    ];
    for (i, (name, f)) in un.iter().enumerate() {
        assert_eq!(fetch::<i32>(&res[7 + i], &[n], name), map(&x, f), "{name}");
    }
    assert_eq!(
        fetch::<i32>(&res[10], &[n], "pow"),
        zip(&y, &w, |a, e| a.wrapping_pow(e as u32)),
        "pow"
    );
}

#[test]
fn unsigned_and_wide_integer_types() {
    // u8 wraps modulo 256.
    let a8: Vec<u8> = vec![200, 5, 16, 250, 255, 0];
    let b8: Vec<u8> = vec![100, 10, 17, 7, 1, 3];
    // u32 values above i32::MAX must stay unsigned (signed division would differ).
    let a32: Vec<u32> = vec![4_000_000_000, 3_000_000_001, 7, u32::MAX];
    let b32: Vec<u32> = vec![3, 1, 4_000_000_000, 2];
    // s64 values beyond 32 bits.
    let a64: Vec<i64> = vec![3_000_000_000, -5_000_000_000, 1 << 40, -7];
    let b64: Vec<i64> = vec![3, 7, -3, 2];

    let b = Builder::new("ints");
    let pa8 = b.parameter(0, Shape::of::<u8>(&[6]), "a8");
    let pb8 = b.parameter(1, Shape::of::<u8>(&[6]), "b8");
    let pa32 = b.parameter(2, Shape::of::<u32>(&[4]), "a32");
    let pb32 = b.parameter(3, Shape::of::<u32>(&[4]), "b32");
    let pa64 = b.parameter(4, Shape::of::<i64>(&[4]), "a64");
    let pb64 = b.parameter(5, Shape::of::<i64>(&[4]), "b64");
    let outs = [
        &pa8 + &pb8,
        &pa8 - &pb8,
        &pa8 * &pb8,
        &pa8 / &pb8,
        &pa32 / &pb32,
        pa32.rem(&pb32),
        pa32.max(&pb32),
        pa32.min(&pb32),
        &pa32 + &pb32,
        &pa64 * &pb64,
        &pa64 / &pb64,
        &pa64 + &pb64,
    ];
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let args = [
        upload(&a8, &[6]),
        upload(&b8, &[6]),
        upload(&a32, &[4]),
        upload(&b32, &[4]),
        upload(&a64, &[4]),
        upload(&b64, &[4]),
    ];
    let res = run(&module, &args.iter().collect::<Vec<_>>());
    assert_eq!(
        fetch::<u8>(&res[0], &[6], "u8 add"),
        zip(&a8, &b8, u8::wrapping_add)
    );
    assert_eq!(
        fetch::<u8>(&res[1], &[6], "u8 sub"),
        zip(&a8, &b8, u8::wrapping_sub)
    );
    assert_eq!(
        fetch::<u8>(&res[2], &[6], "u8 mul"),
        zip(&a8, &b8, u8::wrapping_mul)
    );
    assert_eq!(
        fetch::<u8>(&res[3], &[6], "u8 div"),
        zip(&a8, &b8, |a, b| a / b)
    );
    assert_eq!(
        fetch::<u32>(&res[4], &[4], "u32 div"),
        zip(&a32, &b32, |a, b| a / b)
    );
    assert_eq!(
        fetch::<u32>(&res[5], &[4], "u32 rem"),
        zip(&a32, &b32, |a, b| a % b)
    );
    assert_eq!(
        fetch::<u32>(&res[6], &[4], "u32 max"),
        zip(&a32, &b32, u32::max)
    );
    assert_eq!(
        fetch::<u32>(&res[7], &[4], "u32 min"),
        zip(&a32, &b32, u32::min)
    );
    assert_eq!(
        fetch::<u32>(&res[8], &[4], "u32 add"),
        zip(&a32, &b32, u32::wrapping_add)
    );
    assert_eq!(
        fetch::<i64>(&res[9], &[4], "s64 mul"),
        zip(&a64, &b64, |a, b| a * b)
    );
    assert_eq!(
        fetch::<i64>(&res[10], &[4], "s64 div"),
        zip(&a64, &b64, |a, b| a / b)
    );
    assert_eq!(
        fetch::<i64>(&res[11], &[4], "s64 add"),
        zip(&a64, &b64, |a, b| a + b)
    );
}

// ---------------------------------------------------------------------------------
// Operators with Rust numbers.

#[test]
fn operators_with_scalars_on_either_side_f32() {
    let xs: Vec<f32> = vec![-3.0, -0.5, 0.25, 1.0, 2.0, 8.0];
    let ys: Vec<f32> = vec![2.0, 4.0, -0.5, 3.0, -1.0, 0.125];
    let b = Builder::new("scalars");
    let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[6]), "y");
    let outs = [
        2.0 - &x,
        &x / 4.0,
        1.0 - &x,
        3.0 * &x,
        &x + 0.5,
        8.0 / &x,
        &x - 1.0,
        -&x,
        x.clone() * 2.0f64,
        10.0f64 + x.clone(),
        &x * 3, // an i32 literal on an f32 array is an f32 3.0
        7i64 - &x,
        &x + &y,
        x.clone() - y.clone(),
        &x * y.clone(),
        x.clone() / &y,
        -(x.clone() * &y),
    ];
    for o in &outs {
        assert_eq!(o.shape().ok(), Some(Shape::of::<f32>(&[6])), "{o:?}");
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&xs, &[6]), &upload(&ys, &[6])]);
    let un: [fn(f32) -> f32; 12] = [
        |x| 2.0 - x,
        |x| x / 4.0,
        |x| 1.0 - x,
        |x| 3.0 * x,
        |x| x + 0.5,
        |x| 8.0 / x,
        |x| x - 1.0,
        |x| -x,
        |x| x * 2.0,
        |x| 10.0 + x,
        |x| x * 3.0,
        |x| 7.0 - x,
    ];
    for (i, f) in un.iter().enumerate() {
        assert_eq!(
            fetch::<f32>(&res[i], &[6], "scalar op"),
            map(&xs, f),
            "output {i}"
        );
    }
    let bin: [fn(f32, f32) -> f32; 5] = [
        |a, b| a + b,
        |a, b| a - b,
        |a, b| a * b,
        |a, b| a / b,
        |a, b| -(a * b),
    ];
    for (i, f) in bin.iter().enumerate() {
        assert_eq!(
            fetch::<f32>(&res[12 + i], &[6], "op op"),
            zip(&xs, &ys, f),
            "output {}",
            12 + i
        );
    }
}

#[test]
fn scalar_takes_the_integer_arrays_element_type() {
    let xs: Vec<i32> = vec![-7, -1, 0, 2, 5, 9];
    let b = Builder::new("int_scalars");
    let x = b.parameter(0, Shape::of::<i32>(&[6]), "x");
    let outs = [&x * 3, 10 - &x, &x / 3, &x + 2i64, 1 - x.clone(), -&x];
    for o in &outs {
        assert_eq!(o.element_type().ok(), Some(ElementType::S32), "{o:?}");
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(&xs, &[6])]);
    let refs: [fn(i32) -> i32; 6] = [
        |x| x * 3,
        |x| 10 - x,
        |x| x / 3,
        |x| x + 2,
        |x| 1 - x,
        |x| -x,
    ];
    for (i, f) in refs.iter().enumerate() {
        assert_eq!(
            fetch::<i32>(&res[i], &[6], "s32 scalar op"),
            map(&xs, f),
            "output {i}"
        );
    }
    // Truncation toward zero: -7 / 3 = -2, not -3.
    assert_eq!(fetch::<i32>(&res[2], &[6], "div")[0], -2);

    // The same for u32 and f64 arrays.
    let b = Builder::new("typed_scalars");
    let u = b.parameter(0, Shape::of::<u32>(&[2]), "u");
    let d = b.parameter(1, Shape::of::<f64>(&[2]), "d");
    let (uu, dd): (Op, Op) = (&u * 2, &d * 0.1);
    assert_eq!(uu.element_type().ok(), Some(ElementType::U32));
    assert_eq!(dd.element_type().ok(), Some(ElementType::F64));
    let module = b.build_tuple(&[&uu, &dd]).unwrap();
    let res = run(
        &module,
        &[
            &upload(&[3_000_000_000u32, 7], &[2]),
            &upload(&[3.0f64, -1.0], &[2]),
        ],
    );
    assert_eq!(
        fetch::<u32>(&res[0], &[2], "u32*2"),
        [3_000_000_000u32.wrapping_mul(2), 14]
    );
    // 0.1 as an f64 constant (an f32 0.1 would give 0.30000001192092896).
    assert_eq!(fetch::<f64>(&res[1], &[2], "f64*0.1"), [3.0 * 0.1, -0.1]);
}

/// JAX's promotion of weakly typed Rust numbers: a float number with an integer or
/// boolean array gives f32 (`jnp.int32(1) / 2.0` is `f32` 0.5 with 64-bit types off),
/// an integer number with a boolean array gives s32 (`jnp.bool_(True) + 1` is 2).
/// The references are plain Rust on the same values in f32/i32.
#[test]
fn float_number_makes_integer_array_f32_as_in_jax() {
    let xs: Vec<i32> = vec![1, -3, 0, 7];
    let b = Builder::new("promote");
    let x = b.parameter(0, Shape::of::<i32>(&[4]), "x");
    let p = b.parameter(1, Shape::of::<bool>(&[4]), "p");
    let u = b.parameter(2, Shape::of::<u8>(&[4]), "u");
    let outs = [&x / 2.0, 2.5 - &x, &x * 0.5, &p + 1, &u * 1.5, &x * 2];
    let want = [
        ElementType::F32,
        ElementType::F32,
        ElementType::F32,
        ElementType::S32,
        ElementType::F32,
        ElementType::S32,
    ];
    for (o, w) in outs.iter().zip(want) {
        assert_eq!(o.element_type().ok(), Some(w), "{o:?}");
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let ps = [true, false, true, false];
    let us = [0u8, 1, 200, 255];
    let res = run(
        &module,
        &[&upload(&xs, &[4]), &upload(&ps, &[4]), &upload(&us, &[4])],
    );
    // The issue's exact case: s32 1 / 2.0 = f32 0.5.
    assert_eq!(fetch::<f32>(&res[0], &[4], "x / 2.0")[0], 0.5);
    assert_eq!(
        fetch::<f32>(&res[0], &[4], "x / 2.0"),
        map(&xs, |x| x as f32 / 2.0)
    );
    assert_eq!(
        fetch::<f32>(&res[1], &[4], "2.5 - x"),
        map(&xs, |x| 2.5 - x as f32)
    );
    assert_eq!(
        fetch::<f32>(&res[2], &[4], "x * 0.5"),
        map(&xs, |x| x as f32 * 0.5)
    );
    assert_eq!(
        fetch::<i32>(&res[3], &[4], "p + 1"),
        map(&ps, |p| p as i32 + 1)
    );
    assert_eq!(
        fetch::<f32>(&res[4], &[4], "u * 1.5"),
        map(&us, |u| u as f32 * 1.5)
    );
    assert_eq!(fetch::<i32>(&res[5], &[4], "x * 2"), map(&xs, |x| x * 2));
}

/// `select`/`where` with `pred[n]` against an `[n, n]` operand chooses per column
/// (numpy's trailing rule) where a JAX user under `vmap` means per row: a warning
/// names the line; the op is built (and runs) with numpy's meaning.
#[test]
fn select_with_a_vector_predicate_on_a_square_operand_warns() {
    let b = Builder::new("trap");
    let p = b.parameter(0, Shape::of::<bool>(&[3]), "p");
    let x = b.parameter(1, Shape::of::<f32>(&[3, 3]), "x");
    let zero = b.zeros(ElementType::F32, &[3, 3]);
    let line = line!() + 1;
    let per_column = b.select(&p, &x, &zero);
    let warnings = b.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert_eq!(w.op, "select");
    assert_eq!(
        w.location.map(|l| (l.file(), l.line())),
        Some((file!(), line))
    );
    assert!(w.message.contains("[3, 1]"), "{w}");
    assert!(w.to_string().contains("warning: select"), "{w}");
    // What the warning suggests: per row. Neither that nor a non-square operand,
    // a full predicate or a broadcast done by hand warns.
    let per_row = b.where_(&p.reshape(&[3, 1]), &x, &zero);
    let q = b.parameter(2, Shape::of::<f32>(&[2, 3]), "q");
    let _ = b.select(&p, &q, &b.zeros(ElementType::F32, &[2, 3]));
    let full = p.broadcast_to(&[3, 3]);
    let _ = b.select(&full, &x, &zero);
    assert_eq!(b.warnings().len(), 1, "{:?}", b.warnings());
    let module = b.build_tuple(&[&per_column, &per_row]).unwrap();
    assert_eq!(module.warnings().len(), 1);
    let xs: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let ps = [true, false, true];
    let res = run(
        &module,
        &[
            &upload(&ps, &[3]),
            &upload(&xs, &[3, 3]),
            &upload(&[0f32; 6], &[2, 3]),
        ],
    );
    let by_col: Vec<f32> = (0..9)
        .map(|i| if ps[i % 3] { xs[i] } else { 0.0 })
        .collect();
    let by_row: Vec<f32> = (0..9)
        .map(|i| if ps[i / 3] { xs[i] } else { 0.0 })
        .collect();
    assert_eq!(fetch::<f32>(&res[0], &[3, 3], "per column"), by_col);
    assert_eq!(fetch::<f32>(&res[1], &[3, 3], "per row"), by_row);
}

#[test]
fn s64_scalar_operand_keeps_full_precision() {
    let big: i64 = (1 << 53) + 1;
    let b = Builder::new("s64_scalar");
    let x = b.parameter(0, Shape::of::<i64>(&[2]), "x");
    let module = b.build_tuple(&[&(&x + big), &(big - &x)]).unwrap();
    let res = run(&module, &[&upload(&[0i64, 2], &[2])]);
    assert_eq!(fetch::<i64>(&res[0], &[2], "x + big"), [big, big + 2]);
    assert_eq!(fetch::<i64>(&res[1], &[2], "big - x"), [big, big - 2]);
}

// ---------------------------------------------------------------------------------
// Broadcasting.

/// Numpy broadcast reference: the value of `data` (dims `d`) at output index `idx`
/// of an array of dims `out`.
fn bcast_at(data: &[f32], d: &[i64], out: &[i64], idx: &[i64]) -> f32 {
    let off = out.len() - d.len();
    let mut flat = 0i64;
    for (k, dk) in d.iter().enumerate() {
        let i = if *dk == 1 { 0 } else { idx[off + k] };
        flat = flat * dk + i;
    }
    data[flat as usize]
}

fn for_each_index(dims: &[i64], mut f: impl FnMut(&[i64])) {
    let n: i64 = dims.iter().product();
    let mut idx = vec![0i64; dims.len()];
    for flat in 0..n {
        let mut r = flat;
        for k in (0..dims.len()).rev() {
            idx[k] = r % dims[k];
            r /= dims[k];
        }
        f(&idx);
    }
}

#[test]
fn numpy_broadcasting_in_binary_ops() {
    let mut rng = Rng(5);
    // (lhs dims, rhs dims, expected output dims)
    let cases: [(&[i64], &[i64], &[i64]); 6] = [
        (&[2, 3], &[3], &[2, 3]),
        (&[3], &[2, 3], &[2, 3]),
        (&[4, 1], &[1, 5], &[4, 5]),
        (&[], &[5], &[5]),
        (&[5], &[], &[5]),
        (&[2, 1, 4], &[3, 1], &[2, 3, 4]),
    ];
    let b = Builder::new("bcast");
    let mut data = Vec::new();
    let mut outs = Vec::new();
    for (i, (ld, rd, od)) in cases.iter().enumerate() {
        let l = b.parameter(2 * i, Shape::of::<f32>(ld), "l");
        let r = b.parameter(2 * i + 1, Shape::of::<f32>(rd), "r");
        // Subtraction and division expose a swapped operand order.
        let (s, q) = (&l - &r, &l / &r);
        assert_eq!(s.dims().unwrap(), od.to_vec(), "{ld:?} - {rd:?}");
        assert_eq!(q.dims().unwrap(), od.to_vec(), "{ld:?} / {rd:?}");
        outs.push(s);
        outs.push(q);
        let n = |d: &[i64]| d.iter().product::<i64>() as usize;
        data.push(rng.vec(n(ld), -4.0, 4.0));
        data.push(rng.vec(n(rd), 0.5, 4.0));
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let bufs: Vec<Buffer> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, (ld, rd, _))| [upload(&data[2 * i], ld), upload(&data[2 * i + 1], rd)])
        .collect();
    let res = run(&module, &bufs.iter().collect::<Vec<_>>());
    for (i, (ld, rd, od)) in cases.iter().enumerate() {
        let (mut ws, mut wq) = (Vec::new(), Vec::new());
        for_each_index(od, |idx| {
            let a = bcast_at(&data[2 * i], ld, od, idx);
            let c = bcast_at(&data[2 * i + 1], rd, od, idx);
            ws.push(a - c);
            wq.push(a / c);
        });
        assert_eq!(fetch::<f32>(&res[2 * i], od, "sub"), ws, "{ld:?} - {rd:?}");
        // XLA may divide by a broadcast operand as a multiplication by its reciprocal,
        // which is within an ulp or two of the quotient.
        assert_close(&fetch::<f32>(&res[2 * i + 1], od, "div"), &wq, 1e-6);
    }
}

// ---------------------------------------------------------------------------------
// Compare, select, relu, pred.

const DIRS: [Comparison; 6] = [
    Comparison::Eq,
    Comparison::Ne,
    Comparison::Lt,
    Comparison::Le,
    Comparison::Gt,
    Comparison::Ge,
];

fn cmp_ref<T: PartialOrd>(a: T, b: T, d: Comparison) -> bool {
    match d {
        Comparison::Eq => a == b,
        Comparison::Ne => a != b,
        Comparison::Lt => a < b,
        Comparison::Le => a <= b,
        Comparison::Gt => a > b,
        Comparison::Ge => a >= b,
    }
}

fn check_compare<T: NativeType + PartialOrd>(xs: &[T], ys: &[T]) {
    let n = xs.len() as i64;
    let b = Builder::new("compare");
    let x = b.parameter(0, Shape::of::<T>(&[n]), "x");
    let y = b.parameter(1, Shape::of::<T>(&[n]), "y");
    let outs: Vec<Op> = DIRS.iter().map(|d| x.compare(&y, *d)).collect();
    for o in &outs {
        assert_eq!(o.shape().ok(), Some(Shape::of::<bool>(&[n])));
    }
    let module = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let res = run(&module, &[&upload(xs, &[n]), &upload(ys, &[n])]);
    for (d, buf) in DIRS.iter().zip(&res) {
        let want = zip(xs, ys, |a, c| cmp_ref(a, c, *d));
        assert_eq!(
            fetch::<bool>(buf, &[n], d.hlo_name()),
            want,
            "{:?} {d:?} on {xs:?} vs {ys:?}",
            T::TYPE
        );
    }
}

#[test]
fn compare_f32_all_directions() {
    let nan = f32::NAN;
    check_compare::<f32>(
        &[
            1.0,
            2.0,
            -1.0,
            0.0,
            -0.0,
            nan,
            1.0,
            f32::INFINITY,
            -5.5,
            3.25,
        ],
        &[2.0, 2.0, -2.0, -0.0, 0.0, 1.0, nan, 1e30, -5.5, -3.25],
    );
}

#[test]
fn compare_s32_all_directions() {
    check_compare::<i32>(
        &[1, 2, -1, 0, i32::MIN, i32::MAX, -7, 3],
        &[2, 2, -2, 0, 1, -1, -7, -3],
    );
}

#[test]
fn compare_u32_all_directions_treats_large_values_as_large() {
    check_compare::<u32>(
        &[4_000_000_000, 1, u32::MAX, 0, 2_147_483_648, 5, 7],
        &[1, 4_000_000_000, 0, u32::MAX, 2_147_483_647, 5, 7],
    );
}

#[test]
fn select_broadcasts_predicate_and_branches() {
    let xs: Vec<f32> = vec![1.0, -2.0, 3.0, -4.0, 5.0, 0.0];
    let ts: Vec<f32> = vec![10.0, 20.0, 30.0];
    let b = Builder::new("select");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let t = b.parameter(1, Shape::of::<f32>(&[3]), "t");
    let flag = b.parameter(2, Shape::of::<bool>(&[]), "flag");
    let zero = b.constant(0.0f32);
    let p = x.compare(&zero, Comparison::Gt); // pred[2,3]
    let s1 = b.select(&p, &t, &b.constant(-1.0f32)); // [2,3] from [3] and []
    let s2 = b.select(&flag, &x, &t); // scalar predicate
    let row = b.constant_vec(&[true, false, true]);
    let s3 = b.select(&row, &x, &zero); // pred[3] against [2,3]
    for s in [&s1, &s2, &s3] {
        assert_eq!(s.shape().ok(), Some(Shape::of::<f32>(&[2, 3])));
    }
    let module = b.build_tuple(&[&s1, &s2, &s3]).unwrap();
    for flag_v in [true, false] {
        let res = run(
            &module,
            &[
                &upload(&xs, &[2, 3]),
                &upload(&ts, &[3]),
                &upload(&[flag_v], &[]),
            ],
        );
        let w1: Vec<f32> = (0..6)
            .map(|i| if xs[i] > 0.0 { ts[i % 3] } else { -1.0 })
            .collect();
        let w2: Vec<f32> = (0..6)
            .map(|i| if flag_v { xs[i] } else { ts[i % 3] })
            .collect();
        let w3: Vec<f32> = (0..6)
            .map(|i| if i % 3 != 1 { xs[i] } else { 0.0 })
            .collect();
        assert_eq!(fetch::<f32>(&res[0], &[2, 3], "select pred[2,3]"), w1);
        assert_eq!(
            fetch::<f32>(&res[1], &[2, 3], "select scalar pred"),
            w2,
            "flag {flag_v}"
        );
        assert_eq!(fetch::<f32>(&res[2], &[2, 3], "select pred[3]"), w3);
    }
}

#[test]
fn relu_f32_and_s32() {
    let xf: Vec<f32> = vec![-2.0, -0.5, 0.0, 0.5, 3.0];
    let xi: Vec<i32> = vec![-7, -1, 0, 1, 9];
    let b = Builder::new("relu");
    let f = b.parameter(0, Shape::of::<f32>(&[5]), "f");
    let i = b.parameter(1, Shape::of::<i32>(&[5]), "i");
    let module = b.build_tuple(&[&f.relu(), &i.relu()]).unwrap();
    let res = run(&module, &[&upload(&xf, &[5]), &upload(&xi, &[5])]);
    assert_eq!(
        fetch::<f32>(&res[0], &[5], "relu f32"),
        map(&xf, |x| x.max(0.0))
    );
    assert_eq!(
        fetch::<i32>(&res[1], &[5], "relu s32"),
        map(&xi, |x| x.max(0))
    );
}

#[test]
fn pred_buffers_round_trip() {
    let p: Vec<bool> = vec![true, false, true, true, false];
    let q: Vec<bool> = vec![true, true, false, true, false];
    // Upload and download without a program.
    let buf = upload(&p, &[5]);
    assert_eq!(buf.element_type().unwrap(), ElementType::Pred);
    assert_eq!(buf.to_vec::<bool>().unwrap(), p);

    let b = Builder::new("pred");
    let pp = b.parameter(0, Shape::of::<bool>(&[5]), "p");
    let pq = b.parameter(1, Shape::of::<bool>(&[5]), "q");
    let xor = pp.compare(&pq, Comparison::Ne);
    let eq = pp.compare(&pq, Comparison::Eq);
    let chosen = b.select(&pp, &b.constant(1.0f32), &b.constant(0.0f32));
    let module = b.build_tuple(&[&pp, &xor, &eq, &chosen]).unwrap();
    let res = run(&module, &[&buf, &upload(&q, &[5])]);
    assert_eq!(fetch::<bool>(&res[0], &[5], "p"), p);
    assert_eq!(
        fetch::<bool>(&res[1], &[5], "p != q"),
        zip(&p, &q, |a, b| a != b)
    );
    assert_eq!(
        fetch::<bool>(&res[2], &[5], "p == q"),
        zip(&p, &q, |a, b| a == b)
    );
    assert_eq!(
        fetch::<f32>(&res[3], &[5], "select"),
        map(&p, |a| if a { 1.0 } else { 0.0 })
    );
}

#[test]
fn abs_and_sign_of_unsigned_are_rejected_when_built() {
    // XLA accepts abs and sign only on signed, float and complex types; the builder
    // should say so at the offending line instead of the plugin at compile time.
    for (name, op) in [
        ("abs", (|x: &Op| x.abs()) as fn(&Op) -> Op),
        ("sign", |x| x.sign()),
    ] {
        let b = Builder::new("unsigned_unary");
        let x = b.parameter(0, Shape::of::<u32>(&[3]), "x");
        match b.build(&op(&x)) {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(name) && msg.contains("u32[3]"), "{msg}");
            }
            Ok(m) => {
                let compiled = client().compile(&m).map(|_| ());
                panic!("{name} of u32 built; compiling it gives {compiled:?}");
            }
        }
    }
    // Negation of unsigned values is accepted by XLA (it wraps).
    let b = Builder::new("unsigned_neg");
    let x = b.parameter(0, Shape::of::<u32>(&[3]), "x");
    let m = b.build(&x.neg()).unwrap();
    let xs = [0u32, 1, 4_000_000_000];
    assert_eq!(
        run1::<u32>(&m, &[&upload(&xs, &[3])]),
        map(&xs, u32::wrapping_neg)
    );
}

#[test]
fn numbers_at_the_edge_of_64_bit_types_are_rejected_not_saturated() {
    // 2^63 and 2^64 are exactly i64::MAX as f64 and u64::MAX as f64: a range check in
    // f64 let them through and they saturated.
    for (ty, v) in [
        (Shape::of::<i64>(&[2]), 2f64.powi(63)),
        (Shape::of::<u64>(&[2]), 2f64.powi(64)),
        (Shape::of::<i64>(&[2]), -9.3e18),
    ] {
        for left in [false, true] {
            // As an integer array's constant (what the operators made before a
            // float number promoted the array to f32, as JAX does).
            let b = Builder::new("edge");
            let x = b.parameter(0, ty.clone(), "x");
            let c = b.constant_of_type(ty.element_type().unwrap(), v);
            let y = if left { &c + &x } else { &x + &c };
            let e = b.build(&y).unwrap_err().to_string();
            assert!(e.contains("does not fit"), "{ty} {v}: {e}");
        }
        let b = Builder::new("edge_const");
        let c = b.constant_of_type(ty.element_type().unwrap(), v);
        assert!(b.build(&c).is_err(), "{ty} {v}");
    }
    // The extremes themselves are exact.
    let b = Builder::new("extremes");
    let x = b.parameter(0, Shape::of::<i64>(&[2]), "x");
    let zero = b.constant(0i64);
    let y = (&x * &zero) + i64::MIN;
    let m = b.build(&y).unwrap();
    assert_eq!(
        run1::<i64>(&m, &[&upload(&[1i64, 2], &[2])]),
        vec![i64::MIN, i64::MIN]
    );
}

/// `maximum`/`minimum` as JAX computes them (values from jax 0.10.2 on CPU:
/// `jnp.maximum`, `jnp.minimum`, `jax.nn.relu`, `jnp.max`): a NaN on either side
/// gives NaN, `max(-0, +0)` is `+0` and `min(+0, -0)` is `-0`. This is the default
/// since the compile options carry XLA's debug defaults with fast min/max off;
/// `fast_min_max(true)` brings back the form that returns the other operand.
#[test]
fn max_and_min_propagate_nan_and_order_signed_zeros_as_jax() {
    let b = Builder::new("minmax");
    let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[6]), "y");
    let m = b.tuple(&[
        &x.max(&y),
        &x.min(&y),
        &x.relu(),
        &x.reduce_max(&[0]),
        &x.reduce_min(&[0]),
    ]);
    let module = b.build(&m).unwrap();
    let xs = upload(&[0.0f32, f32::NAN, -0.0, 0.0, 1.0, -1.0], &[6]);
    let ys = upload(
        &[f32::NAN, 0.0, 0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY],
        &[6],
    );
    let out = run(&module, &[&xs, &ys]);
    let bits = |v: Vec<f32>| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<_>>()
    };
    let nan = f32::NAN;
    assert_eq!(
        bits(fetch(&out[0], &[6], "max")),
        bits(vec![nan, nan, 0.0, 0.0, f32::INFINITY, -1.0])
    );
    assert_eq!(
        bits(fetch(&out[1], &[6], "min")),
        bits(vec![nan, nan, -0.0, -0.0, 1.0, f32::NEG_INFINITY])
    );
    assert_eq!(
        bits(fetch(&out[2], &[6], "relu")),
        bits(vec![0.0, nan, 0.0, 0.0, 1.0, 0.0])
    );
    assert!(fetch::<f32>(&out[3], &[], "reduce_max")[0].is_nan());
    assert!(fetch::<f32>(&out[4], &[], "reduce_min")[0].is_nan());

    // The fast form, asked for by name, returns the second operand on a NaN.
    let fast = client()
        .compile_with(
            &module,
            &xlaclient::CompileOptions::new().fast_min_max(true),
        )
        .unwrap();
    let out = fast.execute(&[&xs, &ys]).unwrap();
    let got: Vec<f32> = fetch(&out[0], &[6], "fast max");
    assert_eq!(got[0], 0.0, "fast max(0, NaN) is the non-NaN operand");
}

// ---------------------------------------------------------------------------------
// Clamp.

/// `maximum` as XLA computes it with fast min/max off (the default): NaN on either
/// side gives NaN, and +0 is above -0.
fn max_ref(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_positive() { a } else { b }
    } else {
        a.max(b)
    }
}

/// `minimum` likewise: NaN on either side gives NaN, and -0 is below +0.
fn min_ref(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { a } else { b }
    } else {
        a.min(b)
    }
}

/// XLA's clamp: `min(max(x, lo), hi)`.
fn clamp_ref(lo: f32, x: f32, hi: f32) -> f32 {
    min_ref(max_ref(x, lo), hi)
}

#[test]
fn clamp_f32_with_array_and_broadcast_bounds_nan_and_signed_zeros() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    // Each column one case: inside, below, above, NaN in x / lo / hi, signed
    // zeros on every side, lo > hi, infinite bounds.
    let x = [
        0.5f32, -3.0, 7.0, nan, 1.0, 1.0, -0.0, 0.0, -0.0, 5.0, -1e30, 1e30,
    ];
    let lo = [
        0.0f32, -1.0, -1.0, 0.0, nan, 0.0, 0.0, -0.0, -0.0, 3.0, -inf, -inf,
    ];
    let hi = [
        1.0f32, 1.0, 1.0, 1.0, 2.0, nan, 1.0, 1.0, -0.0, 2.0, inf, 2.0,
    ];
    let n = x.len() as i64;
    let b = Builder::new("clamp");
    let px = b.parameter(0, Shape::of::<f32>(&[n]), "x");
    let plo = b.parameter(1, Shape::of::<f32>(&[n]), "lo");
    let phi = b.parameter(2, Shape::of::<f32>(&[n]), "hi");
    // Bounds broadcast: a row of bounds per column over a [2, 3] operand; scalars.
    let m2 = b.parameter(3, Shape::of::<f32>(&[2, 3]), "m2");
    let row_lo = b.parameter(4, Shape::of::<f32>(&[3]), "row_lo");
    let s_hi = b.constant(0.25f32);
    let m = b
        .build_tuple(&[
            &px.clamp(&plo, &phi),
            &m2.clamp(&row_lo, &s_hi),
            &px.clip(-0.5, 0.5),
        ])
        .unwrap();
    let m2v = [-1.0f32, 0.0, 1.0, 0.1, nan, -0.0];
    let rlo = [-0.5f32, 0.2, 0.0];
    let r = run(
        &m,
        &[
            &upload(&x, &[n]),
            &upload(&lo, &[n]),
            &upload(&hi, &[n]),
            &upload(&m2v, &[2, 3]),
            &upload(&rlo, &[3]),
        ],
    );
    let want: Vec<f32> = (0..x.len())
        .map(|i| clamp_ref(lo[i], x[i], hi[i]))
        .collect();
    assert_bits(&fetch::<f32>(&r[0], &[n], "clamp"), &want, &x, "clamp");
    let want: Vec<f32> = (0..6)
        .map(|i| clamp_ref(rlo[i % 3], m2v[i], 0.25))
        .collect();
    assert_bits(
        &fetch::<f32>(&r[1], &[2, 3], "broadcast clamp"),
        &want,
        &m2v,
        "broadcast clamp",
    );
    let want: Vec<f32> = map(&x, |v| clamp_ref(-0.5, v, 0.5));
    assert_bits(&fetch::<f32>(&r[2], &[n], "clip"), &want, &x, "clip");
}

#[test]
fn clamp_of_integers_and_pred() {
    let xs = [i32::MIN, -7, -1, 0, 3, 9, i32::MAX];
    let us = [0u8, 5, 100, 200, 255];
    let ps = [false, true, false, true];
    let b = Builder::new("clamp_int");
    let x = b.parameter(0, Shape::of::<i32>(&[7]), "x");
    let u = b.parameter(1, Shape::of::<u8>(&[5]), "u");
    let p = b.parameter(2, Shape::of::<bool>(&[4]), "p");
    let plo = b.parameter(3, Shape::of::<bool>(&[4]), "plo");
    let m = b
        .build_tuple(&[
            &x.clip(-2, 5),
            &x.clamp(&b.constant(i32::MIN), &b.constant(i32::MAX)),
            &u.clip(5u8, 200u8),
            // lo > hi: the result is hi.
            &x.clip(4, -4),
            &p.clamp(&plo, &b.constant(true)),
        ])
        .unwrap();
    let plos = [false, false, true, true];
    let r = run(
        &m,
        &[
            &upload(&xs, &[7]),
            &upload(&us, &[5]),
            &upload(&ps, &[4]),
            &upload(&plos, &[4]),
        ],
    );
    assert_eq!(
        fetch::<i32>(&r[0], &[7], "clip"),
        map(&xs, |v| v.clamp(-2, 5))
    );
    assert_eq!(fetch::<i32>(&r[1], &[7], "clamp to the type's range"), xs);
    assert_eq!(
        fetch::<u8>(&r[2], &[5], "u8"),
        map(&us, |v| v.clamp(5, 200))
    );
    assert_eq!(fetch::<i32>(&r[3], &[7], "lo > hi"), vec![-4; 7]);
    // pred orders false < true: clamp(lo, p, true) = p or lo.
    let want: Vec<bool> = (0..4).map(|i| ps[i] || plos[i]).collect();
    assert_eq!(fetch::<bool>(&r[4], &[4], "pred"), want);
}

#[test]
fn clamp_errors_name_the_op_the_shapes_and_the_line() {
    let b = Builder::new("clamp_bad");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let lo_i = b.parameter(1, Shape::of::<i32>(&[]), "lo");
    let hi = b.constant(1f32);
    let (y, line) = (x.clamp(&lo_i, &hi), line!());
    let e = b.build(&y).unwrap_err().to_string();
    assert!(e.contains("`clamp` on (s32[], f32[2,3], f32[])"), "{e}");
    assert!(e.contains(&format!("ops_elementwise.rs:{line}:")), "{e}");
    assert!(e.contains("one element type"), "{e}");

    let b = Builder::new("clamp_dims");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let lo = b.parameter(1, Shape::of::<f32>(&[4]), "lo");
    let e = b.build(&x.clamp(&lo, &lo)).unwrap_err().to_string();
    assert!(e.contains("`clamp` on (f32[4], f32[2,3], f32[4])"), "{e}");
    assert!(e.contains("cannot broadcast"), "{e}");

    // A Rust number the element type cannot hold.
    let b = Builder::new("clip_bad");
    let x = b.parameter(0, Shape::of::<u8>(&[3]), "x");
    let e = b.build(&x.clip(-1, 5)).unwrap_err().to_string();
    assert!(e.contains("does not fit element type u8"), "{e}");

    let b = Builder::new("clamp_complex");
    let c = b
        .parameter(0, Shape::of::<f32>(&[2]), "c")
        .convert(ElementType::C64);
    let e = b.build(&c.clamp(&c, &c)).unwrap_err().to_string();
    assert!(e.contains("`clamp`") && e.contains("ordered"), "{e}");
}

#[test]
fn the_new_unary_ops_and_clamp_on_scalars_and_empty_arrays() {
    let b = Builder::new("small");
    let s = b.parameter(0, Shape::of::<f32>(&[]), "s");
    let e = b.parameter(1, Shape::of::<f32>(&[0, 3]), "e");
    let ops = |x: &Op| {
        vec![
            x.round(),
            x.round_even(),
            x.cbrt(),
            x.tan(),
            x.erf(),
            x.is_finite(),
            x.clamp(&b.constant(-1f32), &b.constant(1f32)),
        ]
    };
    let mut outs = ops(&s);
    outs.extend(ops(&e));
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let r = run(
        &m,
        &[&upload(&[-2.5f32], &[]), &upload::<f32>(&[], &[0, 3])],
    );
    let v = -2.5f32;
    let want = [
        v.round(),
        v.round_ties_even(),
        v.cbrt(),
        f64::from(v).tan() as f32,
        erf_ref(f64::from(v)) as f32,
    ];
    for (i, w) in want.iter().enumerate() {
        assert_close(&fetch::<f32>(&r[i], &[], "scalar"), &[*w], 1e-6);
    }
    assert_eq!(fetch::<bool>(&r[5], &[], "is_finite"), vec![true]);
    assert_eq!(fetch::<f32>(&r[6], &[], "clamp"), vec![-1.0]);
    for (i, buf) in r[7..].iter().enumerate() {
        if i == 5 {
            assert!(fetch::<bool>(buf, &[0, 3], "empty is_finite").is_empty());
        } else {
            assert!(fetch::<f32>(buf, &[0, 3], "empty").is_empty());
        }
    }
}

#[test]
fn comparisons_take_rust_numbers_with_jax_promotion() {
    use xlaclient::{Builder, Shape};
    let b = Builder::new("cmp");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[4]), "i");
    let outs = [
        x.gt(2.4),
        x.ge(&x),
        x.lt(0),
        x.le(2.0),
        x.equal(-1.0),
        x.not_equal(2.0),
        // An integer array against a fractional number compares as f32 (JAX's
        // promotion), not against 2 (the number truncated).
        i.gt(2.4),
        i.equal(2),
    ];
    let refs: Vec<&xlaclient::Op> = outs.iter().collect();
    let m = b.build_tuple(&refs).unwrap();
    let xs = [-1.0f32, 2.0, 2.5, 3.0];
    let is = [1i32, 2, 3, 4];
    let out = run(&m, &[&upload(&xs, &[4]), &upload(&is, &[4])]);
    let got: Vec<Vec<bool>> = out.iter().map(|o| o.to_vec::<bool>().unwrap()).collect();
    let f = |p: fn(f32) -> bool| xs.iter().map(|v| p(*v)).collect::<Vec<bool>>();
    assert_eq!(got[0], f(|v| v > 2.4));
    assert_eq!(got[1], vec![true; 4]);
    assert_eq!(got[2], f(|v| v < 0.0));
    assert_eq!(got[3], f(|v| v <= 2.0));
    assert_eq!(got[4], f(|v| v == -1.0));
    assert_eq!(got[5], f(|v| v != 2.0));
    assert_eq!(got[6], vec![false, false, true, true]);
    assert_eq!(got[7], vec![false, true, false, false]);
}

#[test]
fn complex_numbers_through_real_imag_and_complex() {
    // z = a + ib, w = b + ia: the parts of z, w, z·w and z/w against plain Rust,
    // in c64 (from f32) and c128 (from f64).
    let a = [1.5f64, -2.0, 0.25, 3.0];
    let bv = [0.5f64, 4.0, -1.0, 0.0];
    let b = Builder::new("complex");
    let x = b.parameter(0, Shape::of::<f64>(&[4]), "a");
    let y = b.parameter(1, Shape::of::<f64>(&[4]), "b");
    let z = x.complex(&y);
    let w = y.complex(&x);
    let (zw, zq) = (z.mul(&w), z.div(&w));
    let z32 = x
        .convert(ElementType::F32)
        .complex(&y.convert(ElementType::F32));
    assert_eq!(z32.element_type().unwrap(), ElementType::C64);
    assert_eq!(z.element_type().unwrap(), ElementType::C128);
    assert_eq!(zw.real().element_type().unwrap(), ElementType::F64);
    let outs = [
        z.real(),
        z.imag(),
        zw.real(),
        zw.imag(),
        zq.real(),
        zq.imag(),
        z32.imag().convert(ElementType::F64),
    ];
    let refs: Vec<&Op> = outs.iter().collect();
    let m = b.build_tuple(&refs).unwrap();
    let got = run(&m, &[&upload(&a, &[4]), &upload(&bv, &[4])]);
    let get = |k: usize| got[k].to_vec::<f64>().unwrap();
    let mut want: Vec<Vec<f64>> = vec![
        a.to_vec(),
        bv.to_vec(),
        vec![],
        vec![],
        vec![],
        vec![],
        bv.to_vec(),
    ];
    for i in 0..4 {
        let (p, q) = (a[i], bv[i]);
        // (p + iq)(q + ip) = pq - qp + i(p² + q²)
        want[2].push(p * q - q * p);
        want[3].push(p * p + q * q);
        // (p + iq)/(q + ip) = (p + iq)(q - ip)/(q² + p²) = (2pq + i(q² - p²))/(p² + q²)
        let d = p * p + q * q;
        want[4].push(2.0 * p * q / d);
        want[5].push((q * q - p * p) / d);
    }
    for (k, w) in want.iter().enumerate() {
        assert_close64(&get(k), w, 1e-12, &format!("output {k}"));
    }
    // Types XLA has no complex for are refused, naming the op.
    let h = b.parameter(2, Shape::array(ElementType::F16, &[4]), "h");
    let e = h.complex(&h).shape().unwrap_err().to_string();
    assert!(e.contains("complex") && e.contains("f32 or f64"), "{e}");
    let i = b.parameter(3, Shape::of::<i32>(&[4]), "i");
    assert!(i.real().shape().is_err());
}
