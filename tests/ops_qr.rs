//! `Op::qr` on the real plugin, checked three ways: against `jnp.linalg.qr` of
//! jax 0.10.2 (LAPACK's `geqrf` + `orgqr` on the CPU; recorded with the same
//! inputs by `scripts/record_jax_qr.py` in `tests/data/jax/qr.json`), signs
//! included; by the identities computed in plain Rust from the plugin's outputs
//! (`q r = a`, `qᵀ q = I`, `r` upper triangular with exact zeros); and, for the
//! gradient, against `jax.grad` through JAX's QR rule. Finite differences of the
//! gradient are in `tests/grad_linalg.rs`.

mod common;

use common::*;
use serde_json::Value;
use xlaclient::{Builder, ElementType, Error, QrMode, Shape};

fn jax_data() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/jax/qr.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read qr.json")).expect("parse")
}

/// A recorded array: its type, dims and values (widened to f64).
struct Arr {
    ty: ElementType,
    dims: Vec<i64>,
    v: Vec<f64>,
}

fn arr(j: &Value) -> Arr {
    let dims: Vec<i64> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    let data = j["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap());
    let (ty, v) = match j["dtype"].as_str().unwrap() {
        "float32" => (
            ElementType::F32,
            data.map(|b| f64::from(f32::from_bits(b as u32))).collect(),
        ),
        "float64" => (ElementType::F64, data.map(f64::from_bits).collect()),
        other => panic!("dtype {other}"),
    };
    Arr { ty, dims, v }
}

fn mode_of(s: &str) -> QrMode {
    match s {
        "reduced" => QrMode::Reduced,
        "complete" => QrMode::Complete,
        other => panic!("mode {other}"),
    }
}

/// A factor computed on the plugin: its dims and values (widened to f64).
type Factor = (Vec<i64>, Vec<f64>);

/// `(q, r)` of `a` computed by `Op::qr` on the plugin.
fn run_qr(a: &Arr, mode: QrMode) -> (Factor, Factor) {
    let b = Builder::new("qr");
    let x = b.parameter(0, Shape::array(a.ty, &a.dims), "a");
    let (q, r) = x.qr(mode);
    let m = b.build_tuple(&[&q, &r]).unwrap();
    let buf = if a.ty == ElementType::F32 {
        let v: Vec<f32> = a.v.iter().map(|x| *x as f32).collect();
        upload(&v, &a.dims)
    } else {
        upload(&a.v, &a.dims)
    };
    let out = run(&m, &[&buf]);
    let get = |o: &xlaclient::Buffer| -> Factor {
        let dims = o.dims().unwrap();
        let v = if a.ty == ElementType::F32 {
            o.to_vec::<f32>()
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect()
        } else {
            o.to_vec::<f64>().unwrap()
        };
        (dims, v)
    };
    (get(&out[0]), get(&out[1]))
}

/// Checks `q r = a`, `qᵀ q = I` and `r` upper triangular (exact zeros below the
/// diagonal) for every matrix of a batch; tolerances relative to `max |a|`.
fn check_identities(what: &str, a: &Arr, q: &Factor, r: &Factor) {
    let rank = a.dims.len();
    let (m, n) = (a.dims[rank - 2] as usize, a.dims[rank - 1] as usize);
    let c = q.0[rank - 1] as usize; // q's columns = r's rows
    assert_eq!(r.0[rank - 2] as usize, c, "{what}: q's columns vs r's rows");
    let batch: usize = a.dims[..rank - 2].iter().product::<i64>() as usize;
    let eps = if a.ty == ElementType::F32 {
        1e-5
    } else {
        1e-13
    };
    let scale =
        a.v.iter()
            .fold(0.0f64, |s, x| s.max(x.abs()))
            .max(f64::MIN_POSITIVE);
    for bi in 0..batch {
        let (av, qv, rv) = (&a.v[bi * m * n..], &q.1[bi * m * c..], &r.1[bi * c * n..]);
        for i in 0..m {
            for j in 0..n {
                let qr: f64 = (0..c).map(|t| qv[i * c + t] * rv[t * n + j]).sum();
                let want = av[i * n + j];
                assert!(
                    (qr - want).abs() <= eps * scale * 4.0,
                    "{what}[{bi}]: (q r)[{i},{j}] = {qr}, a = {want}"
                );
            }
        }
        for i in 0..c {
            for j in 0..c {
                let g: f64 = (0..m).map(|t| qv[t * c + i] * qv[t * c + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (g - want).abs() <= eps * 4.0,
                    "{what}[{bi}]: (qᵀ q)[{i},{j}] = {g}"
                );
            }
        }
        for i in 0..c {
            for j in 0..i.min(n) {
                assert_eq!(
                    rv[i * n + j],
                    0.0,
                    "{what}[{bi}]: r[{i},{j}] below the diagonal"
                );
            }
        }
    }
}

#[test]
fn equals_jax_qr_with_its_signs() {
    let data = jax_data();
    let (mut worst32, mut worst64) = (0.0f64, 0.0f64);
    for c in data["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let mode = mode_of(c["mode"].as_str().unwrap());
        let what = format!("{name} ({mode:?})");
        let a = arr(&c["a"]);
        let (wq, wr) = (arr(&c["q"]), arr(&c["r"]));
        let (q, r) = run_qr(&a, mode);
        assert_eq!(q.0, wq.dims, "{what}: q's dims");
        assert_eq!(r.0, wr.dims, "{what}: r's dims");
        check_identities(&what, &a, &q, &r);
        if name == "rank_deficient" {
            // Beyond the rank, q's columns are directions picked by rounding.
            continue;
        }
        let scale =
            a.v.iter()
                .fold(0.0f64, |s, x| s.max(x.abs()))
                .max(f64::MIN_POSITIVE);
        let f32_case = a.ty == ElementType::F32;
        let tol = if f32_case { 2e-5 } else { 1e-13 };
        let dq =
            q.1.iter()
                .zip(&wq.v)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max);
        let dr =
            r.1.iter()
                .zip(&wr.v)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max)
                / scale;
        assert!(dq <= tol, "{what}: q differs from JAX's by {dq}");
        assert!(dr <= tol, "{what}: r / max|a| differs from JAX's by {dr}");
        let worst = if f32_case { &mut worst32 } else { &mut worst64 };
        *worst = worst.max(dq).max(dr);
    }
    eprintln!(
        "max |difference| from jnp.linalg.qr (r relative to max|a|): f32 {worst32:e}, f64 {worst64:e}"
    );
}

/// `jax.grad` of `Σ Wq ⊙ q + Σ Wr ⊙ r` (JAX's QR rule) equals the gradient this
/// crate derives through the Householder loops.
#[test]
fn gradient_equals_jax() {
    let data = jax_data();
    for c in data["grads"].as_array().unwrap() {
        let (a, wq, wr, want) = (arr(&c["a"]), arr(&c["wq"]), arr(&c["wr"]), arr(&c["grad"]));
        let b = Builder::new("qr_grad");
        let x = b.parameter(0, Shape::of::<f64>(&a.dims), "a");
        let (q, r) = x.qr(QrMode::Reduced);
        let cq = b.constant_array(&wq.v, &wq.dims);
        let cr = b.constant_array(&wr.v, &wr.dims);
        let loss = (&q * &cq).reduce_sum(&[0, 1]) + (&r * &cr).reduce_sum(&[0, 1]);
        let g = b.grad(&loss, &x);
        let got = run1::<f64>(&b.build(&g).unwrap(), &[&upload(&a.v, &a.dims)]);
        let d = got
            .iter()
            .zip(&want.v)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0, f64::max);
        eprintln!("{:?}: max |grad − jax.grad| = {d:e}", a.dims);
        assert!(
            d <= 1e-10,
            "{:?}: gradient differs from JAX's by {d}",
            a.dims
        );
    }
}

#[test]
fn batches_of_any_rank_factor_each_matrix() {
    let mut rng = Rng(11);
    let dims = [2i64, 3, 5, 4];
    let v: Vec<f64> = (0..count(&dims))
        .map(|_| rng.uniform(-1.0, 1.0) as f64)
        .collect();
    let a = Arr {
        ty: ElementType::F64,
        dims: dims.to_vec(),
        v,
    };
    for mode in [QrMode::Reduced, QrMode::Complete] {
        let (q, r) = run_qr(&a, mode);
        check_identities(&format!("batch {mode:?}"), &a, &q, &r);
        // Each matrix alone gives the same factors.
        let (mq, mr) = (q.1.len() / 6, r.1.len() / 6);
        for bi in 0..6 {
            let one = Arr {
                ty: ElementType::F64,
                dims: vec![5, 4],
                v: a.v[bi * 20..(bi + 1) * 20].to_vec(),
            };
            let (q1, r1) = run_qr(&one, mode);
            assert_eq!(&q.1[bi * mq..(bi + 1) * mq], &q1.1[..], "batch {bi}: q");
            assert_eq!(&r.1[bi * mr..(bi + 1) * mr], &r1.1[..], "batch {bi}: r");
        }
    }
}

/// Empty matrices give JAX's shapes: `q` the identity's first columns, `r` empty
/// or zeros.
#[test]
fn empty_matrices() {
    for (dims, mode, qd, rd) in [
        (vec![0i64, 3], QrMode::Reduced, vec![0i64, 0], vec![0i64, 3]),
        (vec![3, 0], QrMode::Reduced, vec![3, 0], vec![0, 0]),
        (vec![3, 0], QrMode::Complete, vec![3, 3], vec![3, 0]),
        (
            vec![2, 3, 0],
            QrMode::Complete,
            vec![2, 3, 3],
            vec![2, 3, 0],
        ),
    ] {
        let a = Arr {
            ty: ElementType::F32,
            dims: dims.clone(),
            v: vec![],
        };
        let (q, r) = run_qr(&a, mode);
        assert_eq!((&q.0, &r.0), (&qd, &rd), "{dims:?} {mode:?}");
        let k = qd[qd.len() - 1] as usize;
        let m = qd[qd.len() - 2] as usize;
        for (i, v) in q.1.iter().enumerate() {
            let (row, col) = ((i / k) % m, i % k);
            assert_eq!(*v, if row == col { 1.0 } else { 0.0 }, "{dims:?}: q");
        }
    }
}

#[test]
fn bad_operands_are_errors_naming_qr_the_shape_and_the_line() {
    let cases: [(Shape, &str); 4] = [
        (Shape::of::<f32>(&[5]), "(rank 2 or more), got rank 1"),
        (
            Shape::of::<i32>(&[3, 3]),
            "needs f32 or f64 matrices, got s32",
        ),
        (
            Shape::array(ElementType::F16, &[3, 3]),
            "got f16 (convert to f32 first)",
        ),
        (
            Shape::array(ElementType::C64, &[3, 3]),
            "(complex QR is not supported)",
        ),
    ];
    for (shape, reason) in cases {
        let b = Builder::new("bad");
        let x = b.parameter(0, shape.clone(), "x");
        let line = line!() + 1;
        let (q, r) = x.qr(QrMode::Reduced);
        let e = b.build_tuple(&[&q, &r]).unwrap_err();
        assert!(matches!(e, Error::Shape(_)), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("`qr`"), "{msg}");
        assert!(msg.contains(&shape.to_string()), "{msg}");
        assert!(msg.contains(reason), "{msg}");
        assert!(msg.contains(&format!("tests/ops_qr.rs:{line}:")), "{msg}");
    }
    // A failed operand's error comes through unchanged (the first one wins).
    let b = Builder::new("poisoned");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let bad = x.reshape(&[7]);
    let (q, _) = bad.qr(QrMode::Reduced);
    let msg = b.build(&q).unwrap_err().to_string();
    assert!(msg.contains("reshape"), "{msg}");
}
