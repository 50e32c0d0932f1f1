//! Sort on the real plugin against Rust's sort: one operand ascending (NaNs last,
//! stable), several operands carried along (argsort), descending rows of a matrix,
//! a comparator using an outside scalar, and stability on ties. Top-k against a
//! stable descending sort in Rust and against values recorded from `jax.lax.top_k`.

mod common;

use common::*;
use xlaclient::{Builder, Comparison, ElementType, NativeType, Shape};

#[test]
fn ascending_with_nans_last() {
    let b = Builder::new("asc");
    let x = b.parameter(0, Shape::of::<f32>(&[7]), "x");
    let m = b.build(&x.sort_ascending(0)).unwrap();
    let xs = [3.0f32, f32::NAN, -1.0, 2.5, f32::NEG_INFINITY, 0.0, 2.5];
    let got = run1::<f32>(&m, &[&upload(&xs, &[7])]);
    let mut want: Vec<f32> = xs.iter().copied().filter(|v| !v.is_nan()).collect();
    want.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(&got[..6], &want[..]);
    assert!(got[6].is_nan());
}

#[test]
fn argsort_carries_indices_and_is_stable() {
    let b = Builder::new("argsort");
    let x = b.parameter(0, Shape::of::<i32>(&[8]), "x");
    let idx = b.iota(ElementType::S32, &[8], 0);
    let out = b.sort(&[&x, &idx], 0, true, |l, r| {
        l[0].compare(&r[0], Comparison::Lt)
    });
    let m = b.build_tuple(&[&out[0], &out[1]]).unwrap();
    let xs = [5i32, 1, 5, 0, 1, 9, 5, 0];
    let bufs = run(&m, &[&upload(&xs, &[8])]);
    let mut want: Vec<(i32, i32)> = xs.iter().enumerate().map(|(i, v)| (*v, i as i32)).collect();
    want.sort_by_key(|p| p.0); // Rust's sort is stable too
    assert_eq!(
        bufs[0].to_vec::<i32>().unwrap(),
        want.iter().map(|p| p.0).collect::<Vec<_>>()
    );
    assert_eq!(
        bufs[1].to_vec::<i32>().unwrap(),
        want.iter().map(|p| p.1).collect::<Vec<_>>()
    );
}

#[test]
fn rows_descending_by_a_comparator_with_an_outside_value() {
    // Order by |v - pivot| descending: the comparator uses `pivot` from outside.
    let b = Builder::new("by_distance");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 4]), "x");
    let pivot = b.parameter(1, Shape::of::<f32>(&[]), "pivot");
    let out = b.sort(&[&x], 1, true, |l, r| {
        let dl = (&l[0] - &pivot).abs();
        let dr = (&r[0] - &pivot).abs();
        dl.compare(&dr, Comparison::Gt)
    });
    let m = b.build(&out[0]).unwrap();
    let xs = [1.0f32, 4.0, 2.0, 8.0, -3.0, 0.5, 2.0, 7.0];
    let got = run1::<f32>(&m, &[&upload(&xs, &[2, 4]), &upload(&[2.0f32], &[])]);
    let mut want = Vec::new();
    for row in xs.chunks(4) {
        let mut r = row.to_vec();
        r.sort_by(|a, b| (b - 2.0).abs().partial_cmp(&(a - 2.0).abs()).unwrap());
        want.extend(r);
    }
    assert_eq!(got, want);
}

#[test]
fn a_comparator_must_return_pred() {
    let b = Builder::new("bad");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let out = b.sort(&[&x], 0, false, |l, r| &l[0] - &r[0]);
    let e = b.build(&out[0]).unwrap_err().to_string();
    assert!(e.contains("comparator"), "{e}");
}

// ---------------------------------------------------------------------------------
// Top-k.

/// Plain-Rust top-k of each row (last axis) of `xs`: a stable sort of the indices by
/// `cmp` descending (equal elements keep index order), the first `k`.
fn top_k_ref<T: Copy>(
    xs: &[T],
    n: usize,
    k: usize,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> (Vec<T>, Vec<i32>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    let rows = xs.len().checked_div(n).unwrap_or(0);
    for row in (0..rows).map(|r| &xs[r * n..(r + 1) * n]) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|a, b| cmp(&row[*b], &row[*a]));
        vals.extend(order[..k].iter().map(|i| row[*i]));
        idx.extend(order[..k].iter().map(|i| *i as i32));
    }
    (vals, idx)
}

#[test]
fn top_k_of_random_rows_matches_a_stable_descending_sort() {
    // Few distinct values (many ties), NaNs of both signs, zeros of both signs:
    // floats in IEEE total order (f32::total_cmp), as jax.lax.top_k orders them.
    let (rows, n) = (5usize, 37usize);
    let mut rng = Rng(5);
    let pool = [
        -2.0f32,
        -1.0,
        -0.0,
        0.0,
        0.5,
        1.0,
        3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    let xs: Vec<f32> = (0..rows * n)
        .map(|_| pool[(rng.next_u64() % pool.len() as u64) as usize])
        .collect();
    let ints: Vec<i32> = (0..rows * n)
        .map(|_| (rng.next_u64() % 7) as i32 - 3)
        .collect();
    let ks = [0i64, 1, 5, 36, 37];
    let b = Builder::new("topk_random");
    let x = b.parameter(0, Shape::of::<f32>(&[rows as i64, n as i64]), "x");
    let y = b.parameter(1, Shape::of::<i32>(&[rows as i64, n as i64]), "y");
    let mut outs = Vec::new();
    for k in ks {
        let (v, i) = x.top_k(k);
        let (w, j) = y.top_k(k);
        outs.extend([v, i, w, j]);
    }
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let dims = [rows as i64, n as i64];
    let bufs = run(&m, &[&upload(&xs, &dims), &upload(&ints, &dims)]);
    for (c, k) in ks.iter().enumerate() {
        let d = [rows as i64, *k];
        let (want_v, want_i) = top_k_ref(&xs, n, *k as usize, f32::total_cmp);
        let got_v: Vec<f32> = fetch(&bufs[4 * c], &d, "f32 values");
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got_v), bits(&want_v), "f32 values, k = {k}");
        assert_eq!(
            fetch::<i32>(&bufs[4 * c + 1], &d, "f32 indices"),
            want_i,
            "k = {k}"
        );
        let (want_w, want_j) = top_k_ref(&ints, n, *k as usize, i32::cmp);
        assert_eq!(
            fetch::<i32>(&bufs[4 * c + 2], &d, "s32 values"),
            want_w,
            "k = {k}"
        );
        assert_eq!(
            fetch::<i32>(&bufs[4 * c + 3], &d, "s32 indices"),
            want_j,
            "k = {k}"
        );
    }
}

#[test]
fn top_k_of_a_long_row_picks_the_largest() {
    // A longer axis (XLA's CPU backend may call a dedicated top-k kernel for f32).
    let (rows, n, k) = (3usize, 1000usize, 10usize);
    let mut rng = Rng(9);
    let xs = rng.vec(rows * n, -100.0, 100.0);
    let b = Builder::new("topk_long");
    let x = b.parameter(0, Shape::of::<f32>(&[rows as i64, n as i64]), "x");
    let (v, i) = x.top_k(k as i64);
    let m = b.build_tuple(&[&v, &i]).unwrap();
    let bufs = run(&m, &[&upload(&xs, &[rows as i64, n as i64])]);
    let (want_v, want_i) = top_k_ref(&xs, n, k, f32::total_cmp);
    assert_eq!(fetch::<f32>(&bufs[0], &[3, 10], "values"), want_v);
    assert_eq!(fetch::<i32>(&bufs[1], &[3, 10], "indices"), want_i);
}

/// The JAX-recorded elements of `v` as raw bits (floats) or numbers (integers).
fn jax_words(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap_or_else(|| x.as_i64().unwrap() as u64))
        .collect()
}

/// Runs `top_k(k)` for each recorded `k` of `case` on elements of type `T`, built
/// from and compared as the recorded words.
fn check_jax_case<T: NativeType + Copy>(
    case: &serde_json::Value,
    from_word: fn(u64) -> T,
    to_word: fn(T) -> u64,
) {
    let name = case["name"].as_str().unwrap();
    let dims: Vec<i64> = jax_words(&case["dims"]).iter().map(|d| *d as i64).collect();
    let xs: Vec<T> = jax_words(&case["x"]).into_iter().map(from_word).collect();
    let ks = case["k"].as_array().unwrap();
    let b = Builder::new("topk_jax");
    let x = b.parameter(0, Shape::of::<T>(&dims), "x");
    let mut outs = Vec::new();
    for k in ks {
        let (v, i) = x.top_k(k["k"].as_i64().unwrap());
        outs.extend([v, i]);
    }
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let bufs = run(&m, &[&upload(&xs, &dims)]);
    for (c, k) in ks.iter().enumerate() {
        let mut d = dims.clone();
        *d.last_mut().unwrap() = k["k"].as_i64().unwrap();
        let what = format!("{name}, k = {}", k["k"]);
        let got: Vec<u64> = fetch::<T>(&bufs[2 * c], &d, &what)
            .into_iter()
            .map(to_word)
            .collect();
        assert_eq!(got, jax_words(&k["values"]), "{what}: values");
        let got: Vec<u64> = fetch::<i32>(&bufs[2 * c + 1], &d, &what)
            .into_iter()
            .map(|i| i as u64)
            .collect();
        assert_eq!(got, jax_words(&k["indices"]), "{what}: indices");
    }
}

#[test]
fn top_k_equals_jax_on_ties_nans_signed_zeros_and_empty_arrays() {
    // Recorded from jax 0.10.2 by scripts/record_jax_topk.py. jax.lax.top_k emits
    // XLA's `topk`, which orders floats totally: NaN first, -NaN last, +0 before -0.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jax/topk.json");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = rec["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        match case["dtype"].as_str().unwrap() {
            "float32" => {
                check_jax_case::<f32>(case, |w| f32::from_bits(w as u32), |v| v.to_bits() as u64)
            }
            "float64" => check_jax_case::<f64>(case, f64::from_bits, f64::to_bits),
            "int32" => check_jax_case::<i32>(case, |w| w as i32, |v| v as i64 as u64),
            "int64" => check_jax_case::<i64>(case, |w| w as i64, |v| v as u64),
            "uint8" => check_jax_case::<u8>(case, |w| w as u8, |v| v as u64),
            other => panic!("no test for dtype {other}"),
        }
    }
}

#[test]
fn top_k_errors_name_the_op_the_shape_and_the_line() {
    let b = Builder::new("topk_bad");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 5]), "x");
    let (line, (v, _)) = (line!(), x.top_k(6));
    let e = b.build(&v).unwrap_err().to_string();
    assert!(e.contains("`top_k` on (f32[2,5])"), "{e}");
    assert!(e.contains(&format!("ops_sorting.rs:{line}:")), "{e}");
    assert!(e.contains("0..=5"), "{e}");

    let b = Builder::new("topk_scalar");
    let s = b.parameter(0, Shape::of::<f32>(&[]), "s");
    let e = b.build(&s.top_k(0).0).unwrap_err().to_string();
    assert!(
        e.contains("`top_k` on (f32[])") && e.contains("rank 1"),
        "{e}"
    );

    let b = Builder::new("topk_complex");
    let c = b
        .parameter(0, Shape::of::<f32>(&[3]), "c")
        .convert(ElementType::C64);
    let e = b.build(&c.top_k(1).1).unwrap_err().to_string();
    assert!(
        e.contains("`top_k` on (c64[3])") && e.contains("no order"),
        "{e}"
    );
}

/// Top-k of two rows (`xs` and `xs` reversed) of element type `T`, `k = 3`, against
/// [`top_k_ref`] with `cmp`.
fn check_top_k_of<T: NativeType + Copy + std::fmt::Debug>(
    xs: &[T],
    cmp: fn(&T, &T) -> std::cmp::Ordering,
    same: fn(&T, &T) -> bool,
) {
    let n = xs.len();
    let data: Vec<T> = xs.iter().chain(xs.iter().rev()).copied().collect();
    let b = Builder::new("topk_type");
    let x = b.parameter(0, Shape::of::<T>(&[2, n as i64]), "x");
    let (v, i) = x.top_k(3);
    let m = b.build_tuple(&[&v, &i]).unwrap();
    let r = run(&m, &[&upload(&data, &[2, n as i64])]);
    let (want_v, want_i) = top_k_ref(&data, n, 3, cmp);
    let got_v: Vec<T> = fetch(&r[0], &[2, 3], "values");
    let what = format!("{:?} of {data:?}", T::TYPE);
    assert!(
        got_v.iter().zip(&want_v).all(|(g, w)| same(g, w)),
        "{what}: values {got_v:?}, want {want_v:?}"
    );
    assert_eq!(fetch::<i32>(&r[1], &[2, 3], "indices"), want_i, "{what}");
}

#[test]
fn top_k_of_every_ordered_element_type() {
    fn eq<T: PartialEq>(a: &T, b: &T) -> bool {
        a == b
    }
    check_top_k_of(&[true, false, true, false, false, true], bool::cmp, eq);
    check_top_k_of(&[-128i8, 127, 0, -1, 127, 5], i8::cmp, eq);
    check_top_k_of(&[i16::MIN, 7, i16::MAX, -1, 7, 0], i16::cmp, eq);
    check_top_k_of(&[i64::MIN, i64::MAX, 0, -1, i64::MAX, 2], i64::cmp, eq);
    check_top_k_of(&[0u8, 255, 128, 255, 1, 7], u8::cmp, eq);
    check_top_k_of(&[0u16, u16::MAX, 1 << 15, 3, 1 << 15, 9], u16::cmp, eq);
    check_top_k_of(&[u32::MAX, 0, 1 << 31, 5, u32::MAX, 1], u32::cmp, eq);
    check_top_k_of(&[u64::MAX, 0, 1 << 63, 5, u64::MAX, 3], u64::cmp, eq);
    let nan = f64::NAN;
    check_top_k_of(
        &[-0.0f64, nan, 0.0, -nan, f64::INFINITY, 0.0, -1e300],
        f64::total_cmp,
        |a, b| a.to_bits() == b.to_bits(),
    );
}

#[test]
fn top_k_of_f16_and_bf16() {
    // Values exact in both types; compared after converting back to f32.
    let xs = [
        1.5f32,
        -0.0,
        f32::NAN,
        0.0,
        -f32::NAN,
        f32::INFINITY,
        1.5,
        -2.0,
        f32::NEG_INFINITY,
        0.0,
    ];
    let n = xs.len() as i64;
    let b = Builder::new("topk_half");
    let x = b.parameter(0, Shape::of::<f32>(&[n]), "x");
    let mut outs = Vec::new();
    for ty in [ElementType::F16, ElementType::Bf16] {
        let (v, i) = x.convert(ty).top_k(6);
        outs.extend([v.convert(ElementType::F32), i]);
    }
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let r = run(&m, &[&upload(&xs, &[n])]);
    let (want_v, want_i) = top_k_ref(&xs, n as usize, 6, f32::total_cmp);
    for (t, name) in ["f16", "bf16"].iter().enumerate() {
        let got: Vec<f32> = fetch(&r[2 * t], &[6], name);
        // A NaN's payload may change on the way through a narrower type; its sign
        // and place may not.
        let sign_nan = |v: &[f32]| {
            v.iter()
                .map(|f| {
                    if f.is_nan() {
                        (f.is_sign_negative() as u32) | 0x7fc0_0000
                    } else {
                        f.to_bits()
                    }
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(sign_nan(&got), sign_nan(&want_v), "{name}: {:?}", got);
        assert_eq!(fetch::<i32>(&r[2 * t + 1], &[6], name), want_i, "{name}");
    }
}
