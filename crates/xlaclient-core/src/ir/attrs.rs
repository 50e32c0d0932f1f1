//! The attributes an [`OpKind`](super::OpKind) holds: plain data (dimension
//! numbers, windows, slices, the element-wise op groups), with the IR's structural
//! meaning only. What an op's attributes must satisfy (its shape rule), how they
//! are written to and read from a proto and printed is each op's business, in the
//! rules the op library supplies (see [`Rules`](super::Rules)); the op families
//! re-export these types under their own paths.

use super::Opcode;

/// A group of opcodes that share one [`OpKind`](super::OpKind) variant: an enum
/// whose variants are named as the opcodes they stand for.
macro_rules! op_group {
    ($(#[$m:meta])* $name:ident { $( $(#[$d:meta])* $v:ident, )* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $( $(#[$d])* $v, )* }

        impl $name {
            /// Every one, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];

            /// The op's entry in the opcode table.
            pub fn opcode(self) -> Opcode {
                match self { $($name::$v => Opcode::$v,)* }
            }

            /// The member for `op`, if `op` belongs to this group.
            pub fn from_opcode(op: Opcode) -> Option<Self> {
                match op {
                    $(Opcode::$v => Some($name::$v),)*
                    _ => None,
                }
            }

            /// The HLO opcode as XLA spells it.
            pub fn hlo_name(self) -> &'static str {
                self.opcode().name()
            }
        }
    };
}

op_group! {
    /// The element-wise unary ops: one entry per HLO opcode (see [`Opcode`] for each
    /// one's name as XLA spells it).
    UnaryOp {
        /// `-x`.
        Negate,
        /// `e^x`.
        Exponential,
        /// Natural logarithm.
        Log,
        /// Hyperbolic tangent.
        Tanh,
        /// Absolute value.
        Abs,
        /// Square root.
        Sqrt,
        /// `1 / sqrt(x)`.
        Rsqrt,
        /// Sine.
        Sine,
        /// Cosine.
        Cosine,
        /// The logistic sigmoid `1 / (1 + e^-x)`.
        Logistic,
        /// Round down.
        Floor,
        /// Round up.
        Ceil,
        /// -1, 0 or 1 by the sign of x.
        Sign,
        /// `e^x - 1`, accurate near 0.
        ExponentialMinusOne,
        /// `ln(1 + x)`, accurate near 0.
        LogPlusOne,
        /// Rounds to the nearest integer, halfway cases away from zero.
        RoundNearestAfz,
        /// Rounds to the nearest integer, halfway cases to the even one.
        RoundNearestEven,
        /// Cube root.
        Cbrt,
        /// Tangent.
        Tan,
        /// The error function.
        Erf,
        /// True where an element is neither infinite nor NaN (`pred` result).
        IsFinite,
        /// The real part of a complex number (a real float: itself).
        Real,
        /// The imaginary part of a complex number (a real float: 0).
        Imag,
    }
}

op_group! {
    /// The element-wise binary arithmetic ops: one entry per HLO opcode (see
    /// [`Opcode`] for each one's name as XLA spells it).
    BinaryOp {
        /// Sum.
        Add,
        /// Difference.
        Subtract,
        /// Product.
        Multiply,
        /// Quotient (integer division truncates toward zero).
        Divide,
        /// Element-wise maximum (logical or on `pred`).
        Maximum,
        /// Element-wise minimum (logical and on `pred`).
        Minimum,
        /// `x^y`.
        Power,
        /// Remainder with the sign of the dividend (C's `fmod`).
        Remainder,
        /// `atan2(y, x)`.
        Atan2,
        /// The complex number `x + i·y` of two real floats.
        Complex,
    }
}

op_group! {
    /// The bitwise binary ops.
    BitwiseOp {
        /// Bitwise (or logical, on `pred`) and.
        And,
        /// Bitwise (or logical) or.
        Or,
        /// Bitwise (or logical) exclusive or.
        Xor,
        /// `x << y` (0 when `y` is at least the bit width or negative).
        ShiftLeft,
        /// `x >> y` filling with the sign bit.
        ShiftRightArithmetic,
        /// `x >> y` filling with zeros.
        ShiftRightLogical,
    }
}

op_group! {
    /// The bitwise unary ops.
    BitwiseUnary {
        /// Bitwise (or logical, on `pred`) not.
        Not,
        /// The number of set bits.
        Popcnt,
        /// The number of leading zero bits.
        CountLeadingZeros,
    }
}

/// Comparison directions of XLA's `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Comparison {
    /// The direction as XLA spells it (`"EQ"`, `"LT"`, …).
    pub fn hlo_name(self) -> &'static str {
        match self {
            Comparison::Eq => "EQ",
            Comparison::Ne => "NE",
            Comparison::Lt => "LT",
            Comparison::Le => "LE",
            Comparison::Gt => "GT",
            Comparison::Ge => "GE",
        }
    }
}

/// Dimension numbers of a `dot_general`: which axes are contracted (summed over) and
/// which are batch axes (kept, matched one-to-one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotDims {
    /// Contracted axes of the left operand.
    pub lhs_contracting: Vec<i64>,
    /// Contracted axes of the right operand (paired with `lhs_contracting`).
    pub rhs_contracting: Vec<i64>,
    /// Batch axes of the left operand.
    pub lhs_batch: Vec<i64>,
    /// Batch axes of the right operand (paired with `lhs_batch`).
    pub rhs_batch: Vec<i64>,
}

impl DotDims {
    /// Contract `lhs` axis `l` with `rhs` axis `r`, no batch axes.
    pub fn contract(l: i64, r: i64) -> Self {
        DotDims {
            lhs_contracting: vec![l],
            rhs_contracting: vec![r],
            ..Default::default()
        }
    }
}

/// The precision of one operand of a dot (XLA's `PrecisionConfig.Precision`): how
/// exactly a backend with fast low-precision units must compute with it. On TPUs
/// and recent GPUs, `Default` may multiply `f32` values in one pass of `bf16` (or
/// `tf32`), `High` in three passes, `Highest` in full `f32`. The CPU plugin
/// computes in the operands' own precision at every setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The backend's fastest (XLA's `DEFAULT`).
    #[default]
    Default,
    /// More exact than the default (XLA's `HIGH`).
    High,
    /// The operand's full precision (XLA's `HIGHEST`).
    Highest,
}

impl Precision {
    /// The name in HLO text (`default`, `high`, `highest`).
    pub fn hlo_name(self) -> &'static str {
        match self {
            Precision::Default => "default",
            Precision::High => "high",
            Precision::Highest => "highest",
        }
    }
}

/// A dot's attributes in the IR: dimension numbers and operand precisions. The
/// preferred element type is the result shape's element type (as in XLA's HLO,
/// which has no field for it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DotAttrs {
    /// Dimension numbers.
    pub dims: DotDims,
    /// Precision of the left and the right operand.
    pub precision: [Precision; 2],
}

/// One axis of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    /// Window size (at least 1).
    pub size: i64,
    /// Step between windows (at least 1).
    pub stride: i64,
    /// Padding before the first element (negative cuts).
    pub padding_low: i64,
    /// Padding after the last element (negative cuts).
    pub padding_high: i64,
    /// Spacing of the window's taps (at least 1).
    pub window_dilation: i64,
    /// Spacing of the base's elements (at least 1).
    pub base_dilation: i64,
}

impl WindowDim {
    /// A window of `size` moving by `stride`, no padding or dilation.
    pub fn new(size: i64, stride: i64) -> Self {
        WindowDim {
            size,
            stride,
            padding_low: 0,
            padding_high: 0,
            window_dilation: 1,
            base_dilation: 1,
        }
    }
}

/// Which axes of a convolution's input, kernel and output are batch, feature and
/// spatial (XLA's ConvolutionDimensionNumbers).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDims {
    /// Input batch axis.
    pub input_batch: i64,
    /// Input feature axis.
    pub input_feature: i64,
    /// Input spatial axes.
    pub input_spatial: Vec<i64>,
    /// Kernel input-feature axis.
    pub kernel_input_feature: i64,
    /// Kernel output-feature axis.
    pub kernel_output_feature: i64,
    /// Kernel spatial axes.
    pub kernel_spatial: Vec<i64>,
    /// Output batch axis.
    pub output_batch: i64,
    /// Output feature axis.
    pub output_feature: i64,
    /// Output spatial axes.
    pub output_spatial: Vec<i64>,
}

impl ConvDims {
    /// Channels-last layouts with `n` spatial axes: input and output `[batch,
    /// spatial..., feature]`, kernel `[spatial..., in, out]` (TensorFlow's NHWC/HWIO).
    pub fn channels_last(n: usize) -> Self {
        let sp: Vec<i64> = (1..=n as i64).collect();
        ConvDims {
            input_batch: 0,
            input_feature: n as i64 + 1,
            input_spatial: sp.clone(),
            kernel_input_feature: n as i64,
            kernel_output_feature: n as i64 + 1,
            kernel_spatial: (0..n as i64).collect(),
            output_batch: 0,
            output_feature: n as i64 + 1,
            output_spatial: sp,
        }
    }
}

/// A convolution's attributes: the window (its sizes are the kernel's spatial
/// sizes; base dilation is the input (lhs) dilation, window dilation the kernel (rhs)
/// dilation), the dimension numbers and the group counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvAttrs {
    /// One entry per spatial axis.
    pub window: Vec<WindowDim>,
    /// Dimension numbers.
    pub dims: ConvDims,
    /// Input features split into this many groups (1: an ordinary convolution).
    pub feature_group_count: i64,
    /// Batch split into this many groups (1: an ordinary convolution).
    pub batch_group_count: i64,
}

/// How `a` enters a triangular solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// `a` as is.
    No,
    /// `a` transposed.
    Transpose,
    /// `a` conjugate-transposed.
    Adjoint,
}

/// A triangular solve's options (XLA's TriangularSolveOptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TriangularSolveOptions {
    /// Solve `op(a) x = b` (true) or `x op(a) = b` (false).
    pub left_side: bool,
    /// Use `a`'s lower triangle (else the upper one).
    pub lower: bool,
    /// Take `a`'s diagonal as ones.
    pub unit_diagonal: bool,
    /// How `a` enters.
    pub transpose_a: Transpose,
}

/// Dimension numbers of a `gather` (XLA's GatherDimensionNumbers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherDims {
    /// Output axes that hold the slice's (uncollapsed) axes, increasing.
    pub offset_dims: Vec<i64>,
    /// Operand axes whose slice size is 1 and that are dropped from the output.
    pub collapsed_slice_dims: Vec<i64>,
    /// Operand axis each entry of an index vector starts.
    pub start_index_map: Vec<i64>,
    /// The axis of the indices that holds index vectors (its rank: a trailing 1).
    pub index_vector_dim: i64,
    /// Operand axes that are batch axes, increasing: like collapsed axes (slice size
    /// 1, absent from the output), but the start along `operand_batching_dims[k]` is
    /// the position along indices axis `start_indices_batching_dims[k]`, so each
    /// batch element gathers from its own slice of the operand (`vmap` of a gather).
    pub operand_batching_dims: Vec<i64>,
    /// Indices axes (not `index_vector_dim`) paired with `operand_batching_dims`,
    /// of equal sizes.
    pub start_indices_batching_dims: Vec<i64>,
}

/// Dimension numbers of a `scatter` (XLA's ScatterDimensionNumbers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScatterDims {
    /// Axes of the updates that hold the update windows, increasing.
    pub update_window_dims: Vec<i64>,
    /// Operand axes of size 1 in the window and absent from the updates.
    pub inserted_window_dims: Vec<i64>,
    /// Operand axis each entry of an index vector starts.
    pub scatter_dims_to_operand_dims: Vec<i64>,
    /// The axis of the indices that holds index vectors (its rank: a trailing 1).
    pub index_vector_dim: i64,
    /// Operand axes that are batch axes, increasing: like inserted window axes, but
    /// the position along `input_batching_dims[k]` is the position along indices
    /// axis `scatter_indices_batching_dims[k]`.
    pub input_batching_dims: Vec<i64>,
    /// Indices axes (not `index_vector_dim`) paired with `input_batching_dims`, of
    /// equal sizes.
    pub scatter_indices_batching_dims: Vec<i64>,
}

/// Gather's attributes: dimension numbers, slice sizes and the sortedness promise.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GatherAttrs {
    /// Dimension numbers.
    pub dims: GatherDims,
    /// The size of the slice taken from each operand axis.
    pub slice_sizes: Vec<i64>,
    /// The caller promises the indices are sorted.
    pub indices_are_sorted: bool,
}

/// Scatter's attributes: dimension numbers, the combiner and the caller's promises.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScatterAttrs {
    /// Dimension numbers.
    pub dims: ScatterDims,
    /// The caller promises the indices are sorted.
    pub indices_are_sorted: bool,
    /// The caller promises no index repeats.
    pub unique_indices: bool,
}

/// A static slice: for each axis, the first index, one past the last, and the step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SliceAttrs {
    /// First index of each axis.
    pub start: Vec<i64>,
    /// One past the last index of each axis.
    pub limit: Vec<i64>,
    /// Step of each axis (at least 1).
    pub strides: Vec<i64>,
}

/// Padding of one axis: `lo` elements before, `hi` after (negative values cut), and
/// `interior` elements between each pair of neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    /// Elements added before the first (removed if negative).
    pub lo: i64,
    /// Elements added after the last (removed if negative).
    pub hi: i64,
    /// Elements added between neighbours (not negative).
    pub interior: i64,
}

/// A custom call's attributes: the kernel's name, its opaque configuration and the
/// calling convention.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomCallAttrs {
    /// The kernel's registered name.
    pub target: String,
    /// Bytes passed to the kernel unchanged (XLA's `backend_config`, the "opaque").
    pub opaque: Vec<u8>,
    /// XLA's `CustomCallApiVersion` number (1: original, 2/3: status returning, 4:
    /// typed FFI).
    pub api_version: i32,
    /// The call has side effects (it is never removed or duplicated).
    pub has_side_effect: bool,
}

/// The bit generator's algorithm (XLA's `RandomAlgorithm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RngAlgorithm {
    /// The backend's default (three-fry on the CPU plugins).
    Default,
    /// Threefry-2x32 (Salmon et al. 2011), state `u64[2]`.
    ThreeFry,
    /// Philox-4x32, state `u64[2]` or `u64[3]`.
    Philox,
}

impl RngAlgorithm {
    /// The XLA text name (`rng_default`, `rng_three_fry`, `rng_philox`).
    pub fn hlo_name(self) -> &'static str {
        match self {
            RngAlgorithm::Default => "rng_default",
            RngAlgorithm::ThreeFry => "rng_three_fry",
            RngAlgorithm::Philox => "rng_philox",
        }
    }
}

/// Which devices a collective combines, and over which channel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CollectiveAttrs {
    /// The replica groups: each a list of replica ids (device ids when
    /// `use_global_device_ids`) that combine among themselves; empty: one group of
    /// every replica.
    pub replica_groups: Vec<Vec<i64>>,
    /// XLA's channel id (`None`: a cross-replica collective); with one, the op
    /// also spans partitions.
    pub channel_id: Option<i64>,
    /// The groups name global device ids (replica × partitions + partition) rather
    /// than replica ids; needs a channel id.
    pub use_global_device_ids: bool,
}

/// A collective permute's attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PermuteAttrs {
    /// `(source, target)` replica pairs: each source sends its operand to its
    /// target; a device that is no target receives zeros.
    pub pairs: Vec<(i64, i64)>,
    /// XLA's channel id (`None`: the pairs are replica ids; with one, XLA reads
    /// them as partition ids).
    pub channel_id: Option<i64>,
}
