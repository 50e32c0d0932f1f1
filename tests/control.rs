//! Loops and conditionals on the real plugin, over trees of values, with bodies that
//! use outside values: data-dependent trip counts, fori_loop, nested loops, cond and
//! N-way switch (an out-of-range index clamped, as JAX's), loops in branches and
//! branches in loops, and carry-shape errors. References are plain-Rust loops.

mod common;

use common::*;
use xlaclient::{Builder, Comparison, ElementType, Error, Op, ScanOptions, Shape, Tree};

fn f32s(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

#[test]
fn a_while_loop_with_a_data_dependent_trip_count_and_captures() {
    // Double v (and add w, from outside) until its sum exceeds limit (from outside).
    let b = Builder::new("w");
    let v = b.parameter(0, f32s(&[2]), "v");
    let w = b.parameter(1, f32s(&[2]), "w");
    let limit = b.parameter(2, f32s(&[]), "limit");
    let (out, n) = b.while_loop(
        (v, b.constant(0i32)),
        |(v, _)| v.reduce_sum(&[0]).compare(&limit, Comparison::Le),
        |(v, k)| (v * 2.0 + &w, k + 1),
    );
    let m = b.build_tuple(&[&out, &n]).unwrap();
    let exe = client().compile(&m).unwrap();
    for (v0, w0, lim) in [
        ([1f32, 0.5], [0f32, 0.25], 100f32),
        ([3., 4.], [1., 1.], 5.),
        ([0.1, 0.1], [0.5, 0.], 1e4),
    ] {
        let outs = exe
            .execute(&[&upload(&v0, &[2]), &upload(&w0, &[2]), &upload(&[lim], &[])])
            .unwrap();
        let (mut v, mut k) = (v0, 0i32);
        while v[0] + v[1] <= lim {
            v = [v[0] * 2.0 + w0[0], v[1] * 2.0 + w0[1]];
            k += 1;
        }
        assert_eq!(outs[0].to_vec::<f32>().unwrap(), v.to_vec());
        assert_eq!(outs[1].to_scalar::<i32>().unwrap(), k);
    }
}

#[derive(Tree, Clone)]
struct Acc<T> {
    total: T,
    last: T,
}

#[test]
fn fori_loops_nest_and_carry_derived_trees() {
    // total += i * j * s over i in 0..4, j in 0..3; last = the final i * j * s.
    let b = Builder::new("fori");
    let s = b.parameter(0, f32s(&[]), "s");
    let init = Acc {
        total: b.constant(0f32),
        last: b.constant(0f32),
    };
    let out = b.fori_loop(0, 4, init, |i, acc| {
        let ib = i.builder();
        ib.fori_loop(0, 3, acc, |j, acc| {
            let term = (i * j).convert(ElementType::F32) * &s;
            Acc {
                total: &acc.total + &term,
                last: term,
            }
        })
    });
    let m = b.build_tuple(&[&out.total, &out.last]).unwrap();
    let outs = run(&m, &[&upload(&[0.5f32], &[])]);
    let total: f32 = (0..4)
        .flat_map(|i| (0..3).map(move |j| (i * j) as f32 * 0.5))
        .sum();
    assert_eq!(outs[0].to_scalar::<f32>().unwrap(), total);
    assert_eq!(outs[1].to_scalar::<f32>().unwrap(), 3.0);
}

#[test]
fn cond_and_switch_with_captures() {
    let b = Builder::new("c");
    let x = b.parameter(0, f32s(&[3]), "x");
    let k = b.parameter(1, f32s(&[]), "k");
    let i = b.parameter(2, Shape::of::<i32>(&[]), "i");
    let p = x
        .reduce_sum(&[0])
        .compare(&b.constant(0f32), Comparison::Gt);
    let c = b.cond(&p, x.clone(), |x| &x * &k, |x| -x);
    let sw: Op = b.switch(
        &i,
        x.clone(),
        Box::new(|x: Op| x + 1.0),
        vec![Box::new(|x: Op| &x * &k), Box::new(|x: Op| x.exp())],
    );
    let m = b.build_tuple(&[&c, &sw]).unwrap();
    let exe = client().compile(&m).unwrap();
    for (xs, iv) in [
        ([1f32, 2., -0.5], 0i32),
        ([-1., -2., 0.5], 1),
        ([0.1, 0.2, 0.3], 2),
        ([1., 1., 1.], 7),
        ([1., 1., 1.], -3),
    ] {
        let outs = exe
            .execute(&[
                &upload(&xs, &[3]),
                &upload(&[3f32], &[]),
                &upload(&[iv], &[]),
            ])
            .unwrap();
        let sum: f32 = xs.iter().sum();
        let want_c: Vec<f32> = xs
            .iter()
            .map(|v| if sum > 0.0 { v * 3.0 } else { -v })
            .collect();
        // Out of range is clamped, as JAX's `lax.switch` does: -3 runs branch 0,
        // 7 the last.
        let branch = iv.clamp(0, 2);
        let want_s: Vec<f32> = xs
            .iter()
            .map(|v| match branch {
                0 => v + 1.0,
                1 => v * 3.0,
                _ => v.exp(),
            })
            .collect();
        assert_eq!(outs[0].to_vec::<f32>().unwrap(), want_c, "{xs:?}");
        assert_close(&outs[1].to_vec::<f32>().unwrap(), &want_s, 1e-6);
    }
}

#[test]
fn loops_inside_branches_and_branches_inside_loops() {
    // For k in 0..5: x = x + 1 if k is even else x * 2 (a cond in a loop); then, if
    // the result is large, count down by 3 while positive (a loop in a branch).
    let b = Builder::new("nest");
    let x = b.parameter(0, f32s(&[]), "x");
    let y = b.fori_loop(0, 5, x, |k, x| {
        let kb = k.builder();
        let even = (k - &(k / 2 * 2)).compare(&kb.constant(0i32), Comparison::Eq);
        kb.cond(&even, x, |x| x + 1.0, |x| x * 2.0)
    });
    let big = y.compare(&b.constant(10f32), Comparison::Gt);
    let z = b.cond(
        &big,
        y.clone(),
        |y| {
            let yb = y.builder();
            yb.while_loop(
                y,
                |v| v.compare(&v.builder().constant(0f32), Comparison::Gt),
                |v| v - 3.0,
            )
        },
        |y| y,
    );
    let m = b.build_tuple(&[&y, &z]).unwrap();
    for x0 in [0.5f32, 3.0] {
        let outs = run(&m, &[&upload(&[x0], &[])]);
        let mut v = x0;
        for k in 0..5 {
            v = if k % 2 == 0 { v + 1.0 } else { v * 2.0 };
        }
        let mut z = v;
        if v > 10.0 {
            while z > 0.0 {
                z -= 3.0;
            }
        }
        assert_eq!(outs[0].to_scalar::<f32>().unwrap(), v);
        assert_eq!(outs[1].to_scalar::<f32>().unwrap(), z);
    }
}

#[test]
fn carry_errors_name_the_carry_and_the_line() {
    let b = Builder::new("bad");
    let x = b.parameter(0, f32s(&[2]), "x");
    let line = line!() + 1;
    let (y, _) = b.while_loop(
        (x.clone(), b.constant(0i32)),
        |(_, k)| k.compare(&k.builder().constant(3i32), Comparison::Lt),
        |(v, k)| (v.reduce_sum(&[0]), k + 1),
    );
    match b.build(&y).unwrap_err() {
        Error::Shape(e) => {
            assert!(
                e.reason.contains("carry 0") && e.reason.contains("f32[2]"),
                "{e}"
            );
            assert_eq!(e.location.unwrap().line(), line, "{e}");
        }
        other => panic!("{other}"),
    }
    let b = Builder::new("bad_pred");
    let x = b.parameter(0, f32s(&[2]), "x");
    let y = b.while_loop(x, |v| v.reduce_sum(&[0]), |v| v);
    assert!(b.build(&y).unwrap_err().to_string().contains("pred"));
    let b = Builder::new("bad_sel");
    let x = b.parameter(0, f32s(&[2]), "x");
    let f = b.parameter(1, f32s(&[]), "f");
    let y = b.cond(&f, x, |x| x, |x| -x);
    assert!(b.build(&y).unwrap_err().to_string().contains("selector"));
    // A predicate that is not a scalar, and a switch index that is not an integer.
    let b = Builder::new("bad_shape_pred");
    let x = b.parameter(0, f32s(&[2]), "x");
    let p = x.compare(&b.constant(0f32), Comparison::Gt);
    let line = line!() + 1;
    let y = b.cond(&p, x, |x| x, |x| -x);
    let e = b.build(&y).unwrap_err().to_string();
    assert!(
        e.contains("pred[2]") && e.contains(&format!("control.rs:{line}")),
        "{e}"
    );
    let b = Builder::new("bad_index");
    let x = b.parameter(0, f32s(&[2]), "x");
    let f = b.parameter(1, f32s(&[]), "f");
    let y: Op = b.switch(
        &f,
        x,
        Box::new(|x: Op| x + 1.0),
        vec![Box::new(|x: Op| x.exp())],
    );
    let e = b.build(&y).unwrap_err().to_string();
    assert!(e.contains("f32[]") && e.contains("selector"), "{e}");
}

#[test]
fn scan_matches_an_unrolled_loop() {
    // carry = (sum, count); per step: sum += k * x_t, count += 1; ys = (sum, x_t > 0,
    // a 2-vector) — several carries and outputs of different shapes, a captured k.
    let t = 6;
    let b = Builder::new("scan");
    let xs = b.parameter(0, f32s(&[t, 3]), "xs");
    let k = b.parameter(1, f32s(&[]), "k");
    // unroll 1: a loop; 4: a loop of 4 steps and 2 after it; 6: a loop, no
    // remainder; 10: no loop at all.
    for (reverse, unroll) in [
        (false, 1),
        (true, 1),
        (false, 4),
        (true, 4),
        (true, 6),
        (false, 10),
    ] {
        let init = (b.zeros(ElementType::F32, &[3]), b.constant(0i32));
        let opts = ScanOptions::new().reverse(reverse).unroll(unroll);
        let ((sum, count), (sums, pos, pair)) =
            b.scan_with(init, xs.clone(), &opts, |(s, c), x| {
                let s2 = &s + &(&x * &k);
                let p = x.compare(&x.builder().constant(0f32), Comparison::Gt);
                let pair = x.slice(&[0], &[2], &[1]);
                ((s2.clone(), c + 1), (s2, p, pair))
            });
        assert_eq!(sums.dims().unwrap(), vec![t, 3]);
        assert_eq!(pair.dims().unwrap(), vec![t, 2]);
        let m = b.build_tuple(&[&sum, &count, &sums, &pos, &pair]).unwrap();
        let whiles = m.to_hlo_text().matches(" while(").count();
        assert_eq!(whiles, usize::from(unroll < 10), "unroll {unroll}");
        let mut rng = Rng(9);
        let data = rng.vec((t * 3) as usize, -1.0, 1.0);
        let outs = run(&m, &[&upload(&data, &[t, 3]), &upload(&[0.5f32], &[])]);
        let mut s = [0f32; 3];
        let mut want_sums = vec![0f32; (t * 3) as usize];
        let order: Vec<usize> = if reverse {
            (0..t as usize).rev().collect()
        } else {
            (0..t as usize).collect()
        };
        for step in order {
            for j in 0..3 {
                s[j] += 0.5 * data[step * 3 + j];
                want_sums[step * 3 + j] = s[j];
            }
        }
        assert_close(&outs[0].to_vec::<f32>().unwrap(), &s, 1e-6);
        assert_eq!(outs[1].to_scalar::<i32>().unwrap(), t as i32);
        assert_close(&outs[2].to_vec::<f32>().unwrap(), &want_sums, 1e-6);
        let want_pos: Vec<bool> = data.iter().map(|v| *v > 0.0).collect();
        assert_eq!(outs[3].to_vec::<bool>().unwrap(), want_pos);
        let want_pair: Vec<f32> = data.chunks(3).flat_map(|r| [r[0], r[1]]).collect();
        assert_eq!(
            outs[4].to_vec::<f32>().unwrap(),
            want_pair,
            "reverse={reverse} unroll={unroll}"
        );
    }
}

#[test]
fn scan_with_a_length_and_no_xs() {
    // Fibonacci numbers: carry (a, b), y = a.
    let b = Builder::new("fib");
    let init = (b.constant(0i64), b.constant(1i64));
    let (_, fib) = b.scan_with(
        init,
        (),
        &xlaclient::ScanOptions::new().length(10),
        |(a, c), ()| ((c.clone(), &a + &c), a),
    );
    let m = b.build(&fib).unwrap();
    assert_eq!(run1::<i64>(&m, &[]), vec![0, 1, 1, 2, 3, 5, 8, 13, 21, 34]);
    let init = (b.constant(0i64), b.constant(1i64));
    let opts = ScanOptions::new().length(10).unroll(3);
    let (_, fib) = b.scan_with(init, (), &opts, |(a, c), ()| ((c.clone(), &a + &c), a));
    let m = b.build(&fib).unwrap();
    assert_eq!(run1::<i64>(&m, &[]), vec![0, 1, 1, 2, 3, 5, 8, 13, 21, 34]);
}

/// A function defined once is one computation however many places call it: twice
/// at the top level and once inside a loop body, with a captured outside value.
#[test]
fn a_function_is_emitted_once_for_all_its_call_sites() {
    let b = Builder::new("reuse");
    let x = b.parameter(0, f32s(&[3]), "x");
    let w = b.parameter(1, f32s(&[3]), "w");
    let layer = b.function("layer", &[f32s(&[3])], |_, p| vec![(&p[0] * &w).tanh()]);
    let h1 = layer.call(&[&x]);
    let h2 = layer.call(&[&h1[0]]);
    let looped = b.fori_loop(0, 3, h2[0].clone(), |_, h| layer.call(&[&h])[0].clone());
    let m = b.build(&looped).unwrap();
    let p = m.proto();
    let layers = p
        .computations
        .iter()
        .filter(|c| c.name.starts_with("layer"))
        .count();
    assert_eq!(layers, 1, "one computation for the function");
    let calls: usize = p
        .computations
        .iter()
        .map(|c| c.instructions.iter().filter(|i| i.opcode == "call").count())
        .sum();
    assert_eq!(calls, 3, "three call sites");
    let xs = [0.5f32, -1.0, 2.0];
    let ws = [1.5f32, 0.3, -0.7];
    let got = run1::<f32>(&m, &[&upload(&xs, &[3]), &upload(&ws, &[3])]);
    let mut want = xs;
    for _ in 0..5 {
        for j in 0..3 {
            want[j] = (want[j] * ws[j]).tanh();
        }
    }
    assert_close(&got, &want, 1e-6);

    // A call with an argument of another shape is an error naming the function
    // and this line.
    let b = Builder::new("bad");
    let x = b.parameter(0, f32s(&[4]), "x");
    let f = b.function("f", &[f32s(&[3])], |_, p| vec![p[0].exp()]);
    let line = line!() + 1;
    let e = b.build(&f.call(&[&x])[0]).unwrap_err().to_string();
    assert!(
        e.contains("function `f`") && e.contains(&format!("control.rs:{line}")),
        "{e}"
    );
}
