//! Slicing ops on the real plugin against plain-Rust references: iota, slice,
//! dynamic-slice (with XLA's clamping), dynamic-update-slice, concatenate, pad
//! (negative edges and interior), reverse; and modules using them read back through
//! the proto checks.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::ops::slicing::PadDim;
use xlaclient::{Builder, ElementType, Shape};

fn iota_vec(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[test]
fn iota_counts_along_its_axis() {
    let b = Builder::new("iota");
    let rows = b.iota(ElementType::S32, &[2, 3], 0);
    let cols = b.iota(ElementType::F32, &[2, 3], -1);
    let m = b.build_tuple(&[&rows, &cols]).unwrap();
    let out = run(&m, &[]);
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![0, 0, 0, 1, 1, 1]);
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        vec![0., 1., 2., 0., 1., 2.]
    );
}

#[test]
fn slices_with_strides_match_index_arithmetic() {
    let dims = [5i64, 4];
    let xs = iota_vec(20);
    for (start, limit, strides) in [
        ([0i64, 0], [5i64, 4], [1i64, 1]),
        ([1, 1], [5, 4], [2, 2]),
        ([4, 0], [5, 3], [1, 3]),
        ([2, 2], [2, 4], [1, 1]), // empty
    ] {
        let b = Builder::new("slice");
        let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
        let y = x.slice(&start, &limit, &strides);
        let m = b.build(&y).unwrap();
        let mut want = Vec::new();
        let mut r = start[0];
        while r < limit[0] {
            let mut c = start[1];
            while c < limit[1] {
                want.push(xs[(r * 4 + c) as usize]);
                c += strides[1];
            }
            r += strides[0];
        }
        let got = run1::<f32>(&m, &[&upload(&xs, &dims)]);
        assert_eq!(got, want, "{start:?} {limit:?} {strides:?}");
    }
    let b = Builder::new("in_dim");
    let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
    let m = b.build(&x.slice_in_dim(1, 3, 1, -1)).unwrap();
    assert_eq!(
        run1::<f32>(&m, &[&upload(&xs, &dims)]),
        vec![1., 2., 5., 6., 9., 10., 13., 14., 17., 18.]
    );
}

/// JAX's `lax.dynamic_slice`: a negative start counts from the end, then the block
/// is clamped inside (JAX 0.10.2: `dynamic_slice(arange(5), (-1,), (2,))` is
/// `[3, 4]`); `dynamic_slice_clamped` is XLA's form, a negative start clamped to 0.
#[test]
fn dynamic_slice_wraps_negative_starts_like_jax_and_clamps_like_xla() {
    let b = Builder::new("ds");
    let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[]), "i");
    let m = b
        .build_tuple(&[
            &x.dynamic_slice(&[&i], &[3]),
            &x.dynamic_slice_clamped(&[&i], &[3]),
        ])
        .unwrap();
    let xs = iota_vec(6);
    for start in [-100i32, -7, -6, -2, -1, 0, 2, 3, 5, 100] {
        let jax = (if start < 0 { start + 6 } else { start }).clamp(0, 3) as usize;
        let xla = start.clamp(0, 3) as usize;
        let out = run(&m, &[&upload(&xs, &[6]), &upload(&[start], &[])]);
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            xs[jax..jax + 3].to_vec(),
            "start {start}"
        );
        assert_eq!(
            out[1].to_vec::<f32>().unwrap(),
            xs[xla..xla + 3].to_vec(),
            "start {start}"
        );
    }
    // The issue's case, with JAX's answer.
    let b = Builder::new("jax_case");
    let x = b.parameter(0, Shape::of::<f32>(&[5]), "x");
    let m = b
        .build(&x.dynamic_slice(&[&b.constant(-1i32)], &[2]))
        .unwrap();
    assert_eq!(
        run1::<f32>(&m, &[&upload(&iota_vec(5), &[5])]),
        vec![3.0, 4.0]
    );
}

#[test]
fn dynamic_update_slice_writes_a_block() {
    let b = Builder::new("dus");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 4]), "x");
    let u = b.parameter(1, Shape::of::<f32>(&[2, 2]), "u");
    let r = b.parameter(2, Shape::of::<i32>(&[]), "r");
    let c = b.parameter(3, Shape::of::<i32>(&[]), "c");
    let m = b.build(&x.dynamic_update_slice(&u, &[&r, &c])).unwrap();
    let xs = vec![0f32; 12];
    let us = [1f32, 2., 3., 4.];
    // A negative start counts from the end of its axis (JAX's), then clamps.
    for (rv, cv) in [(0i32, 0i32), (1, 2), (5, -1), (-1, -3), (-9, -2)] {
        let wrap = |v: i32, d: i32| if v < 0 { v + d } else { v };
        let (r0, c0) = (
            wrap(rv, 3).clamp(0, 1) as usize,
            wrap(cv, 4).clamp(0, 2) as usize,
        );
        let mut want = xs.clone();
        for i in 0..2 {
            for j in 0..2 {
                want[(r0 + i) * 4 + c0 + j] = us[i * 2 + j];
            }
        }
        let got = run1::<f32>(
            &m,
            &[
                &upload(&xs, &[3, 4]),
                &upload(&us, &[2, 2]),
                &upload(&[rv], &[]),
                &upload(&[cv], &[]),
            ],
        );
        assert_eq!(got, want, "at ({rv}, {cv})");
    }
}

#[test]
fn concatenate_reverse_and_pad() {
    let b = Builder::new("cat");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 2]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[2, 1]), "y");
    let cat = b.concatenate(&[&x, &y], -1);
    let rev = cat.reverse(&[0, 1]);
    let z = b.constant(-1f32);
    let pad = x.pad(
        &z,
        &[
            PadDim {
                lo: 1,
                hi: 0,
                interior: 1,
            },
            PadDim {
                lo: -1,
                hi: 1,
                interior: 0,
            },
        ],
    );
    let m = b.build_tuple(&[&cat, &rev, &pad]).unwrap();
    let out = run(
        &m,
        &[
            &upload(&[1f32, 2., 3., 4.], &[2, 2]),
            &upload(&[5f32, 6.], &[2, 1]),
        ],
    );
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        vec![1., 2., 5., 3., 4., 6.]
    );
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        vec![6., 4., 3., 5., 2., 1.]
    );
    // Rows: pad row, x row 0, interior pad row, x row 1; columns: drop the first, add
    // one at the end.
    assert_eq!(out[2].dims().unwrap(), vec![4, 2]);
    assert_eq!(
        out[2].to_vec::<f32>().unwrap(),
        vec![-1., -1., 2., -1., -1., -1., 4., -1.]
    );
    // The module reads back through the checks of foreign modules.
    client()
        .compile_hlo_bytes(&m.to_bytes(), &xlaclient::CompileOptions::new())
        .unwrap();
}

#[test]
fn slicing_errors_name_the_rule() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let y = x.slice(&[2], &[1], &[1]);
    assert!(b.build(&y).unwrap_err().to_string().contains("slice"));
}
