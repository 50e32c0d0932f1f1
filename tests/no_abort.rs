//! Paths that aborted the process once, each now an error: foreign modules and
//! StableHLO programs with dynamic dimensions in their entry, and damaged,
//! truncated, swapped or foreign serialized executables. (Donation racing other
//! uses of a buffer no longer compiles; tests/soak.rs keeps the threads honest.)

mod common;

use common::*;
use prost::Message;
use xlaclient::pjrt::guard::GuardError;
use xlaclient::{
    Builder, Client, ClientExt, ClientOptions, CompileOptions, Error, Plugin, RuntimeError, Shape,
};

/// `x + 1` on f32[4] as a proto, its root moved to the parameter and every
/// rank-1 shape (the parameter's, the program shape's) marked dynamic.
fn dynamic_module() -> Vec<u8> {
    let b = Builder::new("d");
    let x = b.parameter(0, Shape::of::<f32>(&[4]), "x");
    let mut p = b.build(&(&x + 1.0)).unwrap().proto();
    let c = p.computations.last_mut().unwrap();
    let pid = c
        .instructions
        .iter()
        .find(|i| i.opcode == "parameter")
        .unwrap()
        .id;
    c.root_id = pid;
    for s in c
        .instructions
        .iter_mut()
        .filter_map(|i| i.shape.as_mut())
        .filter(|s| s.dimensions.len() == 1)
    {
        s.is_dynamic_dimension = vec![true];
    }
    for ps in [c.program_shape.as_mut(), p.host_program_shape.as_mut()]
        .into_iter()
        .flatten()
    {
        for s in ps.parameters.iter_mut().chain(ps.result.as_mut()) {
            s.is_dynamic_dimension = vec![true];
        }
    }
    p.encode_to_vec()
}

#[test]
fn a_foreign_module_with_a_dynamic_entry_is_refused() {
    // On the 0.81 plugin this module compiled unchecked, and running it aborted
    // with "Check failed: allocation.size() == buffer_size (20 vs. 16)".
    let e = client()
        .compile_hlo_bytes(&dynamic_module(), &CompileOptions::new())
        .unwrap_err();
    assert!(matches!(e, Error::InvalidModule { .. }), "{e:?}");
    assert!(e.to_string().contains("dynamic dimensions"), "{e}");
    // Only the dynamic flags were wrong: without them the same module compiles
    // and runs (the parameter is the result).
    let mut p = xlaclient::proto::HloModuleProto::decode(&dynamic_module()[..]).unwrap();
    fn clear(s: &mut xlaclient::proto::ShapeProto) {
        s.is_dynamic_dimension.iter_mut().for_each(|d| *d = false);
    }
    for c in &mut p.computations {
        for s in c.instructions.iter_mut().filter_map(|i| i.shape.as_mut()) {
            clear(s);
        }
        if let Some(ps) = c.program_shape.as_mut() {
            ps.parameters
                .iter_mut()
                .chain(ps.result.as_mut())
                .for_each(clear);
        }
    }
    if let Some(ps) = p.host_program_shape.as_mut() {
        ps.parameters
            .iter_mut()
            .chain(ps.result.as_mut())
            .for_each(clear);
    }
    let exe = client()
        .compile_hlo_bytes(&p.encode_to_vec(), &CompileOptions::new())
        .unwrap();
    let x = upload(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    assert_eq!(
        exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0]
    );
}

#[test]
fn stablehlo_with_bounded_dynamic_parameters_or_results_is_refused() {
    // The parameter: the 0.81 plugin aborted when given an f32[4] array for it.
    let param = "func.func public @main(%x: tensor<?xf32, #stablehlo.bounds<4>>)
    -> tensor<?xf32, #stablehlo.bounds<4>> {
  return %x : tensor<?xf32, #stablehlo.bounds<4>>
}";
    let e = client()
        .compile_mlir(param.as_bytes(), &CompileOptions::new())
        .unwrap_err();
    match &e {
        RuntimeError::DynamicShape { what, shape } => {
            assert_eq!(what, "parameter 0");
            assert_eq!(shape, "f32[<=4]");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("dynamic dimensions"), "{e}");
    // Only the result: a static parameter whose size is set at run time.
    let result = "func.func public @main(%x: tensor<4xf32>, %n: tensor<i32>)
    -> tensor<?xf32, #stablehlo.bounds<4>> {
  %y = stablehlo.set_dimension_size %x, %n, dim = 0
    : (tensor<4xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>>
  return %y : tensor<?xf32, #stablehlo.bounds<4>>
}";
    match client().compile_mlir(result.as_bytes(), &CompileOptions::new()) {
        Err(RuntimeError::DynamicShape { what, .. }) => assert_eq!(what, "result"),
        // Or the plugin refuses it itself, with an error.
        Err(RuntimeError::Pjrt { .. }) => {}
        other => panic!("{other:?}"),
    }
    // Unbounded dynamism is the plugin's own error.
    let unbounded = "func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}";
    assert!(
        client()
            .compile_mlir(unbounded.as_bytes(), &CompileOptions::new())
            .is_err()
    );
}

const NEGATE: &str = "func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = stablehlo.negate %x : tensor<3xf32>
  return %y : tensor<3xf32>
}";

#[test]
fn stablehlo_programs_check_their_arguments() {
    // The entry's shapes come back from the compiled program: a wrong argument is
    // the crate's error, naming both shapes, not the plugin's byte-size check.
    let exe = client()
        .compile_mlir(NEGATE.as_bytes(), &CompileOptions::new())
        .unwrap();
    assert_eq!(exe.parameter_shapes(), Some(&[Shape::of::<f32>(&[3])][..]));
    let e = exe.execute(&[&upload(&[1i32, 2, 3], &[3])]).unwrap_err();
    assert!(matches!(e, RuntimeError::ArgumentShape { .. }), "{e:?}");
    assert!(e.to_string().contains("s32[3]"), "{e}");
    let e = exe.execute(&[]).unwrap_err();
    assert!(matches!(e, RuntimeError::ParameterCount { .. }), "{e:?}");
    let out = exe.execute(&[&upload(&[1.0f32, -2.0, 0.5], &[3])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![-1.0, 2.0, -0.5]);
    // The optimized module is there to look at.
    let m = exe.optimized_module().unwrap();
    assert!(!m.computations.is_empty());
}

/// A compiled `x * 2 + 1` on f32[3], serialized with the guard.
fn guarded() -> Vec<u8> {
    let b = Builder::new("affine");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let exe = client()
        .compile(b.build(&(&x * 2.0 + 1.0)).unwrap())
        .unwrap();
    exe.serialize().unwrap()
}

fn refusal(bytes: &[u8]) -> GuardError {
    match client().deserialize_executable(bytes) {
        Err(RuntimeError::SerializedExecutable(g)) => g,
        Err(other) => panic!("refused, but not by the guard: {other:?}"),
        Ok(_) => panic!("damaged bytes were accepted"),
    }
}

#[test]
fn guarded_executables_reload_and_keep_their_argument_checks() {
    let bytes = guarded();
    assert_eq!(&bytes[..8], b"XLACLEXE");
    let exe = client().deserialize_executable(&bytes).unwrap();
    assert_eq!(exe.parameter_shapes(), Some(&[Shape::of::<f32>(&[3])][..]));
    let out = exe.execute(&[&upload(&[0.0f32, 1.0, -1.0], &[3])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0, 3.0, -1.0]);
    let e = exe.execute(&[&upload(&[0.0f32; 4], &[4])]).unwrap_err();
    assert!(matches!(e, RuntimeError::ArgumentShape { .. }), "{e:?}");
}

#[test]
fn damaged_truncated_swapped_and_foreign_executables_never_reach_the_plugin() {
    // Byte flips anywhere (the 0.81 plugin aborted on flips in XLA's part:
    // "Check failed: code_align.value() <= page_size").
    let good = guarded();
    let mut rng = Rng(7);
    for _ in 0..200 {
        let mut b = good.clone();
        let i = (rng.next_u64() % b.len() as u64) as usize;
        b[i] ^= 1 << (rng.next_u64() % 8);
        let g = refusal(&b);
        assert!(
            matches!(
                g,
                GuardError::Checksum
                    | GuardError::Length { .. }
                    | GuardError::NotGuarded
                    | GuardError::FormatVersion { .. }
            ),
            "byte {i}: {g:?}"
        );
    }
    // Truncated at any length, or extended.
    for n in [0, 1, 7, 8, 20, 51, 52, 100, good.len() / 2, good.len() - 1] {
        refusal(&good[..n]);
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"tail");
    assert!(matches!(refusal(&longer), GuardError::Length { .. }));
    // Swapped: the header of one executable on the body of another.
    let b = Builder::new("other");
    let y = b.parameter(0, Shape::of::<f32>(&[3]), "y");
    let other = client()
        .compile(b.build(&(&y - 4.0)).unwrap())
        .unwrap()
        .serialize()
        .unwrap();
    let mut swapped = good[..52].to_vec();
    swapped.extend_from_slice(&other[52..]);
    let g = refusal(&swapped);
    assert!(
        matches!(g, GuardError::Checksum | GuardError::Length { .. }),
        "{g:?}"
    );
    // XLA's own bytes, unguarded: refused by the safe call, loaded by the unsafe one.
    let b = Builder::new("affine");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    let exe = client()
        .compile(b.build(&(&x * 2.0 + 1.0)).unwrap())
        .unwrap();
    let raw = exe.serialize_unguarded().unwrap();
    assert_eq!(refusal(&raw), GuardError::NotGuarded);
    // SAFETY: the bytes were just serialized by this plugin, intact.
    let again = unsafe { client().deserialize_executable_unguarded(&raw) }.unwrap();
    assert_eq!(
        again.parameter_shapes(),
        Some(&[Shape::of::<f32>(&[3])][..])
    );
    let out = again.execute(&[&upload(&[1.0f32; 3], &[3])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0; 3]);
}

#[test]
fn an_executable_of_another_client_configuration_is_refused() {
    // The test client has two CPU devices; a client with one is another identity.
    let plugin = Plugin::default_plugin().unwrap();
    let one = Client::new(&plugin, &ClientOptions::new().cpu_device_count(1)).unwrap();
    assert_ne!(
        one.plugin_identity().unwrap(),
        client().plugin_identity().unwrap()
    );
    let e = one.deserialize_executable(&guarded()).unwrap_err();
    match e {
        RuntimeError::SerializedExecutable(GuardError::OtherPlugin { written_by, this }) => {
            assert!(written_by.contains("devices [0,1]"), "{written_by}");
            assert!(this.contains("devices [0]"), "{this}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reloaded_executable_serializes_to_the_bytes_it_came_from() {
    // Both CPU plugins re-serialize a deserialized executable into bytes whose
    // executions fail ("Function broadcast_add_fusion not found"): the crate keeps
    // the bytes it loaded and writes those again.
    let bytes = guarded();
    let once = client().deserialize_executable(&bytes).unwrap();
    assert_eq!(once.serialize().unwrap(), bytes);
    let twice = client()
        .deserialize_executable(&once.serialize().unwrap())
        .unwrap();
    let out = twice.execute(&[&upload(&[1.0f32; 3], &[3])]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![3.0; 3]);
}
