//! Bitwise and logical ops: `and`, `or`, `xor`, `not` (on `pred` and integers),
//! shifts, `popcnt` and `count-leading-zeros` (integers). Binary ops broadcast the
//! numpy way, as the arithmetic ones do.

use std::panic::Location;

use super::array_of;
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{OpKind, Opcode};
use crate::shape::{ElementType, Shape};

/// The bitwise binary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitwiseOp {
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

impl BitwiseOp {
    /// Every bitwise binary op.
    pub const ALL: &'static [BitwiseOp] = &[
        BitwiseOp::And,
        BitwiseOp::Or,
        BitwiseOp::Xor,
        BitwiseOp::ShiftLeft,
        BitwiseOp::ShiftRightArithmetic,
        BitwiseOp::ShiftRightLogical,
    ];

    /// The op's entry in the opcode table.
    pub fn opcode(self) -> Opcode {
        match self {
            BitwiseOp::And => Opcode::And,
            BitwiseOp::Or => Opcode::Or,
            BitwiseOp::Xor => Opcode::Xor,
            BitwiseOp::ShiftLeft => Opcode::ShiftLeft,
            BitwiseOp::ShiftRightArithmetic => Opcode::ShiftRightArithmetic,
            BitwiseOp::ShiftRightLogical => Opcode::ShiftRightLogical,
        }
    }

    fn accepts(self, t: ElementType) -> bool {
        match self {
            BitwiseOp::And | BitwiseOp::Or | BitwiseOp::Xor => {
                t == ElementType::Pred || t.is_integer()
            }
            _ => t.is_integer(),
        }
    }
}

/// The bitwise unary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BitwiseUnary {
    /// Bitwise (or logical, on `pred`) not.
    Not,
    /// The number of set bits.
    Popcnt,
    /// The number of leading zero bits.
    CountLeadingZeros,
}

impl BitwiseUnary {
    /// Every bitwise unary op.
    pub const ALL: &'static [BitwiseUnary] = &[
        BitwiseUnary::Not,
        BitwiseUnary::Popcnt,
        BitwiseUnary::CountLeadingZeros,
    ];

    /// The op's entry in the opcode table.
    pub fn opcode(self) -> Opcode {
        match self {
            BitwiseUnary::Not => Opcode::Not,
            BitwiseUnary::Popcnt => Opcode::Popcnt,
            BitwiseUnary::CountLeadingZeros => Opcode::CountLeadingZeros,
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

impl Op {
    pub(crate) fn bitwise_at(
        &self,
        op: BitwiseOp,
        rhs: &Op,
        loc: &'static Location<'static>,
    ) -> Op {
        match self.broadcast_pair(rhs, op.opcode().name(), loc) {
            Ok((l, r)) => self
                .builder()
                .emit(OpKind::Bitwise(op), &[&l, &r], None, loc),
            Err(failed) => failed,
        }
    }

    fn bitwise_unary(&self, op: BitwiseUnary, loc: &'static Location<'static>) -> Op {
        self.builder()
            .emit(OpKind::BitwiseUnary(op), &[self], None, loc)
    }

    /// Bitwise and (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn and(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::And, rhs, Location::caller())
    }

    /// Bitwise or (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn or(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::Or, rhs, Location::caller())
    }

    /// Bitwise exclusive or (logical on `pred`); shapes broadcast.
    #[track_caller]
    pub fn xor(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::Xor, rhs, Location::caller())
    }

    /// `self << rhs` (XLA's ShiftLeft: 0 for shifts of the bit width or more).
    #[track_caller]
    pub fn shift_left(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::ShiftLeft, rhs, Location::caller())
    }

    /// `self >> rhs` filling with the sign bit.
    #[track_caller]
    pub fn shift_right_arithmetic(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::ShiftRightArithmetic, rhs, Location::caller())
    }

    /// `self >> rhs` filling with zeros.
    #[track_caller]
    pub fn shift_right_logical(&self, rhs: &Op) -> Op {
        self.bitwise_at(BitwiseOp::ShiftRightLogical, rhs, Location::caller())
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

#[cfg(test)]
mod tests {
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
