//! The PJRT runtime on the real plugin: plugin facts, client and devices, buffers of
//! every native type, execution (chained, synchronous, serialized), thread safety.

mod common;

use common::*;
use xlaclient::ClientExt;
use xlaclient::RuntimeError;
use xlaclient::{
    Buffer, Builder, Client, Computation, ElementType, LoadedExecutable, NativeType, Plugin, Shape,
};

#[test]
fn plugin_reports_its_api_and_attributes() {
    let p = client().plugin();
    let (major, minor) = p.api_version();
    assert_eq!(major, 0);
    assert!(minor >= 60, "unexpectedly old plugin: 0.{minor}");
    let attrs = p.attributes().unwrap();
    assert!(
        attrs.iter().any(|(k, _)| k == "stablehlo_current_version"),
        "attributes: {attrs:?}"
    );
    // Loading the same file again gives the same plugin (initialised once).
    let again = Plugin::load(p.path()).unwrap();
    assert_eq!(again.path(), p.path());
    assert_eq!(again.api_version(), p.api_version());
}

#[test]
fn the_plugin_registry_knows_a_library_by_its_table_not_its_path() {
    // A hard link is another path to the same file: the loader maps the library
    // once, and the registry (keyed by the PJRT_Api table's address) returns the
    // plugin already initialised, with the path it was first loaded from.
    let p = client().plugin();
    let link = p
        .path()
        .with_file_name(format!(".xlaclient-test-link-{}.so", std::process::id()));
    if std::fs::hard_link(p.path(), &link).is_err() {
        eprintln!("cannot hard-link next to the plugin; skipped");
        return;
    }
    let again = Plugin::load(&link);
    std::fs::remove_file(&link).unwrap();
    let again = again.unwrap();
    assert_eq!(again.path(), p.path());
    assert_eq!(again.api_version(), p.api_version());
}

#[test]
fn client_and_devices() {
    let c = client();
    assert_eq!(c.platform_name().unwrap(), "cpu");
    assert!(!c.platform_version().unwrap().is_empty());
    assert_eq!(c.process_index().unwrap(), 0);
    let devs = c.addressable_devices();
    assert_eq!(devs.len(), 2, "the harness asks for cpu_device_count=2");
    let ids: Vec<i32> = devs.iter().map(|d| d.id().unwrap()).collect();
    assert_ne!(ids[0], ids[1]);
    for d in &devs {
        assert!(d.is_addressable().unwrap());
        assert!(!d.kind().unwrap().is_empty());
        assert!(!d.debug_string().unwrap().is_empty());
    }
    assert_eq!(c.devices().len(), 2);
    assert_eq!(c.default_device().unwrap(), devs[0]);
}

fn round_trip<T: NativeType + PartialEq>(data: &[T], dims: &[i64]) {
    let b = upload(data, dims);
    assert_eq!(b.element_type().unwrap(), T::TYPE);
    assert_eq!(b.dims().unwrap(), dims);
    assert_eq!(b.shape().unwrap(), Shape::of::<T>(dims));
    assert_eq!(b.to_vec::<T>().unwrap(), data);
    assert!(b.on_device_size_in_bytes().unwrap() >= std::mem::size_of_val(data));
}

#[test]
fn buffers_of_every_native_type_round_trip() {
    round_trip(&[true, false, true, true], &[2, 2]);
    round_trip(&[-128i8, 0, 127], &[3]);
    round_trip(&[-32768i16, 1, 32767], &[3]);
    round_trip(&[i32::MIN, -1, 0, i32::MAX], &[4]);
    round_trip(&[i64::MIN, 0, i64::MAX], &[3, 1]);
    round_trip(&[0u8, 200, 255], &[3]);
    round_trip(&[0u16, 65535], &[2]);
    round_trip(&[0u32, u32::MAX, 7], &[3]);
    round_trip(&[0u64, u64::MAX], &[2]);
    round_trip(&[1.5f32, -0.0, f32::MAX, f32::MIN_POSITIVE], &[2, 2]);
    round_trip(&[std::f64::consts::PI, -1e300], &[2]);
    round_trip::<f32>(&[], &[0, 3]);
    let s = client().scalar(2.5f64).unwrap();
    assert_eq!(s.dims().unwrap(), Vec::<i64>::new());
    assert_eq!(s.to_scalar::<f64>().unwrap(), 2.5);
}

#[test]
fn buffers_move_between_devices() {
    let devs = client().addressable_devices();
    let b = devs[1].buffer_from_host(&[1i32, 2, 3], &[3]).unwrap();
    assert_eq!(b.device().unwrap(), devs[1]);
    let c = b.copy_to_device(&devs[0]).unwrap();
    assert_eq!(c.device().unwrap(), devs[0]);
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
}

fn affine() -> Computation {
    let b = Builder::new("affine");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    b.build(&(&x * 2.0 + 1.0)).unwrap()
}

#[test]
fn outputs_feed_back_as_inputs_without_the_host() {
    let exe = client().compile(affine()).unwrap();
    assert_eq!(exe.num_outputs(), 1);
    let mut x: Buffer = upload(&[0.0f32, 1.0, -1.0], &[3]);
    let mut want = [0.0f32, 1.0, -1.0];
    for _ in 0..5 {
        x = exe.execute(&[&x]).unwrap().pop().unwrap();
        for w in &mut want {
            *w = *w * 2.0 + 1.0;
        }
    }
    assert_eq!(x.to_vec::<f32>().unwrap(), want);
    x.ready().unwrap();
}

#[test]
fn execute_sync_and_tuple_outputs() {
    let b = Builder::new("two");
    let x = b.parameter(0, Shape::of::<i32>(&[2]), "x");
    let m = b
        .build_tuple(&[&(&x + 1), &x.convert(ElementType::F64)])
        .unwrap();
    let exe = client().compile(&m).unwrap();
    assert_eq!(exe.num_outputs(), 2);
    let out = exe.execute_sync(&[&upload(&[5i32, -7], &[2])]).unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![6, -6]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![5.0, -7.0]);
}

#[test]
fn serialized_hlo_bytes_compile_to_the_same_program() {
    let m = affine();
    let exe = client()
        .compile_hlo_bytes(&m.to_bytes(), &Default::default())
        .unwrap();
    let out = exe.execute(&[&upload(&[1.0f32, 2.0, 3.0], &[3])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
}

#[test]
fn executables_serialize_and_reload() {
    let exe = client().compile(affine()).unwrap();
    match exe.serialize() {
        Ok(bytes) => {
            assert!(!bytes.is_empty());
            let again = client().deserialize_executable(&bytes).unwrap();
            let out = again
                .execute(&[&upload(&[1.0f32, 0.0, -2.0], &[3])])
                .unwrap();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 1.0, -3.0]);
        }
        // A plugin may not implement serialization; then it must say so cleanly.
        Err(xlaclient::RuntimeError::Pjrt { code, .. }) => {
            assert_eq!(code, xlaclient::PjrtErrorCode::Unimplemented)
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Plugin>();
    assert_send_sync::<Client>();
    assert_send_sync::<Buffer>();
    assert_send_sync::<LoadedExecutable>();
    assert_send_sync::<xlaclient::Device>();
    fn assert_send<T: Send>() {}
    assert_send::<xlaclient::pjrt::Event>();
    assert_send::<xlaclient::pjrt::Execution>();
}

#[test]
fn one_client_and_executable_used_from_many_threads() {
    let exe = std::sync::Arc::new(client().compile(affine()).unwrap());
    let shared_input = std::sync::Arc::new(upload(&[1.0f32, 2.0, 3.0], &[3]));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let exe = exe.clone();
            let shared = shared_input.clone();
            std::thread::spawn(move || {
                let c: &Client = client();
                for i in 0..25 {
                    let v = (t * 100 + i) as f32;
                    let own = c.buffer_from_host(&[v, -v, 0.5], &[3]).unwrap();
                    let out = exe.execute(&[&own]).unwrap();
                    assert_eq!(
                        out[0].to_vec::<f32>().unwrap(),
                        vec![2.0 * v + 1.0, -2.0 * v + 1.0, 2.0]
                    );
                    let out = exe.execute(&[&shared]).unwrap();
                    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn buffers_outlive_their_client_handle() {
    // A buffer keeps its client (and the plugin) alive through its own Arc.
    let plugin = client().plugin().clone();
    let buf = {
        let c = Client::new(&plugin, &Default::default()).unwrap();
        c.buffer_from_host(&[4u8, 5], &[2]).unwrap()
    };
    assert_eq!(buf.to_vec::<u8>().unwrap(), vec![4, 5]);
}

#[test]
fn a_function_the_plugin_lacks_is_a_clean_error() {
    // PJRT_Executable_GetCompileOptions is slot 124 of the function table; the 0.81
    // plugin's table ends at slot 117, the 0.115 plugin has it.
    let opts = xlaclient::CompileOptions::new().num_replicas(1);
    let exe = client().compile_with(affine(), &opts).unwrap();
    let (_, minor) = client().plugin().api_version();
    match exe.compile_options() {
        Ok(o) => {
            assert!(minor > 81, "API 0.{minor} should not have this function");
            let b = o.proto().executable_build_options.as_ref().unwrap();
            assert_eq!((b.num_replicas, b.num_partitions), (1, 1));
        }
        Err(e) => {
            assert!(
                matches!(
                    e,
                    xlaclient::RuntimeError::Unsupported {
                        function: "PJRT_Executable_GetCompileOptions",
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(
                e.to_string()
                    .contains("plugin too old for PJRT_Executable_GetCompileOptions"),
                "{e}"
            );
            assert!(minor <= 81, "API 0.{minor} should have this function");
        }
    }
}

/// A minimal executor: polls `fut` on this thread, parking between polls until its
/// waker is woken. Counts the wake-ups.
fn block_on<F: std::future::Future>(fut: F) -> (F::Output, usize) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    struct ThreadWaker {
        thread: std::thread::Thread,
        wakes: AtomicUsize,
    }
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
            self.thread.unpark();
        }
    }
    let tw = Arc::new(ThreadWaker {
        thread: std::thread::current(),
        wakes: AtomicUsize::new(0),
    });
    let waker = Waker::from(tw.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return (v, tw.wakes.load(Ordering::SeqCst));
        }
        std::thread::park();
    }
}

/// A program that takes a while on the CPU: `k` chained 256×256 matmuls.
fn slow(k: usize) -> Computation {
    let b = Builder::new("slow");
    let x = b.parameter(0, Shape::of::<f32>(&[256, 256]), "x");
    let mut y = x.clone();
    for _ in 0..k {
        y = (y.matmul(&x) * (1.0 / 256.0)).tanh();
    }
    b.build(&y).unwrap()
}

#[test]
fn execute_async_is_a_future_woken_by_the_plugin() {
    // An asynchronous client: the default one runs the program inside
    // `execute_async`, which then returns a finished execution.
    let c = xlaclient::Client::new(
        client().plugin(),
        &xlaclient::ClientOptions::new().asynchronous(true),
    )
    .unwrap();
    let upload = |v: &[f32], dims: &[i64]| c.buffer_from_host(v, dims).unwrap();
    let exe = c.compile(slow(40)).unwrap();
    let x = upload(&vec![0.5f32; 256 * 256], &[256, 256]);
    let want = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();

    // Launch, then poll: the first poll finds the work pending (40 matmuls take
    // milliseconds), registers the waker, and the OnReady callback wakes it.
    let pending = exe.execute_async(&[&x]).unwrap();
    let (out, wakes) = block_on(pending);
    let out = out.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
    assert_eq!(wakes, 1, "the callback wakes the waker exactly once");

    // Several in flight at once, host work in between, awaited in reverse order.
    let inputs: Vec<Buffer> = (0..3)
        .map(|i| upload(&vec![0.1 * i as f32; 256 * 256], &[256, 256]))
        .collect();
    let launched: Vec<_> = inputs
        .iter()
        .map(|b| exe.execute_async(&[b]).unwrap())
        .collect();
    let host: f64 = (0..200_000).map(|i| (i as f64).sqrt()).sum();
    assert!(host > 0.0);
    let mut results = Vec::new();
    for e in launched.into_iter().rev() {
        results.push(block_on(e).0.unwrap());
    }
    for (i, r) in results.iter().rev().enumerate() {
        let v = r[0].to_vec::<f32>().unwrap();
        let single = exe.execute_sync(&[&inputs[i]]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(v, single, "execution {i}");
    }
}

#[test]
fn an_async_batch_stepper_overlaps_host_and_device_work() {
    // Two "agents" written as straight-line async code, stepped by one executor:
    // each awaits its prediction while the other's host work runs.
    let exe = std::sync::Arc::new(client().compile(affine()).unwrap());
    let agent = |start: f32| {
        let exe = exe.clone();
        async move {
            let mut x = start;
            for _ in 0..5 {
                let obs = upload(&[x, x, x], &[3]);
                let out = exe.execute_async(&[&obs]).unwrap().await.unwrap();
                x = out[0].to_vec::<f32>().unwrap()[0] * 0.5;
            }
            x
        }
    };
    let both = async { (agent(1.0).await, agent(-2.0).await) };
    let ((a, b), _) = block_on(both);
    // x -> (2x + 1) / 2 = x + 0.5, five times.
    assert_eq!((a, b), (3.5, 0.5));
}

#[test]
fn every_wait_policy_gives_the_same_results() {
    use xlaclient::pjrt::WaitPolicy;
    let plugin = client().plugin().clone();
    for policy in [
        WaitPolicy::Auto,
        WaitPolicy::Park,
        WaitPolicy::Spin(std::time::Duration::from_micros(200)),
        WaitPolicy::Spin(std::time::Duration::ZERO),
    ] {
        let c = Client::new(
            &plugin,
            &xlaclient::ClientOptions::new()
                .cpu_device_count(1)
                .wait_policy(policy),
        )
        .unwrap();
        let exe = c.compile(slow(3)).unwrap();
        let x = c
            .buffer_from_host(&vec![0.25f32; 256 * 256], &[256, 256])
            .unwrap();
        let first = exe.execute_sync(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        // Several threads waiting at once (Auto then parks instead of polling).
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..5 {
                        let out = exe.execute(&[&x]).unwrap();
                        assert_eq!(out[0].to_vec::<f32>().unwrap(), first, "{policy:?}");
                    }
                });
            }
        });
    }
}

/// `x + 1` on f32[4] whose output aliases parameter 0 (`kind`: 1 may-alias, 2
/// must-alias), as a module compiled with donation in mind declares it.
fn aliased_increment(kind: i32) -> Computation {
    let b = Builder::new("inc");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let mut proto = b.build(&(&x + 1.0)).unwrap().proto().clone();
    use xlaclient::proto::hlo_input_output_alias_proto::AliasEntryProto;
    proto.input_output_alias = Some(xlaclient::proto::HloInputOutputAliasProto {
        entries: vec![AliasEntryProto {
            output_shape_index: vec![],
            parameter_number: 0,
            parameter_shape_index: vec![],
            kind,
        }],
    });
    Computation::from_proto(proto).unwrap()
}

#[test]
fn donated_inputs_are_taken_and_kept_inputs_stay() {
    use xlaclient::Arg;
    let exe = client().compile(aliased_increment(1)).unwrap();
    // The program may write its output into parameter 0's memory.
    let stats = exe.memory_stats().unwrap();
    assert_eq!(stats.alias_bytes, 16, "{stats:?}");

    // Donated: the buffer moves into the call (no other use of it can overlap).
    let x = upload(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    let out = exe.execute_with([Arg::Donate(x)]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);

    // Kept (explicitly, or by plain `execute`): listed as non-donatable, so the
    // same aliased program leaves the input valid (the output gets a copy).
    let y = upload(&[0.0f32; 4], &[4]);
    let out = exe.execute_with([Arg::Keep(&y)]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0; 4]);
    let out2 = exe.execute(&[&y]).unwrap();
    assert_eq!(out2[0].to_vec::<f32>().unwrap(), vec![1.0; 4]);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0; 4]);

    // A state stepped in place: each step donates the previous output, before it
    // is computed (the plugin orders the work).
    let mut state = upload(&[0.0f32; 4], &[4]);
    for _ in 0..10 {
        state = exe.execute_with([Arg::Donate(state)]).unwrap().remove(0);
    }
    assert_eq!(state.to_vec::<f32>().unwrap(), vec![10.0; 4]);

    // Asynchronously: the execution owns nothing of its inputs; the outputs come
    // with the completion event.
    let z = upload(&[5.0f32; 4], &[4]);
    let pending = exe.execute_async_with([Arg::Donate(z)]).unwrap();
    let out = pending.wait().unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![6.0; 4]);
    // Dropped before it is awaited: the work goes on, nothing is left dangling.
    let w = upload(&[7.0f32; 4], &[4]);
    drop(exe.execute_async_with([Arg::Donate(w)]).unwrap());
    // A buffer an execution in flight still reads, then donated to the next one.
    let v = upload(&[1.0f32; 4], &[4]);
    let first = exe.execute_async(&[&v]).unwrap();
    let second = exe.execute_with([Arg::Donate(v)]).unwrap();
    assert_eq!(
        first.wait().unwrap()[0].to_vec::<f32>().unwrap(),
        vec![2.0; 4]
    );
    assert_eq!(second[0].to_vec::<f32>().unwrap(), vec![2.0; 4]);
}

#[test]
fn donating_into_a_program_without_aliasing_gives_the_buffer_up() {
    use xlaclient::Arg;
    // No input_output_alias: nothing reuses the input; it is dropped after the
    // launch and the result is the same.
    let exe = client().compile(affine()).unwrap();
    assert_eq!(exe.memory_stats().unwrap().alias_bytes, 0);
    let x = upload(&[1.0f32, 2.0, 3.0], &[3]);
    let out = exe.execute_with([Arg::Donate(x)]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
}

#[test]
fn donation_misuse_is_an_error_not_a_crash() {
    use xlaclient::Arg;
    // Must-alias: the program needs the input's memory; keeping the input is
    // either refused or served by a copy, never a crash, and the input survives.
    let exe = client().compile(aliased_increment(2)).unwrap();
    let x = upload(&[1.0f32; 4], &[4]);
    match exe.execute_with([Arg::Keep(&x)]) {
        Ok(out) => assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0; 4]),
        Err(e) => eprintln!("must-alias with a kept input refused: {e}"),
    }
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0; 4]);
    // A donated argument of the wrong shape, or a missing one, is refused before
    // the plugin sees it.
    let wrong = upload(&[1.0f32; 3], &[3]);
    let e = exe.execute_with([Arg::Donate(wrong)]).unwrap_err();
    assert!(matches!(e, RuntimeError::ArgumentShape { .. }), "{e:?}");
    let e = exe.execute_with(Vec::<Arg<'_>>::new()).unwrap_err();
    assert!(matches!(e, RuntimeError::ParameterCount { .. }), "{e:?}");
    // Donating the same buffer twice, or donating one that another thread reads,
    // does not compile: `Arg::Donate` takes the buffer by value. (The 0.115 plugin
    // aborted the process on both when donation took a reference.)
}
