//! Random bits and bit casts on the real plugin: bitcast-convert against Rust's
//! `to_bits`/`to_le_bytes`; rng-bit-generator is deterministic in its state, moves
//! the state on, and its uniform samples have the moments of U[0, 1).

mod common;

use common::*;
use xlaclient::ops::random::RngAlgorithm;
use xlaclient::{Builder, ElementType, Shape};

#[test]
fn bitcast_convert_reinterprets_bits() {
    let b = Builder::new("bits");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let as_u32 = x.bitcast_convert(ElementType::U32);
    let as_u8 = x.bitcast_convert(ElementType::U8);
    assert_eq!(as_u8.dims().unwrap(), vec![3, 4]);
    let back = as_u8.bitcast_convert(ElementType::F32);
    assert_eq!(back.dims().unwrap(), vec![3]);
    let m = b.build_tuple(&[&as_u32, &as_u8, &back]).unwrap();
    let xs = [1.5f32, -0.0, f32::INFINITY];
    let out = run(&m, &[&upload(&xs, &[3])]);
    let bits: Vec<u32> = xs.iter().map(|v| v.to_bits()).collect();
    assert_eq!(out[0].to_vec::<u32>().unwrap(), bits);
    let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(out[1].to_vec::<u8>().unwrap(), bytes);
    let round: Vec<u32> = out[2]
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(round, bits);
    // A wider type needs the ratio as the last axis.
    let b = Builder::new("bad");
    let y = b.parameter(0, Shape::of::<u8>(&[3, 2]), "y");
    assert!(b.build(&y.bitcast_convert(ElementType::U32)).is_err());
}

#[test]
fn the_generator_is_a_function_of_its_state() {
    for alg in [
        RngAlgorithm::ThreeFry,
        RngAlgorithm::Philox,
        RngAlgorithm::Default,
    ] {
        let b = Builder::new("rng");
        let key = b.parameter(0, Shape::of::<u64>(&[2]), "key");
        let (next, bits) = key.rng_bit_generator(alg, ElementType::U32, &[1000]);
        let (_, more) = next.rng_bit_generator(alg, ElementType::U32, &[1000]);
        let m = b.build_tuple(&[&next, &bits, &more]).unwrap();
        let exe = client().compile(&m).unwrap();
        let run_with = |k: [u64; 2]| {
            let out = exe.execute(&[&upload(&k, &[2])]).unwrap();
            (
                out[0].to_vec::<u64>().unwrap(),
                out[1].to_vec::<u32>().unwrap(),
                out[2].to_vec::<u32>().unwrap(),
            )
        };
        let (s1, a1, c1) = run_with([42, 7]);
        let (s2, a2, _) = run_with([42, 7]);
        let (_, a3, _) = run_with([43, 7]);
        assert_eq!((&s1, &a1), (&s2, &a2), "{alg:?}: same state, same bits");
        assert_ne!(s1, vec![42, 7], "{alg:?}: the state moves on");
        assert_ne!(a1, a3, "{alg:?}: another key, other bits");
        assert_ne!(a1, c1, "{alg:?}: the next state gives other bits");
        // Roughly half the bits are set.
        let ones: u32 = a1.iter().map(|v| v.count_ones()).sum();
        let frac = ones as f64 / (32.0 * 1000.0);
        assert!((frac - 0.5).abs() < 0.02, "{alg:?}: {frac}");
    }
}

#[test]
fn uniform_samples_have_the_moments_of_u01() {
    let b = Builder::new("uniform");
    let key = b.parameter(0, Shape::of::<u64>(&[2]), "key");
    let (_, u) = key.uniform_f32(RngAlgorithm::ThreeFry, &[20000]);
    let m = b.build(&u).unwrap();
    let xs = run1::<f32>(&m, &[&upload(&[1u64, 2], &[2])]);
    assert!(xs.iter().all(|v| (0.0..1.0).contains(v)));
    let n = xs.len() as f64;
    let mean = xs.iter().map(|v| *v as f64).sum::<f64>() / n;
    let var = xs.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n;
    // U[0,1): mean 1/2, variance 1/12; 20,000 samples: standard errors ~0.002.
    assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.005, "variance {var}");
}
