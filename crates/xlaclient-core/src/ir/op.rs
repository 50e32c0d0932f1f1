//! The op kinds of the IR: the opcode table (each op's name exactly as XLA spells
//! it, its arity and its doc) and [`OpKind`], an op with its typed attributes
//! (declared in [`attrs`](super::attrs)). What each op's attributes must satisfy,
//! how they lower and print, is supplied by the op library through
//! [`Rules`](super::Rules); the functions here say only what the IR's structure
//! needs (results, called computations, the fingerprint).

use std::hash::{Hash, Hasher};

use super::CompId;
use super::attrs::{
    BinaryOp, BitwiseOp, BitwiseUnary, Comparison, ConvAttrs, CustomCallAttrs, DotAttrs,
    GatherAttrs, PadDim, RngAlgorithm, ScatterAttrs, SliceAttrs, TriangularSolveOptions, UnaryOp,
    WindowDim,
};
use crate::error::{ShapeError, ShapeErrorKind};
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

macro_rules! opcodes {
    ($( #[doc = $doc:literal] $v:ident = $name:literal, $arity:expr; )*) => {
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

            /// The opcode XLA spells `name`.
            pub fn from_name(name: &str) -> Option<Opcode> {
                match name { $($name => Some(Opcode::$v),)* _ => None }
            }
        }
    };
}

use Arity::{Even, Fixed, Variadic};

opcodes! {
    /// A value passed into the computation.
    Parameter = "parameter", Fixed(0);
    /// A literal array.
    Constant = "constant", Fixed(0);
    /// `-x`.
    Negate = "negate", Fixed(1);
    /// `e^x`.
    Exponential = "exponential", Fixed(1);
    /// Natural logarithm.
    Log = "log", Fixed(1);
    /// Hyperbolic tangent.
    Tanh = "tanh", Fixed(1);
    /// Absolute value.
    Abs = "abs", Fixed(1);
    /// Square root.
    Sqrt = "sqrt", Fixed(1);
    /// `1 / sqrt(x)`.
    Rsqrt = "rsqrt", Fixed(1);
    /// Sine.
    Sine = "sine", Fixed(1);
    /// Cosine.
    Cosine = "cosine", Fixed(1);
    /// The logistic sigmoid `1 / (1 + e^-x)`.
    Logistic = "logistic", Fixed(1);
    /// Round down.
    Floor = "floor", Fixed(1);
    /// Round up.
    Ceil = "ceil", Fixed(1);
    /// -1, 0 or 1 by the sign of x.
    Sign = "sign", Fixed(1);
    /// `e^x - 1`, accurate near 0.
    ExponentialMinusOne = "exponential-minus-one", Fixed(1);
    /// `ln(1 + x)`, accurate near 0.
    LogPlusOne = "log-plus-one", Fixed(1);
    /// Sum.
    Add = "add", Fixed(2);
    /// Difference.
    Subtract = "subtract", Fixed(2);
    /// Product.
    Multiply = "multiply", Fixed(2);
    /// Quotient.
    Divide = "divide", Fixed(2);
    /// Element-wise maximum.
    Maximum = "maximum", Fixed(2);
    /// Element-wise minimum.
    Minimum = "minimum", Fixed(2);
    /// `x^y`.
    Power = "power", Fixed(2);
    /// Remainder with the sign of the dividend.
    Remainder = "remainder", Fixed(2);
    /// `atan2(y, x)`.
    Atan2 = "atan2", Fixed(2);
    /// Element-wise comparison giving `pred`.
    Compare = "compare", Fixed(2);
    /// Element-wise choice by a predicate.
    Select = "select", Fixed(3);
    /// BroadcastInDim: operand axes map to output axes; the rest are repeated.
    Broadcast = "broadcast", Fixed(1);
    /// Same elements, new dimensions (row-major order kept).
    Reshape = "reshape", Fixed(1);
    /// Permutes axes.
    Transpose = "transpose", Fixed(1);
    /// Converts each element to another type.
    Convert = "convert", Fixed(1);
    /// Groups values into a tuple.
    Tuple = "tuple", Variadic;
    /// One element of a tuple.
    GetTupleElement = "get-tuple-element", Fixed(1);
    /// DotGeneral: contraction with batch axes.
    Dot = "dot", Fixed(2);
    /// Reduces arrays over axes with a combiner computation.
    Reduce = "reduce", Even;
    /// Calls a computation on the operands (its parameters) and gives its result.
    Call = "call", Variadic;
    /// Counts 0, 1, 2, … along one axis.
    Iota = "iota", Fixed(0);
    /// A strided block of static bounds.
    Slice = "slice", Fixed(1);
    /// A block at run-time start indices.
    DynamicSlice = "dynamic-slice", Variadic;
    /// An array with a block replaced at run-time start indices.
    DynamicUpdateSlice = "dynamic-update-slice", Variadic;
    /// Joins arrays along one axis.
    Concatenate = "concatenate", Variadic;
    /// Pads (or cuts) the edges and the spaces between elements.
    Pad = "pad", Fixed(2);
    /// Reverses the order along axes.
    Reverse = "reverse", Fixed(1);
    /// Sorts several arrays together along one axis with a comparator computation.
    Sort = "sort", Variadic;
    /// Slices at many run-time starts (dimension numbers say how they are arranged).
    Gather = "gather", Fixed(2);
    /// Combines update windows into arrays at many run-time starts.
    Scatter = "scatter", Variadic;
    /// The same bits as another element type.
    BitcastConvert = "bitcast-convert", Fixed(1);
    /// Random bits from a counter-based generator state; gives the next state too.
    RngBitGenerator = "rng-bit-generator", Fixed(1);
    /// Reduces each window of arrays with a combiner computation (pooling).
    ReduceWindow = "reduce-window", Even;
    /// Scatters a source into the element each window selects (max-pool gradients).
    SelectAndScatter = "select-and-scatter", Fixed(3);
    /// Repeats a body computation on a carry while a condition computation holds.
    While = "while", Fixed(1);
    /// Bitwise (logical on pred) and.
    And = "and", Fixed(2);
    /// Bitwise (logical on pred) or.
    Or = "or", Fixed(2);
    /// Bitwise (logical on pred) exclusive or.
    Xor = "xor", Fixed(2);
    /// Bitwise (logical on pred) not.
    Not = "not", Fixed(1);
    /// Shift left.
    ShiftLeft = "shift-left", Fixed(2);
    /// Shift right, filling with the sign bit.
    ShiftRightArithmetic = "shift-right-arithmetic", Fixed(2);
    /// Shift right, filling with zeros.
    ShiftRightLogical = "shift-right-logical", Fixed(2);
    /// The number of set bits.
    Popcnt = "popcnt", Fixed(1);
    /// The number of leading zero bits.
    CountLeadingZeros = "count-leading-zeros", Fixed(1);
    /// Runs one of several branch computations, chosen by an index or predicate.
    Conditional = "conditional", Variadic;
    /// ConvGeneralDilated: a windowed contraction of an input with a kernel.
    Convolution = "convolution", Fixed(2);
    /// Applies a scalar computation element-wise to several arrays.
    Map = "map", Variadic;
    /// Its operand unchanged; computations are not moved across it.
    OptimizationBarrier = "opt-barrier", Fixed(1);
    /// A kernel of the plugin's, by name.
    CustomCall = "custom-call", Variadic;
    /// The Cholesky factor of symmetric positive-definite matrices.
    Cholesky = "cholesky", Fixed(1);
    /// Solves triangular systems.
    TriangularSolve = "triangular-solve", Fixed(2);
    /// Rounds to the nearest integer, halfway cases away from zero.
    RoundNearestAfz = "round-nearest-afz", Fixed(1);
    /// Rounds to the nearest integer, halfway cases to even.
    RoundNearestEven = "round-nearest-even", Fixed(1);
    /// Cube root.
    Cbrt = "cbrt", Fixed(1);
    /// Tangent.
    Tan = "tan", Fixed(1);
    /// The error function.
    Erf = "erf", Fixed(1);
    /// True where an element is neither infinite nor NaN (`pred` result).
    IsFinite = "is-finite", Fixed(1);
    /// `min(max(operand, min), max)`: min, operand, max; the bounds are scalars or of the operand's shape.
    Clamp = "clamp", Fixed(3);
}

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
    /// The opcode of the op.
    pub fn opcode(&self) -> Opcode {
        match self {
            OpKind::Parameter { .. } => Opcode::Parameter,
            OpKind::Constant(_) => Opcode::Constant,
            OpKind::Unary(u) => u.opcode(),
            OpKind::Binary(b) => b.opcode(),
            OpKind::Bitwise(b) => b.opcode(),
            OpKind::BitwiseUnary(u) => u.opcode(),
            OpKind::Compare(_) => Opcode::Compare,
            OpKind::Select => Opcode::Select,
            OpKind::Clamp => Opcode::Clamp,
            OpKind::Broadcast { .. } => Opcode::Broadcast,
            OpKind::Reshape => Opcode::Reshape,
            OpKind::Transpose { .. } => Opcode::Transpose,
            OpKind::Convert => Opcode::Convert,
            OpKind::Tuple => Opcode::Tuple,
            OpKind::GetTupleElement { .. } => Opcode::GetTupleElement,
            OpKind::Dot(_) => Opcode::Dot,
            OpKind::Reduce { .. } => Opcode::Reduce,
            OpKind::Call { .. } => Opcode::Call,
            OpKind::Iota { .. } => Opcode::Iota,
            OpKind::Slice(_) => Opcode::Slice,
            OpKind::DynamicSlice { .. } => Opcode::DynamicSlice,
            OpKind::DynamicUpdateSlice => Opcode::DynamicUpdateSlice,
            OpKind::Concatenate { .. } => Opcode::Concatenate,
            OpKind::Pad(_) => Opcode::Pad,
            OpKind::Reverse { .. } => Opcode::Reverse,
            OpKind::Sort { .. } => Opcode::Sort,
            OpKind::Gather(_) => Opcode::Gather,
            OpKind::BitcastConvert => Opcode::BitcastConvert,
            OpKind::Convolution(_) => Opcode::Convolution,
            OpKind::Map { .. } => Opcode::Map,
            OpKind::OptimizationBarrier => Opcode::OptimizationBarrier,
            OpKind::While { .. } => Opcode::While,
            OpKind::Conditional { .. } => Opcode::Conditional,
            OpKind::SelectAndScatter { .. } => Opcode::SelectAndScatter,
            OpKind::CustomCall(_) => Opcode::CustomCall,
            OpKind::Cholesky { .. } => Opcode::Cholesky,
            OpKind::TriangularSolve(_) => Opcode::TriangularSolve,
            OpKind::ReduceWindow { .. } => Opcode::ReduceWindow,
            OpKind::RngBitGenerator { .. } => Opcode::RngBitGenerator,
            OpKind::Scatter { .. } => Opcode::Scatter,
        }
    }

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

    /// The computations the instruction calls.
    pub fn called(&self) -> smallvec::SmallVec<[CompId; 2]> {
        match self {
            OpKind::Reduce { body, .. }
            | OpKind::Call { body }
            | OpKind::Scatter { body, .. }
            | OpKind::ReduceWindow { body, .. }
            | OpKind::Map { body, .. }
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
    fn arity_rules() {
        assert!(Arity::Fixed(2).accepts(2) && !Arity::Fixed(2).accepts(3));
        assert!(Arity::Even.accepts(4) && !Arity::Even.accepts(3) && !Arity::Even.accepts(0));
        assert!(Arity::Variadic.accepts(0));
    }

    #[test]
    fn op_kinds_stay_small() {
        // A million-instruction graph must fit in memory: the kind is boxed where
        // its attributes are large, and an instruction (kind, two inline operands,
        // shape id, location) stays at 72 bytes.
        assert!(
            std::mem::size_of::<OpKind>() <= 32,
            "{}",
            std::mem::size_of::<OpKind>()
        );
        let instr = std::mem::size_of::<super::super::Instr>();
        assert!(
            instr <= 72,
            "{instr} (kind {}, operands {})",
            std::mem::size_of::<OpKind>(),
            std::mem::size_of::<super::super::Operands>()
        );
    }
}
