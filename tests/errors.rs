//! Bad input is an error, never a crash: plugin paths, module bytes, host data and
//! execution arguments.

mod common;

use std::path::PathBuf;

use common::*;
use prost::Message;
use xlaclient::ClientExt;
use xlaclient::RuntimeError;
use xlaclient::{Builder, CompileOptions, Error, Plugin, Shape};

#[test]
fn missing_plugin_file() {
    let e = Plugin::load("/nonexistent/dir/libpjrt_nothing.so").unwrap_err();
    assert!(matches!(e, RuntimeError::PluginLoad { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("/nonexistent/dir/libpjrt_nothing.so"),
        "{e}"
    );
}

#[test]
fn a_file_that_is_not_a_shared_library() {
    let dir = std::env::temp_dir().join(format!("xlaclient-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("not_a_plugin.so");
    std::fs::write(&path, b"this is a text file, not an ELF shared object\n").unwrap();
    let e = Plugin::load(&path).unwrap_err();
    assert!(matches!(e, RuntimeError::PluginLoad { .. }), "{e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A real shared library without `GetPjrtApi`: the C library this process uses.
fn libc_path() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(PathBuf::from)
        .expect("libc is mapped")
}

#[test]
fn a_shared_library_without_get_pjrt_api() {
    let e = Plugin::load(libc_path()).unwrap_err();
    match &e {
        RuntimeError::NotAPlugin { reason, .. } => {
            assert!(reason.contains("GetPjrtApi"), "{reason}")
        }
        other => panic!("expected NotAPlugin, got {other:?}"),
    }
}

#[test]
fn garbage_bytes_as_a_module() {
    let c = client();
    let opts = CompileOptions::new();
    for garbage in [
        &b"\xff\xff\xff\xff garbage"[..],
        &b"HloModule m\n ENTRY { }"[..],
        &[0x0a, 0xff, 0x01][..],
        &[][..],
    ] {
        let e = c.compile_hlo_bytes(garbage, &opts).unwrap_err();
        assert!(
            matches!(e, Error::InvalidModule { .. }),
            "{garbage:?}: {e:?}"
        );
    }
}

#[test]
fn well_formed_protos_with_broken_structure_are_rejected_before_xla() {
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let good = b.build(&(&x + &x)).unwrap().proto().clone();
    let c = client();
    type Mutation = Box<dyn Fn(&mut xlaclient::proto::HloModuleProto)>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "no layout",
            Box::new(|m| {
                m.computations[0].instructions[0]
                    .shape
                    .as_mut()
                    .unwrap()
                    .layout = None
            }),
        ),
        (
            "bad layout",
            Box::new(|m| {
                m.computations[0].instructions[0]
                    .shape
                    .as_mut()
                    .unwrap()
                    .layout
                    .as_mut()
                    .unwrap()
                    .minor_to_major = vec![3]
            }),
        ),
        (
            "dangling operand",
            Box::new(|m| m.computations[0].instructions[1].operand_ids[0] = 999),
        ),
        ("no entry", Box::new(|m| m.entry_computation_id = 12345)),
        (
            "no host program shape",
            Box::new(|m| m.host_program_shape = None),
        ),
        ("bad root", Box::new(|m| m.computations[0].root_id = 777)),
        (
            "parameter gap",
            Box::new(|m| m.computations[0].instructions[0].parameter_number = 3),
        ),
        (
            "duplicate id",
            Box::new(|m| {
                let id = m.computations[0].instructions[0].id;
                m.computations[0].instructions[1].id = id
            }),
        ),
    ];
    for (what, mutate) in cases {
        let mut m = good.clone();
        mutate(&mut m);
        let e = c
            .compile_hlo_bytes(&m.encode_to_vec(), &CompileOptions::new())
            .unwrap_err();
        assert!(matches!(e, Error::InvalidModule { .. }), "{what}: {e:?}");
        let e = xlaclient::Computation::from_proto(m)
            .and_then(|m| Ok(c.compile(m)?))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidModule { .. }), "{what}: {e:?}");
    }
}

#[test]
fn host_data_that_does_not_fit() {
    let c = client();
    let e = c
        .buffer_from_host(&[1.0f32, 2.0, 3.0], &[2, 2])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e:?}"
    );
    let e = c.buffer_from_host(&[1.0f32], &[-1]).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::HostLength { .. } | RuntimeError::HostType { .. }
        ),
        "{e:?}"
    );
    let b = upload(&[1i32, 2], &[2]);
    let e = b.to_vec::<f32>().unwrap_err();
    assert!(
        e.to_string().contains("s32") && e.to_string().contains("f32"),
        "{e}"
    );
    let mut small = [0i32; 1];
    assert!(b.copy_to_host(&mut small).is_err());
}

#[test]
fn wrong_arguments_to_execute_are_errors() {
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[4]), "y");
    let exe = client().compile(b.build(&(&x + &y)).unwrap()).unwrap();
    let a = upload(&[1.0f32; 4], &[4]);
    // Too few arguments.
    let e = exe.execute(&[&a]).unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::ParameterCount {
                given: 1,
                expected: 2,
                ..
            }
        ),
        "{e:?}"
    );
    // Wrong size.
    let small = upload(&[1.0f32; 2], &[2]);
    let e = exe.execute(&[&a, &small]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::ArgumentShape { argument: 1, .. }),
        "{e:?}"
    );
    // Right arguments still work afterwards.
    let out = exe.execute(&[&a, &a]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0; 4]);
}

#[test]
fn build_errors_name_the_op_the_shapes_and_the_line() {
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[4]), "y");
    let line = line!() + 1;
    let z = &x + &y;
    let _more = z.exp(); // a failed op poisons what follows, quietly
    let e = b.build(&z).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("add") && msg.contains("f32[2,3]") && msg.contains("f32[4]"),
        "{msg}"
    );
    let loc = e.location().expect("location");
    assert!(loc.file().ends_with("errors.rs"), "{}", loc.file());
    assert_eq!(loc.line(), line);
    assert!(msg.contains(&format!("errors.rs:{line}")), "{msg}");
}

#[test]
fn graph_misuse_is_an_error() {
    let b1 = Builder::new("a");
    let b2 = Builder::new("b");
    let x = b1.parameter(0, Shape::of::<f32>(&[2]), "x");
    let y = b2.parameter(0, Shape::of::<f32>(&[2]), "y");
    let z = &x + &y;
    assert!(b1.build(&z).is_err());
    let b = Builder::new("dup");
    let _ = b.parameter(0, Shape::of::<f32>(&[]), "p");
    let p = b.parameter(0, Shape::of::<f32>(&[]), "q");
    assert!(
        b.build(&p)
            .unwrap_err()
            .to_string()
            .contains("declared twice")
    );
    let b = Builder::new("gap");
    let p = b.parameter(1, Shape::of::<f32>(&[]), "p");
    assert!(
        b.build(&p)
            .unwrap_err()
            .to_string()
            .contains("without gaps")
    );
}

#[test]
fn rust_numbers_the_element_type_cannot_hold_are_errors() {
    for (ty, bad) in [
        (Shape::of::<i32>(&[2]), xlaclient::Scalar::Float(2.5)),
        (Shape::of::<u32>(&[2]), xlaclient::Scalar::Int(-1)),
        (Shape::of::<u8>(&[2]), xlaclient::Scalar::Int(300)),
        (Shape::of::<bool>(&[2]), xlaclient::Scalar::Int(2)),
    ] {
        let b = Builder::new("m");
        let x = b.parameter(0, ty.clone(), "x");
        let c = b.constant_of_type(ty.element_type().unwrap(), bad);
        let e = b.build(&(&x + &c)).unwrap_err().to_string();
        assert!(
            e.contains("does not fit") && e.contains(&bad.to_string()),
            "{ty}: {e}"
        );
    }
    // Through the operators too: `x - 300` on a u8 array is refused (a float number
    // with an integer array is no error: it promotes to f32, as in JAX).
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<u8>(&[2]), "x");
    let e = b.build(&(&x - 300)).unwrap_err().to_string();
    assert!(e.contains("300") && e.contains("u8"), "{e}");
}

#[test]
fn misused_handles_get_their_own_errors() {
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let exe = client().compile(b.build(&(&x + 1.0)).unwrap()).unwrap();
    let a = upload(&[1.0f32, 2.0], &[2]);
    // More argument lists than devices the program is loaded on.
    let e = exe
        .execute_replicated(&[vec![&a], vec![&a], vec![&a]])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::DeviceCount {
                given: 3,
                loaded: 1
            }
        ),
        "{e:?}"
    );
    let e = exe.execute_replicated(&[]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::DeviceCount { given: 0, .. }),
        "{e:?}"
    );
    // A buffer of another client.
    let other = xlaclient::Client::new(client().plugin(), &Default::default()).unwrap();
    let foreign = other.buffer_from_host(&[1.0f32, 2.0], &[2]).unwrap();
    let e = exe.execute(&[&foreign]).unwrap_err();
    assert!(
        matches!(e, RuntimeError::ForeignBuffer { argument: 0 }),
        "{e:?}"
    );
    assert!(e.to_string().contains("another client"), "{e}");
    // A device of another client as a copy's destination.
    let e = a
        .copy_to_device(&other.default_device().unwrap())
        .unwrap_err();
    assert!(matches!(e, RuntimeError::ForeignDevice), "{e:?}");
    // Errors are values: they clone (a stored error can be handed out again).
    let copy = e.clone();
    assert_eq!(copy.to_string(), e.to_string());
}

#[test]
fn graph_errors_have_kinds_and_a_failed_root_of_another_graph_keeps_its_own_error() {
    use xlaclient::GraphError;
    let b = Builder::new("one");
    let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    let twice = b.parameter(0, Shape::of::<f32>(&[2]), "again");
    match b.build(&(&x + &twice)).unwrap_err() {
        Error::Graph {
            kind: GraphError::ParameterTwice { number: 0 },
            location: Some(loc),
        } => assert_eq!(loc.file(), file!()),
        e => panic!("{e:?}"),
    }
    // An op of another builder as the root.
    let other = Builder::new("other");
    let y = other.parameter(0, Shape::of::<f32>(&[2]), "y");
    let b = Builder::new("two");
    let _ = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    assert!(matches!(
        b.build(&y),
        Err(Error::Graph {
            kind: GraphError::ForeignOp { .. },
            ..
        })
    ));
    // A failed op made in another graph (as a library with no builder at hand does)
    // reports its own error, at its own line, not "another builder".
    let failed = other.error("the parameter tree has no leaves");
    let line = line!() - 1;
    match b.build(&failed).unwrap_err() {
        Error::Graph {
            kind: GraphError::Recorded { reason },
            location: Some(loc),
        } => {
            assert_eq!(reason, "the parameter tree has no leaves");
            assert_eq!((loc.file(), loc.line()), (file!(), line));
        }
        e => panic!("{e:?}"),
    }
}
