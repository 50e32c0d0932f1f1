//! Sort on the real plugin against Rust's sort: one operand ascending (NaNs last,
//! stable), several operands carried along (argsort), descending rows of a matrix,
//! a comparator using an outside scalar, and stability on ties.

mod common;

use common::*;
use xlaclient::{Builder, Comparison, ElementType, Shape};

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
