//! A numpy-style layer on top of the XLA ops: reductions with `keepdims`,
//! `argmax`/`argmin` (XLA's tie-breaking: the first index), `softmax`,
//! `log_softmax`, `logsumexp`, `one_hot`, `clip`, `square`, `stack`, `split`,
//! `squeeze`, `expand_dims`, `arange`, `zeros`/`ones`/`full` (and `_like`), two-operand
//! `einsum`. Each compiles to the ops of the other families; nothing here has a rule
//! of its own beyond checking its arguments.

use std::panic::Location;

use super::elementwise::{BinaryOp, Scalar};
use super::linalg::DotDims;
use super::{resolve_axes, resolve_axis};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ops::elementwise::Comparison;
use crate::shape::{ElementType, Shape};

fn fail(
    op: &Op,
    name: &'static str,
    shapes: &[&Shape],
    kind: ShapeErrorKind,
    reason: String,
    loc: &'static Location<'static>,
) -> Op {
    op.builder()
        .fail(ShapeError::new(name, shapes, kind, reason), loc)
}

impl Op {
    /// Zeros of this array's type and dimensions (`jnp.zeros_like`).
    #[track_caller]
    pub fn zeros_like(&self) -> Op {
        self.full_like(0.0)
    }

    /// Ones of this array's type and dimensions (`jnp.ones_like`).
    #[track_caller]
    pub fn ones_like(&self) -> Op {
        self.full_like(1.0)
    }

    /// `value` in this array's type and dimensions (`jnp.full_like`); a value the
    /// type cannot hold is a build error.
    #[track_caller]
    pub fn full_like(&self, value: f64) -> Op {
        let loc = Location::caller();
        let b = self.builder();
        match self.shape() {
            Ok(s) if s.is_array() => {
                let ty = s.element_type().expect("an array");
                let v = if value.fract() == 0.0 && !ty.is_float() {
                    Scalar::Int(value as i64)
                } else {
                    Scalar::Float(value)
                };
                b.scalar_of(ty, v, loc).on(loc).broadcast_to(s.dims())
            }
            Ok(_) => b.fail_not_array(self, "broadcast", loc),
            Err(_) => self.clone(),
        }
    }

    fn array_shape(
        &self,
        name: &'static str,
        loc: &'static Location<'static>,
    ) -> Result<Shape, Op> {
        match self.shape() {
            Ok(s) if s.is_array() => Ok(s),
            _ => Err(self.builder().fail_not_array(self, name, loc)),
        }
    }

    /// `reduced` with the reduced `axes` put back as size-1 axes.
    pub(crate) fn keep(&self, reduced: Op, axes: &[i64], loc: &'static Location<'static>) -> Op {
        let Ok(s) = self.array_shape("reduce", loc) else {
            return reduced;
        };
        let Ok(axes) = resolve_axes("reduce", &s, axes) else {
            return reduced;
        };
        let dims: Vec<i64> = (0..s.rank())
            .map(|i| if axes.contains(&i) { 1 } else { s.dims()[i] })
            .collect();
        reduced.on(loc).reshape(&dims)
    }

    fn reduce_keep(
        &self,
        axes: &[i64],
        keepdims: bool,
        loc: &'static Location<'static>,
        f: impl FnOnce(&Op) -> Op,
    ) -> Op {
        let r = f(self);
        if keepdims { self.keep(r, axes, loc) } else { r }
    }

    /// Variance over `axes` (`jnp.var(x, axes, keepdims=keepdims)`, `ddof = 0`): the
    /// mean of `|x − mean(x)|²`; integer operands as `f32` (as [`mean`](Self::mean)).
    #[track_caller]
    pub fn var(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        let centred = self.on(loc).mean(axes, true);
        let x = match self.element_type() {
            Ok(t) if !(t.is_float() || t.is_complex()) => self.on(loc).convert(ElementType::F32),
            _ => self.clone(),
        };
        let d = x.binary(crate::BinaryOp::Subtract, &centred, loc);
        let sq = match d.element_type() {
            Ok(t) if t.is_complex() => {
                let a = d.on(loc).abs();
                a.binary(crate::BinaryOp::Multiply, &a, loc)
            }
            _ => d.binary(crate::BinaryOp::Multiply, &d, loc),
        };
        sq.on(loc).mean(axes, keepdims)
    }

    /// Standard deviation over `axes` (`jnp.std`, `ddof = 0`): `√var`.
    #[track_caller]
    pub fn std(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.on(loc).var(axes, keepdims).on(loc).sqrt()
    }

    /// Sum over `axes` (numpy's `sum`), keeping them as size-1 axes if `keepdims`.
    /// Types as `jnp.sum`: `pred` and the small signed integers sum as `s32`, the
    /// small unsigned ones as `u32`, and `f16`/`bf16` accumulate in `f32` and give
    /// their own type (the lax-level `reduce_sum` keeps the operand's type).
    #[track_caller]
    pub fn sum(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.reduce_keep(axes, keepdims, loc, |x| {
            x.promoted_reduce(axes, BinaryOp::Add, loc)
        })
    }

    /// Product over `axes`, with [`sum`](Self::sum)'s types (`jnp.prod`).
    #[track_caller]
    pub fn prod(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.reduce_keep(axes, keepdims, loc, |x| {
            x.promoted_reduce(axes, BinaryOp::Multiply, loc)
        })
    }

    /// A sum or product in JAX's types: the type it accumulates in and the type of
    /// the result, from the operand's.
    fn promoted_reduce(&self, axes: &[i64], op: BinaryOp, loc: &'static Location<'static>) -> Op {
        use ElementType as T;
        let (acc, out) = match self.element_type() {
            Ok(T::Pred | T::S8 | T::S16) => (T::S32, T::S32),
            Ok(T::U8 | T::U16) => (T::U32, T::U32),
            Ok(t @ (T::F16 | T::Bf16)) => (T::F32, t),
            Ok(t) => (t, t),
            Err(_) => return self.reduce_by(axes, op, loc),
        };
        let x = if self.element_type().ok() == Some(acc) {
            self.clone()
        } else {
            self.on(loc).convert(acc)
        };
        let r = x.reduce_by(axes, op, loc);
        if acc == out {
            r
        } else {
            r.on(loc).convert(out)
        }
    }

    /// Maximum over `axes` (numpy's `amax`).
    #[track_caller]
    pub fn amax(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.reduce_keep(axes, keepdims, loc, |x| {
            x.reduce_by(axes, BinaryOp::Maximum, loc)
        })
    }

    /// Minimum over `axes` (numpy's `amin`).
    #[track_caller]
    pub fn amin(&self, axes: &[i64], keepdims: bool) -> Op {
        let loc = Location::caller();
        self.reduce_keep(axes, keepdims, loc, |x| {
            x.reduce_by(axes, BinaryOp::Minimum, loc)
        })
    }

    /// The index (`s32`) of the largest element along `axis`: the first one among
    /// equals, and the first NaN if there is one (as `jnp.argmax`).
    #[track_caller]
    pub fn argmax(&self, axis: i64) -> Op {
        self.arg_best(axis, Comparison::Gt, Location::caller())
    }

    /// The index (`s32`) of the smallest element along `axis`: the first one among
    /// equals, and the first NaN if there is one (as `jnp.argmin`).
    #[track_caller]
    pub fn argmin(&self, axis: i64) -> Op {
        self.arg_best(axis, Comparison::Lt, Location::caller())
    }

    fn arg_best(&self, axis: i64, better: Comparison, loc: &'static Location<'static>) -> Op {
        let s = match self.array_shape("reduce", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let a = match resolve_axis("reduce", &s, axis) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let b = self.builder();
        let ty = s.element_type().expect("an array");
        let idx = b.iota(ElementType::S32, s.dims(), a as i64);
        let init_v = b.scalar_of(
            ty,
            if ty.is_float() {
                Scalar::Float(f64::NAN)
            } else {
                Scalar::Int(0)
            },
            loc,
        );
        let init_i = b.scalar_of(ElementType::S32, Scalar::Int(-1), loc);
        let float = ty.is_float();
        let out =
            b.on(loc)
                .reduce_many(&[self, &idx], &[&init_v, &init_i], &[a as i64], |acc, e| {
                    // A total order with the index as tie-break, so XLA may combine partial
                    // results in any grouping: an initial value (index -1) is the identity;
                    // a NaN beats numbers; among equals (or two NaNs) the smaller index wins.
                    let bb = acc[0].builder();
                    let and = |x: &Op, y: &Op| bb.on(loc).select(x, y, x);
                    let or = |x: &Op, y: &Op| bb.on(loc).select(x, x, y);
                    let zero = bb.scalar_of(ElementType::S32, Scalar::Int(0), loc);
                    let no_false = bb.scalar_of(ElementType::Pred, Scalar::Int(0), loc);
                    let acc_none = acc[1].on(loc).compare(&zero, Comparison::Lt);
                    let e_none = e[1].on(loc).compare(&zero, Comparison::Lt);
                    let lower = e[1].on(loc).compare(&acc[1], Comparison::Lt);
                    let wins = e[0].on(loc).compare(&acc[0], better);
                    let tie = and(&e[0].on(loc).compare(&acc[0], Comparison::Eq), &lower);
                    let mut take = or(&wins, &tie);
                    if float {
                        let e_nan = e[0].on(loc).compare(&e[0], Comparison::Ne);
                        let a_nan = acc[0].on(loc).compare(&acc[0], Comparison::Ne);
                        take = bb
                            .on(loc)
                            .select(&a_nan, &and(&e_nan, &lower), &or(&e_nan, &take));
                    }
                    let take = bb.on(loc).select(&e_none, &no_false, &or(&acc_none, &take));
                    vec![
                        bb.on(loc).select(&take, &e[0], &acc[0]),
                        bb.on(loc).select(&take, &e[1], &acc[1]),
                    ]
                });
        out.into_iter().nth(1).expect("two results")
    }

    /// `log(sum(exp(x)))` over `axis`, computed stably (the maximum taken out; an
    /// axis of all −∞ gives −∞).
    #[track_caller]
    pub fn logsumexp(&self, axis: i64, keepdims: bool) -> Op {
        let loc = Location::caller();
        let ty = match self.element_type() {
            Ok(t) => t,
            Err(_) => return self.builder().fail_not_array(self, "reduce", loc),
        };
        let b = self.builder();
        let mx = self.amax(&[axis], true);
        let ninf = b.scalar_of(ty, Scalar::Float(f64::NEG_INFINITY), loc);
        let zero = b.scalar_of(ty, Scalar::Int(0), loc);
        let is_ninf = mx.compare(&ninf, Comparison::Eq);
        let shift = b.select(&is_ninf, &zero, &mx);
        let e = self.binary(BinaryOp::Subtract, &shift, loc).exp();
        let lse = e
            .sum(&[axis], true)
            .log()
            .binary(BinaryOp::Add, &shift, loc);
        if keepdims { lse } else { lse.squeeze(&[axis]) }
    }

    /// `exp(x) / sum(exp(x))` along `axis`, computed stably.
    #[track_caller]
    pub fn softmax(&self, axis: i64) -> Op {
        let loc = Location::caller();
        let z = self
            .binary(BinaryOp::Subtract, &self.amax(&[axis], true), loc)
            .exp();
        z.binary(BinaryOp::Divide, &z.sum(&[axis], true), loc)
    }

    /// `x - logsumexp(x)` along `axis`.
    #[track_caller]
    pub fn log_softmax(&self, axis: i64) -> Op {
        let loc = Location::caller();
        self.binary(BinaryOp::Subtract, &self.logsumexp(axis, true), loc)
    }

    /// One-hot vectors: for integer indices `[...]`, an array `[..., n]` of `ty` with
    /// 1 where the last axis equals the index (indices outside `0..n` give zeros).
    #[track_caller]
    pub fn one_hot(&self, n: i64, ty: ElementType) -> Op {
        let loc = Location::caller();
        let s = match self.array_shape("one_hot", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let ity = s.element_type().expect("an array");
        if !ity.is_integer() {
            return fail(
                self,
                "one_hot",
                &[&s],
                ShapeErrorKind::ElementType,
                format!("indices must be integers, got {ity}"),
                loc,
            );
        }
        let mut dims = s.dims().to_vec();
        dims.push(n);
        let b = self.builder();
        let classes = b.iota(ity, &dims, -1);
        let bd: Vec<i64> = (0..s.rank() as i64).collect();
        let idx = self.broadcast_in_dim(&dims, &bd);
        classes
            .on(loc)
            .compare(&idx, Comparison::Eq)
            .on(loc)
            .convert(ty)
    }

    /// Each element limited to `[lo, hi]` (numpy's `clip`): XLA's `clamp` with Rust
    /// numbers as bounds, which take this op's element type (an error if they do
    /// not fit it, as for `&x + 2.5` on integers). See [`Op::clamp`].
    #[track_caller]
    pub fn clip(&self, lo: impl Into<Scalar>, hi: impl Into<Scalar>) -> Op {
        let loc = Location::caller();
        let ty = match self.element_type() {
            Ok(ty) => ty,
            Err(_) => return self.builder().fail_not_array(self, "clamp", loc),
        };
        let b = self.builder();
        let lo = b.scalar_of(ty, lo.into(), loc);
        let hi = b.scalar_of(ty, hi.into(), loc);
        self.clamp(&lo, &hi)
    }

    /// `x * x`.
    #[track_caller]
    pub fn square(&self) -> Op {
        self.binary(BinaryOp::Multiply, self, Location::caller())
    }

    /// Removes the size-1 `axes` (numpy's `squeeze`).
    #[track_caller]
    pub fn squeeze(&self, axes: &[i64]) -> Op {
        let loc = Location::caller();
        let s = match self.array_shape("reshape", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let axes = match resolve_axes("reshape", &s, axes) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        if let Some(a) = axes.iter().find(|a| s.dims()[**a] != 1) {
            return fail(
                self,
                "reshape",
                &[&s],
                ShapeErrorKind::Dimension,
                format!("squeezed axis {a} has size {}", s.dims()[*a]),
                loc,
            );
        }
        let dims: Vec<i64> = (0..s.rank())
            .filter(|i| !axes.contains(i))
            .map(|i| s.dims()[i])
            .collect();
        self.reshape(&dims)
    }

    /// Inserts a size-1 axis at `axis` of the result (negative counts from the end
    /// of the result, as numpy's `expand_dims`).
    #[track_caller]
    pub fn expand_dims(&self, axis: i64) -> Op {
        let loc = Location::caller();
        let s = match self.array_shape("reshape", loc) {
            Ok(s) => s,
            Err(f) => return f,
        };
        let out = Shape::array(s.element_type().expect("an array"), &vec![1; s.rank() + 1]);
        let a = match resolve_axis("reshape", &out, axis) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let mut dims = s.dims().to_vec();
        dims.insert(a, 1);
        self.reshape(&dims)
    }

    /// Splits along `axis` into pieces of the given `sizes` (which must add up to the
    /// axis's size).
    #[track_caller]
    pub fn split(&self, sizes: &[i64], axis: i64) -> Vec<Op> {
        let loc = Location::caller();
        let s = match self.array_shape("slice", loc) {
            Ok(s) => s,
            Err(f) => return vec![f; sizes.len().max(1)],
        };
        let a = match resolve_axis("slice", &s, axis) {
            Ok(a) => a,
            Err(e) => return vec![self.builder().fail(e, loc); sizes.len().max(1)],
        };
        if sizes.iter().any(|z| *z < 0) || sizes.iter().sum::<i64>() != s.dims()[a] {
            let f = fail(
                self,
                "slice",
                &[&s],
                ShapeErrorKind::Dimension,
                format!(
                    "split sizes {sizes:?} do not add up to axis {a}'s {}",
                    s.dims()[a]
                ),
                loc,
            );
            return vec![f; sizes.len().max(1)];
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|z| {
                let mut st = vec![0; s.rank()];
                let mut lim = s.dims().to_vec();
                st[a] = start;
                lim[a] = start + z;
                start += z;
                self.on(loc).slice(&st, &lim, &vec![1; s.rank()])
            })
            .collect()
    }
}

impl Builder {
    /// Joins arrays of one shape along a new axis `axis` (numpy's `stack`).
    #[track_caller]
    pub fn stack(&self, ops: &[&Op], axis: i64) -> Op {
        let loc = Location::caller();
        let expanded: Vec<Op> = ops
            .iter()
            .map(|o| {
                let Ok(s) = o.shape() else {
                    return (*o).clone();
                };
                let out = Shape::array(
                    s.element_type().unwrap_or(ElementType::F32),
                    &vec![1; s.rank() + 1],
                );
                match resolve_axis("concatenate", &out, axis) {
                    Ok(a) => {
                        let mut d = s.dims().to_vec();
                        d.insert(a.min(d.len()), 1);
                        o.on(loc).reshape(&d)
                    }
                    Err(e) => self.fail(e, loc),
                }
            })
            .collect();
        let refs: Vec<&Op> = expanded.iter().collect();
        let a = ops
            .first()
            .and_then(|o| o.rank().ok())
            .map_or(axis, |r| if axis < 0 { axis + r as i64 + 1 } else { axis });
        self.concatenate(&refs, a)
    }

    /// `start, start + step, …` below `stop` as a rank-1 array of `ty` (numpy's
    /// `arange`).
    #[track_caller]
    pub fn arange(&self, start: f64, stop: f64, step: f64, ty: ElementType) -> Op {
        let loc = Location::caller();
        if step == 0.0 || !start.is_finite() || !stop.is_finite() || !step.is_finite() {
            return self.fail(
                ShapeError::new(
                    "iota",
                    &[],
                    ShapeErrorKind::Attribute,
                    format!("arange({start}, {stop}, {step})"),
                ),
                loc,
            );
        }
        let n = ((stop - start) / step).ceil().max(0.0) as i64;
        let i = self.iota(ty, &[n], 0);
        i.binary_scalar(BinaryOp::Multiply, Scalar::Float(step), false, loc)
            .binary_scalar(BinaryOp::Add, Scalar::Float(start), false, loc)
    }

    /// An array of `ty` and `dims` holding `value` everywhere.
    #[track_caller]
    pub fn full(&self, ty: ElementType, dims: &[i64], value: f64) -> Op {
        let loc = Location::caller();
        self.scalar_of(ty, Scalar::Float(value), loc)
            .on(loc)
            .broadcast_to(dims)
    }

    /// Zeros of `ty` and `dims`.
    #[track_caller]
    pub fn zeros(&self, ty: ElementType, dims: &[i64]) -> Op {
        let loc = Location::caller();
        self.scalar_of(ty, Scalar::Int(0), loc)
            .on(loc)
            .broadcast_to(dims)
    }

    /// Ones of `ty` and `dims`.
    #[track_caller]
    pub fn ones(&self, ty: ElementType, dims: &[i64]) -> Op {
        let loc = Location::caller();
        self.scalar_of(ty, Scalar::Int(1), loc)
            .on(loc)
            .broadcast_to(dims)
    }

    /// `jnp.where(cond, x, y)`: `x` where `cond` holds, else `y`, with numpy
    /// broadcasting of the three (`cond` is `pred`; `x` and `y` of one type).
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// let b = Builder::new("w");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2, 3]), "x");
    /// let y = b.where_(&x.compare(&b.constant(0f32), Comparison::Gt), &x, &b.constant(0f32));
    /// assert_eq!(y.dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn where_(&self, cond: &Op, x: &Op, y: &Op) -> Op {
        self.select(cond, x, y)
    }

    /// Two-operand `einsum` (`"bij,bjk->bik"`): each letter names an axis; letters in
    /// both inputs and the output are batch axes, in both inputs only contracted, and
    /// in one input and the output free. Letters summed within one input, repeated
    /// letters and ellipses are not supported (an error says so).
    #[track_caller]
    pub fn einsum(&self, spec: &str, lhs: &Op, rhs: &Op) -> Op {
        let loc = Location::caller();
        let bad = |r: String| {
            self.fail(
                ShapeError::new(
                    "dot_general",
                    &[],
                    ShapeErrorKind::Attribute,
                    format!("einsum `{spec}`: {r}"),
                ),
                loc,
            )
        };
        let Some((ins, out)) = spec.split_once("->") else {
            return bad("needs an explicit output (`->`)".into());
        };
        let Some((l, r)) = ins.split_once(',') else {
            return bad("needs two inputs".into());
        };
        let (l, r, out): (Vec<char>, Vec<char>, Vec<char>) = (
            l.trim().chars().collect(),
            r.trim().chars().collect(),
            out.trim().chars().collect(),
        );
        let unique = |v: &[char]| {
            v.iter()
                .enumerate()
                .all(|(i, c)| c.is_ascii_alphabetic() && !v[..i].contains(c))
        };
        if !unique(&l) || !unique(&r) || !unique(&out) {
            return bad("each side must name distinct letters (no repeats, no ellipsis)".into());
        }
        if out.iter().any(|c| !l.contains(c) && !r.contains(c))
            || l.iter()
                .chain(&r)
                .any(|c| !(out.contains(c) || (l.contains(c) && r.contains(c))))
        {
            return bad("every output letter must come from an input, and a letter dropped from the output must be in both inputs".into());
        }
        let pos = |v: &[char], c: &char| v.iter().position(|x| x == c).expect("present") as i64;
        let batch: Vec<char> = out
            .iter()
            .copied()
            .filter(|c| l.contains(c) && r.contains(c))
            .collect();
        let contract: Vec<char> = l
            .iter()
            .copied()
            .filter(|c| r.contains(c) && !out.contains(c))
            .collect();
        let dims = DotDims {
            lhs_contracting: contract.iter().map(|c| pos(&l, c)).collect(),
            rhs_contracting: contract.iter().map(|c| pos(&r, c)).collect(),
            lhs_batch: batch.iter().map(|c| pos(&l, c)).collect(),
            rhs_batch: batch.iter().map(|c| pos(&r, c)).collect(),
        };
        let d = lhs.dot_general_with(rhs, &dims, super::linalg::DotOptions::new());
        // dot_general's order: batch, lhs free, rhs free.
        let order: Vec<char> = batch
            .iter()
            .copied()
            .chain(l.iter().copied().filter(|c| !r.contains(c)))
            .chain(r.iter().copied().filter(|c| !l.contains(c)))
            .collect();
        let perm: Vec<i64> = out.iter().map(|c| pos(&order, c)).collect();
        if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
            d
        } else {
            d.on(loc).transpose(&perm)
        }
    }
}

// ---------------------------------------------------------------------------------
// `jnp.pad`'s modes

/// How [`Op::pad_mode`] fills the new elements (numpy's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Repeats the edge element (`"edge"`).
    Edge,
    /// Mirrors about the edge element, which is not repeated (`"reflect"`:
    /// `[1, 2, 3]` padded by 2 before is `[3, 2, 1, 2, 3]`).
    Reflect,
    /// Mirrors including the edge element (`"symmetric"`: `[2, 1, 1, 2, 3]`).
    Symmetric,
    /// Continues from the other end (`"wrap"`: `[2, 3, 1, 2, 3]`).
    Wrap,
}

impl Op {
    /// `jnp.pad(x, widths, mode)` for the modes that copy the array's own
    /// elements: `widths[i]` = (before, after) for axis `i`, each at most the
    /// axis's length (one less for `Reflect`); zeros (constant padding) is
    /// [`pad`](Op::pad). Widths that do not fit (or a count other than the rank)
    /// are a shape error naming the axis.
    ///
    /// ```
    /// use xlaclient_core::{Builder, PadMode, Shape};
    /// let b = Builder::new("pad");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3, 4]), "x");
    /// assert_eq!(x.pad_mode(&[(2, 1), (0, 3)], PadMode::Reflect).dims()?, vec![6, 7]);
    /// assert!(x.pad_mode(&[(3, 0), (0, 0)], PadMode::Reflect).dims().is_err());
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn pad_mode(&self, widths: &[(i64, i64)], mode: PadMode) -> Op {
        let loc = Location::caller();
        let b = self.builder();
        let s = match self.shape() {
            Ok(s) if s.is_array() => s,
            _ => return b.fail_not_array(self, "pad", loc),
        };
        let bad = |reason: String| {
            b.fail(
                ShapeError::new("pad", &[&s], ShapeErrorKind::Attribute, reason),
                loc,
            )
        };
        if widths.len() != s.rank() {
            return bad(format!(
                "{} (before, after) widths for an array of rank {}",
                widths.len(),
                s.rank()
            ));
        }
        let mut x = self.clone();
        for (axis, (&(lo, hi), &n)) in widths.iter().zip(s.dims()).enumerate() {
            let room = if mode == PadMode::Reflect { n - 1 } else { n };
            if lo < 0 || hi < 0 || lo.max(hi) > room.max(0) {
                return bad(format!(
                    "widths ({lo}, {hi}) on axis {axis} of {n} elements: {mode:?} takes 0 to {} on each side",
                    room.max(0)
                ));
            }
            if lo == 0 && hi == 0 {
                continue;
            }
            let a = axis as i64;
            let part = |start: i64, limit: i64| x.on(loc).slice_in_dim(start, limit, 1, a);
            let flip = |o: Op| o.on(loc).reverse(&[a]);
            let (before, after) = match mode {
                PadMode::Edge => {
                    // The array as padded so far (earlier axes grown).
                    let now = x.dims().unwrap_or_else(|_| s.dims().to_vec());
                    let edge = |e: Op, k: i64| {
                        let mut d = now.clone();
                        d[axis] = k;
                        e.on(loc).broadcast_to(&d)
                    };
                    (edge(part(0, 1), lo), edge(part(n - 1, n), hi))
                }
                PadMode::Reflect => (flip(part(1, lo + 1)), flip(part(n - 1 - hi, n - 1))),
                PadMode::Symmetric => (flip(part(0, lo)), flip(part(n - hi, n))),
                PadMode::Wrap => (part(n - lo, n), part(0, hi)),
            };
            x = b.on(loc).concatenate(&[&before, &x, &after], a);
        }
        x
    }
}
