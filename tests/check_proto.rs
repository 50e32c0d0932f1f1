//! Modules that come from outside (as protos or bytes) are checked with the
//! builder's own shape rules before a plugin sees them: each mutation below used to
//! pass the structural check and abort XLA (the process), and is now an error.

mod common;

use common::*;
use prost::Message;
use xlaclient::ClientExt;
use xlaclient::proto::{self, HloModuleProto};
use xlaclient::{Builder, CompileOptions, Computation, Error, Shape};

/// `compare(x, y) -> select(.., x, y)` with a reduce: several kinds of instruction.
fn module() -> HloModuleProto {
    let b = Builder::new("m");
    let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    let y = b.parameter(1, Shape::of::<f32>(&[2, 3]), "y");
    let lt = x.compare(&y, xlaclient::Comparison::Lt);
    let s = b.select(&lt, &x, &y).reduce_sum(&[1]);
    b.build(&(s * 2.0)).unwrap().proto().clone()
}

fn compile(m: &HloModuleProto) -> xlaclient::Result<()> {
    client()
        .compile_hlo_bytes(&m.encode_to_vec(), &CompileOptions::new())
        .map(|_| ())?;
    client().compile(Computation::from_proto(m.clone())?)?;
    Ok(())
}

fn rejected(m: &HloModuleProto, needle: &str) {
    match compile(m) {
        Err(Error::InvalidModule { reason }) => {
            assert!(reason.contains(needle), "{reason} (wanted `{needle}`)")
        }
        Err(other) => panic!("wanted InvalidModule, got {other}"),
        Ok(()) => panic!("a broken module compiled"),
    }
}

fn entry(m: &mut HloModuleProto) -> &mut proto::HloComputationProto {
    let id = m.entry_computation_id;
    m.computations.iter_mut().find(|c| c.id == id).unwrap()
}

fn instr<'a>(m: &'a mut HloModuleProto, opcode: &str) -> &'a mut proto::HloInstructionProto {
    entry(m)
        .instructions
        .iter_mut()
        .find(|i| i.opcode == opcode)
        .unwrap()
}

#[test]
fn the_unmodified_module_compiles_and_runs() {
    let m = module();
    compile(&m).unwrap();
    let exe = client()
        .compile_hlo_bytes(&m.encode_to_vec(), &CompileOptions::new())
        .unwrap();
    let xs = [1f32, 5.0, 3.0, -1.0, 0.0, 2.0];
    let ys = [2f32, 4.0, 3.0, 1.0, -1.0, 2.0];
    let out = exe
        .execute(&[&upload(&xs, &[2, 3]), &upload(&ys, &[2, 3])])
        .unwrap();
    let want: Vec<f32> = (0..2)
        .map(|r| {
            (0..3)
                .map(|c| xs[r * 3 + c].min(ys[r * 3 + c]))
                .sum::<f32>()
                * 2.0
        })
        .collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
}

#[test]
fn an_entry_root_that_differs_from_the_program_shape() {
    let mut m = module();
    m.host_program_shape.as_mut().unwrap().result = Some(Shape::of::<f32>(&[3]).to_proto());
    rejected(&m, "host program shape's result");
}

#[test]
fn a_tuple_shaped_operand_of_compare() {
    let mut m = module();
    let x_id = entry(&mut m).instructions[0].id;
    let y_id = entry(&mut m).instructions[1].id;
    // A tuple (x, y) fed to the compare in place of x.
    let t_id = 10_000;
    let t = proto::HloInstructionProto {
        id: t_id,
        name: "t".into(),
        opcode: "tuple".into(),
        operand_ids: vec![x_id, y_id],
        shape: Some(
            Shape::Tuple(vec![Shape::of::<f32>(&[2, 3]), Shape::of::<f32>(&[2, 3])]).to_proto(),
        ),
        ..Default::default()
    };
    let e = entry(&mut m);
    let pos = e
        .instructions
        .iter()
        .position(|i| i.opcode == "compare")
        .unwrap();
    e.instructions.insert(pos, t);
    e.instructions[pos + 1].operand_ids[0] = t_id;
    rejected(&m, "compare");
}

#[test]
fn a_declared_shape_its_rule_does_not_give() {
    let mut m = module();
    instr(&mut m, "select").shape = Some(Shape::of::<f32>(&[3, 2]).to_proto());
    rejected(&m, "select");
}

#[test]
fn bad_attributes() {
    let mut m = module();
    instr(&mut m, "reduce").dimensions = vec![7];
    rejected(&m, "reduce");
    let mut m = module();
    instr(&mut m, "compare").comparison_direction = "SIDEWAYS".into();
    rejected(&m, "comparison direction");
    let mut m = module();
    instr(&mut m, "compare").comparison_type = "UNSIGNED".into();
    rejected(&m, "comparison type");
    let mut m = module();
    instr(&mut m, "multiply").called_computation_ids = vec![m.computations[0].id];
    rejected(&m, "calls 1 computations");
}

#[test]
fn an_opcode_without_a_rule_is_refused() {
    let mut m = module();
    instr(&mut m, "multiply").opcode = "fft".into();
    rejected(&m, "no shape rule");
}

#[test]
fn a_constant_whose_literal_does_not_fit() {
    let mut m = module();
    let c = instr(&mut m, "constant");
    c.literal.as_mut().unwrap().f32s.push(1.0);
    rejected(&m, "constant");
}

#[test]
fn a_tuple_entry_parameter() {
    let mut m = module();
    let t = Shape::Tuple(vec![Shape::of::<f32>(&[2, 3])]).to_proto();
    instr(&mut m, "parameter").shape = Some(t.clone());
    entry(&mut m).program_shape.as_mut().unwrap().parameters[0] = t.clone();
    m.host_program_shape.as_mut().unwrap().parameters[0] = t;
    // The compare now sees a tuple operand; either way it must not reach XLA.
    assert!(matches!(compile(&m), Err(Error::InvalidModule { .. })));
}

#[test]
fn the_builder_refuses_tuple_and_token_entry_parameters() {
    for s in [Shape::Tuple(vec![Shape::of::<f32>(&[2])]), Shape::Token] {
        let b = Builder::new("p");
        let p = b.parameter(0, s.clone(), "p");
        let e = b.build(&p).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidModule { reason } if reason.contains("entry parameters must be arrays")),
            "{s}: {e}"
        );
    }
}

#[test]
fn a_dots_precision_and_result_type_are_read_and_checked() {
    use xlaclient::half::bf16;
    use xlaclient::{DotOptions, ElementType, Precision};
    let b = Builder::new("dot");
    let x = b.parameter(0, Shape::of::<bf16>(&[2, 3]), "x");
    let w = b.parameter(1, Shape::of::<bf16>(&[3, 4]), "w");
    let opts = DotOptions::new()
        .operand_precision(Precision::Highest, Precision::High)
        .preferred_element_type(ElementType::F32);
    let m = b.build(&x.matmul_with(&w, opts)).unwrap().proto().clone();
    compile(&m).unwrap();
    let text = Computation::from_proto(m.clone()).unwrap().to_hlo_text();
    assert!(
        text.contains("f32[2,4]{1,0} dot(bf16[2,3]{1,0} %x")
            && text.contains("operand_precision={highest,high}"),
        "{text}"
    );
    // The result type is the preferred type: another one the rule allows is read as
    // such (XLA's verifier does the same), one it refuses is an error.
    let retyped = |t: ElementType| {
        let mut m = m.clone();
        let t = t.primitive_type() as i32;
        instr(&mut m, "dot").shape.as_mut().unwrap().element_type = t;
        m.host_program_shape
            .as_mut()
            .unwrap()
            .result
            .as_mut()
            .unwrap()
            .element_type = t;
        if let Some(ps) = entry(&mut m).program_shape.as_mut() {
            ps.result.as_mut().unwrap().element_type = t;
        }
        m
    };
    compile(&retyped(ElementType::F64)).unwrap();
    rejected(&retyped(ElementType::Pred), "preferred element type pred");
    let mut bad = m.clone();
    let pc = instr(&mut bad, "dot").precision_config.as_mut().unwrap();
    pc.operand_precision.push(0);
    rejected(&bad, "3 operand precisions");
    let mut bad = m.clone();
    instr(&mut bad, "dot")
        .precision_config
        .as_mut()
        .unwrap()
        .algorithm = 6;
    rejected(&bad, "dot algorithm 6");
    let mut bad = m.clone();
    instr(&mut bad, "dot")
        .precision_config
        .as_mut()
        .unwrap()
        .operand_precision[1] = 7;
    rejected(&bad, "operand precision 7");
}

/// A tiled sharding of `dims` tiles over `devices`.
fn tiled(dims: &[i64], devices: &[i64]) -> proto::OpSharding {
    proto::OpSharding {
        r#type: proto::op_sharding::Type::Other as i32,
        tile_assignment_dimensions: dims.to_vec(),
        tile_assignment_devices: devices.to_vec(),
        ..Default::default()
    }
}

#[test]
fn bad_shardings_are_refused() {
    // The tile grid must have the array's rank, one distinct device per tile.
    let cases = [
        (tiled(&[2], &[0, 1]), "needs 2 tile dimensions"),
        (tiled(&[2, 1], &[0, 0]), "twice"),
        (tiled(&[2, 2], &[0, 1]), "needs 4 devices"),
        (tiled(&[2, 1], &[0, -1]), "negative device"),
        (tiled(&[0, 1], &[]), "tile assignment dimensions"),
        (
            proto::OpSharding {
                r#type: proto::op_sharding::Type::Maximal as i32,
                tile_assignment_devices: vec![0],
                ..Default::default()
            },
            "Maximal",
        ),
        (
            proto::OpSharding {
                r#type: proto::op_sharding::Type::Tuple as i32,
                tuple_shardings: vec![tiled(&[2, 1], &[0, 1])],
                ..Default::default()
            },
            "tuple sharding",
        ),
        (
            proto::OpSharding {
                r#type: proto::op_sharding::Type::Other as i32,
                tile_assignment_dimensions: vec![2, 1],
                iota_reshape_dims: vec![3],
                ..Default::default()
            },
            "iota",
        ),
    ];
    for (s, needle) in cases {
        let mut m = module();
        instr(&mut m, "parameter").sharding = Some(s);
        rejected(&m, needle);
    }
}

#[test]
fn shardings_are_read_back_and_lowered_again() {
    let mut m = module();
    // XLA's compact form ([4] iota reshaped [2,2], transposed): devices 0,2,1,3.
    instr(&mut m, "parameter").sharding = Some(proto::OpSharding {
        r#type: proto::op_sharding::Type::Other as i32,
        tile_assignment_dimensions: vec![2, 2],
        iota_reshape_dims: vec![2, 2],
        iota_transpose_perm: vec![1, 0],
        ..Default::default()
    });
    instr(&mut m, "multiply").sharding = Some(proto::OpSharding {
        r#type: proto::op_sharding::Type::Other as i32,
        tile_assignment_dimensions: vec![2, 2],
        tile_assignment_devices: vec![3, 2, 1, 0],
        last_tile_dims: vec![proto::op_sharding::Type::Replicated as i32],
        ..Default::default()
    });
    let c = Computation::from_proto(m).unwrap();
    let text = c.to_hlo_text();
    assert!(text.contains("sharding={devices=[2,2]0,2,1,3}"), "{text}");
    assert!(
        text.contains("sharding={devices=[2,2]3,2,1,0 last_tile_dim_replicate}"),
        "{text}"
    );
    let p = c.proto();
    let entry = p
        .computations
        .iter()
        .find(|x| x.id == p.entry_computation_id)
        .unwrap();
    let param = entry
        .instructions
        .iter()
        .find(|i| i.opcode == "parameter")
        .unwrap();
    assert_eq!(param.sharding, Some(tiled(&[2, 2], &[0, 2, 1, 3])));
    let mul = entry
        .instructions
        .iter()
        .find(|i| i.opcode == "multiply")
        .unwrap();
    let mut want = tiled(&[2, 2], &[3, 2, 1, 0]);
    want.replicate_on_last_tile_dim = true;
    assert_eq!(mul.sharding, Some(want));
    // Compiled for one partition, a sharding naming partition 3 is refused
    // before the plugin sees it.
    let e = client()
        .compile(&c)
        .expect_err("a sharding naming partition 3 of 1")
        .to_string();
    assert!(
        e.contains("partition 3") && e.contains("1 partition"),
        "{e}"
    );
}
