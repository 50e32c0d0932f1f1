//! Every bad input is an error, never a crash (issue #6): each class of bad input
//! through the public API gives a typed [`Error`] a user can act on. Where a crash
//! was possible (the plugin aborting, a segfault, SIGBUS in the loader), the case
//! runs in a child process — this test binary re-run with `--exact <test>` — so
//! that a crash fails that test and is reported with its signal, instead of
//! killing the suite.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use prost::Message;
use xlaclient::ClientExt;
use xlaclient::RuntimeError;
use xlaclient::pjrt::NamedValue;
use xlaclient::{Builder, Client, ClientOptions, CompileOptions, Error, Plugin, Shape};

/// A private temporary directory, removed when dropped.
fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("xlaclient-bad-inputs-")
        .tempdir()
        .unwrap()
}

fn plugin_path() -> PathBuf {
    client().plugin().path().to_path_buf()
}

fn f32_add_one() -> xlaclient::LoadedExecutable {
    let b = Builder::new("add_one");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    client().compile(b.build(&(&x + 1.0)).unwrap()).unwrap()
}

// ---- 1. objects of another client ---------------------------------------------

#[test]
fn objects_from_another_client_are_refused_and_copies_keep_their_client() {
    in_child(
        "objects_from_another_client_are_refused_and_copies_keep_their_client",
        || {
            let a = upload(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
            let exe = f32_add_one();
            let other =
                Client::new(client().plugin(), &ClientOptions::new().cpu_device_count(2)).unwrap();
            // A copy to another client's device is refused.
            let e = a
                .copy_to_device(&other.addressable_devices()[1])
                .unwrap_err();
            assert!(matches!(e, RuntimeError::ForeignDevice), "{e:?}");
            // A copy within the other client belongs to it and keeps it alive
            // after every other handle of that client is dropped.
            let theirs = other.buffer_from_host(&[5.0f32; 4], &[4]).unwrap();
            let copy = theirs
                .copy_to_device(&other.addressable_devices()[1])
                .unwrap();
            // Its buffers are refused by this client's executable, on any device.
            let e = exe.execute(&[&copy]).unwrap_err();
            assert!(
                matches!(e, RuntimeError::ForeignBuffer { argument: 0 }),
                "{e:?}"
            );
            drop(theirs);
            drop(other);
            assert_eq!(copy.to_vec::<f32>().unwrap(), vec![5.0; 4]);
            assert_eq!(copy.device().unwrap().id().unwrap(), 1);
            let e = exe.execute(&[&copy]).unwrap_err();
            assert!(
                matches!(e, RuntimeError::ForeignBuffer { argument: 0 }),
                "{e:?}"
            );
            drop(copy);
            // This client is untouched.
            let out = exe.execute(&[&a]).unwrap();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
        },
    );
}

// ---- 2. empty results -----------------------------------------------------------

#[test]
fn an_empty_tuple_result_compiles_and_runs() {
    in_child("an_empty_tuple_result_compiles_and_runs", || {
        let b = Builder::new("nothing");
        let _x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
        let m = b.build_tuple(&[]).unwrap();
        let exe = client().compile(&m).unwrap();
        assert_eq!(exe.num_outputs(), 0);
        let a = upload(&[1.0f32; 4], &[4]);
        assert!(exe.execute(&[&a]).unwrap().is_empty());
        assert!(exe.execute_sync(&[&a]).unwrap().is_empty());
    });
}

// ---- 6. compile options ---------------------------------------------------------

#[test]
fn compile_options_the_plugin_would_abort_on_are_errors() {
    in_child(
        "compile_options_the_plugin_would_abort_on_are_errors",
        || {
            let b = Builder::new("m");
            let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
            let m = b.build(&(&x + 1.0)).unwrap();
            let mut missing = CompileOptions::new();
            missing.proto_mut().executable_build_options = None;
            let mut far_device = CompileOptions::new();
            far_device
                .proto_mut()
                .executable_build_options
                .as_mut()
                .unwrap()
                .device_ordinal = 7;
            let cases = [
                ("num_replicas", CompileOptions::new().num_replicas(0)),
                ("num_replicas", CompileOptions::new().num_replicas(-3)),
                ("num_partitions", CompileOptions::new().num_partitions(0)),
                ("num_partitions", CompileOptions::new().num_partitions(-1)),
                ("num_replicas", CompileOptions::new().num_replicas(1000)),
                (
                    "num_replicas",
                    CompileOptions::new().num_replicas(2).num_partitions(2),
                ),
                ("executable_build_options", missing),
                ("device_ordinal", far_device),
                (
                    "device_assignment",
                    CompileOptions::new()
                        .num_replicas(2)
                        .device_assignment(&[vec![0]]),
                ),
                (
                    "device_assignment",
                    CompileOptions::new().device_assignment(&[vec![99]]),
                ),
                (
                    "device_assignment",
                    CompileOptions::new()
                        .num_replicas(2)
                        .device_assignment(&[vec![0], vec![0]]),
                ),
            ];
            for (option, opts) in cases {
                let e = client().compile_with(&m, &opts).unwrap_err();
                match &e {
                    RuntimeError::InvalidOption { option: o, .. } => {
                        assert_eq!(o, option, "{e}")
                    }
                    other => panic!("{option}: expected InvalidOption, got {other:?}"),
                }
                let e = client()
                    .compile_hlo_bytes(&m.to_bytes(), &opts)
                    .unwrap_err();
                assert!(
                    matches!(e, Error::Runtime(RuntimeError::InvalidOption { .. })),
                    "{e:?}"
                );
            }
            // The same module with good options compiles.
            let ok = CompileOptions::new()
                .num_replicas(2)
                .device_assignment(&[vec![1], vec![0]]);
            let exe = client().compile_with(&m, &ok).unwrap();
            assert_eq!(exe.addressable_devices().len(), 2);
        },
    );
}

// ---- 7. client options ----------------------------------------------------------

#[test]
fn client_options_the_plugin_would_abort_on_are_errors() {
    in_child(
        "client_options_the_plugin_would_abort_on_are_errors",
        || {
            let p = client().plugin();
            for (option, opts) in [
                (
                    "cpu_device_count",
                    ClientOptions::new().cpu_device_count(-1),
                ),
                ("cpu_device_count", ClientOptions::new().cpu_device_count(0)),
                (
                    "cpu_device_count",
                    ClientOptions::new().cpu_device_count(1_000_000),
                ),
                (
                    "cpu_device_count",
                    ClientOptions::new().set("cpu_device_count", NamedValue::String("2".into())),
                ),
                (
                    "cpu_device_count",
                    ClientOptions::new().set("cpu_device_count", NamedValue::Float(2.0)),
                ),
                (
                    "asynchronous",
                    ClientOptions::new().set("asynchronous", NamedValue::Int64(1)),
                ),
                (
                    "max_inflight_computations",
                    ClientOptions::new().set("max_inflight_computations", NamedValue::Int64(-5)),
                ),
                ("", ClientOptions::new().set("", NamedValue::Int64(1))),
            ] {
                let e = Client::new(p, &opts).unwrap_err();
                match &e {
                    RuntimeError::InvalidOption { option: o, .. } => assert_eq!(o, option, "{e}"),
                    other => panic!("{option}: expected InvalidOption, got {other:?}"),
                }
            }
            // An option the plugin does not know is the plugin's error, not a crash.
            let e = Client::new(
                p,
                &ClientOptions::new().set("no_such_option", NamedValue::Int64(1)),
            );
            if let Err(e) = e {
                assert!(matches!(e, RuntimeError::Pjrt { .. }), "{e:?}");
            }
            // Good values work.
            let c = Client::new(p, &ClientOptions::new().cpu_device_count(3)).unwrap();
            assert_eq!(c.addressable_devices().len(), 3);
        },
    );
}

// ---- 8. plugin files ------------------------------------------------------------

fn expect_plugin_load(path: &Path, what: &str, needle: &str) {
    match Plugin::load(path) {
        Err(RuntimeError::PluginLoad { reason, .. }) => {
            assert!(reason.contains(needle), "{what}: {reason}")
        }
        Err(other) => panic!("{what}: expected PluginLoad, got {other:?}"),
        Ok(_) => panic!("{what}: loaded"),
    }
}

#[test]
fn truncated_plugin_files_are_errors_not_sigbus() {
    in_child("truncated_plugin_files_are_errors_not_sigbus", || {
        let data = std::fs::read(plugin_path()).unwrap();
        let dir = temp_dir();
        for cut in [4096, 4 << 20, data.len() / 2] {
            let p = dir.path().join(format!("cut-{cut}.so"));
            std::fs::write(&p, &data[..cut]).unwrap();
            expect_plugin_load(&p, &format!("cut to {cut} bytes"), "truncated");
            std::fs::remove_file(&p).unwrap();
        }
    });
}

#[test]
fn bad_plugin_files_are_errors() {
    in_child("bad_plugin_files_are_errors", || {
        let dir = temp_dir();
        let e = Plugin::load(dir.path().join("missing.so")).unwrap_err();
        assert!(matches!(e, RuntimeError::PluginLoad { .. }), "{e:?}");
        let empty = dir.path().join("empty.so");
        std::fs::write(&empty, b"").unwrap();
        expect_plugin_load(&empty, "empty file", "not an ELF");
        let text = dir.path().join("text.so");
        std::fs::write(&text, b"#!/bin/sh\necho not a plugin\n").unwrap();
        expect_plugin_load(&text, "text file", "not an ELF");
        expect_plugin_load(dir.path(), "a directory", "");
        // The head of a real plugin with another architecture in its header.
        let mut head = std::fs::read(plugin_path()).unwrap();
        head.truncate(1 << 20);
        let other_machine: u16 = if cfg!(target_arch = "aarch64") {
            62
        } else {
            183
        };
        head[18..20].copy_from_slice(&other_machine.to_le_bytes());
        let foreign = dir.path().join("foreign.so");
        std::fs::write(&foreign, &head).unwrap();
        expect_plugin_load(&foreign, "another architecture", "architecture");
        // A 32-bit ELF.
        head[4] = 1;
        std::fs::write(&foreign, &head).unwrap();
        expect_plugin_load(&foreign, "32-bit", "64-bit");
        // A shared library without GetPjrtApi (libc).
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .unwrap()
            .to_string();
        let e = Plugin::load(&libc).unwrap_err();
        assert!(matches!(e, RuntimeError::NotAPlugin { .. }), "{e:?}");
    });
}

// ---- 9. MLIR text ---------------------------------------------------------------

const STABLEHLO: &str = r#"module @m {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"#;

#[test]
fn every_truncation_of_a_stablehlo_module_is_an_error() {
    in_child("every_truncation_of_a_stablehlo_module_is_an_error", || {
        let opts = CompileOptions::new();
        let text = STABLEHLO.as_bytes();
        let last = STABLEHLO.rfind('}').unwrap();
        for cut in 0..=last {
            match client().compile_mlir(&text[..cut], &opts) {
                Err(RuntimeError::Pjrt { .. }) => {}
                Err(other) => panic!("cut {cut}: expected RuntimeError::Pjrt, got {other:?}"),
                Ok(_) => panic!("cut {cut}: compiled {:?}", &STABLEHLO[..cut]),
            }
        }
        let exe = client().compile_mlir(text, &opts).unwrap();
        let x = upload(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
        let out = exe.execute(&[&x]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    });
}

// ---- 10. deep graphs ------------------------------------------------------------

#[test]
fn a_deep_chain_compiles_without_overflowing_the_callers_stack() {
    in_child(
        "a_deep_chain_compiles_without_overflowing_the_callers_stack",
        || {
            const N: usize = 100_000;
            let b = Builder::new("chain");
            let x = b.parameter(0, Shape::of::<f32>(&[]), "x");
            let mut y = x.clone();
            for _ in 0..N {
                y = &y + &x;
            }
            let m = b.build(&y).unwrap();
            let exe = client().compile(&m).unwrap();
            let out = exe.execute(&[&client().scalar(1.0f32).unwrap()]).unwrap();
            assert_eq!(out[0].to_scalar::<f32>().unwrap(), (N + 1) as f32);
        },
    );
}

// ---- 11. execute arguments ------------------------------------------------------

#[test]
fn arguments_of_the_wrong_type_or_shape_are_errors() {
    let exe = f32_add_one();
    assert_eq!(
        exe.parameter_shapes().unwrap(),
        &[Shape::of::<f32>(&[4])][..]
    );
    let good = upload(&[1.0f32; 4], &[4]);
    for (what, bad, given) in [
        ("s32[4]", upload(&[1i32; 4], &[4]), Shape::of::<i32>(&[4])),
        ("u8[16]", upload(&[1u8; 16], &[16]), Shape::of::<u8>(&[16])),
        (
            "f32[2,2]",
            upload(&[1.0f32; 4], &[2, 2]),
            Shape::of::<f32>(&[2, 2]),
        ),
        ("f32[2]", upload(&[1.0f32; 2], &[2]), Shape::of::<f32>(&[2])),
    ] {
        let e = exe.execute(&[&bad]).unwrap_err();
        match &e {
            RuntimeError::ArgumentShape {
                device: 0,
                argument: 0,
                expected,
                given: g,
            } => {
                assert_eq!(**expected, Shape::of::<f32>(&[4]), "{what}");
                assert_eq!(**g, given, "{what}");
            }
            other => panic!("{what}: expected ArgumentShape, got {other:?}"),
        }
        assert!(e.to_string().contains(what), "{e}");
        assert!(exe.execute_async(&[&bad]).is_err());
        assert!(exe.execute_with([(&bad).into()]).is_err());
    }
    // An output passed back in is checked the same way (its shape is known from
    // the executable).
    let b = Builder::new("to_s32");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let conv = client()
        .compile(b.build(&x.convert(xlaclient::ElementType::S32)).unwrap())
        .unwrap();
    let ints = conv.execute(&[&good]).unwrap();
    let e = exe.execute(&[&ints[0]]).unwrap_err();
    assert!(matches!(e, RuntimeError::ArgumentShape { .. }), "{e:?}");
    // Too few or too many.
    let e = exe.execute(&[]).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::ParameterCount {
                device: 0,
                given: 0,
                expected: 1
            }
        ),
        "{e:?}"
    );
    let e = exe.execute(&[&good, &good]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::ParameterCount { given: 2, .. }),
        "{e:?}"
    );
    // The right argument still works.
    let out = exe.execute(&[&good]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0; 4]);
}

#[test]
fn multi_device_execution_checks_every_devices_arguments() {
    let b = Builder::new("rep");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let m = b.build(&(&x * 2.0)).unwrap();
    let exe = client()
        .compile_with(&m, &CompileOptions::new().num_replicas(2))
        .unwrap();
    let devs = client().addressable_devices();
    let a0 = devs[0].buffer_from_host(&[1.0f32; 4], &[4]).unwrap();
    let a1 = devs[1].buffer_from_host(&[2.0f32; 4], &[4]).unwrap();
    let bad1 = devs[1].buffer_from_host(&[2i32; 4], &[4]).unwrap();
    let e = exe
        .execute_replicated(&[vec![&a0], vec![&bad1]])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::ArgumentShape {
                device: 1,
                argument: 0,
                ..
            }
        ),
        "{e:?}"
    );
    let e = exe
        .execute_replicated(&[vec![&a0], vec![&a1, &a1]])
        .unwrap_err();
    assert!(
        matches!(e, RuntimeError::ArgumentCount { device: 1, .. }),
        "{e:?}"
    );
    let e = exe.execute_replicated(&[vec![], vec![]]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::ParameterCount { device: 0, .. }),
        "{e:?}"
    );
    let other = Client::new(client().plugin(), &ClientOptions::new().cpu_device_count(2)).unwrap();
    let foreign = other.addressable_devices()[1]
        .buffer_from_host(&[2.0f32; 4], &[4])
        .unwrap();
    let e = exe
        .execute_replicated(&[vec![&a0], vec![&foreign]])
        .unwrap_err();
    assert!(
        matches!(e, RuntimeError::ForeignBuffer { argument: 0 }),
        "{e:?}"
    );
    let out = exe.execute_replicated(&[vec![&a0], vec![&a1]]).unwrap();
    assert_eq!(out[0][0].to_vec::<f32>().unwrap(), vec![2.0; 4]);
    assert_eq!(out[1][0].to_vec::<f32>().unwrap(), vec![4.0; 4]);
}

// ---- module bytes, uploads and downloads ----------------------------------------

#[test]
fn garbage_and_truncated_module_bytes_are_errors() {
    in_child("garbage_and_truncated_module_bytes_are_errors", || {
        let b = Builder::new("m");
        let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
        let y = b.parameter(1, Shape::of::<f32>(&[4]), "y");
        let m = b.build(&(&(&x * &y) + 1.0)).unwrap();
        let bytes = m.to_bytes();
        let opts = CompileOptions::new();
        for cut in 0..bytes.len() {
            match client().compile_hlo_bytes(&bytes[..cut], &opts) {
                Err(Error::InvalidModule { .. } | Error::Runtime(RuntimeError::Pjrt { .. })) => {}
                Err(other) => panic!("cut {cut}: unexpected {other:?}"),
                Ok(_) => panic!("cut {cut} of {} compiled", bytes.len()),
            }
        }
        let mut rng = Rng(6);
        for _ in 0..200 {
            let n = (rng.next_u64() % 300) as usize;
            let garbage: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            match client().compile_hlo_bytes(&garbage, &opts) {
                Err(Error::InvalidModule { .. } | Error::Runtime(RuntimeError::Pjrt { .. })) => {}
                Err(other) => panic!("garbage: unexpected {other:?}"),
                Ok(_) => panic!("garbage compiled"),
            }
        }
        assert!(client().compile_hlo_bytes(&bytes, &opts).is_ok());
        assert!(xlaclient::proto::HloModuleProto::decode(&bytes[..]).is_ok());
    });
}

#[test]
fn wrong_uploads_and_downloads_are_errors() {
    let c = client();
    for (data, dims) in [
        (&[1.0f32, 2.0, 3.0][..], &[2i64, 2][..]),
        (&[1.0f32][..], &[-1][..]),
        (&[1.0f32][..], &[i64::MAX, 2][..]),
        (&[][..], &[0, -4][..]),
    ] {
        let e = c.buffer_from_host(data, dims).unwrap_err();
        assert!(
            matches!(
                e,
                RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
            ),
            "{dims:?}: {e:?}"
        );
        let e = c.addressable_devices()[1]
            .buffer_from_host(data, dims)
            .unwrap_err();
        assert!(
            matches!(
                e,
                RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
            ),
            "{dims:?}: {e:?}"
        );
    }
    let b = upload(&[1i32, 2, 3], &[3]);
    let e = b.to_vec::<f32>().unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e:?}"
    );
    let e = b.to_scalar::<i32>().unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e:?}"
    );
    let mut long = [0i32; 4];
    let e = b.copy_to_host(&mut long).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e:?}"
    );
    // Empty arrays are fine.
    let empty = c.buffer_from_host::<f32>(&[], &[0, 3]).unwrap();
    assert!(empty.to_vec::<f32>().unwrap().is_empty());
}
