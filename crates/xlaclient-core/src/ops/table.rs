//! The op table: one line per opcode, naming the family file that holds the op's
//! block and the op's rule functions there. Everything that dispatches on the op
//! is generated from it: the [`Rules`] the IR's passes are handed (shape rule,
//! lowering, raise, HLO text), the gradient dispatch of reverse mode and the
//! [`gradient`] classification the README's table is checked against. The matches
//! it generates have no catch-all arm, so a missing line does not compile, and a
//! line given twice is an unreachable pattern.
//!
//! Each line reads
//!
//! ```text
//! Opcode: family { shape: f, lower: f | -, raise: f, text: f | -, grad: G, batch: - };
//! ```
//!
//! - `shape`: `fn(&OpKind, &InferCx) -> Result<Shape, ShapeError>`, the op's shape
//!   rule (the operand count is checked before, from the opcode table);
//! - `lower`: `fn(&OpKind, &LowerCx, &mut HloInstructionProto)`, writes the
//!   attributes; `-` for an op without any;
//! - `raise`: `fn(&HloInstructionProto, &RaiseCx) -> Result<OpKind, String>`, reads
//!   them back;
//! - `text`: `fn(&OpKind, &TextCx, &mut OpText)`, prints them; `-` for none;
//! - `grad`: `rule(f)` (a rule for every form), `partial(f, "forms")` (a rule for
//!   the forms named, [`Error::NoGradient`](crate::Error::NoGradient) for the
//!   others), `none` (no gradient flows: integer, predicate or constant results)
//!   or `missing`; `f` is `fn(&Node) -> Grads` (see [`crate::autodiff`]);
//! - `batch`: the slot for the batching rule (vmap), `-` until it lands.
//!
//! Adding an op: its entry in the opcode table ([`Opcode`]; a new [`OpKind`]
//! variant and attribute type in [`crate::ir`] if its attributes are new), one line
//! here, one block in its family file with the functions the line names (and the
//! builder method, and tests), one generator in the fuzzer (`tests/common/fuzz.rs`).

use crate::autodiff::{Grads, Node};
use crate::error::ShapeError;
use crate::ir::{InferCx, LowerCx, OpKind, OpText, Opcode, RaiseCx, Rules, TextCx};
use crate::proto;
use crate::shape::Shape;

/// The op library's rules, as the IR's passes take them ([`crate::ir::verify`],
/// the lowering, the printer, the raise of foreign modules): generated from the op
/// table.
#[derive(Clone, Copy, Debug, Default)]
pub struct Table;

/// What reverse mode does with an op (the README's gradient column is checked
/// against this).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gradient {
    /// A rule, tested against finite differences (`tests/grad*.rs`).
    Rule,
    /// A rule for some forms, an error naming the op for the others.
    Partial(&'static str),
    /// No gradient flows: the results are integers, predicates, bits or constants.
    None,
    /// No rule yet: asking is an error naming the op and the line.
    Missing,
}

/// The `lower` slot of an op without attributes.
fn no_attrs(_: &OpKind, _: &LowerCx<'_>, _: &mut proto::HloInstructionProto) {}

/// The `text` slot of an op without attributes.
fn no_text(_: &OpKind, _: &TextCx<'_>, _: &mut OpText) {}

/// A rule handed the kind of another op (the table dispatches on the kind's own
/// opcode, so this does not happen).
pub(crate) fn not_for(op: &'static str, kind: &OpKind) -> ShapeError {
    ShapeError::new(
        op,
        &[],
        crate::error::ShapeErrorKind::Attribute,
        format!("the rule of `{op}` was handed a `{}`", kind.opcode().name()),
    )
}

macro_rules! lower_slot {
    ($fam:ident, -) => {
        no_attrs
    };
    ($fam:ident, $f:ident) => {
        super::$fam::$f
    };
}

macro_rules! text_slot {
    ($fam:ident, -) => {
        no_text
    };
    ($fam:ident, $f:ident) => {
        super::$fam::$f
    };
}

macro_rules! grad_class {
    (rule($f:ident)) => {
        Gradient::Rule
    };
    (partial($f:ident, $forms:literal)) => {
        Gradient::Partial($forms)
    };
    (none) => {
        Gradient::None
    };
    (missing) => {
        Gradient::Missing
    };
}

macro_rules! grad_call {
    ($fam:ident, $n:ident, rule($f:ident)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, partial($f:ident, $forms:literal)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, none) => {
        Ok(vec![None; $n.operands.len()])
    };
    ($fam:ident, $n:ident, missing) => {
        Err("this op has no gradient rule yet".to_string())
    };
}

macro_rules! op_table {
    ($(
        $op:ident: $fam:ident {
            shape: $shape:ident,
            lower: $lower:tt,
            raise: $raise:ident,
            text: $text:tt,
            grad: $gk:ident $(($($ga:tt)*))?,
            batch: $batch:tt $(,)?
        };
    )*) => {
        impl Rules for Table {
            fn infer(&self, kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
                let op = kind.opcode();
                op.check_arity(cx.operands)?;
                match op {
                    $(Opcode::$op => super::$fam::$shape(kind, cx),)*
                }
            }

            fn lower(
                &self,
                kind: &OpKind,
                cx: &LowerCx<'_>,
                p: &mut proto::HloInstructionProto,
            ) {
                match kind.opcode() {
                    $(Opcode::$op => lower_slot!($fam, $lower)(kind, cx, p),)*
                }
            }

            fn raise(
                &self,
                op: Opcode,
                p: &proto::HloInstructionProto,
                cx: &RaiseCx<'_>,
            ) -> Result<OpKind, String> {
                match op {
                    $(Opcode::$op => super::$fam::$raise(p, cx),)*
                }
            }

            fn text(&self, kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
                match kind.opcode() {
                    $(Opcode::$op => text_slot!($fam, $text)(kind, cx, out),)*
                }
            }
        }

        /// How reverse mode treats `op` (see [`Gradient`]).
        pub fn gradient(op: Opcode) -> Gradient {
            match op {
                $(Opcode::$op => grad_class!($gk $(($($ga)*))?),)*
            }
        }

        /// The gradient rule of `n`'s op: the cotangents of its operands, or why
        /// there are none.
        pub(crate) fn vjp(n: &Node) -> Grads {
            match n.kind.opcode() {
                $(Opcode::$op => grad_call!($fam, n, $gk $(($($ga)*))?),)*
            }
        }

        /// The family file of `op` (`src/ops/<family>.rs`).
        pub fn family(op: Opcode) -> &'static str {
            match op {
                $(Opcode::$op => stringify!($fam),)*
            }
        }
    };
}

op_table! {
    Parameter: structural { shape: shape_parameter, lower: lower_parameter, raise: raise_parameter, text: text_parameter, grad: none, batch: - };
    Constant: structural { shape: shape_constant, lower: lower_constant, raise: raise_constant, text: text_constant, grad: none, batch: - };
    Negate: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Exponential: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Log: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Tanh: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Abs: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Sqrt: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Rsqrt: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Sine: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Cosine: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Logistic: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Floor: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    Ceil: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    Sign: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    ExponentialMinusOne: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    LogPlusOne: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Add: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Subtract: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Multiply: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Divide: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Maximum: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Minimum: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Power: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Remainder: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Atan2: elementwise { shape: shape_binary, lower: -, raise: raise_binary, text: -, grad: rule(vjp_binary), batch: - };
    Compare: elementwise { shape: shape_compare, lower: lower_compare, raise: raise_compare, text: text_compare, grad: none, batch: - };
    Select: elementwise { shape: shape_select, lower: -, raise: raise_select, text: -, grad: rule(vjp_select), batch: - };
    Broadcast: shape_ops { shape: shape_broadcast, lower: lower_broadcast, raise: raise_broadcast, text: text_broadcast, grad: rule(vjp_broadcast), batch: - };
    Reshape: shape_ops { shape: shape_reshape, lower: -, raise: raise_reshape, text: -, grad: rule(vjp_reshape), batch: - };
    Transpose: shape_ops { shape: shape_transpose, lower: lower_transpose, raise: raise_transpose, text: text_transpose, grad: rule(vjp_transpose), batch: - };
    Convert: shape_ops { shape: shape_convert, lower: -, raise: raise_convert, text: -, grad: rule(vjp_convert), batch: - };
    Tuple: structural { shape: shape_tuple, lower: -, raise: raise_tuple, text: -, grad: rule(vjp_tuple), batch: - };
    GetTupleElement: shape_ops { shape: shape_get_tuple_element, lower: lower_get_tuple_element, raise: raise_get_tuple_element, text: text_get_tuple_element, grad: rule(vjp_get_tuple_element), batch: - };
    Dot: linalg { shape: shape_dot, lower: lower_dot, raise: raise_dot, text: text_dot, grad: rule(vjp_dot), batch: - };
    Reduce: reduction { shape: shape_reduce, lower: lower_reduce, raise: raise_reduce, text: text_reduce, grad: partial(vjp_reduce, "sum, product, max, min, bodies that select (argmax)"), batch: - };
    Call: structural { shape: shape_call, lower: lower_call, raise: raise_call, text: text_call, grad: rule(vjp_call), batch: - };
    Iota: slicing { shape: shape_iota, lower: lower_iota, raise: raise_iota, text: text_iota, grad: none, batch: - };
    Slice: slicing { shape: shape_slice, lower: lower_slice, raise: raise_slice, text: text_slice, grad: rule(vjp_slice), batch: - };
    DynamicSlice: slicing { shape: shape_dynamic_slice, lower: lower_dynamic_slice, raise: raise_dynamic_slice, text: text_dynamic_slice, grad: rule(vjp_dynamic_slice), batch: - };
    DynamicUpdateSlice: slicing { shape: shape_dynamic_update_slice, lower: -, raise: raise_dynamic_update_slice, text: -, grad: rule(vjp_dynamic_update_slice), batch: - };
    Concatenate: slicing { shape: shape_concatenate, lower: lower_concatenate, raise: raise_concatenate, text: text_concatenate, grad: rule(vjp_concatenate), batch: - };
    Pad: slicing { shape: shape_pad, lower: lower_pad, raise: raise_pad, text: text_pad, grad: rule(vjp_pad), batch: - };
    Reverse: slicing { shape: shape_reverse, lower: lower_reverse, raise: raise_reverse, text: text_reverse, grad: rule(vjp_reverse), batch: - };
    Sort: sorting { shape: shape_sort, lower: lower_sort, raise: raise_sort, text: text_sort, grad: rule(vjp_sort), batch: - };
    Gather: indexing { shape: shape_gather, lower: lower_gather, raise: raise_gather, text: text_gather, grad: rule(vjp_gather), batch: - };
    Scatter: indexing { shape: shape_scatter, lower: lower_scatter, raise: raise_scatter, text: text_scatter, grad: partial(vjp_scatter, "one array combined by add, multiply (unique indices), max, min or replace"), batch: - };
    BitcastConvert: random { shape: shape_bitcast_convert, lower: -, raise: raise_bitcast_convert, text: -, grad: none, batch: - };
    RngBitGenerator: random { shape: shape_rng_bit_generator, lower: lower_rng_bit_generator, raise: raise_rng_bit_generator, text: text_rng_bit_generator, grad: none, batch: - };
    ReduceWindow: window { shape: shape_reduce_window, lower: lower_reduce_window, raise: raise_reduce_window, text: text_reduce_window, grad: partial(vjp_reduce_window, "sum, max, min, bodies that select (argmax)"), batch: - };
    SelectAndScatter: window { shape: shape_select_and_scatter, lower: lower_select_and_scatter, raise: raise_select_and_scatter, text: text_select_and_scatter, grad: partial(vjp_select_and_scatter, "select a >= b (>, <=, <), scatter by adding"), batch: - };
    While: control { shape: shape_while, lower: lower_while, raise: raise_while, text: text_while, grad: partial(vjp_while, "fori_loop, scan, while_loop_bounded"), batch: - };
    And: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    Or: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    Xor: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    Not: bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, batch: - };
    ShiftLeft: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    ShiftRightArithmetic: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    ShiftRightLogical: bitwise { shape: shape_bitwise, lower: -, raise: raise_bitwise, text: -, grad: none, batch: - };
    Popcnt: bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, batch: - };
    CountLeadingZeros: bitwise { shape: shape_bitwise_unary, lower: -, raise: raise_bitwise_unary, text: -, grad: none, batch: - };
    Conditional: control { shape: shape_conditional, lower: lower_conditional, raise: raise_conditional, text: text_conditional, grad: rule(vjp_conditional), batch: - };
    Convolution: linalg { shape: shape_convolution, lower: lower_convolution, raise: raise_convolution, text: text_convolution, grad: rule(vjp_convolution), batch: - };
    Map: misc { shape: shape_map, lower: lower_map, raise: raise_map, text: text_map, grad: rule(vjp_map), batch: - };
    OptimizationBarrier: misc { shape: shape_optimization_barrier, lower: -, raise: raise_optimization_barrier, text: -, grad: rule(vjp_optimization_barrier), batch: - };
    CustomCall: misc { shape: shape_custom_call, lower: lower_custom_call, raise: raise_custom_call, text: text_custom_call, grad: missing, batch: - };
    Cholesky: linalg { shape: shape_cholesky, lower: lower_cholesky, raise: raise_cholesky, text: text_cholesky, grad: rule(vjp_cholesky), batch: - };
    TriangularSolve: linalg { shape: shape_triangular_solve, lower: lower_triangular_solve, raise: raise_triangular_solve, text: text_triangular_solve, grad: rule(vjp_triangular_solve), batch: - };
    RoundNearestAfz: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    RoundNearestEven: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    Cbrt: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Tan: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    Erf: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: rule(vjp_unary), batch: - };
    IsFinite: elementwise { shape: shape_unary, lower: -, raise: raise_unary, text: -, grad: none, batch: - };
    Clamp: elementwise { shape: shape_clamp, lower: -, raise: raise_clamp, text: -, grad: rule(vjp_clamp), batch: - };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_has_a_family_file_and_a_gradient_class() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for op in Opcode::ALL {
            let f = root.join("src/ops").join(format!("{}.rs", family(*op)));
            assert!(f.exists(), "{op:?}: {}", f.display());
            let _ = gradient(*op);
        }
        assert_eq!(gradient(Opcode::Dot), Gradient::Rule);
        assert_eq!(gradient(Opcode::Compare), Gradient::None);
        assert_eq!(gradient(Opcode::CustomCall), Gradient::Missing);
        assert!(matches!(gradient(Opcode::Reduce), Gradient::Partial(_)));
    }

    #[test]
    fn the_dispatch_follows_the_kind() {
        // Each op's lowering and raise are inverse on an attribute-free op, and the
        // arity comes from the opcode table.
        let f = Shape::of::<f32>(&[2]);
        let cx = InferCx {
            operands: &[&f],
            target: None,
            sigs: &NoSigs,
        };
        let e = Table
            .infer(&OpKind::Binary(crate::BinaryOp::Add), &cx)
            .unwrap_err();
        assert_eq!(e.kind, crate::ShapeErrorKind::Arity, "{e}");
        let ok = Table
            .infer(&OpKind::Unary(crate::UnaryOp::Exponential), &cx)
            .unwrap();
        assert_eq!(ok, f);
    }

    struct NoSigs;
    impl crate::ir::Signatures for NoSigs {
        fn signature(&self, _: crate::ir::CompId) -> Option<(Vec<Shape>, Shape)> {
            None
        }
    }
}
