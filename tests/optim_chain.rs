//! optax-style chains of gradient transformations (`nn::optim::chain` and
//! `nn::optim::transform`) against optax's own values, recorded by
//! `scripts/record_optax_chain.py` (jax 0.10.2, optax) into
//! `tests/data/jax/optax_chain.json`: six updates of a small tree with fixed
//! gradients, some clipped and some not. Also: the chain forms of `adam` and its
//! clipped variant are the same values as the old spellings, and a chain with two
//! moment-keeping steps is an error.

mod common;

use common::client;
use serde_json::Value;
use xlaclient::nn::Schedule;
use xlaclient::nn::optim::{self, OptState, Optimizer, transform};
use xlaclient::{ClientExt, ElementType, Op, Shape, Tree};

#[derive(Tree, Clone, Debug)]
struct P<T> {
    w: T,
    b: T,
}

#[derive(Tree, Clone, Debug)]
struct S<T> {
    p: P<T>,
    opt: OptState<T, P<T>>,
}

fn data() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/jax/optax_chain.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("read optax_chain.json"))
        .expect("parse")
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Runs `opt` for the recorded gradients; the parameters after each update.
fn run(opt: &Optimizer, d: &Value) -> Vec<(Vec<f32>, Vec<f32>)> {
    let pspec = P {
        w: Shape::of::<f32>(&[3, 2]),
        b: Shape::of::<f32>(&[2]),
    };
    let spec = (
        S {
            opt: opt.state_spec(&pspec),
            p: pspec.clone(),
        },
        pspec.clone(),
    );
    let o = opt.clone();
    let step = client()
        .jit("chain_step", &spec, move |_, (s, g): (S<Op>, P<Op>)| {
            let (p, opt) = o.update(&g, s.opt, &s.p);
            S { p, opt }
        })
        .expect("compile the step");
    let o = opt.clone();
    let init = client()
        .jit("chain_init", &pspec, move |_, p: P<Op>| S {
            opt: o.init(&p),
            p,
        })
        .expect("compile init");
    let up = |v: &[f32], dims: &[i64]| client().buffer_from_host(v, dims).unwrap();
    let p0 = P {
        w: up(&floats(&d["w0"]), &[3, 2]),
        b: up(&floats(&d["b0"]), &[2]),
    };
    let mut s = init.call(&p0).expect("init");
    let mut out = Vec::new();
    for g in d["grads"].as_array().unwrap() {
        let g = P {
            w: up(&floats(&g["w"]), &[3, 2]),
            b: up(&floats(&g["b"]), &[2]),
        };
        s = step.call(&(s, g)).expect("step");
        out.push((
            s.p.w.to_vec::<f32>().unwrap(),
            s.p.b.to_vec::<f32>().unwrap(),
        ));
    }
    out
}

fn check(name: &str, opt: Optimizer, tol: f32) {
    let d = data();
    let got = run(&opt, &d);
    let want = d["chains"][name].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (i, ((w, b), rec)) in got.iter().zip(want).enumerate() {
        for (what, ours, theirs) in [("w", w, floats(&rec["w"])), ("b", b, floats(&rec["b"]))] {
            for (j, (x, y)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "{name}: update {} {what}[{j}]: ours {x}, optax {y}",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn clip_then_adam_equals_optax() {
    check(
        "clip_adam",
        optim::chain([
            transform::clip_by_global_norm(0.5),
            optim::adam(1e-2, 0.9, 0.999, 1e-5),
        ]),
        2e-7,
    );
}

#[test]
fn clip_scale_by_adam_and_a_schedule_function_equal_optax() {
    // PureJaxRL's annealing (negated, as scale_by_schedule does not negate).
    let anneal = Schedule::from_fn(|count: &Op| {
        let done = (count / 2i64).convert(ElementType::F32);
        (1.0 - &(done / 10.0)) * -2.5e-2
    });
    check(
        "clip_adam_schedule",
        optim::chain([
            transform::clip_by_global_norm(0.5),
            transform::scale_by_adam(0.9, 0.999, 1e-5),
            transform::scale_by_schedule(anneal),
        ]),
        2e-7,
    );
}

#[test]
fn decayed_weights_nesterov_trace_and_scale_equal_optax() {
    check(
        "wd_nesterov_scale",
        optim::chain([
            transform::add_decayed_weights(1e-2),
            transform::trace(0.9, true),
            transform::scale(-0.1),
        ]),
        2e-7,
    );
}

#[test]
fn clip_adam_decay_and_learning_rate_equal_optax() {
    check(
        "clip_adamw_lr",
        optim::chain([
            transform::clip_by_global_norm(1.0),
            transform::scale_by_adam(0.9, 0.999, 1e-8),
            transform::add_decayed_weights(1e-3),
            transform::scale_by_learning_rate(3e-3),
        ]),
        2e-7,
    );
}

#[test]
fn the_old_spellings_are_the_same_chains() {
    let d = data();
    // `.clip_by_global_norm` in front of `adam` is the chain, value for value.
    let method = optim::adam(1e-2, 0.9, 0.999, 1e-5).clip_by_global_norm(0.5);
    let chained = optim::chain([
        transform::clip_by_global_norm(0.5),
        transform::scale_by_adam(0.9, 0.999, 1e-5),
        transform::scale_by_learning_rate(1e-2),
    ]);
    assert_eq!(method, chained);
    assert_eq!(run(&method, &d), run(&chained, &d));
    // adamw = scale_by_adam, add_decayed_weights, scale_by_learning_rate.
    assert_eq!(
        optim::adamw(3e-3, 0.9, 0.999, 1e-8, 1e-3).clip_by_global_norm(1.0),
        optim::chain([
            transform::clip_by_global_norm(1.0),
            transform::scale_by_adam(0.9, 0.999, 1e-8),
            transform::add_decayed_weights(1e-3),
            transform::scale_by_learning_rate(3e-3),
        ])
    );
    // sgd with momentum = trace then the learning rate; without, the rate only.
    assert_eq!(
        optim::sgd(0.1, 0.9, true),
        optim::chain([
            transform::trace(0.9, true),
            transform::scale_by_learning_rate(0.1)
        ])
    );
    assert_eq!(optim::sgd(0.1, 0.0, false).transforms().len(), 1);
}

#[test]
fn two_moment_keeping_steps_are_an_error() {
    let opt = optim::chain([
        optim::adam(1e-3, 0.9, 0.999, 1e-8),
        optim::sgd(0.1, 0.9, false),
    ]);
    let pspec = P {
        w: Shape::of::<f32>(&[3, 2]),
        b: Shape::of::<f32>(&[2]),
    };
    let err = match client().jit("two_moments", &pspec, |_, p: P<Op>| {
        let s = opt.init(&p);
        let g = p.map_ref(|x: &Op| x.clone());
        opt.update(&g, s, &p)
    }) {
        Ok(_) => panic!("a chain with two moment-keeping steps compiled"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("steps that keep moments"), "{err}");
}
