//! `f16` and `bf16` on the real plugin, with the `half` crate's types on the host:
//! uploads and downloads (every bit pattern class), constants and Rust numbers as
//! literals, arithmetic against a plain-Rust reference computed in `f32` and rounded
//! by `half`, conversions between f32, f16 and bf16 (round to nearest even, NaN,
//! infinities, overflow, subnormals), and zero-size arrays.

mod common;
use common::*;

use xlaclient::RuntimeError;
use xlaclient::half::{bf16, f16};
use xlaclient::{Builder, ElementType, NativeType, Op, Scalar, Shape};

/// The bits of a value, so that `-0.0` and NaNs compare exactly.
trait Bits: Copy {
    fn bits(self) -> u16;
    fn is_nan_(self) -> bool;
}
impl Bits for f16 {
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn is_nan_(self) -> bool {
        self.is_nan()
    }
}
impl Bits for bf16 {
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn is_nan_(self) -> bool {
        self.is_nan()
    }
}

/// Bit-exact equality, except that any NaN matches any NaN (XLA does not promise
/// a NaN's sign or payload).
fn assert_bits<T: Bits + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g.bits() == w.bits() || (g.is_nan_() && w.is_nan_());
        assert!(
            ok,
            "{what}: element {i}: got {g:?} ({:#06x}), want {w:?} ({:#06x})",
            g.bits(),
            w.bits()
        );
    }
}

/// Values of every class: zeros of both signs, normals, the largest finite,
/// the smallest normal and subnormals, infinities and NaN.
fn f16_specials() -> Vec<f16> {
    let mut v: Vec<f16> = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        3.140625,
        65504.0,
        -65504.0,
        6.1035156e-5,
        5.9604645e-8,
        -1.0132790e-6,
    ]
    .iter()
    .map(|x| f16::from_f64(*x))
    .collect();
    v.extend([f16::INFINITY, f16::NEG_INFINITY, f16::NAN]);
    v
}

fn bf16_specials() -> Vec<bf16> {
    let mut v: Vec<bf16> = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        3.140625,
        3.3895314e38,
        -3.3895314e38,
        1.1754944e-38,
        9.18355e-41,
        -2.3e-40,
    ]
    .iter()
    .map(|x| bf16::from_f64(*x))
    .collect();
    v.extend([bf16::INFINITY, bf16::NEG_INFINITY, bf16::NAN]);
    v
}

#[test]
fn uploads_and_downloads_keep_every_bit() {
    let h = f16_specials();
    let b = bf16_specials();
    // The subnormals above really are subnormal.
    assert!(h[9].to_f32().is_subnormal() || !h[9].is_normal() && h[9] != f16::ZERO);
    assert!(!b[9].is_normal() && b[9] != bf16::ZERO);
    let hb = upload(&h, &[h.len() as i64]);
    assert_eq!(hb.element_type().unwrap(), ElementType::F16);
    assert_bits(&hb.to_vec::<f16>().unwrap(), &h, "f16 round trip");
    let bb = upload(&b, &[2, 7]);
    assert_eq!(bb.element_type().unwrap(), ElementType::Bf16);
    assert_eq!(bb.dims().unwrap(), vec![2, 7]);
    assert_bits(&bb.to_vec::<bf16>().unwrap(), &b, "bf16 round trip");
    // Scalars.
    let s = client().scalar(bf16::from_f64(-2.5)).unwrap();
    assert_eq!(s.to_scalar::<bf16>().unwrap(), bf16::from_f64(-2.5));
    // Every f16 bit pattern survives a trip through the device (a parameter passed
    // straight to the output).
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let bl = Builder::new("identity");
    let x = bl.parameter(0, Shape::of::<f16>(&[all.len() as i64]), "x");
    let m = bl.build(&x).unwrap();
    let out = run1::<f16>(&m, &[&upload(&all, &[all.len() as i64])]);
    let same = out
        .iter()
        .zip(&all)
        .filter(|(g, w)| g.to_bits() == w.to_bits())
        .count();
    assert_eq!(same, all.len(), "bit patterns changed in an identity");
}

#[test]
fn downloads_check_the_element_type() {
    let hb = upload(&[f16::ONE; 4], &[4]);
    let e = hb.to_vec::<bf16>().unwrap_err();
    assert!(
        matches!(
            &e,
            RuntimeError::HostType {
                expected: ElementType::F16,
                given: ElementType::Bf16,
                ..
            }
        ),
        "{e}"
    );
    let e = hb.to_vec::<u16>().unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e}"
    );
    // Data that does not fit the dimensions.
    let e = client()
        .buffer_from_host(&[bf16::ONE; 3], &[2, 2])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e}"
    );
}

#[test]
fn constants_and_rust_numbers_are_exact_literals() {
    let h = f16_specials();
    let b = bf16_specials();
    let bl = Builder::new("constants");
    // 1 + 2^-11 + 2^-40 rounds up to 1 + 2^-10 in f16; through f32 it would become
    // the tie 1 + 2^-11 and round to even, 1.0 (as `half`'s own `f16::from_f64`
    // does): literals are rounded once, from f64.
    let tricky = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let tricky_f16 = f16::from_f32(1.0 + 2f32.powi(-10));
    let outs = [
        bl.constant_vec(&h),
        bl.constant_array(&b, &[7, 2]),
        bl.constant(f16::from_f64(-0.0)),
        bl.constant_of_type(ElementType::F16, tricky),
        bl.constant_of_type(ElementType::Bf16, Scalar::from(bf16::from_f64(0.1))),
        bl.constant_of_type(ElementType::Bf16, 300i64),
        bl.constant_of_type(ElementType::F16, 1e10),
    ];
    let refs: Vec<&Op> = outs.iter().collect();
    let m = bl.build_tuple(&refs).unwrap();
    let text = m.to_hlo_text();
    assert!(text.contains("f16[] constant(-0.0)"), "{text}");
    let o = run(&m, &[]);
    assert_bits(&o[0].to_vec::<f16>().unwrap(), &h, "constant_vec");
    assert_eq!(o[1].dims().unwrap(), vec![7, 2]);
    assert_bits(&o[1].to_vec::<bf16>().unwrap(), &b, "constant_array");
    assert_bits(&o[2].to_vec::<f16>().unwrap(), &[f16::NEG_ZERO], "-0");
    assert_bits(
        &o[3].to_vec::<f16>().unwrap(),
        &[tricky_f16],
        "rounded once",
    );
    assert_bits(
        &o[4].to_vec::<bf16>().unwrap(),
        &[bf16::from_f64(0.1)],
        "bf16 scalar",
    );
    // 300 = 1.0010110b x 2^8 is exact in bf16 (7 fraction bits).
    assert_bits(
        &o[5].to_vec::<bf16>().unwrap(),
        &[bf16::from_f64(300.0)],
        "300",
    );
    assert_eq!(o[5].to_vec::<bf16>().unwrap()[0].to_f64(), 300.0);
    assert_bits(&o[6].to_vec::<f16>().unwrap(), &[f16::INFINITY], "overflow");
}

/// XLA's CPU runtime computes with subnormals flushed to zero (inputs and
/// results of f32 arithmetic; the f16/bf16 ops compute in f32). f16's subnormals
/// are normal f32 numbers; bf16's are f32 subnormals, so they flush.
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// One op per output on f16/bf16 parameters (so no intermediate is kept wider),
/// against the same op in f32 on the widened inputs, rounded by `half` (with
/// subnormals flushed, see [`ftz`]).
fn check_binary_ops<T: NativeType + Bits + std::fmt::Debug>(
    xs: &[T],
    ys: &[T],
    to32: fn(T) -> f32,
    from32: fn(f32) -> T,
) {
    type Case = (&'static str, fn(&Op, &Op) -> Op, fn(f32, f32) -> f32);
    let cases: [Case; 6] = [
        ("add", |a, b| a + b, |a, b| a + b),
        ("subtract", |a, b| a - b, |a, b| a - b),
        ("multiply", |a, b| a * b, |a, b| a * b),
        ("divide", |a, b| a / b, |a, b| a / b),
        ("maximum", |a, b| a.max(b), f32::max),
        ("minimum", |a, b| a.min(b), f32::min),
    ];
    let n = xs.len() as i64;
    let bl = Builder::new("binary");
    let x = bl.parameter(0, Shape::of::<T>(&[n]), "x");
    let y = bl.parameter(1, Shape::of::<T>(&[n]), "y");
    let outs: Vec<Op> = cases.iter().map(|(_, f, _)| f(&x, &y)).collect();
    let m = bl.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&upload(xs, &[n]), &upload(ys, &[n])]);
    for ((name, _, r), buf) in cases.iter().zip(&o) {
        let want: Vec<T> = xs
            .iter()
            .zip(ys)
            .map(|(a, b)| from32(ftz(r(ftz(to32(*a)), ftz(to32(*b))))))
            .collect();
        // f32 holds the exact sum, difference and product of two f16/bf16 values
        // and a quotient to more than twice their precision: rounding it once more
        // gives the correctly rounded result, which XLA must give too.
        assert_bits(
            &buf.to_vec::<T>().unwrap(),
            &want,
            &format!("{name} {}", T::TYPE),
        );
    }
}

#[test]
fn arithmetic_matches_f32_rounded_by_half() {
    let mut rng = Rng(7);
    let xs: Vec<f32> = rng.vec(64, -100.0, 100.0);
    let ys: Vec<f32> = rng.vec(64, -3.0, 3.0);
    let h = |v: &[f32]| v.iter().map(|x| f16::from_f32(*x)).collect::<Vec<_>>();
    let b = |v: &[f32]| v.iter().map(|x| bf16::from_f32(*x)).collect::<Vec<_>>();
    // Plus values whose results overflow (65504 + 65504) or are subnormal.
    let mut hx = h(&xs);
    let mut hy = h(&ys);
    hx.extend([f16::MAX, f16::from_f64(1e-4), f16::from_f64(2.0)]);
    hy.extend([f16::MAX, f16::from_f64(1e-3), f16::from_f64(0.0)]);
    check_binary_ops(&hx, &hy, f16::to_f32, f16::from_f32);
    let mut bx = b(&xs);
    let mut by = b(&ys);
    // 2e-38 * 0.01 is a bf16 (and f32) subnormal: flushed to 0.
    bx.extend([bf16::MAX, bf16::from_f64(2e-38), bf16::from_f64(-2.0)]);
    by.extend([bf16::MAX, bf16::from_f64(1e-2), bf16::from_f64(0.0)]);
    assert_eq!(ftz(2e-38 * 1e-2), 0.0);
    check_binary_ops(&bx, &by, bf16::to_f32, bf16::from_f32);
}

#[test]
fn unary_ops_match_f32_rounded_by_half() {
    let mut rng = Rng(9);
    let xs: Vec<f16> = rng
        .vec(48, 0.01, 8.0)
        .iter()
        .map(|x| f16::from_f32(*x))
        .collect();
    let n = xs.len() as i64;
    let bl = Builder::new("unary");
    let x = bl.parameter(0, Shape::of::<f16>(&[n]), "x");
    let outs = [x.neg(), x.abs(), x.sqrt(), x.exp(), x.log(), x.tanh()];
    let m = bl.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&upload(&xs, &[n])]);
    type Ref = (&'static str, fn(f32) -> f32, u16);
    let refs: [Ref; 6] = [
        ("negate", |v| -v, 0),
        ("abs", f32::abs, 0),
        // Correctly rounded in f32, so exact after rounding to f16.
        ("sqrt", f32::sqrt, 0),
        // Transcendental functions: within one f16 ulp of the f32 value rounded.
        ("exp", f32::exp, 1),
        ("log", f32::ln, 1),
        ("tanh", f32::tanh, 1),
    ];
    for ((name, r, ulps), buf) in refs.iter().zip(&o) {
        let got = buf.to_vec::<f16>().unwrap();
        for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
            let w = f16::from_f32(r(x.to_f32()));
            let d = (g.to_bits() as i32 - w.to_bits() as i32).unsigned_abs();
            assert!(
                d <= *ulps as u32,
                "{name}({x}) element {i}: got {g}, want {w} ({d} ulps)"
            );
        }
    }
}

#[test]
fn conversions_round_to_nearest_even() {
    // f32 values at the edges of f16 and bf16: ties (to even: down and up),
    // values just above a tie, overflow to infinity, the largest finite values,
    // subnormals and values that underflow to zero, NaN and infinities.
    let ulp16 = 2f32.powi(-10);
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0 + ulp16 / 2.0,                  // tie: down to 1
        1.0 + 3.0 * ulp16 / 2.0,            // tie: up to 1 + 2 ulp
        1.0 + ulp16 / 2.0 + 2f32.powi(-20), // above the tie: up
        65504.0,                            // f16 max
        65519.0,                            // below the overflow tie: 65504
        65520.0,                            // the tie: to infinity
        1e6,                                // overflow
        -1e6,
        2f32.powi(-24),            // the smallest f16 subnormal
        2f32.powi(-25),            // half of it: a tie, to 0
        3.0 * 2f32.powi(-25),      // 1.5 of it: a tie, to 2^-23
        2f32.powi(-20) * 1.3,      // an f16 subnormal
        1.0 + 2f32.powi(-8),       // bf16 tie: down to 1
        1.0 + 3.0 * 2f32.powi(-8), // bf16 tie: up
        f32::MAX,                  // above bf16's max: rounds to infinity in bf16
        3.3895314e38,              // bf16 max
        1e-39,                     // f32 subnormal, bf16 subnormal
        f32::from_bits(1),         // the smallest f32 subnormal
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    let mut rng = Rng(3);
    xs.extend(rng.vec(32, -1000.0, 1000.0));
    let n = xs.len() as i64;
    let bl = Builder::new("convert");
    let x = bl.parameter(0, Shape::of::<f32>(&[n]), "x");
    let h = x.convert(ElementType::F16);
    let b = x.convert(ElementType::Bf16);
    let outs = [
        h.clone(),
        b.clone(),
        h.convert(ElementType::Bf16),
        b.convert(ElementType::F16),
        h.convert(ElementType::F32),
        b.convert(ElementType::F64),
    ];
    let m = bl.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&upload(&xs, &[n])]);
    let want_h: Vec<f16> = xs.iter().map(|v| f16::from_f32(*v)).collect();
    let want_b: Vec<bf16> = xs.iter().map(|v| bf16::from_f32(*v)).collect();
    // The reference itself: the ties go to even.
    assert_eq!(want_h[2].to_f32(), 1.0);
    assert_eq!(want_h[3].to_f32(), 1.0 + 2.0 * ulp16);
    assert_eq!((want_h[6].to_f32(), want_h[7]), (65504.0, f16::INFINITY));
    assert_eq!(
        (want_h[11].to_f32(), want_h[12].to_f32()),
        (0.0, 2f32.powi(-23))
    );
    assert_eq!(want_b[14].to_f32(), 1.0);
    assert_eq!(want_b[16], bf16::INFINITY);
    assert_bits(&o[0].to_vec::<f16>().unwrap(), &want_h, "f32 -> f16");
    assert_bits(&o[1].to_vec::<bf16>().unwrap(), &want_b, "f32 -> bf16");
    let hb: Vec<bf16> = want_h.iter().map(|v| bf16::from_f32(v.to_f32())).collect();
    let bh: Vec<f16> = want_b.iter().map(|v| f16::from_f32(v.to_f32())).collect();
    assert_bits(&o[2].to_vec::<bf16>().unwrap(), &hb, "f16 -> bf16");
    assert_bits(&o[3].to_vec::<f16>().unwrap(), &bh, "bf16 -> f16");
    // Widening is exact.
    let back: Vec<f32> = o[4].to_vec().unwrap();
    let back64: Vec<f64> = o[5].to_vec().unwrap();
    for i in 0..xs.len() {
        // bf16 subnormals are f32 subnormals: the widening flushes them to zero.
        let w64 = ftz(want_b[i].to_f32()) as f64;
        let w = want_h[i].to_f32();
        assert!(
            back[i] == w || back[i].is_nan() && w.is_nan(),
            "{i}: {} vs {w}",
            back[i]
        );
        assert!(
            back64[i].to_bits() == w64.to_bits() || back64[i].is_nan() && w64.is_nan(),
            "{i}: {} vs {w64}",
            back64[i]
        );
    }
}

#[test]
fn integers_convert_to_half_types_rounding_to_nearest_even() {
    // 2049 lies halfway between f16's 2048 and 2050: to even, 2048; 2051 to 2052.
    // 257 in bf16 (8 significant bits): halfway between 256 and 258, to 256.
    let xs: Vec<i32> = vec![
        0, -1, 2049, 2051, 65504, 65519, 65520, 100000, 257, 259, -257,
    ];
    let n = xs.len() as i64;
    let bl = Builder::new("int_to_half");
    let x = bl.parameter(0, Shape::of::<i32>(&[n]), "x");
    let m = bl
        .build_tuple(&[&x.convert(ElementType::F16), &x.convert(ElementType::Bf16)])
        .unwrap();
    let o = run(&m, &[&upload(&xs, &[n])]);
    // Each value is exact in f32, so `half` rounds it once.
    let want_h: Vec<f16> = xs.iter().map(|v| f16::from_f32(*v as f32)).collect();
    let want_b: Vec<bf16> = xs.iter().map(|v| bf16::from_f32(*v as f32)).collect();
    assert_eq!(want_h[2].to_f32(), 2048.0);
    assert_eq!(want_b[8].to_f32(), 256.0);
    assert_bits(&o[0].to_vec::<f16>().unwrap(), &want_h, "s32 -> f16");
    assert_bits(&o[1].to_vec::<bf16>().unwrap(), &want_b, "s32 -> bf16");
}

#[test]
fn zero_size_arrays() {
    let empty_h: [f16; 0] = [];
    let hb = upload(&empty_h, &[0, 3]);
    assert_eq!(hb.dims().unwrap(), vec![0, 3]);
    assert!(hb.to_vec::<f16>().unwrap().is_empty());
    let bl = Builder::new("empty");
    let x = bl.parameter(0, Shape::of::<f16>(&[0, 3]), "x");
    let c = bl.constant_array::<bf16>(&[], &[3, 0]);
    let outs = [
        &x * 2.0,
        x.convert(ElementType::Bf16),
        c.convert(ElementType::F16),
        x.reduce_sum(&[0]),
    ];
    let m = bl.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
    let o = run(&m, &[&hb]);
    assert!(o[0].to_vec::<f16>().unwrap().is_empty());
    assert_eq!(o[1].dims().unwrap(), vec![0, 3]);
    assert!(o[1].to_vec::<bf16>().unwrap().is_empty());
    assert_eq!(o[2].dims().unwrap(), vec![3, 0]);
    // A sum over an empty axis is 0.
    assert_bits(&o[3].to_vec::<f16>().unwrap(), &[f16::ZERO; 3], "empty sum");
}

/// `f8e5m2` and `f8e4m3fn` (`jnp.float8_*`): every one of the 256 patterns uploaded,
/// converted to f32 on the device and compared with the host's decoding; f32
/// values (ties, subnormals, overflow, NaN) converted to f8 on the device and
/// compared with the host's rounding; an f8 sum against the host's.
#[test]
fn float8_types_round_trip_and_round_as_the_host_does() {
    use xlaclient::float8::{F8E4M3FN, F8E5M2};
    let patterns: Vec<u8> = (0..=255).collect();
    let mut probes: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        1.125,
        1.375,
        0.3,
        -2.75,
        448.0,
        449.0,
        465.0,
        500.0,
        57344.0,
        61440.0,
        1e6,
        -1e6,
        2e-3,
        1.9e-3,
        2f32.powi(-9),
        2f32.powi(-10),
        2f32.powi(-17),
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let mut r = Rng(8);
    probes.extend(r.vec(200, -600.0, 600.0));
    probes.extend(r.vec(100, -0.05, 0.05));
    let n = probes.len() as i64;
    let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    for ty in [ElementType::F8E5M2, ElementType::F8E4M3FN] {
        let decode = |b: u8| match ty {
            ElementType::F8E5M2 => F8E5M2(b).to_f64(),
            _ => F8E4M3FN(b).to_f64(),
        };
        let encode = |v: f32| match ty {
            ElementType::F8E5M2 => F8E5M2::from_f32(v).0,
            _ => F8E4M3FN::from_f32(v).0,
        };
        let b = Builder::new("f8");
        let p = b.parameter(0, Shape::array(ty, &[256]), "p");
        let x = b.parameter(1, Shape::of::<f32>(&[n]), "x");
        let q = x.convert(ty);
        let sum = (&q + &q).convert(ElementType::F32);
        let m = b
            .build_tuple(&[
                &p.convert(ElementType::F32),
                &q.convert(ElementType::F32),
                &sum,
            ])
            .unwrap();
        let pb = match ty {
            ElementType::F8E5M2 => {
                let v: Vec<F8E5M2> = patterns.iter().map(|b| F8E5M2(*b)).collect();
                upload(&v, &[256])
            }
            _ => {
                let v: Vec<F8E4M3FN> = patterns.iter().map(|b| F8E4M3FN(*b)).collect();
                upload(&v, &[256])
            }
        };
        let out = run(&m, &[&pb, &upload(&probes, &[n])]);
        let decoded = out[0].to_vec::<f32>().unwrap();
        for (k, b) in patterns.iter().enumerate() {
            assert!(
                same(decoded[k] as f64, decode(*b)),
                "{ty} {b:#04x}: device {}",
                decoded[k]
            );
        }
        let rounded = out[1].to_vec::<f32>().unwrap();
        let sums = out[2].to_vec::<f32>().unwrap();
        for (k, v) in probes.iter().enumerate() {
            let want = decode(encode(*v));
            assert!(
                same(rounded[k] as f64, want),
                "{ty} of {v}: device {}, host {want}",
                rounded[k]
            );
            let want_sum = decode(encode((want + want) as f32));
            assert!(
                same(sums[k] as f64, want_sum),
                "{ty} {v}+{v}: device {}, host {want_sum}",
                sums[k]
            );
        }
    }
}
