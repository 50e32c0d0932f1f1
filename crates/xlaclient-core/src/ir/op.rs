//! The op kinds of the IR: [`Opcode`] (each op's name exactly as XLA spells it, its
//! arity and its doc) and [`OpKind`], an op with its typed attributes (declared in
//! [`attrs`](super::attrs)). `Opcode` and [`OpKind::opcode`] are generated from the
//! crate's op table (`src/op_table.rs`, one line per op), of which the IR reads the
//! doc, name, arity and kind only. What each op's attributes must satisfy,
//! how they lower and print, is supplied by the op library through
//! [`Rules`](super::Rules); the functions here say only what the IR's structure
//! needs (results, called computations, the fingerprint).

use std::hash::{Hash, Hasher};

use super::CompId;
use super::attrs::{
    BinaryOp, BitwiseOp, BitwiseUnary, CollectiveAttrs, Comparison, ConvAttrs, CustomCallAttrs,
    DotAttrs, GatherAttrs, PadDim, PermuteAttrs, RngAlgorithm, ScatterAttrs, SliceAttrs,
    TriangularSolveOptions, UnaryOp, WindowDim,
};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::op_table::for_each_op;
use crate::shape::Shape;

/// How many operands an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Fixed(usize),
    /// Any number (tuple).
    Variadic,
    /// A positive even number (reduce: inputs, then as many initial values).
    Even,
}

impl Arity {
    /// True if `n` operands fit.
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Fixed(k) => n == k,
            Arity::Variadic => true,
            Arity::Even => n > 0 && n % 2 == 0,
        }
    }
}

/// Generates [`Opcode`] and [`OpKind::opcode`] from the op table
/// (`src/op_table.rs`): the doc, XLA's name, the arity and the `OpKind` variant of
/// each entry. The family and the rule slots are the op library's; they are matched
/// as tokens and dropped here.
macro_rules! opcodes {
    ($(
        #[doc = $doc:literal]
        $v:ident = $name:literal, $arity:expr,
        kind: $kind:ident $(($($member:tt)*))?,
        stablehlo: $shlo:literal,
        $fam:ident { $($rules:tt)* };
    )*) => {
        /// Every HLO opcode the crate emits: one entry per op, named as XLA names it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opcode {
            $( #[doc = $doc] $v, )*
        }

        impl Opcode {
            /// Every opcode, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$v),*];

            /// The opcode as XLA spells it in `HloInstructionProto.opcode` and HLO text.
            pub fn name(self) -> &'static str {
                match self { $(Opcode::$v => $name,)* }
            }

            /// How many operands it takes.
            pub fn arity(self) -> Arity {
                match self { $(Opcode::$v => $arity,)* }
            }

            /// One line on what it computes.
            pub fn doc(self) -> &'static str {
                match self { $(Opcode::$v => $doc.trim(),)* }
            }

            /// The MLIR op the opcode prints as in StableHLO text
            /// (`Computation::to_stablehlo`): `"stablehlo.add"`, `"func.call"`
            /// for `call`, `"func.func"` for `parameter` (a function's or a
            /// region's arguments), `"stablehlo.case"` for `conditional` (whose
            /// `pred`-selected form prints as `"stablehlo.if"`).
            pub fn stablehlo_name(self) -> &'static str {
                match self { $(Opcode::$v => $shlo,)* }
            }

            /// The opcode XLA spells `name`.
            pub fn from_name(name: &str) -> Option<Opcode> {
                match name { $($name => Some(Opcode::$v),)* _ => None }
            }
        }

        impl OpKind {
            /// The opcode of the op. The match has no catch-all: an `OpKind` variant
            /// (or a member of a group such as [`UnaryOp`]) that no entry names does
            /// not compile, and two entries naming one are an unreachable pattern.
            #[deny(unreachable_patterns)]
            pub fn opcode(&self) -> Opcode {
                match self {
                    $(kind_pattern!($kind $(($($member)*))?) => Opcode::$v,)*
                }
            }
        }
    };
}

/// The pattern of an entry's `kind`: `Reverse` is `OpKind::Reverse { .. }` (which
/// matches a unit, tuple or struct variant), `Unary(UnaryOp::Negate)` is itself.
macro_rules! kind_pattern {
    ($kind:ident) => {
        OpKind::$kind { .. }
    };
    ($kind:ident($($member:tt)*)) => {
        OpKind::$kind($($member)*)
    };
}

use Arity::{Even, Fixed, Variadic};

for_each_op!(opcodes);

/// An instruction's op with its typed attributes. Attributes that the result shape
/// already says (a reshape's dimensions, a convert's element type) are not
/// repeated here.
#[derive(Clone, Debug, PartialEq, Hash)]
pub enum OpKind {
    /// Parameter `number` of the computation, with a name for HLO text.
    Parameter {
        /// Position in the computation's signature.
        number: u32,
        /// Name for HLO text.
        name: Box<str>,
    },
    /// A literal: the elements' little-endian bytes in row-major order (`pred` as
    /// one byte 0 or 1); the shape is the instruction's.
    Constant(Box<[u8]>),
    /// An element-wise unary op.
    Unary(UnaryOp),
    /// An element-wise binary op.
    Binary(BinaryOp),
    /// A bitwise binary op.
    Bitwise(BitwiseOp),
    /// A bitwise unary op.
    BitwiseUnary(BitwiseUnary),
    /// An element-wise comparison (the comparison type follows the element type).
    Compare(Comparison),
    /// `select(pred, on_true, on_false)`.
    Select,
    /// `clamp(min, operand, max)`.
    Clamp,
    /// BroadcastInDim: operand axis `i` becomes output axis `dims[i]`.
    Broadcast {
        /// Output axis of each operand axis.
        dims: Box<[i64]>,
    },
    /// Reshape to the instruction's dimensions.
    Reshape,
    /// Transpose: output axis `i` is operand axis `perm[i]`.
    Transpose {
        /// The permutation.
        perm: Box<[i64]>,
    },
    /// Convert to the instruction's element type.
    Convert,
    /// A tuple of the operands.
    Tuple,
    /// Element `index` of a tuple operand.
    GetTupleElement {
        /// The element.
        index: u32,
    },
    /// DotGeneral with operand precisions; the result's element type is the
    /// preferred element type.
    Dot(Box<DotAttrs>),
    /// Variadic reduce: `n` inputs then `n` initial values, combined by `body`
    /// over `axes` (sorted, non-negative). Has `n` results when `n > 1`.
    Reduce {
        /// The reduced axes.
        axes: Box<[i64]>,
        /// The combiner computation.
        body: CompId,
    },
    /// A call of `body` with the operands as its parameters.
    Call {
        /// The called computation.
        body: CompId,
    },
    /// Iota along `dimension` of the instruction's shape.
    Iota {
        /// The counting axis.
        dimension: i64,
    },
    /// A static slice.
    Slice(Box<SliceAttrs>),
    /// Operand, then one start index per axis; the result has `sizes`.
    DynamicSlice {
        /// The block's sizes.
        sizes: Box<[i64]>,
    },
    /// Operand, update, then one start index per axis.
    DynamicUpdateSlice,
    /// Concatenation along `dimension`.
    Concatenate {
        /// The joined axis.
        dimension: i64,
    },
    /// Operand and padding value; one entry per axis.
    Pad(Box<[PadDim]>),
    /// Reversal along `axes`.
    Reverse {
        /// The reversed axes.
        axes: Box<[i64]>,
    },
    /// Sort of the operands along `dimension` by `comparator`; one result per
    /// operand (several when there are several operands).
    Sort {
        /// The sorted axis.
        dimension: i64,
        /// Keep equal elements in order.
        stable: bool,
        /// The comparator computation (`less(lhs_0, rhs_0, lhs_1, rhs_1, …)`).
        comparator: CompId,
    },
    /// Gather of the operand at the indices.
    Gather(Box<GatherAttrs>),
    /// Bitcast to the instruction's element type.
    BitcastConvert,
    /// Convolution of the input with the kernel.
    Convolution(Box<ConvAttrs>),
    /// Map of `body` over the operands' elements.
    Map {
        /// Every axis, in order (XLA's `dimensions`).
        dims: Box<[i64]>,
        /// The scalar function.
        body: CompId,
    },
    /// An optimization barrier.
    OptimizationBarrier,
    /// A while loop on a tuple carry; one result per carry element.
    While {
        /// The condition computation (carry → `pred[]`).
        cond: CompId,
        /// The body computation (carry → carry).
        body: CompId,
    },
    /// A conditional: selector, then one operand per branch; one result per element
    /// of the branches' tuple result.
    Conditional {
        /// The branch computations.
        branches: Box<[CompId]>,
    },
    /// Select-and-scatter: operand, source, initial value.
    SelectAndScatter {
        /// One entry per axis of the operand.
        window: Box<[WindowDim]>,
        /// `select(a, b)`: keep `a` over `b` (a `pred` scalar).
        select: CompId,
        /// `scatter(acc, x)`: combines source values landing on one element.
        scatter: CompId,
    },
    /// A custom call; the result shape is the instruction's.
    CustomCall(Box<CustomCallAttrs>),
    /// Cholesky factorization.
    Cholesky {
        /// The lower factor (else the upper).
        lower: bool,
    },
    /// A triangular solve: `a`, then `b`.
    TriangularSolve(TriangularSolveOptions),
    /// Reduce-window: `n` inputs then `n` initial values; several results when
    /// `n > 1`.
    ReduceWindow {
        /// One entry per axis.
        window: Box<[WindowDim]>,
        /// The combiner computation.
        body: CompId,
    },
    /// Random bits of the second result's shape from the state operand; results
    /// `(new state, bits)`.
    RngBitGenerator {
        /// The generator.
        algorithm: RngAlgorithm,
    },
    /// Scatter: `n` inputs, the indices, `n` updates, combined by `body`; several
    /// results when `n > 1`.
    Scatter {
        /// Dimension numbers and promises.
        attrs: Box<ScatterAttrs>,
        /// The combiner computation.
        body: CompId,
    },
    /// The replica the program runs as (`u32[]`).
    ReplicaId,
    /// The partition the program runs as (`u32[]`).
    PartitionId,
    /// The operand combined by `body` over the devices of each replica group.
    AllReduce {
        /// The replica groups and channel.
        attrs: Box<CollectiveAttrs>,
        /// The combiner computation.
        body: CompId,
    },
    /// The operands of each replica group joined along `dimension`.
    AllGather {
        /// The replica groups and channel.
        attrs: Box<CollectiveAttrs>,
        /// The joined axis.
        dimension: i64,
    },
    /// The operand combined by `body` over each replica group, then split along
    /// `dimension`: each device keeps its block.
    ReduceScatter {
        /// The replica groups and channel.
        attrs: Box<CollectiveAttrs>,
        /// The split axis.
        dimension: i64,
        /// The combiner computation.
        body: CompId,
    },
    /// The operand sent from each source device to its target.
    CollectivePermute(Box<PermuteAttrs>),
    /// The operand split along `dimension` into one block per group member, block
    /// `j` sent to member `j`, the received blocks joined along `dimension`.
    AllToAll {
        /// The replica groups and channel.
        attrs: Box<CollectiveAttrs>,
        /// The split (and join) axis.
        dimension: i64,
    },
}

impl Opcode {
    /// An error naming the op unless it takes `operands.len()` operands.
    pub fn check_arity(self, operands: &[&Shape]) -> Result<(), ShapeError> {
        if self.arity().accepts(operands.len()) {
            return Ok(());
        }
        Err(ShapeError::new(
            self.name(),
            operands,
            ShapeErrorKind::Arity,
            format!("takes {:?} operands, got {}", self.arity(), operands.len()),
        ))
    }
}

impl OpKind {
    /// True if the instruction has several results (its shape is then the tuple of
    /// them, and each use takes one).
    pub fn multi_result(&self, n_operands: usize) -> bool {
        match self {
            OpKind::Reduce { .. } => n_operands > 2,
            OpKind::Sort { .. } => n_operands > 1,
            OpKind::Scatter { .. } => n_operands > 3,
            OpKind::RngBitGenerator { .. } | OpKind::While { .. } | OpKind::Conditional { .. } => {
                true
            }
            OpKind::ReduceWindow { .. } => n_operands > 2,
            _ => false,
        }
    }

    /// Whether the op has a side effect (a custom call declared so: a host
    /// callback), which keeps it in the program when no result depends on it.
    pub fn has_side_effect(&self) -> bool {
        matches!(self, OpKind::CustomCall(a) if a.has_side_effect)
    }

    /// The computations the instruction calls.
    pub fn called(&self) -> smallvec::SmallVec<[CompId; 2]> {
        match self {
            OpKind::Reduce { body, .. }
            | OpKind::Call { body }
            | OpKind::Scatter { body, .. }
            | OpKind::ReduceWindow { body, .. }
            | OpKind::Map { body, .. }
            | OpKind::AllReduce { body, .. }
            | OpKind::ReduceScatter { body, .. }
            | OpKind::Sort {
                comparator: body, ..
            } => smallvec::smallvec![*body],
            OpKind::SelectAndScatter {
                select, scatter, ..
            } => smallvec::smallvec![*select, *scatter],
            OpKind::While { cond, body } => smallvec::smallvec![*cond, *body],
            OpKind::Conditional { branches } => branches.iter().copied().collect(),
            _ => smallvec::SmallVec::new(),
        }
    }

    /// The same op calling `f(c)` in place of each called computation `c`.
    pub(crate) fn remap_called(&mut self, f: impl Fn(CompId) -> CompId) {
        match self {
            OpKind::Reduce { body, .. }
            | OpKind::Call { body }
            | OpKind::Sort {
                comparator: body, ..
            }
            | OpKind::Scatter { body, .. }
            | OpKind::ReduceWindow { body, .. }
            | OpKind::AllReduce { body, .. }
            | OpKind::ReduceScatter { body, .. }
            | OpKind::Map { body, .. } => *body = f(*body),
            OpKind::SelectAndScatter {
                select, scatter, ..
            } => {
                *select = f(*select);
                *scatter = f(*scatter);
            }
            OpKind::While { cond, body } => {
                *cond = f(*cond);
                *body = f(*body);
            }
            OpKind::Conditional { branches } => branches.iter_mut().for_each(|b| *b = f(*b)),
            _ => {}
        }
    }

    /// Feeds what the op computes into `h`: everything but names (parameter names
    /// do not change what a module computes).
    pub(crate) fn hash_structure<H: Hasher>(&self, h: &mut H) {
        match self {
            OpKind::Parameter { number, .. } => {
                self.opcode().hash(h);
                number.hash(h);
            }
            k => k.hash(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_names_are_distinct_and_spelled_as_xla_does() {
        let mut names: Vec<&str> = Opcode::ALL.iter().map(|o| o.name()).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two opcodes share a name");
        for o in Opcode::ALL {
            let name = o.name();
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit()),
                "{name}"
            );
            assert!(!o.doc().is_empty(), "{o:?} has no doc");
        }
        assert_eq!(Opcode::Exponential.name(), "exponential");
        assert_eq!(Opcode::GetTupleElement.name(), "get-tuple-element");
        assert_eq!(Opcode::Dot.name(), "dot");
    }

    #[test]
    fn the_kind_of_each_entry_agrees_with_its_group() {
        // The table's `kind: Unary(UnaryOp::Negate)` and the group's own mapping
        // (`UnaryOp::opcode`, by name) give the same opcode.
        for &u in UnaryOp::ALL {
            assert_eq!(OpKind::Unary(u).opcode(), u.opcode());
        }
        for &b in BinaryOp::ALL {
            assert_eq!(OpKind::Binary(b).opcode(), b.opcode());
        }
        for &b in BitwiseOp::ALL {
            assert_eq!(OpKind::Bitwise(b).opcode(), b.opcode());
        }
        for &u in BitwiseUnary::ALL {
            assert_eq!(OpKind::BitwiseUnary(u).opcode(), u.opcode());
        }
        assert_eq!(OpKind::Select.opcode(), Opcode::Select);
        assert_eq!(
            OpKind::Reverse { axes: [0].into() }.opcode(),
            Opcode::Reverse
        );
    }

    #[test]
    fn arity_rules() {
        assert!(Arity::Fixed(2).accepts(2) && !Arity::Fixed(2).accepts(3));
        assert!(Arity::Even.accepts(4) && !Arity::Even.accepts(3) && !Arity::Even.accepts(0));
        assert!(Arity::Variadic.accepts(0));
    }

    #[test]
    fn op_kinds_stay_small() {
        // A million-instruction graph must fit in memory: the kind is boxed where
        // its attributes are large, and an instruction (kind, two inline operands,
        // shape id, location, the optional boxed sharding) stays at 80 bytes.
        assert!(
            std::mem::size_of::<OpKind>() <= 32,
            "{}",
            std::mem::size_of::<OpKind>()
        );
        let instr = std::mem::size_of::<super::super::Instr>();
        assert!(
            instr <= 80,
            "{instr} (kind {}, operands {})",
            std::mem::size_of::<OpKind>(),
            std::mem::size_of::<super::super::Operands>()
        );
    }
}
