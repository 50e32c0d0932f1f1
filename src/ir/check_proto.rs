//! Checks of an `HloModuleProto` that comes from outside, before it reaches a plugin.
//!
//! XLA checks some malformed modules only with fatal assertions, which abort the
//! whole process; every property it relies on when reading a proto is checked here
//! first, so a bad module is an [`Error::InvalidModule`] instead. After the
//! structure (ids, references, parameters, layouts), every instruction is read into
//! an [`OpKind`] and checked with the builder's own shape rule ([`Rules::infer`]), and
//! the entry's signature against the host program shape. A module with an opcode the
//! crate has no rule for is refused: it cannot be checked.

use std::collections::{HashMap, HashSet};

use super::op::OpKind;
use super::{CompId, InferCx, LowerCx, RaiseCx, Rules, Signatures};
use crate::error::{Error, Result};
use crate::proto;
use crate::shape::{ElementType, Shape};

fn bad(reason: String) -> Error {
    Error::InvalidModule { reason }
}

/// Checks a shape: known element type, non-negative dims, a layout on every array
/// whose `minor_to_major` is a permutation of its dimensions.
pub fn verify_shape(s: &proto::ShapeProto, what: &dyn Fn() -> String) -> Result<()> {
    let tuple = proto::PrimitiveType::Tuple as i32;
    let token = proto::PrimitiveType::Token as i32;
    if s.element_type == tuple {
        for t in &s.tuple_shapes {
            verify_shape(t, what)?;
        }
        return Ok(());
    }
    if s.element_type == token {
        return Ok(());
    }
    if ElementType::from_primitive_type(s.element_type).is_none()
        && proto::PrimitiveType::try_from(s.element_type).is_err()
    {
        return Err(bad(format!(
            "{}: unknown element type {}",
            what(),
            s.element_type
        )));
    }
    if s.element_type == proto::PrimitiveType::Invalid as i32 {
        return Err(bad(format!("{}: element type is INVALID", what())));
    }
    if s.dimensions.iter().any(|d| *d < 0) {
        return Err(bad(format!(
            "{}: negative dimension in {:?}",
            what(),
            s.dimensions
        )));
    }
    if !s.is_dynamic_dimension.is_empty() && s.is_dynamic_dimension.len() != s.dimensions.len() {
        return Err(bad(format!(
            "{}: {} dynamic-dimension flags for {} dimensions",
            what(),
            s.is_dynamic_dimension.len(),
            s.dimensions.len()
        )));
    }
    let layout = s
        .layout
        .as_ref()
        .ok_or_else(|| bad(format!("{}: array shape without a layout", what())))?;
    let rank = s.dimensions.len() as i64;
    let mut seen = vec![false; s.dimensions.len()];
    if layout.minor_to_major.len() != s.dimensions.len() {
        return Err(bad(format!(
            "{}: layout minor_to_major {:?} does not fit rank {rank}",
            what(),
            layout.minor_to_major
        )));
    }
    for d in &layout.minor_to_major {
        if *d < 0 || *d >= rank || seen[*d as usize] {
            return Err(bad(format!(
                "{}: layout minor_to_major {:?} is not a permutation of 0..{rank}",
                what(),
                layout.minor_to_major
            )));
        }
        seen[*d as usize] = true;
    }
    Ok(())
}

/// Checks the module's structure: ids unique, operands and called computations
/// defined before use, parameters numbered without gaps and matching the program
/// shape, the root and entry present, every shape well formed.
pub fn verify_module(m: &proto::HloModuleProto, rules: &dyn Rules) -> Result<()> {
    if m.computations.is_empty() {
        return Err(bad("module has no computations".into()));
    }
    let mut comp_ids: HashSet<i64> = HashSet::new();
    let mut instr_ids: HashSet<i64> = HashSet::new();
    let mut param_counts: HashMap<i64, usize> = HashMap::new();
    for c in &m.computations {
        let cname = &c.name;
        let mut local: HashMap<i64, usize> = HashMap::new();
        let mut params: Vec<i64> = Vec::new();
        for (pos, ins) in c.instructions.iter().enumerate() {
            let what = || {
                format!(
                    "instruction `{}` (id {}) of computation `{cname}`",
                    ins.name, ins.id
                )
            };
            if ins.opcode.is_empty() {
                return Err(bad(format!("{}: empty opcode", what())));
            }
            if !instr_ids.insert(ins.id) {
                return Err(bad(format!("{}: id used twice", what())));
            }
            local.insert(ins.id, pos);
            let shape = ins
                .shape
                .as_ref()
                .ok_or_else(|| bad(format!("{}: no shape", what())))?;
            verify_shape(shape, &what)?;
            for o in &ins.operand_ids {
                if !local.contains_key(o) || *o == ins.id {
                    return Err(bad(format!(
                        "{}: operand id {o} is not an earlier instruction of the computation",
                        what()
                    )));
                }
            }
            for cc in &ins.called_computation_ids {
                if !comp_ids.contains(cc) {
                    return Err(bad(format!(
                        "{}: calls computation id {cc}, which is not defined before it",
                        what()
                    )));
                }
            }
            if ins.opcode == "parameter" {
                params.push(ins.parameter_number);
            }
            if ins.opcode == "constant" {
                let lit = ins
                    .literal
                    .as_ref()
                    .ok_or_else(|| bad(format!("{}: constant without a literal", what())))?;
                let ls = lit
                    .shape
                    .as_ref()
                    .ok_or_else(|| bad(format!("{}: literal without a shape", what())))?;
                if ls.element_type != shape.element_type || ls.dimensions != shape.dimensions {
                    return Err(bad(format!(
                        "{}: literal shape differs from the instruction's",
                        what()
                    )));
                }
            }
        }
        params.sort_unstable();
        for (i, p) in params.iter().enumerate() {
            if *p != i as i64 {
                return Err(bad(format!(
                    "computation `{cname}`: parameter numbers {params:?} are not 0..{}",
                    params.len()
                )));
            }
        }
        if !local.contains_key(&c.root_id) {
            return Err(bad(format!(
                "computation `{cname}`: root id {} is not one of its instructions",
                c.root_id
            )));
        }
        if let Some(ps) = &c.program_shape {
            if ps.parameters.len() != params.len() {
                return Err(bad(format!(
                    "computation `{cname}`: program shape lists {} parameters, the computation has {}",
                    ps.parameters.len(),
                    params.len()
                )));
            }
        }
        if !comp_ids.insert(c.id) {
            return Err(bad(format!(
                "computation `{cname}`: id {} used twice",
                c.id
            )));
        }
        param_counts.insert(c.id, params.len());
    }
    let entry = m
        .computations
        .iter()
        .find(|c| c.id == m.entry_computation_id)
        .ok_or_else(|| {
            bad(format!(
                "entry computation id {} is not in the module",
                m.entry_computation_id
            ))
        })?;
    let hps = m
        .host_program_shape
        .as_ref()
        .ok_or_else(|| bad("module has no host_program_shape".into()))?;
    for (i, p) in hps.parameters.iter().enumerate() {
        verify_shape(p, &|| format!("host program shape parameter {i}"))?;
    }
    let result = hps
        .result
        .as_ref()
        .ok_or_else(|| bad("host program shape has no result".into()))?;
    verify_shape(result, &|| "host program shape result".to_string())?;
    if hps.parameters.len() != param_counts[&entry.id] {
        return Err(bad(format!(
            "host program shape lists {} parameters, the entry computation has {}",
            hps.parameters.len(),
            param_counts[&entry.id]
        )));
    }
    verify_rules(m, rules)
}

/// Signatures of the computations checked so far, by position.
struct ProtoSigs(Vec<(Vec<Shape>, Shape)>);

impl Signatures for ProtoSigs {
    fn signature(&self, c: CompId) -> Option<(Vec<Shape>, Shape)> {
        self.0.get(c.0 as usize).cloned()
    }
}

fn shape_of(s: Option<&proto::ShapeProto>, what: &dyn Fn() -> String) -> Result<Shape> {
    s.and_then(Shape::from_proto)
        .ok_or_else(|| bad(format!("{}: a shape this crate cannot read", what())))
}

/// Every instruction checked with the builder's shape rule; every computation's
/// signature, and the entry's against the host program shape. Runs after the
/// structural checks (ids unique, operands and callees defined before use,
/// parameters numbered without gaps).
fn verify_rules(m: &proto::HloModuleProto, rules: &dyn Rules) -> Result<()> {
    let mut sigs = ProtoSigs(Vec::with_capacity(m.computations.len()));
    let mut comp_pos: HashMap<i64, CompId> = HashMap::new();
    for c in &m.computations {
        let cname = &c.name;
        let mut shapes: HashMap<i64, Shape> = HashMap::with_capacity(c.instructions.len());
        let mut params: Vec<(i64, Shape)> = Vec::new();
        for ins in &c.instructions {
            let what = || format!("instruction `{}` of computation `{cname}`", ins.name);
            let declared = shape_of(ins.shape.as_ref(), &what)?;
            let operands: Vec<&Shape> = ins.operand_ids.iter().map(|o| &shapes[o]).collect();
            let cx = RaiseCx {
                shape: &declared,
                operands: &operands,
                comp: &|id| comp_pos.get(&id).copied(),
            };
            let kind = super::rules::raise_instruction(rules, ins, &cx)
                .map_err(|r| bad(format!("{}: {r}", what())))?;
            check_no_stray_attributes(rules, ins, &kind, &declared, &operands, &what)?;
            let cx = InferCx {
                operands: &operands,
                target: Some(&declared),
                sigs: &sigs,
            };
            let inferred = rules
                .infer(&kind, &cx)
                .map_err(|e| bad(format!("{}: {e}", what())))?;
            if inferred != declared {
                return Err(bad(format!(
                    "{}: declared {declared}, but `{}` gives {inferred}",
                    what(),
                    ins.opcode
                )));
            }
            if let OpKind::Parameter { number, .. } = kind {
                params.push((number as i64, declared.clone()));
            }
            shapes.insert(ins.id, declared);
        }
        params.sort_by_key(|p| p.0);
        let params: Vec<Shape> = params.into_iter().map(|p| p.1).collect();
        let root = shapes[&c.root_id].clone();
        if let Some(ps) = &c.program_shape {
            let what = || format!("computation `{cname}`: program shape");
            let declared: Vec<Shape> = ps
                .parameters
                .iter()
                .map(|p| shape_of(Some(p), &what))
                .collect::<Result<_>>()?;
            if declared != params
                || ps.result.is_some() && shape_of(ps.result.as_ref(), &what)? != root
            {
                return Err(bad(format!(
                    "{}: does not match the computation's parameters and root",
                    what()
                )));
            }
        }
        if c.id == m.entry_computation_id {
            let hps = m.host_program_shape.as_ref().expect("checked above");
            let what = || "host program shape".to_string();
            let declared: Vec<Shape> = hps
                .parameters
                .iter()
                .map(|p| shape_of(Some(p), &what))
                .collect::<Result<_>>()?;
            if declared != params {
                return Err(bad(format!(
                    "the host program shape's parameters differ from the entry computation's ({})",
                    params
                        .iter()
                        .map(Shape::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if shape_of(hps.result.as_ref(), &what)? != root {
                return Err(bad(format!(
                    "the host program shape's result differs from the entry computation's root ({root})"
                )));
            }
            if let Some(p) = params.iter().find(|p| !p.is_array()) {
                return Err(bad(format!("entry parameters must be arrays, one is {p}")));
            }
        }
        comp_pos.insert(c.id, CompId(sigs.0.len() as u32));
        sigs.0.push((params, root));
    }
    Ok(())
}

/// The attribute fields XLA reads by structure (dimension lists, dimension
/// numbers, windows, indices): each must be what the op's own lowering writes, so
/// a field the op does not use is refused (XLA crashes on some, e.g. dot dimension
/// numbers on a `call`). Fields that do not change what is computed (metadata,
/// sharding, frontend attributes) are not compared, nor is `precision_config`: a
/// dot's is read (and checked) by `raise`, other ops' are ignored by XLA (a
/// convolution's precision is not modeled yet).
fn check_no_stray_attributes(
    rules: &dyn Rules,
    ins: &proto::HloInstructionProto,
    kind: &OpKind,
    shape: &Shape,
    operands: &[&Shape],
    what: &dyn Fn() -> String,
) -> Result<()> {
    let mut q = proto::HloInstructionProto::default();
    // Called computations are checked by `raise`; their ids here are placeholders.
    let cx = LowerCx {
        shape,
        operands,
        comp_id: &|_| 0,
    };
    rules.lower(kind, &cx, &mut q);
    let groups = |n: i64| n.max(1);
    let stray = [
        ("dimensions", ins.dimensions != q.dimensions),
        (
            "slice_dimensions",
            ins.slice_dimensions != q.slice_dimensions,
        ),
        (
            "dynamic_slice_sizes",
            ins.dynamic_slice_sizes != q.dynamic_slice_sizes,
        ),
        ("padding_config", ins.padding_config != q.padding_config),
        (
            "dot_dimension_numbers",
            ins.dot_dimension_numbers != q.dot_dimension_numbers,
        ),
        (
            "gather_dimension_numbers",
            ins.gather_dimension_numbers != q.gather_dimension_numbers,
        ),
        (
            "gather_slice_sizes",
            ins.gather_slice_sizes != q.gather_slice_sizes,
        ),
        (
            "scatter_dimension_numbers",
            ins.scatter_dimension_numbers != q.scatter_dimension_numbers,
        ),
        ("window", ins.window != q.window),
        (
            "convolution_dimension_numbers",
            ins.convolution_dimension_numbers != q.convolution_dimension_numbers,
        ),
        (
            "feature_group_count",
            groups(ins.feature_group_count) != groups(q.feature_group_count),
        ),
        (
            "batch_group_count",
            groups(ins.batch_group_count) != groups(q.batch_group_count),
        ),
        ("tuple_index", ins.tuple_index != q.tuple_index),
        (
            "parameter_number",
            ins.parameter_number != q.parameter_number,
        ),
        (
            "triangular_solve_options",
            ins.triangular_solve_options != q.triangular_solve_options,
        ),
        (
            "cholesky_options",
            ins.cholesky_options.is_some() && ins.cholesky_options != q.cholesky_options,
        ),
        (
            "custom_call_target",
            ins.custom_call_target != q.custom_call_target,
        ),
        ("rng_algorithm", ins.rng_algorithm != q.rng_algorithm),
        (
            "comparison_direction",
            ins.comparison_direction != q.comparison_direction,
        ),
        (
            "comparison_type",
            !matches!(kind, OpKind::Compare(_)) && !ins.comparison_type.is_empty(),
        ),
    ];
    match stray.iter().find(|(_, differs)| *differs) {
        Some((field, _)) => Err(bad(format!(
            "{}: `{}` has a `{field}` it does not use (or one that differs from its own)",
            what(),
            ins.opcode
        ))),
        None => Ok(()),
    }
}
