//! HLO text and other program formats: golden HLO text for a small module (rewrite
//! with `BLESS=1 cargo test --test hlo_text`), and StableHLO (MLIR) text compiled and
//! run through the same client.

mod common;

use common::*;
use xlaclient::{Builder, CompileOptions, Shape};

fn golden(name: &str, text: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with BLESS=1)", path.display()));
    assert_eq!(
        text,
        want,
        "HLO text differs from {} (BLESS=1 rewrites it)",
        path.display()
    );
}

/// The text without `, metadata={...}` (source lines move when this file is edited;
/// they are checked separately below).
fn without_metadata(text: &str) -> String {
    text.lines()
        .map(|l| match l.find(", metadata={") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn mlp_layer_prints_as_golden_hlo_text() {
    let b = Builder::new("layer");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let w = b.parameter(1, Shape::of::<f32>(&[3, 4]), "w");
    let line = line!() + 1;
    let y = (x.matmul(&w) + 1.0).relu().reduce_sum(&[1]);
    let m = b.build(&y).unwrap();
    let text = m.to_hlo_text();
    golden("layer.hlo.txt", &without_metadata(&text));
    // Every instruction of that line points at it.
    let at_line = format!("metadata={{source_file=\"tests/hlo_text.rs\" source_line={line}}}");
    let ops: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("%dot.") || l.contains("%reduce."))
        .collect();
    assert!(ops.len() >= 2, "{text}");
    assert!(ops.iter().all(|l| l.contains(&at_line)), "{text}");
    // The text names every instruction the proto holds.
    for c in &m.proto().computations {
        for i in &c.instructions {
            assert!(
                text.contains(&format!("%{} = ", i.name)),
                "{} missing",
                i.name
            );
        }
    }
}

/// Shardings on parameters, a constraint and the root, as XLA prints them
/// (`sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}`, a tuple's as
/// `{{...}}`).
#[test]
fn shardings_print_as_golden_hlo_text() {
    use xlaclient::{Client, ClientExt, ClientOptions, Mesh, Op, P, Plugin};
    let plugin = Plugin::default_plugin().unwrap();
    let c = Client::new(&plugin, &ClientOptions::new().cpu_device_count(4)).unwrap();
    let mesh = Mesh::new(&c, &[("data", 2), ("model", 2)]).unwrap();
    let spec = (Shape::of::<f32>(&[4, 2]), Shape::of::<f32>(&[2]));
    let f = c
        .jit_sharded(
            "sharded",
            &mesh,
            &spec,
            &(P::new([Some("data"), None]), P::new([Some("model")])),
            &(P::replicated(), P::new([None, Some("model")])),
            |_, (x, b): (Op, Op)| {
                let y =
                    (x + b).with_sharding_constraint(&mesh, &P::new([Some("data"), Some("model")]));
                (y.reduce_sum(&[0]), y)
            },
        )
        .unwrap();
    let text = f.computation().to_hlo_text();
    golden("sharded.hlo.txt", &without_metadata(&text));
    for want in [
        "parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
        "parameter(1), sharding={devices=[2,2]0,2,1,3 last_tile_dim_replicate}",
        "custom_call_target=\"Sharding\", sharding={devices=[2,2]0,1,2,3}",
        "sharding={{replicated}, {devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}}",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    // The parameters and the root carry the line of the `jit_sharded` call.
    for l in text
        .lines()
        .filter(|l| l.contains("parameter(") || l.contains("ROOT %tuple"))
    {
        assert!(l.contains("source_file=\"tests/hlo_text.rs\""), "{l}");
    }
}

const STABLEHLO: &str = r#"
module @double_plus_one {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    %c = stablehlo.constant dense<1.0> : tensor<4xf32>
    %1 = stablehlo.add %0, %c : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"#;

#[test]
fn stablehlo_text_compiles_and_runs() {
    let exe = client()
        .compile_mlir(STABLEHLO.as_bytes(), &CompileOptions::new())
        .unwrap();
    let out = exe
        .execute(&[&upload(&[1.0f32, 2.0, -3.0, 0.5], &[4])])
        .unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 5.0, -5.0, 2.0]);
}

#[test]
fn broken_stablehlo_text_is_an_error() {
    let e = client()
        .compile_mlir(
            b"module { func.func @main( this is not mlir",
            &CompileOptions::new(),
        )
        .unwrap_err();
    assert!(matches!(e, xlaclient::RuntimeError::Pjrt { .. }), "{e:?}");
}
