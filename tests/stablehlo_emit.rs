//! StableHLO emission (`Computation::to_stablehlo`, issue 22 item 1): every program
//! the fuzzer builds, compiled from its `HloModuleProto` and from its StableHLO
//! text, gives the same outputs bit for bit on the plugin under test; targeted
//! programs (control flow, collectives over several CPU devices, checkpointed
//! and host-callback programs) too. Each fuzz case runs in a child process (this
//! binary, re-invoked), as in `tests/fuzz.rs`.
//!
//! `XLACLIENT_STABLEHLO_CASES=N` runs N fuzz cases (default 120).

mod common;
#[path = "common/fuzz.rs"]
mod fuzz;

use std::time::Duration;

use fuzz::RunOptions;

/// The entry point of child processes (does nothing in a normal run).
#[test]
fn fuzz_child() {
    fuzz::child_main(&fuzz::work);
}

#[test]
fn fuzzed_programs_run_the_same_from_hlo_and_from_stablehlo() {
    let n: u64 = std::env::var("XLACLIENT_STABLEHLO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let r = run("stablehlo", n);
    let same = r.counts.get("same").copied().unwrap_or(0);
    assert!(same * 3 > n, "{}", r.summary());
}

fn run(kind: &str, n: u64) -> fuzz::Report {
    let r = fuzz::run_children(
        0..n,
        &RunOptions {
            kind,
            child_args: &["fuzz_child", "--exact", "--nocapture", "--test-threads=1"],
            jobs: 1,
            chunk: 60,
            hang: Duration::from_secs(120),
            keep_cases: false,
            verbose: true,
        },
    );
    fuzz::check(kind, &r);
    r
}

#[test]
fn control_flow_under_grad_runs_the_same_from_stablehlo() {
    // Loops (fori, scan, while), branches (cond, switch) and checkpoint policies,
    // with their gradients: the fuzzer's control plans.
    let r = run("stablehlo-control", 40);
    assert!(
        r.counts.get("same").copied().unwrap_or(0) >= 35,
        "{}",
        r.summary()
    );
}

#[test]
fn collectives_on_eight_devices_run_the_same_from_stablehlo() {
    // psum/pmax/pmin/pmean, all-gather, reduce-scatter, all-to-all,
    // collective-permute and replica-id over random replica groups.
    let r = run("stablehlo-collectives", 80);
    assert!(
        r.counts.get("same").copied().unwrap_or(0) >= 30,
        "{}",
        r.summary()
    );
}

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use xlaclient::ir::Opcode;
use xlaclient::{Builder, CompileOptions, HostValue, ProgramFormat, Shape};

fn stablehlo() -> CompileOptions {
    CompileOptions::new().format(ProgramFormat::StableHlo)
}

/// Runs `m` compiled both ways on `args`; the outputs (f64) of each.
fn both(m: &xlaclient::Computation, args: &[&xlaclient::Buffer]) -> [Vec<Vec<f64>>; 2] {
    let c = common::client();
    let run = |opts: &CompileOptions| -> Vec<Vec<f64>> {
        let exe = c.compile_with(m, opts).unwrap();
        exe.execute(args)
            .unwrap()
            .iter()
            .map(|b| b.to_vec::<f64>().unwrap())
            .collect()
    };
    [run(&CompileOptions::new()), run(&stablehlo())]
}

#[test]
fn every_opcode_prints_as_its_stablehlo_column() {
    // In-process, no compile: every module the generator builds prints, and each
    // opcode of a module appears in its text under the op table's StableHLO name.
    for o in Opcode::ALL {
        let n = o.stablehlo_name();
        assert!(
            ["stablehlo.", "func.", "chlo."]
                .iter()
                .any(|p| n.starts_with(p)),
            "{o:?}: {n}"
        );
    }
    let mut seen: HashSet<Opcode> = HashSet::new();
    for seed in 0..3000 {
        let Ok((Ok(m), _)) = fuzz::no_panic(|| fuzz::generate(seed)) else {
            continue;
        };
        let text = match fuzz::no_panic(|| m.to_stablehlo()) {
            Ok(Ok(t)) => t,
            other => panic!("seed {seed}: {other:?}\n{}", m.to_hlo_text()),
        };
        for c in &m.ir().comps {
            for i in &c.instrs {
                let o = i.kind.opcode();
                seen.insert(o);
                if o == Opcode::Parameter {
                    continue;
                }
                let name = format!("\"{}\"", o.stablehlo_name());
                // On `pred`: `if` for a conditional; or, and for maximum, minimum
                // and clamp (what they compute there).
                let also: &[&str] = match o {
                    Opcode::Conditional => &["\"stablehlo.if\""],
                    Opcode::Maximum => &["\"stablehlo.or\""],
                    Opcode::Minimum | Opcode::Clamp => &["\"stablehlo.and\""],
                    _ => &[],
                };
                let ok = text.contains(&name) || also.iter().any(|a| text.contains(a));
                assert!(ok, "seed {seed}: {o:?} is not printed as {name}\n{text}");
            }
        }
    }
    let missing: Vec<&Opcode> = Opcode::ALL
        .iter()
        .filter(|o| !seen.contains(o) && **o != Opcode::CustomCall)
        .collect();
    assert!(missing.is_empty(), "never printed: {missing:?}");
}

#[test]
fn checkpointed_and_called_functions_run_the_same_from_stablehlo() {
    // `checkpoint` is a `call` (a private `func.func`, called by `func.call`) and,
    // under `grad`, an optimization barrier around the recomputation.
    let b = Builder::new("remat");
    let x = b.parameter(0, Shape::of::<f64>(&[4]), "x");
    let w = b.parameter(1, Shape::of::<f64>(&[4]), "w");
    let y = b.checkpoint("block", &[&x], |_, a| vec![(&a[0] * &w).tanh().sin()]);
    let z = b.call("twice", &[&y[0]], |_, a| vec![&a[0] * 2.0]);
    let loss = z[0].reduce_sum(&[0]);
    let g = b.grad(&loss, &w);
    let m = b.build_tuple(&[&loss, &g]).unwrap();
    let text = m.to_stablehlo().unwrap();
    assert!(text.contains("\"func.call\""), "{text}");
    assert!(text.contains("func.func private"), "{text}");
    assert!(
        text.contains("\"stablehlo.optimization_barrier\""),
        "{text}"
    );
    let xv = [0.3f64, -1.2, 2.0, 0.7];
    let wv = [0.5f64, 0.25, -0.4, 1.5];
    let xb = common::upload(&xv, &[4]);
    let wb = common::upload(&wv, &[4]);
    let [h, s] = both(&m, &[&xb, &wb]);
    assert_eq!(h, s);
    // And against plain Rust: loss = Σ 2 sin(tanh(x w)), d/dw = 2 cos(tanh) (1 - tanh²) x.
    let loss: f64 = xv
        .iter()
        .zip(&wv)
        .map(|(x, w)| 2.0 * (x * w).tanh().sin())
        .sum();
    assert!((s[0][0] - loss).abs() < 1e-12, "{} vs {loss}", s[0][0]);
    for k in 0..4 {
        let t = (xv[k] * wv[k]).tanh();
        let want = 2.0 * t.cos() * (1.0 - t * t) * xv[k];
        assert!((s[1][k] - want).abs() < 1e-12, "{k}: {} vs {want}", s[1][k]);
    }
}

#[test]
fn loops_and_branches_run_the_same_from_stablehlo() {
    // A fori loop (stablehlo.while with the carry as its operands), a cond on a
    // pred (stablehlo.if) and a switch with an out-of-range index (stablehlo.case,
    // clamped as JAX clamps it).
    let b = Builder::new("control");
    let x = b.parameter(0, Shape::of::<f64>(&[3]), "x");
    let k = b.parameter(1, Shape::of::<i32>(&[]), "k");
    let looped = b.fori_loop(0, 5, x.clone(), |i, x| {
        &(&x * 0.5).sin() + &i.convert(xlaclient::ElementType::F64)
    });
    let s = looped.reduce_sum(&[0]);
    let c = b.cond(
        &s.gt(&b.constant(1.0f64)),
        looped.clone(),
        |v| &v * 2.0,
        |v| -&v,
    );
    let sw = b.switch(
        &k,
        c.clone(),
        Box::new(|v: xlaclient::Op| &v + 1.0),
        vec![
            Box::new(|v: xlaclient::Op| &v * 3.0),
            Box::new(|v: xlaclient::Op| v.exp()),
        ],
    );
    let m = b.build_tuple(&[&looped, &c, &sw]).unwrap();
    let text = m.to_stablehlo().unwrap();
    for op in ["stablehlo.while", "stablehlo.if", "stablehlo.case"] {
        assert!(text.contains(&format!("\"{op}\"")), "{op}\n{text}");
    }
    let xv = [0.3f64, -1.0, 2.0];
    let xb = common::upload(&xv, &[3]);
    for kv in [-1i32, 0, 1, 2, 7] {
        let kb = common::client().scalar(kv).unwrap();
        let [h, s] = both(&m, &[&xb, &kb]);
        assert_eq!(h, s, "k = {kv}");
        // Plain Rust.
        let mut v = xv.to_vec();
        for i in 0..5 {
            v = v.iter().map(|x| (x * 0.5).sin() + i as f64).collect();
        }
        let c: Vec<f64> = if v.iter().sum::<f64>() > 1.0 {
            v.iter().map(|x| x * 2.0).collect()
        } else {
            v.iter().map(|x| -x).collect()
        };
        let sw: Vec<f64> = match kv.clamp(0, 2) {
            0 => c.iter().map(|x| x + 1.0).collect(),
            1 => c.iter().map(|x| x * 3.0).collect(),
            _ => c.iter().map(|x| x.exp()).collect(),
        };
        for (got, want) in [(&s[0], &v), (&s[1], &c), (&s[2], &sw)] {
            for (g, w) in got.iter().zip(want.iter()) {
                assert!(
                    (g - w).abs() < 1e-12 * (1.0 + w.abs()),
                    "k = {kv}: {got:?} vs {want:?}"
                );
            }
        }
    }
}

#[test]
fn a_debug_callback_is_called_from_a_stablehlo_program() {
    // The host callback is a typed-FFI custom call with a side effect: from the
    // StableHLO text it runs once per iteration with the iteration's values.
    let seen: Arc<Mutex<Vec<Vec<HostValue>>>> = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let b = Builder::new("debug_cb");
    let x0 = b.parameter(0, Shape::of::<f64>(&[2]), "x0");
    let out = b.fori_loop(0, 3, x0, |i, x| {
        b.debug_callback(&[i, &x], move |v: &[HostValue]| {
            s2.lock().unwrap().push(v.to_vec())
        });
        &x * 2.0
    });
    let m = b.build(&out).unwrap();
    assert!(m.to_stablehlo().unwrap().contains("has_side_effect = true"));
    let exe = common::client().compile_with(&m, &stablehlo()).unwrap();
    let x = common::upload(&[0.5f64, -1.0], &[2]);
    let got = exe.execute(&[&x]).unwrap()[0].to_vec::<f64>().unwrap();
    assert_eq!(got, vec![4.0, -8.0]);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (k, call) in seen.iter().enumerate() {
        assert_eq!(call[0].to_vec::<i32>().unwrap(), vec![k as i32]);
        let f = (1 << k) as f64;
        assert_eq!(call[1].to_vec::<f64>().unwrap(), vec![0.5 * f, -f]);
    }
}

#[test]
fn what_stablehlo_cannot_say_is_an_error_naming_the_op() {
    // An all-to-all over every replica needs its split count, which only the
    // replica count gives.
    let b = Builder::new("a2a");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let m = b.build(&x.all_to_all(0, &[])).unwrap();
    let e = m.to_stablehlo().unwrap_err().to_string();
    assert!(
        e.contains("`all-to-all`") && e.contains("split count"),
        "{e}"
    );
    assert!(
        e.contains("stablehlo_emit.rs"),
        "names the user's line: {e}"
    );
    let text = m.to_stablehlo_with(2, 1).unwrap();
    assert!(text.contains("mhlo.num_replicas = 2"), "{text}");
    assert!(text.contains("split_count = 2"), "{text}");
    // The compile path reports the emitter's error as an invalid option.
    let client = common::client();
    let opts = stablehlo().num_replicas(1);
    match client.compile_with(&m, &opts) {
        Ok(_) => {} // one replica: the group of them all is [0]
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_sharded_program_runs_the_same_from_stablehlo_on_eight_devices() {
    // Shardings print as `mhlo.sharding` (arguments, results and the sharding
    // constraint's custom call); the SPMD-partitioned program from the text gives
    // each device the same block as the one from the proto.
    use xlaclient::{ClientExt, ClientOptions, Mesh, Op, P, ShardedArray};
    let plugin = xlaclient::Plugin::default_plugin().unwrap();
    let c = xlaclient::Client::new(&plugin, &ClientOptions::new().cpu_device_count(8)).unwrap();
    let mesh = Mesh::new(&c, &[("data", 4), ("model", 2)]).unwrap();
    let dims = [8i64, 4];
    let full: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let x = ShardedArray::upload(&mesh, &P::new([Some("data"), None]), &full, &dims).unwrap();
    let f = c
        .jit_sharded(
            "constrained",
            &mesh,
            &Shape::of::<f32>(&dims),
            &P::new([Some("data"), None]),
            &P::new([Some("data"), None]),
            |_, x: Op| {
                let y = (&x * 3.0).with_sharding_constraint(&mesh, &P::new([None, Some("model")]));
                &y + y.reduce_sum(&[0])
            },
        )
        .unwrap();
    let m = f.computation();
    let text = m.to_stablehlo().unwrap();
    assert!(text.contains("mhlo.sharding = \"{devices=[4,1"), "{text}");
    let args: Vec<Vec<&xlaclient::Buffer>> = x.shards().iter().map(|b| vec![b]).collect();
    let dir = tempfile::tempdir().unwrap();
    let (code, detail) =
        fuzz::compare_formats(&c, m, &mesh.compile_options(), &args, &dir.path().join("m"));
    assert_eq!(code, "same", "{detail}");
}

#[test]
fn every_element_type_converts_the_same_from_stablehlo() {
    // Parameters, constants and converts of every element type (f8, bf16,
    // complex, unsigned, pred), and bit casts; complex values leave as they are
    // and as their real and imaginary parts, every output compared bit for bit.
    use xlaclient::ElementType;
    let c = common::client();
    let xs = [0.5f32, -1.75, 3.0, 0.1];
    let x = common::upload(&xs, &[4]);
    for ty in ElementType::ALL {
        let b = Builder::new("types");
        let p = b.parameter(0, Shape::of::<f32>(&[4]), "x");
        let k = b.constant_vec(&[0.25f32, 2.0, -0.5, 7.0]).convert(ty);
        let y = p.convert(ty);
        let mut outs = Vec::new();
        if ty.is_complex() {
            outs.push(y.clone());
            outs.push(k.clone());
            outs.push(y.real());
            outs.push(y.imag());
            outs.push(k.real());
        } else {
            outs.push(y.clone());
            outs.push(k.clone());
            outs.push(y.convert(ElementType::F32));
            if ty.byte_size() == 4 {
                outs.push(y.bitcast_convert(ElementType::U32));
            }
        }
        let refs: Vec<&xlaclient::Op> = outs.iter().collect();
        let m = b.build_tuple(&refs).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (code, detail) = fuzz::compare_formats(
            c,
            &m,
            &CompileOptions::new(),
            &[vec![&x]],
            &dir.path().join("m"),
        );
        assert_eq!(code, "same", "{ty}: {detail}");
    }
}

#[test]
fn computations_on_constants_fold_as_from_the_proto() {
    // MLIR's folder would compute these itself and answer otherwise (fuzz seeds
    // 2165, 1191 on the second plugin, and the `0 % 0` that killed its
    // compiler): each constant reaches its user through an identity call, and
    // both compiles give XLA's own folded values.
    use xlaclient::ElementType;
    let c = common::client();
    let b = Builder::new("fold");
    // logistic of constants (MLIR: in double, one ulp off).
    let k = b.constant_vec(&[4.5f32, 4.0, 3.0, 0.0, -1.5, 2.0]);
    let sig = k.logistic();
    // An f8e4m3fn NaN (u32::MAX converted) through `minimum` with 1.5.
    let nan8 = b.constant_vec(&[u32::MAX]).convert(ElementType::F8E4M3FN);
    let one5 = b.constant_vec(&[1.5f32]).convert(ElementType::F8E4M3FN);
    let m8 = nan8.min(&one5).convert(ElementType::F32);
    // Integer remainder and division by a constant zero (XLA: x % 0 = x, x / 0 = -1).
    let z = b.constant_vec(&[0i32, 7]);
    let d = b.constant_vec(&[0i32, 0]);
    let (rem, div) = (z.rem(&d), z.div(&d));
    let m = b.build_tuple(&[&sig, &m8, &rem, &div]).unwrap();
    let text = m.to_stablehlo().unwrap();
    assert!(
        text.contains("{callee = @xlaclient_fold_fence_"),
        "constants are fenced: {text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, detail) = fuzz::compare_formats(
        c,
        &m,
        &CompileOptions::new(),
        &[vec![]],
        &dir.path().join("m"),
    );
    assert_eq!(code, "same", "{detail}");
    let out = common::run(&m, &[]);
    // XLA's values: the proto's logistic against plain Rust within an ulp, the f8
    // NaN kept, XLA's integer division by zero.
    let want: Vec<f32> = [4.5f32, 4.0, 3.0, 0.0, -1.5, 2.0]
        .iter()
        .map(|x| 1.0 / (1.0 + (-x).exp()))
        .collect();
    common::assert_close(&out[0].to_vec::<f32>().unwrap(), &want, 2e-7);
    assert!(out[1].to_vec::<f32>().unwrap()[0].is_nan());
    assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![0, 7]);
    assert_eq!(out[3].to_vec::<i32>().unwrap(), vec![-1, -1]);
}
