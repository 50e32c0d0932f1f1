//! `Client::jit` on derived parameter trees: one struct is the shape spec, the traced
//! values and the device buffers; a training step runs on the real plugin and is
//! checked against the same step computed in plain Rust.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::{Buffer, Error, Op, Shape, Tree};

/// A linear model's parameters and the optimizer's step counter.
#[derive(Tree, Clone, Debug, PartialEq)]
struct Params<T> {
    w: T,
    b: T,
}

#[derive(Tree, Clone, Debug, PartialEq)]
struct State<T> {
    params: Params<T>,
    step: T,
}

#[derive(Tree, Clone, Debug, PartialEq)]
struct Batch<T> {
    x: T,
    y: T,
}

const N: i64 = 8;
const D: i64 = 3;
const LR: f32 = 0.1;

fn spec() -> (State<Shape>, Batch<Shape>) {
    (
        State {
            params: Params {
                w: Shape::of::<f32>(&[D]),
                b: Shape::of::<f32>(&[]),
            },
            step: Shape::of::<i32>(&[]),
        },
        Batch {
            x: Shape::of::<f32>(&[N, D]),
            y: Shape::of::<f32>(&[N]),
        },
    )
}

/// One SGD step on the squared error of `x·w + b` (gradient written by hand).
fn sgd_step(s: State<Op>, batch: Batch<Op>) -> (State<Op>, Op) {
    let pred = batch.x.matmul(&s.params.w) + &s.params.b;
    let err = pred - &batch.y;
    let loss = (&err * &err).mean(&[0], false);
    let scale = 2.0 / N as f64;
    let gw = batch.x.t().matmul(&err) * scale;
    let gb = err.reduce_sum(&[0]) * scale;
    let lr = f64::from(LR);
    let next = State {
        params: Params {
            w: &s.params.w - &(gw * lr),
            b: &s.params.b - &(gb * lr),
        },
        step: &s.step + 1,
    };
    (next, loss)
}

/// The same step in plain Rust.
fn sgd_step_host(w: &[f32], b: f32, x: &[f32], y: &[f32]) -> (Vec<f32>, f32, f32) {
    let (n, d) = (N as usize, D as usize);
    let err: Vec<f32> = (0..n)
        .map(|i| (0..d).map(|j| x[i * d + j] * w[j]).sum::<f32>() + b - y[i])
        .collect();
    let loss = err.iter().map(|e| e * e).sum::<f32>() / n as f32;
    let scale = 2.0 / n as f32;
    let gw: Vec<f32> = (0..d)
        .map(|j| (0..n).map(|i| x[i * d + j] * err[i]).sum::<f32>() * scale)
        .collect();
    let gb = err.iter().sum::<f32>() * scale;
    let w2 = w.iter().zip(&gw).map(|(w, g)| w - LR * g).collect();
    (w2, b - LR * gb, loss)
}

fn data() -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng(7);
    let x = rng.vec((N * D) as usize, -1.0, 1.0);
    let y = rng.vec(N as usize, -1.0, 1.0);
    (x, y)
}

fn upload_state(w: &[f32], b: f32, step: i32) -> State<Buffer> {
    State {
        params: Params {
            w: upload(w, &[D]),
            b: upload(&[b], &[]),
        },
        step: upload(&[step], &[]),
    }
}

#[test]
fn a_training_step_on_a_derived_tree_matches_plain_rust() {
    let (state_spec, batch_spec) = spec();
    let step = client()
        .jit("sgd", &(state_spec, batch_spec), |_, (s, batch)| {
            sgd_step(s, batch)
        })
        .unwrap();
    // The outputs come back in the traced tree: (State, loss).
    assert_eq!(step.output_spec().1, Shape::of::<f32>(&[]));
    assert_eq!(step.output_spec().0.params.w, Shape::of::<f32>(&[D]));

    let (x, y) = data();
    let batch = Batch {
        x: upload(&x, &[N, D]),
        y: upload(&y, &[N]),
    };
    let (mut w, mut b) = (vec![0.5f32, -0.25, 0.1], 0.2f32);
    let mut state = upload_state(&w, b, 0);
    let mut batch = batch;
    for k in 0..5 {
        let args = (state, batch);
        let (next, loss) = step.call(&args).unwrap();
        let (w2, b2, want_loss) = sgd_step_host(&w, b, &x, &y);
        assert_close(&[loss.to_scalar::<f32>().unwrap()], &[want_loss], 1e-5);
        assert_close(&next.params.w.to_vec::<f32>().unwrap(), &w2, 1e-5);
        assert_close(&[next.params.b.to_scalar::<f32>().unwrap()], &[b2], 1e-5);
        assert_eq!(next.step.to_scalar::<i32>().unwrap(), k + 1);
        (w, b) = (w2, b2);
        // The batch was borrowed, not given up: it is reused next step.
        (state, batch) = (next, args.1);
    }
}

#[test]
fn calling_with_the_wrong_tree_or_shapes_is_an_error() {
    let (state_spec, _) = spec();
    let f = client()
        .jit("inc", &state_spec, |_, s: State<Op>| s.step + 1)
        .unwrap();
    // A buffer of another shape in one leaf.
    let bad = State {
        params: Params {
            w: upload(&[1f32, 2.0], &[2]),
            b: upload(&[0f32], &[]),
        },
        step: upload(&[3i32], &[]),
    };
    let e = f.call(&bad).unwrap_err().to_string();
    assert!(e.contains("argument 0") && e.contains("f32[2]"), "{e}");
    let ok = upload_state(&[1.0, 2.0, 3.0], 0.0, 41);
    assert_eq!(f.call(&ok).unwrap().to_scalar::<i32>().unwrap(), 42);
}

#[test]
fn a_shape_error_in_the_traced_function_is_returned() {
    let (state_spec, _) = spec();
    let r = client().jit("bad", &state_spec, |_, s: State<Op>| {
        s.params.w.matmul(&s.params.b) // rank 1 x rank 0
    });
    match r {
        Err(Error::Shape(e)) => assert!(e.to_string().contains("jit.rs"), "{e}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a bad trace compiled"),
    }
}

#[test]
fn a_donating_step_consumes_its_state_and_keeps_the_batch() {
    let (state_spec, batch_spec) = spec();
    let step = client()
        .jit_donating(
            "sgd_donating",
            &(state_spec, batch_spec),
            |_, (s, batch)| sgd_step(s, batch),
        )
        .unwrap();
    // Each state leaf is aliased with the output leaf of the same shape (w, b and
    // step); the batch has no output of its shape.
    assert_eq!(step.aliased_inputs(), &[true, true, true, false, false]);
    let text = step.computation().to_hlo_text();
    assert!(text.contains("input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }"), "{text}");

    let (x, y) = data();
    let (w, b) = (vec![0.5f32, -0.25, 0.1], 0.2f32);
    let args = (
        upload_state(&w, b, 0),
        Batch {
            x: upload(&x, &[N, D]),
            y: upload(&y, &[N]),
        },
    );
    let (next, loss) = step.call_donated(args).unwrap();
    let (w2, b2, want_loss) = sgd_step_host(&w, b, &x, &y);
    assert_close(&[loss.to_scalar::<f32>().unwrap()], &[want_loss], 1e-5);
    assert_close(&next.params.w.to_vec::<f32>().unwrap(), &w2, 1e-5);
    assert_close(&[next.params.b.to_scalar::<f32>().unwrap()], &[b2], 1e-5);
    // A tree of another structure is refused before anything is donated.
    let e = step
        .call_donated((
            upload_state(&w, b, 0),
            Batch {
                x: upload(&x, &[N, D]),
                y: upload(&vec![0.0f32; N as usize + 1], &[N + 1]),
            },
        ))
        .unwrap_err();
    assert!(e.to_string().contains("argument"), "{e}");
    // The next step from the new state.
    let (next2, _) = step
        .call_donated((
            next,
            Batch {
                x: upload(&x, &[N, D]),
                y: upload(&y, &[N]),
            },
        ))
        .unwrap();
    let (w3, _, _) = sgd_step_host(&w2, b2, &x, &y);
    assert_close(&next2.params.w.to_vec::<f32>().unwrap(), &w3, 1e-5);
    assert_eq!(next2.step.to_scalar::<i32>().unwrap(), 2);
}

/// `jit_with` hands its options to the plugin (read back from the executable), and
/// `quick_compile` computes what the default compile computes: here to the bit,
/// for a Householder QR (a loop of products and reductions, as PPO's orthogonal
/// initializers factor), `tanh`, normal draws and a scaled uniform (PPO's
/// environment reset), though level 1 does not promise bits in general.
#[test]
fn quick_compile_reaches_the_plugin_and_computes_the_same_program() {
    use xlaclient::{Builder, CompileOptions, ElementType, QrMode};
    let client = client();
    let (m, n) = (64usize, 48usize);
    let spec = Shape::of::<f32>(&[m as i64, n as i64]);
    let program = |b: &Builder, a: Op| {
        let (q, r) = a.qr(QrMode::Reduced);
        let key = b.prng_key(7);
        let normal = key.normal(&[64, 64], ElementType::F32);
        let uniform = key.uniform(&[64, 4], ElementType::F32, -0.05, 0.05);
        (q.tanh(), q, r, normal, uniform)
    };
    let quick = CompileOptions::new().quick_compile();
    let full = client.jit("qr", &spec, program).unwrap();
    let fast = client.jit_with("qr", &spec, &quick, program).unwrap();
    let data: Vec<f32> = (0..m * n)
        .map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0 + if i % (n + 1) == 0 { 3.0 } else { 0.0 })
        .collect();
    let a = upload(&data, &[m as i64, n as i64]);
    let bits = |b: &Buffer| -> Vec<u32> {
        b.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    let (t0, q0, r0, n0, u0) = full.call(&a).unwrap();
    let (t1, q1, r1, n1, u1) = fast.call(&a).unwrap();
    for (what, x, y) in [
        ("q", &q0, &q1),
        ("r", &r0, &r1),
        ("tanh(q)", &t0, &t1),
        ("normal", &n0, &n1),
        ("uniform", &u0, &u1),
    ] {
        let differ = bits(x)
            .iter()
            .zip(bits(y))
            .filter(|(x, y)| **x != *y)
            .count();
        assert_eq!(
            differ, 0,
            "{what}: {differ} elements differ between the compiles"
        );
    }
    // And they are a QR of the input: q r = a in plain Rust.
    let (q, r) = (q1.to_vec::<f32>().unwrap(), r1.to_vec::<f32>().unwrap());
    for i in 0..m {
        for j in 0..n {
            let qr: f32 = (0..n).map(|k| q[i * n + k] * r[k * n + j]).sum();
            assert!(
                (qr - data[i * n + j]).abs() < 1e-4,
                "(q r)[{i}, {j}] = {qr}"
            );
        }
    }

    // The plugin reports the options it compiled with.
    match fast.executable().compile_options() {
        Ok(o) => {
            let d = o
                .proto()
                .executable_build_options
                .as_ref()
                .and_then(|b| b.debug_options.clone())
                .expect("debug options");
            assert_eq!(d.xla_backend_optimization_level, Some(1));
            assert_eq!(
                d.xla_backend_extra_options
                    .get("xla_cpu_small_while_loop_byte_threshold")
                    .map(String::as_str),
                Some("1048576")
            );
        }
        // The 0.81 plugin lacks PJRT_Executable_GetCompileOptions.
        Err(xlaclient::RuntimeError::Unsupported { .. }) => {
            assert_eq!(client.plugin().api_version().1, 81);
        }
        Err(e) => panic!("{e}"),
    }
}
