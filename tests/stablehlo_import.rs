//! StableHLO modules recorded from JAX 0.10.2 (`scripts/record_stablehlo_jax.py`:
//! `jax.jit(f).lower(*args).as_text()`, the inputs and JAX's own outputs) import
//! into the IR through the crate's shape rules, verify, compile and give JAX's
//! answers; an imported MLP is differentiated inside a built program and checked
//! against finite differences; malformed text gives errors naming the line, never
//! a panic.

mod common;

use common::*;
use xlaclient::stablehlo::{self, ImportedModule};
use xlaclient::{Buffer, Builder, Error, Shape};

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/stablehlo")
}

fn load(name: &str) -> (String, serde_json::Value) {
    let text = std::fs::read_to_string(dir().join(format!("{name}.mlir"))).unwrap();
    let json = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
    (text, serde_json::from_str(&json).unwrap())
}

struct Arr {
    dims: Vec<i64>,
    dtype: String,
    data: Vec<f64>,
}

fn arrays(v: &serde_json::Value) -> Vec<Arr> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| Arr {
            dims: a["dims"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .collect(),
            dtype: a["dtype"].as_str().unwrap().to_string(),
            data: a["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect(),
        })
        .collect()
}

fn upload_arr(a: &Arr) -> Buffer {
    match a.dtype.as_str() {
        "float32" => upload(
            &a.data.iter().map(|x| *x as f32).collect::<Vec<_>>(),
            &a.dims,
        ),
        "int32" => upload(
            &a.data.iter().map(|x| *x as i32).collect::<Vec<_>>(),
            &a.dims,
        ),
        "uint32" => upload(
            &a.data.iter().map(|x| *x as u32).collect::<Vec<_>>(),
            &a.dims,
        ),
        t => panic!("dtype {t}"),
    }
}

/// Downloads `b` as f64 values (floats, integers, bools).
fn download(b: &Buffer, dtype: &str) -> Vec<f64> {
    match dtype {
        "float32" => b
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        "int32" => b
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        "uint32" => b
            .to_vec::<u32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        "bool" => b
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|x| f64::from(u8::from(x)))
            .collect(),
        t => panic!("dtype {t}"),
    }
}

/// Imports corpus file `name`, runs it on the recorded inputs and compares with
/// JAX's outputs within the file's tolerance (0: bit for bit, as for RNG and
/// indexing).
fn check(name: &str) -> ImportedModule {
    let (text, rec) = load(name);
    let m = stablehlo::import(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let tol = rec["tolerance"].as_f64().unwrap();
    let inputs = arrays(&rec["inputs"]);
    // Argument checks: the imported module knows its parameter shapes.
    assert_eq!(m.computation().parameter_shapes().len(), inputs.len());
    let bufs: Vec<Buffer> = inputs.iter().map(upload_arr).collect();
    let refs: Vec<&Buffer> = bufs.iter().collect();
    let outs = run(m.computation(), &refs);
    let want = arrays(&rec["outputs"]);
    assert_eq!(outs.len(), want.len(), "{name}: number of outputs");
    for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
        assert_eq!(o.shape().unwrap().dims(), &w.dims[..], "{name} output {k}");
        let got = download(o, &w.dtype);
        for (i, (g, e)) in got.iter().zip(&w.data).enumerate() {
            let ok = if tol == 0.0 {
                // Bit for bit as f32 (the JSON holds f32 values, and integers).
                (*g as f32).to_bits() == (*e as f32).to_bits()
            } else {
                (g - e).abs() <= tol * (1.0 + e.abs())
            };
            assert!(
                ok,
                "{name} output {k}[{i}]: {g} vs JAX {e} (tolerance {tol})"
            );
        }
    }
    m
}

#[test]
fn mlp() {
    let m = check("mlp");
    // The same checks as a built module: HLO text, a stable fingerprint.
    assert!(m.computation().to_hlo_text().contains("dot("));
    let again = stablehlo::import(&load("mlp").0).unwrap();
    assert_eq!(
        m.computation().fingerprint(),
        again.computation().fingerprint()
    );
}

/// The MLP through `jax.export` (locations and location aliases in the text).
#[test]
fn mlp_from_jax_export() {
    let m = check("mlp_export");
    let plain = stablehlo::import(&load("mlp").0).unwrap();
    assert_eq!(
        m.computation().fingerprint(),
        plain.computation().fingerprint()
    );
}

#[test]
fn transformer_block() {
    check("transformer_block");
}

#[test]
fn scan_rnn() {
    check("scan_rnn");
}

#[test]
fn while_loop() {
    check("while_loop");
}

#[test]
fn cond_switch() {
    let m = check("cond_switch");
    // The branches' ops are inside the branch computations (run only when
    // taken), not hoisted into the entry.
    let text = m.computation().to_hlo_text();
    let entry = &text[text.find("ENTRY").expect("an entry")..];
    let entry = &entry[..entry.find("\n}").unwrap_or(entry.len())];
    for op in ["sine(", "cosine(", "exponential(", "negate("] {
        assert!(
            text.contains(op) && !entry.contains(op),
            "{op} in the entry:\n{text}"
        );
    }
}

#[test]
fn gather_scatter() {
    check("gather_scatter");
}

#[test]
fn conv() {
    check("conv");
}

#[test]
fn rng() {
    check("rng");
}

#[test]
fn sort_topk() {
    check("sort_topk");
}

/// One update of the Anakin learner (../shared/bench-anchors/jax_anakin_catch.py:
/// vmapped Catch rollouts in a scan, argmax, TD(lambda) in a reverse scan, the
/// gradient, Adam, in a fori_loop) as JAX lowers it.
#[test]
fn anakin_learner() {
    check("anakin");
}

/// The gradient of an imported MLP, built by the crate's autodiff inside a
/// program of its own, against central finite differences of the imported
/// module's forward pass (in f64 on the host from f32 runs).
#[test]
fn grad_through_imported_mlp() {
    let (text, rec) = load("mlp");
    let m = stablehlo::import(&text).unwrap();
    let inputs = arrays(&rec["inputs"]);
    let b = Builder::new("grad_mlp");
    let ps: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, a)| b.parameter(i, Shape::of::<f32>(&a.dims), &format!("p{i}")))
        .collect();
    let refs: Vec<_> = ps.iter().collect();
    let y = b.call_imported(&m, &refs).unwrap();
    let loss = y[0].sum(&[0, 1], false);
    let g = b.grad(&loss, &ps[0]);
    let c = b.build_tuple(&[&loss, &g]).unwrap();
    let bufs: Vec<Buffer> = inputs.iter().map(upload_arr).collect();
    let brefs: Vec<&Buffer> = bufs.iter().collect();
    let out = run(&c, &brefs);
    let grad = out[1].to_vec::<f32>().unwrap();
    // Finite differences on w1 through the imported module alone.
    let exe = client().compile(m.computation()).unwrap();
    let f = |w1: &[f32]| -> f64 {
        let mut bs: Vec<Buffer> = inputs.iter().map(upload_arr).collect();
        bs[0] = upload(w1, &inputs[0].dims);
        let r: Vec<&Buffer> = bs.iter().collect();
        let o = exe.execute(&r).unwrap();
        o[0].to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| f64::from(*x))
            .sum()
    };
    let w1: Vec<f32> = inputs[0].data.iter().map(|x| *x as f32).collect();
    let h = 1e-2f32;
    for i in 0..w1.len() {
        let (mut p, mut q) = (w1.clone(), w1.clone());
        p[i] += h;
        q[i] -= h;
        let fd = (f(&p) - f(&q)) / (2.0 * f64::from(h));
        let gi = f64::from(grad[i]);
        assert!(
            (fd - gi).abs() < 2e-2 * (1.0 + fd.abs()),
            "w1[{i}]: grad {gi} vs fd {fd}"
        );
    }
}

/// Composition: an imported module called twice inside a built program, with
/// built ops around it, equals the plain-Rust composition of its outputs.
#[test]
fn call_imported_composes() {
    let m = stablehlo::import(
        "func.func public @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
           %0 = stablehlo.multiply %x, %y : tensor<3xf32>
           return %0 : tensor<3xf32>
         }",
    )
    .unwrap();
    let b = Builder::new("compose");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let once = b.call_imported(&m, &[&x, &x]).unwrap();
    let twice = b.call_imported(&m, &[&once[0], &x]).unwrap();
    let c = b.build(&(&twice[0] + 1.0)).unwrap();
    let xs = [1.0f32, -2.0, 3.0];
    let got = run1::<f32>(&c, &[&upload(&xs, &[3])]);
    let want: Vec<f32> = xs.iter().map(|v| v * v * v + 1.0).collect();
    assert_eq!(got, want);
    // Wrong argument shapes are refused with the argument named.
    let e = b.call_imported(&m, &[&x, &b.parameter(1, Shape::of::<f32>(&[4]), "z")]);
    let msg = e.unwrap_err().to_string();
    assert!(
        msg.contains("argument 1") && msg.contains("tensor<3xf32>"),
        "{msg}"
    );
}

fn import_err(text: &str) -> (u32, String) {
    match stablehlo::import(text) {
        Err(Error::StableHlo {
            line, op, reason, ..
        }) => (line, format!("{op}: {reason}")),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("imported"),
    }
}

#[test]
fn errors_name_the_op_and_line() {
    let (line, msg) = import_err(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
           %0 = stablehlo.frobnicate %x : tensor<3xf32>
           return %0 : tensor<3xf32>
         }",
    );
    assert_eq!(line, 2);
    assert!(
        msg.contains("stablehlo.frobnicate") && msg.contains("not an op"),
        "{msg}"
    );
    // A declared type the shape rule disagrees with.
    let (line, msg) = import_err(
        "func.func @main(%x: tensor<3xf32>, %y: tensor<4xf32>) -> tensor<3xf32> {
           %0 = stablehlo.add %x, %y : tensor<3xf32>
           return %0 : tensor<3xf32>
         }",
    );
    assert_eq!(line, 2, "{msg}");
    assert!(msg.contains("stablehlo.add"), "{msg}");
    // An attribute the importer does not read.
    let (line, msg) = import_err(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
           %0 = stablehlo.add %x, %x {frobnication = 1 : i64} : tensor<3xf32>
           return %0 : tensor<3xf32>
         }",
    );
    assert_eq!(line, 2);
    assert!(msg.contains("attribute `frobnication`"), "{msg}");
    // A value used before it is defined.
    let (line, msg) = import_err(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
           %0 = stablehlo.add %x, %1 : tensor<3xf32>
           return %0 : tensor<3xf32>
         }",
    );
    assert_eq!(line, 2);
    assert!(msg.contains("`%1` is not defined"), "{msg}");
    // A recursive module is an error, not a stack overflow.
    let (_, msg) = import_err(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {
           %0 = func.call @main(%x) : (tensor<f32>) -> tensor<f32>
           return %0 : tensor<f32>
         }",
    );
    assert!(msg.contains("nested more than"), "{msg}");
}

const CORPUS: [&str; 12] = [
    "mlp",
    "mlp_export",
    "transformer_block",
    "scan_rnn",
    "while_loop",
    "cond_switch",
    "gather_scatter",
    "conv",
    "rng",
    "sort_topk",
    "anakin",
    "policy",
];

/// Applies `edits` (position, kind, byte) to `t`: truncate, replace a byte with
/// one of MLIR's punctuation or letters, delete, duplicate a piece, change a digit.
fn mutate(t: &mut Vec<u8>, edits: &[(usize, u8, u8)]) {
    let alphabet = b"%#@:=,()[]{}<>x0123456789-. \nabcdefstensorf32i1^\"";
    for (p, kind, byte) in edits {
        if t.is_empty() {
            return;
        }
        let at = p % t.len();
        match kind % 5 {
            0 => t.truncate(at),
            1 => t[at] = alphabet[*byte as usize % alphabet.len()],
            2 => {
                t.remove(at);
            }
            3 => {
                let end = (at + 1 + *byte as usize % 40).min(t.len());
                let piece = t[at..end].to_vec();
                t.splice(at..at, piece);
            }
            _ => {
                if t[at].is_ascii_digit() {
                    t[at] = b'0' + byte % 10;
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("STABLEHLO_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
        ..Default::default()
    })]

    /// Fuzzing: every corpus file, truncated anywhere and mutated, gives an
    /// imported module or an error, never a panic (proptest reports a panic as a
    /// failure, with the smallest edit list that causes it).
    #[test]
    fn mutated_corpus_never_panics(
        file in 0..CORPUS.len(),
        edits in proptest::collection::vec((0usize..1 << 20, 0u8..5, proptest::num::u8::ANY), 1..5),
    ) {
        let mut t = std::fs::read(dir().join(format!("{}.mlir", CORPUS[file]))).unwrap();
        mutate(&mut t, &edits);
        let s = String::from_utf8_lossy(&t).into_owned();
        let _ = stablehlo::import(&s);
    }
}

/// Generic `if` and `case` (an index out of range runs the last branch, a
/// negative one too, as StableHLO says), a hex-string constant, and `compare`
/// with `TOTALORDER` (-0 < +0, NaN above everything), against plain Rust.
#[test]
fn generic_branches_hex_constants_and_total_order() {
    let m = stablehlo::import(
        r#"func.func @main(%p: tensor<i1>, %x: tensor<3xf32>, %i: tensor<i32>, %a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xi1>) {
  %0 = "stablehlo.if"(%p) ({
    %n = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %n : tensor<3xf32>
  }, {
    stablehlo.return %x : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  %1 = "stablehlo.case"(%i) ({
    %s = stablehlo.sine %x : tensor<3xf32>
    stablehlo.return %s : tensor<3xf32>
  }, {
    %c = stablehlo.cosine %x : tensor<3xf32>
    stablehlo.return %c : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  %c = stablehlo.constant dense<"0x0000803F000000400000404000008040"> : tensor<4xf32>
  %t = "stablehlo.compare"(%a, %b) <{comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type TOTALORDER>}> : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return %0, %1, %c, %t : tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xi1>
}"#,
    )
    .unwrap();
    let exe = client().compile(m.computation()).unwrap();
    let x = [0.5f32, -1.0, 2.0];
    let a = [-0.0f32, f32::NAN, 1.0];
    let b = [0.0f32, 1.0, f32::NAN];
    for (p, i) in [(true, 0i32), (false, 1), (true, -1), (false, 5)] {
        let bufs = [
            upload(&[p], &[]),
            upload(&x, &[3]),
            upload(&[i], &[]),
            upload(&a, &[3]),
            upload(&b, &[3]),
        ];
        let refs: Vec<&Buffer> = bufs.iter().collect();
        let out = exe.execute(&refs).unwrap();
        let want0: Vec<f32> = x.iter().map(|v| if p { -v } else { *v }).collect();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want0, "if {p}");
        let want1: Vec<f32> = x
            .iter()
            .map(|v| if i == 0 { v.sin() } else { v.cos() })
            .collect();
        let got1 = out[1].to_vec::<f32>().unwrap();
        for (g, w) in got1.iter().zip(&want1) {
            assert!((g - w).abs() < 1e-6, "case {i}: {got1:?} vs {want1:?}");
        }
        assert_eq!(out[2].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        let want3: Vec<bool> = a
            .iter()
            .zip(&b)
            .map(|(l, r)| l.total_cmp(r).is_lt())
            .collect();
        assert_eq!(out[3].to_vec::<bool>().unwrap(), want3);
    }
}

/// `depth` `case` ops nested in each other's branches.
fn nested_cases(depth: usize) -> String {
    let mut body = "stablehlo.return %x : tensor<f32>".to_string();
    for _ in 0..depth {
        body = format!(
            "%r = \"stablehlo.case\"(%i) ({{\n{body}\n}}) : (tensor<i32>) -> tensor<f32>\nstablehlo.return %r : tensor<f32>"
        );
    }
    // The outermost terminator is the function's.
    let p = body.rfind("stablehlo.return").unwrap();
    let body = format!(
        "{}return{}",
        &body[..p],
        &body[p + "stablehlo.return".len()..]
    );
    format!("func.func @main(%i: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {{\n{body}\n}}")
}

/// Nesting: regions 23 deep import and run (with the entry function, the limit of
/// 24 levels); deeper than the importer's limit
/// (24) is an error, and deeper than the parser's (100) a parse error, never a
/// stack overflow.
#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let m = stablehlo::import(&nested_cases(23)).unwrap();
    let out = run1::<f32>(
        m.computation(),
        &[&upload(&[0i32], &[]), &upload(&[2.5f32], &[])],
    );
    assert_eq!(out, [2.5]);
    let e = stablehlo::import(&nested_cases(30))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nested more than 24"), "{e}");
    let e = stablehlo::import(&nested_cases(150))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nested more than 100"), "{e}");
}

/// Complex and f8 constants as JAX 0.10.2 prints them (`jax.jit(f).lower(z)
/// .as_text()` of `f = lambda x: (x * jnp.array([1+2j, 3-4j], jnp.complex64),
/// (x.real.astype(jnp.float8_e4m3fn) * jnp.array([1.5, -2.0],
/// jnp.float8_e4m3fn)).astype(jnp.float32), x * jnp.complex128(0.5-0.25j))` with
/// 64-bit types on, `z = [1+1j, 2-1j]`): list and splat forms; outputs against
/// JAX's (`[-1+3j, 2-11j]`, `[1.5, -4]`, `[0.75+0.25j, 0.75-1j]`, which plain
/// complex arithmetic gives too).
#[test]
fn complex_and_f8_constants_import() {
    let text = r#"module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2xcomplex<f32>>) -> (tensor<2xcomplex<f32>> {jax.result_info = "result[0]"}, tensor<2xf32> {jax.result_info = "result[1]"}, tensor<2xcomplex<f64>> {jax.result_info = "result[2]"}) {
    %cst = stablehlo.constant dense<[(1.000000e+00,2.000000e+00), (3.000000e+00,-4.000000e+00)]> : tensor<2xcomplex<f32>>
    %cst_0 = stablehlo.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf8E4M3FN>
    %0 = stablehlo.multiply %arg0, %cst : tensor<2xcomplex<f32>>
    %1 = stablehlo.real %arg0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
    %2 = stablehlo.convert %1 : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
    %3 = stablehlo.multiply %2, %cst_0 : tensor<2xf8E4M3FN>
    %4 = stablehlo.convert %3 : (tensor<2xf8E4M3FN>) -> tensor<2xf32>
    %5 = stablehlo.convert %arg0 : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f64>>
    %cst_1 = stablehlo.constant dense<(5.000000e-01,-2.500000e-01)> : tensor<complex<f64>>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<complex<f64>>) -> tensor<2xcomplex<f64>>
    %7 = stablehlo.multiply %5, %6 : tensor<2xcomplex<f64>>
    return %0, %4, %7 : tensor<2xcomplex<f32>>, tensor<2xf32>, tensor<2xcomplex<f64>>
  }
}"#;
    let m = stablehlo::import(text).unwrap();
    // The argument: complex64 [1+1i, 2-1i], built from its parts.
    let b = Builder::new("args");
    let re = b.constant_vec(&[1.0f32, 2.0]);
    let im = b.constant_vec(&[1.0f32, -1.0]);
    let z = run(&b.build(&re.complex(&im)).unwrap(), &[]).remove(0);
    let exe = client().compile(m.computation()).unwrap();
    let out = exe.execute(&[&z]).unwrap();
    let parts32 = |buf: &Buffer| -> Vec<f32> {
        buf.to_bytes()
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let parts64 = |buf: &Buffer| -> Vec<f64> {
        buf.to_bytes()
            .unwrap()
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(parts32(&out[0]), vec![-1.0, 3.0, 2.0, -11.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![1.5, -4.0]);
    assert_eq!(parts64(&out[2]), vec![0.75, 0.25, 0.75, -1.0]);
    // A complex element needs both parts; a real type takes no pair.
    for (bad, why) in [
        ("dense<(1.0)> : tensor<complex<f32>>", "two parts"),
        ("dense<(1.0, 2.0)> : tensor<f32>", "a complex element"),
        ("dense<1.0> : tensor<complex<f32>>", "(re, im)"),
    ] {
        let text = format!(
            "func.func public @main() -> tensor<{}> {{\n  %0 = stablehlo.constant {bad}\n  return %0 : tensor<{}>\n}}",
            if bad.contains("complex") {
                "complex<f32>"
            } else {
                "f32"
            },
            if bad.contains("complex") {
                "complex<f32>"
            } else {
                "f32"
            },
        );
        let e = stablehlo::import(&text).unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("line 2"), "{bad}: {e}");
    }
}
