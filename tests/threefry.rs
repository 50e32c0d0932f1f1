//! JAX's default PRNG reproduced bit for bit on the real plugin: keys, split,
//! fold_in, bits and uniform against vectors recorded from jax 0.10.2
//! (`scripts/record_jax_random.py`, `tests/data/jax/random.json`).

mod common;

use common::*;
use xlaclient::{Builder, Shape};

fn u32s(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn f32s(v: &serde_json::Value) -> Vec<f32> {
    let mut out = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<f32>) {
        match v {
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            x => out.push(x.as_f64().unwrap() as f32),
        }
    }
    walk(v, &mut out);
    out
}

#[test]
fn split_fold_in_bits_and_uniform_equal_jax() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jax/random.json");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in rec["cases"].as_array().unwrap() {
        // JAX without x64 keeps a seed's low 32 bits (2^32 + 7 keys as 7).
        let seed = case["seed"].as_u64().unwrap();
        let b = Builder::new("prng");
        let key = b.prng_key(seed as u32);
        let k = b.parameter(0, Shape::of::<u32>(&[2]), "key");
        let seven = b.constant(7u32);
        let outs = [
            key.clone(),
            k.threefry_split(3),
            k.threefry_fold_in(&seven),
            k.threefry_bits(&[5]),
            k.threefry_bits(&[2, 3]),
            k.threefry_uniform(&[4], 0.0, 1.0),
            k.threefry_uniform(&[2, 3], -2.0, 3.0),
        ];
        let m = b.build_tuple(&outs.iter().collect::<Vec<_>>()).unwrap();
        let want_key = u32s(&case["key"]);
        let r = run(&m, &[&upload(&want_key, &[2])]);
        assert_eq!(r[0].to_vec::<u32>().unwrap(), want_key, "key of {seed}");
        assert_eq!(
            r[1].to_vec::<u32>().unwrap(),
            u32s(&case["split3"]),
            "split of {seed}"
        );
        assert_eq!(
            r[2].to_vec::<u32>().unwrap(),
            u32s(&case["fold_in_7"]),
            "fold_in of {seed}"
        );
        assert_eq!(
            r[3].to_vec::<u32>().unwrap(),
            u32s(&case["bits_5"]),
            "bits of {seed}"
        );
        assert_eq!(
            r[4].to_vec::<u32>().unwrap(),
            u32s(&case["bits_2x3"]),
            "bits of {seed}"
        );
        assert_eq!(
            r[5].to_vec::<f32>().unwrap(),
            f32s(&case["uniform_4"]),
            "uniform of {seed}"
        );
        assert_eq!(
            r[6].to_vec::<f32>().unwrap(),
            f32s(&case["uniform_2x3_m2_3"]),
            "uniform of {seed}"
        );
    }
}

#[test]
fn a_key_of_another_shape_is_an_error() {
    let b = Builder::new("bad");
    let k = b.parameter(0, Shape::of::<u32>(&[3]), "k");
    assert!(
        b.build(&k.threefry_bits(&[2]))
            .unwrap_err()
            .to_string()
            .contains("u32[2]")
    );
}

/// The reset program of `tests/common` (gymnax's CartPole reset).
fn reset(envs: i64, unrolled: bool) -> xlaclient::Computation {
    gymnax_reset(envs, unrolled).unwrap()
}

#[test]
fn rolled_rounds_give_the_unrolled_bits_in_a_small_module() {
    // The rounds as a loop (JAX's CPU lowering, the default) and written out (its
    // GPU lowering) compute the same values; the rolled module is a fraction of the
    // size. (Unrolled, this module of 4 environments took over 100 s to compile on
    // the CPU plugin: XLA's code generation for the fused hashes.)
    let (rolled, unrolled) = (reset(4, false), reset(4, true));
    let count =
        |m: &xlaclient::Computation| -> usize { m.ir().comps.iter().map(|c| c.instrs.len()).sum() };
    assert!(
        count(&rolled) * 2 < count(&unrolled),
        "{} vs {} instructions",
        count(&rolled),
        count(&unrolled)
    );
    // The values, on 2 environments (the unrolled form compiles in a second).
    let key = upload(&[0u32, 42], &[2]);
    let a = run(&reset(2, false), &[&key]);
    let b = run(&reset(2, true), &[&key]);
    assert_eq!(a.len(), 5);
    for (x, y) in a[..4].iter().zip(&b[..4]) {
        let (x, y) = (x.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
        assert_eq!(x, y);
        assert!(x.iter().all(|v| (-0.05..0.05).contains(v)), "{x:?}");
    }
    // The next key too.
    assert_eq!(a[4].to_vec::<u32>().unwrap(), b[4].to_vec::<u32>().unwrap());
}

#[test]
fn split_keys_and_fold_in_with_numbers_equal_the_array_forms() {
    // `let [rng, key] = rng.split_keys()` gives the rows of `random_split(2)`, and
    // `fold_in(7)` the fold of a u32 constant 7.
    let b = Builder::new("keys");
    let rng = b.parameter(0, Shape::of::<u32>(&[2]), "rng");
    let [a, c] = rng.split_keys();
    let rows = rng.random_split(2);
    let folded = rng.fold_in(7);
    let seven = b.constant_vec(&[7u32]).reshape(&[]);
    let m = b
        .build_tuple(&[&a, &c, &rows, &folded, &rng.random_fold_in(&seven)])
        .unwrap();
    let out = run(&m, &[&upload(&[0u32, 42], &[2])]);
    let v: Vec<Vec<u32>> = out.iter().map(|o| o.to_vec::<u32>().unwrap()).collect();
    assert_eq!([v[0].clone(), v[1].clone()].concat(), v[2]);
    assert_eq!(v[3], v[4]);
    assert_ne!(v[0], v[1]);
}
