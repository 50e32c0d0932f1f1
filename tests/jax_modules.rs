//! Modules exported by JAX (recorded by `scripts/record_jax_modules.py` with jax
//! 0.10.2: serialized HloModuleProtos, their inputs and JAX's outputs) pass the
//! crate's checks of foreign modules (every instruction through the builder's shape
//! rules), compile, and give JAX's answers.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::{CompileOptions, Shape};

fn case(name: &str) -> (Vec<u8>, serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jax");
    let bytes = std::fs::read(dir.join(format!("{name}.hlo.pb"))).unwrap();
    let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    (bytes, serde_json::from_str(&json).unwrap())
}

fn arrays(v: &serde_json::Value) -> Vec<(Vec<i64>, Vec<f32>)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let dims = a["dims"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .collect();
            let vals = a["f32"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (dims, vals)
        })
        .collect()
}

fn check(name: &str) {
    let (bytes, rec) = case(name);
    let exe = client()
        .compile_hlo_bytes(&bytes, &CompileOptions::new())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let inputs: Vec<_> = arrays(&rec["inputs"])
        .into_iter()
        .map(|(d, v)| upload(&v, &d))
        .collect();
    let refs: Vec<_> = inputs.iter().collect();
    let outs = exe.execute(&refs).unwrap();
    let want = arrays(&rec["outputs"]);
    assert_eq!(outs.len(), want.len(), "{name}: outputs");
    for (o, (dims, vals)) in outs.iter().zip(&want) {
        assert_eq!(o.shape().unwrap(), Shape::of::<f32>(dims), "{name}");
        assert_close(&o.to_vec::<f32>().unwrap(), vals, 1e-5);
    }
}

#[test]
fn jax_mlp() {
    check("mlp");
}

#[test]
fn jax_softmax() {
    check("softmax");
}

#[test]
fn jax_where_tanh_transpose_mean() {
    check("leaky");
}
