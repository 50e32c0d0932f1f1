//! The op table: the one place an op is declared. Each entry is one line (after its
//! doc line) and holds everything about the op that is said once:
//!
//! ```text
//! /// Reverses the order along axes.
//! Reverse = "reverse", Fixed(1), kind: Reverse, stablehlo: "stablehlo.reverse", slicing { shape: shape_reverse, lower: lower_reverse, raise: raise_reverse, text: text_reverse, grad: rule(vjp_reverse), jvp: rule(jvp_reverse), batch: rule(batch_reverse) };
//! ```
//!
//! - the doc line, the `Opcode` variant, its name as XLA spells it (proto and HLO
//!   text) and its `Arity` (`Fixed(n)`, `Variadic` or `Even`);
//! - `kind`: the `OpKind` variant that holds the op, `Reverse` (matched as
//!   `OpKind::Reverse { .. }`), or, for the ops that share one variant, the variant
//!   and the member of its group (`Unary(UnaryOp::Negate)`);
//! - `stablehlo`: the MLIR op the opcode prints as in StableHLO text
//!   (`stablehlo/emit.rs`; `Opcode::stablehlo_name`);
//! - the family file (`src/ops/<family>.rs`) and, in braces, the rule slots, names
//!   of functions in that file (described in `ops/table.rs`).
//!
//! The file is data only: one macro, `for_each_op!`, that hands every entry, in
//! table order, to the callback macro it is given. It imports nothing and resolves
//! nothing; each reader takes what it needs from the tokens:
//!
//! - the IR (`ir/op.rs`, `for_each_op!(opcodes)`) generates `Opcode` (`ALL`,
//!   `name`, `arity`, `doc`, `from_name`) and `OpKind::opcode` from the doc, name,
//!   arity and kind, and never looks at the family or the rule slots (for it they
//!   are inert identifiers, so the IR still names nothing of the op library);
//! - the op library (`ops/table.rs`, `for_each_op!(op_rules)`) generates the
//!   `Rules` the IR's passes are handed, the gradient dispatch, `gradient` and
//!   `family` from the family and the rule slots, resolved in the family files.
//!
//! The order of the entries is the order of `Opcode::ALL` (the fuzzer picks from
//! it, so moving a line changes what a seed generates): add new ops at the end.

/// Hands every op's entry to `$callback!`, in table order (see the module doc).
macro_rules! for_each_op {
    ($callback:ident) => {
        $callback! {
            /// A value passed into the computation.
            Parameter = "parameter", Fixed(0), kind: Parameter, stablehlo: "func.func", structural { shape: shape_parameter, lower: lower_parameter, raise: raise_parameter, text: text_parameter, grad: none, jvp: none, batch: none };
            /// A literal array.
            Constant = "constant", Fixed(0), kind: Constant, stablehlo: "stablehlo.constant", structural { shape: shape_constant, lower: lower_constant, raise: raise_constant, text: text_constant, grad: none, jvp: none, batch: none };
            /// `-x`.
            Negate = "negate", Fixed(1), kind: Unary(UnaryOp::Negate), stablehlo: "stablehlo.negate", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// `e^x`.
            Exponential = "exponential", Fixed(1), kind: Unary(UnaryOp::Exponential), stablehlo: "stablehlo.exponential", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Natural logarithm.
            Log = "log", Fixed(1), kind: Unary(UnaryOp::Log), stablehlo: "stablehlo.log", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Hyperbolic tangent.
            Tanh = "tanh", Fixed(1), kind: Unary(UnaryOp::Tanh), stablehlo: "stablehlo.tanh", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Absolute value.
            Abs = "abs", Fixed(1), kind: Unary(UnaryOp::Abs), stablehlo: "stablehlo.abs", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Square root.
            Sqrt = "sqrt", Fixed(1), kind: Unary(UnaryOp::Sqrt), stablehlo: "stablehlo.sqrt", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// `1 / sqrt(x)`.
            Rsqrt = "rsqrt", Fixed(1), kind: Unary(UnaryOp::Rsqrt), stablehlo: "stablehlo.rsqrt", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Sine.
            Sine = "sine", Fixed(1), kind: Unary(UnaryOp::Sine), stablehlo: "stablehlo.sine", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Cosine.
            Cosine = "cosine", Fixed(1), kind: Unary(UnaryOp::Cosine), stablehlo: "stablehlo.cosine", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// The logistic sigmoid `1 / (1 + e^-x)`.
            Logistic = "logistic", Fixed(1), kind: Unary(UnaryOp::Logistic), stablehlo: "stablehlo.logistic", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Round down.
            Floor = "floor", Fixed(1), kind: Unary(UnaryOp::Floor), stablehlo: "stablehlo.floor", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// Round up.
            Ceil = "ceil", Fixed(1), kind: Unary(UnaryOp::Ceil), stablehlo: "stablehlo.ceil", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// -1, 0 or 1 by the sign of x.
            Sign = "sign", Fixed(1), kind: Unary(UnaryOp::Sign), stablehlo: "stablehlo.sign", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// `e^x - 1`, accurate near 0.
            ExponentialMinusOne = "exponential-minus-one", Fixed(1), kind: Unary(UnaryOp::ExponentialMinusOne), stablehlo: "stablehlo.exponential_minus_one", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// `ln(1 + x)`, accurate near 0.
            LogPlusOne = "log-plus-one", Fixed(1), kind: Unary(UnaryOp::LogPlusOne), stablehlo: "stablehlo.log_plus_one", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Sum.
            Add = "add", Fixed(2), kind: Binary(BinaryOp::Add), stablehlo: "stablehlo.add", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Difference.
            Subtract = "subtract", Fixed(2), kind: Binary(BinaryOp::Subtract), stablehlo: "stablehlo.subtract", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Product.
            Multiply = "multiply", Fixed(2), kind: Binary(BinaryOp::Multiply), stablehlo: "stablehlo.multiply", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Quotient.
            Divide = "divide", Fixed(2), kind: Binary(BinaryOp::Divide), stablehlo: "stablehlo.divide", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Element-wise maximum.
            Maximum = "maximum", Fixed(2), kind: Binary(BinaryOp::Maximum), stablehlo: "stablehlo.maximum", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Element-wise minimum.
            Minimum = "minimum", Fixed(2), kind: Binary(BinaryOp::Minimum), stablehlo: "stablehlo.minimum", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// `x^y`.
            Power = "power", Fixed(2), kind: Binary(BinaryOp::Power), stablehlo: "stablehlo.power", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Remainder with the sign of the dividend.
            Remainder = "remainder", Fixed(2), kind: Binary(BinaryOp::Remainder), stablehlo: "stablehlo.remainder", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// `atan2(y, x)`.
            Atan2 = "atan2", Fixed(2), kind: Binary(BinaryOp::Atan2), stablehlo: "stablehlo.atan2", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_binary), batch: rule(batch_binary) };
            /// Element-wise comparison giving `pred`.
            Compare = "compare", Fixed(2), kind: Compare, stablehlo: "stablehlo.compare", elementwise { shape: shape_compare, lower: lower_compare, raise: raise_compare, text: text_compare, grad: none, jvp: none, batch: rule(batch_compare) };
            /// Element-wise choice by a predicate.
            Select = "select", Fixed(3), kind: Select, stablehlo: "stablehlo.select", elementwise { shape: shape_select, lower: -, raise: raise_select, text: -, grad: rule(vjp_select), jvp: rule(jvp_select), batch: rule(batch_select) };
            /// BroadcastInDim: operand axes map to output axes; the rest are repeated.
            Broadcast = "broadcast", Fixed(1), kind: Broadcast, stablehlo: "stablehlo.broadcast_in_dim", shape_ops { shape: shape_broadcast, lower: lower_broadcast, raise: raise_broadcast, text: text_broadcast, grad: rule(vjp_broadcast), jvp: rule(jvp_broadcast), batch: rule(batch_broadcast) };
            /// Same elements, new dimensions (row-major order kept).
            Reshape = "reshape", Fixed(1), kind: Reshape, stablehlo: "stablehlo.reshape", shape_ops { shape: shape_reshape, lower: -, raise: raise_reshape, text: -, grad: rule(vjp_reshape), jvp: rule(jvp_reshape), batch: rule(batch_reshape) };
            /// Permutes axes.
            Transpose = "transpose", Fixed(1), kind: Transpose, stablehlo: "stablehlo.transpose", shape_ops { shape: shape_transpose, lower: lower_transpose, raise: raise_transpose, text: text_transpose, grad: rule(vjp_transpose), jvp: rule(jvp_transpose), batch: rule(batch_transpose) };
            /// Converts each element to another type.
            Convert = "convert", Fixed(1), kind: Convert, stablehlo: "stablehlo.convert", shape_ops { shape: shape_convert, lower: -, raise: raise_convert, text: -, grad: rule(vjp_convert), jvp: rule(jvp_convert), batch: rule(batch_convert) };
            /// Groups values into a tuple.
            Tuple = "tuple", Variadic, kind: Tuple, stablehlo: "stablehlo.tuple", structural { shape: shape_tuple, lower: -, raise: raise_tuple, text: -, grad: rule(vjp_tuple), jvp: rule(jvp_tuple), batch: rule(batch_tuple) };
            /// One element of a tuple.
            GetTupleElement = "get-tuple-element", Fixed(1), kind: GetTupleElement, stablehlo: "stablehlo.get_tuple_element", shape_ops { shape: shape_get_tuple_element, lower: lower_get_tuple_element, raise: raise_get_tuple_element, text: text_get_tuple_element, grad: rule(vjp_get_tuple_element), jvp: rule(jvp_get_tuple_element), batch: rule(batch_get_tuple_element) };
            /// DotGeneral: contraction with batch axes.
            Dot = "dot", Fixed(2), kind: Dot, stablehlo: "stablehlo.dot_general", linalg { shape: shape_dot, lower: lower_dot, raise: raise_dot, text: text_dot, grad: rule(vjp_dot), jvp: rule(jvp_dot), batch: rule(batch_dot_general) };
            /// Reduces arrays over axes with a combiner computation.
            Reduce = "reduce", Even, kind: Reduce, stablehlo: "stablehlo.reduce", reduction { shape: shape_reduce, lower: lower_reduce, raise: raise_reduce, text: text_reduce, grad: partial(vjp_reduce, "sum, product, max, min, bodies that select (argmax)"), jvp: partial(jvp_reduce, "sum, product, max, min"), batch: partial(batch_reduce, "initial values the same for every example, as in JAX") };
            /// Calls a computation on the operands (its parameters) and gives its result.
            Call = "call", Variadic, kind: Call, stablehlo: "func.call", structural { shape: shape_call, lower: lower_call, raise: raise_call, text: text_call, grad: rule(vjp_call), jvp: rule(jvp_call), batch: rule(batch_call) };
            /// Counts 0, 1, 2, … along one axis.
            Iota = "iota", Fixed(0), kind: Iota, stablehlo: "stablehlo.iota", slicing { shape: shape_iota, lower: lower_iota, raise: raise_iota, text: text_iota, grad: none, jvp: none, batch: none };
            /// A strided block of static bounds.
            Slice = "slice", Fixed(1), kind: Slice, stablehlo: "stablehlo.slice", slicing { shape: shape_slice, lower: lower_slice, raise: raise_slice, text: text_slice, grad: rule(vjp_slice), jvp: rule(jvp_slice), batch: rule(batch_slice) };
            /// A block at run-time start indices.
            DynamicSlice = "dynamic-slice", Variadic, kind: DynamicSlice, stablehlo: "stablehlo.dynamic_slice", slicing { shape: shape_dynamic_slice, lower: lower_dynamic_slice, raise: raise_dynamic_slice, text: text_dynamic_slice, grad: rule(vjp_dynamic_slice), jvp: rule(jvp_dynamic_slice), batch: rule(batch_dynamic_slice) };
            /// An array with a block replaced at run-time start indices.
            DynamicUpdateSlice = "dynamic-update-slice", Variadic, kind: DynamicUpdateSlice, stablehlo: "stablehlo.dynamic_update_slice", slicing { shape: shape_dynamic_update_slice, lower: -, raise: raise_dynamic_update_slice, text: -, grad: rule(vjp_dynamic_update_slice), jvp: rule(jvp_dynamic_update_slice), batch: rule(batch_dynamic_update_slice) };
            /// Joins arrays along one axis.
            Concatenate = "concatenate", Variadic, kind: Concatenate, stablehlo: "stablehlo.concatenate", slicing { shape: shape_concatenate, lower: lower_concatenate, raise: raise_concatenate, text: text_concatenate, grad: rule(vjp_concatenate), jvp: rule(jvp_concatenate), batch: rule(batch_concatenate) };
            /// Pads (or cuts) the edges and the spaces between elements.
            Pad = "pad", Fixed(2), kind: Pad, stablehlo: "stablehlo.pad", slicing { shape: shape_pad, lower: lower_pad, raise: raise_pad, text: text_pad, grad: rule(vjp_pad), jvp: rule(jvp_pad), batch: rule(batch_pad) };
            /// Reverses the order along axes.
            Reverse = "reverse", Fixed(1), kind: Reverse, stablehlo: "stablehlo.reverse", slicing { shape: shape_reverse, lower: lower_reverse, raise: raise_reverse, text: text_reverse, grad: rule(vjp_reverse), jvp: rule(jvp_reverse), batch: rule(batch_reverse) };
            /// Sorts several arrays together along one axis with a comparator computation.
            Sort = "sort", Variadic, kind: Sort, stablehlo: "stablehlo.sort", sorting { shape: shape_sort, lower: lower_sort, raise: raise_sort, text: text_sort, grad: rule(vjp_sort), jvp: rule(jvp_sort), batch: rule(batch_sort) };
            /// Slices at many run-time starts (dimension numbers say how they are arranged).
            Gather = "gather", Fixed(2), kind: Gather, stablehlo: "stablehlo.gather", indexing { shape: shape_gather, lower: lower_gather, raise: raise_gather, text: text_gather, grad: rule(vjp_gather), jvp: rule(jvp_gather), batch: rule(batch_gather) };
            /// Combines update windows into arrays at many run-time starts.
            Scatter = "scatter", Variadic, kind: Scatter, stablehlo: "stablehlo.scatter", indexing { shape: shape_scatter, lower: lower_scatter, raise: raise_scatter, text: text_scatter, grad: partial(vjp_scatter, "one array combined by add, multiply (unique indices), max, min or replace"), jvp: partial(jvp_scatter, "one array combined by add, replace, max or min"), batch: rule(batch_scatter) };
            /// The same bits as another element type.
            BitcastConvert = "bitcast-convert", Fixed(1), kind: BitcastConvert, stablehlo: "stablehlo.bitcast_convert", random { shape: shape_bitcast_convert, lower: -, raise: raise_bitcast_convert, text: -, grad: none, jvp: none, batch: rule(batch_bitcast_convert) };
            /// Random bits from a counter-based generator state; gives the next state too.
            RngBitGenerator = "rng-bit-generator", Fixed(1), kind: RngBitGenerator, stablehlo: "stablehlo.rng_bit_generator", random { shape: shape_rng_bit_generator, lower: lower_rng_bit_generator, raise: raise_rng_bit_generator, text: text_rng_bit_generator, grad: none, jvp: none, batch: partial(batch_rng_bit_generator, "an unbatched state only") };
            /// Reduces each window of arrays with a combiner computation (pooling).
            ReduceWindow = "reduce-window", Even, kind: ReduceWindow, stablehlo: "stablehlo.reduce_window", window { shape: shape_reduce_window, lower: lower_reduce_window, raise: raise_reduce_window, text: text_reduce_window, grad: partial(vjp_reduce_window, "sum, max, min, bodies that select (argmax)"), jvp: partial(jvp_reduce_window, "sum, max, min"), batch: partial(batch_reduce_window, "initial values the same for every example, as in JAX") };
            /// Scatters a source into the element each window selects (max-pool gradients).
            SelectAndScatter = "select-and-scatter", Fixed(3), kind: SelectAndScatter, stablehlo: "stablehlo.select_and_scatter", window { shape: shape_select_and_scatter, lower: lower_select_and_scatter, raise: raise_select_and_scatter, text: text_select_and_scatter, grad: partial(vjp_select_and_scatter, "select a >= b (>, <=, <), scatter by adding"), jvp: partial(jvp_select_and_scatter, "scatter by adding"), batch: partial(batch_select_and_scatter, "an initial value the same for every example, as in JAX") };
            /// Repeats a body computation on a carry while a condition computation holds.
            While = "while", Fixed(1), kind: While, stablehlo: "stablehlo.while", control { shape: shape_while, lower: lower_while, raise: raise_while, text: text_while, grad: partial(vjp_while, "fori_loop, scan, while_loop_bounded"), jvp: rule(jvp_while), batch: rule(batch_while) };
            /// Bitwise (logical on pred) and.
            And = "and", Fixed(2), kind: Bitwise(BitwiseOp::And), stablehlo: "stablehlo.and", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// Bitwise (logical on pred) or.
            Or = "or", Fixed(2), kind: Bitwise(BitwiseOp::Or), stablehlo: "stablehlo.or", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// Bitwise (logical on pred) exclusive or.
            Xor = "xor", Fixed(2), kind: Bitwise(BitwiseOp::Xor), stablehlo: "stablehlo.xor", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// Bitwise (logical on pred) not.
            Not = "not", Fixed(1), kind: BitwiseUnary(BitwiseUnary::Not), stablehlo: "stablehlo.not", bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, jvp: none, batch: rule(batch_bitwise_unary) };
            /// Shift left.
            ShiftLeft = "shift-left", Fixed(2), kind: Bitwise(BitwiseOp::ShiftLeft), stablehlo: "stablehlo.shift_left", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// Shift right, filling with the sign bit.
            ShiftRightArithmetic = "shift-right-arithmetic", Fixed(2), kind: Bitwise(BitwiseOp::ShiftRightArithmetic), stablehlo: "stablehlo.shift_right_arithmetic", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// Shift right, filling with zeros.
            ShiftRightLogical = "shift-right-logical", Fixed(2), kind: Bitwise(BitwiseOp::ShiftRightLogical), stablehlo: "stablehlo.shift_right_logical", bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, jvp: none, batch: rule(batch_bitwise) };
            /// The number of set bits.
            Popcnt = "popcnt", Fixed(1), kind: BitwiseUnary(BitwiseUnary::Popcnt), stablehlo: "stablehlo.popcnt", bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, jvp: none, batch: rule(batch_bitwise_unary) };
            /// The number of leading zero bits.
            CountLeadingZeros = "count-leading-zeros", Fixed(1), kind: BitwiseUnary(BitwiseUnary::CountLeadingZeros), stablehlo: "stablehlo.count_leading_zeros", bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, jvp: none, batch: rule(batch_bitwise_unary) };
            /// Runs one of several branch computations, chosen by an index or predicate.
            Conditional = "conditional", Variadic, kind: Conditional, stablehlo: "stablehlo.case", control { shape: shape_conditional, lower: lower_conditional, raise: raise_conditional, text: text_conditional, grad: rule(vjp_conditional), jvp: rule(jvp_conditional), batch: rule(batch_conditional) };
            /// ConvGeneralDilated: a windowed contraction of an input with a kernel.
            Convolution = "convolution", Fixed(2), kind: Convolution, stablehlo: "stablehlo.convolution", linalg { shape: shape_convolution, lower: lower_convolution, raise: raise_convolution, text: text_convolution, grad: rule(vjp_convolution), jvp: rule(jvp_convolution), batch: rule(batch_convolution) };
            /// Applies a scalar computation element-wise to several arrays.
            Map = "map", Variadic, kind: Map, stablehlo: "stablehlo.map", misc { shape: shape_map, lower: lower_map, raise: raise_map, text: text_map, grad: rule(vjp_map), jvp: rule(jvp_map), batch: rule(batch_map) };
            /// Its operand unchanged; computations are not moved across it.
            OptimizationBarrier = "opt-barrier", Fixed(1), kind: OptimizationBarrier, stablehlo: "stablehlo.optimization_barrier", misc { shape: shape_optimization_barrier, lower: -, raise: raise_optimization_barrier, text: -, grad: rule(vjp_optimization_barrier), jvp: rule(jvp_optimization_barrier), batch: rule(batch_optimization_barrier) };
            /// A kernel of the plugin's, by name.
            CustomCall = "custom-call", Variadic, kind: CustomCall, stablehlo: "stablehlo.custom_call", misc { shape: shape_custom_call, lower: lower_custom_call, raise: raise_custom_call, text: text_custom_call, grad: partial(vjp_custom_call, "the `Sharding` constraint (with_sharding_constraint)"), jvp: partial(jvp_custom_call, "the `Sharding` constraint (with_sharding_constraint); other kernels are opaque"), batch: partial(batch_custom_call, "the `Sharding` constraint (with_sharding_constraint); other kernels are opaque: their behaviour on a batch axis is unknown") };
            /// The Cholesky factor of symmetric positive-definite matrices.
            Cholesky = "cholesky", Fixed(1), kind: Cholesky, stablehlo: "stablehlo.cholesky", linalg { shape: shape_cholesky, lower: lower_cholesky, raise: raise_cholesky, text: text_cholesky, grad: rule(vjp_cholesky), jvp: rule(jvp_cholesky), batch: rule(batch_cholesky) };
            /// Solves triangular systems.
            TriangularSolve = "triangular-solve", Fixed(2), kind: TriangularSolve, stablehlo: "stablehlo.triangular_solve", linalg { shape: shape_triangular_solve, lower: lower_triangular_solve, raise: raise_triangular_solve, text: text_triangular_solve, grad: rule(vjp_triangular_solve), jvp: partial(jvp_triangular_solve, "real `a`, or complex `a` not taken as its adjoint"), batch: rule(batch_triangular_solve) };
            /// Rounds to the nearest integer, halfway cases away from zero.
            RoundNearestAfz = "round-nearest-afz", Fixed(1), kind: Unary(UnaryOp::RoundNearestAfz), stablehlo: "stablehlo.round_nearest_afz", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// Rounds to the nearest integer, halfway cases to even.
            RoundNearestEven = "round-nearest-even", Fixed(1), kind: Unary(UnaryOp::RoundNearestEven), stablehlo: "stablehlo.round_nearest_even", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// Cube root.
            Cbrt = "cbrt", Fixed(1), kind: Unary(UnaryOp::Cbrt), stablehlo: "stablehlo.cbrt", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// Tangent.
            Tan = "tan", Fixed(1), kind: Unary(UnaryOp::Tan), stablehlo: "stablehlo.tan", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// The error function.
            Erf = "erf", Fixed(1), kind: Unary(UnaryOp::Erf), stablehlo: "chlo.erf", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_unary), batch: rule(batch_unary) };
            /// True where an element is neither infinite nor NaN (`pred` result).
            IsFinite = "is-finite", Fixed(1), kind: Unary(UnaryOp::IsFinite), stablehlo: "stablehlo.is_finite", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, jvp: none, batch: rule(batch_unary) };
            /// `min(max(operand, min), max)`: min, operand, max; the bounds are scalars or of the operand's shape.
            Clamp = "clamp", Fixed(3), kind: Clamp, stablehlo: "stablehlo.clamp", elementwise { shape: shape_clamp, lower: -, raise: raise_clamp, text: -, grad: rule(vjp_clamp), jvp: rule(jvp_clamp), batch: rule(batch_clamp) };
            /// The replica the program runs as, a `u32` scalar.
            ReplicaId = "replica-id", Fixed(0), kind: ReplicaId, stablehlo: "stablehlo.replica_id", collective { shape: shape_replica_id, lower: -, raise: raise_replica_id, text: -, grad: none, jvp: none, batch: none };
            /// The partition the program runs as, a `u32` scalar.
            PartitionId = "partition-id", Fixed(0), kind: PartitionId, stablehlo: "stablehlo.partition_id", collective { shape: shape_partition_id, lower: -, raise: raise_partition_id, text: -, grad: none, jvp: none, batch: none };
            /// Combines an array across the devices of each replica group with a reducer computation (psum).
            AllReduce = "all-reduce", Fixed(1), kind: AllReduce, stablehlo: "stablehlo.all_reduce", collective { shape: shape_all_reduce, lower: lower_all_reduce, raise: raise_all_reduce, text: text_all_reduce, grad: partial(vjp_all_reduce, "sum"), jvp: partial(jvp_all_reduce, "sum"), batch: rule(batch_all_reduce) };
            /// Joins the arrays of each replica group along one axis.
            AllGather = "all-gather", Fixed(1), kind: AllGather, stablehlo: "stablehlo.all_gather", collective { shape: shape_all_gather, lower: lower_all_gather, raise: raise_all_gather, text: text_all_gather, grad: rule(vjp_all_gather), jvp: rule(jvp_all_gather), batch: rule(batch_all_gather) };
            /// Combines an array across each replica group and keeps this device's block along one axis.
            ReduceScatter = "reduce-scatter", Fixed(1), kind: ReduceScatter, stablehlo: "stablehlo.reduce_scatter", collective { shape: shape_reduce_scatter, lower: lower_reduce_scatter, raise: raise_reduce_scatter, text: text_reduce_scatter, grad: partial(vjp_reduce_scatter, "sum"), jvp: partial(jvp_reduce_scatter, "sum"), batch: rule(batch_reduce_scatter) };
            /// Sends each source device's array to its target device.
            CollectivePermute = "collective-permute", Fixed(1), kind: CollectivePermute, stablehlo: "stablehlo.collective_permute", collective { shape: shape_collective_permute, lower: lower_collective_permute, raise: raise_collective_permute, text: text_collective_permute, grad: rule(vjp_collective_permute), jvp: rule(jvp_collective_permute), batch: rule(batch_collective_permute) };
            /// Splits an array into one block per group member, exchanges the blocks and joins them.
            AllToAll = "all-to-all", Fixed(1), kind: AllToAll, stablehlo: "stablehlo.all_to_all", collective { shape: shape_all_to_all, lower: lower_all_to_all, raise: raise_all_to_all, text: text_all_to_all, grad: rule(vjp_all_to_all), jvp: rule(jvp_all_to_all), batch: rule(batch_all_to_all) };
            /// The real part of a complex array (of a real float array: itself).
            Real = "real", Fixed(1), kind: Unary(UnaryOp::Real), stablehlo: "stablehlo.real", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_linear), batch: rule(batch_unary) };
            /// The imaginary part of a complex array (of a real float array: zeros).
            Imag = "imag", Fixed(1), kind: Unary(UnaryOp::Imag), stablehlo: "stablehlo.imag", elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), jvp: rule(jvp_linear), batch: rule(batch_unary) };
            /// The complex array `x + i·y` of two `f32` (→ `c64`) or `f64` (→ `c128`) arrays.
            Complex = "complex", Fixed(2), kind: Binary(BinaryOp::Complex), stablehlo: "stablehlo.complex", elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), jvp: rule(jvp_linear), batch: rule(batch_binary) };
        }
    };
}

pub(crate) use for_each_op;
