//! Bitwise and logical ops: `and`, `or`, `xor`, `not` (on `pred` and integers),
//! shifts, `popcnt` and `count-leading-zeros` (integers). Binary ops broadcast the
//! numpy way, as the arithmetic ones do.
use super::array_of;
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, OpKind, RaiseCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Bitwise binary ops: `and or xor shift-left shift-right-arithmetic shift-right-logical`

pub use crate::ir::attrs::BitwiseOp;

impl BitwiseOp {
    fn accepts(self, t: ElementType) -> bool {
        match self {
            BitwiseOp::And | BitwiseOp::Or | BitwiseOp::Xor => {
                t == ElementType::Pred || t.is_integer()
            }
            _ => t.is_integer(),
        }
    }
}

/// Bitwise binary rule: identical array shapes of an integer type (or `pred` for
/// and/or/xor); same shape out.
pub fn infer_bitwise(op: BitwiseOp, lhs: &Shape, rhs: &Shape) -> Result<Shape, ShapeError> {
    let name = op.opcode().name();
    let (lt, ld) = array_of(name, lhs)?;
    let (rt, rd) = array_of(name, rhs)?;
    if lt != rt || !op.accepts(lt) {
        return Err(ShapeError::new(
            name,
            &[lhs, rhs],
            ShapeErrorKind::ElementType,
            format!(
                "needs two operands of one integer type{}, got {lt} and {rt}",
                if op.accepts(ElementType::Pred) {
                    " (or pred)"
                } else {
                    ""
                }
            ),
        ));
    }
    if ld != rd {
        return Err(ShapeError::new(
            name,
            &[lhs, rhs],
            ShapeErrorKind::Dimension,
            "dimensions differ",
        ));
    }
    Ok(lhs.clone())
}

pub(crate) fn shape_bitwise(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Bitwise(b) = kind else {
        return Err(super::table::not_for("bitwise", kind));
    };
    infer_bitwise(*b, cx.operands[0], cx.operands[1])
}

pub(crate) fn raise_bitwise(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    crate::ir::Opcode::from_name(&p.opcode)
        .and_then(BitwiseOp::from_opcode)
        .map(OpKind::Bitwise)
        .ok_or_else(|| format!("`{}` is not a bitwise binary op", p.opcode))
}

impl Op {
    pub(crate) fn bitwise(&self, op: BitwiseOp, rhs: &Op, loc: &'static Location<'static>) -> Op {
        match self.broadcast_pair(rhs, op.opcode().name(), loc) {
            Ok((l, r)) => self
                .builder()
                .emit(OpKind::Bitwise(op), &[&l, &r], None, loc),
            Err(failed) => failed,
        }
    }

    /// Bitwise and (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn and(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::And, rhs, Location::caller())
    }

    /// Bitwise or (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn or(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::Or, rhs, Location::caller())
    }

    /// Bitwise exclusive or (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn xor(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::Xor, rhs, Location::caller())
    }

    /// `self << rhs` (XLA's ShiftLeft: 0 for shifts of the bit width or more).
    #[track_caller]
    pub fn shift_left(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::ShiftLeft, rhs, Location::caller())
    }

    /// `self >> rhs` filling with the sign bit.
    #[track_caller]
    pub fn shift_right_arithmetic(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::ShiftRightArithmetic, rhs, Location::caller())
    }

    /// `self >> rhs` filling with zeros.
    #[track_caller]
    pub fn shift_right_logical(&self, rhs: &Op) -> Op {
        self.bitwise(BitwiseOp::ShiftRightLogical, rhs, Location::caller())
    }
}

#[cfg(test)]
mod bitwise_tests {
    use super::*;

    #[test]
    fn rules() {
        let u = Shape::of::<u32>(&[3]);
        let p = Shape::of::<bool>(&[3]);
        let f = Shape::of::<f32>(&[3]);
        assert!(infer_bitwise(BitwiseOp::Xor, &u, &u).is_ok());
        assert!(infer_bitwise(BitwiseOp::And, &p, &p).is_ok());
        assert!(infer_bitwise(BitwiseOp::ShiftLeft, &p, &p).is_err());
        assert!(infer_bitwise(BitwiseOp::Or, &f, &f).is_err());
        assert!(infer_bitwise_unary(BitwiseUnary::Not, &p).is_ok());
        assert!(infer_bitwise_unary(BitwiseUnary::Popcnt, &p).is_err());
        assert!(infer_bitwise_unary(BitwiseUnary::CountLeadingZeros, &f).is_err());
    }
}

// ---------------------------------------------------------------------------------
// Bitwise unary ops: `not popcnt count-leading-zeros` (their rules are tested above)

pub use crate::ir::attrs::BitwiseUnary;

/// Bitwise unary rule: an integer array (or `pred` for not); same shape out.
pub fn infer_bitwise_unary(op: BitwiseUnary, x: &Shape) -> Result<Shape, ShapeError> {
    let name = op.opcode().name();
    let (t, _) = array_of(name, x)?;
    if !(t.is_integer() || (op == BitwiseUnary::Not && t == ElementType::Pred)) {
        return Err(ShapeError::new(
            name,
            &[x],
            ShapeErrorKind::ElementType,
            format!("needs an integer type, got {t}"),
        ));
    }
    Ok(x.clone())
}

pub(crate) fn shape_bitwise_unary(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::BitwiseUnary(u) = kind else {
        return Err(super::table::not_for("bitwise", kind));
    };
    infer_bitwise_unary(*u, cx.operands[0])
}

pub(crate) fn raise_bitwise_unary(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    crate::ir::Opcode::from_name(&p.opcode)
        .and_then(BitwiseUnary::from_opcode)
        .map(OpKind::BitwiseUnary)
        .ok_or_else(|| format!("`{}` is not a bitwise unary op", p.opcode))
}

impl Op {
    fn bitwise_unary(&self, op: BitwiseUnary, loc: &'static Location<'static>) -> Op {
        self.builder()
            .emit(OpKind::BitwiseUnary(op), &[self], None, loc)
    }

    /// Bitwise not (logical on `pred`).
    #[track_caller]
    pub fn not(&self) -> Op {
        self.bitwise_unary(BitwiseUnary::Not, Location::caller())
    }

    /// The number of set bits of each element.
    #[track_caller]
    pub fn popcnt(&self) -> Op {
        self.bitwise_unary(BitwiseUnary::Popcnt, Location::caller())
    }

    /// The number of leading zero bits of each element.
    #[track_caller]
    pub fn count_leading_zeros(&self) -> Op {
        self.bitwise_unary(BitwiseUnary::CountLeadingZeros, Location::caller())
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: every operand batched at axis 0.
pub(crate) fn batch_bitwise(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: the operand batched at axis 0.
pub(crate) fn batch_bitwise_unary(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}
