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

use xlaclient::pjrt::host_callback::{HOST_CALLBACK_TARGET, HostValue, register_host_callback};
use xlaclient::ops::misc::CustomCallAttrs;
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

fn collecting() -> (i64, Arc<Mutex<Vec<Vec<HostValue>>>>) {
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
    let exe = client.compile(&b.build(&out).unwrap()).unwrap();
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
