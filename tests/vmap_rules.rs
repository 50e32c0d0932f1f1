//! The batching and tangent rules added for issue 20 (gather, scatter, dynamic
//! slices with per-example starts, convolution; the tangents of sort, cholesky,
//! triangular-solve, max/min pooling, select-and-scatter, map, scatter, reduce):
//! `vmap(f)` against `f` run example by example on the plugin and the results
//! stacked; `jvp` against central finite differences (in f64) and against the
//! crate's `vjp` by the identity `<u, J v> = <Jᵀ u, v>`.

mod common;

use common::{Rng, run, upload};
use xlaclient::{
    Builder, Comparison, ConvAttrs, ConvDims, ElementType, GatherDims, Op, ScatterDims, Shape,
    Transpose, TriangularSolveOptions, Vmap, WindowDim,
};

/// Test data of one argument.
#[derive(Clone, Debug)]
enum Data {
    F(Vec<f32>),
    I(Vec<i32>),
}

/// One argument of a function to `vmap`: its one-example dims, its batch axis
/// (`None`: shared) and its data (with the batch axis where it is batched).
struct Arg {
    dims: Vec<i64>,
    axis: Option<usize>,
    data: Data,
}

fn batched_dims(dims: &[i64], axis: Option<usize>, size: i64) -> Vec<i64> {
    let mut d = dims.to_vec();
    if let Some(a) = axis {
        d.insert(a, size);
    }
    d
}

/// A float argument drawn uniformly from [-1, 1).
fn f(rng: &mut Rng, dims: &[i64], axis: Option<usize>, size: i64) -> Arg {
    let bd = batched_dims(dims, axis, size);
    let n = bd.iter().product::<i64>() as usize;
    Arg {
        dims: dims.to_vec(),
        axis,
        data: Data::F(rng.vec(n, -1.0, 1.0)),
    }
}

/// An s32 argument drawn from `lo..hi`.
fn i(rng: &mut Rng, dims: &[i64], axis: Option<usize>, size: i64, lo: i32, hi: i32) -> Arg {
    let bd = batched_dims(dims, axis, size);
    let n = bd.iter().product::<i64>() as usize;
    Arg {
        dims: dims.to_vec(),
        axis,
        data: Data::I(
            (0..n)
                .map(|_| lo + (rng.next_u64() % (hi - lo) as u64) as i32)
                .collect(),
        ),
    }
}

/// Element `at` along `axis` of a row-major array.
fn slice_axis<T: Copy>(v: &[T], dims: &[i64], axis: usize, at: i64) -> Vec<T> {
    let outer: i64 = dims[..axis].iter().product();
    let n = dims[axis];
    let inner: i64 = dims[axis + 1..].iter().product();
    let mut out = Vec::with_capacity((outer * inner) as usize);
    for o in 0..outer {
        for k in 0..inner {
            out.push(v[((o * n + at) * inner + k) as usize]);
        }
    }
    out
}

fn param(b: &Builder, k: usize, data: &Data, dims: &[i64]) -> Op {
    match data {
        Data::F(_) => b.parameter(k, Shape::of::<f32>(dims), &format!("a{k}")),
        Data::I(_) => b.parameter(k, Shape::of::<i32>(dims), &format!("a{k}")),
    }
}

fn up(data: &Data, dims: &[i64]) -> xlaclient::Buffer {
    match data {
        Data::F(v) => upload(v, dims),
        Data::I(v) => upload(v, dims),
    }
}

/// `vmap(f)` over `args` (batch size `size`, output batched at 0) against `f`
/// run on each example and the outputs stacked: equal within `tol`.
fn check_vmap(what: &str, size: i64, args: &[Arg], f: impl Fn(&Builder, &[Op]) -> Op, tol: f32) {
    // The batched program.
    let b = Builder::new("batched");
    let ps: Vec<Op> = args
        .iter()
        .enumerate()
        .map(|(k, a)| param(&b, k, &a.data, &batched_dims(&a.dims, a.axis, size)))
        .collect();
    let axes: Vec<Option<i64>> = args.iter().map(|a| a.axis.map(|x| x as i64)).collect();
    let y = b.vmap(&Vmap::new().in_axes(axes), ps, |bb, xs| {
        f(bb, &xs).convert(ElementType::F32)
    });
    let m = b
        .build(&y)
        .unwrap_or_else(|e| panic!("{what}: the batched program: {e}"));
    let bufs: Vec<_> = args
        .iter()
        .map(|a| up(&a.data, &batched_dims(&a.dims, a.axis, size)))
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let got = run(&m, &refs)[0].to_vec::<f32>().unwrap();
    // One example at a time.
    let b1 = Builder::new("one");
    let ps: Vec<Op> = args
        .iter()
        .enumerate()
        .map(|(k, a)| param(&b1, k, &a.data, &a.dims))
        .collect();
    let y1 = f(&b1, &ps).convert(ElementType::F32);
    let m1 = b1
        .build(&y1)
        .unwrap_or_else(|e| panic!("{what}: the one-example program: {e}"));
    let exe = common::client().compile(&m1).unwrap();
    let mut want = Vec::new();
    for e in 0..size {
        let bufs: Vec<_> = args
            .iter()
            .map(|a| match a.axis {
                None => up(&a.data, &a.dims),
                Some(ax) => {
                    let bd = batched_dims(&a.dims, a.axis, size);
                    let d = match &a.data {
                        Data::F(v) => Data::F(slice_axis(v, &bd, ax, e)),
                        Data::I(v) => Data::I(slice_axis(v, &bd, ax, e)),
                    };
                    up(&d, &a.dims)
                }
            })
            .collect();
        let refs: Vec<_> = bufs.iter().collect();
        want.extend(exe.execute(&refs).unwrap()[0].to_vec::<f32>().unwrap());
    }
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{k}]: vmap {g}, per example {w}"
        );
    }
}

/// `jvp` of `f` (on f64 arrays of `dims`) at random points and directions
/// against central finite differences, and against `vjp` by
/// `<u, J v> = <Jᵀ u, v>`. `draw` makes the primal point (some ops need a
/// particular one, e.g. a positive definite matrix).
fn check_jvp(
    what: &str,
    dims: &[Vec<i64>],
    draw: impl Fn(&mut Rng, usize, usize) -> Vec<f64>,
    f: impl Fn(&Builder, &[Op]) -> Op,
    tol: f64,
) {
    let b = Builder::new("jvp");
    let m = dims.len();
    let xs: Vec<Op> = dims
        .iter()
        .enumerate()
        .map(|(k, d)| b.parameter(k, Shape::of::<f64>(d), &format!("x{k}")))
        .collect();
    let vs: Vec<Op> = dims
        .iter()
        .enumerate()
        .map(|(k, d)| b.parameter(m + k, Shape::of::<f64>(d), &format!("v{k}")))
        .collect();
    let y = f(&b, &xs);
    let yd = y.dims().unwrap_or_else(|e| panic!("{what}: {e}"));
    let u = b.parameter(2 * m, Shape::of::<f64>(&yd), "u");
    let xr: Vec<&Op> = xs.iter().collect();
    let vr: Vec<&Op> = vs.iter().collect();
    let t = b.jvp(&[&y], &xr, &vr).remove(0);
    let g = b.vjp(&[&y], &[&u], &xr);
    let mut outs = vec![&y, &t];
    outs.extend(g.iter());
    let prog = b
        .build_tuple(&outs)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let exe = common::client().compile(&prog).unwrap();
    let mut rng = Rng(0x5eed ^ what.len() as u64);
    for trial in 0..2 {
        let x: Vec<Vec<f64>> = dims
            .iter()
            .enumerate()
            .map(|(k, d)| draw(&mut rng, k, d.iter().product::<i64>() as usize))
            .collect();
        let v: Vec<Vec<f64>> = dims
            .iter()
            .map(|d| {
                (0..d.iter().product::<i64>())
                    .map(|_| rng.uniform(-1.0, 1.0) as f64)
                    .collect()
            })
            .collect();
        let uu: Vec<f64> = (0..yd.iter().product::<i64>())
            .map(|_| rng.uniform(-1.0, 1.0) as f64)
            .collect();
        let go = |x: &[Vec<f64>]| {
            let mut bufs: Vec<_> = x.iter().zip(dims).map(|(v, d)| upload(v, d)).collect();
            bufs.extend(v.iter().zip(dims).map(|(v, d)| upload(v, d)));
            bufs.push(upload(&uu, &yd));
            let refs: Vec<_> = bufs.iter().collect();
            exe.execute(&refs)
                .unwrap()
                .iter()
                .map(|o| o.to_vec::<f64>().unwrap())
                .collect::<Vec<_>>()
        };
        let out = go(&x);
        let tan = &out[1];
        assert!(
            tan.iter().any(|t| t.abs() > 1e-8),
            "{what}: a zero tangent tests nothing"
        );
        let h = 1e-6;
        let shift = |s: f64| -> Vec<Vec<f64>> {
            x.iter()
                .zip(&v)
                .map(|(a, d)| a.iter().zip(d).map(|(a, d)| a + s * d).collect())
                .collect()
        };
        let (p, q) = (go(&shift(h))[0].clone(), go(&shift(-h))[0].clone());
        for (k, t) in tan.iter().enumerate() {
            let fd = (p[k] - q[k]) / (2.0 * h);
            assert!(
                (fd - t).abs() <= tol * (1.0 + fd.abs()),
                "{what} (trial {trial})[{k}]: jvp {t}, finite differences {fd}"
            );
        }
        let lhs: f64 = uu.iter().zip(tan).map(|(a, b)| a * b).sum();
        let rhs: f64 = (0..m)
            .map(|k| {
                out[2 + k]
                    .iter()
                    .zip(&v[k])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum();
        assert!(
            (lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()),
            "{what} (trial {trial}): <u, J v> = {lhs}, <Jt u, v> = {rhs}"
        );
    }
}

fn uniform(rng: &mut Rng, _k: usize, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(-1.0, 1.0) as f64).collect()
}

// ---- Batching ----

#[test]
fn vmap_of_gather_equals_gathering_per_example() {
    let mut rng = Rng(1);
    let n = 3;
    // Blocks of 2×2 at (row, col) pairs, clamped when out of bounds.
    let blocks = |_: &Builder, a: &[Op]| {
        let dims = GatherDims {
            offset_dims: vec![1, 2],
            collapsed_slice_dims: vec![],
            start_index_map: vec![0, 1],
            index_vector_dim: 1,
            ..Default::default()
        };
        a[0].gather(&a[1], &dims, &[2, 2], false)
    };
    // Rows at a vector of indices (an implicit index vector axis).
    let rows = |_: &Builder, a: &[Op]| {
        let dims = GatherDims {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        a[0].gather(&a[1], &dims, &[1, 3], false)
    };
    for (xa, ia) in [
        (Some(0), None),
        (None, Some(0)),
        (Some(0), Some(0)),
        (Some(1), Some(1)),
        (Some(2), Some(0)),
        (None, Some(2)),
    ] {
        let args = [
            f(&mut rng, &[5, 4], xa, n),
            i(&mut rng, &[3, 2], ia, n, -1, 6),
        ];
        check_vmap(
            &format!("gather blocks {xa:?} {ia:?}"),
            n,
            &args,
            blocks,
            0.0,
        );
        let ia = ia.map(|a| a.min(1));
        let args = [f(&mut rng, &[6, 3], xa, n), i(&mut rng, &[4], ia, n, -2, 8)];
        check_vmap(&format!("gather rows {xa:?} {ia:?}"), n, &args, rows, 0.0);
    }
    // A one-example gather that already has batching dimensions (each row of
    // the operand indexed by its own row of indices).
    let batched_rows = |_: &Builder, a: &[Op]| {
        let dims = GatherDims {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![],
            start_index_map: vec![1],
            index_vector_dim: 1,
            operand_batching_dims: vec![0],
            start_indices_batching_dims: vec![0],
        };
        a[0].gather(&a[1], &dims, &[1, 2], false)
    };
    for (xa, ia) in [(Some(0), None), (None, Some(1)), (Some(2), Some(0))] {
        let args = [
            f(&mut rng, &[3, 5], xa, n),
            i(&mut rng, &[3, 1], ia, n, -1, 6),
        ];
        check_vmap(
            &format!("gather with batching dims {xa:?} {ia:?}"),
            n,
            &args,
            batched_rows,
            0.0,
        );
    }
    // take_along_axis and take, as users write them.
    for (xa, ia) in [(Some(0), Some(0)), (Some(1), None), (None, Some(1))] {
        let args = [
            f(&mut rng, &[4, 5], xa, n),
            i(&mut rng, &[4, 2], ia, n, 0, 5),
        ];
        check_vmap(
            "take_along_axis",
            n,
            &args,
            |_, a| a[0].take_along_axis(&a[1], 1),
            0.0,
        );
    }
}

#[test]
fn vmap_of_scatter_equals_scattering_per_example() {
    let mut rng = Rng(2);
    let n = 3;
    // Rows of updates added at row indices (out-of-bounds rows skipped).
    let add_rows = |b: &Builder, a: &[Op]| {
        let dims = ScatterDims {
            update_window_dims: vec![1],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        b.scatter(&[&a[0]], &a[1], &[&a[2]], &dims, false, false, |o, u| {
            vec![&o[0] + &u[0]]
        })
        .remove(0)
    };
    // Elements at (row, col) pairs combined by max.
    let max_at = |b: &Builder, a: &[Op]| {
        let dims = ScatterDims {
            update_window_dims: vec![],
            inserted_window_dims: vec![0, 1],
            scatter_dims_to_operand_dims: vec![1, 0],
            index_vector_dim: 0,
            ..Default::default()
        };
        b.scatter(&[&a[0]], &a[1], &[&a[2]], &dims, false, false, |o, u| {
            vec![o[0].max(&u[0])]
        })
        .remove(0)
    };
    let configs = [
        (Some(0), None, None),
        (None, Some(0), None),
        (None, None, Some(0)),
        (Some(0), Some(0), Some(0)),
        (Some(1), Some(1), Some(0)),
        (None, Some(1), Some(2)),
    ];
    for (xa, ia, ua) in configs {
        let args = [
            f(&mut rng, &[6, 3], xa, n),
            i(&mut rng, &[4, 1], ia, n, -1, 7),
            f(&mut rng, &[4, 3], ua, n),
        ];
        check_vmap(
            &format!("scatter-add {xa:?} {ia:?} {ua:?}"),
            n,
            &args,
            add_rows,
            1e-6,
        );
        let ua = ua.map(|a| a.min(1));
        let args = [
            f(&mut rng, &[4, 5], xa, n),
            i(&mut rng, &[2, 6], ia, n, -1, 5),
            f(&mut rng, &[6], ua, n),
        ];
        check_vmap(
            &format!("scatter-max {xa:?} {ia:?} {ua:?}"),
            n,
            &args,
            max_at,
            0.0,
        );
    }
    // Two arrays scattered together (keeping the pair with the larger key).
    let pairs = |b: &Builder, a: &[Op]| {
        let dims = ScatterDims {
            update_window_dims: vec![],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let out = b.scatter(
            &[&a[0], &a[1]],
            &a[2],
            &[&a[3], &a[4]],
            &dims,
            false,
            false,
            |o, u| {
                let bb = o[0].builder();
                let take = u[0].compare(&o[0], Comparison::Gt);
                vec![
                    bb.select(&take, &u[0], &o[0]),
                    bb.select(&take, &u[1], &o[1]),
                ]
            },
        );
        &out[0] + &(&out[1] * 10.0)
    };
    for (xa, ia, ua) in [
        (Some(0), None, Some(0)),
        (None, Some(0), None),
        (Some(1), Some(1), Some(0)),
    ] {
        let args = [
            f(&mut rng, &[6], xa, n),
            f(&mut rng, &[6], xa, n),
            i(&mut rng, &[5, 1], ia, n, -1, 7),
            f(&mut rng, &[5], ua, n),
            f(&mut rng, &[5], ua, n),
        ];
        check_vmap(
            &format!("scatter of pairs {xa:?} {ia:?} {ua:?}"),
            n,
            &args,
            pairs,
            0.0,
        );
    }
}

#[test]
fn vmap_of_dynamic_slices_with_per_example_starts_equals_per_example() {
    let mut rng = Rng(3);
    let n = 4;
    let ds = |_: &Builder, a: &[Op]| a[0].dynamic_slice(&[&a[1], &a[2]], &[3, 2]);
    let dus = |_: &Builder, a: &[Op]| a[0].dynamic_update_slice(&a[1], &[&a[2], &a[3]]);
    for (xa, s0, s1) in [
        (None, Some(0), Some(0)),
        (Some(0), Some(0), None),
        (Some(1), None, Some(0)),
        (Some(0), Some(0), Some(0)),
    ] {
        // Starts out of bounds on both sides: clamped as XLA clamps them.
        let args = [
            f(&mut rng, &[6, 5], xa, n),
            i(&mut rng, &[], s0, n, -2, 8),
            i(&mut rng, &[], s1, n, -2, 8),
        ];
        check_vmap(
            &format!("dynamic-slice {xa:?} {s0:?} {s1:?}"),
            n,
            &args,
            ds,
            0.0,
        );
        for ua in [None, Some(0), Some(2)] {
            let args = [
                f(&mut rng, &[6, 5], xa, n),
                f(&mut rng, &[3, 2], ua, n),
                i(&mut rng, &[], s0, n, -2, 8),
                i(&mut rng, &[], s1, n, -2, 8),
            ];
            check_vmap(
                &format!("dynamic-update-slice {xa:?} {ua:?} {s0:?} {s1:?}"),
                n,
                &args,
                dus,
                0.0,
            );
        }
    }
}

#[test]
fn vmap_of_convolution_equals_convolving_per_example() {
    let mut rng = Rng(4);
    let n = 3;
    // 1-D, channels last: input [2, 7, 4], kernel [3, 4 / groups, 6].
    let conv = |groups: i64, bgc: i64| {
        move |_: &Builder, a: &[Op]| {
            let attrs = ConvAttrs {
                window: vec![WindowDim {
                    padding_low: 1,
                    padding_high: 0,
                    ..WindowDim::new(3, 2)
                }],
                dims: ConvDims::channels_last(1),
                feature_group_count: groups,
                batch_group_count: bgc,
            };
            a[0].convolution(&a[1], &attrs)
        }
    };
    let configs = [
        (Some(0), None),
        (Some(2), None),
        (None, Some(0)),
        (None, Some(3)),
        (Some(0), Some(0)),
        (Some(1), Some(2)),
    ];
    for (la, ka) in configs {
        for g in [1, 2] {
            let args = [
                f(&mut rng, &[2, 7, 4], la, n),
                f(&mut rng, &[3, 4 / g, 6], ka, n),
            ];
            check_vmap(
                &format!("conv groups {g} {la:?} {ka:?}"),
                n,
                &args,
                conv(g, 1),
                1e-5,
            );
        }
        // Batch groups (the kernel gradient of a grouped convolution).
        let args = [
            f(&mut rng, &[4, 7, 3], la, n),
            f(&mut rng, &[3, 3, 4], ka, n),
        ];
        check_vmap(
            &format!("conv batch groups {la:?} {ka:?}"),
            n,
            &args,
            conv(1, 2),
            1e-5,
        );
    }
    // A 2-D convolution with the usual layout.
    let args = [
        f(&mut rng, &[1, 5, 5, 2], Some(0), n),
        f(&mut rng, &[3, 3, 2, 3], Some(0), n),
    ];
    check_vmap(
        "conv 2-D both",
        n,
        &args,
        |_, a| {
            a[0].conv_general_dilated(
                &a[1],
                &[1, 1],
                &[(1, 1), (1, 1)],
                &[1, 1],
                &[1, 1],
                &ConvDims::channels_last(2),
                1,
            )
        },
        1e-5,
    );
}

// ---- Tangents ----

/// Symmetric positive definite matrices (`m mᵀ + n I`) in the last two axes of
/// `dims`.
fn spd(rng: &mut Rng, dims: &[i64]) -> Vec<f64> {
    let n = dims[dims.len() - 1] as usize;
    let count = dims.iter().product::<i64>() as usize / (n * n);
    let mut out = Vec::with_capacity(count * n * n);
    for _ in 0..count {
        let m: Vec<f64> = (0..n * n).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
        for r in 0..n {
            for c in 0..n {
                let mut s: f64 = (0..n).map(|k| m[r * n + k] * m[c * n + k]).sum();
                if r == c {
                    s += n as f64;
                }
                out.push(s);
            }
        }
    }
    out
}

#[test]
fn jvp_of_sort_gathers_the_tangents_along_the_permutation() {
    let dims = [vec![3, 5], vec![3, 5]];
    // Keys and a carried operand, sorted along the rows.
    check_jvp(
        "sort",
        &dims,
        uniform,
        |b, x| {
            let s = b.sort(&[&x[0], &x[1]], 1, false, |l, r| {
                l[0].compare(&r[0], Comparison::Lt)
            });
            &s[0] + &s[1].sin()
        },
        1e-6,
    );
    check_jvp(
        "sort descending, axis 0",
        &dims[..1],
        uniform,
        |b, x| {
            b.sort(&[&x[0]], 0, true, |l, r| {
                l[0].compare(&r[0], Comparison::Gt)
            })
            .remove(0)
        },
        1e-6,
    );
}

#[test]
fn jvp_of_cholesky_matches_finite_differences_and_vjp() {
    for lower in [true, false] {
        for dims in [vec![3, 3], vec![2, 4, 4]] {
            check_jvp(
                &format!("cholesky lower={lower} {dims:?}"),
                std::slice::from_ref(&dims),
                |rng, _, _| spd(rng, &dims),
                |_, x| x[0].cholesky(lower),
                1e-5,
            );
        }
    }
}

#[test]
fn jvp_of_triangular_solve_matches_finite_differences_and_vjp_for_every_option() {
    // Well-conditioned triangles: a dominant diagonal.
    let draw = |rng: &mut Rng, k: usize, n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| {
                let v = rng.uniform(-1.0, 1.0) as f64;
                if k == 0 && i % 4 == i / 4 { v + 3.0 } else { v }
            })
            .collect()
    };
    for left_side in [true, false] {
        for lower in [true, false] {
            for unit_diagonal in [false, true] {
                for transpose_a in [Transpose::No, Transpose::Transpose, Transpose::Adjoint] {
                    let o = TriangularSolveOptions {
                        left_side,
                        lower,
                        unit_diagonal,
                        transpose_a,
                    };
                    let bd = if left_side { vec![4, 2] } else { vec![2, 4] };
                    check_jvp(
                        &format!("triangular-solve {o:?}"),
                        &[vec![4, 4], bd],
                        draw,
                        |_, x| x[0].triangular_solve(&x[1], o),
                        1e-5,
                    );
                }
            }
        }
    }
}

#[test]
fn jvp_of_max_and_min_pooling_takes_the_tangent_at_the_arg_max() {
    let window = [
        WindowDim::new(1, 1),
        WindowDim {
            padding_low: 1,
            padding_high: 1,
            ..WindowDim::new(3, 2)
        },
    ];
    check_jvp(
        "max pooling",
        &[vec![2, 7]],
        uniform,
        |b, x| x[0].reduce_window(&b.constant(f64::NEG_INFINITY), &window, |a, e| a.max(e)),
        1e-6,
    );
    check_jvp(
        "min pooling",
        &[vec![2, 7]],
        uniform,
        |b, x| x[0].reduce_window(&b.constant(f64::INFINITY), &window, |a, e| a.min(e)),
        1e-6,
    );
    // Overlapping windows, 2-D.
    let w2 = [WindowDim::new(2, 1), WindowDim::new(3, 1)];
    check_jvp(
        "max pooling 2-D",
        &[vec![4, 5]],
        uniform,
        |b, x| x[0].reduce_window(&b.constant(f64::NEG_INFINITY), &w2, |a, e| a.max(e)),
        1e-6,
    );
}

#[test]
fn jvp_of_select_and_scatter_is_linear_in_the_source() {
    let window = [WindowDim::new(2, 2), WindowDim::new(3, 1)];
    check_jvp(
        "select-and-scatter",
        &[vec![4, 5], vec![2, 3]],
        uniform,
        |b, x| {
            x[0].select_and_scatter(
                &x[1],
                &b.constant(0f64),
                &window,
                |a, c| a.compare(c, Comparison::Ge),
                |a, c| a + c,
            )
        },
        1e-6,
    );
}

#[test]
fn jvp_of_map_runs_forward_mode_through_the_body() {
    check_jvp(
        "map",
        &[vec![2, 3], vec![2, 3]],
        uniform,
        |b, x| b.map(&[&x[0], &x[1]], |s| (&s[0] * &s[1]).sin() + s[0].exp()),
        1e-6,
    );
}

#[test]
fn jvp_of_a_product_and_of_scatters_that_replace_or_keep_the_extremum() {
    check_jvp(
        "reduce product",
        &[vec![3, 4]],
        uniform,
        |_, x| x[0].prod(&[1], false),
        1e-6,
    );
    check_jvp(
        "reduce product, all axes",
        &[vec![2, 3]],
        uniform,
        |_, x| x[0].prod(&[0, 1], false),
        1e-6,
    );
    let dims = ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let scatter = |unique: bool, idx: Vec<i32>, combine: fn(&Op, &Op) -> Op| {
        let dims = dims.clone();
        move |b: &Builder, x: &[Op]| {
            let i = b.constant_array(&idx, &[4, 1]);
            b.scatter(&[&x[0]], &i, &[&x[1]], &dims, false, unique, |o, u| {
                vec![combine(&o[0], &u[0])]
            })
            .remove(0)
        }
    };
    let shapes = [vec![6, 3], vec![4, 3]];
    check_jvp(
        "scatter replace",
        &shapes,
        uniform,
        scatter(true, vec![4, 0, 2, 7], |_, u| u.clone()),
        1e-6,
    );
    check_jvp(
        "scatter max",
        &shapes,
        uniform,
        scatter(false, vec![1, 3, 1, 5], |o, u| o.max(u)),
        1e-6,
    );
    check_jvp(
        "scatter min",
        &shapes,
        uniform,
        scatter(false, vec![2, 2, 0, 5], |o, u| o.min(u)),
        1e-6,
    );
}

#[test]
fn the_sharding_constraint_batches_and_has_a_tangent_other_kernels_are_errors() {
    use xlaclient::{ClientExt, Mesh, P, ShardedArray};
    let c = common::client();
    let mesh = Mesh::new(c, &[("model", 2)]).unwrap();
    // vmap over rows of [3, 4, 6] of a function constraining [4, 6] to `model`
    // columns, and its jvp along v: the batch axis gets one tile.
    let dims = [3i64, 4, 6];
    let shape = Shape::of::<f32>(&dims);
    let spec = P::replicated();
    let f = c
        .jit_sharded(
            "vmap_constraint",
            &mesh,
            &(shape.clone(), shape.clone()),
            &(spec.clone(), spec.clone()),
            &(spec.clone(), spec.clone()),
            |b, (x, v): (Op, Op)| {
                b.vmap(&Vmap::new(), (x, v), |b, (x, v)| {
                    let g = |x: Op| {
                        (&x * 3.0).with_sharding_constraint(&mesh, &P::new([None, Some("model")]))
                    };
                    b.jvp_fn(x, v, g)
                })
            },
        )
        .unwrap();
    let text = f.computation().to_hlo_text();
    assert_eq!(
        text.matches("custom_call_target=\"Sharding\", sharding={devices=[1,1,2]0,1}")
            .count(),
        2,
        "{text}"
    );
    let mut rng = Rng(9);
    let xs = rng.vec(72, -1.0, 1.0);
    let vs = rng.vec(72, -1.0, 1.0);
    let x = ShardedArray::upload(&mesh, &spec, &xs, &dims).unwrap();
    let v = ShardedArray::upload(&mesh, &spec, &vs, &dims).unwrap();
    let (y, t) = f.call(&(x, v)).unwrap();
    let (y, t) = (y.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    for k in 0..72 {
        assert!((y[k] - 3.0 * xs[k]).abs() < 1e-6, "y[{k}]");
        assert!((t[k] - 3.0 * vs[k]).abs() < 1e-6, "t[{k}]");
    }
    // An opaque kernel: an error naming it, under vmap and under jvp.
    let attrs = xlaclient::ops::misc::CustomCallAttrs {
        target: "my_kernel".into(),
        opaque: Vec::new(),
        api_version: 1,
        has_side_effect: false,
    };
    let b = Builder::new("opaque");
    let xs = b.parameter(0, Shape::of::<f32>(&[3, 2]), "xs");
    let y = b.vmap(&Vmap::new(), xs.clone(), |b, x| {
        b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[2]))
    });
    let e = b.build(&y).unwrap_err().to_string();
    assert!(e.contains("my_kernel") && e.contains("batch"), "{e}");
    let b = Builder::new("opaque_jvp");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let y = b.custom_call(&attrs, &[&x], Shape::of::<f32>(&[2]));
    let t = b.jvp(&[&y], &[&x], &[&x]).remove(0);
    let e = b.build(&t).unwrap_err().to_string();
    assert!(e.contains("my_kernel") && e.contains("tangent"), "{e}");
}

/// A function of one array.
type OneArg = fn(&Builder, &Op) -> Op;

#[test]
fn vmap_of_the_new_tangent_rules_equals_their_jvp_per_example() {
    let mut rng = Rng(7);
    let n = 3;
    let tol = 1e-5;
    // jvp of `g` at x along v (two [dims] arguments), per example.
    let tangent = |g: fn(&Builder, &Op) -> Op| {
        move |b: &Builder, a: &[Op]| {
            let x = a[0].clone();
            let y = g(b, &x);
            b.jvp(&[&y], &[&x], &[&a[1]]).remove(0)
        }
    };
    let two = |rng: &mut Rng, dims: &[i64], ax: Option<usize>, av: Option<usize>| {
        [f(rng, dims, ax, n), f(rng, dims, av, n)]
    };
    let cases: Vec<(&str, Vec<i64>, OneArg)> = vec![
        ("sort", vec![2, 5], |b, x| {
            b.sort(&[x], 1, false, |l, r| l[0].compare(&r[0], Comparison::Lt))
                .remove(0)
        }),
        ("cholesky", vec![3, 3], |b, x| {
            let eye = b
                .iota(ElementType::S32, &[3, 3], 0)
                .compare(&b.iota(ElementType::S32, &[3, 3], 1), Comparison::Eq);
            let a = x.matmul(&x.transpose(&[1, 0])) + eye.convert(ElementType::F32) * 3.0;
            a.cholesky(true)
        }),
        ("triangular-solve", vec![3, 3], |b, x| {
            let eye = b
                .iota(ElementType::S32, &[3, 3], 0)
                .compare(&b.iota(ElementType::S32, &[3, 3], 1), Comparison::Eq);
            let a = x + &(eye.convert(ElementType::F32) * 3.0);
            let o = TriangularSolveOptions {
                left_side: false,
                lower: true,
                unit_diagonal: false,
                transpose_a: Transpose::Transpose,
            };
            a.triangular_solve(&x.sin(), o)
        }),
        ("max pooling", vec![2, 7], |b, x| {
            let w = [WindowDim::new(1, 1), WindowDim::new(3, 2)];
            x.reduce_window(&b.constant(f32::NEG_INFINITY), &w, |a, e| a.max(e))
        }),
        ("select-and-scatter", vec![4, 4], |b, x| {
            let w = [WindowDim::new(2, 2), WindowDim::new(2, 2)];
            let s = x.slice(&[0, 0], &[2, 2], &[1, 1]).exp();
            x.select_and_scatter(
                &s,
                &b.constant(0f32),
                &w,
                |a, c| a.compare(c, Comparison::Ge),
                |a, c| a + c,
            )
        }),
        ("map", vec![2, 3], |b, x| {
            b.map(&[x, &x.cos()], |s| (&s[0] * &s[1]).sin())
        }),
        ("product", vec![2, 3], |_, x| x.prod(&[1], false)),
        ("scatter max", vec![6, 3], |b, x| {
            let idx = b.constant_array(&[1i32, 3, 1, 5], &[4, 1]);
            let dims = ScatterDims {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                index_vector_dim: 1,
                ..Default::default()
            };
            let u = x.slice(&[0, 0], &[4, 3], &[1, 1]).cos();
            b.scatter(&[x], &idx, &[&u], &dims, false, false, |o, u| {
                vec![o[0].max(&u[0])]
            })
            .remove(0)
        }),
    ];
    for (what, dims, g) in cases {
        for (ax, av) in [(Some(0), Some(0)), (Some(1), None), (None, Some(2))] {
            let args = two(&mut rng, &dims, ax, av);
            check_vmap(
                &format!("vmap of jvp of {what} {ax:?} {av:?}"),
                n,
                &args,
                tangent(g),
                tol,
            );
        }
    }
}
