//! The op library, one file per family. Each op of the op table has one block in
//! its family file, in one order: the attribute types it uses (re-exported from
//! [`crate::ir::attrs`]), its pure shape rule (`infer_*`), the functions the op
//! table names for it (`shape_*`, `lower_*`, `raise_*`, `text_*`), its builder
//! methods on [`Op`](crate::Op)/[`Builder`](crate::Builder), its gradient rule
//! (`vjp_*`) and its unit tests.
//!
//! An op is declared once, by one line of the crate's op table
//! (`src/op_table.rs`): its doc, opcode, XLA's name, arity, `OpKind` variant,
//! family file and rule functions. The IR generates [`Opcode`](crate::ir::Opcode)
//! from that line; [`table`] generates every dispatch over the ops from it (the
//! [`Rules`](crate::ir::Rules) the IR's passes are handed, the gradient dispatch,
//! [`table::gradient`], [`table::family`]). Adding an op is that line, the op's
//! block in its family file, an arm in the fuzzer (`tests/common/fuzz.rs`) and in
//! `tests/ir.rs`'s examples, and a row in the guide's op table (`guide/14-ops.md`,
//! checked by `tests/guide_ops.rs`); [`table`] gives the recipe with an example.
//!
//! Some files hold no op of the table, only functions built from the others:
//! [`numpy`] (the `jax.numpy` face: reductions with `keepdims`, `softmax`,
//! `einsum`, …), [`numpy_index`] (numpy indexing, JAX's `x.at[idx]` updates),
//! [`arrays`], [`threefry`] and [`sampling`] (JAX's PRNG and samplers,
//! bit-equal to `jax.random`).

// Each op's unit tests close its block, and blocks follow each other.
#![allow(clippy::items_after_test_module)]

pub mod arrays;
pub mod bitwise;
pub mod collective;
pub mod control;
pub mod debug;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod misc;
pub mod numpy;
pub mod numpy_index;
pub mod random;
pub mod reduction;
pub mod sampling;
pub mod shape_ops;
pub mod slicing;
pub mod sorting;
pub mod structural;
pub mod table;
pub mod threefry;
pub mod window;

pub use table::Table;

use crate::error::{ShapeError, ShapeErrorKind};
use crate::shape::Shape;

/// Resolves a possibly negative axis (`-1` = last) against `rank`.
pub fn resolve_axis(op: &'static str, operand: &Shape, axis: i64) -> Result<usize, ShapeError> {
    let rank = operand.rank() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        return Err(ShapeError::new(
            op,
            &[operand],
            ShapeErrorKind::Axis,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(a as usize)
}

/// Resolves a list of axes, rejecting duplicates.
pub fn resolve_axes(
    op: &'static str,
    operand: &Shape,
    axes: &[i64],
) -> Result<Vec<usize>, ShapeError> {
    let mut out = Vec::with_capacity(axes.len());
    for a in axes {
        let r = resolve_axis(op, operand, *a)?;
        if out.contains(&r) {
            return Err(ShapeError::new(
                op,
                &[operand],
                ShapeErrorKind::Axis,
                format!("axis {a} is given twice in {axes:?}"),
            ));
        }
        out.push(r);
    }
    Ok(out)
}

/// Checks an axis attribute of an instruction: XLA's instructions take axes in
/// `0..rank` (a negative one, which the typed methods resolve before emitting, is
/// an error there: XLA refuses it, and aborts the process on some ops).
pub fn check_axis(op: &'static str, operand: &Shape, axis: i64) -> Result<usize, ShapeError> {
    if axis < 0 {
        return Err(ShapeError::new(
            op,
            &[operand],
            ShapeErrorKind::Axis,
            format!(
                "axis {axis} is negative: an instruction's axes are 0..{}",
                operand.rank()
            ),
        ));
    }
    resolve_axis(op, operand, axis)
}

/// Checks a list of axis attributes of an instruction: distinct, each in `0..rank`.
pub fn check_axes(
    op: &'static str,
    operand: &Shape,
    axes: &[i64],
) -> Result<Vec<usize>, ShapeError> {
    for a in axes {
        check_axis(op, operand, *a)?;
    }
    resolve_axes(op, operand, axes)
}

/// XLA's verifier refuses an instruction whose operands mix floating-point
/// precisions ("Seen floating point types of different precisions"), but for a few
/// ops (sort, dot, convolution, reduce-window); an integer operand next to a float
/// is fine. For the variadic ops that take several types: reduce, scatter, map.
pub(crate) fn check_one_float_type(
    op: &'static str,
    operands: &[&Shape],
) -> Result<(), ShapeError> {
    let mut floats = operands
        .iter()
        .filter_map(|s| s.element_type())
        .filter(|t| t.is_float());
    if let Some(first) = floats.next() {
        if let Some(other) = floats.find(|t| *t != first) {
            return Err(ShapeError::new(
                op,
                operands,
                ShapeErrorKind::ElementType,
                format!(
                    "operands mix floating-point types {first} and {other}; convert them to one"
                ),
            ));
        }
    }
    Ok(())
}

/// The array parts of a shape, or an error naming the op if it is not an array.
pub(crate) fn array_of<'a>(
    op: &'static str,
    s: &'a Shape,
) -> Result<(crate::shape::ElementType, &'a [i64]), ShapeError> {
    match s {
        Shape::Array { ty, dims } => Ok((*ty, dims)),
        _ => Err(ShapeError::new(
            op,
            &[s],
            ShapeErrorKind::Rank,
            "expects an array operand",
        )),
    }
}

/// An error naming `op` if the array `s` holds more bytes than `i64` counts (XLA
/// computes sizes in `i64`; such a shape can only come from a mistake).
pub(crate) fn check_size(
    op: &'static str,
    operands: &[&Shape],
    s: &Shape,
) -> Result<(), ShapeError> {
    if s.byte_size().is_none() {
        return Err(ShapeError::new(
            op,
            operands,
            ShapeErrorKind::Dimension,
            format!("the result {s} has more bytes than an i64 counts (size overflows)"),
        ));
    }
    Ok(())
}
