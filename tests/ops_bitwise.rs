//! Bitwise ops on the real plugin against Rust's integer operators: and/or/xor/not
//! on u32, s8 and pred, shifts (including shifts past the bit width, which XLA
//! defines), popcnt and count-leading-zeros.

mod common;

use common::*;
use xlaclient::{Builder, Shape};

#[test]
fn u32_bit_ops_match_rust() {
    let xs = [0u32, 1, 0xdead_beef, u32::MAX, 0x8000_0000, 12345];
    let ys = [3u32, 31, 4, 32, 1, 40];
    let b = Builder::new("bits");
    let x = b.parameter(0, Shape::of::<u32>(&[6]), "x");
    let y = b.parameter(1, Shape::of::<u32>(&[6]), "y");
    let outs = [
        x.and(&y),
        x.or(&y),
        x.xor(&y),
        x.not(),
        x.shift_left(&y),
        x.shift_right_logical(&y),
        x.popcnt(),
        x.count_leading_zeros(),
    ];
    let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let r = run(&m, &[&upload(&xs, &[6]), &upload(&ys, &[6])]);
    let got = |i: usize| r[i].to_vec::<u32>().unwrap();
    let map2 =
        |f: fn(u32, u32) -> u32| xs.iter().zip(ys).map(|(a, b)| f(*a, b)).collect::<Vec<_>>();
    assert_eq!(got(0), map2(|a, b| a & b));
    assert_eq!(got(1), map2(|a, b| a | b));
    assert_eq!(got(2), map2(|a, b| a ^ b));
    assert_eq!(got(3), xs.iter().map(|a| !a).collect::<Vec<_>>());
    // XLA: a shift by the bit width or more gives 0.
    assert_eq!(got(4), map2(|a, b| a.checked_shl(b).unwrap_or(0)));
    assert_eq!(got(5), map2(|a, b| a.checked_shr(b).unwrap_or(0)));
    assert_eq!(
        got(6),
        xs.iter().map(|a| a.count_ones()).collect::<Vec<_>>()
    );
    assert_eq!(
        got(7),
        xs.iter().map(|a| a.leading_zeros()).collect::<Vec<_>>()
    );
}

#[test]
fn arithmetic_shift_and_logic_on_pred() {
    let b = Builder::new("sra");
    let x = b.parameter(0, Shape::of::<i8>(&[4]), "x");
    let p = b.parameter(1, Shape::of::<bool>(&[4]), "p");
    let q = b.parameter(2, Shape::of::<bool>(&[4]), "q");
    let two = b.constant(2i8);
    let m = b
        .build_tuple(&[
            &x.shift_right_arithmetic(&two),
            &p.and(&q),
            &p.xor(&q),
            &p.not(),
        ])
        .unwrap();
    let xs = [-128i8, -1, 5, 127];
    let (ps, qs) = ([true, true, false, false], [true, false, true, false]);
    let r = run(
        &m,
        &[&upload(&xs, &[4]), &upload(&ps, &[4]), &upload(&qs, &[4])],
    );
    assert_eq!(
        r[0].to_vec::<i8>().unwrap(),
        xs.iter().map(|v| v >> 2).collect::<Vec<_>>()
    );
    assert_eq!(
        r[1].to_vec::<bool>().unwrap(),
        vec![true, false, false, false]
    );
    assert_eq!(
        r[2].to_vec::<bool>().unwrap(),
        vec![false, true, true, false]
    );
    assert_eq!(
        r[3].to_vec::<bool>().unwrap(),
        vec![false, false, true, true]
    );
}
