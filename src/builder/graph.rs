//! The arena behind [`Builder`](super::Builder): computations and their instructions
//! in creation order (which is a topological order), and the translation to an
//! `HloModuleProto`.

use std::panic::Location;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::proto;
use crate::shape::Shape;

/// The index of an op whose construction failed.
pub(crate) const POISON: u32 = u32::MAX;

pub(crate) struct Instr {
    pub(crate) id: i64,
    pub(crate) opcode: &'static str,
    pub(crate) shape: Shape,
    pub(crate) operands: SmallVec<[u32; 4]>,
    pub(crate) proto: proto::HloInstructionProto,
    pub(crate) name: String,
    pub(crate) loc: &'static Location<'static>,
}

pub(crate) struct Computation {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) instrs: Vec<Instr>,
    /// (parameter number, instruction index)
    pub(crate) params: Vec<(usize, u32)>,
    /// Root of a finished sub-computation.
    pub(crate) root: Option<u32>,
}

pub(crate) struct Graph {
    pub(crate) name: String,
    pub(crate) computations: Vec<Computation>,
    next_id: i64,
    pub(crate) first_error: Option<Error>,
}

/// Checks that a shape can be part of a program (no negative dimensions).
pub(crate) fn check_shape(s: &Shape) -> std::result::Result<(), String> {
    match s {
        Shape::Array { dims, .. } => {
            if dims.iter().any(|d| *d < 0) {
                Err(format!("negative dimension in {s}"))
            } else {
                Ok(())
            }
        }
        Shape::Tuple(e) => e.iter().try_for_each(check_shape),
        Shape::Token => Ok(()),
    }
}

/// A name XLA accepts: letters, digits, `_`, `-`, `.`.
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

impl Graph {
    pub(crate) fn new(name: &str) -> Graph {
        Graph {
            name: sanitize(name),
            computations: Vec::new(),
            next_id: 1,
            first_error: None,
        }
    }

    fn fresh_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub(crate) fn add_computation(&mut self, name: &str) -> usize {
        let id = self.fresh_id();
        self.computations.push(Computation {
            id,
            name: format!("{}.{id}", sanitize(name)),
            instrs: Vec::new(),
            params: Vec::new(),
            root: None,
        });
        self.computations.len() - 1
    }

    /// Keeps the first error; later ones are usually consequences.
    pub(crate) fn record(&mut self, e: Error) {
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }

    pub(crate) fn shape(&self, comp: usize, idx: u32) -> &Shape {
        &self.computations[comp].instrs[idx as usize].shape
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        comp: usize,
        opcode: &'static str,
        shape: Shape,
        operands: &[u32],
        instr: proto::HloInstructionProto,
        name: Option<&str>,
        loc: &'static Location<'static>,
    ) -> u32 {
        let id = self.fresh_id();
        let name = format!("{}.{id}", sanitize(name.unwrap_or(opcode)));
        let c = &mut self.computations[comp];
        c.instrs.push(Instr {
            id,
            opcode,
            shape,
            operands: operands.into(),
            proto: instr,
            name,
            loc,
        });
        (c.instrs.len() - 1) as u32
    }

    /// The computations reachable from `entry` through called computations, callees
    /// before callers (the order XLA reads them in), without recursion.
    fn reachable_computations(&self, entry: usize) -> Vec<usize> {
        let mut order = Vec::new();
        let mut state = vec![0u8; self.computations.len()]; // 0 new, 1 open, 2 done
        let mut stack = vec![(entry, false)];
        while let Some((c, expanded)) = stack.pop() {
            if expanded {
                if state[c] != 2 {
                    state[c] = 2;
                    order.push(c);
                }
                continue;
            }
            if state[c] != 0 {
                continue;
            }
            state[c] = 1;
            stack.push((c, true));
            for i in &self.computations[c].instrs {
                for callee in &i.proto.called_computation_ids {
                    if let Some(k) = self.computations.iter().position(|x| x.id == *callee) {
                        if state[k] == 0 {
                            stack.push((k, false));
                        }
                    }
                }
            }
        }
        order
    }

    fn computation_proto(
        &self,
        c: usize,
        root: u32,
        loc: &'static Location<'static>,
    ) -> Result<proto::HloComputationProto> {
        let comp = &self.computations[c];
        // Parameters numbered 0..n without gaps.
        let mut params = comp.params.clone();
        params.sort();
        for (expect, (n, _)) in params.iter().enumerate() {
            if *n != expect {
                return Err(Error::Graph {
                    reason: format!(
                        "computation `{}` has parameters {:?}: they must be numbered 0..{} without gaps",
                        comp.name,
                        params.iter().map(|p| p.0).collect::<Vec<_>>(),
                        params.len()
                    ),
                    location: Some(loc),
                });
            }
        }
        // Keep what the root depends on, and every parameter (walk backwards: the
        // instructions are in topological order).
        let mut live = vec![false; comp.instrs.len()];
        live[root as usize] = true;
        for (_, p) in &params {
            live[*p as usize] = true;
        }
        for i in (0..comp.instrs.len()).rev() {
            if live[i] {
                for o in &comp.instrs[i].operands {
                    live[*o as usize] = true;
                }
            }
        }
        let mut instructions = Vec::new();
        for (i, ins) in comp.instrs.iter().enumerate() {
            if !live[i] {
                continue;
            }
            let mut p = ins.proto.clone();
            p.id = ins.id;
            p.name = ins.name.clone();
            p.opcode = ins.opcode.to_string();
            p.shape = Some(ins.shape.to_proto());
            p.operand_ids = ins
                .operands
                .iter()
                .map(|o| comp.instrs[*o as usize].id)
                .collect();
            p.metadata = Some(proto::OpMetadata {
                op_type: ins.opcode.to_string(),
                op_name: format!("{}/{}", self.name, ins.name),
                source_file: ins.loc.file().to_string(),
                source_line: ins.loc.line() as i32,
                ..Default::default()
            });
            instructions.push(p);
        }
        let program_shape = proto::ProgramShapeProto {
            parameters: params
                .iter()
                .map(|(_, i)| comp.instrs[*i as usize].shape.to_proto())
                .collect(),
            result: Some(comp.instrs[root as usize].shape.to_proto()),
            parameter_names: params
                .iter()
                .map(|(_, i)| comp.instrs[*i as usize].name.clone())
                .collect(),
        };
        Ok(proto::HloComputationProto {
            name: comp.name.clone(),
            instructions,
            program_shape: Some(program_shape),
            id: comp.id,
            root_id: comp.instrs[root as usize].id,
            ..Default::default()
        })
    }

    /// The module with computation `entry` as entry, `root` as its result.
    pub(crate) fn to_module(
        &self,
        entry: usize,
        root: u32,
        loc: &'static Location<'static>,
    ) -> Result<proto::HloModuleProto> {
        let mut computations = Vec::new();
        for c in self.reachable_computations(entry) {
            let r = if c == entry {
                root
            } else {
                self.computations[c].root.ok_or_else(|| Error::Graph {
                    reason: format!(
                        "sub-computation `{}` was never finished",
                        self.computations[c].name
                    ),
                    location: Some(loc),
                })?
            };
            computations.push(self.computation_proto(c, r, loc)?);
        }
        let entry_proto = computations
            .iter()
            .find(|c| c.id == self.computations[entry].id)
            .ok_or_else(|| Error::Graph {
                reason: "entry computation missing".into(),
                location: Some(loc),
            })?;
        Ok(proto::HloModuleProto {
            name: self.name.clone(),
            entry_computation_name: entry_proto.name.clone(),
            entry_computation_id: entry_proto.id,
            host_program_shape: entry_proto.program_shape.clone(),
            computations,
            id: 1,
            ..Default::default()
        })
    }
}
