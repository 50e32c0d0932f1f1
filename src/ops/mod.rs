//! The op library, one file per family. Each family holds, side by side, the pure
//! shape rules (`infer_*`, unit-tested below them), the builder methods on
//! [`Op`](crate::Op)/[`Builder`](crate::Builder) that run those rules and emit the
//! instruction, and (as autodiff lands) the gradient rules.
//!
//! | family | file | ops |
//! |---|---|---|
//! | bitwise | [`bitwise`] | `and or xor not`, `shift-left shift-right-arithmetic shift-right-logical`, `popcnt count-leading-zeros` |
//! | control flow | [`control`] | `while` (`while_loop`, `fori_loop`), `conditional` (`cond`, `switch`) over trees, bodies capturing outside values |
//! | element-wise | [`elementwise`] | `add subtract multiply divide maximum minimum power remainder atan2`, `negate exponential log tanh abs sqrt rsqrt sine cosine logistic floor ceil sign exponential-minus-one log-plus-one round-nearest-afz round-nearest-even cbrt tan erf is-finite`, `compare`, `select`, `clamp`, operators `+ - * /` with numpy broadcasting |
//! | shape and layout | [`shape_ops`] | `broadcast` (`broadcast_in_dim`, numpy `broadcast_to`), `reshape`, `transpose`, `convert`, `get-tuple-element` |
//! | indexing | [`indexing`] | `gather`, `scatter` (combiner closure), numpy `take` |
//! | linear algebra | [`linalg`] | `dot` (`dot_general`, numpy `matmul`) |
//! | miscellaneous | [`misc`] | `map` (closure), `opt-barrier`, `custom-call` |
//! | numpy layer | [`numpy`] | `sum prod amax amin` (keepdims), `argmax argmin`, `softmax log_softmax logsumexp`, `one_hot`, `clip` (clamp with Rust numbers), `square`, `squeeze expand_dims`, `split stack`, `arange zeros ones full`, two-operand `einsum` |
//! | random bits | [`random`] | `rng-bit-generator` (three-fry, philox), `bitcast-convert`, `uniform_f32` |
//! | reductions | [`reduction`] | `reduce` (variadic, with a body built from a closure that may capture outer values); `reduce_sum`, `reduce_max`, `reduce_min`, `mean` |
//! | slicing | [`slicing`] | `iota`, `slice` (`slice_in_dim`), `dynamic-slice`, `dynamic-update-slice`, `concatenate`, `pad`, `reverse` |
//! | sorting | [`sorting`] | `sort` (several operands, comparator closure, stable), `sort_ascending`, `top_k` (as `jax.lax.top_k`) |
//! | JAX's PRNG | [`threefry`] | `prng_key`, `threefry_split`, `threefry_fold_in`, `threefry_bits`, `threefry_uniform` (bit-equal to `jax.random`) |
//! | JAX's samplers | [`sampling`] | `uniform normal truncated_normal randint bernoulli gumbel categorical permutation shuffle choice`, `random_split random_fold_in random_bits`, `rbg_key` (bit-equal to `jax.random`, threefry or rbg keys) |
//! | windows | [`window`] | `reduce-window` (pooling: `max_pool`, `sum_pool`) |
//! | structural | [`structural`] | `parameter`, `constant`, `tuple`, `call` |
//!
//! The opcode table (each op's HLO name, arity and doc) is [`crate::ir::Opcode`].

pub mod bitwise;
pub mod control;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod misc;
pub mod numpy;
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
