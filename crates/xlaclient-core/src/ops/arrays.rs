//! numpy's array functions that JAX code reaches for (issue 24): `repeat`, `tile`,
//! `roll`, `linalg.norm`, `var`/`std` with `ddof`, the cumulative reductions,
//! `eye`/`tril`/`triu`/`diag`, `linspace`, `isnan`/`isinf`/`nan_to_num`, numpy's
//! floor division and modulo (`floor_divide`, `remainder`, `divmod`),
//! `any`/`all`, `moveaxis`/`swapaxes`, `count_nonzero`, `isin`, `array_equal`,
//! `argsort`, `unique` with a static size, `logaddexp`, `outer`/`vdot`,
//! `unravel_index` and `jax.nn.log_sigmoid`.
//!
//! Each is a composition of the other families' ops, written after JAX's own
//! definition (`jax/_src/numpy`), so it gives JAX's answer on the edge cases (NaN,
//! ties, negative and out-of-range values, empty arrays) and its gradients come
//! from the rules of the ops it is made of. Static arguments (repeat counts, shifts,
//! orders) are Rust values, as JAX needs them static under `jit`. Bad arguments are
//! build errors naming the op, the operand's shape and the caller's line.

use std::panic::Location;

use super::elementwise::{BinaryOp, Scalar};
use super::linalg::DotDims;
use super::resolve_axis;
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ops::elementwise::Comparison;
use crate::ops::indexing::TakeMode;
use crate::shape::{ElementType, Shape};

type Loc = &'static Location<'static>;

fn fail(op: &Op, name: &'static str, shapes: &[&Shape], reason: String, loc: Loc) -> Op {
    op.builder().fail(
        ShapeError::new(name, shapes, ShapeErrorKind::Attribute, reason),
        loc,
    )
}

/// The operand's array shape, or the failed op to return.
fn array(x: &Op, name: &'static str, loc: Loc) -> Result<Shape, Op> {
    match x.shape() {
        Ok(s) if s.is_array() => Ok(s),
        _ => Err(x.builder().fail_not_array(x, name, loc)),
    }
}

/// `x` as a float array: integers and `pred` as `f32` (JAX's "inexact" promotion).
fn inexact(x: &Op, loc: Loc) -> Op {
    match x.element_type() {
        Ok(t) if !(t.is_float() || t.is_complex()) => x.on(loc).convert(ElementType::F32),
        _ => x.clone(),
    }
}

/// The largest (`high`) or lowest value of `ty` (±∞ for floats): the identity of
/// a minimum (maximum) reduction.
fn extreme(ty: ElementType, high: bool) -> Scalar {
    use ElementType as T;
    let (lo, hi): (i64, i64) = match ty {
        T::Pred => (0, 1),
        T::S8 => (i8::MIN.into(), i8::MAX.into()),
        T::S16 => (i16::MIN.into(), i16::MAX.into()),
        T::S32 => (i32::MIN.into(), i32::MAX.into()),
        T::S64 => (i64::MIN, i64::MAX),
        T::U8 => (0, u8::MAX.into()),
        T::U16 => (0, u16::MAX.into()),
        T::U32 => (0, u32::MAX.into()),
        T::U64 => {
            return if high {
                Scalar::UInt(u64::MAX)
            } else {
                Scalar::Int(0)
            };
        }
        _ => {
            return Scalar::Float(if high {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            });
        }
    };
    Scalar::Int(if high { hi } else { lo })
}

/// The largest finite value of a float type (`jnp.finfo(ty).max`).
fn finite_max(ty: ElementType) -> f64 {
    match ty {
        ElementType::F16 => 65504.0,
        ElementType::Bf16 => 3.3895313892515355e38,
        ElementType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

/// JAX's type promotion of two element types (`jnp.promote_types` with 64-bit
/// types enabled, as the crate has them): the least upper bound in JAX's lattice,
/// `bool < u8 < u16 < u32 < u64`, `bool < i8 < i16 < i32 < i64`, `uN < i2N`, every
/// integer below the floats, `bf16` and `f16` below `f32 < f64`, `f32 < c64`,
/// `f64 < c128`. So `u8 + i8` is `i16`, `u64 + i64` is `f64`, `bf16 + f16` is `f32`,
/// `i32 + f16` is `f16`. The numpy-layer binary functions of this module promote
/// their operands with it; the lax-level ops stay strict, as JAX's do.
///
/// ```
/// use xlaclient_core::{ElementType as T, ops::arrays::promote_types};
/// assert_eq!(promote_types(T::U8, T::S8), T::S16);
/// assert_eq!(promote_types(T::U64, T::S64), T::F64);
/// assert_eq!(promote_types(T::Bf16, T::F16), T::F32);
/// assert_eq!(promote_types(T::S32, T::F16), T::F16);
/// assert_eq!(promote_types(T::F64, T::C64), T::C128);
/// ```
pub fn promote_types(a: ElementType, b: ElementType) -> ElementType {
    use ElementType as T;
    // JAX's lattice, with its weak nodes: `I` (integers), `F` (floats), `C`
    // (complex). Each node lists the nodes directly above it.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum N {
        T(ElementType),
        I,
        F,
        C,
    }
    fn up(n: N) -> Vec<N> {
        match n {
            N::T(T::Pred) => vec![N::I],
            N::I => vec![N::T(T::U8), N::T(T::S8)],
            N::T(T::U8) => vec![N::T(T::S16), N::T(T::U16)],
            N::T(T::U16) => vec![N::T(T::S32), N::T(T::U32)],
            N::T(T::U32) => vec![N::T(T::S64), N::T(T::U64)],
            N::T(T::U64) | N::T(T::S64) => vec![N::F],
            N::T(T::S8) => vec![N::T(T::S16)],
            N::T(T::S16) => vec![N::T(T::S32)],
            N::T(T::S32) => vec![N::T(T::S64)],
            N::F => vec![N::T(T::Bf16), N::T(T::F16), N::C],
            N::T(T::Bf16) | N::T(T::F16) => vec![N::T(T::F32)],
            N::T(T::F32) => vec![N::T(T::F64), N::T(T::C64)],
            N::T(T::F64) => vec![N::T(T::C128)],
            N::C => vec![N::T(T::C64)],
            N::T(T::C64) => vec![N::T(T::C128)],
            N::T(_) => vec![],
        }
    }
    fn above(n: N) -> Vec<N> {
        let mut out = vec![n];
        let mut i = 0;
        while i < out.len() {
            for m in up(out[i]) {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
            i += 1;
        }
        out
    }
    let (ua, ub) = (above(N::T(a)), above(N::T(b)));
    let common: Vec<N> = ua.iter().copied().filter(|n| ub.contains(n)).collect();
    // The least upper bound: the common node every other common node is above.
    let lub = common
        .iter()
        .copied()
        .find(|n| common.iter().all(|m| above(*n).contains(m)))
        .unwrap_or(N::T(T::C128));
    match lub {
        N::T(t) => t,
        // A weak result becomes the default type of its kind (64-bit types on).
        N::I => T::S64,
        N::F => T::F64,
        N::C => T::C128,
    }
}

/// Both operands in their promoted type ([`promote_types`]).
fn promote_pair(x: &Op, y: &Op, loc: Loc) -> (Op, Op) {
    match (x.element_type(), y.element_type()) {
        (Ok(a), Ok(b)) if a != b => {
            let t = promote_types(a, b);
            let cv = |o: &Op, from: ElementType| {
                if from == t {
                    o.clone()
                } else {
                    o.on(loc).convert(t)
                }
            };
            (cv(x, a), cv(y, b))
        }
        _ => (x.clone(), y.clone()),
    }
}

/// The order in which numpy's norms are taken ([`Op::linalg_norm`]'s `ord`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOrd {
    /// `ord=None`: the 2-norm of a vector, the Frobenius norm of a matrix (and of
    /// the flattened array when no axes are given).
    Default,
    /// `ord=p` for a number `p`: vectors `sum(|x|^p)^(1/p)` (`0` counts the
    /// non-zero elements); matrices take `1` and `-1` (the largest and smallest
    /// column sum of `|x|`).
    P(f64),
    /// `ord=inf`: a vector's largest `|x|`, a matrix's largest row sum of `|x|`.
    Inf,
    /// `ord=-inf`: a vector's smallest `|x|`, a matrix's smallest row sum.
    NegInf,
    /// `ord='fro'`: the Frobenius norm of a matrix.
    Fro,
}

/// The type of a cumulative sum or product, as `jnp.cumsum` gives it: `pred`
/// counts as `s32`, every other type keeps its own (an `s8` sum may wrap).
fn promoted(ty: ElementType) -> ElementType {
    match ty {
        ElementType::Pred => ElementType::S32,
        t => t,
    }
}

impl Op {
    /// Resolves numpy's `axis=None` (flatten first, then axis 0) or an axis.
    fn axis_or_flat(
        &self,
        name: &'static str,
        axis: Option<i64>,
        loc: Loc,
    ) -> Result<(Op, usize, Shape), Op> {
        let s = array(self, name, loc)?;
        match axis {
            None => {
                let n = s.element_count().unwrap_or(0);
                let flat = self.on(loc).reshape(&[n]);
                let fs = Shape::array(s.element_type().expect("an array"), &[n]);
                Ok((flat, 0, fs))
            }
            Some(a) => match resolve_axis(name, &s, a) {
                Ok(a) => Ok((self.clone(), a, s)),
                Err(e) => Err(self.builder().fail(e, loc)),
            },
        }
    }

    /// `jnp.repeat(x, repeats, axis)`: each element along `axis` repeated
    /// `repeats[0]` times (one count) or `repeats[i]` times (one count per element
    /// of the axis); `axis = None` flattens first. Counts are static, as JAX needs
    /// them under `jit` (its `total_repeat_length`). Gradients sum over the copies.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("repeat");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.repeat(&[2], Some(0)).dims()?, vec![4, 3]);
    /// assert_eq!(x.repeat(&[1, 0, 2], Some(1)).dims()?, vec![2, 3]);
    /// assert_eq!(x.repeat(&[3], None).dims()?, vec![18]);
    /// assert!(x.repeat(&[1, 2], Some(1)).dims().is_err()); // 2 counts for 3 elements
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn repeat(&self, repeats: &[i64], axis: Option<i64>) -> Op {
        let loc = Location::caller();
        let (x, a, s) = match self.axis_or_flat("repeat", axis, loc) {
            Ok(r) => r,
            Err(f) => return f,
        };
        let n = s.dims()[a];
        if repeats.is_empty() || (repeats.len() != 1 && repeats.len() as i64 != n) {
            return fail(
                self,
                "repeat",
                &[&s],
                format!(
                    "{} repeat counts for axis {a} of {n} elements (give one count, or one per element)",
                    repeats.len()
                ),
                loc,
            );
        }
        if let Some(r) = repeats.iter().find(|r| **r < 0) {
            return fail(
                self,
                "repeat",
                &[&s],
                format!("repeat count {r} is negative"),
                loc,
            );
        }
        let idx: Vec<i32> = (0..n)
            .flat_map(|i| {
                let r = if repeats.len() == 1 {
                    repeats[0]
                } else {
                    repeats[i as usize]
                };
                std::iter::repeat_n(i as i32, r as usize)
            })
            .collect();
        let mut dims = s.dims().to_vec();
        dims[a] = idx.len() as i64;
        let ty = s.element_type().expect("an array");
        if idx.is_empty() || dims.contains(&0) {
            // Nothing to gather: an empty array of the result's shape.
            return self.builder().on(loc).zeros(ty, &dims);
        }
        let i = self.builder().on(loc).constant_vec(&idx);
        x.on(loc).take_with(&i, a as i64, TakeMode::Clip)
    }

    /// `jnp.tile(x, reps)`: the array repeated `reps[i]` times along axis `i`; the
    /// shorter of the rank and `reps` is padded with leading 1s, as numpy does.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("tile");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.tile(&[2, 2]).dims()?, vec![4, 6]);
    /// assert_eq!(x.tile(&[3]).dims()?, vec![2, 9]);
    /// assert_eq!(x.tile(&[2, 1, 1]).dims()?, vec![2, 2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn tile(&self, reps: &[i64]) -> Op {
        let loc = Location::caller();
        let s = match array(self, "tile", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        if let Some(r) = reps.iter().find(|r| **r < 0) {
            return fail(
                self,
                "tile",
                &[&s],
                format!("repetition {r} in {reps:?} is negative"),
                loc,
            );
        }
        let rank = s.rank().max(reps.len());
        let dims: Vec<i64> = std::iter::repeat_n(1, rank - s.rank())
            .chain(s.dims().iter().copied())
            .collect();
        let reps: Vec<i64> = std::iter::repeat_n(1, rank - reps.len())
            .chain(reps.iter().copied())
            .collect();
        let x = self.on(loc).reshape(&dims);
        let big: Vec<i64> = (0..rank).flat_map(|i| [reps[i], dims[i]]).collect();
        let bd: Vec<i64> = (0..rank as i64).map(|i| 2 * i + 1).collect();
        let out: Vec<i64> = (0..rank).map(|i| reps[i] * dims[i]).collect();
        x.on(loc).broadcast_in_dim(&big, &bd).on(loc).reshape(&out)
    }

    /// `jnp.roll(x, shift, axis)`: elements shifted by `shift` places along `axis`
    /// (those pushed off one end come back at the other; negative shifts go the
    /// other way); `axis = None` rolls the flattened array and restores the shape.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("roll");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 5]), "x");
    /// assert_eq!(x.roll(-7, Some(1)).dims()?, vec![2, 5]);
    /// assert_eq!(x.roll(3, None).dims()?, vec![2, 5]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn roll(&self, shift: i64, axis: Option<i64>) -> Op {
        let loc = Location::caller();
        let dims = match array(self, "roll", loc) {
            Ok(s) => s.dims().to_vec(),
            Err(f) => return f,
        };
        let (x, a, s) = match self.axis_or_flat("roll", axis, loc) {
            Ok(r) => r,
            Err(f) => return f,
        };
        let n = s.dims()[a];
        let k = if n == 0 { 0 } else { shift.rem_euclid(n) };
        let rolled = if k == 0 {
            x
        } else {
            let tail = x.on(loc).slice_in_dim(n - k, n, 1, a as i64);
            let head = x.on(loc).slice_in_dim(0, n - k, 1, a as i64);
            self.builder()
                .on(loc)
                .concatenate(&[&tail, &head], a as i64)
        };
        if axis.is_none() {
            rolled.on(loc).reshape(&dims)
        } else {
            rolled
        }
    }

    /// `jnp.linalg.norm(x, ord, axis, keepdims)`. `axes = None` takes the whole
    /// array for [`NormOrd::Default`] (the 2-norm of the flattened array), else
    /// axis 0 of a vector or axes (0, 1) of a matrix; one axis is a vector norm, two
    /// a matrix norm (`Default`/`Fro`, `P(1)`, `P(-1)`, `Inf`, `NegInf`; the
    /// spectral and nuclear norms need an SVD and are an error). Integers are
    /// taken as `f32`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, NormOrd, Shape};
    /// let b = Builder::new("norm");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    /// assert_eq!(x.linalg_norm(NormOrd::Default, None, false).dims()?, Vec::<i64>::new());
    /// assert_eq!(x.linalg_norm(NormOrd::P(1.0), Some(&[1]), true).dims()?, vec![4, 1]);
    /// assert_eq!(x.linalg_norm(NormOrd::Inf, Some(&[0, 1]), false).dims()?, Vec::<i64>::new());
    /// assert!(x.linalg_norm(NormOrd::Fro, Some(&[0]), false).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn linalg_norm(&self, ord: NormOrd, axes: Option<&[i64]>, keepdims: bool) -> Op {
        let loc = Location::caller();
        let s = match array(self, "norm", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let all: Vec<i64> = (0..s.rank() as i64).collect();
        let axes: Vec<i64> = match axes {
            Some(a) => a.to_vec(),
            None if ord == NormOrd::Default => all.clone(),
            None if s.rank() == 1 || s.rank() == 2 => all.clone(),
            None => {
                return fail(
                    self,
                    "norm",
                    &[&s],
                    format!(
                        "ord {ord:?} without axes needs a vector or a matrix, got rank {}",
                        s.rank()
                    ),
                    loc,
                );
            }
        };
        let resolved = match super::resolve_axes("norm", &s, &axes) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let x = inexact(self, loc);
        let ax = x.on(loc).abs();
        let bad = |why: &str| fail(self, "norm", &[&s], format!("ord {ord:?} {why}"), loc);
        let two = |x: &Op| x.on(loc).square().on(loc).sum(&axes, true).on(loc).sqrt();
        let r = if resolved.len() == 1 || (ord == NormOrd::Default && resolved.len() != 2) {
            match ord {
                NormOrd::Default => two(&x),
                NormOrd::P(2.0) => two(&x),
                NormOrd::P(1.0) => ax.on(loc).sum(&axes, true),
                NormOrd::Inf => ax.on(loc).amax(&axes, true),
                NormOrd::NegInf => ax.on(loc).amin(&axes, true),
                NormOrd::P(0.0) => {
                    let ty = x.element_type().unwrap_or(ElementType::F32);
                    x.on(loc)
                        .not_equal(0.0)
                        .on(loc)
                        .convert(ty)
                        .on(loc)
                        .sum(&axes, true)
                }
                NormOrd::P(p) if p.is_finite() => ax
                    .binary_scalar(BinaryOp::Power, Scalar::Float(p), false, loc)
                    .on(loc)
                    .sum(&axes, true)
                    .binary_scalar(BinaryOp::Power, Scalar::Float(1.0 / p), false, loc),
                NormOrd::P(p) if p == f64::INFINITY => ax.on(loc).amax(&axes, true),
                NormOrd::P(_) => ax.on(loc).amin(&axes, true),
                NormOrd::Fro => return bad("is a matrix norm: give two axes"),
            }
        } else if resolved.len() == 2 {
            let (row, col) = (axes[0], axes[1]);
            let sums = |over: i64, then: i64, max: bool| {
                let t = ax.on(loc).sum(&[over], true);
                if max {
                    t.on(loc).amax(&[then], true)
                } else {
                    t.on(loc).amin(&[then], true)
                }
            };
            match ord {
                NormOrd::Default | NormOrd::Fro => two(&x),
                NormOrd::P(1.0) => sums(row, col, true),
                NormOrd::P(-1.0) => sums(row, col, false),
                NormOrd::Inf => sums(col, row, true),
                NormOrd::NegInf => sums(col, row, false),
                NormOrd::P(p) if p.abs() == 2.0 => {
                    return bad("(the spectral norm) needs an SVD, which the crate lacks");
                }
                NormOrd::P(_) => return bad("is not a matrix norm (take Fro, 1, -1, Inf, NegInf)"),
            }
        } else {
            return bad(&format!(
                "takes one axis (a vector norm) or two (a matrix norm), got {axes:?}"
            ));
        };
        if keepdims {
            r
        } else {
            let dims: Vec<i64> = (0..s.rank())
                .filter(|i| !resolved.contains(i))
                .map(|i| s.dims()[i])
                .collect();
            r.on(loc).reshape(&dims)
        }
    }

    /// `jnp.var(x, axes, ddof=ddof, keepdims=keepdims)`: the sum of `|x − mean|²`
    /// over `axes` divided by `N − ddof` (NaN when that is not positive, as
    /// JAX); integers as `f32`. [`var`](Self::var) is `ddof = 0`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("var");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    /// assert_eq!(x.var_ddof(&[0], 1, false).dims()?, vec![3]);
    /// assert_eq!(x.std_ddof(&[0, 1], 1, true).dims()?, vec![1, 1]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn var_ddof(&self, axes: &[i64], ddof: i64, keepdims: bool) -> Op {
        let loc = Location::caller();
        let s = match array(self, "var", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let resolved = match super::resolve_axes("var", &s, axes) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let n: i64 = resolved.iter().map(|a| s.dims()[*a]).product();
        let x = inexact(self, loc);
        let centred = &x - &x.on(loc).mean(axes, true);
        let sq = match centred.element_type() {
            Ok(t) if t.is_complex() => centred.on(loc).abs().on(loc).square(),
            _ => centred.on(loc).square(),
        };
        let total = sq.on(loc).sum(axes, keepdims);
        // JAX: NaN where N − ddof is not positive.
        let div = if n > ddof {
            (n - ddof) as f64
        } else {
            f64::NAN
        };
        total.binary_scalar(BinaryOp::Divide, Scalar::Float(div), false, loc)
    }

    /// `jnp.std(x, axes, ddof=ddof, keepdims=keepdims)`: `√`[`var_ddof`](Self::var_ddof).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 3]), "x");
    /// assert_eq!(x.std_ddof(&[1], 1, false).dims()?, vec![4]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn std_ddof(&self, axes: &[i64], ddof: i64, keepdims: bool) -> Op {
        let loc = Location::caller();
        self.on(loc).var_ddof(axes, ddof, keepdims).on(loc).sqrt()
    }

    /// A cumulative reduction along `axis` by doubling steps (each element combined
    /// with the one `k` places before it, `k = 1, 2, 4, …`), from the end if
    /// `reverse`.
    fn cumulative(
        &self,
        name: &'static str,
        axis: i64,
        reverse: bool,
        op: BinaryOp,
        loc: Loc,
    ) -> Op {
        let s = match array(self, name, loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let a = match resolve_axis(name, &s, axis) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let ty = s.element_type().expect("an array");
        let ty = match op {
            BinaryOp::Add | BinaryOp::Multiply => promoted(ty),
            _ => ty,
        };
        let mut x = if s.element_type() == Some(ty) {
            self.clone()
        } else {
            self.on(loc).convert(ty)
        };
        let ai = a as i64;
        if reverse {
            let r = x.on(loc).reverse(&[ai]);
            x = r;
        }
        let identity = match op {
            BinaryOp::Add => Scalar::Int(0),
            BinaryOp::Multiply => Scalar::Int(1),
            BinaryOp::Maximum => extreme(ty, false),
            _ => extreme(ty, true),
        };
        let b = self.builder();
        let n = s.dims()[a];
        let mut k = 1;
        while k < n {
            let mut d = s.dims().to_vec();
            d[a] = k;
            let fill = b.scalar_of(ty, identity, loc).on(loc).broadcast_to(&d);
            let before = x.on(loc).slice_in_dim(0, n - k, 1, ai);
            let shifted = b.on(loc).concatenate(&[&fill, &before], ai);
            x = x.binary(op, &shifted, loc);
            k *= 2;
        }
        if reverse {
            let r = x.on(loc).reverse(&[ai]);
            x = r;
        }
        x
    }

    /// `jnp.cumsum(x, axis)` (`reverse` as `lax.cumsum`'s): running sums along
    /// `axis`, in the operand's type (`pred` counts as `s32`), as JAX.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("cumsum");
    /// let x = b.parameter(0, Shape::of::<bool>(&[2, 5]), "x");
    /// assert_eq!(x.cumsum(-1, false).element_type()?, ElementType::S32);
    /// assert!(x.cumsum(2, false).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn cumsum(&self, axis: i64, reverse: bool) -> Op {
        self.cumulative("cumsum", axis, reverse, BinaryOp::Add, Location::caller())
    }

    /// `jnp.cumprod(x, axis)`: running products along `axis`, with
    /// [`cumsum`](Self::cumsum)'s types.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 5]), "x");
    /// assert_eq!(x.cumprod(1, true).dims()?, vec![2, 5]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn cumprod(&self, axis: i64, reverse: bool) -> Op {
        self.cumulative(
            "cumprod",
            axis,
            reverse,
            BinaryOp::Multiply,
            Location::caller(),
        )
    }

    /// `lax.cummax(x, axis, reverse)`: running maxima along `axis` (a NaN carries
    /// on to the end, as XLA's maximum).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<i32>(&[6]), "x");
    /// assert_eq!(x.cummax(0, false).element_type()?, ElementType::S32);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn cummax(&self, axis: i64, reverse: bool) -> Op {
        self.cumulative(
            "cummax",
            axis,
            reverse,
            BinaryOp::Maximum,
            Location::caller(),
        )
    }

    /// `lax.cummin(x, axis, reverse)`: running minima along `axis`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[6]), "x");
    /// assert_eq!(x.cummin(-1, true).dims()?, vec![6]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn cummin(&self, axis: i64, reverse: bool) -> Op {
        self.cumulative(
            "cummin",
            axis,
            reverse,
            BinaryOp::Minimum,
            Location::caller(),
        )
    }

    /// The `[rows, cols]` mask of the last two axes where `col − row` is at most
    /// (`lower`) or at least `k`, broadcast to `dims`.
    fn triangle(&self, dims: &[i64], k: i64, lower: bool, loc: Loc) -> Op {
        let b = self.builder();
        let r = dims.len();
        let rc = [dims[r - 2], dims[r - 1]];
        let row = b.on(loc).iota(ElementType::S64, &rc, 0);
        let col = b.on(loc).iota(ElementType::S64, &rc, 1);
        let diff = &col - &row;
        let m = if lower {
            diff.on(loc).le(k)
        } else {
            diff.on(loc).ge(k)
        };
        m.on(loc)
            .broadcast_in_dim(dims, &[r as i64 - 2, r as i64 - 1])
    }

    fn keep_triangle(&self, name: &'static str, k: i64, lower: bool, loc: Loc) -> Op {
        let s = match array(self, name, loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        if s.rank() < 2 {
            return self.builder().fail(
                ShapeError::new(
                    name,
                    &[&s],
                    ShapeErrorKind::Rank,
                    format!("needs at least 2 axes, got rank {}", s.rank()),
                ),
                loc,
            );
        }
        let m = self.triangle(s.dims(), k, lower, loc);
        self.builder()
            .on(loc)
            .select(&m, self, &self.on(loc).zeros_like())
    }

    /// `jnp.tril(x, k)`: the last two axes' lower triangle (elements with
    /// `col − row ≤ k`), zeros elsewhere.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("tril");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    /// assert_eq!(x.tril(-1).dims()?, vec![2, 3, 4]);
    /// assert!(b.parameter(1, Shape::of::<f32>(&[3]), "v").triu(0).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn tril(&self, k: i64) -> Op {
        self.keep_triangle("tril", k, true, Location::caller())
    }

    /// `jnp.triu(x, k)`: the upper triangle (`col − row ≥ k`), zeros elsewhere.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3, 3]), "x");
    /// assert_eq!(x.triu(1).dims()?, vec![3, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn triu(&self, k: i64) -> Op {
        self.keep_triangle("triu", k, false, Location::caller())
    }

    /// `jnp.diag(x, k)`: of a matrix, its `k`-th diagonal as a vector (above the
    /// main one for `k > 0`; empty when `k` is past the edge); of a vector, the
    /// square matrix with it on the `k`-th diagonal.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("diag");
    /// let m = b.parameter(0, Shape::of::<f32>(&[3, 4]), "m");
    /// let v = b.parameter(1, Shape::of::<f32>(&[3]), "v");
    /// assert_eq!(m.diag(1).dims()?, vec![3]);
    /// assert_eq!(m.diag(-2).dims()?, vec![1]);
    /// assert_eq!(v.diag(-1).dims()?, vec![4, 4]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn diag(&self, k: i64) -> Op {
        let loc = Location::caller();
        let s = match array(self, "diag", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let b = self.builder();
        let ty = s.element_type().expect("an array");
        match s.rank() {
            1 => {
                let n = s.dims()[0] + k.abs();
                let padded = if k == 0 {
                    self.clone()
                } else {
                    let z = b.on(loc).zeros(ty, &[k.abs()]);
                    b.on(loc).concatenate(&[self, &z], 0)
                };
                // k ≥ 0: out[i, i + k] = v[i] (v along rows); k < 0: out[j − k, j] = v[j].
                let along = if k >= 0 { 0 } else { 1 };
                let spread = padded.on(loc).broadcast_in_dim(&[n, n], &[along]);
                let m = self.triangle(&[n, n], k, true, loc);
                let m2 = self.triangle(&[n, n], k, false, loc);
                let on = b.on(loc).select(&m, &m2, &m);
                b.on(loc)
                    .select(&on, &spread, &b.on(loc).zeros(ty, &[n, n]))
            }
            2 => {
                let (rows, cols) = (s.dims()[0], s.dims()[1]);
                let (r0, c0) = if k >= 0 { (0, k) } else { (-k, 0) };
                let len = (rows - r0).min(cols - c0).max(0);
                if len == 0 || rows * cols == 0 {
                    return b.on(loc).zeros(ty, &[len]);
                }
                let idx: Vec<i32> = (0..len)
                    .map(|i| ((r0 + i) * cols + c0 + i) as i32)
                    .collect();
                let flat = self.on(loc).reshape(&[rows * cols]);
                let i = b.on(loc).constant_vec(&idx);
                flat.on(loc).take_with(&i, 0, TakeMode::Clip)
            }
            r => self.builder().fail(
                ShapeError::new(
                    "diag",
                    &[&s],
                    ShapeErrorKind::Rank,
                    format!("takes a vector or a matrix, got rank {r}"),
                ),
                loc,
            ),
        }
    }

    /// `jnp.isnan(x)`: true where an element is NaN (never for integers).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.isnan().element_type()?, ElementType::Pred);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn isnan(&self) -> Op {
        let loc = Location::caller();
        match self.element_type() {
            Ok(t) if t.is_float() || t.is_complex() => self.on(loc).compare(self, Comparison::Ne),
            Ok(_) => self.on(loc).not_equal(self),
            Err(_) => self.builder().fail_not_array(self, "isnan", loc),
        }
    }

    /// `jnp.isinf(x)`: true where an element is +∞ or −∞ (never for integers).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.isinf().dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn isinf(&self) -> Op {
        let loc = Location::caller();
        match self.element_type() {
            Ok(t) if t.is_float() => self.on(loc).abs().on(loc).equal(f64::INFINITY),
            Ok(_) => self.on(loc).not_equal(self),
            Err(_) => self.builder().fail_not_array(self, "isinf", loc),
        }
    }

    /// `jnp.nan_to_num(x, nan, posinf, neginf)`: NaN replaced by `nan`, +∞ by
    /// `posinf` (default the type's largest finite value) and −∞ by `neginf`
    /// (default its lowest); integers unchanged.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("nan_to_num");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.nan_to_num(0.0, None, Some(-1.0)).dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Op {
        let loc = Location::caller();
        let ty = match self.element_type() {
            Ok(t) => t,
            Err(_) => return self.builder().fail_not_array(self, "nan_to_num", loc),
        };
        if !ty.is_float() {
            return self.clone();
        }
        let b = self.builder();
        let c = |v: f64| b.scalar_of(ty, Scalar::Float(v), loc);
        let hi = posinf.unwrap_or(finite_max(ty));
        let lo = neginf.unwrap_or(-finite_max(ty));
        let out = b.on(loc).select(&self.on(loc).isnan(), &c(nan), self);
        let out = b
            .on(loc)
            .select(&out.on(loc).equal(f64::INFINITY), &c(hi), &out);
        b.on(loc)
            .select(&out.on(loc).equal(f64::NEG_INFINITY), &c(lo), &out)
    }

    /// `jnp.remainder(x, y)` (`x % y` in numpy): the modulo with the sign of the
    /// divisor (`-7 % 3 = 2`, `7 % -3 = -2`), for integers and floats; [`rem`](Self::rem)
    /// is C's `fmod` (the sign of the dividend). An integer remainder by 0 is 0,
    /// as in JAX. Two element types promote first ([`promote_types`]), as do
    /// [`divmod`](Self::divmod), [`isin`](Self::isin),
    /// [`array_equal`](Self::array_equal), [`logaddexp`](Self::logaddexp),
    /// [`outer`](Self::outer) and [`vdot`](Self::vdot).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("mod");
    /// let x = b.parameter(0, Shape::of::<i32>(&[4]), "x");
    /// let y = b.parameter(1, Shape::of::<i32>(&[4]), "y");
    /// let (q, r) = x.divmod(&y);
    /// assert_eq!((q.dims()?, r.dims()?), (vec![4], vec![4]));
    /// // Mixed types promote as JAX's do: s32 with f32 is f32.
    /// let z = b.parameter(2, Shape::of::<f32>(&[4]), "z");
    /// assert_eq!(x.remainder(&z).element_type()?, xlaclient_core::ElementType::F32);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn remainder(&self, y: &Op) -> Op {
        let loc = Location::caller();
        let (x, y) = promote_pair(self, y, loc);
        x.remainder_at(&y, loc)
    }

    fn remainder_at(&self, y: &Op, loc: Loc) -> Op {
        let m = self.binary(BinaryOp::Remainder, y, loc);
        let ty = match m.element_type() {
            Ok(t) => t,
            Err(_) => return m,
        };
        let b = self.builder();
        let zero = b.scalar_of(ty, Scalar::Int(0), loc);
        // As JAX: an integer divisor of 0 counts as 1 (so the remainder is 0).
        let (y, m) = if ty.is_integer() {
            let one = b.scalar_of(ty, Scalar::Int(1), loc);
            let y = b
                .on(loc)
                .select(&y.on(loc).compare(&zero, Comparison::Eq), &one, y);
            let m = self.binary(BinaryOp::Remainder, &y, loc);
            (y, m)
        } else {
            (y.clone(), m)
        };
        if ty.is_unsigned_int() {
            return m;
        }
        let y = &y;
        let m_neg = m.on(loc).compare(&zero, Comparison::Lt);
        let y_neg = y.on(loc).compare(&zero, Comparison::Lt);
        let differ = m_neg.on(loc).compare(&y_neg, Comparison::Ne);
        let nonzero = m.on(loc).compare(&zero, Comparison::Ne);
        let fix = differ.on(loc).and(&nonzero);
        let plus = m.binary(BinaryOp::Add, y, loc);
        b.on(loc).select(&fix, &plus, &m)
    }

    /// `jnp.floor_divide(x, y)` (`x // y`): the quotient rounded toward −∞ (`-7 //
    /// 2 = -4`), for integers and floats.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.floor_divide(&x).dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn floor_divide(&self, y: &Op) -> Op {
        self.divmod_at(y, Location::caller()).0
    }

    /// `jnp.divmod(x, y)`: ([`floor_divide`](Self::floor_divide),
    /// [`remainder`](Self::remainder)), computed as JAX does.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let (q, r) = x.divmod(&b.constant(2.0f32));
    /// assert_eq!((q.dims()?, r.dims()?), (vec![3], vec![3]));
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn divmod(&self, y: &Op) -> (Op, Op) {
        self.divmod_at(y, Location::caller())
    }

    fn divmod_at(&self, y: &Op, loc: Loc) -> (Op, Op) {
        let (x, y) = promote_pair(self, y, loc);
        x.divmod_same(&y, loc)
    }

    fn divmod_same(&self, y: &Op, loc: Loc) -> (Op, Op) {
        let trunc = self.binary(BinaryOp::Remainder, y, loc);
        let ty = match trunc.element_type() {
            Ok(t) => t,
            Err(_) => return (trunc.clone(), trunc),
        };
        let b = self.builder();
        let zero = b.scalar_of(ty, Scalar::Int(0), loc);
        let one = b.scalar_of(ty, Scalar::Int(1), loc);
        if ty.is_unsigned_int() {
            return (
                self.binary(BinaryOp::Divide, y, loc),
                self.remainder_at(y, loc),
            );
        }
        if ty.is_float() {
            // JAX's _float_divmod: the remainder's sign fixed to the divisor's, the
            // quotient from (x − mod) / y, rounded.
            let sy = y.on(loc).sign();
            let sm = trunc.on(loc).sign();
            let fix = trunc
                .on(loc)
                .compare(&zero, Comparison::Ne)
                .on(loc)
                .and(&sy.on(loc).compare(&sm, Comparison::Ne));
            // A divisor of 0 divides x itself (±∞ or NaN, as JAX).
            let corrected = b.on(loc).select(
                &y.on(loc).compare(&zero, Comparison::Eq),
                self,
                &self.binary(BinaryOp::Subtract, &trunc, loc),
            );
            let div = corrected.binary(BinaryOp::Divide, y, loc);
            let m = b
                .on(loc)
                .select(&fix, &trunc.binary(BinaryOp::Add, y, loc), &trunc);
            let q = b
                .on(loc)
                .select(&fix, &div.binary(BinaryOp::Subtract, &one, loc), &div);
            (q.on(loc).round(), m)
        } else {
            // JAX's integer floor_divide: one less where the signs differ and the
            // division is inexact.
            let q = self.binary(BinaryOp::Divide, y, loc);
            let fix = self
                .on(loc)
                .sign()
                .on(loc)
                .compare(&y.on(loc).sign(), Comparison::Ne)
                .on(loc)
                .and(&trunc.on(loc).compare(&zero, Comparison::Ne));
            let q = b
                .on(loc)
                .select(&fix, &q.binary(BinaryOp::Subtract, &one, loc), &q);
            (q, self.remainder_at(y, loc))
        }
    }

    /// `jnp.any(x, axes, keepdims)`: true where any element over `axes` is
    /// non-zero (true); an empty axis gives false.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("any");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.any(&[1], false).element_type()?, ElementType::Pred);
    /// assert_eq!(x.all(&[0, 1], true).dims()?, vec![1, 1]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn any(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.truth(loc).on(loc).amax(axes, keepdims)
    }

    /// `jnp.all(x, axes, keepdims)`: true where every element over `axes` is
    /// non-zero (true); an empty axis gives true.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<bool>(&[2, 3]), "x");
    /// assert_eq!(x.all(&[0], false).dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn all(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.truth(loc).on(loc).amin(axes, keepdims)
    }

    /// `x != 0` as `pred` (`x` itself if it is `pred`).
    fn truth(&self, loc: Loc) -> Op {
        match self.element_type() {
            Ok(ElementType::Pred) => self.clone(),
            _ => self.on(loc).not_equal(0),
        }
    }

    /// `jnp.moveaxis(x, source, destination)`: axis `source` moved to position
    /// `destination`, the others in their order (negative axes count from the end).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("moveaxis");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    /// assert_eq!(x.moveaxis(0, -1).dims()?, vec![3, 4, 2]);
    /// assert_eq!(x.swapaxes(0, 2).dims()?, vec![4, 3, 2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn moveaxis(&self, source: i64, destination: i64) -> Op {
        let loc = Location::caller();
        let s = match array(self, "transpose", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let (a, d) = match (
            resolve_axis("transpose", &s, source),
            resolve_axis("transpose", &s, destination),
        ) {
            (Ok(a), Ok(d)) => (a as i64, d),
            (Err(e), _) | (_, Err(e)) => return self.builder().fail(e, loc),
        };
        let mut perm: Vec<i64> = (0..s.rank() as i64).filter(|i| *i != a).collect();
        perm.insert(d, a);
        self.on(loc).transpose(&perm)
    }

    /// `jnp.swapaxes(x, a, b)`: axes `a` and `b` exchanged.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3, 4]), "x");
    /// assert_eq!(x.swapaxes(-1, 0).dims()?, vec![4, 3, 2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn swapaxes(&self, a: i64, b: i64) -> Op {
        let loc = Location::caller();
        let s = match array(self, "transpose", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let (a, b) = match (
            resolve_axis("transpose", &s, a),
            resolve_axis("transpose", &s, b),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return self.builder().fail(e, loc),
        };
        let mut perm: Vec<i64> = (0..s.rank() as i64).collect();
        perm.swap(a, b);
        self.on(loc).transpose(&perm)
    }

    /// `jnp.count_nonzero(x, axes, keepdims)`: the number of non-zero (true)
    /// elements over `axes`, as `s32`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// assert_eq!(x.count_nonzero(&[1], true).dims()?, vec![2, 1]);
    /// assert_eq!(x.count_nonzero(&[0, 1], false).element_type()?, ElementType::S32);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn count_nonzero(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.on(loc)
            .not_equal(0)
            .on(loc)
            .convert(ElementType::S32)
            .on(loc)
            .sum(axes, keepdims)
    }

    /// `jnp.isin(x, test)`: true where an element of `x` equals any element of
    /// `test` (any shape; an empty `test` gives all false).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("isin");
    /// let x = b.parameter(0, Shape::of::<i32>(&[2, 3]), "x");
    /// let t = b.parameter(1, Shape::of::<i32>(&[4]), "t");
    /// assert_eq!(x.isin(&t).dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn isin(&self, test: &Op) -> Op {
        let loc = Location::caller();
        let (s, t) = match (array(self, "isin", loc), array(test, "isin", loc)) {
            (Ok(s), Ok(t)) => (s, t),
            (Err(f), _) | (_, Err(f)) => return f,
        };
        let (x, test) = promote_pair(self, test, loc);
        let k = t.element_count().unwrap_or(0);
        let mut dims = s.dims().to_vec();
        dims.push(k);
        let r = s.rank() as i64;
        let xs = x
            .on(loc)
            .broadcast_in_dim(&dims, &(0..r).collect::<Vec<_>>());
        let ts = test
            .on(loc)
            .reshape(&[k])
            .on(loc)
            .broadcast_in_dim(&dims, &[r]);
        xs.on(loc)
            .compare(&ts, Comparison::Eq)
            .on(loc)
            .amax(&[r], false)
    }

    /// `jnp.array_equal(a, b, equal_nan)`: a `pred[]` that is true when the two
    /// have the same dimensions and equal elements (NaNs equal each other if
    /// `equal_nan`). Different dimensions give a constant false, as in JAX.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[3, 2]), "y");
    /// assert_eq!(x.array_equal(&x, true).dims()?, Vec::<i64>::new());
    /// assert_eq!(x.array_equal(&y, false).element_type()?, ElementType::Pred);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn array_equal(&self, other: &Op, equal_nan: bool) -> Op {
        let loc = Location::caller();
        let (s, t) = match (
            array(self, "array_equal", loc),
            array(other, "array_equal", loc),
        ) {
            (Ok(s), Ok(t)) => (s, t),
            (Err(f), _) | (_, Err(f)) => return f,
        };
        let b = self.builder();
        if s.dims() != t.dims() {
            return b.on(loc).constant(false);
        }
        let (x, other) = promote_pair(self, other, loc);
        let mut eq = x.on(loc).compare(&other, Comparison::Eq);
        if equal_nan {
            let both = x.on(loc).isnan().on(loc).and(&other.on(loc).isnan());
            let e = eq.on(loc).or(&both);
            eq = e;
        }
        let all: Vec<i64> = (0..s.rank() as i64).collect();
        eq.on(loc).amin(&all, false)
    }

    /// `jnp.argsort(x, axis, stable=True, descending)`: the `s32` indices that
    /// sort `x` along `axis`; equal elements (`-0` and `+0` among them) keep
    /// their order, also when descending; NaNs come last (first when descending),
    /// as JAX's.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("argsort");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3, 5]), "x");
    /// assert_eq!(x.argsort(-1, true).dims()?, vec![3, 5]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn argsort(&self, axis: i64, descending: bool) -> Op {
        let loc = Location::caller();
        let s = match array(self, "argsort", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let a = match resolve_axis("argsort", &s, axis) {
            Ok(a) => a as i64,
            Err(e) => return self.builder().fail(e, loc),
        };
        let b = self.builder();
        let idx = b.on(loc).iota(ElementType::S32, s.dims(), a);
        let float = s.element_type().is_some_and(|t| t.is_float());
        let mut out = b.on(loc).sort(&[self, &idx], a, true, |l, r| {
            // Ascending: l < r, or r is NaN and l is not (NaNs last); descending
            // the mirror image (NaNs first). Equal elements (-0 and +0 too) keep
            // their order: the sort is stable.
            let (p, q) = if descending {
                (&r[0], &l[0])
            } else {
                (&l[0], &r[0])
            };
            let lt = p.on(loc).compare(q, Comparison::Lt);
            if !float {
                return lt;
            }
            let q_nan = q.on(loc).compare(q, Comparison::Ne);
            let p_num = p.on(loc).compare(p, Comparison::Eq);
            lt.on(loc).or(&q_nan.on(loc).and(&p_num))
        });
        out.pop().expect("two results")
    }

    /// `jnp.unique(x, size=size, fill_value=fill)`: the distinct elements of the
    /// flattened array in ascending order (NaNs last and counted once, `-0` and
    /// `+0` one value), the first `size` of them, and `fill` in the slots past the
    /// last distinct one (by default the smallest element, as JAX). `size` is
    /// static, as JAX needs it under `jit`. An empty array needs a `fill`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("unique");
    /// let x = b.parameter(0, Shape::of::<i32>(&[2, 3]), "x");
    /// assert_eq!(x.unique(4, None).dims()?, vec![4]);
    /// let e = b.parameter(1, Shape::of::<i32>(&[0]), "e");
    /// assert!(e.unique(2, None).dims().is_err());
    /// assert_eq!(e.unique(2, Some(7.0)).dims()?, vec![2]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn unique(&self, size: i64, fill: Option<f64>) -> Op {
        let loc = Location::caller();
        let s = match array(self, "unique", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let b = self.builder();
        let ty = s.element_type().expect("an array");
        let n = s.element_count().unwrap_or(0);
        if size < 0 || (n == 0 && fill.is_none()) {
            return fail(
                self,
                "unique",
                &[&s],
                format!(
                    "size {size} with fill {fill:?}: the size must be ≥ 0, and an empty array needs a fill value"
                ),
                loc,
            );
        }
        if n == 0 || size == 0 {
            let v = b.scalar_of(ty, Scalar::Float(fill.unwrap_or(0.0)), loc);
            return v.on(loc).broadcast_to(&[size]);
        }
        let sorted = self.on(loc).reshape(&[n]).on(loc).sort_ascending(0);
        let first = b.on(loc).constant_vec(&[true]);
        let mask = if n > 1 {
            let prev = sorted.on(loc).slice_in_dim(0, n - 1, 1, 0);
            let cur = sorted.on(loc).slice_in_dim(1, n, 1, 0);
            let mut differ = cur.on(loc).compare(&prev, Comparison::Ne);
            if ty.is_float() {
                let both_nan = cur.on(loc).isnan().on(loc).and(&prev.on(loc).isnan());
                let d = differ.on(loc).and(&both_nan.on(loc).not());
                differ = d;
            }
            b.on(loc).concatenate(&[&first, &differ], 0)
        } else {
            first
        };
        // The positions of the first of each run, in order: a stable argsort of
        // "not first" puts them ahead of the rest.
        let order = mask
            .on(loc)
            .not()
            .on(loc)
            .convert(ElementType::S32)
            .on(loc)
            .argsort(0, false);
        let order = if size <= n {
            order.on(loc).slice_in_dim(0, size, 1, 0)
        } else {
            let pad = b.on(loc).zeros(ElementType::S32, &[size - n]);
            b.on(loc).concatenate(&[&order, &pad], 0)
        };
        let vals = sorted.on(loc).take_with(&order, 0, TakeMode::Clip);
        let count = mask.on(loc).count_nonzero(&[0], false);
        let slot = b.on(loc).iota(ElementType::S32, &[size], 0);
        let fill = match fill {
            Some(v) => b.scalar_of(ty, Scalar::Float(v), loc),
            None => sorted.on(loc).slice_in_dim(0, 1, 1, 0).on(loc).reshape(&[]),
        };
        let keep = slot.on(loc).lt(&count);
        b.on(loc)
            .select(&keep, &vals, &fill.on(loc).broadcast_to(&[size]))
    }

    /// `jnp.logaddexp(x, y)`: `log(eˣ + eʸ)` computed stably (JAX's formula:
    /// `max + log1p(exp(−|x − y|))`, and `x + y` where that difference is NaN, so
    /// two infinities of one sign give that infinity). Integers as `f32`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.logaddexp(&b.constant(0f32)).dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn logaddexp(&self, y: &Op) -> Op {
        let loc = Location::caller();
        let (x, y) = promote_pair(self, y, loc);
        let x = inexact(&x, loc);
        let y = inexact(&y, loc);
        let amax = x.binary(BinaryOp::Maximum, &y, loc);
        let delta = x.binary(BinaryOp::Subtract, &y, loc);
        let soft = delta
            .on(loc)
            .abs()
            .on(loc)
            .neg()
            .on(loc)
            .exp()
            .on(loc)
            .log1p();
        let body = amax.binary(BinaryOp::Add, &soft, loc);
        let sum = x.binary(BinaryOp::Add, &y, loc);
        self.builder()
            .on(loc)
            .select(&delta.on(loc).isnan(), &sum, &body)
    }

    /// `jax.nn.log_sigmoid(x)`: `log(1 / (1 + e⁻ˣ))` as JAX computes it,
    /// `−softplus(−x)` = `−logaddexp(−x, 0)`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// assert_eq!(x.log_sigmoid().dims()?, vec![3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn log_sigmoid(&self) -> Op {
        let loc = Location::caller();
        let x = inexact(self, loc);
        let nx = x.on(loc).neg();
        nx.on(loc).logaddexp(&x.on(loc).zeros_like()).on(loc).neg()
    }

    /// `jnp.outer(a, b)`: both flattened, `a[i] · b[j]` as an `[m, n]` array.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 2]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[3]), "y");
    /// assert_eq!(x.outer(&y).dims()?, vec![4, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn outer(&self, other: &Op) -> Op {
        let loc = Location::caller();
        let (s, t) = match (array(self, "outer", loc), array(other, "outer", loc)) {
            (Ok(s), Ok(t)) => (s, t),
            (Err(f), _) | (_, Err(f)) => return f,
        };
        let (m, n) = (
            s.element_count().unwrap_or(0),
            t.element_count().unwrap_or(0),
        );
        let (x, other) = promote_pair(self, other, loc);
        let a = x
            .on(loc)
            .reshape(&[m])
            .on(loc)
            .broadcast_in_dim(&[m, n], &[0]);
        let c = other
            .on(loc)
            .reshape(&[n])
            .on(loc)
            .broadcast_in_dim(&[m, n], &[1]);
        a.binary(BinaryOp::Multiply, &c, loc)
    }

    /// `jnp.vdot(a, b)`: both flattened (same element count), the scalar
    /// `sum(a[i] · b[i])` (real types; complex `a` is not conjugated here).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("ex");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[6]), "y");
    /// assert_eq!(x.vdot(&y).dims()?, Vec::<i64>::new());
    /// assert!(x.vdot(&b.parameter(2, Shape::of::<f32>(&[5]), "z")).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn vdot(&self, other: &Op) -> Op {
        let loc = Location::caller();
        let (s, t) = match (array(self, "vdot", loc), array(other, "vdot", loc)) {
            (Ok(s), Ok(t)) => (s, t),
            (Err(f), _) | (_, Err(f)) => return f,
        };
        let (m, n) = (
            s.element_count().unwrap_or(0),
            t.element_count().unwrap_or(0),
        );
        if m != n {
            return self.builder().fail(
                ShapeError::new(
                    "vdot",
                    &[&s, &t],
                    ShapeErrorKind::Dimension,
                    format!("{m} elements against {n}"),
                ),
                loc,
            );
        }
        let dims = DotDims {
            lhs_contracting: vec![0],
            rhs_contracting: vec![0],
            lhs_batch: vec![],
            rhs_batch: vec![],
        };
        let (x, other) = promote_pair(self, other, loc);
        x.on(loc)
            .reshape(&[m])
            .on(loc)
            .dot_general(&other.on(loc).reshape(&[n]), &dims)
    }

    /// `jnp.unravel_index(indices, shape)`: for flat (integer) indices into an
    /// array of `shape`, one index array per axis; negative indices count from the
    /// end, and indices out of range clamp to the first or last element (JAX's
    /// rule).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("unravel");
    /// let i = b.parameter(0, Shape::of::<i32>(&[5]), "i");
    /// let ix = i.unravel_index(&[2, 3, 4]);
    /// assert_eq!(ix.len(), 3);
    /// assert_eq!(ix[2].dims()?, vec![5]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn unravel_index(&self, shape: &[i64]) -> Vec<Op> {
        let loc = Location::caller();
        let n = shape.len().max(1);
        let s = match array(self, "unravel_index", loc) {
            Ok(s) => s,
            Err(f) => return vec![f; n],
        };
        let ty = s.element_type().expect("an array");
        if !ty.is_integer() || shape.iter().any(|d| *d < 0) {
            let f = fail(
                self,
                "unravel_index",
                &[&s],
                format!(
                    "needs integer indices and sizes ≥ 0, got {ty} indices and shape {shape:?}"
                ),
                loc,
            );
            return vec![f; n];
        }
        let b = self.builder();
        let c = |v: i64| {
            b.scalar_of(ty, Scalar::Int(v), loc)
                .on(loc)
                .broadcast_to(s.dims())
        };
        let mut rest = self.clone();
        let mut out = vec![rest.clone(); shape.len()];
        for (i, d) in shape.iter().enumerate().rev() {
            let (q, r) = rest.divmod_at(&c(*d), loc);
            out[i] = r;
            rest = q;
        }
        let pos = rest.on(loc).gt(0);
        let neg = if ty.is_unsigned_int() {
            b.on(loc).constant(false).on(loc).broadcast_to(s.dims())
        } else {
            rest.on(loc).lt(-1)
        };
        shape
            .iter()
            .zip(out)
            .map(|(d, i)| {
                let low = b.on(loc).select(&neg, &c(0), &i);
                b.on(loc).select(&pos, &c(d - 1), &low)
            })
            .collect()
    }
}

/// `lax.conv_transpose`'s padding: JAX's `"SAME"` and `"VALID"` (worked out from
/// the kernel size, dilation and stride as JAX does), or `(low, high)` per spatial
/// axis, passed on to the convolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvTransposePadding {
    /// The output is `stride` times the input's spatial size.
    Same,
    /// Every position where the kernel overlaps the input.
    Valid,
    /// Explicit `(low, high)` padding of the dilated input, per spatial axis.
    Explicit(Vec<(i64, i64)>),
}

impl Op {
    /// `lax.conv_transpose(x, kernel, strides, padding, rhs_dilation, dims,
    /// transpose_kernel)`: the gradient-style ("deconvolution") convolution, as
    /// JAX builds it: the input dilated by `strides`, padded per `padding`, then
    /// convolved with stride 1; with `transpose_kernel` the kernel's spatial axes
    /// are flipped and its input and output feature axes swapped (the transpose of
    /// the forward convolution). `rhs_dilation` empty means 1s. JAX's default
    /// layouts are [`ConvDims::channels_last`](crate::ConvDims::channels_last).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ConvDims, ConvTransposePadding, Shape};
    /// let b = Builder::new("deconv");
    /// let x = b.parameter(0, Shape::of::<f32>(&[1, 5, 5, 3]), "x");
    /// let k = b.parameter(1, Shape::of::<f32>(&[3, 3, 3, 8]), "k");
    /// let dims = ConvDims::channels_last(2);
    /// let same = x.conv_transpose(&k, &[2, 2], &ConvTransposePadding::Same, &[], &dims, false);
    /// assert_eq!(same.dims()?, vec![1, 10, 10, 8]);
    /// let valid = x.conv_transpose(&k, &[2, 2], &ConvTransposePadding::Valid, &[], &dims, false);
    /// assert_eq!(valid.dims()?, vec![1, 11, 11, 8]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn conv_transpose(
        &self,
        kernel: &Op,
        strides: &[i64],
        padding: &ConvTransposePadding,
        rhs_dilation: &[i64],
        dims: &crate::ConvDims,
        transpose_kernel: bool,
    ) -> Op {
        let loc = Location::caller();
        let ks = match array(kernel, "convolution", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let n = dims.kernel_spatial.len();
        let ones = vec![1; n];
        let rd: Vec<i64> = if rhs_dilation.is_empty() {
            ones.clone()
        } else {
            rhs_dilation.to_vec()
        };
        if strides.len() != n
            || rd.len() != n
            || dims
                .kernel_spatial
                .iter()
                .any(|a| *a < 0 || *a as usize >= ks.rank())
        {
            return fail(
                kernel,
                "convolution",
                &[&ks],
                format!(
                    "conv_transpose: {} strides and {} dilations for {n} spatial axes",
                    strides.len(),
                    rd.len()
                ),
                loc,
            );
        }
        let pads: Vec<(i64, i64)> = match padding {
            ConvTransposePadding::Explicit(p) => p.clone(),
            same_or_valid => (0..n)
                .map(|i| {
                    let k = (ks.dims()[dims.kernel_spatial[i] as usize] - 1) * rd[i] + 1;
                    let s = strides[i];
                    let (len, a) = if *same_or_valid == ConvTransposePadding::Same {
                        let len = k + s - 2;
                        (len, if s > k - 1 { k - 1 } else { (len + 1) / 2 })
                    } else {
                        (k + s - 2 + (k - s).max(0), k - 1)
                    };
                    (a, len - a)
                })
                .collect(),
        };
        let kernel = if transpose_kernel {
            let flipped = kernel.on(loc).reverse(&dims.kernel_spatial);
            let mut perm: Vec<i64> = (0..ks.rank() as i64).collect();
            perm.swap(
                dims.kernel_input_feature as usize,
                dims.kernel_output_feature as usize,
            );
            flipped.on(loc).transpose(&perm)
        } else {
            kernel.clone()
        };
        self.on(loc)
            .conv_general_dilated(&kernel, &ones, &pads, strides, &rd, dims, 1)
    }
}

impl Builder {
    /// `jnp.einsum(spec, *operands)` in full: any number of operands, `...` for
    /// the leading axes of each (the same dimensions in every operand that has
    /// them), a letter repeated within one operand (its diagonal: `"ii->i"`,
    /// `"ii->"` is the trace), and the implicit output (no `->`: the letters that
    /// occur once, in alphabetical order, after the `...` axes). Letters summed
    /// away within one operand are summed first; the operands are then contracted
    /// left to right, two at a time, keeping the letters a later operand or the
    /// output needs. (XLA's CPU computes `f32` products in `f32` whatever JAX's
    /// `precision` says.) The two-operand form is [`einsum`](Builder::einsum).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("einsum");
    /// let q = b.parameter(0, Shape::of::<f32>(&[2, 5, 4, 8]), "q");
    /// let k = b.parameter(1, Shape::of::<f32>(&[2, 6, 4, 8]), "k");
    /// assert_eq!(b.einsum_many("...qhd,...khd->...hqk", &[&q, &k]).dims()?, vec![2, 4, 5, 6]);
    /// let m = b.parameter(2, Shape::of::<f32>(&[3, 3]), "m");
    /// assert_eq!(b.einsum_many("ii", &[&m]).dims()?, Vec::<i64>::new());
    /// assert_eq!(b.einsum_many("ij,jk,kl->il", &[&m, &m, &m]).dims()?, vec![3, 3]);
    /// assert!(b.einsum_many("ij,jk->ik", &[&m]).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn einsum_many(&self, spec: &str, operands: &[&Op]) -> Op {
        let loc = Location::caller();
        let shapes: Vec<Shape> = match operands
            .iter()
            .map(|o| array(o, "einsum", loc))
            .collect::<Result<Vec<_>, Op>>()
        {
            Ok(s) => s,
            Err(f) => return f,
        };
        let refs: Vec<&Shape> = shapes.iter().collect();
        let bad = |reason: String| {
            self.fail(
                ShapeError::new(
                    "einsum",
                    &refs,
                    ShapeErrorKind::Attribute,
                    format!("einsum `{spec}`: {reason}"),
                ),
                loc,
            )
        };
        let spec_clean: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
        let (ins, out) = match spec_clean.split_once("->") {
            Some((i, o)) => (i.to_string(), Some(o.to_string())),
            None => (spec_clean.clone(), None),
        };
        let inputs: Vec<&str> = ins.split(',').collect();
        if inputs.len() != operands.len() {
            return bad(format!(
                "{} inputs in the spec for {} operands",
                inputs.len(),
                operands.len()
            ));
        }
        let valid = |t: &str| {
            let rest = t.replacen("...", "", 1);
            rest.chars().all(|c| c.is_ascii_alphabetic())
        };
        if !inputs.iter().all(|t| valid(t)) || !out.as_deref().is_none_or(valid) {
            return bad("terms are letters with at most one `...` each".into());
        }
        // Letters for the `...` axes: ones the spec does not use.
        let unused: Vec<char> = ('A'..='Z')
            .chain('a'..='z')
            .filter(|c| !spec_clean.contains(*c))
            .collect();
        let mut ell: Option<Vec<i64>> = None;
        let mut terms: Vec<Vec<char>> = Vec::new();
        for (t, s) in inputs.iter().zip(&shapes) {
            let letters = t.replacen("...", "", 1).chars().count();
            let mut term: Vec<char> = Vec::new();
            if let Some((pre, post)) = t.split_once("...") {
                let k = s.rank() as i64 - letters as i64;
                if k < 0 || k as usize > unused.len() {
                    return bad(format!("`{t}` does not fit rank {}", s.rank()));
                }
                let start = pre.chars().count();
                let dims = s.dims()[start..start + k as usize].to_vec();
                match &ell {
                    Some(e) if *e != dims => {
                        return bad(format!("`...` stands for {e:?} and for {dims:?}"));
                    }
                    _ => ell = Some(dims),
                }
                term.extend(pre.chars());
                term.extend(&unused[..k as usize]);
                term.extend(post.chars());
            } else {
                if letters != s.rank() {
                    return bad(format!(
                        "`{t}` names {letters} axes of a rank-{} operand",
                        s.rank()
                    ));
                }
                term.extend(t.chars());
            }
            terms.push(term);
        }
        let ell_letters: Vec<char> = unused[..ell.as_ref().map_or(0, |e| e.len())].to_vec();
        let output: Vec<char> = match &out {
            Some(o) => {
                let mut v = Vec::new();
                if let Some((pre, post)) = o.split_once("...") {
                    v.extend(pre.chars());
                    v.extend(&ell_letters);
                    v.extend(post.chars());
                } else {
                    v.extend(o.chars());
                }
                v
            }
            None => {
                let mut once: Vec<char> = terms
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|c| !ell_letters.contains(c))
                    .filter(|c| terms.iter().flatten().filter(|d| *d == c).count() == 1)
                    .collect();
                once.sort_unstable();
                ell_letters.iter().copied().chain(once).collect()
            }
        };
        if output
            .iter()
            .enumerate()
            .any(|(i, c)| output[..i].contains(c))
            || output
                .iter()
                .any(|c| !terms.iter().flatten().any(|d| d == c))
        {
            return bad("each output letter once, and from an input".into());
        }
        // Each letter's size must agree wherever it appears.
        let mut size: Vec<(char, i64)> = Vec::new();
        for (term, s) in terms.iter().zip(&shapes) {
            for (c, d) in term.iter().zip(s.dims()) {
                match size.iter().find(|(l, _)| l == c) {
                    Some((_, e)) if e != d => {
                        return bad(format!("`{c}` is {e} and {d} elements"));
                    }
                    Some(_) => {}
                    None => size.push((*c, *d)),
                }
            }
        }
        // One operand at a time: diagonals of repeated letters, then the letters no
        // other operand and not the output use, summed.
        let mut ops: Vec<(Op, Vec<char>)> = Vec::new();
        for (i, (o, term)) in operands.iter().zip(&terms).enumerate() {
            let mut x = (*o).clone();
            let mut t = term.clone();
            while let Some((a, c)) = t
                .iter()
                .enumerate()
                .find(|(a, c)| t[a + 1..].contains(c))
                .map(|(a, c)| (a, *c))
            {
                let bpos = a + 1 + t[a + 1..].iter().position(|d| *d == c).expect("found");
                let n = size.iter().find(|(l, _)| *l == c).expect("sized").1;
                let mut perm: Vec<i64> = (0..t.len() as i64)
                    .filter(|p| *p != a as i64 && *p != bpos as i64)
                    .collect();
                perm.push(a as i64);
                perm.push(bpos as i64);
                let moved = x.on(loc).transpose(&perm);
                let mut d = moved.dims().unwrap_or_default();
                d.truncate(d.len().saturating_sub(2));
                let lead = d.clone();
                d.push(n * n);
                let flat = moved.on(loc).reshape(&d);
                let idx: Vec<i32> = (0..n).map(|k| (k * (n + 1)) as i32).collect();
                x = if n == 0 {
                    let mut z = lead.clone();
                    z.push(0);
                    let ty = flat.element_type().unwrap_or(ElementType::F32);
                    self.on(loc).zeros(ty, &z)
                } else {
                    let ix = self.on(loc).constant_vec(&idx);
                    flat.on(loc)
                        .take_with(&ix, lead.len() as i64, TakeMode::Clip)
                };
                t = perm[..perm.len() - 2]
                    .iter()
                    .map(|p| t[*p as usize])
                    .collect();
                t.push(c);
            }
            let lonely: Vec<i64> = t
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    !output.contains(c)
                        && !terms
                            .iter()
                            .enumerate()
                            .any(|(j, u)| j != i && u.contains(c))
                })
                .map(|(p, _)| p as i64)
                .collect();
            if !lonely.is_empty() {
                let summed = x.on(loc).sum(&lonely, false);
                x = summed;
                t = t
                    .iter()
                    .enumerate()
                    .filter(|(p, _)| !lonely.contains(&(*p as i64)))
                    .map(|(_, c)| *c)
                    .collect();
            }
            ops.push((x, t));
        }
        // Contract left to right, keeping what a later operand or the output uses.
        let mut it = ops.into_iter();
        let (mut acc, mut at) = it.next().expect("at least one operand");
        let rest: Vec<(Op, Vec<char>)> = it.collect();
        for (k, (o, ot)) in rest.iter().enumerate() {
            let later: Vec<char> = rest[k + 1..]
                .iter()
                .flat_map(|(_, t)| t.iter().copied())
                .chain(output.iter().copied())
                .collect();
            let keep: Vec<char> = at
                .iter()
                .chain(ot.iter().filter(|c| !at.contains(c)))
                .copied()
                .filter(|c| later.contains(c))
                .collect();
            let s: String = format!(
                "{},{}->{}",
                at.iter().collect::<String>(),
                ot.iter().collect::<String>(),
                keep.iter().collect::<String>()
            );
            acc = self.on(loc).einsum(&s, &acc, o);
            at = keep;
        }
        let perm: Vec<i64> = output
            .iter()
            .map(|c| at.iter().position(|d| d == c).expect("kept") as i64)
            .collect();
        if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
            acc
        } else {
            acc.on(loc).transpose(&perm)
        }
    }

    /// `jnp.vectorize(f, signature=signature)(*args)`: `f`, written for the core
    /// axes of one element (scalars when `signature` is empty), applied over the
    /// leading "loop" axes of `args`, which broadcast the numpy way, through
    /// [`vmap`](Builder::vmap). `signature` is numpy's generalized-ufunc signature
    /// with one output, as `"(n),(n)->()"` or `"(m,n)->(n)"`; each input's last axes
    /// are its core axes, and sizes named twice must agree. The result has the
    /// loop axes followed by the output's core axes.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("vectorize");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 1, 3]), "x");
    /// let y = b.parameter(1, Shape::of::<f32>(&[5, 3]), "y");
    /// let dot = b.vectorize("(n),(n)->()", &[&x, &y], |_, v| (&v[0] * &v[1]).reduce_sum(&[0]));
    /// assert_eq!(dot.dims()?, vec![4, 5]);
    /// let scaled = b.vectorize("", &[&x], |_, v| &v[0] * 2.0);
    /// assert_eq!(scaled.dims()?, vec![4, 1, 3]);
    /// assert!(b.vectorize("(n),(n)->()", &[&x], |_, v| v[0].clone()).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn vectorize(
        &self,
        signature: &str,
        args: &[&Op],
        f: impl FnOnce(&Builder, Vec<Op>) -> Op,
    ) -> Op {
        let loc = Location::caller();
        let shapes: Vec<Shape> = match args
            .iter()
            .map(|o| array(o, "vectorize", loc))
            .collect::<Result<Vec<_>, Op>>()
        {
            Ok(s) => s,
            Err(f) => return f,
        };
        let refs: Vec<&Shape> = shapes.iter().collect();
        let bad = |reason: String| {
            self.fail(
                ShapeError::new(
                    "vectorize",
                    &refs,
                    ShapeErrorKind::Attribute,
                    format!("signature `{signature}`: {reason}"),
                ),
                loc,
            )
        };
        let sig: String = signature.chars().filter(|c| !c.is_whitespace()).collect();
        let parse = |t: &str| -> Option<Vec<Vec<String>>> {
            if t.is_empty() {
                return Some(vec![]);
            }
            let t = t.strip_prefix('(')?.strip_suffix(')')?;
            Some(
                t.split("),(")
                    .map(|g| {
                        g.split(',')
                            .filter(|d| !d.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .collect(),
            )
        };
        let (ins, out_core) = if sig.is_empty() {
            (vec![Vec::new(); args.len()], Vec::new())
        } else {
            let Some((i, o)) = sig.split_once("->") else {
                return bad("needs `->`".into());
            };
            match (parse(i), parse(o)) {
                (Some(i), Some(o)) if o.len() == 1 => (i, o[0].clone()),
                (Some(_), Some(_)) => return bad("one output only".into()),
                _ => return bad("terms are `(a,b)` lists of names".into()),
            }
        };
        if ins.len() != args.len() {
            return bad(format!("{} inputs for {} arguments", ins.len(), args.len()));
        }
        // Core sizes by name, and the loop axes broadcast.
        let mut sizes: Vec<(String, i64)> = Vec::new();
        let mut loop_dims: Vec<i64> = Vec::new();
        for (core, s) in ins.iter().zip(&shapes) {
            if core.len() > s.rank() {
                return bad(format!(
                    "{} core axes for a rank-{} argument",
                    core.len(),
                    s.rank()
                ));
            }
            let split = s.rank() - core.len();
            for (name, d) in core.iter().zip(&s.dims()[split..]) {
                match sizes.iter().find(|(n, _)| n == name) {
                    Some((_, e)) if e != d => {
                        return bad(format!("`{name}` is {e} and {d} elements"));
                    }
                    Some(_) => {}
                    None => sizes.push((name.clone(), *d)),
                }
            }
            loop_dims = match super::elementwise::broadcast_dims(&loop_dims, &s.dims()[..split]) {
                Ok(d) => d,
                Err(e) => return bad(format!("loop axes do not broadcast: {e}")),
            };
        }
        let n: i64 = loop_dims.iter().product();
        let flat: Vec<Op> = args
            .iter()
            .zip(&shapes)
            .zip(&ins)
            .map(|((a, s), core)| {
                let core_dims = &s.dims()[s.rank() - core.len()..];
                let full: Vec<i64> = loop_dims.iter().chain(core_dims).copied().collect();
                let batched: Vec<i64> = std::iter::once(n)
                    .chain(core_dims.iter().copied())
                    .collect();
                a.on(loc).broadcast_to(&full).on(loc).reshape(&batched)
            })
            .collect();
        let out = self
            .on(loc)
            .vmap(&crate::Vmap::new(), flat, |b, xs: Vec<Op>| f(b, xs));
        let Ok(od) = out.dims() else {
            return out;
        };
        if od.len() != out_core.len() + 1 {
            return bad(format!(
                "`f` gave {} core axes, the signature says {}",
                od.len() - 1,
                out_core.len()
            ));
        }
        let dims: Vec<i64> = loop_dims.iter().chain(&od[1..]).copied().collect();
        out.on(loc).reshape(&dims)
    }

    /// `jnp.eye(n, m, k, dtype)`: an `[n, m]` array of `ty` with ones on the
    /// `k`-th diagonal (above the main one for `k > 0`) and zeros elsewhere.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("eye");
    /// assert_eq!(b.eye(3, 4, 1, ElementType::F32).dims()?, vec![3, 4]);
    /// assert!(b.eye(-1, 2, 0, ElementType::F32).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn eye(&self, n: i64, m: i64, k: i64, ty: ElementType) -> Op {
        let loc = Location::caller();
        if n < 0 || m < 0 {
            return self.fail(
                ShapeError::new(
                    "eye",
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("eye({n}, {m}): sizes must be ≥ 0"),
                ),
                loc,
            );
        }
        let row = self.on(loc).iota(ElementType::S64, &[n, m], 0);
        let col = self.on(loc).iota(ElementType::S64, &[n, m], 1);
        (&col - &row).on(loc).equal(k).on(loc).convert(ty)
    }

    /// `jnp.linspace(start, stop, num, endpoint, dtype)`: `num` evenly spaced
    /// values from `start` to `stop` (included if `endpoint`), computed in `f32`
    /// (`f64` for `f64`) as JAX does, `start·(1 − t) + stop·t`; integer types take
    /// the floor.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("linspace");
    /// assert_eq!(b.linspace(0.0, 1.0, 5, true, ElementType::F32).dims()?, vec![5]);
    /// assert!(b.linspace(0.0, 1.0, -1, true, ElementType::F32).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn linspace(&self, start: f64, stop: f64, num: i64, endpoint: bool, ty: ElementType) -> Op {
        let loc = Location::caller();
        if num < 0 {
            return self.fail(
                ShapeError::new(
                    "linspace",
                    &[],
                    ShapeErrorKind::Dimension,
                    format!("linspace({start}, {stop}, {num}): the count must be ≥ 0"),
                ),
                loc,
            );
        }
        let ct = if ty == ElementType::F64 {
            ElementType::F64
        } else {
            ElementType::F32
        };
        let c = |v: f64| self.scalar_of(ct, Scalar::Float(v), loc);
        let out = if num > 1 {
            let div = if endpoint { num - 1 } else { num };
            let t = self.on(loc).iota(ct, &[div], 0).binary_scalar(
                BinaryOp::Divide,
                Scalar::Float(div as f64),
                false,
                loc,
            );
            let one_minus = t.binary_scalar(BinaryOp::Subtract, Scalar::Float(1.0), true, loc);
            let a = one_minus.binary(BinaryOp::Multiply, &c(start), loc);
            let z = t.binary(BinaryOp::Multiply, &c(stop), loc);
            let out = a.binary(BinaryOp::Add, &z, loc);
            if endpoint {
                let last = c(stop).on(loc).reshape(&[1]);
                self.on(loc).concatenate(&[&out, &last], 0)
            } else {
                out
            }
        } else {
            c(start).on(loc).broadcast_to(&[num])
        };
        let out = if ty.is_integer() {
            out.on(loc).floor()
        } else {
            out
        };
        if ty == ct {
            out
        } else {
            out.on(loc).convert(ty)
        }
    }
}
