//! Lowering a finished [`Module`] to XLA's `HloModuleProto`, and the walk that the
//! HLO text printer shares with it (same ids, names and instruction order).
//!
//! Ids are given in order: each computation (callees first, the entry last), then its
//! instructions. A use of one result of a multi-result instruction becomes a
//! `get-tuple-element` of it, emitted once, just before its first use.

use std::collections::HashMap;

use super::op::OpKind;
use super::{Comp, CompId, Instr, LowerCx, Module, Rules, Value, value_shape};
use crate::proto;
use crate::shape::Shape;

/// A lowered instruction as the walk hands it out.
pub(crate) struct Lowered<'a> {
    pub id: i64,
    pub name: String,
    pub shape: &'a Shape,
    /// Operand ids with their shapes.
    pub operands: Vec<(i64, &'a Shape)>,
    /// The IR instruction, or `None` for a `get-tuple-element` the walk inserted.
    pub instr: Option<&'a Instr>,
    /// The tuple index of an inserted `get-tuple-element`.
    pub gte_index: u32,
    pub is_root: bool,
}

/// A lowered computation's header.
pub(crate) struct CompHeader<'a> {
    pub id: i64,
    pub name: String,
    pub is_entry: bool,
    /// Parameter names and shapes, in number order.
    pub params: Vec<(String, &'a Shape)>,
    pub result: &'a Shape,
}

/// Receives the walk.
pub(crate) trait Sink<'a> {
    fn begin(&mut self, header: &CompHeader<'a>);
    fn instr(&mut self, comp: &CompHeader<'a>, ins: Lowered<'a>);
    fn end(&mut self, header: CompHeader<'a>, root_id: i64);
}

/// Names and ids of the module's computations, shared by lowering and text.
pub(crate) struct Names {
    pub comp_ids: Vec<i64>,
    pub comp_names: Vec<String>,
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "x".into() } else { s }
}

fn instr_name(ins: &Instr, id: i64) -> String {
    match &ins.kind {
        OpKind::Parameter { name, .. } => format!("{}.{id}", sanitize(name)),
        k => format!("{}.{id}", k.opcode().name()),
    }
}

/// Walks `m` in lowering order, handing each computation and instruction to `sink`.
pub(crate) fn walk<'a>(m: &'a Module, sink: &mut impl Sink<'a>) -> Names {
    let mut next = 1i64;
    let mut names = Names {
        comp_ids: Vec::with_capacity(m.comps.len()),
        comp_names: Vec::with_capacity(m.comps.len()),
    };
    for (ci, c) in m.comps.iter().enumerate() {
        let cid = next;
        next += 1;
        let is_entry = ci == m.entry.0 as usize;
        let base = if is_entry { &m.name } else { &c.name };
        names.comp_ids.push(cid);
        names.comp_names.push(format!("{}.{cid}", sanitize(base)));
        next = walk_comp(m, ci, c, cid, is_entry, next, &names, sink);
    }
    names
}

#[allow(clippy::too_many_arguments)]
fn walk_comp<'a>(
    m: &'a Module,
    ci: usize,
    c: &'a Comp,
    cid: i64,
    is_entry: bool,
    mut next: i64,
    names: &Names,
    sink: &mut impl Sink<'a>,
) -> i64 {
    let root = c.root.expect("a finished module's computations have roots");
    let mut header = CompHeader {
        id: cid,
        name: names.comp_names[ci].clone(),
        is_entry,
        params: Vec::new(),
        result: value_shape(c, &m.shapes, root).expect("verified root"),
    };
    let mut gtes: HashMap<Value, i64> = HashMap::new();
    // Parameters get their ids in number order first (they come first in XLA's
    // printout too), then the other instructions in order.
    let mut id_of = vec![0i64; c.instrs.len()];
    for p in c.param_instrs() {
        id_of[p as usize] = next;
        next += 1;
    }
    for (i, ins) in c.instrs.iter().enumerate() {
        if !matches!(ins.kind, OpKind::Parameter { .. }) {
            id_of[i] = next;
            next += 1;
        }
    }
    header.params = c
        .param_instrs()
        .map(|p| {
            let ins = &c.instrs[p as usize];
            (instr_name(ins, id_of[p as usize]), m.shapes.get(ins.shape))
        })
        .collect();
    sink.begin(&header);
    let root_is_gte = c.instrs[root.instr as usize]
        .kind
        .multi_result(c.instrs[root.instr as usize].operands.len());
    // Parameters first, in number order.
    let order: Vec<u32> = c
        .param_instrs()
        .chain(
            (0..c.instrs.len() as u32)
                .filter(|i| !matches!(c.instrs[*i as usize].kind, OpKind::Parameter { .. })),
        )
        .collect();
    for i in order {
        let ins = &c.instrs[i as usize];
        let mut operands = Vec::with_capacity(ins.operands.len());
        for v in &ins.operands {
            let src = &c.instrs[v.instr as usize];
            let shape = value_shape(c, &m.shapes, *v).expect("verified operand");
            if src.kind.multi_result(src.operands.len()) {
                let id = match gtes.get(v) {
                    Some(id) => *id,
                    None => {
                        let id = next;
                        next += 1;
                        gtes.insert(*v, id);
                        sink.instr(
                            &header,
                            Lowered {
                                id,
                                name: format!("get-tuple-element.{id}"),
                                shape,
                                operands: vec![(id_of[v.instr as usize], m.shapes.get(src.shape))],
                                instr: None,
                                gte_index: v.result,
                                is_root: false,
                            },
                        );
                        id
                    }
                };
                operands.push((id, shape));
            } else {
                operands.push((id_of[v.instr as usize], shape));
            }
        }
        let id = id_of[i as usize];
        sink.instr(
            &header,
            Lowered {
                id,
                name: instr_name(ins, id),
                shape: m.shapes.get(ins.shape),
                operands,
                instr: Some(ins),
                gte_index: 0,
                is_root: root.instr == i && !root_is_gte,
            },
        );
    }
    let root_id = if root_is_gte {
        let id = next;
        next += 1;
        let src = &c.instrs[root.instr as usize];
        sink.instr(
            &header,
            Lowered {
                id,
                name: format!("get-tuple-element.{id}"),
                shape: header.result,
                operands: vec![(id_of[root.instr as usize], m.shapes.get(src.shape))],
                instr: None,
                gte_index: root.result,
                is_root: true,
            },
        );
        id
    } else {
        id_of[root.instr as usize]
    };
    sink.end(header, root_id);
    next
}

struct ProtoSink<'a> {
    rules: &'a dyn Rules,
    module_name: &'a str,
    comp_ids: HashMap<CompId, i64>,
    /// Finished computations; when streaming, without their instructions.
    comps: Vec<proto::HloComputationProto>,
    current: Vec<proto::HloInstructionProto>,
    /// Streaming: each instruction is encoded as soon as it is made (a prost
    /// instruction is kilobytes; a million of them must not be held at once).
    stream: Option<Streams>,
}

#[derive(Default)]
struct Streams {
    /// The current computation's encoded instructions (field 2 entries).
    current: Vec<u8>,
    /// Each finished computation, encoded.
    comps: Vec<Vec<u8>>,
}

impl<'a> Sink<'a> for ProtoSink<'a> {
    fn begin(&mut self, _: &CompHeader<'a>) {}

    fn instr(&mut self, _: &CompHeader<'a>, l: Lowered<'a>) {
        let mut p = proto::HloInstructionProto {
            id: l.id,
            shape: Some(l.shape.to_proto()),
            operand_ids: l.operands.iter().map(|(id, _)| *id).collect(),
            ..Default::default()
        };
        match l.instr {
            Some(ins) => {
                let opcode = ins.kind.opcode().name();
                p.opcode = opcode.to_string();
                let shapes: Vec<&Shape> = l.operands.iter().map(|(_, s)| *s).collect();
                let ids = &self.comp_ids;
                let cx = LowerCx {
                    shape: l.shape,
                    operands: &shapes,
                    comp_id: &|c| ids[&c],
                };
                self.rules.lower(&ins.kind, &cx, &mut p);
                p.sharding = ins.sharding.as_ref().map(|s| s.to_proto());
                p.metadata = Some(proto::OpMetadata {
                    op_type: opcode.to_string(),
                    op_name: format!("{}/{}", self.module_name, l.name),
                    source_file: ins.loc.file().to_string(),
                    source_line: ins.loc.line() as i32,
                    ..Default::default()
                });
            }
            None => {
                p.opcode = "get-tuple-element".to_string();
                p.tuple_index = l.gte_index as i64;
            }
        }
        p.name = l.name;
        match &mut self.stream {
            Some(st) => prost::encoding::message::encode(2, &p, &mut st.current),
            None => self.current.push(p),
        }
    }

    fn end(&mut self, h: CompHeader<'a>, root_id: i64) {
        let program_shape = proto::ProgramShapeProto {
            parameters: h.params.iter().map(|(_, s)| s.to_proto()).collect(),
            result: Some(h.result.to_proto()),
            parameter_names: h.params.iter().map(|(n, _)| n.clone()).collect(),
        };
        let id = h.id;
        self.comp_ids.insert(CompId(self.comps.len() as u32), id);
        let comp = proto::HloComputationProto {
            name: h.name,
            instructions: std::mem::take(&mut self.current),
            program_shape: Some(program_shape),
            id,
            root_id,
            ..Default::default()
        };
        if let Some(st) = &mut self.stream {
            // Fields may come in any order and repeated ones concatenate: the
            // computation's other fields, then its instructions.
            use prost::Message;
            let mut bytes = comp.encode_to_vec();
            bytes.append(&mut st.current);
            st.comps.push(bytes);
        }
        self.comps.push(comp);
    }
}

fn lower(m: &Module, rules: &dyn Rules, stream: bool) -> (proto::HloModuleProto, Option<Streams>) {
    let m = &*super::complex_math::expand(m);
    let name = lower_name(&m.name);
    let mut sink = ProtoSink {
        rules,
        module_name: &name,
        comp_ids: HashMap::new(),
        comps: Vec::with_capacity(m.comps.len()),
        current: Vec::new(),
        stream: stream.then(Streams::default),
    };
    walk(m, &mut sink);
    let entry = &sink.comps[m.entry.0 as usize];
    let input_output_alias = (!m.aliases.is_empty()).then(|| proto::HloInputOutputAliasProto {
        entries: m
            .aliases
            .iter()
            .map(|a| proto::hlo_input_output_alias_proto::AliasEntryProto {
                output_shape_index: a.output.clone(),
                parameter_number: a.parameter as i64,
                parameter_shape_index: Vec::new(),
                kind: proto::Kind::MayAlias as i32,
            })
            .collect(),
    });
    let module = proto::HloModuleProto {
        name: name.clone(),
        entry_computation_name: entry.name.clone(),
        entry_computation_id: entry.id,
        host_program_shape: entry.program_shape.clone(),
        computations: sink.comps,
        id: 1,
        input_output_alias,
        ..Default::default()
    };
    (module, sink.stream)
}

/// The module as an `HloModuleProto`, each op's attributes written by `rules`. `m`
/// must have passed [`verify`](super::verify).
pub(crate) fn to_proto(m: &Module, rules: &dyn Rules) -> proto::HloModuleProto {
    lower(m, rules, false).0
}

/// The module as a serialized `HloModuleProto`, encoded instruction by instruction
/// (the same bytes' meaning as encoding [`to_proto`], without holding every
/// instruction's proto at once). `m` must have passed [`verify`](super::verify).
pub(crate) fn to_bytes(m: &Module, rules: &dyn Rules) -> Vec<u8> {
    use prost::Message;
    let (mut module, streams) = lower(m, rules, true);
    module.computations.clear();
    let mut out = module.encode_to_vec();
    for c in streams.expect("streaming").comps {
        prost::encoding::encode_key(3, prost::encoding::WireType::LengthDelimited, &mut out);
        prost::encoding::encode_varint(c.len() as u64, &mut out);
        out.extend_from_slice(&c);
    }
    out
}

/// The module's name as XLA accepts it.
pub(crate) fn lower_name(name: &str) -> String {
    sanitize(name)
}
