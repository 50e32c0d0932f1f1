//! Cholesky and triangular solve on the real plugin, checked by identities: the
//! factor's product gives the matrix back, and the solve's answer satisfies the
//! system (both computed in plain Rust from the plugin's outputs).

mod common;

use common::*;
use xlaclient::ops::linalg::{Transpose, TriangularSolveOptions};
use xlaclient::{Builder, Shape};

/// A symmetric positive-definite 4x4 matrix: m mᵀ + 4 I.
fn spd(rng: &mut Rng) -> Vec<f64> {
    let m: Vec<f64> = (0..16).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
    let mut a = vec![0.0; 16];
    for i in 0..4 {
        for j in 0..4 {
            a[i * 4 + j] = (0..4).map(|k| m[i * 4 + k] * m[j * 4 + k]).sum::<f64>()
                + if i == j { 4.0 } else { 0.0 };
        }
    }
    a
}

#[test]
fn cholesky_factors_multiply_back() {
    let mut rng = Rng(3);
    let a = spd(&mut rng);
    let b = Builder::new("chol");
    let x = b.parameter(0, Shape::of::<f64>(&[4, 4]), "a");
    let m = b
        .build_tuple(&[&x.cholesky(true), &x.cholesky(false)])
        .unwrap();
    let out = run(&m, &[&client().buffer_from_host(&a, &[4, 4]).unwrap()]);
    let l = out[0].to_vec::<f64>().unwrap();
    let u = out[1].to_vec::<f64>().unwrap();
    // The other triangle is zero, as jnp.linalg.cholesky gives it, and the upper
    // factor is the lower one transposed.
    for i in 0..4 {
        for j in 0..4 {
            if j > i {
                assert_eq!(l[i * 4 + j], 0.0, "L ({i},{j})");
                assert_eq!(u[j * 4 + i], 0.0, "U ({j},{i})");
            }
            assert!((u[j * 4 + i] - l[i * 4 + j]).abs() < 1e-12);
        }
    }
    let lt = |i: usize, j: usize| l[i * 4 + j];
    for i in 0..4 {
        for j in 0..4 {
            let v: f64 = (0..4).map(|k| lt(i, k) * lt(j, k)).sum();
            assert!(
                (v - a[i * 4 + j]).abs() < 1e-10,
                "({i},{j}): {v} vs {}",
                a[i * 4 + j]
            );
        }
    }
}

#[test]
fn triangular_solves_satisfy_their_systems() {
    let mut rng = Rng(4);
    // A well-conditioned lower-triangular matrix (the upper part is ignored by the
    // solve; fill it with noise to check that).
    let mut a: Vec<f64> = (0..9).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
    for i in 0..3 {
        a[i * 3 + i] = 2.0 + i as f64;
    }
    let low = |i: usize, j: usize| if j <= i { a[i * 3 + j] } else { 0.0 };
    let bm: Vec<f64> = (0..6).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
    for (left, trans) in [
        (true, Transpose::No),
        (true, Transpose::Transpose),
        (false, Transpose::No),
    ] {
        let o = TriangularSolveOptions {
            left_side: left,
            lower: true,
            unit_diagonal: false,
            transpose_a: trans,
        };
        let bdims: [i64; 2] = if left { [3, 2] } else { [2, 3] };
        let b = Builder::new("trsm");
        let x = b.parameter(0, Shape::of::<f64>(&[3, 3]), "a");
        let y = b.parameter(1, Shape::of::<f64>(&bdims), "b");
        let m = b.build(&x.triangular_solve(&y, o)).unwrap();
        let sol = run(
            &m,
            &[
                &client().buffer_from_host(&a, &[3, 3]).unwrap(),
                &client().buffer_from_host(&bm, &bdims).unwrap(),
            ],
        )[0]
        .to_vec::<f64>()
        .unwrap();
        let opa = |i: usize, j: usize| {
            if trans == Transpose::No {
                low(i, j)
            } else {
                low(j, i)
            }
        };
        // Rebuild b from the solution: op(a) x (left) or x op(a) (right).
        let (r, c) = (bdims[0] as usize, bdims[1] as usize);
        for i in 0..r {
            for j in 0..c {
                let v: f64 = if left {
                    (0..3).map(|k| opa(i, k) * sol[k * c + j]).sum()
                } else {
                    (0..3).map(|k| sol[i * c + k] * opa(k, j)).sum()
                };
                assert!(
                    (v - bm[i * c + j]).abs() < 1e-10,
                    "{left} {trans:?} ({i},{j})"
                );
            }
        }
    }
}
