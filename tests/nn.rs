//! The neural-network library (`src/nn/`) on the real plugin: initialisers against
//! values recorded from jax 0.10.2 with Haiku's formulas (`scripts/record_jax_nn.py`)
//! and statistically on large draws; layers, activations and losses against plain
//! Rust (and the activations against `jax.nn`'s recorded values); gradients of the
//! losses and layers against finite differences (`tests/common/fd.rs`); optimizers
//! over a few steps against an independent plain-Rust transcription of optax's
//! update rules; and a whole training step through `jit_donating`.

mod common;
#[path = "common/fd.rs"]
mod fd;

use common::*;
use fd::check;
use serde_json::Value;
use xlaclient::ClientExt;
use xlaclient::nn::init::{self, Initializer};
use xlaclient::nn::{
    self, Activation, KeySequence, Linear, LinearParams, Mlp, MlpParams, OptState, Schedule,
    losses, optim,
};
use xlaclient::{Builder, ElementType, Op, Shape, Tree};

/// Runs a program with no inputs whose outputs are `f`'s ops, downloaded as `f32`.
fn eval(f: impl FnOnce(&Builder) -> Vec<Op>) -> Vec<Vec<f32>> {
    let jit = client()
        .jit("nn_test", &(), |b, ()| f(b))
        .expect("trace and compile");
    jit.call(&())
        .expect("run")
        .iter()
        .map(|buf| buf.to_vec::<f32>().expect("download"))
        .collect()
}

fn eval1(f: impl FnOnce(&Builder) -> Op) -> Vec<f32> {
    eval(|b| vec![f(b)]).remove(0)
}

fn jax_data() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/jax/nn.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read nn.json")).expect("parse")
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| f32::from_bits(x.as_u64().expect("u32 bits") as u32))
        .collect()
}

/// Distance in units in the last place between two finite f32 of the same sign.
fn ulps(a: f32, b: f32) -> u32 {
    if a == b {
        return 0;
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 { i32::MIN - i } else { i }
    };
    (i64::from(key(a)) - i64::from(key(b))).unsigned_abs() as u32
}

fn by_name(name: &str) -> Initializer {
    use init::{Distribution, FanMode};
    match name {
        "truncated_normal_fan_in" => init::truncated_normal_fan_in(),
        "uniform_fan_in" => init::uniform_fan_in(),
        "normal_fan_in" => init::normal_fan_in(),
        "glorot_uniform" => init::glorot_uniform(),
        "glorot_normal" => init::glorot_normal(),
        "he_uniform" => init::he_uniform(),
        "he_normal" => init::he_normal(),
        "lecun_uniform" => init::lecun_uniform(),
        "lecun_normal" => init::lecun_normal(),
        "fan_out_normal" => Initializer::VarianceScaling {
            scale: 0.5,
            mode: FanMode::FanOut,
            distribution: Distribution::Normal,
        },
        "truncated_normal_2_1" => Initializer::TruncatedNormal {
            mean: 1.0,
            stddev: 2.0,
        },
        "normal_3_m1" => Initializer::Normal {
            mean: -1.0,
            stddev: 3.0,
        },
        other => panic!("unknown initializer {other}"),
    }
}

// ---------------------------------------------------------------------------------
// Initialisers

/// Every recorded case equals Haiku's values (recorded eagerly, op by op): 95% or
/// more bit for bit, and every value within one rounding of the distribution's
/// scale. The rest is XLA's: our program is compiled whole, and XLA may fuse
/// `m + s·x` (a nonzero mean) or the uniform sampler's `u·(hi−lo) + lo` (in vector
/// tails) into one rounding where the eager recording has two; and the older
/// plugin's `log1p` moves some normal draws by a few ulp (`src/ops/sampling.rs`).
#[test]
fn initializers_equal_haikus_formulas_in_jax() {
    let data = jax_data();
    assert_eq!(data["jax_version"], "0.10.2");
    let cases = data["inits"].as_array().unwrap();
    assert_eq!(cases.len(), 72);
    let mut outs = Vec::new();
    let got = eval(|b| {
        for c in cases {
            let key = b.prng_key(c["seed"].as_u64().unwrap() as u32);
            let dims: Vec<i64> = c["dims"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .collect();
            outs.push(by_name(c["init"].as_str().unwrap()).init(&key, &dims));
        }
        outs
    });
    let (mut exact, mut total) = (0usize, 0usize);
    for (c, got) in cases.iter().zip(&got) {
        let want = f32s(&c["bits"]);
        assert_eq!(got.len(), want.len(), "{}", c["init"]);
        // One rounding of the distribution's scale: its largest value, plus the mean.
        let mean = match by_name(c["init"].as_str().unwrap()) {
            Initializer::Normal { mean, .. } | Initializer::TruncatedNormal { mean, .. } => mean,
            _ => 0.0,
        };
        let scale = want.iter().fold(0.0f32, |m, w| m.max(w.abs())) + mean.abs() as f32;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 2.0 * f32::EPSILON * scale,
                "{} seed {} dims {}: element {i} is {g}, Haiku's {w} ({} ulp)",
                c["init"],
                c["seed"],
                c["dims"],
                ulps(*g, *w)
            );
            exact += usize::from(g == w);
            total += 1;
        }
    }
    assert!(
        exact * 100 >= total * 95,
        "only {exact} of {total} values bit-equal to Haiku's"
    );
    eprintln!("{exact} of {total} values bit-equal to Haiku's");
}

/// `Linear::new(in, out).init(key)` is `hk.Linear(out)`'s parameters on that key:
/// `w` from Haiku's default `TruncatedNormal(1/√in)`, `b` zeros.
#[test]
fn linear_init_is_haikus_default() {
    let data = jax_data();
    let case = data["inits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["init"] == "truncated_normal_fan_in" && c["seed"] == 42 && c["dims"][0] == 5)
        .expect("the [5, 7] case");
    let want = f32s(&case["bits"]);
    let out = eval(|b| {
        let p = Linear::new(5, 7).init(&b.prng_key(42));
        vec![p.w, p.b]
    });
    assert_eq!(out[1], vec![0.0; 7]);
    // Bit for bit on the pinned plugin; the older one's log1p may move a few draws.
    for (g, w) in out[0].iter().zip(&want) {
        assert!(ulps(*g, *w) <= 4, "w: {g} vs Haiku's {w}");
    }
}

fn moments(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|x| f64::from(*x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|x| (f64::from(*x) - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var.sqrt())
}

/// A million draws each: standard deviations within 1% of the definition (the
/// sampling error is ~0.07%), means within 5 standard errors of the distribution's
/// mean, and every value inside the support (uniform limits, truncation at ±2σ).
#[test]
fn initializer_moments_and_bounds() {
    let dims = [500i64, 2000];
    let (fan_in, fan_out) = (500.0f64, 2000.0f64);
    let avg = (fan_in + fan_out) / 2.0;
    // (initializer, stddev, half-width of the support, mean)
    let tn = 0.879_625_661_034_239_8;
    let cases: Vec<(&str, Initializer, f64, f64, f64)> = vec![
        (
            "truncated_normal_fan_in",
            init::truncated_normal_fan_in(),
            tn / fan_in.sqrt(),
            2.0 / fan_in.sqrt(),
            0.0,
        ),
        (
            "uniform_fan_in",
            init::uniform_fan_in(),
            1.0 / (3.0 * fan_in).sqrt(),
            1.0 / fan_in.sqrt(),
            0.0,
        ),
        (
            "normal_fan_in",
            init::normal_fan_in(),
            1.0 / fan_in.sqrt(),
            f64::INFINITY,
            0.0,
        ),
        (
            "glorot_uniform",
            init::glorot_uniform(),
            (1.0 / avg).sqrt(),
            (3.0 / avg).sqrt(),
            0.0,
        ),
        (
            "glorot_normal",
            init::glorot_normal(),
            (1.0 / avg).sqrt(),
            2.0 * (1.0 / avg).sqrt() / tn,
            0.0,
        ),
        (
            "he_uniform",
            init::he_uniform(),
            (2.0 / fan_in).sqrt(),
            (6.0 / fan_in).sqrt(),
            0.0,
        ),
        (
            "he_normal",
            init::he_normal(),
            (2.0 / fan_in).sqrt(),
            2.0 * (2.0 / fan_in).sqrt() / tn,
            0.0,
        ),
        (
            "lecun_uniform",
            init::lecun_uniform(),
            (1.0 / fan_in).sqrt(),
            (3.0 / fan_in).sqrt(),
            0.0,
        ),
        (
            "lecun_normal",
            init::lecun_normal(),
            (1.0 / fan_in).sqrt(),
            2.0 * (1.0 / fan_in).sqrt() / tn,
            0.0,
        ),
        (
            "fan_out uniform",
            Initializer::VarianceScaling {
                scale: 1.0,
                mode: init::FanMode::FanOut,
                distribution: init::Distribution::Uniform,
            },
            (1.0 / fan_out).sqrt(),
            (3.0 / fan_out).sqrt(),
            0.0,
        ),
        (
            "truncated normal 0.5 at 3",
            Initializer::TruncatedNormal {
                mean: 3.0,
                stddev: 0.5,
            },
            0.5 * tn,
            1.0,
            3.0,
        ),
        (
            "uniform -1..3",
            Initializer::Uniform { lo: -1.0, hi: 3.0 },
            4.0 / 12f64.sqrt(),
            2.0,
            1.0,
        ),
    ];
    let draws = eval(|b| {
        let key = b.prng_key(1234);
        cases
            .iter()
            .enumerate()
            .map(|(i, c)| c.1.init(&key.random_fold_in(&b.constant(i as u32)), &dims))
            .collect()
    });
    for ((name, _, std, half, mean), v) in cases.iter().zip(&draws) {
        let (m, s) = moments(v);
        assert!(
            (s / std - 1.0).abs() < 0.01,
            "{name}: stddev {s}, expected {std}"
        );
        let se = std / (v.len() as f64).sqrt();
        assert!(
            (m - mean).abs() < 5.0 * se,
            "{name}: mean {m}, expected {mean}"
        );
        let (lo, hi) = v
            .iter()
            .fold((f32::MAX, f32::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        assert!(
            f64::from(lo) >= mean - half * (1.0 + 1e-6)
                && f64::from(hi) <= mean + half * (1.0 + 1e-6),
            "{name}: values in [{lo}, {hi}], support {mean} ± {half}"
        );
        if half.is_finite() {
            // The support is used: the extremes come close to its ends.
            assert!(
                f64::from(hi) > mean + 0.95 * half && f64::from(lo) < mean - 0.95 * half,
                "{name}: values in [{lo}, {hi}] do not reach toward {mean} ± {half}"
            );
        }
    }
    // Constants ignore the key.
    let c = eval1(|b| Initializer::Constant(0.25).init(&b.prng_key(0), &[3, 2]));
    assert_eq!(c, vec![0.25; 6]);
}

#[test]
fn same_key_same_values_other_key_other_values() {
    let out = eval(|b| {
        let i = init::he_normal();
        vec![
            i.init(&b.prng_key(3), &[4, 4]),
            i.init(&b.prng_key(3), &[4, 4]),
            i.init(&b.prng_key(4), &[4, 4]),
        ]
    });
    assert_eq!(out[0], out[1]);
    assert!(out[0].iter().zip(&out[2]).all(|(a, b)| a != b));
}

// ---------------------------------------------------------------------------------
// Layers and activations

fn matvec(x: &[f32], w: &[f32], b: &[f32], rows: usize, n_in: usize, n_out: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * n_out];
    for r in 0..rows {
        for o in 0..n_out {
            let mut acc = f64::from(b[o]);
            for i in 0..n_in {
                acc += f64::from(x[r * n_in + i]) * f64::from(w[i * n_out + o]);
            }
            out[r * n_out + o] = acc as f32;
        }
    }
    out
}

#[test]
fn linear_and_mlp_match_plain_rust() {
    let mut rng = Rng(11);
    let x = rng.vec(4 * 3, -1.0, 1.0);
    let w1 = rng.vec(3 * 5, -1.0, 1.0);
    let b1 = rng.vec(5, -0.5, 0.5);
    let w2 = rng.vec(5 * 2, -1.0, 1.0);
    let b2 = rng.vec(2, -0.5, 0.5);
    let net = Mlp::new(&[3, 5, 2], Activation::Tanh);
    let (xs, w1s, b1s, w2s, b2s) = (x.clone(), w1.clone(), b1.clone(), w2.clone(), b2.clone());
    let out = eval(|b| {
        let c = |v: &[f32], d: &[i64]| b.constant_vec(v).reshape(d);
        let params: MlpParams<Op> = vec![
            LinearParams {
                w: c(&w1s, &[3, 5]),
                b: c(&b1s, &[5]),
            },
            LinearParams {
                w: c(&w2s, &[5, 2]),
                b: c(&b2s, &[2]),
            },
        ];
        let x = c(&xs, &[4, 3]);
        let relu_net = Mlp::new(&[3, 5, 2], Activation::Relu);
        vec![
            net.layers[0].apply(&params[0], &x),
            net.apply(&params, &x),
            relu_net.apply(&params, &x),
        ]
    });
    let h = matvec(&x, &w1, &b1, 4, 3, 5);
    assert_close(&out[0], &h, 1e-5);
    let tanh: Vec<f32> = h.iter().map(|v| v.tanh()).collect();
    assert_close(&out[1], &matvec(&tanh, &w2, &b2, 4, 5, 2), 1e-5);
    let relu: Vec<f32> = h.iter().map(|v| v.max(0.0)).collect();
    assert_close(&out[2], &matvec(&relu, &w2, &b2, 4, 5, 2), 1e-5);
}

#[test]
fn mlp_shapes_spec_and_init() {
    let net = Mlp::new(&[50, 256, 3], Activation::Relu);
    let spec = net.spec();
    assert_eq!(spec.len(), 2);
    assert_eq!(spec[0].w, Shape::of::<f32>(&[50, 256]));
    assert_eq!(spec[1].b, Shape::of::<f32>(&[3]));
    let out = eval(|b| {
        let p = net.init(&b.prng_key(0));
        let obs = b.zeros(ElementType::F32, &[2, 10, 5, 1]);
        let q = net.apply(&p, &nn::flatten(&obs));
        assert_eq!(q.dims().unwrap(), vec![2, 3]);
        p.into_leaves()
    });
    // Layer 0's weights: Haiku's default at stddev 1/√50, truncated at ±2σ.
    let bound = 2.0 / 50f32.sqrt();
    assert!(out[0].iter().all(|v| v.abs() <= bound));
    assert!(out[0].iter().any(|v| v.abs() > 0.5 * bound));
    assert_eq!(out[1], vec![0.0; 256]);
    // The two layers draw from different keys.
    assert_ne!(out[0][..768], out[2][..768]);
}

#[test]
fn flatten_keeps_the_batch_axis() {
    let v: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let vs = v.clone();
    let out = eval1(|b| {
        let x = b.constant_vec(&vs).reshape(&[2, 3, 4]);
        let f = nn::flatten(&x);
        assert_eq!(f.dims().unwrap(), vec![2, 12]);
        f
    });
    assert_eq!(out, v);
}

fn act_reference(name: &str, x: f64) -> f64 {
    let sig = 1.0 / (1.0 + (-x).exp());
    match name {
        "relu" => x.max(0.0),
        "tanh" => x.tanh(),
        "sigmoid" => sig,
        "gelu" => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        "silu" => x * sig,
        "elu" => {
            if x > 0.0 {
                x
            } else {
                x.exp_m1()
            }
        }
        "leaky_relu" => {
            if x >= 0.0 {
                x
            } else {
                0.01 * x
            }
        }
        "softplus" => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        other => panic!("{other}"),
    }
}

fn act_by_name(name: &str) -> Activation {
    match name {
        "relu" => Activation::Relu,
        "tanh" => Activation::Tanh,
        "sigmoid" => Activation::Sigmoid,
        "gelu" => Activation::Gelu,
        "silu" => Activation::Silu,
        "elu" => Activation::Elu,
        "leaky_relu" => Activation::LeakyRelu(0.01),
        "softplus" => Activation::Softplus,
        other => panic!("{other}"),
    }
}

/// Each activation against plain Rust in f64 and `jax.nn`'s recorded values.
#[test]
fn activations_match_plain_rust_and_jax() {
    let data = jax_data();
    let x = f32s(&data["act_x"]);
    let names: Vec<String> = data["acts"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(names.len(), 8);
    let xs = x.clone();
    let out = eval(|b| {
        let xc = b.constant_vec(&xs);
        let mut v: Vec<Op> = names.iter().map(|n| act_by_name(n).apply(&xc)).collect();
        // The free functions are the same functions.
        v.push(nn::swish(&xc));
        v.push(nn::elu(&xc, 0.5));
        v.push(nn::leaky_relu(&xc, 0.2));
        v
    });
    for (name, got) in names.iter().zip(&out) {
        let want: Vec<f32> = x
            .iter()
            .map(|v| act_reference(name, f64::from(*v)) as f32)
            .collect();
        assert_close(got, &want, 2e-6);
        let jax = f32s(&data["acts"][name]);
        for (i, (g, j)) in got.iter().zip(&jax).enumerate() {
            assert!(
                (g - j).abs() <= 2e-6 * (1.0 + j.abs()),
                "{name}({}): {g}, jax.nn {j}",
                x[i]
            );
        }
    }
    let n = names.len();
    let silu: Vec<f32> = x
        .iter()
        .map(|v| act_reference("silu", f64::from(*v)) as f32)
        .collect();
    assert_close(&out[n], &silu, 2e-6);
    let elu: Vec<f32> = x
        .iter()
        .map(|v| if *v > 0.0 { *v } else { 0.5 * v.exp_m1() })
        .collect();
    assert_close(&out[n + 1], &elu, 2e-6);
    let leaky: Vec<f32> = x
        .iter()
        .map(|v| if *v >= 0.0 { *v } else { 0.2 * v })
        .collect();
    assert_close(&out[n + 2], &leaky, 2e-6);
}

#[test]
fn softmax_wrappers() {
    let out = eval(|b| {
        let x = b
            .constant_vec(&[1.0f32, 2.0, 3.0, -1.0, 0.0, 1.0])
            .reshape(&[2, 3]);
        vec![nn::softmax(&x, -1), nn::log_softmax(&x, 1)]
    });
    let rows = [[1.0f64, 2.0, 3.0], [-1.0, 0.0, 1.0]];
    let mut sm = Vec::new();
    let mut lsm = Vec::new();
    for r in rows {
        let z: f64 = r.iter().map(|v| v.exp()).sum();
        sm.extend(r.iter().map(|v| (v.exp() / z) as f32));
        lsm.extend(r.iter().map(|v| (v - z.ln()) as f32));
    }
    assert_close(&out[0], &sm, 1e-6);
    assert_close(&out[1], &lsm, 1e-6);
}

// ---------------------------------------------------------------------------------
// Losses

#[test]
fn losses_match_plain_rust() {
    let p = [0.5f32, -1.0, 2.0, 3.5, -0.2, 0.0];
    let t = [0.0f32, 1.0, 2.5, -1.0, -0.1, 2.0];
    let logits = [1.0f32, 2.0, 0.5, -1.0, 0.0, 3.0];
    let labels = [2i32, 0];
    let probs = [0.2f32, 0.5, 0.3, 0.0, 1.0, 0.0];
    let out = eval(|b| {
        let c = |v: &[f32]| b.constant_vec(v).reshape(&[2, 3]);
        let (pc, tc, lc) = (c(&p), c(&t), c(&logits));
        vec![
            losses::squared_error(&pc, &tc),
            losses::l2_loss(&pc, &tc),
            losses::mse(&pc, &tc),
            losses::huber_loss(&pc, &tc, 1.0),
            losses::huber_loss(&pc, &tc, 0.3),
            losses::softmax_cross_entropy_with_integer_labels(&lc, &b.constant_vec(&labels)),
            losses::softmax_cross_entropy(&lc, &c(&probs)),
            losses::mean(&losses::squared_error(&pc, &tc)),
        ]
    });
    let e: Vec<f64> = p.iter().zip(&t).map(|(a, b)| f64::from(a - b)).collect();
    let sq: Vec<f32> = e.iter().map(|e| (e * e) as f32).collect();
    assert_close(&out[0], &sq, 1e-6);
    let l2: Vec<f32> = sq.iter().map(|v| 0.5 * v).collect();
    assert_close(&out[1], &l2, 1e-6);
    let mse = sq.iter().sum::<f32>() / 6.0;
    assert_close(&out[2], &[mse], 1e-6);
    assert_close(&out[7], &[mse], 1e-6);
    for (k, delta) in [(3, 1.0f64), (4, 0.3)] {
        let h: Vec<f32> = e
            .iter()
            .map(|e| {
                if e.abs() <= delta {
                    0.5 * e * e
                } else {
                    0.5 * delta * delta + delta * (e.abs() - delta)
                }
            })
            .map(|v| v as f32)
            .collect();
        assert_close(&out[k], &h, 1e-6);
    }
    let lse = |r: &[f32]| r.iter().map(|v| f64::from(*v).exp()).sum::<f64>().ln();
    let ce_int: Vec<f32> = (0..2)
        .map(|r| {
            let row = &logits[r * 3..r * 3 + 3];
            (lse(row) - f64::from(row[labels[r] as usize])) as f32
        })
        .collect();
    assert_close(&out[5], &ce_int, 1e-6);
    let ce: Vec<f32> = (0..2)
        .map(|r| {
            let row = &logits[r * 3..r * 3 + 3];
            let l = lse(row);
            -(0..3)
                .map(|j| f64::from(probs[r * 3 + j]) * (f64::from(row[j]) - l))
                .sum::<f64>() as f32
        })
        .collect();
    assert_close(&out[6], &ce, 1e-6);
    // One-hot labels give the integer-label loss.
    let out = eval1(|b| {
        let lc = b.constant_vec(&logits).reshape(&[2, 3]);
        let onehot = b.constant_vec(&labels).one_hot(3, ElementType::F32);
        losses::softmax_cross_entropy(&lc, &onehot)
    });
    assert_close(&out, &ce_int, 1e-6);
}

/// Gradients of the losses, activations and layers against central differences
/// (f64; inputs kept away from kinks).
#[test]
fn gradients_match_finite_differences() {
    let s: &[&[i64]] = &[&[3, 4], &[3, 4]];
    check("squared_error", s, -2.0, 2.0, |p| {
        losses::squared_error(&p[0], &p[1])
    });
    check("mse", s, -2.0, 2.0, |p| losses::mse(&p[0], &p[1]));
    // Errors lie in (-3, 3) around 0.9: both the quadratic and the linear part.
    check("huber", s, -1.5, 1.5, |p| {
        losses::huber_loss(&p[0], &p[1], 0.9)
    });
    check("softmax_ce", s, -2.0, 2.0, |p| {
        losses::softmax_cross_entropy(&p[0], &p[1].softmax(-1))
    });
    check("softmax_ce_int", &[&[3, 4]], -2.0, 2.0, |p| {
        let labels = p[0].builder().constant_vec(&[3i32, 0, 1]);
        losses::softmax_cross_entropy_with_integer_labels(&p[0], &labels)
    });
    let one: &[&[i64]] = &[&[2, 5]];
    for (name, act) in [
        ("gelu", Activation::Gelu),
        ("silu", Activation::Silu),
        ("sigmoid", Activation::Sigmoid),
        ("softplus", Activation::Softplus),
        ("tanh", Activation::Tanh),
    ] {
        check(name, one, -3.0, 3.0, |p| act.apply(&p[0]));
    }
    // Piecewise ones away from 0.
    check("elu", one, 0.2, 2.0, |p| {
        nn::elu(&(&p[0] * -1.0), 1.0) + nn::elu(&p[0], 1.0)
    });
    check("leaky_relu", one, 0.2, 2.0, |p| {
        nn::leaky_relu(&(&p[0] * -1.0), 0.1) + nn::relu(&p[0])
    });
    // An MLP through every parameter and the input.
    check(
        "mlp",
        &[&[4, 3], &[3, 5], &[5], &[5, 2], &[2]],
        -1.0,
        1.0,
        |p| {
            let net = Mlp::new(&[3, 5, 2], Activation::Gelu);
            let params = vec![
                LinearParams {
                    w: p[1].clone(),
                    b: p[2].clone(),
                },
                LinearParams {
                    w: p[3].clone(),
                    b: p[4].clone(),
                },
            ];
            net.apply(&params, &p[0])
        },
    );
}

// ---------------------------------------------------------------------------------
// Optimizers: a plain-Rust transcription of optax's rules, in f64.

const W0: [f32; 4] = [0.5, -1.0, 2.0, 0.25];
const B0: [f32; 2] = [0.1, -0.3];
/// Gradients for three steps (w then b), of mixed signs and magnitudes.
const GRADS: [[f32; 6]; 3] = [
    [0.3, -0.2, 1.5, -0.01, 0.7, -2.0],
    [-0.1, 0.4, 0.9, 0.02, -0.5, 1.0],
    [0.2, 0.2, -3.0, 0.0, 0.1, 0.05],
];

/// Runs `steps` updates of `opt` from (W0, B0) with the fixed gradients (clipped
/// first where the optimizer says so) and returns the parameters after each step,
/// flattened (w then b), and the final count.
fn run_optimizer(opt: optim::Optimizer, steps: usize) -> (Vec<Vec<f32>>, i32) {
    let jit = client()
        .jit("opt_test", &(), |b, ()| {
            let mut params = LinearParams {
                w: b.constant_vec(&W0).reshape(&[2, 2]),
                b: b.constant_vec(&B0),
            };
            let mut state = opt.init(&params);
            let mut trail = Vec::new();
            for g in GRADS.iter().take(steps) {
                let grads = LinearParams {
                    w: b.constant_vec(&g[..4]).reshape(&[2, 2]),
                    b: b.constant_vec(&g[4..]),
                };
                let (p, s) = opt.update(&grads, state, &params);
                params = p;
                state = s;
                trail.push(params.clone());
            }
            (trail, state.count)
        })
        .unwrap();
    let (trail, count) = jit.call(&()).unwrap();
    let trail = trail
        .into_iter()
        .map(|p| {
            let mut v = p.w.to_vec::<f32>().unwrap();
            v.extend(p.b.to_vec::<f32>().unwrap());
            v
        })
        .collect();
    (trail, count.to_vec::<i32>().unwrap()[0])
}

fn start() -> Vec<f64> {
    W0.iter().chain(&B0).map(|v| f64::from(*v)).collect()
}

fn grads(step: usize) -> Vec<f64> {
    GRADS[step].iter().map(|v| f64::from(*v)).collect()
}

fn assert_trail(name: &str, got: &[Vec<f32>], want: &[Vec<f64>]) {
    assert_eq!(got.len(), want.len());
    for (step, (g, w)) in got.iter().zip(want).enumerate() {
        for (i, (g, w)) in g.iter().zip(w).enumerate() {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{name}: step {} parameter {i}: {g}, optax's rule gives {w}",
                step + 1
            );
        }
    }
}

/// optax.sgd: trace t ← g + m·t; update −lr·t (Nesterov −lr·(g + m·t)).
fn sgd_reference(
    lr: impl Fn(usize) -> f64,
    momentum: f64,
    nesterov: bool,
    steps: usize,
) -> Vec<Vec<f64>> {
    let mut p = start();
    let mut t = [0.0; 6];
    let mut out = Vec::new();
    for s in 0..steps {
        let g = grads(s);
        for i in 0..6 {
            t[i] = g[i] + momentum * t[i];
            let dir = if nesterov {
                g[i] + momentum * t[i]
            } else {
                t[i]
            };
            p[i] += -lr(s) * dir;
        }
        out.push(p.clone());
    }
    out
}

/// optax.adamw (adam when wd = 0): scale_by_adam with bias correction,
/// add_decayed_weights, scale by −lr.
fn adamw_reference(
    lr: impl Fn(usize) -> f64,
    b1: f64,
    b2: f64,
    eps: f64,
    wd: f64,
    clip: Option<f64>,
    steps: usize,
) -> Vec<Vec<f64>> {
    let mut p = start();
    let (mut m, mut v) = (vec![0.0; 6], vec![0.0; 6]);
    let mut out = Vec::new();
    for s in 0..steps {
        let g = clip_reference(&grads(s), clip);
        let count = (s + 1) as i32;
        let bc1 = 1.0 - b1.powi(count);
        let bc2 = 1.0 - b2.powi(count);
        for i in 0..6 {
            m[i] = (1.0 - b1) * g[i] + b1 * m[i];
            v[i] = (1.0 - b2) * g[i] * g[i] + b2 * v[i];
            let u = (m[i] / bc1) / ((v[i] / bc2).sqrt() + eps) + wd * p[i];
            p[i] += -lr(s) * u;
        }
        out.push(p.clone());
    }
    out
}

fn clip_reference(g: &[f64], max_norm: Option<f64>) -> Vec<f64> {
    let Some(max) = max_norm else {
        return g.to_vec();
    };
    let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm < max {
        g.to_vec()
    } else {
        g.iter().map(|x| x / norm * max).collect()
    }
}

#[test]
fn sgd_plain_momentum_and_nesterov() {
    for (momentum, nesterov) in [(0.0, false), (0.9, false), (0.9, true), (0.5, true)] {
        let (got, count) = run_optimizer(optim::sgd(0.1, momentum, nesterov), 3);
        let name = format!("sgd(momentum {momentum}, nesterov {nesterov})");
        assert_trail(&name, &got, &sgd_reference(|_| 0.1, momentum, nesterov, 3));
        assert_eq!(count, 3, "{name}");
    }
}

/// Steps 1–3 of Adam, where bias correction matters most: step 1 moves every
/// parameter by almost exactly `lr` against its gradient's sign.
#[test]
fn adam_with_bias_correction() {
    let (got, count) = run_optimizer(optim::adam(0.01, 0.9, 0.999, 1e-8), 3);
    assert_trail(
        "adam",
        &got,
        &adamw_reference(|_| 0.01, 0.9, 0.999, 1e-8, 0.0, None, 3),
    );
    assert_eq!(count, 3);
    let p0 = start();
    for i in 0..6 {
        let g = GRADS[0][i];
        let moved = f64::from(got[0][i]) - p0[i];
        assert!(
            (moved + 0.01 * f64::from(g.signum())).abs() < 1e-5,
            "step 1 moves parameter {i} by {moved}"
        );
    }
    // Other betas and a large eps (which dominates small second moments).
    let (got, _) = run_optimizer(optim::adam(0.1, 0.5, 0.9, 0.1), 3);
    assert_trail(
        "adam b1 .5 b2 .9 eps .1",
        &got,
        &adamw_reference(|_| 0.1, 0.5, 0.9, 0.1, 0.0, None, 3),
    );
}

#[test]
fn adamw_decays_weights() {
    let (got, _) = run_optimizer(optim::adamw(0.01, 0.9, 0.999, 1e-8, 0.1), 3);
    let want = adamw_reference(|_| 0.01, 0.9, 0.999, 1e-8, 0.1, None, 3);
    assert_trail("adamw", &got, &want);
    // And the decay made a difference.
    let plain = adamw_reference(|_| 0.01, 0.9, 0.999, 1e-8, 0.0, None, 3);
    assert!((want[2][2] - plain[2][2]).abs() > 1e-4);
}

#[test]
fn clip_by_global_norm_active_and_inactive() {
    // The gradients' norms are about 2.6, 1.5 and 3.0.
    let norms: Vec<f64> = (0..3)
        .map(|s| grads(s).iter().map(|x| x * x).sum::<f64>().sqrt())
        .collect();
    assert!(norms.iter().all(|n| *n > 1.0 && *n < 10.0));
    for max in [1.0, 10.0, 2.0] {
        let opt = optim::adam(0.01, 0.9, 0.999, 1e-8).clip_by_global_norm(max);
        let (got, _) = run_optimizer(opt, 3);
        let want = adamw_reference(|_| 0.01, 0.9, 0.999, 1e-8, 0.0, Some(max), 3);
        assert_trail(&format!("clipped adam at {max}"), &got, &want);
        let opt = optim::sgd(0.1, 0.0, false).clip_by_global_norm(max);
        let (got, _) = run_optimizer(opt, 3);
        let mut p = start();
        let want: Vec<Vec<f64>> = (0..3)
            .map(|s| {
                for (pi, g) in p.iter_mut().zip(clip_reference(&grads(s), Some(max))) {
                    *pi -= 0.1 * g;
                }
                p.clone()
            })
            .collect();
        assert_trail(&format!("clipped sgd at {max}"), &got, &want);
    }
    // The function itself: scaled to norm 1 when active, unchanged when not.
    let out = eval(|b| {
        let t = (b.constant_vec(&[3.0f32, 0.0]), b.constant_vec(&[4.0f32]));
        let active = optim::clip_by_global_norm(&t, 1.0);
        let inactive = optim::clip_by_global_norm(&t, 6.0);
        vec![
            optim::global_norm(&t),
            active.0,
            active.1,
            inactive.0,
            inactive.1,
        ]
    });
    assert_close(&out[0], &[5.0], 1e-7);
    assert_close(&out[1], &[0.6, 0.0], 1e-7);
    assert_close(&out[2], &[0.8], 1e-7);
    assert_eq!(out[3], vec![3.0, 0.0]);
    assert_eq!(out[4], vec![4.0]);
}

#[test]
fn state_structure_and_spec() {
    let spec = LinearParams {
        w: Shape::of::<f32>(&[2, 2]),
        b: Shape::of::<f32>(&[2]),
    };
    let adam = optim::adam(0.1, 0.9, 0.999, 1e-8).state_spec(&spec);
    assert_eq!(adam.num_leaves(), 5);
    assert_eq!(adam.count, Shape::of::<i32>(&[]));
    assert_eq!(
        optim::sgd(0.1, 0.0, false).state_spec(&spec).num_leaves(),
        1
    );
    assert_eq!(
        optim::sgd(0.1, 0.9, false).state_spec(&spec).num_leaves(),
        3
    );
    // The spec is the traced state's shapes.
    let b = Builder::new("spec");
    let params = spec.map_ref(|s| b.zeros(ElementType::F32, s.dims()));
    let traced: OptState<Op, LinearParams<Op>> = optim::adam(0.1, 0.9, 0.999, 1e-8).init(&params);
    let shapes = traced.map_ref(|o| o.shape().unwrap());
    assert_eq!(shapes, adam);
}

/// The crate's intended training loop: initialise in one program, then a donated
/// training step `TrainState<Op> -> TrainState<Op>` whose spec is the initial
/// program's output; the loss falls and the count advances.
#[test]
fn training_step_with_jit_donating() {
    #[derive(Tree)]
    struct TrainState<T> {
        params: MlpParams<T>,
        opt: OptState<T, MlpParams<T>>,
        loss: T,
    }
    let net = Mlp::new(&[1, 16, 1], Activation::Tanh);
    let opt = optim::adam(0.02, 0.9, 0.999, 1e-8);
    let xs: Vec<f32> = (0..32).map(|i| i as f32 / 8.0 - 2.0).collect();
    let init = client()
        .jit("init", &(), |b, ()| {
            let params = net.init(&b.prng_key(1));
            TrainState {
                opt: opt.init(&params),
                params,
                loss: b.constant(f32::NAN),
            }
        })
        .unwrap();
    let mut state = init.call(&()).unwrap();
    let step = client()
        .jit_donating("step", init.output_spec(), |b, s: TrainState<Op>| {
            let x = b.constant_vec(&xs).reshape(&[32, 1]);
            b.fori_loop(0, 50, s, |_, s| {
                let (loss, (), g) = b.value_and_grad(s.params.clone(), |p| {
                    (losses::mse(&net.apply(&p, &x), &x.sin()), ())
                });
                let (params, opt_state) = opt.update(&g, s.opt, &s.params);
                TrainState {
                    params,
                    opt: opt_state,
                    loss,
                }
            })
        })
        .unwrap();
    assert!(step.aliased_inputs().iter().all(|a| *a));
    let mut losses_seen = Vec::new();
    for _ in 0..4 {
        state = step.call_donated(state).unwrap();
        losses_seen.push(state.loss.to_vec::<f32>().unwrap()[0]);
    }
    assert_eq!(state.opt.count.to_vec::<i32>().unwrap(), vec![200]);
    assert!(
        losses_seen[3] < 0.5 * losses_seen[0] && losses_seen[3] < 0.05,
        "losses {losses_seen:?}"
    );
}

fn schedule_of(kind: &str, p: &Value) -> Schedule {
    let f = |k: &str| p[k].as_f64().unwrap();
    let i = |k: &str| p[k].as_i64().unwrap();
    match kind {
        "constant" => Schedule::Constant(f("value")),
        "exponential_decay" => Schedule::ExponentialDecay {
            init: f("init"),
            transition_steps: i("transition_steps"),
            decay_rate: f("decay_rate"),
            staircase: p["staircase"].as_bool().unwrap(),
        },
        "cosine_decay" => Schedule::CosineDecay {
            init: f("init"),
            decay_steps: i("decay_steps"),
            alpha: f("alpha"),
        },
        "linear" => Schedule::Linear {
            init: f("init"),
            end: f("end"),
            transition_steps: i("transition_steps"),
        },
        "warmup_cosine_decay" => Schedule::WarmupCosineDecay {
            init: f("init"),
            peak: f("peak"),
            warmup_steps: i("warmup_steps"),
            decay_steps: i("decay_steps"),
            end: f("end"),
        },
        "polynomial" => Schedule::Polynomial {
            init: f("init"),
            end: f("end"),
            power: f("power"),
            transition_steps: i("transition_steps"),
            transition_begin: i("transition_begin"),
        },
        "piecewise_constant" => Schedule::PiecewiseConstant {
            init: f("init"),
            boundaries_and_scales: p["boundaries_and_scales"]
                .as_array()
                .unwrap()
                .iter()
                .map(|bs| (bs[0].as_i64().unwrap(), bs[1].as_f64().unwrap()))
                .collect(),
        },
        other => panic!("unknown schedule {other}"),
    }
}

/// Every schedule against optax 0.2.8's values (recorded by
/// scripts/record_optax_schedules.py in f64): on the host to 1e-12 relative, and
/// evaluated in the program (f32) to 1e-6 relative, at steps 0..=60.
#[test]
fn schedules_equal_optax() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/jax/schedules.json"
    ))
    .unwrap();
    let data: Value = serde_json::from_str(&text).unwrap();
    for case in data["cases"].as_array().unwrap() {
        let kind = case["kind"].as_str().unwrap();
        let sched = schedule_of(kind, &case["params"]);
        let want: Vec<f64> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let at = client()
            .jit("sched", &Shape::of::<i32>(&[]), |_, step: Op| {
                sched.at(&step)
            })
            .unwrap();
        for (step, w) in want.iter().enumerate() {
            let host = sched.value(step as i64).unwrap();
            assert!(
                (host - w).abs() <= 1e-12 * w.abs().max(1e-12),
                "{kind} {:?} at step {step}: host {host} vs optax {w}",
                case["params"]
            );
            let dev = at
                .call(&client().scalar(step as i32).unwrap())
                .unwrap()
                .to_scalar::<f32>()
                .unwrap() as f64;
            assert!(
                (dev - w).abs() <= 1e-6 * w.abs() + 1e-9,
                "{kind} at step {step}: in the program {dev} vs optax {w}"
            );
        }
    }
}

/// SGD with momentum and Adam under a schedule: update `s` uses the schedule at
/// `s` (the updates applied before it), as optax's scale_by_learning_rate.
#[test]
fn optimizers_follow_a_schedule() {
    let sched = Schedule::Linear {
        init: 0.1,
        end: 0.02,
        transition_steps: 2,
    };
    let lr = |s: usize| sched.value(s as i64).unwrap();
    let (got, _) = run_optimizer(optim::sgd(sched.clone(), 0.9, false), 3);
    assert_trail(
        "sgd(linear schedule)",
        &got,
        &sgd_reference(lr, 0.9, false, 3),
    );
    let (got, _) = run_optimizer(optim::adam(sched.clone(), 0.9, 0.999, 1e-8), 3);
    assert_trail(
        "adam(linear schedule)",
        &got,
        &adamw_reference(lr, 0.9, 0.999, 1e-8, 0.0, None, 3),
    );
    // The trail differs from a constant rate's: the schedule is really used.
    let constant = sgd_reference(|_| 0.1, 0.9, false, 3);
    let with = sgd_reference(lr, 0.9, false, 3);
    assert!((constant[2][0] - with[2][0]).abs() > 1e-3);
}

/// A schedule written as a function of the count (`Schedule::from_fn`), traced
/// into the program: PureJaxRL's annealing `LR · (1 − (count // k) / n)`, with Adam
/// behind a global-norm clip as PureJaxRL chains them; the trail equals the host
/// reference with the same rates.
#[test]
fn a_schedule_given_as_a_function_of_the_count_is_traced() {
    let (lr0, k, n) = (0.05f64, 2.0f64, 4.0f64);
    let anneal = Schedule::from_fn(move |count| {
        let done = (count.convert(ElementType::F32) / k).floor();
        (1.0 - done / n) * lr0
    });
    assert_eq!(anneal.value(3), None);
    assert_eq!(anneal.clone(), anneal);
    let lr = |s: usize| lr0 * (1.0 - (s as f64 / k).floor() / n);
    let (got, _) = run_optimizer(optim::sgd(anneal.clone(), 0.9, false), 3);
    assert_trail("sgd(anneal)", &got, &sgd_reference(lr, 0.9, false, 3));
    let (got, _) = run_optimizer(optim::adam(anneal.clone(), 0.9, 0.999, 1e-8), 3);
    assert_trail(
        "adam(anneal)",
        &got,
        &adamw_reference(lr, 0.9, 0.999, 1e-8, 0.0, None, 3),
    );
    // The rates really change: step 2's is 3/4 of step 0's.
    assert!((lr(2) - 0.75 * lr(0)).abs() < 1e-12);
}

/// `KeySequence` is `hk.PRNGSequence`: each key is the second half of a split of
/// the current key, which becomes the first half (checked against splits written
/// out by hand; `random_split` itself is checked against JAX in tests/samplers.rs).
#[test]
fn key_sequence_is_haikus_prng_sequence() {
    let keys = |f: &dyn Fn(&Builder) -> Vec<Op>| -> Vec<Vec<u32>> {
        let jit = client().jit("keys", &(), |b, ()| f(b)).unwrap();
        jit.call(&())
            .unwrap()
            .iter()
            .map(|k| k.to_vec::<u32>().unwrap())
            .collect()
    };
    let got = keys(&|b| {
        let seq = KeySequence::new(&b.prng_key(42));
        vec![seq.next(), seq.next(), seq.next()]
    });
    let want = keys(&|b| {
        let mut key = b.prng_key(42);
        let mut out = Vec::new();
        for _ in 0..3 {
            let s = key.random_split(2);
            out.push(s.slice(&[1, 0], &[2, 2], &[1, 1]).reshape(&[2]));
            key = s.slice(&[0, 0], &[1, 2], &[1, 1]).reshape(&[2]);
        }
        out
    });
    assert_eq!(got, want);
    assert_ne!(got[0], got[1]);
    assert_ne!(got[1], got[2]);
}

// ------------------------------------------------- refused arguments, not panics

/// `build`'s error for `root` and the line it points at (in this file).
fn refused(b: &Builder, root: &Op) -> (String, Option<u32>) {
    let e = b
        .build(root)
        .expect_err("an error, recorded when the op was built");
    let line = e
        .location()
        .filter(|l| l.file() == file!())
        .map(|l| l.line());
    (e.to_string(), line)
}

#[test]
fn an_mlp_without_layers_records_an_error_at_the_callers_line() {
    for sizes in [&[][..], &[3][..]] {
        let net = Mlp::new(sizes, Activation::Relu);
        assert!(net.layers.is_empty() && net.spec().is_empty());
        // init: one layer of failed parameters carrying the error.
        let b = Builder::new("mlp_init");
        let line = line!() + 1;
        let params = net.init(&b.prng_key(0));
        assert!(params.leaves().iter().all(|p| p.shape().is_err()));
        let (msg, at) = refused(&b, &params[0].w);
        assert!(
            msg.contains("Mlp has no layer")
                && msg.contains("at least an input and an output size"),
            "{msg}"
        );
        assert_eq!(at, Some(line), "{msg}");
        // apply: a failed op.
        let b = Builder::new("mlp_apply");
        let x = b.zeros(ElementType::F32, &[2, 3]);
        let line = line!() + 1;
        let y = net.apply(&Vec::new(), &x);
        let (msg, at) = refused(&b, &y);
        assert!(msg.contains("Mlp has no layer"), "{msg}");
        assert_eq!(at, Some(line), "{msg}");
    }
    // In a jit with an optimizer's state built on the parameters: the same error
    // comes back from `jit`, nothing is compiled.
    let net = Mlp::new(&[3], Activation::Relu);
    let opt = optim::adam(1e-3, 0.9, 0.999, 1e-8);
    let e = client()
        .jit("mlp_and_opt", &(), |b, ()| {
            let params = net.init(&b.prng_key(0));
            (opt.init(&params), params)
        })
        .err()
        .expect("an error");
    assert!(matches!(e, xlaclient::Error::Graph { .. }), "{e}");
    assert!(e.to_string().contains("Mlp has no layer"), "{e}");
}

#[test]
fn mlp_parameters_of_another_depth_are_refused() {
    let net = Mlp::new(&[3, 4, 2], Activation::Tanh);
    let b = Builder::new("mlp_depth");
    let params = net.init(&b.prng_key(0));
    let x = b.zeros(ElementType::F32, &[5, 3]);
    let line = line!() + 1;
    let y = net.apply(&params[..1].to_vec(), &x);
    let (msg, at) = refused(&b, &y);
    assert!(
        msg.contains("Mlp::apply: 1 layer(s) of parameters for a network of 2"),
        "{msg}"
    );
    assert_eq!(at, Some(line));
}

#[test]
fn split_keys_refuses_a_negative_count() {
    let b = Builder::new("split");
    let key = b.prng_key(0);
    let line = line!() + 1;
    let keys = nn::layers::split_keys(&key, -1);
    assert!(keys.is_empty());
    let (msg, at) = refused(&b, &key);
    assert!(msg.contains("cannot split into -1 keys"), "{msg}");
    assert_eq!(at, Some(line));
}

/// Gradients, a state, parameters and the optimizer to update them with.
type UpdateCase<'a> = dyn Fn(
        &Builder,
    ) -> (
        MlpParams<Op>,
        OptState<Op, MlpParams<Op>>,
        MlpParams<Op>,
        optim::Optimizer,
    ) + 'a;

/// Two layers of parameters (and gradients) in `b`.
fn two_layers(b: &Builder) -> MlpParams<Op> {
    Mlp::new(&[2, 3, 1], Activation::Tanh).init(&b.prng_key(0))
}

#[test]
fn optimizer_update_refuses_trees_that_do_not_fit() {
    let adam = optim::adam(1e-3, 0.9, 0.999, 1e-8);
    let sgd = optim::sgd(0.1, 0.9, false);
    let cases: [(&str, &UpdateCase<'_>); 4] = [
        (
            "the gradients and the parameters differ in structure (2 leaves",
            &|b| {
                let p = two_layers(b);
                (p[..1].to_vec(), adam.init(&p), p, adam.clone())
            },
        ),
        (
            "the state's mu and the parameters differ in structure",
            &|b| {
                let p = two_layers(b);
                (p.clone(), adam.init(&p[..1].to_vec()), p, adam.clone())
            },
        ),
        (
            "the state holds no moment, this optimizer keeps mu and nu (was the state made by another optimizer?)",
            &|b| {
                let p = two_layers(b);
                (
                    p.clone(),
                    optim::sgd(0.1, 0.0, false).init(&p),
                    p,
                    adam.clone(),
                )
            },
        ),
        (
            "the state holds mu and nu, this optimizer keeps mu only",
            &|b| {
                let p = two_layers(b);
                (p.clone(), adam.init(&p), p, sgd.clone())
            },
        ),
    ];
    for (want, case) in cases {
        let b = Builder::new("update");
        let (g, state, p, opt) = case(&b);
        let line = line!() + 1;
        let (new_p, new_state) = opt.update(&g, state, &p);
        // Every leaf returned fails, with the one error.
        assert_eq!(new_p.num_leaves(), 4);
        assert!(new_p.leaves().iter().all(|x| x.shape().is_err()));
        assert!(new_state.leaves().iter().all(|x| x.shape().is_err()));
        let (msg, at) = refused(&b, &new_state.count);
        assert!(msg.contains(&format!("Optimizer::update: {want}")), "{msg}");
        assert_eq!(at, Some(line), "{msg}");
    }
}

/// optax on an empty tree: `init` gives a count of 0 and empty moments, `update`
/// gives the empty tree and moves the count on; clipping gives the empty tree.
#[test]
fn optimizers_on_a_tree_without_leaves_follow_optax() {
    let empty: MlpParams<Op> = Vec::new();
    for opt in [
        optim::adam(1e-3, 0.9, 0.999, 1e-8),
        optim::sgd(0.1, 0.9, true).clip_by_global_norm(1.0),
        optim::sgd(0.1, 0.0, false),
    ] {
        let jit = client()
            .jit("empty_tree", &(), |b, ()| {
                let state = opt.init_in(b, &empty);
                let (p, state) = opt.update(&empty, state, &empty);
                let (p, state) = opt.update(&p, state, &p);
                assert!(p.is_empty());
                assert_eq!(state.num_leaves(), 1);
                state.count
            })
            .unwrap();
        assert_eq!(jit.call(&()).unwrap().to_scalar::<i32>().unwrap(), 2);
    }
    assert!(optim::clip_by_global_norm(&empty, 1.0).is_empty());

    // Without a builder there is no program to build in: `init`'s count and
    // `global_norm` are failed ops carrying errors at the caller's line.
    let line = line!() + 1;
    let state = optim::adam(1e-3, 0.9, 0.999, 1e-8).init(&empty);
    let e = state.count.shape().unwrap_err();
    assert!(
        e.to_string()
            .contains("Optimizer::init: the parameter tree has no leaves")
            && e.to_string().contains("init_in"),
        "{e}"
    );
    assert_eq!(
        e.location().map(|l| (l.file(), l.line())),
        Some((file!(), line))
    );
    let line = line!() + 1;
    let norm = optim::global_norm(&empty);
    let e = norm.shape().unwrap_err();
    assert!(
        e.to_string()
            .contains("global_norm: the tree has no leaves"),
        "{e}"
    );
    assert_eq!(
        e.location().map(|l| (l.file(), l.line())),
        Some((file!(), line))
    );
    // And `jit` returns it.
    let opt = optim::adam(1e-3, 0.9, 0.999, 1e-8);
    let e = client()
        .jit("empty_init", &(), |_, ()| {
            opt.init(&Vec::<LinearParams<Op>>::new())
        })
        .err()
        .expect("an error");
    assert!(e.to_string().contains("Optimizer::init"), "{e}");
}

// ---------------------------------------------------------------------------------
// flax: the orthogonal initialiser and the parameter keys, against values recorded
// from jax 0.10.2 and flax 0.12.8 (`scripts/record_flax_init.py`).

fn flax_data() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/jax/flax_init.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read flax_init.json"))
        .expect("parse")
}

fn dims_of(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect()
}

fn max_abs_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f32::max)
}

/// `wᵀ w` (or `w wᵀ`, whichever is smaller) of `w` seen as `[rows, cols]` with
/// the column axis last is `scale² I`.
fn assert_scaled_orthogonal(w: &[f32], dims: &[i64], column_axis: i64, scale: f64) {
    let r = dims.len();
    let ax = if column_axis < 0 {
        column_axis + r as i64
    } else {
        column_axis
    } as usize;
    let cols = dims[ax] as usize;
    let rows = w.len() / cols;
    // Element (i, c) with the column axis moved last.
    let at = |i: usize, c: usize| {
        let mut rest: Vec<i64> = dims.to_vec();
        rest.remove(ax);
        let mut idx = unravel(i as i64, &rest);
        idx.insert(ax, c as i64);
        f64::from(w[ravel(&idx, dims)])
    };
    let (n, dot): (usize, Box<dyn Fn(usize, usize) -> f64>) = if rows >= cols {
        (
            cols,
            Box::new(|a, b| (0..rows).map(|i| at(i, a) * at(i, b)).sum()),
        )
    } else {
        (
            rows,
            Box::new(|a, b| (0..cols).map(|c| at(a, c) * at(b, c)).sum()),
        )
    };
    for a in 0..n {
        for b in 0..n {
            let want = if a == b { scale * scale } else { 0.0 };
            let got = dot(a, b);
            assert!(
                (got - want).abs() <= 1e-5 * scale * scale,
                "{dims:?} axis {column_axis}: gram[{a},{b}] = {got}, want {want}"
            );
        }
    }
}

#[test]
fn orthogonal_equals_jax() {
    let data = flax_data();
    let cases = data["orthogonal"].as_array().unwrap();
    let got = eval(|b| {
        cases
            .iter()
            .map(|c| {
                let init = Initializer::Orthogonal {
                    scale: c["scale"].as_f64().unwrap(),
                    column_axis: c["column_axis"].as_i64().unwrap(),
                };
                init.init(
                    &b.prng_key(c["seed"].as_u64().unwrap() as u32),
                    &dims_of(&c["dims"]),
                )
            })
            .collect()
    });
    let mut worst = 0.0f32;
    for (c, got) in cases.iter().zip(&got) {
        let (scale, dims) = (c["scale"].as_f64().unwrap(), dims_of(&c["dims"]));
        let axis = c["column_axis"].as_i64().unwrap();
        let want = f32s(&c["bits"]);
        let d = max_abs_diff(got, &want);
        assert!(
            f64::from(d) <= 1e-5 * scale,
            "seed {} dims {dims:?} axis {axis} scale {scale}: max |difference| from JAX {d}",
            c["seed"]
        );
        worst = worst.max(d / scale as f32);
        assert_scaled_orthogonal(got, &dims, axis, scale);
    }
    eprintln!(
        "orthogonal: max |difference| from jax.nn.initializers.orthogonal / scale = {worst:e}"
    );
    // The default column axis is JAX's -1.
    assert_eq!(
        init::orthogonal(0.5),
        Initializer::Orthogonal {
            scale: 0.5,
            column_axis: -1
        }
    );
}

#[test]
fn orthogonal_refuses_vectors_and_bad_axes_at_the_callers_line() {
    for (dims, axis, reason) in [
        (
            vec![5i64],
            -1i64,
            "needs a parameter of rank 2 or more, got dims [5]",
        ),
        (
            vec![3, 4],
            2,
            "column axis 2 is out of range for dims [3, 4]",
        ),
    ] {
        let b = Builder::new("bad_orthogonal");
        let init = Initializer::Orthogonal {
            scale: 1.0,
            column_axis: axis,
        };
        let line = line!() + 1;
        let w = init.init(&b.prng_key(0), &dims);
        let e = b.build(&w).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("init::orthogonal") && msg.contains(reason),
            "{msg}"
        );
        assert_eq!(
            e.location().map(|l| (l.file(), l.line())),
            Some(("tests/nn.rs", line))
        );
    }
    // Dims with a zero give zeros (JAX returns jnp.zeros).
    assert!(eval1(|b| init::orthogonal(1.0).init(&b.prng_key(0), &[0, 3])).is_empty());
}

#[test]
fn flax_keys_equal_flaxs() {
    use xlaclient::nn::flax::{Foldable, fold_in_static, static_hash};
    let data = flax_data();
    let cases = data["keys"].as_array().unwrap();
    let suffix = |c: &Value| -> Vec<Foldable<'static>> {
        c["suffix"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| match x {
                Value::String(s) => Foldable::Name(Box::leak(s.clone().into_boxed_str())),
                n => Foldable::Count(n.as_u64().unwrap()),
            })
            .collect()
    };
    let jit = client()
        .jit("flax_keys", &(), |b, ()| {
            cases
                .iter()
                .map(|c| {
                    fold_in_static(&b.prng_key(c["seed"].as_u64().unwrap() as u32), &suffix(c))
                })
                .collect::<Vec<Op>>()
        })
        .unwrap();
    let got = jit.call(&()).unwrap();
    for (c, key) in cases.iter().zip(&got) {
        assert_eq!(
            u64::from(static_hash(&suffix(c))),
            c["hash"].as_u64().unwrap(),
            "hash of {}",
            c["suffix"]
        );
        let want: Vec<u32> = c["key"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(
            key.to_vec::<u32>().unwrap(),
            want,
            "key for {}",
            c["suffix"]
        );
    }
}

/// PureJaxRL's PPO network, `ActorCritic(action_dim=2).init(PRNGKey(0), zeros(4))`:
/// six `nn.Dense` layers with orthogonal kernels, rebuilt with `Linear::init_flax`.
#[test]
fn ppo_actor_critic_init_equals_flaxs() {
    let data = flax_data();
    let want = data["network"].as_array().unwrap();
    let sqrt2 = 2f64.sqrt();
    // (module name, in, out, kernel scale) in the order flax names them.
    let layers = [
        ("Dense_0", 4, 64, sqrt2),
        ("Dense_1", 64, 64, sqrt2),
        ("Dense_2", 64, 2, 0.01),
        ("Dense_3", 4, 64, sqrt2),
        ("Dense_4", 64, 64, sqrt2),
        ("Dense_5", 64, 1, 1.0),
    ];
    let got = eval(|b| {
        let root = b.prng_key(0);
        let mut outs = vec![];
        for (name, i, o, scale) in layers {
            let dense = Linear::new(i, o).with_init(init::orthogonal(scale), init::zeros());
            let p = dense.init_flax(&root, &[name]);
            outs.extend([p.w, p.b]);
        }
        // nn.Dense(5) with flax's default kernel_init, the root module itself.
        let dense = Linear::new(3, 5).with_init(init::lecun_normal(), init::zeros());
        outs.push(dense.init_flax(&b.prng_key(7), &[]).w);
        outs
    });
    let mut worst = 0.0f32;
    for (k, (name, _, _, scale)) in layers.iter().enumerate() {
        for (j, param) in ["kernel", "bias"].iter().enumerate() {
            let w = want
                .iter()
                .find(|c| c["layer"] == *name && c["param"] == *param)
                .unwrap();
            let d = max_abs_diff(&got[2 * k + j], &f32s(&w["bits"]));
            assert!(
                f64::from(d) <= 1e-5 * scale,
                "{name}.{param}: max |difference| from flax {d}"
            );
            worst = worst.max(d / *scale as f32);
        }
    }
    let dflt = want.iter().find(|c| c["layer"] == "default_dense").unwrap();
    let d = max_abs_diff(&got[12], &f32s(&dflt["bits"]));
    assert!(d <= 2.0 * f32::EPSILON, "default Dense kernel: {d}");
    eprintln!(
        "PPO ActorCritic: max |difference| from flax / scale = {worst:e}; default Dense kernel {d:e}"
    );
}

/// `init::init_many`, `Linear::init_many` and `Mlp::init` (which batch the
/// initializers' draws into one hash per sampler) give what one `init` per
/// parameter gives, bit for bit, for every kind of initializer; an orthogonal initializer that cannot draw (rank
/// 1, a zero dim) gives its own error or zeros, as `init` does.
#[test]
fn init_many_equals_one_init_per_parameter() {
    let params: Vec<(Initializer, Vec<i64>)> = vec![
        (init::orthogonal(2f64.sqrt()), vec![4, 64]),
        (init::orthogonal(0.01), vec![64, 2]),
        (init::glorot_uniform(), vec![8, 3]),
        (
            Initializer::Orthogonal {
                scale: 1.5,
                column_axis: 0,
            },
            vec![3, 4, 5],
        ),
        (init::orthogonal(1.0), vec![64, 64]),
        (init::orthogonal(1.0), vec![0, 7]),
        (init::zeros(), vec![5]),
        (init::truncated_normal_fan_in(), vec![16, 8]),
        (init::glorot_normal(), vec![8, 16]),
        (init::he_uniform(), vec![3, 3, 4, 8]),
        (init::normal_fan_in(), vec![7, 5]),
        (Initializer::Uniform { lo: -0.5, hi: 2.0 }, vec![9]),
        (
            Initializer::Normal {
                mean: 1.0,
                stddev: 0.3,
            },
            vec![4, 4],
        ),
        (
            Initializer::TruncatedNormal {
                mean: -1.0,
                stddev: 2.0,
            },
            vec![6],
        ),
        (init::truncated_normal_fan_in(), vec![1, 1]),
    ];
    let bits = |v: Vec<Vec<f32>>| -> Vec<Vec<u32>> {
        v.into_iter()
            .map(|x| x.iter().map(|f| f.to_bits()).collect())
            .collect()
    };
    let keys = |b: &Builder| -> Vec<Op> {
        let ks: [Op; 15] = b.prng_key(11).split_keys();
        ks.to_vec()
    };
    let each = bits(eval(|b| {
        let ks = keys(b);
        params
            .iter()
            .zip(&ks)
            .map(|((i, d), k)| i.init(k, d))
            .collect()
    }));
    let many = bits(eval(|b| {
        let ks = keys(b);
        let p: Vec<(Initializer, &Op, &[i64])> = params
            .iter()
            .zip(&ks)
            .map(|((i, d), k)| (*i, k, &d[..]))
            .collect();
        init::init_many(&p)
    }));
    assert_eq!(each.len(), many.len());
    for (i, (e, m)) in each.iter().zip(&many).enumerate() {
        assert_eq!(e, m, "parameter {i}: {:?}", params[i]);
    }
    // The orthogonal kernels are orthogonal: 64 × 2 columns of norm 0.01.
    let w: Vec<f32> = many[1].iter().map(|b| f32::from_bits(*b)).collect();
    let dot = |a: usize, c: usize| (0..64).map(|r| w[r * 2 + a] * w[r * 2 + c]).sum::<f32>();
    assert!((dot(0, 0) - 1e-4).abs() < 1e-8 && dot(0, 1).abs() < 1e-8);
    assert!(many[5].is_empty());

    // A rank-1 orthogonal parameter: init's error.
    let b = Builder::new("bad");
    let k = b.prng_key(0);
    let out = init::init_many(&[
        (init::orthogonal(1.0), &k, &[3]),
        (init::orthogonal(1.0), &k, &[3, 3]),
    ]);
    let e = b.build(&out[1]).unwrap_err().to_string();
    assert!(e.contains("rank 2 or more"), "{e}");

    // Mlp::init (batched) against its layers' own init from the same split keys.
    let mlp =
        Mlp::new(&[4, 16, 16, 3], Activation::Tanh).with_init(init::orthogonal(1.0), init::zeros());
    let flat =
        |p: Vec<LinearParams<Op>>| -> Vec<Op> { p.into_iter().flat_map(|l| [l.w, l.b]).collect() };
    let batched = bits(eval(|b| flat(mlp.init(&b.prng_key(3)))));
    let layered = bits(eval(|b| {
        let ks: [Op; 3] = b.prng_key(3).split_keys();
        flat(mlp.layers.iter().zip(&ks).map(|(l, k)| l.init(k)).collect())
    }));
    assert_eq!(batched, layered);
}
