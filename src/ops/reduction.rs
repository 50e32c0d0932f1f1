//! Reductions: XLA's `reduce` with a body built from a Rust closure, and the usual
//! sums, maxima, minima and means on top.

use std::panic::Location;

use super::elementwise::{BinaryOp, Scalar};
use super::{array_of, resolve_axes};
use crate::builder::Op;
use crate::error::ShapeError;
use crate::proto;
use crate::shape::{ElementType, Shape};

/// `reduce` rule: an array, a scalar initial value of its element type, axes in
/// range and distinct; the reduced axes are removed.
pub fn infer_reduce(operand: &Shape, init: &Shape, axes: &[i64]) -> Result<Shape, ShapeError> {
    let (ty, od) = array_of("reduce", operand)?;
    let (it, id) = array_of("reduce", init)?;
    if !id.is_empty() || it != ty {
        return Err(ShapeError::new(
            "reduce",
            &[operand, init],
            format!("the initial value must be a {ty} scalar, got {init}"),
        ));
    }
    let axes = resolve_axes("reduce", operand, axes)?;
    let dims: Vec<i64> = (0..od.len())
        .filter(|i| !axes.contains(i))
        .map(|i| od[i])
        .collect();
    Ok(Shape::array(ty, &dims))
}

impl Op {
    /// XLA's Reduce over `axes`, starting from `init` (a scalar), combining with
    /// `body(accumulator, element)`, which must return a scalar of the same type.
    ///
    /// ```
    /// use xlaclient::{Builder, Shape};
    /// let b = Builder::new("r");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let m = x.reduce(&b.constant(f32::NEG_INFINITY), &[1], |a, e| a.max(e));
    /// assert_eq!(m.dims(), vec![2]);
    /// ```
    #[track_caller]
    pub fn reduce(&self, init: &Op, axes: &[i64], body: impl FnOnce(&Op, &Op) -> Op) -> Op {
        self.reduce_at(init, axes, Location::caller(), body)
    }

    pub(crate) fn reduce_at(
        &self,
        init: &Op,
        axes: &[i64],
        loc: &'static Location<'static>,
        body: impl FnOnce(&Op, &Op) -> Op,
    ) -> Op {
        let b = self.builder();
        let (Some(s), Some(is)) = (self.shape(), init.shape()) else {
            return b.poisoned();
        };
        let out = match infer_reduce(&s, &is, axes) {
            Ok(o) => o,
            Err(e) => return b.fail(e, loc),
        };
        let Some(ty) = s.element_type() else {
            return b.poisoned();
        };
        let scalar = Shape::scalar(ty);
        let Some(comp) = b.sub_computation(
            &format!("reduce_{ty}"),
            &[scalar.clone(), scalar.clone()],
            loc,
            |_, p| body(&p[0], &p[1]),
        ) else {
            return b.poisoned();
        };
        let (comp_id, root_shape) = {
            let g = b.g.borrow();
            let c = &g.computations[comp];
            let root = c.root.map(|r| c.instrs[r as usize].shape.clone());
            (c.id, root)
        };
        if root_shape.as_ref() != Some(&scalar) {
            return b.fail(
                ShapeError::new(
                    "reduce",
                    &[&s, &is],
                    format!(
                        "the body must return a {scalar} scalar, it returns {}",
                        root_shape.map_or("nothing".into(), |r| r.to_string())
                    ),
                ),
                loc,
            );
        }
        let axes_resolved: Vec<i64> = match resolve_axes("reduce", &s, axes) {
            Ok(a) => {
                let mut a: Vec<i64> = a.into_iter().map(|x| x as i64).collect();
                a.sort_unstable();
                a
            }
            Err(e) => return b.fail(e, loc),
        };
        b.emit("reduce", &[self, init], loc, move |_| {
            Ok((
                out,
                proto::HloInstructionProto {
                    dimensions: axes_resolved,
                    called_computation_ids: vec![comp_id],
                    ..Default::default()
                },
            ))
        })
    }

    /// Sum over `axes` (negative axes count from the end).
    #[track_caller]
    pub fn reduce_sum(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::add, |_| Scalar::Int(0), Location::caller())
    }

    /// Maximum over `axes`.
    #[track_caller]
    pub fn reduce_max(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::max, lowest, Location::caller())
    }

    /// Minimum over `axes`.
    #[track_caller]
    pub fn reduce_min(&self, axes: &[i64]) -> Op {
        self.reduce_binary(axes, BinaryOp::min, highest, Location::caller())
    }

    /// A reduction whose body is one binary op, starting from its identity.
    fn reduce_binary(
        &self,
        axes: &[i64],
        op: BinaryOp,
        identity: impl FnOnce(ElementType) -> Scalar,
        loc: &'static Location<'static>,
    ) -> Op {
        let Some(ty) = self.element_type() else {
            return self.builder().poisoned();
        };
        let init = self.builder().scalar_of(ty, identity(ty), loc);
        self.reduce_at(&init, axes, loc, |a, e| a.binary(op, e, loc))
    }

    /// Mean over `axes` (floating-point operands).
    #[track_caller]
    pub fn mean(&self, axes: &[i64]) -> Op {
        let loc = Location::caller();
        let Some(s) = self.shape() else {
            return self.builder().poisoned();
        };
        let count: i64 = match resolve_axes("reduce", &s, axes) {
            Ok(a) => a.iter().map(|i| s.dims()[*i]).product(),
            Err(e) => return self.builder().fail(e, loc),
        };
        let sum = self.reduce_sum(axes);
        sum.binary_scalar(BinaryOp::div, Scalar::Int(count), false, loc)
    }
}

/// The smallest value of `ty` (the identity of `max`).
fn lowest(ty: ElementType) -> Scalar {
    use ElementType::*;
    match ty {
        S8 => Scalar::Int(i8::MIN as i64),
        S16 => Scalar::Int(i16::MIN as i64),
        S32 => Scalar::Int(i32::MIN as i64),
        S64 => Scalar::Int(i64::MIN),
        _ if ty.is_float() => Scalar::Float(f64::NEG_INFINITY),
        _ => Scalar::Int(0),
    }
}

/// The largest value of `ty` (the identity of `min`).
fn highest(ty: ElementType) -> Scalar {
    use ElementType::*;
    match ty {
        S8 => Scalar::Int(i8::MAX as i64),
        S16 => Scalar::Int(i16::MAX as i64),
        S32 => Scalar::Int(i32::MAX as i64),
        S64 => Scalar::Int(i64::MAX),
        U8 => Scalar::Int(u8::MAX as i64),
        U16 => Scalar::Int(u16::MAX as i64),
        U32 => Scalar::Int(u32::MAX as i64),
        U64 => Scalar::UInt(u64::MAX),
        Pred => Scalar::Int(1),
        _ => Scalar::Float(f64::INFINITY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_rule() {
        let x = Shape::of::<f32>(&[2, 3, 4]);
        let z = Shape::of::<f32>(&[]);
        assert_eq!(
            infer_reduce(&x, &z, &[1]).unwrap(),
            Shape::of::<f32>(&[2, 4])
        );
        assert_eq!(
            infer_reduce(&x, &z, &[-1, 0]).unwrap(),
            Shape::of::<f32>(&[3])
        );
        assert!(infer_reduce(&x, &z, &[3]).is_err());
        assert!(infer_reduce(&x, &z, &[1, 1]).is_err());
        assert!(infer_reduce(&x, &Shape::of::<i32>(&[]), &[0]).is_err());
        assert!(infer_reduce(&x, &Shape::of::<f32>(&[1]), &[0]).is_err());
    }
}
