//! Property tests on the real plugin: for random shapes (rank 0..=3, dims 1..=4) and
//! data, broadcasting binary ops, reshape and transpose round trips, reduce_sum over
//! random axis subsets and batched dot_general agree with plain-Rust references, and
//! the shape the builder infers equals the shape of the buffer XLA returns.

mod common;
use common::*;

use proptest::prelude::*;
use proptest::test_runner::Config;
use xlaclient::{Buffer, Builder, DotDims, Op, Shape};

/// Few cases: every case compiles a program. No regression files are written.
fn config() -> Config {
    Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    }
}

/// The builder's inferred shape must be the shape of XLA's output buffer.
fn check_shape(op: &Op, buf: &Buffer) -> Result<(), TestCaseError> {
    let inferred = op.shape().expect("op built");
    let actual = buf.shape().expect("buffer shape");
    prop_assert_eq!(inferred, actual);
    Ok(())
}

fn dims_strategy() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..=4, 0..=3)
}

/// An output shape and two operand shapes that numpy-broadcast to it: each operand
/// keeps a suffix of the output's axes, some of them replaced by 1.
fn broadcast_pair() -> impl Strategy<Value = (Vec<i64>, Vec<i64>, Vec<i64>)> {
    dims_strategy().prop_flat_map(|out| {
        let r = out.len();
        let operand = move |out: Vec<i64>| {
            (0..=r, prop::collection::vec(any::<bool>(), r)).prop_map(move |(rank, ones)| {
                (r - rank..r)
                    .map(|i| if ones[i] { 1 } else { out[i] })
                    .collect::<Vec<i64>>()
            })
        };
        (Just(out.clone()), operand(out.clone()), operand(out))
    })
}

fn bcast_at(data: &[f32], d: &[i64], out: &[i64], idx: &[i64]) -> f32 {
    let off = out.len() - d.len();
    let ii: Vec<i64> = d
        .iter()
        .enumerate()
        .map(|(k, dk)| if *dk == 1 { 0 } else { idx[off + k] })
        .collect();
    data[ravel(&ii, d)]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn broadcasting_add_and_mul_match_reference(
        (outer, xd, yd) in broadcast_pair(),
        seed in any::<u64>(),
    ) {
        // Numpy's result shape: the larger rank; per axis the size that is not 1.
        let rank = xd.len().max(yd.len());
        let at = |d: &[i64], i: usize| if i + d.len() >= rank { d[i + d.len() - rank] } else { 1 };
        let out: Vec<i64> = (0..rank).map(|i| at(&xd, i).max(at(&yd, i))).collect();
        // (Both operands may have 1 where `outer` does not, so `out` can be smaller.)
        prop_assert!(out.iter().zip(&outer[outer.len() - rank..]).all(|(o, w)| o == w || *o == 1));
        let mut rng = Rng(seed);
        let x = rng.vec(count(&xd), -8.0, 8.0);
        let y = rng.vec(count(&yd), -8.0, 8.0);
        let b = Builder::new("prop_bcast");
        let px = b.parameter(0, Shape::of::<f32>(&xd), "x");
        let py = b.parameter(1, Shape::of::<f32>(&yd), "y");
        let (sum, prod) = (&px + &py, &px * &py);
        prop_assert_eq!(sum.dims().unwrap(), out.clone());
        let module = b.build_tuple(&[&sum, &prod]).unwrap();
        let res = run(&module, &[&upload(&x, &xd), &upload(&y, &yd)]);
        check_shape(&sum, &res[0])?;
        check_shape(&prod, &res[1])?;
        let (mut ws, mut wp) = (Vec::new(), Vec::new());
        for flat in 0..count(&out) as i64 {
            let idx = unravel(flat, &out);
            let (a, c) = (bcast_at(&x, &xd, &out, &idx), bcast_at(&y, &yd, &out, &idx));
            ws.push(a + c);
            wp.push(a * c);
        }
        // One IEEE operation per element: exact.
        prop_assert_eq!(res[0].to_vec::<f32>().unwrap(), ws);
        prop_assert_eq!(res[1].to_vec::<f32>().unwrap(), wp);
    }

    #[test]
    fn reshape_and_transpose_round_trips(
        dims in dims_strategy(),
        order in any::<prop::sample::Index>(),
        hole in any::<prop::sample::Index>(),
        perm_seed in any::<u64>(),
        seed in any::<u64>(),
    ) {
        let r = dims.len();
        let x = Rng(seed).vec(count(&dims), -8.0, 8.0);
        // A reshape target with the same element count: the dims in another order,
        // one of them given as -1.
        let mut target = dims.clone();
        if r > 0 {
            target.rotate_left(order.index(r));
        }
        let shown = target.clone();
        if r > 0 {
            target[hole.index(r)] = -1;
        }
        // A random permutation (Fisher–Yates) and its inverse.
        let mut perm: Vec<usize> = (0..r).collect();
        let mut prng = Rng(perm_seed);
        for i in (1..r).rev() {
            perm.swap(i, (prng.next_u64() % (i as u64 + 1)) as usize);
        }
        let mut inv = vec![0usize; r];
        for (i, p) in perm.iter().enumerate() {
            inv[*p] = i;
        }
        let as_i64 = |v: &[usize]| v.iter().map(|a| *a as i64).collect::<Vec<_>>();

        let b = Builder::new("prop_shape");
        let px = b.parameter(0, Shape::of::<f32>(&dims), "x");
        let reshaped = px.reshape(&target);
        prop_assert_eq!(reshaped.dims().unwrap(), shown.clone());
        let back = reshaped.reshape(&dims);
        let transposed = px.transpose(&as_i64(&perm));
        let restored = transposed.transpose(&as_i64(&inv));
        let outs = [&reshaped, &back, &transposed, &restored];
        let module = b.build_tuple(&outs).unwrap();
        let res = run(&module, &[&upload(&x, &dims)]);
        for (o, buf) in outs.iter().zip(&res) {
            check_shape(o, buf)?;
        }
        // Reshape keeps the row-major data; the round trips are the identity.
        prop_assert_eq!(res[0].to_vec::<f32>().unwrap(), x.clone());
        prop_assert_eq!(res[1].to_vec::<f32>().unwrap(), x.clone());
        prop_assert_eq!(res[3].to_vec::<f32>().unwrap(), x.clone());
        // The transposed values by index arithmetic: out[i] = x[j] with j[perm[k]] = i[k].
        let td: Vec<i64> = perm.iter().map(|p| dims[*p]).collect();
        let want: Vec<f32> = (0..count(&td) as i64)
            .map(|flat| {
                let oi = unravel(flat, &td);
                let mut ii = vec![0; r];
                for (k, p) in perm.iter().enumerate() {
                    ii[*p] = oi[k];
                }
                x[ravel(&ii, &dims)]
            })
            .collect();
        prop_assert_eq!(res[2].to_vec::<f32>().unwrap(), want);
    }

    #[test]
    fn reduce_sum_over_random_axes(
        dims in dims_strategy(),
        mask in any::<u8>(),
        negative in any::<u8>(),
        seed in any::<u64>(),
    ) {
        let r = dims.len();
        let x = Rng(seed).vec(count(&dims), -4.0, 4.0);
        let axes: Vec<usize> = (0..r).filter(|a| mask & (1 << a) != 0).collect();
        // Spell some axes negatively; reverse the list when bit 7 is set.
        let mut given: Vec<i64> = axes
            .iter()
            .map(|a| if negative & (1 << a) != 0 { *a as i64 - r as i64 } else { *a as i64 })
            .collect();
        if negative & 0x80 != 0 {
            given.reverse();
        }
        let b = Builder::new("prop_reduce");
        let px = b.parameter(0, Shape::of::<f32>(&dims), "x");
        let s = px.reduce_sum(&given);
        let module = b.build(&s).unwrap();
        let res = run(&module, &[&upload(&x, &dims)]);
        check_shape(&s, &res[0])?;
        let keep: Vec<usize> = (0..r).filter(|a| !axes.contains(a)).collect();
        let od: Vec<i64> = keep.iter().map(|a| dims[*a]).collect();
        prop_assert_eq!(s.dims().unwrap(), od.clone());
        let mut want = vec![0.0f64; count(&od)];
        for (flat, v) in x.iter().enumerate() {
            let idx = unravel(flat as i64, &dims);
            let oi: Vec<i64> = keep.iter().map(|a| idx[*a]).collect();
            want[ravel(&oi, &od)] += *v as f64;
        }
        let want: Vec<f32> = want.iter().map(|v| *v as f32).collect();
        assert_close(&res[0].to_vec::<f32>().unwrap(), &want, 1e-5);
    }

    #[test]
    fn batched_dot_general_matches_loops(
        (bs, m, k, n) in (1i64..=4, 1i64..=4, 1i64..=4, 1i64..=4),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let l = rng.vec((bs * m * k) as usize, -2.0, 2.0);
        let r = rng.vec((bs * k * n) as usize, -2.0, 2.0);
        let b = Builder::new("prop_dot");
        let pl = b.parameter(0, Shape::of::<f32>(&[bs, m, k]), "l");
        let pr = b.parameter(1, Shape::of::<f32>(&[bs, k, n]), "r");
        let d = DotDims {
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        let y = pl.dot_general(&pr, &d);
        prop_assert_eq!(y.dims().unwrap(), vec![bs, m, n]);
        let module = b.build(&y).unwrap();
        let res = run(&module, &[&upload(&l, &[bs, m, k]), &upload(&r, &[bs, k, n])]);
        check_shape(&y, &res[0])?;
        let mut want = Vec::new();
        for bi in 0..bs {
            for i in 0..m {
                for j in 0..n {
                    let lhs = |p: i64| l[(bi * m * k + i * k + p) as usize] as f64;
                    let rhs = |p: i64| r[(bi * k * n + p * n + j) as usize] as f64;
                    let acc: f64 = (0..k).map(|p| lhs(p) * rhs(p)).sum();
                    want.push(acc as f32);
                }
            }
        }
        assert_close(&res[0].to_vec::<f32>().unwrap(), &want, 1e-5);
    }
}
