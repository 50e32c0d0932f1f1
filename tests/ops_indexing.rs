//! Gather and scatter on the real plugin against plain-Rust indexing: numpy `take`
//! along each axis (with XLA's clamping of out-of-range starts), a gather of single
//! elements at (row, column) pairs, scatter-add with repeated indices, and a
//! combiner using an outside scalar.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::ops::indexing::{GatherDims, ScatterDims};
use xlaclient::{Builder, Shape};

#[test]
fn take_along_each_axis() {
    let dims = [3i64, 4];
    let xs: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let idx = [2i32, 0, 2, 7, -1]; // 7 and -1 are clamped into range (mode Clip)
    for axis in 0..2usize {
        let b = Builder::new("take");
        let x = b.parameter(0, Shape::of::<f32>(&dims), "x");
        let i = b.parameter(1, Shape::of::<i32>(&[5]), "i");
        let y = x.take_with(&i, axis as i64, xlaclient::TakeMode::Clip);
        let m = b.build(&y).unwrap();
        let got = run1::<f32>(&m, &[&upload(&xs, &dims), &upload(&idx, &[5])]);
        let n = dims[axis] as i32;
        let mut want = Vec::new();
        if axis == 0 {
            for k in idx {
                let r = k.clamp(0, n - 1) as usize;
                want.extend_from_slice(&xs[r * 4..r * 4 + 4]);
            }
        } else {
            for r in 0..3 {
                for k in idx {
                    want.push(xs[r * 4 + k.clamp(0, n - 1) as usize]);
                }
            }
        }
        assert_eq!(got, want, "axis {axis}");
    }
}

#[test]
fn gather_elements_at_index_pairs() {
    let b = Builder::new("pairs");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 4]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[5, 2]), "i");
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: vec![0, 1],
        start_index_map: vec![0, 1],
        index_vector_dim: 1,
        ..Default::default()
    };
    let y = x.gather(&i, &dims, &[1, 1], false);
    assert_eq!(y.dims().unwrap(), vec![5]);
    let m = b.build(&y).unwrap();
    let xs: Vec<f32> = (0..12).map(|v| v as f32 * 10.0).collect();
    let pairs = [0i32, 0, 2, 3, 1, 1, 2, 0, 0, 3];
    let got = run1::<f32>(&m, &[&upload(&xs, &[3, 4]), &upload(&pairs, &[5, 2])]);
    let want: Vec<f32> = pairs
        .chunks(2)
        .map(|p| xs[(p[0] * 4 + p[1]) as usize])
        .collect();
    assert_eq!(got, want);
}

fn row_scatter() -> ScatterDims {
    ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    }
}

#[test]
fn scatter_add_accumulates_repeated_rows() {
    let b = Builder::new("scatter_add");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 2]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[3]), "i");
    let u = b.parameter(2, Shape::of::<f32>(&[3, 2]), "u");
    let out = b.scatter(
        &[&x],
        &i,
        &[&u],
        &row_scatter(),
        false,
        false,
        |old, new| vec![&old[0] + &new[0]],
    );
    let m = b.build(&out[0]).unwrap();
    let xs = [1f32; 8];
    let idx = [2i32, 0, 2];
    let us = [1f32, 2., 3., 4., 5., 6.];
    let got = run1::<f32>(
        &m,
        &[
            &upload(&xs, &[4, 2]),
            &upload(&idx, &[3]),
            &upload(&us, &[3, 2]),
        ],
    );
    let mut want = xs.to_vec();
    for (k, r) in idx.iter().enumerate() {
        for c in 0..2 {
            want[*r as usize * 2 + c] += us[k * 2 + c];
        }
    }
    assert_eq!(got, want);
}

#[test]
fn a_scatter_combiner_uses_an_outside_scalar() {
    let b = Builder::new("scatter_scaled");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 2]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[2]), "i");
    let u = b.parameter(2, Shape::of::<f32>(&[2, 2]), "u");
    let k = b.parameter(3, Shape::of::<f32>(&[]), "k");
    let out = b.scatter(&[&x], &i, &[&u], &row_scatter(), true, true, |old, new| {
        vec![&old[0] + &(&new[0] * &k)]
    });
    let m = b.build(&out[0]).unwrap();
    let got = run1::<f32>(
        &m,
        &[
            &upload(&[0f32; 8], &[4, 2]),
            &upload(&[1i32, 3], &[2]),
            &upload(&[1f32, 2., 3., 4.], &[2, 2]),
            &upload(&[10f32], &[]),
        ],
    );
    assert_eq!(got, vec![0., 0., 10., 20., 0., 0., 30., 40.]);
    // Modules with gather and scatter read back through the checks of foreign modules.
    client()
        .compile_hlo_bytes(&m.to_bytes(), &xlaclient::CompileOptions::new())
        .unwrap();
}

#[test]
fn scatter_rule_errors() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[4, 2]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[3]), "i");
    let u = b.parameter(2, Shape::of::<f32>(&[2, 2]), "u"); // 2 rows for 3 indices
    let out = b.scatter(&[&x], &i, &[&u], &row_scatter(), false, false, |o, n| {
        vec![&o[0] + &n[0]]
    });
    let e = b.build(&out[0]).unwrap_err().to_string();
    assert!(e.contains("scatter"), "{e}");
}

/// Gather and scatter with batching dimensions (what `vmap` of an indexing op
/// gives): batch row `b` reads and writes only its own slice of the operand.
#[test]
fn batched_gather_and_scatter_stay_in_their_batch_row() {
    let (nb, n, d, k) = (3usize, 5usize, 2usize, 4usize);
    let xs: Vec<f32> = (0..nb * n * d).map(|v| v as f32).collect();
    let idx: Vec<i32> = vec![0, 4, 4, 1, 2, 2, 3, 0, 9, -3, 1, 4]; // 9 and -3 clamp
    let us: Vec<f32> = (0..nb * k).map(|v| 1.0 + v as f32).collect();

    let b = Builder::new("batched");
    let x = b.parameter(0, Shape::of::<f32>(&[3, 5, 2]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[3, 4]), "i");
    let u = b.parameter(2, Shape::of::<f32>(&[3, 4]), "u");
    let gdims = GatherDims {
        offset_dims: vec![2],
        collapsed_slice_dims: vec![1],
        start_index_map: vec![1],
        index_vector_dim: 2,
        operand_batching_dims: vec![0],
        start_indices_batching_dims: vec![0],
    };
    let g = x.gather(&i, &gdims, &[1, 1, 2], false);
    assert_eq!(g.dims().unwrap(), vec![3, 4, 2]);
    let sdims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![1],
        scatter_dims_to_operand_dims: vec![1],
        index_vector_dim: 2,
        input_batching_dims: vec![0],
        scatter_indices_batching_dims: vec![0],
    };
    let zeros = b.zeros(xlaclient::ElementType::F32, &[3, 5]);
    let s = b.scatter(&[&zeros], &i, &[&u], &sdims, false, false, |o, v| {
        vec![&o[0] + &v[0]]
    });
    let m = b.build_tuple(&[&g, &s[0]]).unwrap();
    let out = run(
        &m,
        &[
            &upload(&xs, &[3, 5, 2]),
            &upload(&idx, &[3, 4]),
            &upload(&us, &[3, 4]),
        ],
    );
    let mut want_g = Vec::new();
    for bi in 0..nb {
        for ki in 0..k {
            let r = idx[bi * k + ki].clamp(0, n as i32 - 1) as usize;
            for c in 0..d {
                want_g.push(xs[(bi * n + r) * d + c]);
            }
        }
    }
    assert_eq!(fetch::<f32>(&out[0], &[3, 4, 2], "gather"), want_g);
    // Scatter skips out-of-range updates (9 and -3) instead of clamping them.
    let mut want_s = vec![0f32; nb * n];
    for bi in 0..nb {
        for ki in 0..k {
            let r = idx[bi * k + ki];
            if (0..n as i32).contains(&r) {
                want_s[bi * n + r as usize] += us[bi * k + ki];
            }
        }
    }
    assert_eq!(fetch::<f32>(&out[1], &[3, 5], "scatter"), want_s);
    // The batching dimensions survive a round trip through a foreign proto.
    client()
        .compile_hlo_bytes(&m.to_bytes(), &xlaclient::CompileOptions::new())
        .unwrap();
    assert!(m.to_hlo_text().contains("operand_batching_dims={0}"));

    // Batch axes of different sizes are a build error naming the rule.
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 5, 2]), "x");
    let i = b.parameter(1, Shape::of::<i32>(&[3, 4]), "i");
    let e = b
        .build(&x.gather(&i, &gdims, &[1, 1, 2], false))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gather") && e.contains("batch axes differ"),
        "{e}"
    );
}

/// `take` and `take_along_axis` in each mode, as JAX 0.10.2 defines them: fill
/// (the default: negative from the end, still out of range NaN / the signed
/// minimum), clip and wrap; plain-Rust references.
#[test]
fn take_modes_are_jaxs() {
    use xlaclient::TakeMode;
    let xs: Vec<f32> = (0..5).map(|v| v as f32 * 10.0).collect();
    let ys: Vec<i32> = (0..5).map(|v| v * 10).collect();
    let idx = [0i32, 4, -1, -5, 5, -6, 100, 2];
    let b = Builder::new("modes");
    let x = b.parameter(0, Shape::of::<f32>(&[5]), "x");
    let y = b.parameter(1, Shape::of::<i32>(&[5]), "y");
    let i = b.parameter(2, Shape::of::<i32>(&[8]), "i");
    let outs = [
        x.take(&i, 0),
        x.take_with(&i, 0, TakeMode::Clip),
        x.take_with(&i, 0, TakeMode::Wrap),
        y.take(&i, 0),
        x.reshape(&[1, 5]).take_along_axis(&i.reshape(&[1, 8]), 1),
    ];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let out = run(
        &m,
        &[&upload(&xs, &[5]), &upload(&ys, &[5]), &upload(&idx, &[8])],
    );
    let fill = |k: i32| -> Option<usize> {
        let k = if k < 0 { k + 5 } else { k };
        (0..5).contains(&k).then_some(k as usize)
    };
    let want_fill: Vec<f32> = idx
        .iter()
        .map(|k| fill(*k).map_or(f32::NAN, |j| xs[j]))
        .collect();
    let got: Vec<f32> = out[0].to_vec().unwrap();
    for (g, w) in got.iter().zip(&want_fill) {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "fill {got:?} vs {want_fill:?}"
        );
    }
    let clip: Vec<f32> = idx.iter().map(|k| xs[(*k).clamp(0, 4) as usize]).collect();
    assert_eq!(out[1].to_vec::<f32>().unwrap(), clip);
    let wrap: Vec<f32> = idx.iter().map(|k| xs[k.rem_euclid(5) as usize]).collect();
    assert_eq!(out[2].to_vec::<f32>().unwrap(), wrap);
    let ints: Vec<i32> = idx
        .iter()
        .map(|k| fill(*k).map_or(i32::MIN, |j| ys[j]))
        .collect();
    assert_eq!(out[3].to_vec::<i32>().unwrap(), ints);
    let along: Vec<f32> = out[4].to_vec().unwrap();
    for (g, w) in along.iter().zip(&want_fill) {
        assert!(g == w || (g.is_nan() && w.is_nan()), "along {along:?}");
    }
}

#[test]
fn take_along_axis_matches_numpy() {
    // q[4,3], a[4,2] along axis 1; and along axis 0 with a[2,3].
    let qs: Vec<f32> = (0..12).map(|v| v as f32 * 1.5).collect();
    for (axis, idims, idx) in [
        (1i64, [4i64, 2], vec![2i32, 0, 1, 1, 0, 2, 5, -1]),
        (0, [2, 3], vec![3, 0, 1, 2, 2, 0]),
    ] {
        let b = Builder::new("tala");
        let q = b.parameter(0, Shape::of::<f32>(&[4, 3]), "q");
        let a = b.parameter(1, Shape::of::<i32>(&idims), "a");
        let m = b
            .build(&q.take_along_axis_with(&a, axis, xlaclient::TakeMode::Clip))
            .unwrap();
        let got = run1::<f32>(&m, &[&upload(&qs, &[4, 3]), &upload(&idx, &idims)]);
        let mut want = Vec::new();
        for i in 0..idims[0] as usize {
            for j in 0..idims[1] as usize {
                let k = idx[i * idims[1] as usize + j];
                let (r, c) = if axis == 1 {
                    (i, k.clamp(0, 2) as usize)
                } else {
                    (k.clamp(0, 3) as usize, j)
                };
                want.push(qs[r * 3 + c]);
            }
        }
        assert_eq!(got, want, "axis {axis}");
    }
    let b = Builder::new("bad");
    let q = b.parameter(0, Shape::of::<f32>(&[4, 3]), "q");
    let a = b.parameter(1, Shape::of::<i32>(&[4]), "a");
    let e = b.build(&q.take_along_axis(&a, 1)).unwrap_err().to_string();
    assert!(e.contains("take_along_axis") && e.contains("rank"), "{e}");
}
