//! The numpy-style layer on the real plugin against plain-Rust references: keepdims
//! reductions, argmax/argmin with ties and NaNs (first index, as jnp), softmax and
//! friends, one_hot, clip, squeeze/expand_dims, split/stack, arange/full, einsum.

mod common;

use common::*;
use xlaclient::{Builder, ElementType, Shape};

fn f32s(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

#[test]
fn reductions_with_keepdims() {
    let b = Builder::new("red");
    let x = b.parameter(0, f32s(&[2, 3]), "x");
    let s = x.sum(&[1], true);
    let p = x.prod(&[0], false);
    let mx = x.amax(&[-1], false);
    let mn = x.amin(&[0, 1], true);
    assert_eq!(s.dims().unwrap(), vec![2, 1]);
    assert_eq!(mn.dims().unwrap(), vec![1, 1]);
    let m = b.build_tuple(&[&s, &p, &mx, &mn]).unwrap();
    let xs = [1f32, -2., 3., 4., 5., -6.];
    let out = run(&m, &[&upload(&xs, &[2, 3])]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2., 3.]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![4., -10., -18.]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), vec![3., 5.]);
    assert_eq!(out[3].to_vec::<f32>().unwrap(), vec![-6.]);
}

/// `sum` and `prod` in `jnp`'s types: bools and small integers widen (no overflow
/// of an `s8` sum), `f16` accumulates in `f32` and stays `f16`; plain-Rust
/// references. The lax-level `reduce_sum` keeps the operand's type.
#[test]
fn sums_and_products_promote_as_jnp() {
    let b = Builder::new("promote");
    let p = b.parameter(0, Shape::of::<bool>(&[5]), "p");
    let i = b.parameter(1, Shape::of::<i8>(&[3]), "i");
    let u = b.parameter(2, Shape::of::<u8>(&[3]), "u");
    let h = b.parameter(3, Shape::of::<xlaclient::half::f16>(&[4096]), "h");
    let outs = [
        p.sum(&[0], false),
        i.sum(&[0], false),
        u.sum(&[0], false),
        i.prod(&[0], false),
        h.sum(&[0], false),
        i.reduce_sum(&[0]),
    ];
    let types: Vec<ElementType> = outs.iter().map(|o| o.element_type().unwrap()).collect();
    assert_eq!(
        types,
        [
            ElementType::S32,
            ElementType::S32,
            ElementType::U32,
            ElementType::S32,
            ElementType::F16,
            ElementType::S8
        ]
    );
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let ps = [true, false, true, true, false];
    let is = [100i8, 100, -7];
    let us = [200u8, 100, 255];
    let hs: Vec<xlaclient::half::f16> = (0..4096)
        .map(|k| xlaclient::half::f16::from_f32(0.1 + (k % 7) as f32 * 0.01))
        .collect();
    let out = run(
        &m,
        &[
            &upload(&ps, &[5]),
            &upload(&is, &[3]),
            &upload(&us, &[3]),
            &upload(&hs, &[4096]),
        ],
    );
    assert_eq!(out[0].to_vec::<i32>().unwrap(), [3]);
    assert_eq!(out[1].to_vec::<i32>().unwrap(), [193]);
    assert_eq!(out[2].to_vec::<u32>().unwrap(), [555]);
    assert_eq!(out[3].to_vec::<i32>().unwrap(), [-70000]);
    // Within one f16 step (0.5 at this size) of the exact sum of the f16 values.
    let exact: f64 = hs.iter().map(|v| v.to_f64()).sum();
    let got = out[4].to_vec::<xlaclient::half::f16>().unwrap()[0].to_f64();
    assert!((got - exact).abs() <= 0.5, "{got} vs {exact}");
    // The lax-level sum wraps in s8 as XLA computes it: 100 + 100 - 7 = 193 → -63.
    assert_eq!(out[5].to_vec::<i8>().unwrap(), [193u8 as i8]);
}

/// `jnp.dot` on N-D arrays, vectors and scalars against plain Rust: the last axis
/// of the left with the second-to-last of the right, nothing batched.
#[test]
fn dot_is_numpys() {
    let b = Builder::new("dot");
    let x = b.parameter(0, f32s(&[2, 3, 4]), "x");
    let y = b.parameter(1, f32s(&[5, 4, 2]), "y");
    let v = b.parameter(2, f32s(&[4]), "v");
    let s = b.parameter(3, f32s(&[]), "s");
    let outs = [x.dot(&y), x.dot(&v), v.dot(&v), s.dot(&x), x.dot(&s)];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let xs: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    let ys: Vec<f32> = (0..40).map(|i| (i as f32 * 0.11).cos()).collect();
    let vs = [0.5f32, -1.0, 2.0, 0.25];
    let out = run(
        &m,
        &[
            &upload(&xs, &[2, 3, 4]),
            &upload(&ys, &[5, 4, 2]),
            &upload(&vs, &[4]),
            &upload(&[3f32], &[]),
        ],
    );
    // dot(x, y)[a, b, c, d] = Σ_k x[a, b, k] y[c, k, d]
    let mut want = Vec::new();
    for a in 0..2 {
        for bb in 0..3 {
            for c in 0..5 {
                for d in 0..2 {
                    want.push(
                        (0..4)
                            .map(|k| xs[a * 12 + bb * 4 + k] * ys[c * 8 + k * 2 + d])
                            .sum::<f32>(),
                    );
                }
            }
        }
    }
    assert_eq!(outs[0].dims().unwrap(), vec![2, 3, 5, 2]);
    assert_close(&out[0].to_vec::<f32>().unwrap(), &want, 1e-5);
    let xv: Vec<f32> = (0..6)
        .map(|r| (0..4).map(|k| xs[r * 4 + k] * vs[k]).sum())
        .collect();
    assert_close(&out[1].to_vec::<f32>().unwrap(), &xv, 1e-5);
    assert_close(
        &out[2].to_vec::<f32>().unwrap(),
        &[vs.iter().map(|a| a * a).sum()],
        1e-6,
    );
    let x3: Vec<f32> = xs.iter().map(|a| a * 3.0).collect();
    assert_eq!(out[3].to_vec::<f32>().unwrap(), x3);
    assert_eq!(out[4].to_vec::<f32>().unwrap(), x3);
}

/// numpy's pad modes, against a plain-Rust index map: for each output position the
/// source index per axis (edge clamps, reflect mirrors without the edge, symmetric
/// with it, wrap continues from the other end).
#[test]
fn pad_modes_are_numpys() {
    use xlaclient::PadMode;
    let (rows, cols) = (3usize, 4usize);
    let xs: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let widths = [(2i64, 1i64), (3, 2)];
    let source = |mode: PadMode, i: i64, n: i64| -> i64 {
        match mode {
            PadMode::Edge => i.clamp(0, n - 1),
            PadMode::Reflect => {
                if i < 0 {
                    -i
                } else if i >= n {
                    2 * (n - 1) - i
                } else {
                    i
                }
            }
            PadMode::Symmetric => {
                if i < 0 {
                    -i - 1
                } else if i >= n {
                    2 * n - 1 - i
                } else {
                    i
                }
            }
            PadMode::Wrap => i.rem_euclid(n),
        }
    };
    for mode in [
        PadMode::Edge,
        PadMode::Reflect,
        PadMode::Symmetric,
        PadMode::Wrap,
    ] {
        let b = Builder::new("pad");
        let x = b.parameter(0, f32s(&[3, 4]), "x");
        let m = b.build(&x.pad_mode(&widths, mode)).unwrap();
        let got = run1::<f32>(&m, &[&upload(&xs, &[3, 4])]);
        let (orows, ocols) = (rows as i64 + 3, cols as i64 + 5);
        let mut want = Vec::new();
        for r in 0..orows {
            for c in 0..ocols {
                let sr = source(mode, r - 2, rows as i64);
                let sc = source(mode, c - 3, cols as i64);
                want.push(xs[(sr * cols as i64 + sc) as usize]);
            }
        }
        assert_eq!(got, want, "{mode:?}");
    }
    // Widths that do not fit are errors naming the axis.
    let b = Builder::new("pad_bad");
    let x = b.parameter(0, f32s(&[3, 4]), "x");
    let e = x
        .pad_mode(&[(0, 0), (4, 0)], PadMode::Reflect)
        .dims()
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 1") && e.contains("Reflect"), "{e}");
    assert!(x.pad_mode(&[(1, 1)], PadMode::Edge).dims().is_err());
}

#[test]
fn argmax_and_argmin_take_the_first_index_and_nans() {
    let rows: [[f32; 5]; 4] = [
        [1., 3., 3., -1., 2.],
        [f32::NAN, 1., f32::NAN, 5., 0.],
        [-2., -2., -2., -2., -2.],
        [0., -0., 7., 7., f32::NEG_INFINITY],
    ];
    let xs: Vec<f32> = rows.iter().flatten().copied().collect();
    let b = Builder::new("arg");
    let x = b.parameter(0, f32s(&[4, 5]), "x");
    let m = b.build_tuple(&[&x.argmax(1), &x.argmin(-1)]).unwrap();
    let out = run(&m, &[&upload(&xs, &[4, 5])]);
    let reference = |row: &[f32; 5], better: fn(f32, f32) -> bool| -> i32 {
        if let Some(i) = row.iter().position(|v| v.is_nan()) {
            return i as i32;
        }
        let mut best = 0;
        for i in 1..5 {
            if better(row[i], row[best]) {
                best = i;
            }
        }
        best as i32
    };
    let amax: Vec<i32> = rows.iter().map(|r| reference(r, |a, b| a > b)).collect();
    let amin: Vec<i32> = rows.iter().map(|r| reference(r, |a, b| a < b)).collect();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), amax);
    assert_eq!(out[1].to_vec::<i32>().unwrap(), amin);
}

#[test]
fn softmax_log_softmax_logsumexp() {
    let b = Builder::new("sm");
    let x = b.parameter(0, f32s(&[2, 3]), "x");
    let m = b
        .build_tuple(&[&x.softmax(-1), &x.log_softmax(1), &x.logsumexp(1, false)])
        .unwrap();
    let xs = [1f32, 2., 3., 1000., 1000., f32::NEG_INFINITY];
    let out = run(&m, &[&upload(&xs, &[2, 3])]);
    let mut sm = Vec::new();
    let mut lse = Vec::new();
    for r in xs.chunks(3) {
        let mx = r.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = r.iter().map(|v| (*v as f64 - mx).exp()).sum();
        sm.extend(r.iter().map(|v| ((*v as f64 - mx).exp() / z) as f32));
        lse.push((mx + z.ln()) as f32);
    }
    assert_close(&out[0].to_vec::<f32>().unwrap(), &sm, 1e-6);
    let ls: Vec<f32> = xs.iter().enumerate().map(|(i, v)| v - lse[i / 3]).collect();
    assert_close(&out[1].to_vec::<f32>().unwrap(), &ls, 1e-6);
    assert_close(&out[2].to_vec::<f32>().unwrap(), &lse, 1e-6);
}

#[test]
fn one_hot_clip_and_shape_helpers() {
    let b = Builder::new("helpers");
    let i = b.parameter(0, Shape::of::<i32>(&[4]), "i");
    let x = b.parameter(1, f32s(&[2, 1, 3]), "x");
    let oh = i.one_hot(3, ElementType::F32);
    let cl = x.clip(-1.0, 1.0);
    let sq = x.squeeze(&[1]).expand_dims(0);
    assert_eq!(sq.dims().unwrap(), vec![1, 2, 3]);
    let parts = x.split(&[1, 2], -1);
    let st = b.stack(&[&parts[1], &parts[1]], 0);
    assert_eq!(st.dims().unwrap(), vec![2, 2, 1, 2]);
    let ar = b.arange(1.0, 2.0, 0.25, ElementType::F32);
    let fl = b.full(ElementType::S32, &[2], 7.0);
    let m = b
        .build_tuple(&[&oh, &cl, &sq, &parts[0], &st, &ar, &fl, &x.square()])
        .unwrap();
    let xs = [0.5f32, -3., 2., 4., 0., -0.25];
    let out = run(
        &m,
        &[&upload(&[2i32, 0, 5, -1], &[4]), &upload(&xs, &[2, 1, 3])],
    );
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        vec![0., 0., 1., 1., 0., 0., 0., 0., 0., 0., 0., 0.]
    );
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        xs.iter().map(|v| v.clamp(-1., 1.)).collect::<Vec<_>>()
    );
    assert_eq!(out[2].to_vec::<f32>().unwrap(), xs.to_vec());
    assert_eq!(out[3].to_vec::<f32>().unwrap(), vec![0.5, 4.]);
    assert_eq!(
        out[4].to_vec::<f32>().unwrap(),
        vec![-3., 2., 0., -0.25, -3., 2., 0., -0.25]
    );
    assert_eq!(out[5].to_vec::<f32>().unwrap(), vec![1., 1.25, 1.5, 1.75]);
    assert_eq!(out[6].to_vec::<i32>().unwrap(), vec![7, 7]);
    assert_eq!(
        out[7].to_vec::<f32>().unwrap(),
        xs.iter().map(|v| v * v).collect::<Vec<_>>()
    );
}

#[test]
fn einsum_forms() {
    let mut rng = Rng(21);
    let (a, bv) = (rng.vec(2 * 3 * 4, -1., 1.), rng.vec(2 * 4 * 5, -1., 1.));
    let b = Builder::new("einsum");
    let x = b.parameter(0, f32s(&[2, 3, 4]), "x");
    let y = b.parameter(1, f32s(&[2, 4, 5]), "y");
    let bmm = b.einsum("bij,bjk->bik", &x, &y);
    let swapped = b.einsum("bij,bjk->kbi", &x, &y);
    let outer = b.einsum("bij,bjk->bijk", &x, &y);
    assert_eq!(swapped.dims().unwrap(), vec![5, 2, 3]);
    let m = b.build_tuple(&[&bmm, &swapped, &outer]).unwrap();
    let out = run(&m, &[&upload(&a, &[2, 3, 4]), &upload(&bv, &[2, 4, 5])]);
    let at = |bb: usize, i: usize, j: usize| a[(bb * 3 + i) * 4 + j];
    let bt = |bb: usize, j: usize, k: usize| bv[(bb * 4 + j) * 5 + k];
    let mut want = vec![0f32; 30];
    for bb in 0..2 {
        for i in 0..3 {
            for k in 0..5 {
                want[(bb * 3 + i) * 5 + k] = (0..4).map(|j| at(bb, i, j) * bt(bb, j, k)).sum();
            }
        }
    }
    assert_close(&out[0].to_vec::<f32>().unwrap(), &want, 1e-5);
    let got = out[1].to_vec::<f32>().unwrap();
    for k in 0..5 {
        for bb in 0..2 {
            for i in 0..3 {
                let g = got[(k * 2 + bb) * 3 + i];
                let w = want[(bb * 3 + i) * 5 + k];
                assert!((g - w).abs() < 1e-5);
            }
        }
    }
    assert_eq!(out[2].dims().unwrap(), vec![2, 3, 4, 5]);
    let e = {
        let b = Builder::new("bad");
        let x = b.parameter(0, f32s(&[2, 2]), "x");
        b.build(&b.einsum("ii,ij->j", &x, &x))
            .unwrap_err()
            .to_string()
    };
    assert!(e.contains("einsum"), "{e}");
}

#[test]
fn where_and_the_like_constructors() {
    let b = Builder::new("where");
    let x = b.parameter(0, f32s(&[2, 3]), "x");
    let k = b.parameter(1, Shape::of::<i32>(&[3]), "k");
    let pos = x.compare(&b.constant(0f32), xlaclient::Comparison::Gt);
    // Broadcast: a [2, 3] condition, a [2, 3] and a scalar branch.
    let w = b.where_(&pos, &x, &b.constant(-1f32));
    let m = b
        .build_tuple(&[&w, &x.zeros_like(), &x.ones_like(), &k.full_like(7.0)])
        .unwrap();
    let xs = [0.5f32, -2.0, 0.0, 3.0, -0.1, 1.0];
    let out = run(&m, &[&upload(&xs, &[2, 3]), &upload(&[1i32, 2, 3], &[3])]);
    let want: Vec<f32> = xs
        .iter()
        .map(|v| if *v > 0.0 { *v } else { -1.0 })
        .collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![0.0; 6]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), vec![1.0; 6]);
    assert_eq!(out[3].to_vec::<i32>().unwrap(), vec![7; 3]);
    // A value the type cannot hold is a build error.
    let b = Builder::new("bad");
    let k = b.parameter(0, Shape::of::<u8>(&[3]), "k");
    assert!(b.build(&k.full_like(-1.0)).is_err());
    let _ = ElementType::F32;
}
