//! Element-wise ops: unary and binary arithmetic, comparison, select and clamp, with
//! numpy broadcasting and Rust operators on top.
use super::array_of;
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Shared: type classes, gradient constants, test shapes

/// Which element types an op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeClass {
    /// Anything but `pred`.
    Numeric,
    /// Integers and real floats (not complex, not `pred`).
    Real,
    /// Real or complex floating point.
    Float,
    /// Real floating point only.
    RealFloat,
    /// Signed integers and real or complex floats (not unsigned, not `pred`).
    Signed,
    /// Signed integers and real floats.
    SignedReal,
    /// Anything but complex: integers, real floats and `pred` (ordered types).
    Ordered,
}

impl TypeClass {
    fn accepts(self, t: ElementType) -> bool {
        match self {
            TypeClass::Numeric => t != ElementType::Pred,
            TypeClass::Real => t != ElementType::Pred && !t.is_complex(),
            TypeClass::Float => t.is_float() || t.is_complex(),
            TypeClass::RealFloat => t.is_float(),
            TypeClass::Signed => t.is_signed_int() || t.is_float() || t.is_complex(),
            TypeClass::SignedReal => t.is_signed_int() || t.is_float(),
            TypeClass::Ordered => !t.is_complex(),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            TypeClass::Numeric => "a numeric element type",
            TypeClass::Real => "a real (not complex, not pred) element type",
            TypeClass::Float => "a floating-point element type",
            TypeClass::RealFloat => "a real floating-point element type",
            TypeClass::Signed => "a signed element type",
            TypeClass::SignedReal => "a signed real element type",
            TypeClass::Ordered => "an ordered (not complex) element type",
        }
    }
}

/// A constant of `x`'s element type.
fn konst(x: &Op, v: f64, loc: &'static Location<'static>) -> Op {
    let ty = x.element_type().unwrap_or(ElementType::F32);
    x.builder().scalar_of(ty, Scalar::Float(v), loc)
}

#[cfg(test)]
fn f32s(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

// ---------------------------------------------------------------------------------
// Element-wise unary ops (one op group: `negate exponential log tanh abs sqrt rsqrt sine cosine
// logistic floor ceil sign exponential-minus-one log-plus-one round-nearest-afz
// round-nearest-even cbrt tan erf is-finite`)

pub use crate::ir::attrs::UnaryOp;

macro_rules! unary_ops {
    ($( $(#[$doc:meta])* $method:ident => $variant:ident, $class:ident; )*) => {
        impl UnaryOp {
            /// The element types it accepts.
            pub fn type_class(self) -> TypeClass {
                match self { $(UnaryOp::$variant => TypeClass::$class,)* }
            }
        }

        impl Op {
            $(
                $(#[$doc])*
                #[doc = concat!("\n\nEmits XLA's `", stringify!($variant), "` op.")]
                #[track_caller]
                pub fn $method(&self) -> Op {
                    self.unary(UnaryOp::$variant, Location::caller())
                }
            )*
        }
    };
}

unary_ops! {
    /// `-x`.
    neg => Negate, Numeric;
    /// `e^x`.
    exp => Exponential, Float;
    /// Natural logarithm.
    log => Log, Float;
    /// Hyperbolic tangent.
    tanh => Tanh, Float;
    /// Absolute value.
    abs => Abs, SignedReal;
    /// Square root.
    sqrt => Sqrt, Float;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt, Float;
    /// Sine.
    sin => Sine, Float;
    /// Cosine.
    cos => Cosine, Float;
    /// The logistic sigmoid `1 / (1 + e^-x)`.
    logistic => Logistic, Float;
    /// Round down.
    floor => Floor, RealFloat;
    /// Round up.
    ceil => Ceil, RealFloat;
    /// -1, 0 or 1 by the sign of x.
    sign => Sign, Signed;
    /// `e^x - 1`, accurate near 0.
    expm1 => ExponentialMinusOne, Float;
    /// `ln(1 + x)`, accurate near 0.
    log1p => LogPlusOne, Float;
    /// Rounds to the nearest integer, halfway cases away from zero (Rust's
    /// `f32::round`: `round(2.5) = 3`, `round(-0.4) = -0.0`).
    round => RoundNearestAfz, RealFloat;
    /// Rounds to the nearest integer, halfway cases to the even one (Rust's
    /// `f32::round_ties_even`: `round_even(2.5) = 2`).
    round_even => RoundNearestEven, RealFloat;
    /// Cube root (real: `cbrt(-8) = -2`).
    cbrt => Cbrt, RealFloat;
    /// Tangent.
    tan => Tan, Float;
    /// The error function `2/sqrt(pi) * integral of e^(-t^2) from 0 to x`.
    erf => Erf, RealFloat;
    /// True where an element is neither infinite nor NaN: a `pred` array of the
    /// operand's dimensions.
    is_finite => IsFinite, RealFloat;
}

/// Unary element-wise rule: an array of an accepted type; the same shape out, but
/// for `is-finite` (see [`infer_is_finite`]).
pub fn infer_unary(op: UnaryOp, x: &Shape) -> Result<Shape, ShapeError> {
    let (ty, dims) = array_of(op.hlo_name(), x)?;
    if !op.type_class().accepts(ty) {
        return Err(ShapeError::new(
            op.hlo_name(),
            &[x],
            ShapeErrorKind::ElementType,
            format!("needs {}, got {ty}", op.type_class().describe()),
        ));
    }
    if op == UnaryOp::IsFinite {
        return Ok(infer_is_finite(dims));
    }
    Ok(x.clone())
}

/// `is-finite` rule, after the type check of [`infer_unary`] (a real float): `pred`
/// of the operand's dimensions.
pub fn infer_is_finite(dims: &[i64]) -> Shape {
    Shape::array(ElementType::Pred, dims)
}

pub(crate) fn shape_unary(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Unary(u) = kind else {
        return Err(super::table::not_for("unary", kind));
    };
    infer_unary(*u, cx.operands[0])
}

pub(crate) fn raise_unary(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    crate::ir::Opcode::from_name(&p.opcode)
        .and_then(UnaryOp::from_opcode)
        .map(OpKind::Unary)
        .ok_or_else(|| format!("`{}` is not a unary op", p.opcode))
}

impl Op {
    pub(crate) fn unary(&self, op: UnaryOp, loc: &'static Location<'static>) -> Op {
        self.builder().emit(OpKind::Unary(op), &[self], None, loc)
    }

    /// `max(x, 0)` (NaN stays NaN, `-0.0` gives `0.0`), whose gradient is 1 where
    /// `x > 0` and 0 elsewhere, at 0 included, as `jax.nn.relu` defines it.
    #[track_caller]
    pub fn relu(&self) -> Op {
        let loc = Location::caller();
        let ty = match self.element_type() {
            Ok(ty) => ty,
            Err(_) => return self.builder().fail_not_array(self, "maximum", loc),
        };
        let b = self.builder();
        let zero = b.scalar_of(ty, Scalar::Int(0), loc);
        let max = self.binary(BinaryOp::Maximum, &zero, loc);
        if !ty.is_float() {
            return max;
        }
        // Where x > 0 the result is x itself (gradient 1); elsewhere the max (0,
        // or NaN) held constant for the backward pass (gradient 0).
        let positive = self.compare(&zero, Comparison::Gt);
        let rest = max.stop_gradient();
        b.select(&positive, self, &rest)
    }
}

/// The cotangent of a unary op's operand (`None`: zero, for the piecewise-constant
/// ops). `abs` at 0 passes the cotangent unchanged (JAX: `select(x >= 0, g, -g)`),
/// `sqrt` at 0 gives infinity, as in JAX.
pub(crate) fn vjp_unary(n: &Node) -> Grads {
    let OpKind::Unary(op) = n.kind else {
        return Err("not a unary op".into());
    };
    Ok(arrays(vec![unary_ct(*op, n, &n.ct())]))
}

fn unary_ct(op: UnaryOp, n: &Node, ct: &Op) -> Option<Op> {
    use BinaryOp::{Add, Divide, Multiply, Subtract};
    let (x, y, loc) = (&n.operands[0], n.out(), n.loc);
    let k = |v: f64| konst(x, v, loc);
    let mul = |a: &Op, b: &Op| a.binary(Multiply, b, loc);
    Some(match op {
        UnaryOp::Negate => ct.unary(UnaryOp::Negate, loc),
        UnaryOp::Exponential => mul(ct, y),
        UnaryOp::Log => ct.binary(Divide, x, loc),
        UnaryOp::Tanh => mul(ct, &k(1.0).binary(Subtract, &mul(y, y), loc)),
        UnaryOp::Abs => {
            let nonneg = x.compare(&k(0.0), Comparison::Ge);
            ct.builder()
                .select(&nonneg, ct, &ct.unary(UnaryOp::Negate, loc))
        }
        UnaryOp::Sqrt => mul(ct, &k(0.5).binary(Divide, y, loc)),
        UnaryOp::Rsqrt => mul(ct, &mul(&k(-0.5), &y.binary(Divide, x, loc))),
        UnaryOp::Sine => mul(ct, &x.unary(UnaryOp::Cosine, loc)),
        UnaryOp::Cosine => mul(ct, &x.unary(UnaryOp::Sine, loc).unary(UnaryOp::Negate, loc)),
        UnaryOp::Logistic => mul(ct, &mul(y, &k(1.0).binary(Subtract, y, loc))),
        UnaryOp::ExponentialMinusOne => mul(ct, &y.binary(Add, &k(1.0), loc)),
        UnaryOp::LogPlusOne => ct.binary(Divide, &x.binary(Add, &k(1.0), loc), loc),
        UnaryOp::Cbrt => ct.binary(Divide, &mul(&k(3.0), &mul(y, y)), loc),
        UnaryOp::Tan => mul(ct, &k(1.0).binary(Add, &mul(y, y), loc)),
        UnaryOp::Erf => {
            let e = mul(x, x)
                .unary(UnaryOp::Negate, loc)
                .unary(UnaryOp::Exponential, loc);
            mul(ct, &mul(&k(std::f64::consts::FRAC_2_SQRT_PI), &e))
        }
        UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Sign
        | UnaryOp::RoundNearestAfz
        | UnaryOp::RoundNearestEven
        | UnaryOp::IsFinite => return None,
    })
}

#[cfg(test)]
mod unary_tests {
    use super::*;

    #[test]
    fn unary_rule_checks_type_class() {
        assert!(infer_unary(UnaryOp::Exponential, &Shape::of::<i32>(&[2])).is_err());
        assert!(infer_unary(UnaryOp::Negate, &Shape::of::<i32>(&[2])).is_ok());
        assert!(infer_unary(UnaryOp::Floor, &f32s(&[])).is_ok());
    }

    #[test]
    fn is_finite_gives_pred_of_real_floats_only() {
        assert_eq!(
            infer_unary(UnaryOp::IsFinite, &f32s(&[2, 0])).unwrap(),
            Shape::of::<bool>(&[2, 0])
        );
        assert!(infer_unary(UnaryOp::IsFinite, &Shape::of::<i32>(&[2])).is_err());
        let c = Shape::array(ElementType::C64, &[2]);
        assert!(infer_unary(UnaryOp::IsFinite, &c).is_err());
        for u in [UnaryOp::RoundNearestAfz, UnaryOp::Cbrt, UnaryOp::Erf] {
            assert!(infer_unary(u, &c).is_err(), "{u:?}");
            assert_eq!(infer_unary(u, &f32s(&[])).unwrap(), f32s(&[]));
        }
        assert!(infer_unary(UnaryOp::Tan, &c).is_ok());
    }

    #[test]
    fn opcode_names_are_xla_spellings_and_distinct() {
        let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|o| o.hlo_name()).collect();
        names.extend(BinaryOp::ALL.iter().map(|o| o.hlo_name()));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "two ops share an opcode");
        assert_eq!(UnaryOp::Exponential.hlo_name(), "exponential");
        assert_eq!(BinaryOp::Subtract.hlo_name(), "subtract");
    }
}

// ---------------------------------------------------------------------------------
// Element-wise binary ops (one op group: `add subtract multiply divide maximum minimum power
// remainder atan2`), with numpy broadcasting

pub use crate::ir::attrs::BinaryOp;

macro_rules! binary_ops {
    ($( $(#[$doc:meta])* $method:ident => $variant:ident, $class:ident; )*) => {
        impl BinaryOp {
            /// The element types it accepts.
            pub fn type_class(self) -> TypeClass {
                match self { $(BinaryOp::$variant => TypeClass::$class,)* }
            }
        }

        impl Op {
            $(
                $(#[$doc])*
                #[doc = concat!("\n\nEmits XLA's `", stringify!($variant), "` op; shapes broadcast the numpy way.")]
                #[track_caller]
                pub fn $method(&self, rhs: &Op) -> Op {
                    self.binary(BinaryOp::$variant, rhs, Location::caller())
                }
            )*
        }
    };
}

binary_ops! {
    /// Sum.
    add => Add, Numeric;
    /// Difference.
    sub => Subtract, Numeric;
    /// Product.
    mul => Multiply, Numeric;
    /// Quotient (integer division truncates toward zero).
    div => Divide, Numeric;
    /// Element-wise maximum (logical or on `pred`; complex numbers have no order).
    max => Maximum, Ordered;
    /// Element-wise minimum (logical and on `pred`).
    min => Minimum, Ordered;
    /// `x^y`.
    pow => Power, Numeric;
    /// Remainder with the sign of the dividend (C's `fmod`).
    rem => Remainder, Real;
    /// `atan2(y = self, x = rhs)`.
    atan2 => Atan2, RealFloat;
}

/// Binary element-wise rule (after broadcasting): identical shapes and types.
pub fn infer_binary(op: BinaryOp, lhs: &Shape, rhs: &Shape) -> Result<Shape, ShapeError> {
    let name = op.hlo_name();
    let (lt, ld) = array_of(name, lhs)?;
    let (rt, rd) = array_of(name, rhs)?;
    if lt != rt {
        return Err(ShapeError::new(
            name,
            &[lhs, rhs],
            ShapeErrorKind::ElementType,
            format!("element types differ ({lt} vs {rt}); convert one operand first"),
        ));
    }
    if !op.type_class().accepts(lt) {
        return Err(ShapeError::new(
            name,
            &[lhs, rhs],
            ShapeErrorKind::ElementType,
            format!("needs {}, got {lt}", op.type_class().describe()),
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

/// Numpy broadcasting of two dimension lists: aligned at the right, each pair equal
/// or one of them 1.
pub fn broadcast_dims(a: &[i64], b: &[i64]) -> Result<Vec<i64>, String> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return Err(format!(
                "cannot broadcast dimensions {a:?} and {b:?}: {x} vs {y} at result axis {i}"
            ));
        };
    }
    Ok(out)
}

pub(crate) fn shape_binary(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Binary(b) = kind else {
        return Err(super::table::not_for("binary", kind));
    };
    infer_binary(*b, cx.operands[0], cx.operands[1])
}

pub(crate) fn raise_binary(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    crate::ir::Opcode::from_name(&p.opcode)
        .and_then(BinaryOp::from_opcode)
        .map(OpKind::Binary)
        .ok_or_else(|| format!("`{}` is not a binary op", p.opcode))
}

impl Op {
    /// Broadcasts both operands to their numpy-broadcast dims; checks the element
    /// types first so that the error names the shapes the user wrote.
    pub(crate) fn broadcast_pair(
        &self,
        rhs: &Op,
        name: &'static str,
        loc: &'static Location<'static>,
    ) -> Result<(Op, Op), Op> {
        let b = self.builder();
        b.target(&[self, rhs], name, loc)?;
        let (Ok(ls), Ok(rs)) = (self.shape(), rhs.shape()) else {
            unreachable!("operands were checked above");
        };
        if ls.element_type() != rs.element_type() || !ls.is_array() {
            let (kind, reason) = match (ls.element_type(), rs.element_type()) {
                (Some(a), Some(c)) => (
                    ShapeErrorKind::ElementType,
                    format!("element types differ ({a} vs {c}); convert one operand first"),
                ),
                _ => (ShapeErrorKind::Rank, "expects array operands".to_string()),
            };
            return Err(b.fail(ShapeError::new(name, &[&ls, &rs], kind, reason), loc));
        }
        let dims = match broadcast_dims(ls.dims(), rs.dims()) {
            Ok(d) => d,
            Err(reason) => {
                return Err(b.fail(
                    ShapeError::new(name, &[&ls, &rs], ShapeErrorKind::Dimension, reason),
                    loc,
                ));
            }
        };
        Ok((
            self.on(loc).broadcast_to(&dims),
            rhs.on(loc).broadcast_to(&dims),
        ))
    }

    pub(crate) fn binary(&self, op: BinaryOp, rhs: &Op, loc: &'static Location<'static>) -> Op {
        match self.broadcast_pair(rhs, op.hlo_name(), loc) {
            Ok((l, r)) => self
                .builder()
                .emit(OpKind::Binary(op), &[&l, &r], None, loc),
            Err(failed) => failed,
        }
    }
}

/// The cotangents of a binary op's operands. `max`/`min` split the cotangent
/// evenly at ties (JAX's balanced rule); `pow` follows JAX at `y = 0` and `x = 0`.
pub(crate) fn vjp_binary(n: &Node) -> Grads {
    let OpKind::Binary(op) = n.kind else {
        return Err("not a binary op".into());
    };
    let ct = &n.ct();
    use BinaryOp::{Add, Divide, Multiply, Subtract};
    let (x, y, z, loc) = (&n.operands[0], &n.operands[1], n.out(), n.loc);
    let k = |v: f64| konst(x, v, loc);
    let mul = |a: &Op, b: &Op| a.binary(Multiply, b, loc);
    let neg = |a: &Op| a.unary(UnaryOp::Negate, loc);
    let eq = |a: &Op, b: &Op| a.compare(b, Comparison::Eq);
    let sel = |p: &Op, a: &Op, b: &Op| p.builder().select(p, a, b);
    Ok(arrays(match op {
        BinaryOp::Add => vec![Some(ct.clone()), Some(ct.clone())],
        BinaryOp::Subtract => vec![Some(ct.clone()), Some(neg(ct))],
        BinaryOp::Multiply => vec![Some(mul(ct, y)), Some(mul(ct, x))],
        BinaryOp::Divide => vec![
            Some(ct.binary(Divide, y, loc)),
            Some(mul(&neg(ct), x).binary(Divide, &mul(y, y), loc)),
        ],
        BinaryOp::Maximum | BinaryOp::Minimum => {
            // The share of each side: 1 where it alone is the result, 1/2 at ties.
            let share = |a: &Op, b: &Op| sel(&eq(a, z), &sel(&eq(b, z), &k(0.5), &k(1.0)), &k(0.0));
            vec![Some(mul(ct, &share(x, y))), Some(mul(ct, &share(y, x)))]
        }
        BinaryOp::Power => {
            let zero = k(0.0);
            let dx = sel(
                &eq(y, &zero),
                &zero,
                &mul(
                    y,
                    &x.binary(BinaryOp::Power, &y.binary(Subtract, &k(1.0), loc), loc),
                ),
            );
            let safe_x = sel(&eq(x, &zero), &k(1.0), x);
            let dy = mul(&safe_x.unary(UnaryOp::Log, loc), z);
            vec![Some(mul(ct, &dx)), Some(mul(ct, &dy))]
        }
        BinaryOp::Remainder => {
            let q = x.binary(Divide, y, loc);
            let trunc = mul(
                &q.unary(UnaryOp::Sign, loc),
                &q.unary(UnaryOp::Abs, loc).unary(UnaryOp::Floor, loc),
            );
            vec![Some(ct.clone()), Some(mul(&neg(ct), &trunc))]
        }
        BinaryOp::Atan2 => {
            let r2 = mul(x, x).binary(Add, &mul(y, y), loc);
            vec![
                Some(mul(ct, y).binary(Divide, &r2, loc)),
                Some(mul(&neg(ct), x).binary(Divide, &r2, loc)),
            ]
        }
    }))
}

#[cfg(test)]
mod binary_tests {
    use super::*;

    #[test]
    fn numpy_broadcasting() {
        assert_eq!(broadcast_dims(&[2, 3], &[3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_dims(&[4, 1, 5], &[3, 1]).unwrap(), vec![4, 3, 5]);
        assert_eq!(broadcast_dims(&[], &[2]).unwrap(), vec![2]);
        let e = broadcast_dims(&[2, 3], &[4]).unwrap_err();
        assert!(e.contains("3 vs 4"), "{e}");
    }

    #[test]
    fn binary_rule_checks_types_and_dims() {
        assert_eq!(
            infer_binary(BinaryOp::Add, &f32s(&[2]), &f32s(&[2])).unwrap(),
            f32s(&[2])
        );
        let e = infer_binary(BinaryOp::Add, &f32s(&[2]), &Shape::of::<i32>(&[2])).unwrap_err();
        assert!(e.reason.contains("f32 vs s32"), "{e}");
        let e = infer_binary(BinaryOp::Multiply, &f32s(&[2]), &f32s(&[3])).unwrap_err();
        assert_eq!(e.op, "multiply");
        let p = Shape::of::<bool>(&[2]);
        assert!(infer_binary(BinaryOp::Add, &p, &p).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `compare`

pub use crate::ir::attrs::Comparison;

/// Compare rule: identical shapes and types (complex only for EQ and NE); `pred`
/// out.
pub fn infer_compare(dir: Comparison, lhs: &Shape, rhs: &Shape) -> Result<Shape, ShapeError> {
    let (lt, ld) = array_of("compare", lhs)?;
    let (rt, rd) = array_of("compare", rhs)?;
    if lt != rt {
        return Err(ShapeError::new(
            "compare",
            &[lhs, rhs],
            ShapeErrorKind::ElementType,
            format!("operands must have the same element type ({lt} vs {rt})"),
        ));
    }
    if ld != rd {
        return Err(ShapeError::new(
            "compare",
            &[lhs, rhs],
            ShapeErrorKind::Dimension,
            "operands must have the same dimensions",
        ));
    }
    if lt.is_complex() && !matches!(dir, Comparison::Eq | Comparison::Ne) {
        return Err(ShapeError::new(
            "compare",
            &[lhs, rhs],
            ShapeErrorKind::ElementType,
            format!("complex numbers have no order: only EQ and NE compare {lt}"),
        ));
    }
    Ok(Shape::array(ElementType::Pred, ld))
}

/// The comparison type XLA needs for an element type (`"FLOAT"`, `"SIGNED"`,
/// `"UNSIGNED"`); a wrong one silently gives wrong answers.
pub fn comparison_type(t: ElementType) -> &'static str {
    if t.is_float() || t.is_complex() {
        "FLOAT"
    } else if t.is_signed_int() {
        "SIGNED"
    } else {
        "UNSIGNED"
    }
}

pub(crate) fn shape_compare(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Compare(c) = kind else {
        return Err(super::table::not_for("compare", kind));
    };
    infer_compare(*c, cx.operands[0], cx.operands[1])
}

/// Lowers a comparison: its direction, and the comparison type of the operands'
/// element type.
pub(crate) fn lower_compare(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    let OpKind::Compare(c) = kind else { return };
    let lhs = cx.operands.first().and_then(|s| s.element_type());
    p.comparison_direction = c.hlo_name().to_string();
    p.comparison_type = comparison_type(lhs.unwrap_or(ElementType::F32)).to_string();
}

/// Reads a comparison from a proto instruction: its direction, and its comparison
/// type, which must be empty (XLA picks it), `TOTALORDER` for floats, or the one
/// its operands' element type needs.
pub(crate) fn raise_compare(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let c = [
        Comparison::Eq,
        Comparison::Ne,
        Comparison::Lt,
        Comparison::Le,
        Comparison::Gt,
        Comparison::Ge,
    ]
    .into_iter()
    .find(|c| c.hlo_name() == p.comparison_direction)
    .ok_or_else(|| format!("unknown comparison direction `{}`", p.comparison_direction))?;
    // Without an element type the shape rule reports the operand.
    if let Some(ty) = cx.operands.first().and_then(|s| s.element_type()) {
        let t = p.comparison_type.as_str();
        let want = comparison_type(ty);
        let total = t == "TOTALORDER" && (ty.is_float() || ty.is_complex());
        if !(t.is_empty() || t == want || total) {
            return Err(format!(
                "comparison type `{t}` does not fit {ty} operands (`{want}`)"
            ));
        }
    }
    Ok(OpKind::Compare(c))
}

pub(crate) fn text_compare(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Compare(c) = kind {
        out.attr("direction", c.hlo_name());
    }
}

impl Op {
    /// Element-wise comparison, giving `pred`. Shapes broadcast; the comparison type
    /// (float, signed, unsigned) follows the element type.
    #[track_caller]
    pub fn compare(&self, rhs: &Op, direction: Comparison) -> Op {
        let loc = Location::caller();
        match self.broadcast_pair(rhs, "compare", loc) {
            Ok((l, r)) => self
                .builder()
                .emit(OpKind::Compare(direction), &[&l, &r], None, loc),
            Err(failed) => failed,
        }
    }

    /// Compares with an op or a Rust number (which takes this op's element type, as
    /// a Python scalar does in JAX; an integer array compared with a fractional
    /// number is compared as `f32`, as JAX promotes it).
    fn compare_with(
        &self,
        rhs: crate::ops::sampling::Param<'_>,
        direction: Comparison,
        loc: &'static Location<'static>,
    ) -> Op {
        use crate::ops::sampling::Param;
        match rhs {
            Param::Array(r) => self.on(loc).compare(r, direction),
            Param::Number(v) => {
                let ty = match self.element_type() {
                    Ok(t) => t,
                    Err(_) => return self.clone(),
                };
                let fractional = matches!(v, Scalar::Float(f) if f.fract() != 0.0);
                let lhs = if fractional && !ty.is_float() {
                    self.on(loc).convert(ElementType::F32)
                } else {
                    self.clone()
                };
                let ty = lhs.element_type().unwrap_or(ty);
                let r = self.builder().scalar_of(ty, v, loc);
                lhs.on(loc).compare(&r, direction)
            }
        }
    }

    /// `self > rhs` (`jnp.greater`), with an op or a Rust number: `x.gt(2.4)`.
    #[track_caller]
    pub fn gt<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Gt, Location::caller())
    }

    /// `self >= rhs` (`jnp.greater_equal`), with an op or a Rust number.
    #[track_caller]
    pub fn ge<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Ge, Location::caller())
    }

    /// `self < rhs` (`jnp.less`), with an op or a Rust number.
    #[track_caller]
    pub fn lt<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Lt, Location::caller())
    }

    /// `self <= rhs` (`jnp.less_equal`), with an op or a Rust number.
    #[track_caller]
    pub fn le<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Le, Location::caller())
    }

    /// `self == rhs` element-wise (`jnp.equal`), with an op or a Rust number.
    #[track_caller]
    pub fn equal<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Eq, Location::caller())
    }

    /// `self != rhs` element-wise (`jnp.not_equal`), with an op or a Rust number.
    #[track_caller]
    pub fn not_equal<'a>(&self, rhs: impl Into<crate::ops::sampling::Param<'a>>) -> Op {
        self.compare_with(rhs.into(), Comparison::Ne, Location::caller())
    }
}

#[cfg(test)]
mod select_and_compare_tests {
    use super::*;

    #[test]
    fn select_and_compare_rules() {
        let p = Shape::of::<bool>(&[3]);
        assert_eq!(
            infer_select(&p, &f32s(&[3]), &f32s(&[3])).unwrap(),
            f32s(&[3])
        );
        assert!(infer_select(&f32s(&[3]), &f32s(&[3]), &f32s(&[3])).is_err());
        assert_eq!(
            infer_compare(Comparison::Lt, &f32s(&[3]), &f32s(&[3])).unwrap(),
            p
        );
        let c = Shape::array(ElementType::C64, &[3]);
        assert!(infer_compare(Comparison::Lt, &c, &c).is_err());
        assert!(infer_compare(Comparison::Eq, &c, &c).is_ok());
        assert_eq!(comparison_type(ElementType::U8), "UNSIGNED");
        assert_eq!(comparison_type(ElementType::S64), "SIGNED");
    }
}

// ---------------------------------------------------------------------------------
// `select` (its rule is tested with `compare`'s)

/// Select rule: a `pred` predicate and two branches of one shape, all the same dims.
pub fn infer_select(pred: &Shape, on_true: &Shape, on_false: &Shape) -> Result<Shape, ShapeError> {
    let (pt, pd) = array_of("select", pred)?;
    let (tt, td) = array_of("select", on_true)?;
    let (ft, fd) = array_of("select", on_false)?;
    if pt != ElementType::Pred {
        return Err(ShapeError::new(
            "select",
            &[pred, on_true, on_false],
            ShapeErrorKind::ElementType,
            format!("predicate must be pred, got {pt}"),
        ));
    }
    if tt != ft {
        return Err(ShapeError::new(
            "select",
            &[pred, on_true, on_false],
            ShapeErrorKind::ElementType,
            format!("branches differ in element type ({tt} vs {ft})"),
        ));
    }
    if td != fd || pd != td {
        return Err(ShapeError::new(
            "select",
            &[pred, on_true, on_false],
            ShapeErrorKind::Dimension,
            "the predicate and both branches must have the same dimensions",
        ));
    }
    Ok(on_true.clone())
}

pub(crate) fn shape_select(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_select(cx.operands[0], cx.operands[1], cx.operands[2])
}

pub(crate) fn raise_select(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Select)
}

impl Builder {
    /// `select(pred, on_true, on_false)`: element-wise choice. Shapes broadcast.
    #[track_caller]
    pub fn select(&self, pred: &Op, on_true: &Op, on_false: &Op) -> Op {
        let loc = Location::caller();
        if let Err(failed) = self.target(&[pred, on_true, on_false], "select", loc) {
            return failed;
        }
        let (Ok(ps), Ok(ts), Ok(fs)) = (pred.shape(), on_true.shape(), on_false.shape()) else {
            unreachable!("operands were checked above");
        };
        let dims = broadcast_dims(ps.dims(), ts.dims()).and_then(|d| broadcast_dims(&d, fs.dims()));
        let dims = match dims {
            Ok(d) => d,
            Err(reason) => {
                return self.fail(
                    ShapeError::new(
                        "select",
                        &[&ps, &ts, &fs],
                        ShapeErrorKind::Dimension,
                        reason,
                    ),
                    loc,
                );
            }
        };
        if let Some(message) = per_column_trap(ps.dims(), &dims) {
            self.warn("select", message, loc);
        }
        let p = pred.broadcast_to(&dims);
        let t = on_true.broadcast_to(&dims);
        let f = on_false.broadcast_to(&dims);
        self.emit(OpKind::Select, &[&p, &t, &f], None, loc)
    }
}

/// The porting trap of `select`/`where` with a vector predicate: `pred[n]` against
/// an `[…, n]` result broadcasts by numpy's trailing rule (one choice per column),
/// which a JAX user who wrote the per-example program under `vmap` reads as one
/// choice per row. Noticed when another axis of the result also has `n` elements,
/// so that both readings type-check.
fn per_column_trap(pred: &[i64], result: &[i64]) -> Option<String> {
    let &[n] = pred else { return None };
    let (&last, rest) = result.split_last()?;
    let axis = rest.iter().position(|&d| d == n)?;
    if n < 2 || last != n {
        return None;
    }
    Some(format!(
        "the predicate pred[{n}] broadcasts along the last axis of {result:?} (numpy's \
         rule: one choice per column), and axis {axis} also has {n} elements; for one \
         choice per row, as `jnp.where` inside `vmap` means, reshape the predicate to \
         [{n}, 1] (`pred.reshape(&[{n}, 1])`); to keep per column and silence this, \
         broadcast it yourself (`pred.broadcast_to(&{result:?})`)"
    ))
}

/// `select(p, a, b)`: the cotangent goes to the side that was chosen.
pub(crate) fn vjp_select(n: &Node) -> Grads {
    let ct = &n.ct();
    let (p, loc) = (&n.operands[0], n.loc);
    let zero = crate::autodiff::zeros_like(ct, loc);
    Ok(arrays(vec![
        None,
        Some(p.builder().select(p, ct, &zero)),
        Some(p.builder().select(p, &zero, ct)),
    ]))
}

// ---------------------------------------------------------------------------------
// `clamp`

/// Clamp rule: `min`, `operand`, `max` of one ordered element type and of one shape.
/// (XLA's rule also takes scalar bounds, but the CPU plugin of PJRT C API 0.115
/// fails to compile them, "xtile.extract: tile shape does not match rank of buffer:
/// 0", found by `tests/rules_vs_xla.rs`; `clamp` broadcasts them, as JAX lowers
/// clamp.) The result is the operand's shape.
pub fn infer_clamp(lo: &Shape, x: &Shape, hi: &Shape) -> Result<Shape, ShapeError> {
    const OP: &str = "clamp";
    let (lt, ld) = array_of(OP, lo)?;
    let (xt, xd) = array_of(OP, x)?;
    let (ht, hd) = array_of(OP, hi)?;
    if let Err(reason) = clamp_types(lt, xt, ht) {
        return Err(ShapeError::new(
            OP,
            &[lo, x, hi],
            ShapeErrorKind::ElementType,
            reason,
        ));
    }
    for (what, d) in [("min", ld), ("max", hd)] {
        if d != xd {
            return Err(ShapeError::new(
                OP,
                &[lo, x, hi],
                ShapeErrorKind::Dimension,
                format!(
                    "{what} must have the operand's dimensions (a scalar bound fails to \
                     compile on the 0.115 CPU plugin; broadcast it, as `clamp` does)"
                ),
            ));
        }
    }
    Ok(x.clone())
}

/// Clamp's element types: min, operand and max the same, and ordered (not complex:
/// clamp is `min(max(operand, min), max)`, as [`BinaryOp::Maximum`] takes).
fn clamp_types(lo: ElementType, x: ElementType, hi: ElementType) -> Result<(), String> {
    if lo != x || hi != x {
        return Err(format!(
            "min, operand and max must have one element type, got {lo}, {x}, {hi}; convert first"
        ));
    }
    if !TypeClass::Ordered.accepts(x) {
        return Err(format!("needs {}, got {x}", TypeClass::Ordered.describe()));
    }
    Ok(())
}

pub(crate) fn shape_clamp(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_clamp(cx.operands[0], cx.operands[1], cx.operands[2])
}

pub(crate) fn raise_clamp(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Clamp)
}

impl Op {
    /// XLA's [Clamp](https://openxla.org/xla/operation_semantics#clamp): each element
    /// limited to `[lo, hi]`, as `min(max(x, lo), hi)` (so a NaN anywhere gives NaN,
    /// and `lo > hi` gives `hi`). `lo` and `hi` have this op's element type; shapes
    /// broadcast the numpy way. [`Op::clip`] is the form with Rust numbers.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("clamp");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let lo = b.constant(0f32);
    /// let hi = b.parameter(1, Shape::of::<f32>(&[3]), "hi");
    /// assert_eq!(x.clamp(&lo, &hi).dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn clamp(&self, lo: &Op, hi: &Op) -> Op {
        let loc = Location::caller();
        const OP: &str = "clamp";
        let b = self.builder();
        if let Err(failed) = b.target(&[lo, self, hi], OP, loc) {
            return failed;
        }
        let (Ok(ls), Ok(xs), Ok(hs)) = (lo.shape(), self.shape(), hi.shape()) else {
            unreachable!("operands were checked above");
        };
        let err =
            |kind, reason: String| b.fail(ShapeError::new(OP, &[&ls, &xs, &hs], kind, reason), loc);
        let (Some(lt), Some(xt), Some(ht)) =
            (ls.element_type(), xs.element_type(), hs.element_type())
        else {
            return err(ShapeErrorKind::Rank, "expects array operands".into());
        };
        if let Err(reason) = clamp_types(lt, xt, ht) {
            return err(ShapeErrorKind::ElementType, reason);
        }
        let dims = broadcast_dims(ls.dims(), xs.dims()).and_then(|d| broadcast_dims(&d, hs.dims()));
        let dims = match dims {
            Ok(d) => d,
            Err(reason) => return err(ShapeErrorKind::Dimension, reason),
        };
        // Scalar bounds are broadcast too, as JAX lowers clamp: XLA's rule takes
        // them, but the CPU plugin of PJRT C API 0.115 fails to compile them
        // ("xtile.extract": tile shape does not match rank of buffer: 0).
        let l = lo.broadcast_to(&dims);
        let h = hi.broadcast_to(&dims);
        let x = self.broadcast_to(&dims);
        b.emit(OpKind::Clamp, &[&l, &x, &h], None, loc)
    }
}

/// `clamp(lo, x, hi)`: the cotangent goes to `x` where it is strictly inside, to
/// `lo` where `lo` is above `x` (and below `hi`), to `hi` where `hi` is below `x`
/// (JAX's rule); a scalar bound gets the sum over the array.
pub(crate) fn vjp_clamp(n: &Node) -> Grads {
    let ct = &n.ct();
    let (lo, x, hi, loc) = (&n.operands[0], &n.operands[1], &n.operands[2], n.loc);
    let b = x.builder();
    let zero = crate::autodiff::zeros_like(ct, loc);
    let both = |p: Op, q: Op| p.bitwise(crate::ops::bitwise::BitwiseOp::And, &q, loc);
    let pick = |p: &Op| b.select(p, ct, &zero);
    let fit = |g: Op, bound: &Op| -> Op {
        if bound.rank().unwrap_or(0) == 0 && ct.rank().unwrap_or(0) > 0 {
            let all: Vec<i64> = (0..ct.rank().unwrap_or(0) as i64).collect();
            g.reduce_by(&all, BinaryOp::Add, loc)
        } else {
            g
        }
    };
    let g_lo = pick(&both(
        lo.compare(x, Comparison::Gt),
        lo.compare(hi, Comparison::Lt),
    ));
    let g_x = pick(&both(
        x.compare(lo, Comparison::Gt),
        x.compare(hi, Comparison::Lt),
    ));
    let g_hi = pick(&hi.compare(x, Comparison::Lt));
    Ok(arrays(vec![
        Some(fit(g_lo, lo)),
        Some(g_x),
        Some(fit(g_hi, hi)),
    ]))
}

#[cfg(test)]
mod clamp_tests {
    use super::*;

    #[test]
    fn clamp_rule() {
        let x = f32s(&[2, 3]);
        let s = f32s(&[]);
        assert_eq!(infer_clamp(&x, &x, &x).unwrap(), x);
        assert_eq!(infer_clamp(&s, &s, &s).unwrap(), s);
        // Scalar bounds: XLA's rule takes them, the 0.115 CPU plugin fails to
        // compile them (tests/rules_vs_xla.rs); `clamp` broadcasts them.
        assert!(infer_clamp(&s, &x, &s).is_err());
        assert!(infer_clamp(&x, &x, &s).is_err());
        let e = infer_clamp(&f32s(&[3]), &x, &x).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::Dimension);
        assert!(e.reason.contains("min must have"), "{e}");
        let e = infer_clamp(&s, &s, &Shape::of::<i32>(&[])).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::ElementType);
        assert!(e.reason.contains("f32, f32, s32"), "{e}");
        let c = Shape::array(ElementType::C64, &[]);
        assert!(infer_clamp(&c, &c, &c).is_err());
        let p = Shape::of::<bool>(&[2]);
        assert!(infer_clamp(&p, &p, &p).is_ok());
    }
}

// ---------------------------------------------------------------------------------
// Rust numbers in expressions: weakly typed scalars

/// A Rust number written in an expression (`&x * 2.0`, `1 - &y`): it takes the
/// element type of the other operand, like a weakly-typed constant in JAX, with
/// JAX's promotions: a float number with an integer or boolean array gives `f32`
/// (`s32 / 2.0` is `f32`, 0.5 for 1), an integer number with a boolean array gives
/// `s32`. Integers stay exact; a value the element type cannot hold (-1 or 300 for
/// `u8`) is a shape error, not a silent truncation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer (for values above `i64::MAX`).
    UInt(u64),
    /// A float.
    Float(f64),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v:?}"),
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Self {
                Scalar::$v(x as _)
            }
        }
    )*};
}

scalar_from!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => Int, u16 => Int, u32 => Int, u64 => UInt, f32 => Float, f64 => Float);

impl From<half::f16> for Scalar {
    fn from(x: half::f16) -> Self {
        Scalar::Float(x.to_f64())
    }
}

impl From<half::bf16> for Scalar {
    fn from(x: half::bf16) -> Self {
        Scalar::Float(x.to_f64())
    }
}

impl Scalar {
    /// The value as the little-endian bytes of one element of type `ty`, or why it
    /// does not fit.
    fn to_bytes(self, ty: ElementType) -> Result<Vec<u8>, String> {
        use crate::shape::NativeType;
        let mut lit = Vec::with_capacity(8);
        let no = || format!("the number {self} does not fit element type {ty}");
        macro_rules! int {
            ($t:ty) => {{
                let v: $t = match self {
                    Scalar::Int(i) => <$t>::try_from(i).map_err(|_| no())?,
                    Scalar::UInt(u) => <$t>::try_from(u).map_err(|_| no())?,
                    Scalar::Float(f) => {
                        // Through i128, exact for every integral f64 below 2^127: a
                        // range check in f64 would let 2^63 (= i64::MAX as f64) through
                        // and saturate it.
                        if f.fract() != 0.0 || !f.is_finite() {
                            return Err(no());
                        }
                        <$t>::try_from(f as i128).map_err(|_| no())?
                    }
                };
                <$t as NativeType>::extend_le_bytes(&[v], &mut lit);
            }};
        }
        macro_rules! float {
            ($t:ty) => {{
                let v: $t = match self {
                    Scalar::Int(i) => i as $t,
                    Scalar::UInt(u) => u as $t,
                    Scalar::Float(f) => f as $t,
                };
                <$t as NativeType>::extend_le_bytes(&[v], &mut lit);
            }};
        }
        match ty {
            ElementType::Pred => {
                let b = match self {
                    Scalar::Int(0) | Scalar::UInt(0) => false,
                    Scalar::Int(1) | Scalar::UInt(1) => true,
                    Scalar::Float(0.0) => false,
                    Scalar::Float(1.0) => true,
                    _ => return Err(no()),
                };
                lit.push(b as u8);
            }
            ElementType::S8 => int!(i8),
            ElementType::S16 => int!(i16),
            ElementType::S32 => int!(i32),
            ElementType::S64 => int!(i64),
            ElementType::U8 => int!(u8),
            ElementType::U16 => int!(u16),
            ElementType::U32 => int!(u32),
            ElementType::U64 => int!(u64),
            ElementType::F32 => float!(f32),
            ElementType::F64 => float!(f64),
            // Rounded once, from f64 (an integer through f64: exact below 2^53,
            // far beyond what f16 or bf16 hold exactly).
            ElementType::F16 | ElementType::Bf16 => {
                let f = match self {
                    Scalar::Int(i) => i as f64,
                    Scalar::UInt(u) => u as f64,
                    Scalar::Float(f) => f,
                };
                if ty == ElementType::F16 {
                    <half::f16 as NativeType>::extend_le_bytes(
                        &[<half::f16 as NativeType>::from_f64(f)],
                        &mut lit,
                    );
                } else {
                    <half::bf16 as NativeType>::extend_le_bytes(
                        &[<half::bf16 as NativeType>::from_f64(f)],
                        &mut lit,
                    );
                }
            }
            ElementType::C64 | ElementType::C128 => {
                return Err(format!("no literal of {ty} (built by conversion)"));
            }
        }
        Ok(lit)
    }
}

impl Builder {
    /// A scalar constant of element type `ty` holding `v` (exact for integers; an
    /// error if `ty` cannot hold `v`). What Rust numbers in expressions become.
    #[track_caller]
    pub fn constant_of_type(&self, ty: ElementType, v: impl Into<Scalar>) -> Op {
        self.scalar_of(ty, v.into(), Location::caller())
    }

    pub(crate) fn scalar_of(
        &self,
        ty: ElementType,
        v: Scalar,
        loc: &'static Location<'static>,
    ) -> Op {
        match ty {
            ElementType::C64 | ElementType::C128 => {
                // Built as the real part and converted.
                let wide = if matches!(ty, ElementType::C128) {
                    ElementType::F64
                } else {
                    ElementType::F32
                };
                self.scalar_of(wide, v, loc).on(loc).convert(ty)
            }
            _ => match v.to_bytes(ty) {
                Ok(bytes) => self.constant_bytes(Shape::scalar(ty), bytes, loc),
                Err(reason) => self.fail(
                    ShapeError::new("constant", &[], ShapeErrorKind::Attribute, reason),
                    loc,
                ),
            },
        }
    }
}

impl Op {
    /// `self op v`, with `v` a constant of this op's element type.
    pub(crate) fn binary_scalar(
        &self,
        op: BinaryOp,
        v: Scalar,
        scalar_on_left: bool,
        loc: &'static Location<'static>,
    ) -> Op {
        let ty = match self.element_type() {
            Ok(ty) => ty,
            Err(_) => return self.builder().fail_not_array(self, op.hlo_name(), loc),
        };
        let c = self.builder().scalar_of(ty, v, loc);
        if scalar_on_left {
            c.binary(op, self, loc)
        } else {
            self.binary(op, &c, loc)
        }
    }
}

impl Op {
    /// `self op v` for a Rust number written in an expression, with JAX's promotion
    /// of weakly typed scalars: a float number with an integer or boolean array
    /// makes the array `f32` first (`s32[] / 2.0` is `f32` 0.5, as `jnp` gives with
    /// 64-bit types off), and an integer number with a boolean array makes it `s32`;
    /// otherwise the number takes the array's element type.
    pub(crate) fn weak_binary(
        &self,
        op: BinaryOp,
        v: Scalar,
        scalar_on_left: bool,
        loc: &'static Location<'static>,
    ) -> Op {
        let promoted = match (self.element_type(), v) {
            (Ok(ty), Scalar::Float(_)) if !ty.is_float() && !ty.is_complex() => {
                Some(ElementType::F32)
            }
            (Ok(ElementType::Pred), Scalar::Int(_) | Scalar::UInt(_)) => Some(ElementType::S32),
            _ => None,
        };
        match promoted {
            Some(ty) => self
                .on(loc)
                .convert(ty)
                .binary_scalar(op, v, scalar_on_left, loc),
            None => self.binary_scalar(op, v, scalar_on_left, loc),
        }
    }
}

// ---------------------------------------------------------------------------------
// Operators `+ - * /` and unary `-`

macro_rules! op_traits {
    ($($trait:ident $method:ident $kind:ident;)*) => {$(
        impl $trait<&Op> for &Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: &Op) -> Op { self.binary(BinaryOp::$kind, rhs, Location::caller()) }
        }
        impl $trait<Op> for Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: Op) -> Op { self.binary(BinaryOp::$kind, &rhs, Location::caller()) }
        }
        impl $trait<&Op> for Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: &Op) -> Op { self.binary(BinaryOp::$kind, rhs, Location::caller()) }
        }
        impl $trait<Op> for &Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: Op) -> Op { self.binary(BinaryOp::$kind, &rhs, Location::caller()) }
        }
        op_traits!(@scalars $trait $method $kind; f64 i64);
    )*};
    (@scalars $trait:ident $method:ident $kind:ident; $($t:ty)*) => {$(
        impl $trait<$t> for &Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: $t) -> Op { self.weak_binary(BinaryOp::$kind, Scalar::from(rhs), false, Location::caller()) }
        }
        impl $trait<$t> for Op {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: $t) -> Op { self.weak_binary(BinaryOp::$kind, Scalar::from(rhs), false, Location::caller()) }
        }
        impl $trait<&Op> for $t {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: &Op) -> Op { rhs.weak_binary(BinaryOp::$kind, Scalar::from(self), true, Location::caller()) }
        }
        impl $trait<Op> for $t {
            type Output = Op;
            #[track_caller]
            fn $method(self, rhs: Op) -> Op { rhs.weak_binary(BinaryOp::$kind, Scalar::from(self), true, Location::caller()) }
        }
    )*};
}

op_traits! {
    Add add Add;
    Sub sub Subtract;
    Mul mul Multiply;
    Div div Divide;
}

impl Neg for &Op {
    type Output = Op;
    #[track_caller]
    fn neg(self) -> Op {
        self.unary(UnaryOp::Negate, Location::caller())
    }
}

impl Neg for Op {
    type Output = Op;
    #[track_caller]
    fn neg(self) -> Op {
        self.unary(UnaryOp::Negate, Location::caller())
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: every operand batched at axis 0 (the element-wise rule).
pub(crate) fn batch_unary(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: every operand batched at axis 0.
pub(crate) fn batch_binary(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: every operand batched at axis 0.
pub(crate) fn batch_compare(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: every operand batched at axis 0 (a scalar predicate is broadcast).
pub(crate) fn batch_select(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: every operand batched at axis 0 (scalar bounds are broadcast).
pub(crate) fn batch_clamp(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Tangent: the derivative times the tangent (from the gradient rule: the
/// Jacobian is diagonal).
pub(crate) fn jvp_unary(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::diagonal(n)
}

/// Tangent: each operand's partial derivative times its tangent, summed.
pub(crate) fn jvp_binary(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::diagonal(n)
}

/// Tangent: the select of the branches' tangents (linear in them).
pub(crate) fn jvp_select(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: the operand's tangent where it lies inside the bounds, else the
/// bound's (a scalar bound's broadcast).
pub(crate) fn jvp_clamp(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let (lo, x, hi) = (&n.operands[0], &n.operands[1], &n.operands[2]);
    let dims = x.dims().map_err(|e| e.to_string())?;
    let full = |o: &Op| -> Op {
        if o.dims().map(|d| d == dims).unwrap_or(false) {
            o.clone()
        } else {
            o.broadcast_in_dim(&dims, &[])
        }
    };
    let (tl, tx, th) = (full(&n.tangent(0)), n.tangent(1), full(&n.tangent(2)));
    let below = x.compare(&full(lo), Comparison::Lt);
    let above = x.compare(&full(hi), Comparison::Gt);
    Ok(vec![Some(crate::autodiff::Ct::Array(x.builder().select(
        &below,
        &tl,
        &x.builder().select(&above, &th, &tx),
    )))])
}
