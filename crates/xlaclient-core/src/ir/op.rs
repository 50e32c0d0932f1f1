//! The op kinds of the IR: the opcode table (each op's name exactly as XLA spells
//! it, its arity and its doc) and [`OpKind`], an op with its typed attributes. The
//! attribute types, shape rules and lowerings themselves live with their op family
//! in [`crate::ops`]; the functions here only dispatch on the kind.

use std::fmt::Write;
use std::hash::{Hash, Hasher};

use super::{CompId, Signatures};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ops::bitwise::{self, BitwiseOp, BitwiseUnary};
use crate::ops::elementwise::{self, BinaryOp, Comparison, UnaryOp};
use crate::ops::indexing::{self, GatherAttrs, ScatterAttrs};
use crate::ops::linalg::{self, ConvAttrs, ConvDims, DotAttrs, TriangularSolveOptions};
use crate::ops::misc::{self, CustomCallAttrs};
use crate::ops::random::{self, RngAlgorithm};
use crate::ops::slicing::{self, PadDim, SliceAttrs};
use crate::ops::window::{self, WindowDim};
use crate::ops::{control, reduction, shape_ops, sorting, structural};
use crate::proto;
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
#[derive(Clone, Debug, PartialEq)]
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
        self.opcode().hash(h);
        match self {
            OpKind::Parameter { number, .. } => number.hash(h),
            OpKind::Constant(bytes) => bytes.hash(h),
            OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Bitwise(_) | OpKind::BitwiseUnary(_) => {
            }
            OpKind::Compare(c) => c.hash(h),
            OpKind::Select | OpKind::Clamp | OpKind::Reshape | OpKind::Convert | OpKind::Tuple => {}
            OpKind::Broadcast { dims } => dims.hash(h),
            OpKind::Transpose { perm } => perm.hash(h),
            OpKind::GetTupleElement { index } => index.hash(h),
            OpKind::Dot(d) => d.hash(h),
            OpKind::Reduce { axes, body } => {
                axes.hash(h);
                body.hash(h);
            }
            OpKind::Call { body } => body.hash(h),
            OpKind::Iota { dimension } | OpKind::Concatenate { dimension } => dimension.hash(h),
            OpKind::Slice(s) => s.hash(h),
            OpKind::DynamicSlice { sizes } => sizes.hash(h),
            OpKind::DynamicUpdateSlice => {}
            OpKind::Pad(c) => c.hash(h),
            OpKind::Reverse { axes } => axes.hash(h),
            OpKind::Sort {
                dimension,
                stable,
                comparator,
            } => (dimension, stable, comparator).hash(h),
            OpKind::Gather(a) => a.hash(h),
            OpKind::BitcastConvert => {}
            OpKind::Convolution(a) => a.hash(h),
            OpKind::Map { dims, body } => (dims, body).hash(h),
            OpKind::OptimizationBarrier => {}
            OpKind::While { cond, body } => (cond, body).hash(h),
            OpKind::Conditional { branches } => branches.hash(h),
            OpKind::SelectAndScatter {
                window,
                select,
                scatter,
            } => (window, select, scatter).hash(h),
            OpKind::CustomCall(a) => a.hash(h),
            OpKind::Cholesky { lower } => lower.hash(h),
            OpKind::TriangularSolve(o) => o.hash(h),
            OpKind::RngBitGenerator { algorithm } => algorithm.hash(h),
            OpKind::ReduceWindow { window, body } => (window, body).hash(h),
            OpKind::Scatter { attrs, body } => (attrs, body).hash(h),
        }
    }
}

/// The shape rule of `kind` on `operands`: the one source of truth, run by the
/// builder for each new instruction and by the verifier for each instruction of a
/// finished module. `target` is the result shape asked for by ops whose attributes
/// live in it (parameter, constant, reshape, broadcast, convert); the others ignore
/// it.
pub fn infer(
    kind: &OpKind,
    operands: &[&Shape],
    target: Option<&Shape>,
    sigs: &dyn Signatures,
) -> Result<Shape, ShapeError> {
    let op = kind.opcode();
    if !op.arity().accepts(operands.len()) {
        return Err(ShapeError::new(
            op.name(),
            operands,
            ShapeErrorKind::Arity,
            format!("takes {:?} operands, got {}", op.arity(), operands.len()),
        ));
    }
    let need_target = || {
        target.ok_or_else(|| {
            ShapeError::new(
                op.name(),
                operands,
                ShapeErrorKind::Attribute,
                "needs its result shape",
            )
        })
    };
    match kind {
        OpKind::Parameter { .. } => structural::infer_parameter(need_target()?),
        OpKind::Constant(bytes) => structural::infer_constant(bytes, need_target()?),
        OpKind::Unary(u) => elementwise::infer_unary(*u, operands[0]),
        OpKind::Binary(b) => elementwise::infer_binary(*b, operands[0], operands[1]),
        OpKind::Bitwise(b) => bitwise::infer_bitwise(*b, operands[0], operands[1]),
        OpKind::BitwiseUnary(u) => bitwise::infer_bitwise_unary(*u, operands[0]),
        OpKind::Compare(c) => elementwise::infer_compare(*c, operands[0], operands[1]),
        OpKind::Select => elementwise::infer_select(operands[0], operands[1], operands[2]),
        OpKind::Clamp => elementwise::infer_clamp(operands[0], operands[1], operands[2]),
        OpKind::Broadcast { dims } => {
            shape_ops::infer_broadcast_in_dim(operands[0], need_target()?.dims(), dims)
        }
        OpKind::Reshape => shape_ops::infer_reshape(operands[0], need_target()?.dims()),
        OpKind::Transpose { perm } => shape_ops::infer_transpose(operands[0], perm),
        OpKind::Convert => {
            let to = need_target()?.element_type().ok_or_else(|| {
                ShapeError::new(
                    "convert",
                    operands,
                    ShapeErrorKind::ElementType,
                    "converts to an array type",
                )
            })?;
            shape_ops::infer_convert(operands[0], to)
        }
        OpKind::Tuple => structural::infer_tuple(operands),
        OpKind::GetTupleElement { index } => {
            shape_ops::infer_get_tuple_element(operands[0], *index as usize)
        }
        // The target's element type is the preferred element type (the builder
        // passes a scalar of it, a finished module the declared shape).
        OpKind::Dot(a) => linalg::infer_dot_general(
            operands[0],
            operands[1],
            &a.dims,
            target.and_then(Shape::element_type),
        ),
        OpKind::Reduce { axes, body } => {
            reduction::infer_reduce(operands, axes, sigs.signature(*body).as_ref())
        }
        OpKind::Call { body } => structural::infer_call(operands, sigs.signature(*body).as_ref()),
        OpKind::Iota { dimension } => slicing::infer_iota(need_target()?, *dimension),
        OpKind::Slice(s) => slicing::infer_slice(operands[0], s),
        OpKind::DynamicSlice { sizes } => slicing::infer_dynamic_slice(operands, sizes),
        OpKind::DynamicUpdateSlice => slicing::infer_dynamic_update_slice(operands),
        OpKind::Concatenate { dimension } => slicing::infer_concatenate(operands, *dimension),
        OpKind::Pad(c) => slicing::infer_pad(operands[0], operands[1], c),
        OpKind::Reverse { axes } => slicing::infer_reverse(operands[0], axes),
        OpKind::Sort {
            dimension,
            comparator,
            ..
        } => sorting::infer_sort(operands, *dimension, sigs.signature(*comparator).as_ref()),
        OpKind::Gather(a) => indexing::infer_gather(operands[0], operands[1], a),
        OpKind::BitcastConvert => {
            let to = need_target()?.element_type().ok_or_else(|| {
                ShapeError::new(
                    "bitcast-convert",
                    operands,
                    ShapeErrorKind::ElementType,
                    "converts to an array type",
                )
            })?;
            random::infer_bitcast_convert(operands[0], to)
        }
        OpKind::ReduceWindow { window, body } => {
            window::infer_reduce_window(operands, window, sigs.signature(*body).as_ref())
        }
        OpKind::Convolution(a) => linalg::infer_convolution(operands[0], operands[1], a),
        OpKind::Map { dims, body } => {
            misc::infer_map(operands, dims, sigs.signature(*body).as_ref())
        }
        OpKind::OptimizationBarrier => Ok(operands[0].clone()),
        OpKind::While { cond, body } => control::infer_while(
            operands[0],
            sigs.signature(*cond).as_ref(),
            sigs.signature(*body).as_ref(),
        ),
        OpKind::Conditional { branches } => {
            let sigs: Vec<_> = branches.iter().map(|b| sigs.signature(*b)).collect();
            control::infer_conditional(operands, &sigs)
        }
        OpKind::SelectAndScatter {
            window: w,
            select,
            scatter,
        } => window::infer_select_and_scatter(
            operands,
            w,
            sigs.signature(*select).as_ref(),
            sigs.signature(*scatter).as_ref(),
        ),
        OpKind::CustomCall(a) => misc::infer_custom_call(a, operands, need_target()?),
        OpKind::Cholesky { .. } => linalg::infer_cholesky(operands[0]),
        OpKind::TriangularSolve(o) => linalg::infer_triangular_solve(operands[0], operands[1], o),
        OpKind::RngBitGenerator { algorithm } => {
            // The target is the bits' shape (from the builder) or the whole tuple
            // (from a finished module).
            let t = need_target()?;
            let bits = match t {
                Shape::Tuple(e) if e.len() == 2 => &e[1],
                s => s,
            };
            random::infer_rng_bit_generator(operands[0], *algorithm, bits)
        }
        OpKind::Scatter { attrs, body } => {
            indexing::infer_scatter(operands, attrs, sigs.signature(*body).as_ref())
        }
    }
}

/// Fills the attribute fields of `p` for `kind`. `operands` are the operand shapes,
/// `comp_id` gives the proto id of a called computation.
pub(crate) fn lower_attrs(
    kind: &OpKind,
    shape: &Shape,
    operands: &[&Shape],
    comp_id: &dyn Fn(CompId) -> i64,
    p: &mut proto::HloInstructionProto,
) {
    match kind {
        OpKind::Parameter { number, .. } => p.parameter_number = *number as i64,
        OpKind::Constant(bytes) => p.literal = Some(structural::literal_proto(shape, bytes)),
        OpKind::Compare(c) => elementwise::lower_compare(*c, operands[0], p),
        OpKind::Broadcast { dims } => p.dimensions = dims.to_vec(),
        OpKind::Transpose { perm } => p.dimensions = perm.to_vec(),
        OpKind::GetTupleElement { index } => p.tuple_index = *index as i64,
        OpKind::Dot(a) => linalg::lower_dot(a, p),
        OpKind::Reduce { axes, body } => {
            p.dimensions = axes.to_vec();
            p.called_computation_ids = vec![comp_id(*body)];
        }
        OpKind::Call { body } => p.called_computation_ids = vec![comp_id(*body)],
        OpKind::Iota { dimension } | OpKind::Concatenate { dimension } => {
            p.dimensions = vec![*dimension]
        }
        OpKind::Slice(s) => slicing::lower_slice(s, p),
        OpKind::DynamicSlice { sizes } => p.dynamic_slice_sizes = sizes.to_vec(),
        OpKind::Pad(c) => slicing::lower_pad(c, p),
        OpKind::Reverse { axes } => p.dimensions = axes.to_vec(),
        OpKind::DynamicUpdateSlice => {}
        OpKind::Sort {
            dimension,
            stable,
            comparator,
        } => {
            p.dimensions = vec![*dimension];
            p.is_stable = *stable;
            p.called_computation_ids = vec![comp_id(*comparator)];
        }
        OpKind::Gather(a) => indexing::lower_gather(a, p),
        OpKind::BitcastConvert => {}
        OpKind::Map { dims, body } => {
            p.dimensions = dims.to_vec();
            p.called_computation_ids = vec![comp_id(*body)];
        }
        OpKind::OptimizationBarrier => {}
        // XLA keeps a while's body first, then its condition.
        OpKind::While { cond, body } => {
            p.called_computation_ids = vec![comp_id(*body), comp_id(*cond)];
        }
        OpKind::Conditional { branches } => {
            p.called_computation_ids = branches.iter().map(|b| comp_id(*b)).collect();
        }
        OpKind::SelectAndScatter {
            window: w,
            select,
            scatter,
        } => {
            p.window = Some(window::window_proto(w));
            p.called_computation_ids = vec![comp_id(*select), comp_id(*scatter)];
        }
        OpKind::CustomCall(a) => misc::lower_custom_call(a, p),
        OpKind::Cholesky { lower } => {
            p.cholesky_options = Some(proto::CholeskyOptions { lower: *lower })
        }
        OpKind::TriangularSolve(o) => linalg::lower_triangular_solve(o, p),
        OpKind::Convolution(a) => {
            p.window = Some(window::window_proto(&a.window));
            p.convolution_dimension_numbers = Some(a.dims.to_proto());
            p.feature_group_count = a.feature_group_count;
            p.batch_group_count = a.batch_group_count;
        }
        OpKind::RngBitGenerator { algorithm } => p.rng_algorithm = algorithm.to_proto(),
        OpKind::ReduceWindow { window, body } => {
            p.window = Some(window::window_proto(window));
            p.called_computation_ids = vec![comp_id(*body)];
        }
        OpKind::Scatter { attrs, body } => {
            indexing::lower_scatter(attrs, p);
            p.called_computation_ids = vec![comp_id(*body)];
        }
        OpKind::Unary(_)
        | OpKind::Binary(_)
        | OpKind::Bitwise(_)
        | OpKind::BitwiseUnary(_)
        | OpKind::Select
        | OpKind::Clamp
        | OpKind::Reshape
        | OpKind::Convert
        | OpKind::Tuple => {}
    }
}

/// The op of a proto instruction (the inverse of [`lower_attrs`]), for checking
/// modules that come from outside with the builder's shape rules. `comp_index`
/// maps a called computation's proto id to its position. An opcode the crate has
/// no rule for is an error: such a module cannot be checked.
pub(crate) fn raise(
    p: &proto::HloInstructionProto,
    shape: &Shape,
    comp_index: &dyn Fn(i64) -> Option<CompId>,
) -> Result<OpKind, String> {
    let op = Opcode::ALL
        .iter()
        .copied()
        .find(|o| o.name() == p.opcode)
        .ok_or_else(|| format!("opcode `{}` has no shape rule in this crate", p.opcode))?;
    let calls = |n: usize| {
        if p.called_computation_ids.len() != n {
            return Err(format!(
                "`{}` calls {} computations, expected {n}",
                p.opcode,
                p.called_computation_ids.len()
            ));
        }
        Ok(())
    };
    calls(if matches!(op, Opcode::SelectAndScatter | Opcode::While) {
        2
    } else if op == Opcode::Conditional {
        p.called_computation_ids.len().max(1)
    } else {
        usize::from(matches!(
            op,
            Opcode::Reduce
                | Opcode::Call
                | Opcode::Sort
                | Opcode::Scatter
                | Opcode::ReduceWindow
                | Opcode::Map
        ))
    })?;
    let index = || -> Result<u32, String> {
        u32::try_from(p.tuple_index)
            .map_err(|_| format!("tuple index {} out of range", p.tuple_index))
    };
    Ok(match op {
        Opcode::Parameter => OpKind::Parameter {
            number: u32::try_from(p.parameter_number)
                .map_err(|_| format!("parameter number {} out of range", p.parameter_number))?,
            name: p.name.as_str().into(),
        },
        Opcode::Constant => {
            let lit = p.literal.as_ref().ok_or("a constant without a literal")?;
            OpKind::Constant(structural::literal_bytes(lit, shape)?.into())
        }
        Opcode::Compare => OpKind::Compare(elementwise::raise_compare(p)?),
        Opcode::Select => OpKind::Select,
        Opcode::Clamp => OpKind::Clamp,
        Opcode::Broadcast => OpKind::Broadcast {
            dims: p.dimensions.as_slice().into(),
        },
        Opcode::Reshape => OpKind::Reshape,
        Opcode::Transpose => OpKind::Transpose {
            perm: p.dimensions.as_slice().into(),
        },
        Opcode::Convert => OpKind::Convert,
        Opcode::Tuple => OpKind::Tuple,
        Opcode::GetTupleElement => OpKind::GetTupleElement { index: index()? },
        Opcode::Dot => OpKind::Dot(Box::new(linalg::raise_dot(p)?)),
        Opcode::Reduce => OpKind::Reduce {
            axes: p.dimensions.as_slice().into(),
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a reduce calls a computation that is not defined before it")?,
        },
        Opcode::Iota | Opcode::Concatenate => {
            let [d] = p.dimensions[..] else {
                return Err(format!("`{}` needs exactly one dimension", p.opcode));
            };
            if op == Opcode::Iota {
                OpKind::Iota { dimension: d }
            } else {
                OpKind::Concatenate { dimension: d }
            }
        }
        Opcode::Slice => OpKind::Slice(Box::new(slicing::raise_slice(p))),
        Opcode::DynamicSlice => OpKind::DynamicSlice {
            sizes: p.dynamic_slice_sizes.as_slice().into(),
        },
        Opcode::DynamicUpdateSlice => OpKind::DynamicUpdateSlice,
        Opcode::Pad => OpKind::Pad(slicing::raise_pad(p).into()),
        Opcode::Reverse => OpKind::Reverse {
            axes: p.dimensions.as_slice().into(),
        },
        Opcode::Sort => {
            let [dimension] = p.dimensions[..] else {
                return Err("`sort` needs exactly one dimension".into());
            };
            OpKind::Sort {
                dimension,
                stable: p.is_stable,
                comparator: comp_index(p.called_computation_ids[0])
                    .ok_or("a sort's comparator is not defined before it")?,
            }
        }
        Opcode::Gather => OpKind::Gather(Box::new(indexing::raise_gather(p)?)),
        Opcode::BitcastConvert => OpKind::BitcastConvert,
        Opcode::Map => OpKind::Map {
            dims: p.dimensions.as_slice().into(),
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a map's function is not defined before it")?,
        },
        Opcode::OptimizationBarrier => OpKind::OptimizationBarrier,
        Opcode::While => OpKind::While {
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a while's body is not defined before it")?,
            cond: comp_index(p.called_computation_ids[1])
                .ok_or("a while's condition is not defined before it")?,
        },
        Opcode::Conditional => OpKind::Conditional {
            branches: p
                .called_computation_ids
                .iter()
                .map(|c| comp_index(*c).ok_or("a conditional's branch is not defined before it"))
                .collect::<Result<_, _>>()?,
        },
        Opcode::SelectAndScatter => OpKind::SelectAndScatter {
            window: window::raise_window(p)?.into(),
            select: comp_index(p.called_computation_ids[0])
                .ok_or("a select-and-scatter's select is not defined before it")?,
            scatter: comp_index(p.called_computation_ids[1])
                .ok_or("a select-and-scatter's scatter is not defined before it")?,
        },
        Opcode::Cholesky => OpKind::Cholesky {
            lower: p.cholesky_options.as_ref().is_some_and(|o| o.lower),
        },
        Opcode::TriangularSolve => OpKind::TriangularSolve(linalg::raise_triangular_solve(p)?),
        Opcode::CustomCall => OpKind::CustomCall(Box::new(misc::raise_custom_call(p))),
        Opcode::Convolution => OpKind::Convolution(Box::new(ConvAttrs {
            window: window::raise_window(p)?,
            dims: ConvDims::from_proto(
                p.convolution_dimension_numbers
                    .as_ref()
                    .ok_or("a convolution without dimension numbers")?,
            ),
            // Zero means 1 in protos written before the field existed.
            feature_group_count: p.feature_group_count.max(1),
            batch_group_count: p.batch_group_count.max(1),
        })),
        Opcode::ReduceWindow => OpKind::ReduceWindow {
            window: window::raise_window(p)?.into(),
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a reduce-window's body is not defined before it")?,
        },
        Opcode::RngBitGenerator => OpKind::RngBitGenerator {
            algorithm: RngAlgorithm::from_proto(p.rng_algorithm)?,
        },
        Opcode::Scatter => OpKind::Scatter {
            attrs: Box::new(indexing::raise_scatter(p)?),
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a scatter's combiner is not defined before it")?,
        },
        Opcode::Call => OpKind::Call {
            body: comp_index(p.called_computation_ids[0])
                .ok_or("a call of a computation that is not defined before it")?,
        },
        o => {
            if let Some(u) = UnaryOp::ALL.iter().find(|u| u.opcode() == o) {
                OpKind::Unary(*u)
            } else if let Some(b) = BinaryOp::ALL.iter().find(|b| b.opcode() == o) {
                OpKind::Binary(*b)
            } else if let Some(b) = BitwiseOp::ALL.iter().find(|b| b.opcode() == o) {
                OpKind::Bitwise(*b)
            } else if let Some(u) = BitwiseUnary::ALL.iter().find(|u| u.opcode() == o) {
                OpKind::BitwiseUnary(*u)
            } else {
                return Err(format!("opcode `{}` cannot be read yet", p.opcode));
            }
        }
    })
}

/// HLO text of the operand list's replacement (parameter number, literal) if the
/// op prints one, else `None`.
pub(crate) fn text_args(kind: &OpKind, shape: &Shape) -> Option<String> {
    match kind {
        OpKind::Parameter { number, .. } => Some(number.to_string()),
        OpKind::Constant(bytes) => Some(structural::literal_text(shape, bytes)),
        _ => None,
    }
}

fn list(out: &mut String, key: &str, v: &[i64]) {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    let _ = write!(out, ", {key}={{{}}}", parts.join(","));
}

/// The attributes of `kind` as HLO text (`, dimensions={1}, to_apply=%add.3`).
pub(crate) fn text_attrs(kind: &OpKind, comp_name: &dyn Fn(CompId) -> String) -> String {
    let mut out = String::new();
    match kind {
        OpKind::Compare(c) => {
            let _ = write!(out, ", direction={}", c.hlo_name());
        }
        OpKind::Broadcast { dims } => list(&mut out, "dimensions", dims),
        OpKind::Transpose { perm } => list(&mut out, "dimensions", perm),
        OpKind::GetTupleElement { index } => {
            let _ = write!(out, ", index={index}");
        }
        OpKind::Dot(a) => {
            let d = &a.dims;
            if !d.lhs_batch.is_empty() {
                list(&mut out, "lhs_batch_dims", &d.lhs_batch);
                list(&mut out, "rhs_batch_dims", &d.rhs_batch);
            }
            list(&mut out, "lhs_contracting_dims", &d.lhs_contracting);
            list(&mut out, "rhs_contracting_dims", &d.rhs_contracting);
            out.push_str(&linalg::text_precision(&a.precision));
        }
        OpKind::Reduce { axes, body } => {
            list(&mut out, "dimensions", axes);
            let _ = write!(out, ", to_apply=%{}", comp_name(*body));
        }
        OpKind::Call { body } => {
            let _ = write!(out, ", to_apply=%{}", comp_name(*body));
        }
        OpKind::Iota { dimension } => {
            let _ = write!(out, ", iota_dimension={dimension}");
        }
        OpKind::Concatenate { dimension } => list(&mut out, "dimensions", &[*dimension]),
        OpKind::Slice(s) => out.push_str(&slicing::text_slice(s)),
        OpKind::DynamicSlice { sizes } => list(&mut out, "dynamic_slice_sizes", sizes),
        OpKind::Pad(c) => out.push_str(&slicing::text_pad(c)),
        OpKind::Reverse { axes } => list(&mut out, "dimensions", axes),
        OpKind::Sort {
            dimension,
            stable,
            comparator,
        } => {
            list(&mut out, "dimensions", &[*dimension]);
            if *stable {
                out.push_str(", is_stable=true");
            }
            let _ = write!(out, ", to_apply=%{}", comp_name(*comparator));
        }
        OpKind::Gather(a) => out.push_str(&indexing::text_gather(a)),
        OpKind::RngBitGenerator { algorithm } => {
            let _ = write!(out, ", algorithm={}", algorithm.hlo_name());
        }
        OpKind::Map { dims, body } => {
            list(&mut out, "dimensions", dims);
            let _ = write!(out, ", to_apply=%{}", comp_name(*body));
        }
        OpKind::CustomCall(a) => {
            let _ = write!(out, ", custom_call_target=\"{}\"", a.target);
        }
        OpKind::Cholesky { lower } => {
            let _ = write!(out, ", lower={lower}");
        }
        OpKind::While { cond, body } => {
            let _ = write!(
                out,
                ", condition=%{}, body=%{}",
                comp_name(*cond),
                comp_name(*body)
            );
        }
        OpKind::Conditional { branches } => {
            let names: Vec<String> = branches
                .iter()
                .map(|b| format!("%{}", comp_name(*b)))
                .collect();
            let _ = write!(out, ", branch_computations={{{}}}", names.join(", "));
        }
        OpKind::SelectAndScatter {
            window: w,
            select,
            scatter,
        } => {
            out.push_str(&window::text_window(w));
            let _ = write!(
                out,
                ", select=%{}, scatter=%{}",
                comp_name(*select),
                comp_name(*scatter)
            );
        }
        OpKind::TriangularSolve(o) => {
            let _ = write!(
                out,
                ", left_side={}, lower={}, unit_diagonal={}, transpose_a={:?}",
                o.left_side, o.lower, o.unit_diagonal, o.transpose_a
            );
        }
        OpKind::Convolution(a) => {
            out.push_str(&window::text_window(&a.window));
            if a.feature_group_count != 1 {
                let _ = write!(out, ", feature_group_count={}", a.feature_group_count);
            }
            if a.batch_group_count != 1 {
                let _ = write!(out, ", batch_group_count={}", a.batch_group_count);
            }
        }
        OpKind::ReduceWindow { window: w, body } => {
            out.push_str(&window::text_window(w));
            let _ = write!(out, ", to_apply=%{}", comp_name(*body));
        }
        OpKind::Scatter { attrs, body } => {
            out.push_str(&indexing::text_scatter(attrs));
            let _ = write!(out, ", to_apply=%{}", comp_name(*body));
        }
        _ => {}
    }
    out
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
