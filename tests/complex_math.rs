//! Complex `sqrt`, `log` and `log1p`: the HLO lowering writes StableHLO's
//! accurate formulas (crates/xlaclient-core/src/ir/complex_math.rs), so a
//! program gives JAX's answers and the same bits from its `HloModuleProto` as
//! from its StableHLO text.
//!
//! JAX's values: `scripts/record_jax_complex_math.py` (jax 0.10.2, CPU) over
//! every pair of 25 special values (signed zeros, ±1, -2, tiny, huge,
//! subnormal, largest finite, infinities, NaN), written to
//! tests/data/jax/complex_math.json as IEEE bit patterns.

mod common;

use xlaclient::{Builder, CompileOptions, ElementType, Op, ProgramFormat, Shape};

type OpFn = fn(&Op) -> Op;

/// An op, its input `(re, im)` and the exact answer `(re, im)`.
type ExactCase = (OpFn, (f64, f64), (f64, f64));

const OPS: [(&str, OpFn); 3] = [
    ("sqrt", |z| z.sqrt()),
    ("log", |z| z.log()),
    ("log1p", |z| z.log1p()),
];

fn bits(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_u64().expect("bits"))
        .collect()
}

fn recorded() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/jax/complex_math.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the recording")).expect("JSON")
}

/// Whether `a` and `b` (IEEE bits of the real type) are the same, NaN matching
/// any NaN.
fn same(a: u64, b: u64, f64_bits: bool) -> bool {
    let nan = |v: u64| {
        if f64_bits {
            f64::from_bits(v).is_nan()
        } else {
            f32::from_bits(v as u32).is_nan()
        }
    };
    a == b || (nan(a) && nan(b))
}

/// Runs `f` on the complex values `re + i·im` (real type `real`) compiled from
/// `format`; the outputs' real and imaginary parts as bits.
fn run(
    f: OpFn,
    real: ElementType,
    re: &[u64],
    im: &[u64],
    format: ProgramFormat,
) -> (Vec<u64>, Vec<u64>) {
    let c = common::client();
    let n = re.len() as i64;
    let b = Builder::new("complex_math");
    let r = b.parameter(0, Shape::array(real, &[n]), "re");
    let i = b.parameter(1, Shape::array(real, &[n]), "im");
    let y = f(&r.complex(&i));
    let m = b.build_tuple(&[&y.real(), &y.imag()]).expect("builds");
    let exe = c
        .compile_with(&m, &CompileOptions::new().format(format))
        .expect("compiles");
    let (rb, ib) = if real == ElementType::F64 {
        let re: Vec<f64> = re.iter().map(|v| f64::from_bits(*v)).collect();
        let im: Vec<f64> = im.iter().map(|v| f64::from_bits(*v)).collect();
        (common::upload(&re, &[n]), common::upload(&im, &[n]))
    } else {
        let re: Vec<f32> = re.iter().map(|v| f32::from_bits(*v as u32)).collect();
        let im: Vec<f32> = im.iter().map(|v| f32::from_bits(*v as u32)).collect();
        (common::upload(&re, &[n]), common::upload(&im, &[n]))
    };
    let out = exe.execute(&[&rb, &ib]).expect("runs");
    let read = |k: usize| -> Vec<u64> {
        if real == ElementType::F64 {
            out[k]
                .to_vec::<f64>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        } else {
            out[k]
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits() as u64)
                .collect()
        }
    };
    (read(0), read(1))
}

/// The distance in units in the last place between two floats of the same type
/// given as bits (0 for two NaNs; large across signs).
fn ulps(a: u64, b: u64, f64_bits: bool) -> u64 {
    if same(a, b, f64_bits) {
        return 0;
    }
    // Map the sign-magnitude bits onto a line where neighbours differ by one.
    let line = |v: u64| -> i128 {
        let (sign, mag) = if f64_bits {
            (v >> 63, (v & !(1 << 63)) as i128)
        } else {
            (v >> 31 & 1, (v & 0x7FFF_FFFF) as i128)
        };
        if sign == 1 { -mag } else { mag }
    };
    line(a).abs_diff(line(b)) as u64
}

#[test]
fn complex_sqrt_log_log1p_give_jaxs_bits_from_both_formats() {
    // Both formats agree bit for bit on every plugin. Against JAX's bits: exact on
    // the default plugin (PJRT C API 0.115, the XLA of jaxlib 0.10.2's era); on
    // the older second plugin 11 of the 625 c64 `log1p` points come out one ulp
    // apart from JAX, the same from both formats (its own real kernels), so
    // there the bound is one ulp.
    let (major, minor) = common::client().plugin().api_version();
    let exact = (major, minor) >= (0, 100);
    let data = recorded();
    for (ty, real) in [
        ("complex64", ElementType::F32),
        ("complex128", ElementType::F64),
    ] {
        let d = &data[ty];
        let (re, im) = (bits(&d["re"]), bits(&d["im"]));
        let wide = real == ElementType::F64;
        for (name, f) in OPS {
            let (want_re, want_im) = (bits(&d[name]["re"]), bits(&d[name]["im"]));
            let (hlo_re, hlo_im) = run(f, real, &re, &im, ProgramFormat::Hlo);
            let (shlo_re, shlo_im) = run(f, real, &re, &im, ProgramFormat::StableHlo);
            for k in 0..re.len() {
                assert!(
                    same(hlo_re[k], shlo_re[k], wide) && same(hlo_im[k], shlo_im[k], wide),
                    "{ty} {name} at input bits ({:#x}, {:#x}): HLO ({:#x}, {:#x}), StableHLO ({:#x}, {:#x})",
                    re[k],
                    im[k],
                    hlo_re[k],
                    hlo_im[k],
                    shlo_re[k],
                    shlo_im[k],
                );
            }
            let bound = if exact { 0 } else { 1 };
            let off: Vec<usize> = (0..re.len())
                .filter(|k| {
                    ulps(hlo_re[*k], want_re[*k], wide) > bound
                        || ulps(hlo_im[*k], want_im[*k], wide) > bound
                })
                .collect();
            assert!(
                off.is_empty(),
                "{ty} {name}: {} of {} more than {bound} ulp from JAX, first at input bits ({:#x}, {:#x}): got ({:#x}, {:#x}), JAX ({:#x}, {:#x})",
                off.len(),
                re.len(),
                re[off[0]],
                im[off[0]],
                hlo_re[off[0]],
                hlo_im[off[0]],
                want_re[off[0]],
                want_im[off[0]],
            );
        }
    }
}

#[test]
fn complex_sqrt_log_log1p_are_exact_where_the_answer_is() {
    // Plain arithmetic: sqrt(2i) = 1 + i, sqrt(0.5i) = 0.5 + 0.5i, sqrt(-4) = 2i,
    // log(1) = 0, log(-1) = iπ, log1p(-1) = -∞, log1p(0) = 0, log(e) = 1 (to the
    // last bit of f64's e).
    let cases: [ExactCase; 8] = [
        (|z| z.sqrt(), (0.0, 2.0), (1.0, 1.0)),
        (|z| z.sqrt(), (0.0, 0.5), (0.5, 0.5)),
        (|z| z.sqrt(), (-4.0, 0.0), (0.0, 2.0)),
        (|z| z.log(), (1.0, 0.0), (0.0, 0.0)),
        (|z| z.log(), (-1.0, 0.0), (0.0, std::f64::consts::PI)),
        (|z| z.log1p(), (-1.0, 0.0), (f64::NEG_INFINITY, 0.0)),
        (|z| z.log1p(), (0.0, 0.0), (0.0, 0.0)),
        (|z| z.log(), (std::f64::consts::E, 0.0), (1.0, 0.0)),
    ];
    for (real, tol) in [(ElementType::F32, 1e-7), (ElementType::F64, 1e-16)] {
        for (k, (f, z, want)) in cases.iter().enumerate() {
            let enc = |v: f64| {
                if real == ElementType::F64 {
                    v.to_bits()
                } else {
                    (v as f32).to_bits() as u64
                }
            };
            let dec = |b: u64| {
                if real == ElementType::F64 {
                    f64::from_bits(b)
                } else {
                    f32::from_bits(b as u32) as f64
                }
            };
            let (r, i) = run(*f, real, &[enc(z.0)], &[enc(z.1)], ProgramFormat::Hlo);
            let got = (dec(r[0]), dec(i[0]));
            let close = |g: f64, w: f64| g == w || (g - w).abs() <= tol * w.abs().max(1.0);
            assert!(
                close(got.0, want.0) && close(got.1, want.1),
                "case {k} on {real}: {z:?} gave {got:?}, want {want:?}"
            );
        }
    }
}

#[test]
fn the_hlo_text_writes_complex_sqrt_as_real_arithmetic() {
    // The IR keeps one `sqrt` (its gradient and batching rules apply); what XLA
    // receives has no complex sqrt left, only real ops and one `complex`.
    let b = Builder::new("text");
    let z = b.parameter(0, Shape::array(ElementType::C64, &[3]), "z");
    let m = b.build(&z.sqrt()).unwrap();
    let text = m.to_hlo_text();
    assert!(!text.contains("c64[3]{0} sqrt("), "{text}");
    assert_eq!(text.matches(" complex(").count(), 1, "{text}");
    assert!(text.contains("f32[3]{0} sqrt("), "{text}");
    // The StableHLO text keeps the op: XLA's own pipeline expands it.
    let shlo = m.to_stablehlo().unwrap();
    assert!(shlo.contains("\"stablehlo.sqrt\"(%arg0)"), "{shlo}");
}

#[test]
fn chained_complex_ops_are_each_written_as_real_arithmetic() {
    // A second complex op after an expanded one (its operand now far along the
    // rewritten computation) is expanded too: the HLO keeps no complex
    // sqrt/log/log1p, and both formats give the same bits.
    let b = Builder::new("chain");
    let z = b.parameter(0, Shape::array(ElementType::C64, &[4]), "z");
    let y = z.log1p().sqrt().log();
    let m = b.build_tuple(&[&y.real(), &y.imag()]).unwrap();
    let text = m.to_hlo_text();
    for op in ["sqrt(", "log(", "log-plus-one("] {
        assert!(!text.contains(&format!("c64[4]{{0}} {op}")), "{op}: {text}");
    }
    assert_eq!(text.matches(" complex(").count(), 3, "{text}");
    let re: Vec<u64> = [0.5f32, -1.0, 2.0, 0.0]
        .iter()
        .map(|v| v.to_bits() as u64)
        .collect();
    let im: Vec<u64> = [0.25f32, 0.0, -3.0, 1.0]
        .iter()
        .map(|v| v.to_bits() as u64)
        .collect();
    let f: OpFn = |z| z.log1p().sqrt().log();
    let a = run(f, ElementType::F32, &re, &im, ProgramFormat::Hlo);
    let s = run(f, ElementType::F32, &re, &im, ProgramFormat::StableHlo);
    for k in 0..re.len() {
        assert!(
            same(a.0[k], s.0[k], false) && same(a.1[k], s.1[k], false),
            "point {k}: HLO ({:#x}, {:#x}), StableHLO ({:#x}, {:#x})",
            a.0[k],
            a.1[k],
            s.0[k],
            s.1[k]
        );
    }
}
