//! The typed intermediate representation under the builder.
//!
//! An instruction ([`Instr`]) is an op kind from one enum with typed attributes
//! ([`OpKind`], its attribute types in [`attrs`]), its operands ([`Value`]s: an
//! instruction and a result index, so an instruction may have several results), its
//! result shape (interned, a [`ShapeId`]) and the user's source location.
//! Computations ([`Comp`]) hold instructions in creation order, which is a
//! topological order. Protos exist only at the edges: `lower` turns a finished
//! [`Module`] into an `HloModuleProto`, [`raise`] reads one that comes from
//! outside into a [`Module`], which is then verified like any other.
//!
//! The IR knows no op family: the passes over it (the verifier [`verify`], the
//! lowering, the HLO text) are handed the per-op rules as a [`Rules`], which the op
//! library implements once. The structural fingerprint ([`Module::fingerprint`])
//! is the IR's own.

pub mod attrs;
pub(crate) mod complex_math;
pub(crate) mod lower;
pub mod op;
pub mod raise;
pub mod rules;
pub mod sharding;
pub(crate) mod text;
pub mod verify;

use std::collections::HashMap;
use std::panic::Location;

use indexmap::IndexMap;
use smallvec::SmallVec;

pub use op::{OpKind, Opcode};
pub use rules::{InferCx, LowerCx, OpText, RaiseCx, Rules, TextCx};
pub use sharding::Sharding;

use crate::shape::Shape;

/// One result of one instruction of a computation: the instruction's index in its
/// computation and the result's index (0 for single-result instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value {
    /// Index of the instruction in its computation.
    pub instr: u32,
    /// Which result of the instruction (0 unless the instruction has several).
    pub result: u32,
}

impl Value {
    /// Result 0 of instruction `instr`.
    pub fn of(instr: u32) -> Value {
        Value { instr, result: 0 }
    }
}

/// A computation's index in its graph or module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompId(pub u32);

/// An interned shape: an index into a [`ShapeTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(pub u32);

/// Each distinct shape stored once; instructions refer to shapes by id (a graph of a
/// million instructions typically has a few dozen distinct shapes).
#[derive(Clone, Debug, Default)]
pub struct ShapeTable {
    shapes: Vec<Shape>,
    index: HashMap<Shape, ShapeId>,
}

impl ShapeTable {
    /// The id of `s`, adding it if new.
    pub fn intern(&mut self, s: Shape) -> ShapeId {
        if let Some(id) = self.index.get(&s) {
            return *id;
        }
        let id = ShapeId(self.shapes.len() as u32);
        self.shapes.push(s.clone());
        self.index.insert(s, id);
        id
    }

    /// The shape with id `id`.
    pub fn get(&self, id: ShapeId) -> &Shape {
        &self.shapes[id.0 as usize]
    }

    /// Number of distinct shapes.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// True if no shape was interned.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }
}

/// Operands of an instruction: most have one to three, kept inline.
pub type Operands = SmallVec<[Value; 2]>;

/// One instruction.
#[derive(Clone, Debug)]
pub struct Instr {
    /// What it computes, with its typed attributes.
    pub kind: OpKind,
    /// Its operands, values of earlier instructions of the same computation.
    pub operands: Operands,
    /// Its result shape; for an instruction with several results, a tuple of them.
    pub shape: ShapeId,
    /// Where in the user's code it was built.
    pub loc: &'static Location<'static>,
    /// How an SPMD-partitioned program lays its value out over the partitions
    /// (XLA's instruction `sharding`); `None` leaves it to XLA's propagation.
    pub sharding: Option<Box<Sharding>>,
}

/// One computation: the entry, or a body called by an instruction (a reduce
/// combiner, later loop bodies and branches).
#[derive(Clone, Debug)]
pub struct Comp {
    /// Name for HLO text (made unique when lowered).
    pub name: String,
    /// Instructions in creation (topological) order.
    pub instrs: Vec<Instr>,
    /// Parameter instructions by parameter number; `None` for a number not
    /// declared (yet).
    pub params: Vec<Option<u32>>,
    /// The enclosing computation of a body under construction.
    pub parent: Option<CompId>,
    /// Values of the enclosing computation used in this body, each with the
    /// parameter instruction it arrives through (closure conversion).
    pub captures: IndexMap<Value, u32>,
    /// The result, once the computation is finished.
    pub root: Option<Value>,
}

impl Comp {
    pub(crate) fn new(name: String, parent: Option<CompId>) -> Comp {
        Comp {
            name,
            instrs: Vec::new(),
            params: Vec::new(),
            parent,
            captures: IndexMap::new(),
            root: None,
        }
    }

    /// The parameter instructions in number order (all declared).
    pub fn param_instrs(&self) -> impl Iterator<Item = u32> + '_ {
        self.params.iter().filter_map(|p| *p)
    }
}

/// An entry parameter whose buffer may be reused for an output (input/output
/// aliasing: with the parameter donated at execution, XLA updates it in place).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Alias {
    /// Which output: the index into the result tuple (empty for a non-tuple result).
    pub output: Vec<i64>,
    /// The entry parameter number.
    pub parameter: u32,
}

/// A finished module, every instruction checked by [`verify`]. One built here holds
/// the computations reachable from the entry (callees before callers, the entry
/// last), dead instructions removed; one raised from a proto ([`raise`]) holds its
/// computations in the proto's order (callees before callers).
#[derive(Clone, Debug)]
pub struct Module {
    /// The module's name.
    pub name: String,
    /// Computations; callees come before their callers.
    pub comps: Vec<Comp>,
    /// The entry computation.
    pub entry: CompId,
    /// The shapes instructions refer to.
    pub shapes: ShapeTable,
    /// Entry parameters that may share a buffer with an output.
    pub aliases: Vec<Alias>,
}

/// Where the shape rules of ops that call computations find their signatures.
pub trait Signatures {
    /// The parameter shapes and the result shape of computation `c`, if it is
    /// finished.
    fn signature(&self, c: CompId) -> Option<(Vec<Shape>, Shape)>;
}

/// The shape of value `v` of computation `c`: the instruction's shape, or one
/// element of it for a multi-result instruction.
pub fn value_shape<'a>(c: &Comp, shapes: &'a ShapeTable, v: Value) -> Option<&'a Shape> {
    let ins = c.instrs.get(v.instr as usize)?;
    let s = shapes.get(ins.shape);
    if ins.kind.multi_result(ins.operands.len()) {
        match s {
            Shape::Tuple(e) => e.get(v.result as usize),
            _ => None,
        }
    } else if v.result == 0 {
        Some(s)
    } else {
        None
    }
}

fn comp_signature(c: &Comp, shapes: &ShapeTable) -> Option<(Vec<Shape>, Shape)> {
    let root = c.root?;
    let params = c
        .params
        .iter()
        .map(|p| p.map(|i| shapes.get(c.instrs[i as usize].shape).clone()))
        .collect::<Option<Vec<_>>>()?;
    Some((params, value_shape(c, shapes, root)?.clone()))
}

impl Signatures for Module {
    fn signature(&self, c: CompId) -> Option<(Vec<Shape>, Shape)> {
        comp_signature(self.comps.get(c.0 as usize)?, &self.shapes)
    }
}

impl Module {
    /// The entry computation.
    pub fn entry_comp(&self) -> &Comp {
        &self.comps[self.entry.0 as usize]
    }

    /// Shapes of the entry computation's parameters, in number order.
    pub fn parameter_shapes(&self) -> Vec<Shape> {
        let c = self.entry_comp();
        c.param_instrs()
            .map(|i| self.shapes.get(c.instrs[i as usize].shape).clone())
            .collect()
    }

    /// Shape of the entry computation's result.
    pub fn result_shape(&self) -> Shape {
        let c = self.entry_comp();
        c.root
            .and_then(|r| value_shape(c, &self.shapes, r))
            .cloned()
            .unwrap_or(Shape::Tuple(Vec::new()))
    }

    /// The shape of output `index` of the entry's result (a path into nested tuples;
    /// empty for the whole result).
    pub fn output_shape(&self, index: &[i64]) -> Option<Shape> {
        let mut s = self.result_shape();
        for i in index {
            s = match s {
                Shape::Tuple(mut e) if *i >= 0 && (*i as usize) < e.len() => {
                    e.swap_remove(*i as usize)
                }
                _ => return None,
            };
        }
        Some(s)
    }

    /// Total number of instructions over all computations.
    pub fn instruction_count(&self) -> usize {
        self.comps.iter().map(|c| c.instrs.len()).sum()
    }

    /// A structural fingerprint (SHA-256) of the module: equal for modules that
    /// compute the same thing the same way, whatever their names and source
    /// locations. For caching compiled executables.
    pub fn fingerprint(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        use std::hash::{Hash, Hasher};
        struct Feed(Sha256);
        impl Hasher for Feed {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, bytes: &[u8]) {
                self.0.update(bytes);
            }
        }
        let mut h = Feed(Sha256::new());
        self.entry.hash(&mut h);
        self.aliases.hash(&mut h);
        for c in &self.comps {
            c.instrs.len().hash(&mut h);
            c.root.hash(&mut h);
            for ins in &c.instrs {
                ins.kind.hash_structure(&mut h);
                ins.operands.hash(&mut h);
                self.shapes.get(ins.shape).hash(&mut h);
                ins.sharding.hash(&mut h);
            }
        }
        h.0.finalize().into()
    }
}
