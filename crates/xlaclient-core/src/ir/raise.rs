//! Raising a module that comes from outside (an `HloModuleProto`, e.g. exported by
//! JAX) into the IR: its computations, instructions, parameters, roots and
//! input/output aliases. The result then goes through the same verifier, printer,
//! parameter-shape reader and lowering as a module built here, so what reaches a
//! plugin is always the crate's own lowering (XLA aborts the process on some
//! malformed protos instead of returning an error).
//!
//! Each instruction's op is read by the op's raise rule ([`Rules::raise`]); a field
//! that the op's own lowering would not write (a stray `dimensions` list, dot
//! dimension numbers on a `call`, …) is refused rather than dropped. What the IR
//! does not hold is refused too: dynamic dimensions, aliases into tuple
//! parameters. Fields that do not change what is computed (layouts: the IR's
//! arrays are row-major; metadata, frontend attributes, scheduling) are dropped;
//! an instruction's sharding is kept ([`Sharding`](super::Sharding)), one of a kind
//! the IR does not hold (maximal, manual) refused; that of a `get-tuple-element` of
//! a multi-result instruction, which becomes a value and not an instruction, is
//! dropped. The shape rules are not run here: [`verify`](super::verify) runs them
//! on the raised module, as on every module.
//!
//! The IR names each result of a multi-result instruction (a variadic reduce, a
//! while loop, …) as a value of its own; a `get-tuple-element` of such an
//! instruction becomes that value, and a use of the whole tuple a `tuple` of them.

use std::collections::HashMap;
use std::panic::Location;

use super::rules::raise_instruction;
use super::{
    Alias, Comp, CompId, Instr, LowerCx, Module, OpKind, Operands, RaiseCx, Rules, ShapeTable,
    Value,
};
use crate::error::{Error, Result};
use crate::proto;
use crate::shape::{ElementType, Shape};

fn bad(reason: String) -> Error {
    Error::InvalidModule { reason }
}

/// Reads a shape the IR can hold: a known element type, no negative or dynamic
/// dimensions, a layout that is a permutation of the dimensions.
pub fn read_shape(s: &proto::ShapeProto) -> std::result::Result<Shape, String> {
    if s.element_type == proto::PrimitiveType::Tuple as i32 {
        let elems = s
            .tuple_shapes
            .iter()
            .map(read_shape)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        return Ok(Shape::Tuple(elems));
    }
    if s.element_type == proto::PrimitiveType::Token as i32 {
        return Ok(Shape::Token);
    }
    let ty = ElementType::from_primitive_type(s.element_type).ok_or_else(|| {
        format!(
            "element type {} is not one this crate reads",
            s.element_type
        )
    })?;
    if s.dimensions.iter().any(|d| *d < 0) {
        return Err(format!("negative dimension in {:?}", s.dimensions));
    }
    if s.is_dynamic_dimension.iter().any(|d| *d) {
        return Err(format!(
            "dynamic dimensions ({:?}) are not supported",
            s.is_dynamic_dimension
        ));
    }
    // Layouts say how an array is stored, not what it holds: the IR's arrays are
    // row-major, and the lowering writes that layout. XLA reads one on every array
    // (and aborts without it): it must be there, a permutation of the dimensions.
    {
        let l = s.layout.as_ref().ok_or("an array shape without a layout")?;
        let rank = s.dimensions.len();
        let mut seen = vec![false; rank];
        let ok = l.minor_to_major.len() == rank
            && l.minor_to_major.iter().all(|d| {
                usize::try_from(*d)
                    .ok()
                    .filter(|d| *d < rank)
                    .is_some_and(|d| !std::mem::replace(&mut seen[d], true))
            });
        if !ok {
            return Err(format!(
                "layout minor_to_major {:?} is not a permutation of 0..{rank}",
                l.minor_to_major
            ));
        }
    }
    Ok(Shape::array(ty, &s.dimensions))
}

/// How a proto instruction's id is known in the raised computation.
#[derive(Clone, Copy)]
enum Slot {
    /// A value (an instruction's only result, or one result of a multi-result one).
    One(Value),
    /// The multi-result instruction itself, used as the tuple of its results.
    Multi(u32),
}

/// One computation being raised.
struct Raising<'a> {
    comp: Comp,
    shapes: &'a mut ShapeTable,
    /// Each proto id of the computation.
    slots: HashMap<i64, Slot>,
    /// The `tuple` made of each multi-result instruction's results, once needed.
    wholes: HashMap<u32, u32>,
    loc: &'static Location<'static>,
}

impl Raising<'_> {
    fn shape_of(&self, v: Value) -> Option<Shape> {
        super::value_shape(&self.comp, self.shapes, v).cloned()
    }

    /// The results of multi-result instruction `i`, as the `tuple` of them.
    fn whole(&mut self, i: u32) -> Value {
        if let Some(t) = self.wholes.get(&i) {
            return Value::of(*t);
        }
        let shape = self.comp.instrs[i as usize].shape;
        let n = match self.shapes.get(shape) {
            Shape::Tuple(e) => e.len() as u32,
            _ => 0,
        };
        self.comp.instrs.push(Instr {
            kind: OpKind::Tuple,
            operands: (0..n).map(|result| Value { instr: i, result }).collect(),
            shape,
            loc: self.loc,
            sharding: None,
        });
        let t = self.comp.instrs.len() as u32 - 1;
        self.wholes.insert(i, t);
        Value::of(t)
    }

    fn value(&mut self, slot: Slot) -> Value {
        match slot {
            Slot::One(v) => v,
            Slot::Multi(i) => self.whole(i),
        }
    }
}

/// Raises `m` into the IR with the op rules `rules`; every instruction gets the
/// source location `loc` (where the module was brought in). The result still has
/// to pass [`verify`](super::verify::verify).
pub fn raise_module(
    m: &proto::HloModuleProto,
    rules: &dyn Rules,
    loc: &'static Location<'static>,
) -> Result<Module> {
    if m.computations.is_empty() {
        return Err(bad("module has no computations".into()));
    }
    let mut shapes = ShapeTable::default();
    let mut comps: Vec<Comp> = Vec::with_capacity(m.computations.len());
    let mut comp_pos: HashMap<i64, CompId> = HashMap::new();
    let mut ids: std::collections::HashSet<i64> = Default::default();
    for c in &m.computations {
        let comp = raise_comp(c, rules, &comp_pos, &mut ids, &mut shapes, loc)?;
        if comp_pos.insert(c.id, CompId(comps.len() as u32)).is_some() {
            return Err(bad(format!(
                "computation `{}`: id {} used twice",
                c.name, c.id
            )));
        }
        comps.push(comp);
    }
    let entry = *comp_pos.get(&m.entry_computation_id).ok_or_else(|| {
        bad(format!(
            "entry computation id {} is not in the module",
            m.entry_computation_id
        ))
    })?;
    let mut module = Module {
        name: m.name.clone(),
        comps,
        entry,
        shapes,
        aliases: Vec::new(),
    };
    // XLA reads the host program shape (and aborts without one): it must be there
    // and agree with the entry computation.
    {
        let hps = m
            .host_program_shape
            .as_ref()
            .ok_or_else(|| bad("module has no host_program_shape".into()))?;
        let read = |s: &proto::ShapeProto| {
            read_shape(s).map_err(|e| bad(format!("host program shape: {e}")))
        };
        let params: Vec<Shape> = hps.parameters.iter().map(read).collect::<Result<_>>()?;
        let entry_params = entry_params(&module)?;
        if params != entry_params {
            return Err(bad(format!(
                "the host program shape's parameters differ from the entry computation's ({})",
                entry_params
                    .iter()
                    .map(Shape::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let root = module.result_shape();
        match &hps.result {
            Some(r) if read(r)? == root => {}
            _ => {
                return Err(bad(format!(
                    "the host program shape's result differs from the entry computation's root ({root})"
                )));
            }
        }
    }
    if let Some(a) = &m.input_output_alias {
        module.aliases = a
            .entries
            .iter()
            .map(|e| {
                if !e.parameter_shape_index.is_empty() {
                    return Err(bad(format!(
                        "an alias into parameter {} at index {:?}: entry parameters are arrays",
                        e.parameter_number, e.parameter_shape_index
                    )));
                }
                let parameter = u32::try_from(e.parameter_number).map_err(|_| {
                    bad(format!(
                        "an alias of parameter number {}",
                        e.parameter_number
                    ))
                })?;
                // A must-alias becomes a may-alias (the IR's only kind): the
                // program is the same, the buffer is reused when donated.
                let may = proto::Kind::MayAlias as i32;
                let must = proto::Kind::MustAlias as i32;
                if e.kind != may && e.kind != must {
                    return Err(bad(format!(
                        "alias kind {} of parameter {} is neither may-alias nor must-alias",
                        e.kind, e.parameter_number
                    )));
                }
                Ok(Alias {
                    output: e.output_shape_index.clone(),
                    parameter,
                })
            })
            .collect::<Result<_>>()?;
    }
    Ok(module)
}

/// The entry's parameter shapes, with every number declared.
fn entry_params(m: &Module) -> Result<Vec<Shape>> {
    let c = m.entry_comp();
    c.params
        .iter()
        .enumerate()
        .map(|(n, p)| {
            p.map(|i| m.shapes.get(c.instrs[i as usize].shape).clone())
                .ok_or_else(|| {
                    bad(format!(
                        "computation `{}`: parameter {n} is missing",
                        c.name
                    ))
                })
        })
        .collect()
}

fn raise_comp(
    c: &proto::HloComputationProto,
    rules: &dyn Rules,
    comp_pos: &HashMap<i64, CompId>,
    ids: &mut std::collections::HashSet<i64>,
    shapes: &mut ShapeTable,
    loc: &'static Location<'static>,
) -> Result<Comp> {
    let cname = &c.name;
    let mut r = Raising {
        comp: Comp::new(cname.clone(), None),
        shapes,
        slots: HashMap::with_capacity(c.instructions.len()),
        wholes: HashMap::new(),
        loc,
    };
    for ins in &c.instructions {
        let what = |e: String| {
            bad(format!(
                "instruction `{}` (id {}) of computation `{cname}`: {e}",
                ins.name, ins.id
            ))
        };
        if !ids.insert(ins.id) {
            return Err(what("id used twice".into()));
        }
        let declared = ins
            .shape
            .as_ref()
            .ok_or_else(|| what("no shape".into()))
            .and_then(|s| read_shape(s).map_err(what))?;
        let mut slots = Vec::with_capacity(ins.operand_ids.len());
        for o in &ins.operand_ids {
            match r.slots.get(o) {
                Some(s) => slots.push(*s),
                None => {
                    return Err(what(format!(
                        "operand id {o} is not an earlier instruction of the computation"
                    )));
                }
            }
        }
        // One result of a multi-result instruction: that value.
        if ins.opcode == "get-tuple-element" {
            if let [Slot::Multi(i)] = slots[..] {
                let v = Value {
                    instr: i,
                    result: u32::try_from(ins.tuple_index).unwrap_or(u32::MAX),
                };
                if !ins.called_computation_ids.is_empty() {
                    return Err(what(format!(
                        "`get-tuple-element` calls {} computations, expected 0",
                        ins.called_computation_ids.len()
                    )));
                }
                match r.shape_of(v) {
                    Some(s) if s == declared => {}
                    Some(s) => {
                        return Err(what(format!(
                            "declared {declared}, but element {} of its operand is {s}",
                            ins.tuple_index
                        )));
                    }
                    None => {
                        return Err(what(format!(
                            "tuple index {} out of range",
                            ins.tuple_index
                        )));
                    }
                }
                r.slots.insert(ins.id, Slot::One(v));
                continue;
            }
        }
        let operands: Operands = slots.iter().map(|s| r.value(*s)).collect();
        let operand_shapes: Vec<Shape> = operands
            .iter()
            .map(|v| r.shape_of(*v))
            .collect::<Option<_>>()
            .ok_or_else(|| what("an operand has no shape".into()))?;
        let refs: Vec<&Shape> = operand_shapes.iter().collect();
        let cx = RaiseCx {
            shape: &declared,
            operands: &refs,
            comp: &|id| comp_pos.get(&id).copied(),
        };
        let kind = raise_instruction(rules, ins, &cx).map_err(what)?;
        check_no_stray_attributes(rules, ins, &kind, &declared, &refs).map_err(what)?;
        let multi = kind.multi_result(operands.len());
        if multi && !declared.is_tuple() {
            return Err(what(format!(
                "`{}` has several results, but is declared {declared}",
                ins.opcode
            )));
        }
        let index = r.comp.instrs.len() as u32;
        if let OpKind::Parameter { number, .. } = &kind {
            let n = *number as usize;
            if n >= c.instructions.len() {
                return Err(what(format!("parameter number {n} out of range")));
            }
            if r.comp.params.len() <= n {
                r.comp.params.resize(n + 1, None);
            }
            if r.comp.params[n].replace(index).is_some() {
                return Err(what(format!("parameter {n} is declared twice")));
            }
        }
        let sharding = match &ins.sharding {
            Some(s) => Some(Box::new(
                super::Sharding::from_proto(s).map_err(|e| what(format!("sharding: {e}")))?,
            )),
            None => None,
        };
        let shape = r.shapes.intern(declared);
        r.comp.instrs.push(Instr {
            kind,
            operands,
            shape,
            loc,
            sharding,
        });
        let slot = if multi {
            Slot::Multi(index)
        } else {
            Slot::One(Value::of(index))
        };
        r.slots.insert(ins.id, slot);
    }
    let root = match r.slots.get(&c.root_id) {
        Some(s) => r.value(*s),
        None => {
            return Err(bad(format!(
                "computation `{cname}`: root id {} is not one of its instructions",
                c.root_id
            )));
        }
    };
    r.comp.root = Some(root);
    if let Some(ps) = &c.program_shape {
        let what = || {
            bad(format!(
                "computation `{cname}`: the program shape does not match the computation's parameters and root"
            ))
        };
        let declared: Vec<Shape> = ps
            .parameters
            .iter()
            .map(|s| read_shape(s).map_err(|_| what()))
            .collect::<Result<_>>()?;
        let params: Option<Vec<Shape>> = r
            .comp
            .params
            .iter()
            .map(|p| p.map(|i| r.shapes.get(r.comp.instrs[i as usize].shape).clone()))
            .collect();
        let result = r.shape_of(root);
        let result_ok = match &ps.result {
            Some(s) => read_shape(s).ok() == result,
            None => true,
        };
        if params.as_ref() != Some(&declared) || !result_ok {
            return Err(what());
        }
    }
    Ok(r.comp)
}

/// The attribute fields XLA reads by structure (dimension lists, dimension
/// numbers, windows, indices): each must be what the op's own lowering writes, so
/// a field the op does not use is refused (XLA crashes on some, e.g. dot dimension
/// numbers on a `call`). Fields that do not change what is computed (metadata,
/// sharding, frontend attributes) are not compared, nor is `precision_config`: a
/// dot's is read (and checked) by its raise rule, other ops' are ignored (a
/// convolution's precision is not modeled yet).
fn check_no_stray_attributes(
    rules: &dyn Rules,
    ins: &proto::HloInstructionProto,
    kind: &OpKind,
    shape: &Shape,
    operands: &[&Shape],
) -> std::result::Result<(), String> {
    let mut q = proto::HloInstructionProto::default();
    // Called computations are checked by the raise; their ids here are placeholders.
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
        Some((field, _)) => Err(format!(
            "`{}` has a `{field}` it does not use (or one that differs from its own)",
            ins.opcode
        )),
        None => Ok(()),
    }
}
