//! Control flow at its edges, under `grad`: zero-trip `fori_loop`s and bounded
//! `while`s whose bodies hold a `cond`, scans over zero-length `xs` and scans whose
//! per-step output has a size-0 dimension, conditionals nested in conditionals
//! (in scans, with loops inside), and all of these inside `cond` branches. JAX
//! builds every one of these programs; so must the crate.
//!
//! Forward values are checked against plain Rust; gradients against central finite
//! differences in f64 (`tests/common/fd.rs`, tolerance 1e-6 absolute plus
//! relative) and, where the maths gives it directly (a loop that runs no step is
//! the identity), against that closed form.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use fd::{check, check_at};
use xlaclient::{Builder, Comparison, ElementType, Op, Shape};

fn f64s(d: &[i64]) -> Shape {
    Shape::of::<f64>(d)
}

/// A body step that holds a `cond`: `sin(v * w)` where `Σ v > 0`, else `v * w + 0.5`.
fn branchy(v: &Op, w: &Op) -> Op {
    let b = v.builder();
    let up = v
        .reduce_sum(&[0])
        .compare(&b.constant(0f64), Comparison::Gt);
    b.cond(
        &up,
        (v.clone(), w.clone()),
        |(v, w)| (&v * &w).sin(),
        |(v, w)| &(&v * &w) + 0.5,
    )
}

/// The same step in plain Rust.
fn branchy_ref(v: &[f64], w: &[f64]) -> Vec<f64> {
    let up = v.iter().sum::<f64>() > 0.0;
    v.iter()
        .zip(w)
        .map(|(a, b)| if up { (a * b).sin() } else { a * b + 0.5 })
        .collect()
}

/// The gradient of `Σ f(x, w) ⊙ c` for a fixed `c`, with the loss: run on `x`, `w`
/// (both `f64[n]`). Returns (value of f, d/dx, d/dw).
fn value_and_grads(
    n: i64,
    x: &[f64],
    w: &[f64],
    c: &[f64],
    f: impl Fn(&Op, &Op) -> Op,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let b = Builder::new("vg");
    let xp = b.parameter(0, f64s(&[n]), "x");
    let wp = b.parameter(1, f64s(&[n]), "w");
    let out = f(&xp, &wp);
    let loss = (&out * &b.constant_vec(c)).reduce_sum(&[0]);
    let (gx, gw) = b.grad(&loss, &(xp.clone(), wp.clone()));
    let m = b.build_tuple(&[&out, &gx, &gw]).unwrap();
    let outs = run(&m, &[&upload(x, &[n]), &upload(w, &[n])]);
    (
        outs[0].to_vec().unwrap(),
        outs[1].to_vec().unwrap(),
        outs[2].to_vec().unwrap(),
    )
}

// ---------------------------------------------------------------------------------
// Zero-trip loops

#[test]
fn zero_trip_fori_loops_with_a_cond_are_the_identity_under_grad() {
    let (x, w, c) = ([0.3, -0.7, 1.1], [0.9, 1.3, -0.4], [0.5, -2.0, 1.5]);
    for (lo, hi) in [(2, 2), (2, 1), (5, -3)] {
        // At top level.
        let (v, gx, gw) = value_and_grads(3, &x, &w, &c, |x, w| {
            x.builder()
                .fori_loop(lo, hi, x.clone(), |_, v| branchy(&v, w))
        });
        assert_eq!(v, x.to_vec(), "fori({lo}, {hi}) runs no step");
        assert_eq!(gx, c.to_vec(), "fori({lo}, {hi}): d/dx is the identity");
        assert_eq!(gw, vec![0.0; 3], "fori({lo}, {hi}): w is never used");
        // Inside a cond's branch (both branches loop zero times).
        let (v, gx, gw) = value_and_grads(3, &x, &w, &c, |x, w| {
            let b = x.builder();
            let p = x
                .reduce_sum(&[0])
                .compare(&b.constant(0f64), Comparison::Gt);
            b.cond(
                &p,
                (x.clone(), w.clone()),
                |(x, w)| {
                    x.builder()
                        .fori_loop(lo, hi, x.clone(), |_, v| branchy(&v, &w))
                },
                |(x, w)| {
                    let r = x
                        .builder()
                        .fori_loop(lo, hi, x.clone(), |_, v| branchy(&v, &w));
                    &r * 2.0
                },
            )
        });
        // Σx = 0.7 > 0: the first branch, the identity.
        assert_eq!(v, x.to_vec());
        assert_eq!(gx, c.to_vec());
        assert_eq!(gw, vec![0.0; 3]);
    }
    // And against finite differences, with a step after the loop that uses both.
    check("fori_zero_trip", &[&[3], &[3]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let r = b.fori_loop(2, 2, p[0].clone(), |_, v| branchy(&v, &p[1]));
        (&r * &p[1]).sin()
    });
}

#[test]
fn a_bounded_while_whose_body_holds_a_cond_has_a_gradient() {
    // Runs while Σv² < 4, at most `bound` steps; the step holds a cond.
    let run_ref = |x: &[f64], w: &[f64], bound: i64| {
        let mut v = x.to_vec();
        let mut k = 0;
        while k < bound && v.iter().map(|a| a * a).sum::<f64>() < 4.0 {
            v = branchy_ref(&v, w).iter().map(|a| a * 1.7).collect();
            k += 1;
        }
        v
    };
    let build = |x: &Op, w: &Op, bound: i64| {
        x.builder().while_loop_bounded(
            x.clone(),
            bound,
            |v| {
                (v * v)
                    .reduce_sum(&[0])
                    .compare(&v.builder().constant(4f64), Comparison::Lt)
            },
            |v| &branchy(&v, w) * 1.7,
        )
    };
    let (x, w, c) = ([0.3, -0.2, 0.4], [1.2, 1.1, 0.9], [1.0, -1.0, 0.5]);
    for bound in [0, 1, 3, 50] {
        let (v, gx, gw) = value_and_grads(3, &x, &w, &c, |x, w| build(x, w, bound));
        let want = run_ref(&x, &w, bound);
        for (g, r) in v.iter().zip(&want) {
            assert!((g - r).abs() < 1e-12, "bound {bound}: {v:?} vs {want:?}");
        }
        if bound == 0 {
            assert_eq!(gx, c.to_vec());
            assert_eq!(gw, vec![0.0; 3]);
        }
        check_at(
            &format!("bounded_cond_{bound}"),
            &[&[3], &[3]],
            &[x.to_vec(), w.to_vec()],
            |p| build(&p[0], &p[1], bound),
        );
    }
    // A condition false from the start: zero steps taken, under a bound of 10.
    let (v, gx, _) = value_and_grads(3, &[3.0, 0.0, 0.0], &w, &c, |x, w| build(x, w, 10));
    assert_eq!(v, vec![3.0, 0.0, 0.0]);
    assert_eq!(gx, c.to_vec());
}

// ---------------------------------------------------------------------------------
// Zero lengths

#[test]
fn a_scan_over_zero_length_xs_returns_its_init_and_empty_ys() {
    let b = Builder::new("scan0");
    let h = b.parameter(0, f64s(&[3]), "h");
    let xs = b.parameter(1, f64s(&[0, 3]), "xs");
    let (c, ys) = b.scan(h.clone(), xs.clone(), |h, x| {
        let h2 = (&h + &x).sin();
        (h2.clone(), &h2 * 2.0)
    });
    assert_eq!(ys.dims().unwrap(), vec![0, 3]);
    let loss = (&c * &c).reduce_sum(&[0]);
    let (gh, gxs) = b.grad(&loss, &(h.clone(), xs.clone()));
    assert_eq!(gxs.dims().unwrap(), vec![0, 3]);
    let m = b.build_tuple(&[&c, &ys, &gh, &gxs]).unwrap();
    let h0 = [0.25, -1.5, 2.0];
    let outs = run(&m, &[&upload(&h0, &[3]), &upload::<f64>(&[], &[0, 3])]);
    assert_eq!(outs[0].to_vec::<f64>().unwrap(), h0.to_vec());
    assert!(outs[1].to_vec::<f64>().unwrap().is_empty());
    // d Σc²/dh = 2h: the carry's cotangent passes straight through.
    let want: Vec<f64> = h0.iter().map(|v| 2.0 * v).collect();
    assert_eq!(outs[2].to_vec::<f64>().unwrap(), want);
    assert!(outs[3].to_vec::<f64>().unwrap().is_empty());
    // With `length(0)` and no xs, reversed, unrolled, checkpointed: the same.
    for opts in [
        xlaclient::ScanOptions::new().length(0),
        xlaclient::ScanOptions::new()
            .length(0)
            .reverse(true)
            .unroll(3),
        xlaclient::ScanOptions::new().length(0).checkpoint(true),
    ] {
        check(&format!("scan_len0_{opts:?}"), &[&[3]], -1.0, 1.0, |p| {
            let b = p[0].builder();
            let (c, ys) = b.scan_with(p[0].clone(), (), &opts, |h, ()| (h.sin(), h.cos()));
            assert_eq!(ys.dims().unwrap(), vec![0, 3]);
            &c * 3.0
        });
    }
    check("scan_xs0", &[&[2], &[0, 2]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let (c, _) = b.scan(p[0].clone(), p[1].clone(), |h, x| {
            let h2 = &(&h * &x) + 1.0;
            (h2.clone(), h2)
        });
        c.exp()
    });
}

#[test]
fn a_scan_whose_step_output_has_a_size_0_dimension() {
    // y has shape [0] (and [2, 0]) each step; the carry is a running product.
    let b = Builder::new("scan_y0");
    let h = b.parameter(0, f64s(&[2]), "h");
    let xs = b.parameter(1, f64s(&[4, 2]), "xs");
    let (c, (e1, e2)) = b.scan(h.clone(), xs.clone(), |h, x| {
        let bb = h.builder();
        let e1 = h.slice(&[0], &[0], &[1]);
        let e2 = bb.zeros(ElementType::F64, &[2, 0]);
        (&(&h * &x) + 0.5, (e1, e2))
    });
    assert_eq!(e1.dims().unwrap(), vec![4, 0]);
    assert_eq!(e2.dims().unwrap(), vec![4, 2, 0]);
    let loss = c.reduce_sum(&[0]);
    let (gh, gx) = b.grad(&loss, &(h.clone(), xs.clone()));
    let m = b.build_tuple(&[&c, &e1, &e2, &gh, &gx]).unwrap();
    let (h0, x0) = ([0.7, -0.3], [1.1, 0.9, -0.5, 1.3, 0.8, 0.6, 1.2, -1.0]);
    let outs = run(&m, &[&upload(&h0, &[2]), &upload(&x0, &[4, 2])]);
    let mut want = h0.to_vec();
    for t in 0..4 {
        for j in 0..2 {
            want[j] = want[j] * x0[2 * t + j] + 0.5;
        }
    }
    let got: Vec<f64> = outs[0].to_vec().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    assert!(outs[1].to_vec::<f64>().unwrap().is_empty());
    assert!(outs[2].to_vec::<f64>().unwrap().is_empty());
    // d c/d h = Π x over the steps.
    for j in 0..2 {
        let prod: f64 = (0..4).map(|t| x0[2 * t + j]).product();
        let g: Vec<f64> = outs[3].to_vec().unwrap();
        assert!((g[j] - prod).abs() < 1e-12);
    }
    check("scan_y_size0", &[&[2], &[4, 2]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let (c, ys) = b.scan(p[0].clone(), p[1].clone(), |h, x| {
            let bb = h.builder();
            let empty = bb.zeros(ElementType::F64, &[0, 3]);
            ((&h * &x).tanh(), (empty, h.clone()))
        });
        b.concatenate(&[&c, &ys.1.reshape(&[8])], 0)
    });
    // A carry element with a size-0 dimension, through a fori_loop with a cond.
    check("carry_size0", &[&[2]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let init = (p[0].clone(), b.zeros(ElementType::F64, &[0]));
        let (v, e) = b.fori_loop(0, 3, init, |_, (v, e)| {
            let w = v.builder().constant_vec(&[1.1f64, 0.8]);
            (branchy(&v, &w), &e * 2.0)
        });
        b.concatenate(&[&v, &e], 0)
    });
}

// ---------------------------------------------------------------------------------
// Nested bodies under grad

#[test]
fn grad_of_a_cond_in_a_cond() {
    // The inner cond is in the outer's first branch, both use outside values.
    let nested = |x: &Op, w: &Op| {
        let b = x.builder();
        let p = x
            .reduce_sum(&[0])
            .compare(&b.constant(0f64), Comparison::Gt);
        let y = b.cond(
            &p,
            x.clone(),
            |x| {
                let bb = x.builder();
                let q = x
                    .reduce_max(&[0])
                    .compare(&bb.constant(0.5f64), Comparison::Gt);
                let inner = bb.cond(&q, x.clone(), |x| (&x * w).sin(), |x| &x * &x);
                &inner + &x.exp()
            },
            |x| &x * w,
        );
        &y * &x.cos()
    };
    for (name, inputs) in [
        ("cond_cond_tt", [vec![0.9, 0.2, -0.1], vec![0.4, -0.8, 1.3]]),
        ("cond_cond_tf", [vec![0.3, 0.2, -0.1], vec![0.4, -0.8, 1.3]]),
        ("cond_cond_f", [vec![-0.9, 0.2, -0.1], vec![0.4, -0.8, 1.3]]),
    ] {
        check_at(name, &[&[3], &[3]], &inputs, |p| nested(&p[0], &p[1]));
    }
    // In a scan, with other work around it (the "larger program").
    for (name, lo) in [("cond_cond_scan_a", -1.0), ("cond_cond_scan_b", 0.1)] {
        check(name, &[&[2], &[4, 2], &[2]], lo, 1.0, |p| {
            let b = p[0].builder();
            let w = &p[2];
            let pre = (&p[0] * w).tanh();
            let (h, ys) = b.scan(pre, p[1].clone(), |h, x| {
                let h2 = nested(&(&h + &x), w);
                (h2.clone(), &h2 * &x)
            });
            let post = b.cond(
                &h.reduce_sum(&[0])
                    .compare(&b.constant(0f64), Comparison::Lt),
                h.clone(),
                |h| h.exp(),
                |h| nested(&h, w),
            );
            b.concatenate(&[&post, &ys.reshape(&[8])], 0)
        });
    }
}

#[test]
fn grad_of_a_switch_with_a_fori_loop_inside() {
    for k in [-1i32, 0, 1, 2, 7] {
        check(&format!("switch_fori_{k}"), &[&[2], &[2]], -1.0, 1.0, |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            b.switch(
                &b.constant(k),
                (x.clone(), w.clone()),
                Box::new(|(x, w): (Op, Op)| {
                    x.builder()
                        .fori_loop(0, 3, x.clone(), |_, v| branchy(&v, &w))
                }),
                vec![
                    Box::new(|(x, w): (Op, Op)| {
                        x.builder()
                            .fori_loop(1, 1, x.clone(), |_, v| branchy(&v, &w))
                    }),
                    Box::new(|(x, w): (Op, Op)| {
                        let (c, ys) = x.builder().scan(x.clone(), w.reshape(&[2, 1]), |h, wi| {
                            let h2 = branchy(&h, &wi.broadcast_to(&[2]));
                            (h2.clone(), h2)
                        });
                        &c + &ys.reduce_sum(&[0])
                    }),
                ],
            )
        });
    }
}

#[test]
fn zero_trips_and_zero_lengths_inside_cond_branches() {
    for (name, lo) in [("branch_t", 0.1), ("branch_f", -1.0)] {
        check(
            name,
            &[&[3], &[3]],
            lo,
            if lo > 0.0 { 1.0 } else { -0.1 },
            |p| {
                let (x, w) = (&p[0], &p[1]);
                let b = x.builder();
                let pos = x
                    .reduce_sum(&[0])
                    .compare(&b.constant(0f64), Comparison::Gt);
                b.cond(
                    &pos,
                    (x.clone(), w.clone()),
                    |(x, w)| {
                        let bb = x.builder();
                        // A scan over zero rows, then a zero-trip bounded while.
                        let xs = bb.zeros(ElementType::F64, &[0, 3]);
                        let (c, _) = bb.scan(x.clone(), xs, |h, r| {
                            let h2 = branchy(&(&h + &r), &w);
                            (h2.clone(), h2)
                        });
                        let c = bb.while_loop_bounded(
                            c,
                            0,
                            |v| {
                                v.reduce_sum(&[0])
                                    .compare(&v.builder().constant(1e9f64), Comparison::Lt)
                            },
                            |v| branchy(&v, &w),
                        );
                        &c * &w
                    },
                    |(x, w)| {
                        let bb = x.builder();
                        let r = bb.fori_loop(3, 0, x.clone(), |_, v| branchy(&v, &w));
                        &r.sin() + &w
                    },
                )
            },
        );
    }
}

#[test]
fn a_failed_gradient_inside_nested_conds_is_an_error_not_a_panic() {
    // The inner-most gradient fails (a `while` with no trip count); its failed
    // cotangent reaches the gradient of a cond in a cond's branch, which used to
    // import the branch's values into the top computation and panic ("`from`
    // encloses `to`"). Now the build fails with the first error: the `while`'s.
    let b = Builder::new("nested_fail");
    let x = b.parameter(0, f64s(&[3]), "x");
    let w = b.parameter(1, f64s(&[3]), "w");
    let gt = |v: &Op| {
        v.reduce_sum(&[0])
            .compare(&v.builder().constant(0f64), Comparison::Gt)
    };
    let y = b.cond(
        &gt(&x),
        x.clone(),
        |x| {
            let s = b.cond(&gt(&x), x.clone(), |x| x.cos(), |x| &x * 3.0);
            b.cond(
                &gt(&s),
                s.clone(),
                |s| {
                    b.while_loop(
                        s,
                        |v| {
                            v.reduce_sum(&[0])
                                .compare(&v.builder().constant(10f64), Comparison::Lt)
                        },
                        |v| &v * 1.5,
                    )
                },
                |s| s,
            )
        },
        |x| &x * &w,
    );
    let g = b.grad(&y.reduce_sum(&[0]), &x);
    let err = b.build(&g).unwrap_err().to_string();
    assert!(
        err.contains("no gradient for `while`") && err.contains("control_edges.rs"),
        "{err}"
    );
    // The same program without the failing loop builds, and its gradient is right.
    check("nested_ok", &[&[3], &[3]], -1.0, 1.0, |p| {
        let (x, w) = (&p[0], &p[1]);
        let b = x.builder();
        b.cond(
            &gt(x),
            x.clone(),
            |x| {
                let s = b.cond(&gt(&x), x.clone(), |x| x.cos(), |x| &x * 3.0);
                b.cond(&gt(&s), s.clone(), |s| &s * &s, |s| s.sin())
            },
            |x| &x * w,
        )
    });
}

#[test]
fn a_cond_whose_operands_are_outer_values_under_grad() {
    // Inside a branch, a cond on outer values only (its selector is the branch's):
    // the operand tuple used to be built in the outer computation, and the
    // gradient then read a tuple where it wanted its elements.
    for (name, lo) in [("outer_ops_t", 0.1), ("outer_ops_f", -1.0)] {
        check(name, &[&[3], &[3]], lo, lo + 0.9, |p| {
            let (x, w) = (&p[0], &p[1]);
            let b = x.builder();
            let gt = |v: &Op| {
                v.reduce_sum(&[0])
                    .compare(&v.builder().constant(0f64), Comparison::Gt)
            };
            b.cond(
                &gt(x),
                x.clone(),
                |x| {
                    let q = gt(&x);
                    &b.cond(&q, w.clone(), |w| w.sin(), |w| &w * &w) * &x
                },
                |x| &x * w,
            )
        });
    }
}

#[test]
fn size_0_dimensions_through_cond_switch_and_loops() {
    // Operands and results with a size-0 dimension next to ordinary ones.
    check("cond_size0", &[&[3], &[0, 2]], -1.0, 1.0, |p| {
        let (x, e) = (&p[0], &p[1]);
        let b = x.builder();
        let gt = x
            .reduce_sum(&[0])
            .compare(&b.constant(0f64), Comparison::Gt);
        let (y, e2) = b.cond(
            &gt,
            (x.clone(), e.clone()),
            |(x, e)| (x.sin(), &e * 2.0),
            |(x, e)| (&x * &x, e.exp()),
        );
        b.concatenate(&[&y, &e2.reshape(&[0])], 0)
    });
    check("switch_size0", &[&[2], &[3, 0]], -1.0, 1.0, |p| {
        let b = p[0].builder();
        let (y, _) = b.switch(
            &b.constant(1i32),
            (p[0].clone(), p[1].clone()),
            Box::new(|(x, e): (Op, Op)| (x.cos(), e)),
            vec![Box::new(|(x, e): (Op, Op)| {
                let bb = x.builder();
                bb.fori_loop(0, 2, (x, e), |_, (v, e)| (v.tanh(), e.sin()))
            })],
        );
        y
    });
    // Scans over xs with a size-0 dimension after the leading one, forwards and
    // back, with unrolling; a bounded while over a size-0 carry element.
    for (name, opts) in [
        ("scan_x_size0", xlaclient::ScanOptions::new()),
        (
            "scan_x_size0_rev",
            xlaclient::ScanOptions::new().reverse(true).unroll(2),
        ),
        (
            "scan_x_size0_ckpt",
            xlaclient::ScanOptions::new().checkpoint(true),
        ),
    ] {
        check(name, &[&[2], &[3, 0], &[3, 2]], -1.0, 1.0, |p| {
            let b = p[0].builder();
            let (c, ys) = b.scan_with(
                p[0].clone(),
                (p[1].clone(), p[2].clone()),
                &opts,
                |h, (e, x)| {
                    let h2 = &(&h * &x).sin() + &e.reduce_sum(&[0]);
                    (h2.clone(), (e, h2))
                },
            );
            assert_eq!(ys.0.dims().unwrap(), vec![3, 0]);
            b.concatenate(&[&c, &ys.1.reshape(&[6])], 0)
        });
    }
    check("bounded_size0", &[&[2]], 0.1, 0.5, |p| {
        let b = p[0].builder();
        let (v, _) = b.while_loop_bounded(
            (p[0].clone(), b.zeros(ElementType::F64, &[2, 0])),
            5,
            |(v, _)| {
                v.reduce_sum(&[0])
                    .compare(&v.builder().constant(3f64), Comparison::Lt)
            },
            |(v, e)| (&v * 1.3, &e + 1.0),
        );
        v
    });
}

#[test]
fn second_order_through_nested_bodies_and_empty_loops() {
    // grad of grad: the gradient of Σ (∇L ⊙ v) against finite differences, where
    // L holds a cond in a cond in a scan, a zero-trip fori_loop and a scan of no row.
    let v = [0.7, -1.3, 0.4];
    check("hvp_nested_edges", &[&[3], &[3]], -1.0, 1.0, |p| {
        let (x, w) = (&p[0], &p[1]);
        let b = x.builder();
        let gt = |v: &Op| {
            v.reduce_sum(&[0])
                .compare(&v.builder().constant(0f64), Comparison::Gt)
        };
        let xs = (w * 0.5).broadcast_to(&[3, 3]);
        let (h, _) = b.scan(x.clone(), xs, |h, r| {
            let h2 = h.builder().cond(
                &gt(&h),
                (h.clone(), r.clone()),
                |(h, r)| {
                    let bb = h.builder();
                    bb.cond(&gt(&r), h.clone(), |h| (&h * &r).sin(), |h| &h.tanh() + &r)
                },
                |(h, r)| &h.cos() * &r,
            );
            (h2.clone(), h2)
        });
        let h = b.fori_loop(4, 4, h, |_, v| v.exp());
        let empty = b.zeros(ElementType::F64, &[0, 3]);
        let (h, _) = b.scan(h, empty, |c, r| (&c * &r, c.clone()));
        let inner = (&(&h * &h) * w).reduce_sum(&[0]);
        let g = b.grad(&inner, x);
        &g * &b.constant_vec(&v)
    });
}
