//! Host callbacks from compiled code (`jax.debug.print`, `jax.debug.callback`,
//! issue 24) through the PJRT C API's host send/recv callbacks: what the CPU
//! plugins do with them.
//!
//! On TPU, JAX lowers a debug callback to a `send` (device to host) and, for results,
//! a `recv` (host to device) with `is_host_transfer = true`, a channel handle of type
//! `DEVICE_TO_HOST`/`HOST_TO_DEVICE` and token operands; the runtime calls the
//! `PJRT_SendCallbackInfo`/`PJRT_RecvCallbackInfo` entries of `PJRT_ExecuteOptions`
//! whose `channel_id` matches. Both CPU plugins refuse such programs when they are
//! compiled, before any callback could be given: their compiler (XLA:CPU's thunk
//! emitter) has no lowering for the `send`, `send-done`, `recv` or `recv-done`
//! opcodes. These tests keep that finding true: they hand each plugin the smallest
//! StableHLO module with one host `send` (or `recv`) and check that the plugin
//! answers with a clear `Unimplemented` error naming the opcode (not an abort). If a
//! plugin ever compiles one, the test fails and the runtime plumbing of the C API's
//! callbacks (`PJRT_ExecuteOptions::send_callbacks`) becomes worth writing.
//!
//! Run with the default plugin (PJRT C API 0.115) and with
//! `PJRT_PLUGIN_PATH=…/xla_cpu_pjrt.so` (0.81); both give the same answer.

use xlaclient::{Client, CompileOptions, PjrtErrorCode, RuntimeError};

/// One host `send` of the parameter (channel 1, `DEVICE_TO_HOST` = type 2), with
/// the frontend attributes JAX's TPU lowering puts on it; the result does not
/// depend on it (a debug callback's shape).
const HOST_SEND: &str = r#"
module @host_send attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = stablehlo.create_token : !stablehlo.token
    %1 = "stablehlo.send"(%arg0, %0) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true, mhlo.frontend_attributes = {_xla_host_transfer_handler_name = "tf_rendezvous", _xla_host_transfer_rendezvous = "host_send_dtoh_0", _xla_host_transfer_original_type = "f32"}} : (tensor<3xf32>, !stablehlo.token) -> !stablehlo.token
    %2 = stablehlo.add %arg0, %arg0 : tensor<3xf32>
    return %2 : tensor<3xf32>
  }
}
"#;

/// One host `recv` of an f32[3] (channel 2, `HOST_TO_DEVICE` = type 3), added to the
/// parameter: what a callback that returns values lowers to.
const HOST_RECV: &str = r#"
module @host_recv attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = stablehlo.create_token : !stablehlo.token
    %1:2 = "stablehlo.recv"(%0) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 3>, is_host_transfer = true, mhlo.frontend_attributes = {_xla_host_transfer_handler_name = "tf_rendezvous", _xla_host_transfer_rendezvous = "host_recv_htod_0", _xla_host_transfer_original_type = "f32"}} : (!stablehlo.token) -> (tensor<3xf32>, !stablehlo.token)
    %2 = stablehlo.add %arg0, %1#0 : tensor<3xf32>
    return %2 : tensor<3xf32>
  }
}
"#;

/// The plugin's answer to compiling `code`: the error's code and message.
fn compile_error(code: &str) -> (PjrtErrorCode, String) {
    let client = Client::cpu().unwrap();
    match client.compile_mlir(code.as_bytes(), &CompileOptions::new()) {
        Ok(_) => panic!(
            "plugin {:?} compiled a host transfer: write the send/recv callback plumbing \
             (see this file's docs)",
            client.plugin_identity()
        ),
        Err(RuntimeError::Pjrt { code, message, .. }) => (code, message),
        Err(other) => panic!("expected the plugin's compile error, got {other:?}"),
    }
}

#[test]
fn a_host_send_is_refused_at_compile_by_the_cpu_plugin() {
    let (code, message) = compile_error(HOST_SEND);
    assert_eq!(code, PjrtErrorCode::Unimplemented, "{message}");
    assert!(
        message.contains("HLO opcode `send` is not supported by XLA:CPU ThunkEmitter"),
        "{message}"
    );
}

#[test]
fn a_host_recv_is_refused_at_compile_by_the_cpu_plugin() {
    let (code, message) = compile_error(HOST_RECV);
    assert_eq!(code, PjrtErrorCode::Unimplemented, "{message}");
    assert!(
        message.contains("HLO opcode `recv` is not supported by XLA:CPU ThunkEmitter"),
        "{message}"
    );
}

// ---- the route that works: a typed-FFI custom call whose kernel is Rust ----------

use std::sync::{Arc, Mutex};

use xlaclient::ops::misc::CustomCallAttrs;
use xlaclient::pjrt::host_callback::{HOST_CALLBACK_TARGET, HostValue, register_host_callback};
use xlaclient::{Builder, Op, Shape};

/// A custom call to the host-callback handler: callback `id` on `values`; its
/// result (an f32[] zero written by the handler) is returned so that the caller
/// keeps the call alive.
fn callback_op(b: &Builder, id: i64, values: &[&Op]) -> Op {
    let attrs = CustomCallAttrs {
        target: HOST_CALLBACK_TARGET.to_string(),
        opaque: Vec::new(),
        api_version: 4,
        has_side_effect: true,
    };
    let id = b.constant(id);
    let mut ops = vec![&id];
    ops.extend_from_slice(values);
    b.custom_call(&attrs, &ops, Shape::of::<f32>(&[]))
}

fn collecting() -> (i64, Calls) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let id = register_host_callback(move |v: &[HostValue]| s.lock().unwrap().push(v.to_vec()));
    (id, seen)
}

#[test]
fn a_callback_inside_a_fori_loop_sees_every_iterations_values() {
    let client = Client::cpu().unwrap();
    client.plugin().enable_host_callbacks().unwrap();
    let (id, seen) = collecting();
    let b = Builder::new("cb_loop");
    let x0 = b.parameter(0, Shape::of::<f32>(&[2]), "x0");
    let out = b.fori_loop(0, 5, x0, |i, x| {
        let z = callback_op(&b, id, &[i, &x]);
        &(&x * 2.0 + 1.0) + &z
    });
    let exe = client.compile(b.build(&out).unwrap()).unwrap();
    let x = client.buffer_from_host(&[1.0f32, -0.5], &[2]).unwrap();
    let got = exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
    // Plain Rust: the loop's values before each step.
    let mut want = vec![[1.0f32, -0.5]];
    for _ in 0..5 {
        let p = *want.last().unwrap();
        want.push([p[0] * 2.0 + 1.0, p[1] * 2.0 + 1.0]);
    }
    assert_eq!(got, want[5].to_vec());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5, "one call per iteration");
    for (k, call) in seen.iter().enumerate() {
        assert_eq!(call[0].to_vec::<i32>().unwrap(), vec![k as i32]);
        assert_eq!(call[1].dims, vec![2]);
        assert_eq!(call[1].to_vec::<f32>().unwrap(), want[k].to_vec());
    }
}

// ---- Builder::debug_callback / debug_print ----------------------------------------

type Calls = Arc<Mutex<Vec<Vec<HostValue>>>>;

/// A callback that keeps copies of every call's values, and what it kept.
fn collector() -> (Calls, impl Fn(&[HostValue]) + Send + Sync + 'static) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (seen, move |v: &[HostValue]| {
        s.lock().unwrap().push(v.to_vec())
    })
}

#[test]
fn debug_callback_in_a_fori_loop_is_called_once_per_iteration_with_its_values() {
    let client = Client::cpu().unwrap();
    let (seen, f) = collector();
    let b = Builder::new("debug_cb");
    let x0 = b.parameter(0, Shape::of::<f64>(&[3]), "x0");
    let out = b.fori_loop(0, 4, x0, |i, x| {
        b.debug_callback(&[i, &x], f);
        (&x * 0.5).sin() + 1.0
    });
    let exe = client.compile(b.build(&out).unwrap()).unwrap();
    let x = client.buffer_from_host(&[0.3f64, -1.0, 2.0], &[3]).unwrap();
    let got = exe.execute(&[&x]).unwrap()[0].to_vec::<f64>().unwrap();
    let mut want = vec![vec![0.3f64, -1.0, 2.0]];
    for _ in 0..4 {
        let p = want.last().unwrap().clone();
        want.push(p.iter().map(|v| (v * 0.5).sin() + 1.0).collect());
    }
    for (g, w) in got.iter().zip(&want[4]) {
        assert!((g - w).abs() < 1e-12, "{got:?} vs {:?}", want[4]);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for (k, call) in seen.iter().enumerate() {
        assert_eq!(call[0].to_vec::<i32>().unwrap(), vec![k as i32]);
        let v = call[1].to_vec::<f64>().unwrap();
        for (a, w) in v.iter().zip(&want[k]) {
            assert!((a - w).abs() < 1e-12, "call {k}: {v:?} vs {:?}", want[k]);
        }
    }
}

#[test]
fn debug_callback_runs_again_on_each_execution() {
    let client = Client::cpu().unwrap();
    let (seen, f) = collector();
    let b = Builder::new("debug_cb_twice");
    let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
    b.debug_callback(&[&x], f);
    let exe = client.compile(b.build(&(&x + 1.0)).unwrap()).unwrap();
    for v in [1.0f32, 2.5, -4.0] {
        let out = exe.execute(&[&client.scalar(v).unwrap()]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![v + 1.0]);
    }
    let seen = seen.lock().unwrap();
    let vals: Vec<f32> = seen
        .iter()
        .map(|c| c[0].to_vec::<f32>().unwrap()[0])
        .collect();
    assert_eq!(vals, vec![1.0, 2.5, -4.0]);
    assert!(seen.iter().all(|c| c[0].dims.is_empty() && c.len() == 1));
}

#[test]
fn under_grad_the_callback_sees_primal_values() {
    let client = Client::cpu().unwrap();
    let (seen, f) = collector();
    let b = Builder::new("debug_cb_grad");
    let w = b.parameter(0, Shape::of::<f64>(&[3]), "w");
    let (loss, (), g) = b.value_and_grad(w, |w| {
        let s = w.sin();
        b.debug_callback(&[&w, &s], f);
        (s.sum(&[0], false), ())
    });
    let exe = client
        .compile(b.build_tuple(&[&loss, &g]).unwrap())
        .unwrap();
    let w0 = [0.1f64, 0.7, -1.3];
    let out = exe
        .execute(&[&client.buffer_from_host(&w0, &[3]).unwrap()])
        .unwrap();
    let grad = out[1].to_vec::<f64>().unwrap();
    for (gi, wi) in grad.iter().zip(&w0) {
        assert!((gi - wi.cos()).abs() < 1e-12, "grad {grad:?}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "called once, in the forward pass");
    assert_eq!(seen[0][0].to_vec::<f64>().unwrap(), w0.to_vec());
    let s = seen[0][1].to_vec::<f64>().unwrap();
    for (si, wi) in s.iter().zip(&w0) {
        assert!((si - wi.sin()).abs() < 1e-12);
    }
}

/// JAX calls a debug callback inside a differentiated `fori_loop` once per forward
/// step, and so does this: the gradient's storing loop (which replaces the
/// original loop) runs the callback, the original loop is not kept for its effect
/// once the storing loop serves its results, and the backward pass's copies of the
/// body leave callbacks out (`Graph::in_backward`).
#[test]
fn under_grad_through_a_fori_loop_the_callback_sees_each_forward_step() {
    let client = Client::cpu().unwrap();
    let (seen, f) = collector();
    let b = Builder::new("debug_cb_grad_loop");
    let w = b.parameter(0, Shape::of::<f64>(&[]), "w");
    let (loss, (), g) = b.value_and_grad(w, |w| {
        let x = b.fori_loop(0, 3, w, |_, x| {
            b.debug_callback(&[&x], f);
            (&x * 1.5).sin()
        });
        (x, ())
    });
    let exe = client
        .compile(b.build_tuple(&[&loss, &g]).unwrap())
        .unwrap();
    let out = exe.execute(&[&client.scalar(0.4f64).unwrap()]).unwrap();
    // Plain Rust: the steps, and the chain rule through them.
    let (mut x, mut d) = (0.4f64, 1.0f64);
    let mut steps = Vec::new();
    for _ in 0..3 {
        steps.push(x);
        d *= 1.5 * (1.5 * x).cos();
        x = (1.5 * x).sin();
    }
    assert!((out[0].to_vec::<f64>().unwrap()[0] - x).abs() < 1e-12);
    assert!((out[1].to_vec::<f64>().unwrap()[0] - d).abs() < 1e-12);
    let seen: Vec<f64> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|c| c[0].to_vec::<f64>().unwrap()[0])
        .collect();
    assert_eq!(
        seen.len(),
        3,
        "once per forward step, none in the backward pass: {seen:?}"
    );
    for (a, w) in seen.iter().zip(&steps) {
        assert!((a - w).abs() < 1e-12, "{seen:?} vs {steps:?}");
    }
}

#[test]
fn under_vmap_the_callback_is_called_once_per_example() {
    use xlaclient::Vmap;
    let client = Client::cpu().unwrap();
    let (seen, f) = collector();
    let b = Builder::new("debug_cb_vmap");
    let xs = b.parameter(0, Shape::of::<f32>(&[3, 2]), "xs");
    let k = b.parameter(1, Shape::of::<f32>(&[]), "k");
    let ys = b.vmap(
        &Vmap::new().in_axes([Some(0), None]),
        (xs, k),
        |b, (x, k)| {
            b.debug_callback(&[&x, &k], f);
            &x * &k
        },
    );
    let exe = client.compile(b.build(&ys).unwrap()).unwrap();
    let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let out = exe
        .execute(&[
            &client.buffer_from_host(&data, &[3, 2]).unwrap(),
            &client.scalar(0.5f32).unwrap(),
        ])
        .unwrap();
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        data.iter().map(|v| v * 0.5).collect::<Vec<_>>()
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "one call per example");
    for (e, call) in seen.iter().enumerate() {
        assert_eq!(call[0].dims, vec![2]);
        assert_eq!(
            call[0].to_vec::<f32>().unwrap(),
            data[2 * e..2 * e + 2].to_vec()
        );
        assert_eq!(call[1].to_vec::<f32>().unwrap(), vec![0.5]);
    }
}

#[test]
fn a_bad_debug_print_format_is_a_build_error_at_the_users_line() {
    let b = Builder::new("debug_print_bad");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    b.debug_print("x={} y={}", &[&x]);
    let err = b.build(&x).unwrap_err().to_string();
    assert!(err.contains("debug_print"), "{err}");
    assert!(
        err.contains("placeholder 1 has no value (1 given)"),
        "{err}"
    );
    assert!(err.contains("host_callbacks.rs"), "{err}");
}

#[test]
fn a_panicking_callback_fails_the_execution_with_an_error() {
    let client = Client::cpu().unwrap();
    let b = Builder::new("debug_cb_panic");
    let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
    b.debug_callback(&[&x], |_| panic!("the user's callback failed"));
    let exe = client.compile(b.build(&(&x * 3.0)).unwrap()).unwrap();
    let err = exe
        .execute(&[&client.scalar(1.0f32).unwrap()])
        .and_then(|o| o[0].to_vec::<f32>())
        .unwrap_err()
        .to_string();
    assert!(err.contains("panicked"), "{err}");
}

/// `debug_print` writes to standard output: run in a child process whose output is
/// read back.
#[test]
fn debug_print_prints_each_iteration() {
    const CHILD: &str = "XLACLIENT_DEBUG_PRINT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let client = Client::cpu().unwrap();
        let b = Builder::new("debug_print");
        let x0 = b.parameter(0, Shape::of::<i32>(&[2, 2]), "x0");
        let out = b.fori_loop(0, 2, x0, |i, x| {
            b.debug_print("step {}: x={} {{literal}} {0}", &[i, &x]);
            &x * 3
        });
        let exe = client.compile(b.build(&out).unwrap()).unwrap();
        let x = client.buffer_from_host(&[1i32, -2, 3, 4], &[2, 2]).unwrap();
        exe.execute(&[&x]).unwrap()[0].to_vec::<i32>().unwrap();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "debug_print_prints_each_iteration",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("step ")).collect();
    assert_eq!(
        lines,
        vec![
            "step 0: x=[[1 -2] [3 4]] {literal} 0",
            "step 1: x=[[3 -6] [9 12]] {literal} 1"
        ],
        "{stdout}"
    );
}
