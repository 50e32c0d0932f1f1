//! The builder's element-type rules checked against XLA's own: for each element-wise
//! op, compare, select, clamp, convert (every pair), dot and reduce, and each
//! element type, the builder accepts exactly when the plugin compiles the op. XLA's
//! answer comes from a module built on `f32` with every `f32` in its proto replaced
//! by the type under test (so the builder's rules play no part in it), compiled in a
//! child process: a type XLA does not support may crash its compiler. Also: shapes
//! whose element counts overflow `i64` are errors (never a panic), and nested-tuple
//! results are refused at `build`.

mod common;
#[path = "common/fuzz.rs"]
mod fuzz;

use std::time::Duration;

use prost::Message;
use xlaclient::ClientExt;
use xlaclient::proto::{self, HloModuleProto};
use xlaclient::{
    BinaryOp, Builder, Client, Comparison, CompileOptions, Computation, DotDims, ElementType,
    Error, Op, Shape, UnaryOp,
};

use fuzz::{Outcome, RunOptions};

/// One op at one element type.
#[derive(Clone, Copy, Debug)]
enum Case {
    Unary(UnaryOp, ElementType),
    Binary(BinaryOp, ElementType),
    Compare(Comparison, ElementType),
    Select(ElementType),
    Convert(ElementType, ElementType),
    Dot(ElementType),
    Reduce(ElementType),
    Clamp(ElementType),
}

const DIRS: [Comparison; 6] = [
    Comparison::Eq,
    Comparison::Ne,
    Comparison::Lt,
    Comparison::Le,
    Comparison::Gt,
    Comparison::Ge,
];

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for t in ElementType::ALL {
        v.extend(UnaryOp::ALL.iter().map(|u| Case::Unary(*u, t)));
        v.extend(BinaryOp::ALL.iter().map(|b| Case::Binary(*b, t)));
        v.extend(DIRS.iter().map(|d| Case::Compare(*d, t)));
        v.push(Case::Select(t));
        v.extend(ElementType::ALL.iter().map(|to| Case::Convert(t, *to)));
        v.push(Case::Dot(t));
        v.push(Case::Reduce(t));
        v.push(Case::Clamp(t));
    }
    v
}

const DIMS: [i64; 2] = [2, 3];

/// A parameter of type `t` (an `f32` one converted, for types with no upload).
fn param(b: &Builder, n: usize, t: ElementType, dims: &[i64]) -> Op {
    if fuzz::HOST.contains(&t) {
        b.parameter(n, Shape::array(t, dims), &format!("p{n}"))
    } else {
        b.parameter(n, Shape::of::<f32>(dims), &format!("p{n}"))
            .convert(t)
    }
}

/// The op of `case` on parameters of type `t` (and, for convert, from `t`).
fn build(case: Case, t: ElementType) -> xlaclient::Result<Computation> {
    let b = Builder::new("case");
    let x = param(&b, 0, t, &DIMS);
    let out = match case {
        Case::Unary(u, _) => match u {
            UnaryOp::Negate => x.neg(),
            UnaryOp::Exponential => x.exp(),
            UnaryOp::Log => x.log(),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => x.rsqrt(),
            UnaryOp::Sine => x.sin(),
            UnaryOp::Cosine => x.cos(),
            UnaryOp::Logistic => x.logistic(),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Sign => x.sign(),
            UnaryOp::ExponentialMinusOne => x.expm1(),
            UnaryOp::LogPlusOne => x.log1p(),
            UnaryOp::RoundNearestAfz => x.round(),
            UnaryOp::RoundNearestEven => x.round_even(),
            UnaryOp::Cbrt => x.cbrt(),
            UnaryOp::Tan => x.tan(),
            UnaryOp::Erf => x.erf(),
            UnaryOp::IsFinite => x.is_finite(),
            UnaryOp::Real => x.real(),
            UnaryOp::Imag => x.imag(),
        },
        Case::Binary(op, _) => {
            let y = param(&b, 1, t, &DIMS);
            match op {
                BinaryOp::Add => x.add(&y),
                BinaryOp::Subtract => x.sub(&y),
                BinaryOp::Multiply => x.mul(&y),
                BinaryOp::Divide => x.div(&y),
                BinaryOp::Maximum => x.max(&y),
                BinaryOp::Minimum => x.min(&y),
                BinaryOp::Power => x.pow(&y),
                BinaryOp::Remainder => x.rem(&y),
                BinaryOp::Atan2 => x.atan2(&y),
                BinaryOp::Complex => x.complex(&y),
            }
        }
        Case::Compare(d, _) => x.compare(&param(&b, 1, t, &DIMS), d),
        Case::Select(_) => {
            let p = param(&b, 1, ElementType::Pred, &DIMS);
            b.select(&p, &x, &param(&b, 2, t, &DIMS))
        }
        Case::Convert(_, to) => x.convert(to),
        Case::Dot(_) => x.dot_general(&param(&b, 1, t, &[3, 4]), &DotDims::contract(1, 0)),
        Case::Reduce(_) => {
            let init = param(&b, 1, t, &[]);
            x.reduce(&init, &[1], |a, e| a + e)
        }
        Case::Clamp(_) => x.clamp(&param(&b, 1, t, &[]), &param(&b, 2, t, &DIMS)),
    };
    b.build(&out)
}

/// The element type under test, and for convert the target type.
fn types(case: Case) -> (ElementType, Option<ElementType>) {
    match case {
        Case::Unary(_, t)
        | Case::Binary(_, t)
        | Case::Compare(_, t)
        | Case::Select(t)
        | Case::Dot(t)
        | Case::Reduce(t)
        | Case::Clamp(t) => (t, None),
        Case::Convert(from, to) => (from, Some(to)),
    }
}

/// The builder's answer.
fn builder_accepts(case: Case) -> Result<(), String> {
    let (t, _) = types(case);
    build(case, t).map(|_| ()).map_err(|e| e.to_string())
}

fn retype(s: &mut proto::ShapeProto, map: &dyn Fn(i32) -> i32) {
    s.element_type = map(s.element_type);
    for e in &mut s.tuple_shapes {
        retype(e, map);
    }
}

/// The module XLA judges: the case built on `f32` (converting to `s16` for a
/// convert), with `f32` replaced by the type under test (and `s16` by the target).
fn xla_module(case: Case) -> Vec<u8> {
    let (t, to) = types(case);
    // The ops whose result type is not the operand's (real/imag of complex,
    // complex of reals): where the builder accepts, XLA judges its module as built.
    let retyping = matches!(
        case,
        Case::Unary(UnaryOp::Real | UnaryOp::Imag, _) | Case::Binary(BinaryOp::Complex, _)
    );
    if retyping && let Ok(m) = build(case, t) {
        return m.proto().encode_to_vec();
    }
    let template = match case {
        Case::Convert(..) => Case::Convert(ElementType::F32, ElementType::S16),
        c => c,
    };
    let m = build(template, ElementType::F32).expect("the f32 template builds");
    let f32 = ElementType::F32.primitive_type() as i32;
    let s16 = ElementType::S16.primitive_type() as i32;
    let (ti, toi) = (
        t.primitive_type() as i32,
        to.map(|x| x.primitive_type() as i32),
    );
    let map = move |e: i32| {
        if e == f32 {
            ti
        } else if e == s16 && toi.is_some() {
            toi.expect("checked")
        } else {
            e
        }
    };
    let mut p = m.proto().clone();
    if let Some(ps) = p.host_program_shape.as_mut() {
        ps.parameters.iter_mut().for_each(|s| retype(s, &map));
        if let Some(r) = ps.result.as_mut() {
            retype(r, &map);
        }
    }
    for c in &mut p.computations {
        if let Some(ps) = c.program_shape.as_mut() {
            ps.parameters.iter_mut().for_each(|s| retype(s, &map));
            if let Some(r) = ps.result.as_mut() {
                retype(r, &map);
            }
        }
        for i in &mut c.instructions {
            if let Some(s) = i.shape.as_mut() {
                retype(s, &map);
            }
            if i.opcode == "compare" {
                i.comparison_type = xlaclient::ops::elementwise::comparison_type(t).to_string();
            }
        }
    }
    p.encode_to_vec()
}

/// Child work: `agree` when the builder and XLA give the same answer, `fail`
/// otherwise.
fn work(kind: &str, i: u64, client: &Client, hlo: &std::path::Path) -> Outcome {
    assert_eq!(kind, "types");
    let case = cases()[i as usize];
    let ours = builder_accepts(case);
    let bytes = xla_module(case);
    let text = HloModuleProto::decode(bytes.as_slice())
        .map(|p| {
            Computation::from_proto(p)
                .map_or_else(|e| format!("(refused: {e})"), |c| c.to_hlo_text())
        })
        .unwrap_or_default();
    let _ = std::fs::write(hlo, format!("{case:?}\n{text}"));
    let xla = client
        .compile_hlo_bytes(&bytes, &CompileOptions::new())
        .map(|_| ());
    match (ours, xla) {
        (Ok(()), Ok(())) => ("agree", "both accept".into()),
        (Err(_), Err(_)) => ("agree", "both reject".into()),
        (Ok(()), Err(e)) => (
            "fail",
            format!(
                "{case:?}: builder accepts, XLA rejects: {}",
                e.to_string().lines().next().unwrap_or("")
            ),
        ),
        (Err(e), Ok(())) => (
            "fail",
            format!("{case:?}: builder rejects ({e}), XLA compiles it"),
        ),
    }
}

/// Where the builder rejects what XLA compiles, on purpose: `add` on `pred` (XLA's
/// CPU backend adds 1-bit integers, so `true + true` is not a clear `or`), `multiply`
/// and `dot` on `pred`, a reduce whose body adds `pred`s (the same `add`), and
/// `atan2` on complex numbers (not a function XLA documents for them); complex
/// numbers have no order for `maximum`/`minimum`. A complex-to-real `convert`
/// compiles alone, but XLA's constant folder segfaults on one (fuzz seed 3469:
/// `floor(convert(c))` of a complex constant `c`).
fn stricter_on_purpose(case: Case) -> bool {
    use ElementType::{C64, C128, Pred};
    if let Case::Convert(from, to) = case {
        return from.is_complex() && !to.is_complex();
    }
    matches!(
        case,
        Case::Binary(BinaryOp::Add | BinaryOp::Multiply, Pred)
            | Case::Dot(Pred)
            | Case::Reduce(Pred)
            | Case::Binary(
                BinaryOp::Atan2 | BinaryOp::Maximum | BinaryOp::Minimum,
                C64 | C128
            )
    )
}

#[test]
fn complex_to_real_convert_is_refused() {
    // Fuzz seed 3469 segfaulted the 0.115 plugin's compiler: its constant folder
    // evaluating floor(convert(c64 constant -> f16)).
    let b = Builder::new("seed_3469");
    let c = b.constant(3f32).convert(ElementType::C64);
    let e = b.build(&c.convert(ElementType::F16).floor()).unwrap_err();
    assert!(
        e.to_string().contains("cannot convert complex c64 to f16"),
        "{e}"
    );
}

#[test]
fn max_and_min_of_pred_are_or_and_and() {
    let b = Builder::new("pred_max");
    let x = b.parameter(0, Shape::of::<bool>(&[4]), "x");
    let y = b.parameter(1, Shape::of::<bool>(&[4]), "y");
    let m = b
        .build_tuple(&[
            &x.max(&y),
            &x.min(&y),
            &x.reduce_max(&[0]),
            &x.reduce_min(&[0]),
        ])
        .unwrap();
    let outs = common::run(
        &m,
        &[
            &common::upload(&[true, false, true, false], &[4]),
            &common::upload(&[true, true, false, false], &[4]),
        ],
    );
    let v = |i: usize| outs[i].to_vec::<bool>().unwrap();
    assert_eq!(v(0), vec![true, true, true, false]);
    assert_eq!(v(1), vec![true, false, false, false]);
    assert_eq!((v(2), v(3)), (vec![true], vec![false]));
}

#[test]
fn types_child() {
    fuzz::child_main(&work);
}

#[test]
fn element_type_rules_match_xla() {
    let all = cases();
    let r = fuzz::run_children(
        0..all.len() as u64,
        &RunOptions {
            kind: "types",
            child_args: &["types_child", "--exact", "--nocapture", "--test-threads=1"],
            jobs: 2,
            chunk: all.len() as u64,
            hang: Duration::from_secs(120),
            keep_cases: true,
            verbose: false,
        },
    );
    let mut bad = Vec::new();
    let mut crashes = Vec::new();
    for f in &r.failures {
        let case = all[f.seed as usize];
        if f.what.contains("XLA compiles it") && stricter_on_purpose(case) {
            continue;
        }
        if f.what.contains("builder") {
            bad.push(f.what.clone());
        } else if builder_accepts(case).is_ok() {
            // XLA's compiler crashed on a module the builder accepts.
            bad.push(format!(
                "{case:?}: builder accepts, XLA crashes: {}",
                f.what
            ));
        }
        // XLA crashing on a type the builder rejects is the builder's job done.
        crashes.push(format!("{case:?}"));
    }
    eprintln!("{} cases: {}", all.len(), r.summary());
    eprintln!("XLA crashes on (the builder rejects): {crashes:?}");
    // The segfault the issue reported: remainder on complex numbers.
    assert!(
        builder_accepts(Case::Binary(BinaryOp::Remainder, ElementType::C64)).is_err()
            && builder_accepts(Case::Binary(BinaryOp::Remainder, ElementType::C128)).is_err()
    );
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Huge shapes: element counts that overflow i64 are errors, never a panic.

const BIG: i64 = i64::MAX / 2 + 1; // 2^62: two of them overflow

fn rejects(what: &str, f: impl FnOnce(&Builder) -> Op) -> String {
    let b = Builder::new("huge");
    let r = fuzz::no_panic(|| {
        let out = f(&b);
        b.build(&out)
    });
    match r {
        Err(p) => panic!("{what}: panicked: {p}"),
        Ok(Ok(_)) => panic!("{what}: accepted"),
        Ok(Err(e)) => e.to_string(),
    }
}

#[test]
fn huge_shapes_are_errors_not_panics() {
    let big = |b: &Builder| b.parameter(0, Shape::of::<f32>(&[BIG, 4]), "x");
    // A parameter whose element count overflows cannot be passed to XLA.
    let e = rejects("parameter", big);
    assert!(e.contains("overflow"), "{e}");
    let e = rejects("parameter bytes", |b| {
        b.parameter(0, Shape::of::<f64>(&[i64::MAX / 4]), "x")
    });
    assert!(e.contains("overflow"), "{e}");
    rejects("reshape -1", |b| {
        b.parameter(0, Shape::of::<f32>(&[BIG, 2]), "x")
            .reshape(&[-1])
    });
    rejects("reshape to huge", |b| {
        b.parameter(0, Shape::of::<f32>(&[4]), "x")
            .reshape(&[BIG, 2, -1])
    });
    rejects("broadcast", |b| {
        b.parameter(0, Shape::of::<f32>(&[4]), "x")
            .broadcast(&[BIG])
    });
    rejects("broadcast_in_dim", |b| {
        b.parameter(0, Shape::of::<f32>(&[1]), "x")
            .broadcast_in_dim(&[BIG, BIG], &[1])
    });
    rejects("broadcast_to", |b| {
        b.parameter(0, Shape::of::<f32>(&[1, 1]), "x")
            .broadcast_to(&[i64::MAX, i64::MAX])
    });
    rejects("constant", |b| b.constant_array::<f32>(&[], &[BIG, 4]));
    rejects("constant i64::MAX", |b| {
        b.constant_array::<f32>(&[], &[i64::MAX, i64::MAX])
    });
    rejects("mean", |b| {
        b.parameter(0, Shape::of::<f32>(&[2]), "x")
            .broadcast(&[BIG, 2])
            .mean(&[0, 1, 2], false)
    });
    rejects("dot", |b| {
        let x = b.parameter(0, Shape::of::<f32>(&[1, 2]), "x");
        let y = b.parameter(1, Shape::of::<f32>(&[2, 1]), "y");
        x.broadcast_in_dim(&[BIG, 2], &[0, 1]).dot_general(
            &y.broadcast_in_dim(&[2, BIG], &[0, 1]),
            &DotDims::contract(1, 0),
        )
    });
    // Extreme attributes are errors too.
    let x = |b: &Builder| b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    rejects("transpose", |b| x(b).transpose(&[i64::MIN, 0]));
    rejects("reduce axes", |b| x(b).reduce_sum(&[i64::MIN]));
    rejects("mean axes", |b| x(b).mean(&[i64::MAX], false));
    rejects("reshape", |b| x(b).reshape(&[i64::MIN, -1]));
    rejects("broadcast_in_dim", |b| {
        x(b).broadcast_in_dim(&[2, 3], &[i64::MIN, i64::MAX])
    });
    rejects("dot axes", |b| {
        let d = DotDims::contract(i64::MAX, i64::MIN);
        let y = b.parameter(1, Shape::of::<f32>(&[3, 2]), "y");
        x(b).dot_general(&y, &d)
    });
    rejects("get_tuple_element", |b| {
        b.tuple(&[&x(b)]).get_tuple_element(usize::MAX)
    });
    let e = rejects("parameter number", |b| {
        b.parameter(usize::MAX, Shape::of::<f32>(&[]), "p")
    });
    assert!(e.contains("too large"), "{e}");
    // Within i64 but beyond any machine: still built (XLA decides), no panic.
    let b = Builder::new("large");
    let x = b.parameter(0, Shape::of::<f32>(&[1 << 40]), "x");
    let y = x.reshape(&[1 << 20, -1]).mean(&[1], false);
    assert_eq!(y.dims().unwrap(), vec![1 << 20]);
}

#[test]
fn shape_element_count_is_checked() {
    assert_eq!(Shape::of::<f32>(&[BIG, 2]).element_count(), None);
    assert_eq!(Shape::of::<f32>(&[BIG, 0]).element_count(), Some(0));
    assert_eq!(Shape::of::<f32>(&[]).element_count(), Some(1));
}

// ---------------------------------------------------------------------------------
// Nested tuples.

#[test]
fn a_nested_tuple_result_is_refused_at_build() {
    let b = Builder::new("nested");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let inner = b.tuple(&[&x, &x]);
    let e = b.build(&b.tuple(&[&x, &inner])).unwrap_err();
    assert!(matches!(e, Error::Graph { .. }), "{e:?}");
    assert!(e.to_string().contains("nested"), "{e}");
    let e = b.build_tuple(&[&x, &inner]).unwrap_err();
    assert!(e.to_string().contains("nested"), "{e}");
    // A tuple inside the graph is fine when the result is flat.
    let m = b
        .build_tuple(&[&inner.get_tuple_element(1), &x])
        .expect("flat result");
    let outs = common::run(&m, &[&common::upload(&[1f32, 2.0], &[2])]);
    assert_eq!(outs.len(), 2);
    assert_eq!(outs[0].to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}
