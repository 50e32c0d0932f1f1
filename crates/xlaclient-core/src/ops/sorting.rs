//! Sorting: XLA's `sort` of several arrays together along one axis, ordered by a
//! comparator built from a Rust closure (which may use outside scalars), and
//! `top_k` on top of it (the `k` largest along the last axis, with their indices).
use super::{array_of, check_axis, resolve_axis};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::ops::bitwise::BitwiseOp;
use crate::ops::elementwise::{Comparison, Scalar};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;

// ---------------------------------------------------------------------------------
// `sort`

/// Sort rule: one or more arrays of equal dimensions, `dimension` in range; the
/// comparator (when given: its parameter shapes and result) takes two scalars per
/// operand, `(lhs_0, rhs_0, lhs_1, rhs_1, …)`, and returns a `pred` scalar. The
/// result is the operands' shapes: one array, or a tuple of them.
pub fn infer_sort(
    operands: &[&Shape],
    dimension: i64,
    comparator: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "sort";
    let Some(first) = operands.first() else {
        return Err(ShapeError::new(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "needs at least one operand",
        ));
    };
    let (_, dims) = array_of(OP, first)?;
    let mut types = Vec::with_capacity(operands.len());
    for s in operands {
        let (t, d) = array_of(OP, s)?;
        if d != dims {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "all operands must have the same dimensions",
            ));
        }
        types.push(t);
    }
    check_axis(OP, first, dimension)?;
    if let Some((params, result)) = comparator {
        let want: Vec<Shape> = types
            .iter()
            .flat_map(|t| [Shape::scalar(*t), Shape::scalar(*t)])
            .collect();
        if *params != want || *result != Shape::scalar(ElementType::Pred) {
            return Err(ShapeError::new(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!(
                    "the comparator must map ({}) to pred[]; it maps ({}) to {result}",
                    want.iter()
                        .map(Shape::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    params
                        .iter()
                        .map(Shape::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(if operands.len() == 1 {
        (*first).clone()
    } else {
        Shape::Tuple(operands.iter().map(|s| (*s).clone()).collect())
    })
}

pub(crate) fn shape_sort(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Sort {
        dimension,
        comparator,
        ..
    } = kind
    else {
        return Err(super::table::not_for("sort", kind));
    };
    infer_sort(cx.operands, *dimension, cx.signature(*comparator).as_ref())
}

pub(crate) fn lower_sort(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Sort {
        dimension,
        stable,
        comparator,
    } = kind
    {
        p.dimensions = vec![*dimension];
        p.is_stable = *stable;
        p.called_computation_ids = vec![(cx.comp_id)(*comparator)];
    }
}

pub(crate) fn raise_sort(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [comparator] = cx.calls(p)?;
    Ok(OpKind::Sort {
        dimension: cx.one_dimension(p)?,
        stable: p.is_stable,
        comparator,
    })
}

pub(crate) fn text_sort(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Sort {
        dimension,
        stable,
        comparator,
    } = kind
    {
        out.list("dimensions", &[*dimension]);
        if *stable {
            out.attr("is_stable", true);
        }
        out.callee(cx, "to_apply", *comparator);
    }
}

impl Builder {
    /// XLA's Sort: sorts `operands` (arrays of equal dimensions) together along
    /// `axis`, in the order `less(lhs, rhs)` defines on one element of each operand
    /// (`lhs[i]`, `rhs[i]` are operand `i`'s two elements being compared). `stable`
    /// keeps equal elements in their order. Returns the sorted operands. The
    /// comparator may use scalar values from outside it.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Comparison, Shape};
    /// // Sort values and carry their indices along (an argsort).
    /// let b = Builder::new("argsort");
    /// let x = b.parameter(0, Shape::of::<f32>(&[5]), "x");
    /// let idx = b.iota(xlaclient_core::ElementType::S32, &[5], 0);
    /// let out = b.sort(&[&x, &idx], 0, true, |l, r| l[0].compare(&r[0], Comparison::Lt));
    /// assert_eq!(out[1].dims()?, vec![5]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn sort(
        &self,
        operands: &[&Op],
        axis: i64,
        stable: bool,
        less: impl FnOnce(&[Op], &[Op]) -> Op,
    ) -> Vec<Op> {
        let loc = Location::caller();
        let n = operands.len().max(1);
        let failed = |op: Op| vec![op; n];
        let target = match self.target(operands, "sort", loc) {
            Ok(t) => t,
            Err(f) => return failed(f),
        };
        let shapes: Vec<Shape> = operands
            .iter()
            .map(|o| o.shape().expect("checked"))
            .collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        // A negative axis counts from the end; the instruction holds it resolved.
        let axis = match shapes.first().filter(|s| s.is_array()) {
            Some(s) => match resolve_axis("sort", s, axis) {
                Ok(a) => a as i64,
                Err(e) => return failed(self.fail(e, loc)),
            },
            None => axis,
        };
        if let Err(e) = infer_sort(&refs, axis, None) {
            return failed(self.fail(e, loc));
        }
        let n = operands.len();
        let types: Vec<ElementType> = shapes
            .iter()
            .map(|s| s.element_type().expect("checked"))
            .collect();
        let params: Vec<Shape> = types
            .iter()
            .flat_map(|t| [Shape::scalar(*t), Shape::scalar(*t)])
            .collect();
        let (comp, roots) = match self.body(target, "compare", &params, loc, |_, p| {
            let lhs: Vec<Op> = p.iter().step_by(2).cloned().collect();
            let rhs: Vec<Op> = p.iter().skip(1).step_by(2).cloned().collect();
            vec![less(&lhs, &rhs)]
        }) {
            Ok(r) => r,
            Err(f) => return failed(f),
        };
        // Captured scalars travel as extra operands whose every element is the value
        // (sorting permutes equal elements): the comparator gets them as one more
        // (lhs, rhs) pair each.
        let captures = match self.scalar_captures(comp, target, "sort", loc) {
            Ok(c) => c,
            Err(f) => return failed(f),
        };
        if !captures.is_empty() {
            // Each captured scalar is one more sorted operand: an (lhs, rhs) pair.
            let (decl, caps, partners) = self.pair_captures(comp, 2 * n);
            let pairs: Vec<u32> = caps
                .iter()
                .zip(&partners)
                .flat_map(|(c, p)| [*c, *p])
                .collect();
            self.order_params(comp, [decl, pairs].concat());
        }
        if let Err(f) = self.finish_body(comp, &roots, loc) {
            return failed(f);
        }
        let dims = shapes[0].dims().to_vec();
        let caps: Vec<Op> = captures.iter().map(|c| self.op(target, *c)).collect();
        let spread: Vec<Op> = caps.iter().map(|c| c.on(loc).broadcast_to(&dims)).collect();
        let all: Vec<&Op> = operands.iter().copied().chain(&spread).collect();
        let r = self.emit(
            OpKind::Sort {
                dimension: axis,
                stable,
                comparator: comp,
            },
            &all,
            None,
            loc,
        );
        self.results(r, n, all.len() > 1)
    }
}

impl Op {
    /// Sorts along `axis` in ascending order (NaNs last for floats, as XLA's
    /// total order puts them), stable.
    #[track_caller]
    pub fn sort_ascending(&self, axis: i64) -> Op {
        let loc = Location::caller();
        let b = self.builder();
        let mut out = b.sort(&[self], axis, true, |l, r| {
            let ty = l[0].element_type().unwrap_or(ElementType::F32);
            if ty.is_float() {
                // a < b, or b is NaN and a is not: NaNs sort last.
                let lt = l[0].on(loc).compare(&r[0], Comparison::Lt);
                let r_nan = r[0].on(loc).compare(&r[0], Comparison::Ne);
                let l_num = l[0].on(loc).compare(&l[0], Comparison::Eq);
                l[0].builder().on(loc).select(&r_nan, &l_num, &lt)
            } else {
                l[0].on(loc).compare(&r[0], Comparison::Lt)
            }
        });
        out.pop().expect("one result")
    }
}

/// Sort (see `sort_cts`).
pub(crate) fn vjp_sort(n: &Node) -> Grads {
    let OpKind::Sort {
        dimension,
        stable,
        comparator,
    } = n.kind
    else {
        return Err("not a sort".into());
    };
    Ok(arrays(sort_cts(
        *dimension,
        *stable,
        *comparator,
        n,
        &n.array_cts(),
    )))
}

/// Sort: the operands are sorted again with their positions alongside (the same
/// comparator, stable as the forward), which gives the permutation; each
/// cotangent goes back to where its element came from by sorting it by that
/// permutation (its inverse).
fn sort_cts(
    dimension: i64,
    stable: bool,
    comparator: crate::ir::CompId,
    n: &crate::autodiff::Node,
    cts: &[Option<Op>],
) -> Vec<Option<Op>> {
    let b = n.b;
    let dims = n.operands[0].dims().unwrap_or_default();
    let k = n.operands.len();
    let iota = b.iota(ElementType::S32, &dims, dimension);
    let with_pos: Vec<&Op> = n.operands.iter().chain([&iota]).collect();
    let sorted = b.sort(&with_pos, dimension, stable, |l, r| {
        let bb = l[0].builder();
        let pairs: Vec<Op> = (0..k).flat_map(|i| [l[i].clone(), r[i].clone()]).collect();
        crate::autodiff::inline(&bb, comparator, &pairs).swap_remove(0)
    });
    let perm = &sorted[k];
    let with_ct: Vec<usize> = (0..k)
        .filter(|i| cts.get(*i).is_some_and(|c| c.is_some()))
        .collect();
    let mut back: Vec<&Op> = vec![perm];
    back.extend(with_ct.iter().map(|i| cts[*i].as_ref().expect("filtered")));
    let restored = b.sort(&back, dimension, false, |l, r| {
        l[0].compare(&r[0], crate::Comparison::Lt)
    });
    let mut out = vec![None; k];
    for (j, i) in with_ct.iter().enumerate() {
        out[*i] = Some(restored[j + 1].clone());
    }
    out
}

#[cfg(test)]
mod sort_tests {
    use super::*;

    #[test]
    fn sort_rule() {
        let x = Shape::of::<f32>(&[2, 3]);
        let i = Shape::of::<i32>(&[2, 3]);
        assert_eq!(infer_sort(&[&x], 1, None).unwrap(), x);
        assert_eq!(
            infer_sort(&[&x, &i], 1, None).unwrap(),
            Shape::Tuple(vec![x.clone(), i.clone()])
        );
        // The instruction's dimension is resolved (`sort` resolves a negative one).
        assert!(infer_sort(&[&x, &i], -1, None).is_err());
        assert!(infer_sort(&[&x, &Shape::of::<i32>(&[3, 2])], 0, None).is_err());
        assert!(infer_sort(&[&x], 2, None).is_err());
        let f = Shape::of::<f32>(&[]);
        let bad = (vec![f.clone(), f.clone()], f.clone());
        assert_eq!(
            infer_sort(&[&x], 0, Some(&bad)).unwrap_err().kind,
            ShapeErrorKind::Body
        );
    }
}

// ---------------------------------------------------------------------------------
// `top_k` (a sort)

/// Top-k rule (`jax.lax.top_k`'s): an array of rank 1 or more of an ordered (not
/// complex) element type, `0 <= k <=` the size of the last axis, which `s32` indices
/// must be able to count. The results are `(values, indices)`: the operand's shape
/// with the last axis `k` long, and the same dimensions in `s32`.
pub fn infer_top_k(operand: &Shape, k: i64) -> Result<(Shape, Shape), ShapeError> {
    const OP: &str = "top_k";
    let (ty, dims) = array_of(OP, operand)?;
    let Some(&n) = dims.last() else {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Rank,
            "needs an operand of rank 1 or more (it works along the last axis)",
        ));
    };
    if ty.is_complex() {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::ElementType,
            format!("complex numbers have no order, got {ty}"),
        ));
    }
    if k < 0 || k > n {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Attribute,
            format!("k = {k} must lie in 0..={n} (the size of the last axis)"),
        ));
    }
    if n > i64::from(i32::MAX) + 1 {
        return Err(ShapeError::new(
            OP,
            &[operand],
            ShapeErrorKind::Dimension,
            format!("the last axis ({n}) is too long for s32 indices"),
        ));
    }
    let mut out = dims.to_vec();
    *out.last_mut().expect("rank >= 1") = k;
    Ok((Shape::array(ty, &out), Shape::array(ElementType::S32, &out)))
}

impl Op {
    /// The `k` largest elements along the last axis, largest first, and their
    /// indices (`s32`), as `jax.lax.top_k`: equal elements come in index order, and
    /// floats are ordered totally (NaN above +inf, +0 above -0, NaNs with the sign
    /// bit set below -inf). Returns `(values, indices)`.
    ///
    /// Built as a stable sort of the values (descending, in that total order) with
    /// an iota of indices, then a slice: XLA's `topk` op, which JAX emits, breaks
    /// ties in no fixed order on the CPU plugin of PJRT C API 0.115 (it sorts
    /// unstably), and the sort gives the same answer on every plugin.
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType, Shape};
    /// let b = Builder::new("topk");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 10]), "x");
    /// let (values, indices) = x.top_k(3);
    /// assert_eq!(values.dims()?, vec![4, 3]);
    /// assert_eq!(indices.element_type()?, ElementType::S32);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn top_k(&self, k: i64) -> (Op, Op) {
        let loc = Location::caller();
        let b = self.builder();
        let s = match self.shape() {
            Ok(s) => s,
            Err(_) => return (self.clone(), self.clone()),
        };
        let (values, _) = match infer_top_k(&s, k) {
            Ok(r) => r,
            Err(e) => {
                let f = b.fail(e, loc);
                return (f.clone(), f);
            }
        };
        let dims = s.dims().to_vec();
        let axis = dims.len() - 1;
        let idx = b.iota(ElementType::S32, &dims, axis as i64);
        let sorted = b.sort(&[self, &idx], axis as i64, true, |l, r| {
            total_order_key(&l[0], loc)
                .on(loc)
                .compare(&total_order_key(&r[0], loc), Comparison::Gt)
        });
        let start = vec![0; dims.len()];
        let strides = vec![1; dims.len()];
        let limit = values.dims().to_vec();
        (
            sorted[0].on(loc).slice(&start, &limit, &strides),
            sorted[1].on(loc).slice(&start, &limit, &strides),
        )
    }
}

/// A value whose order is the IEEE total order of float `x` (XLA's TOTALORDER
/// comparison, which `jax.lax.top_k` and `jnp.sort` use): its bits as a signed
/// integer, with all but the sign bit flipped where the sign bit is set. `x` itself
/// for other element types.
fn total_order_key(x: &Op, loc: &'static Location<'static>) -> Op {
    let ty = x.element_type().unwrap_or(ElementType::S32);
    let (ity, max) = match ty {
        ElementType::F16 | ElementType::Bf16 => (ElementType::S16, i64::from(i16::MAX)),
        ElementType::F32 => (ElementType::S32, i64::from(i32::MAX)),
        ElementType::F64 => (ElementType::S64, i64::MAX),
        _ => return x.clone(),
    };
    let b = x.builder();
    let bits = x.on(loc).bitcast_convert(ity);
    let zero = b.scalar_of(ity, Scalar::Int(0), loc);
    let mask = b.scalar_of(ity, Scalar::Int(max), loc);
    let negative = bits.on(loc).compare(&zero, Comparison::Lt);
    let flipped = bits.bitwise(BitwiseOp::Xor, &mask, loc);
    b.on(loc).select(&negative, &flipped, &bits)
}

#[cfg(test)]
mod top_k_tests {
    use super::*;

    #[test]
    fn top_k_rule() {
        let x = Shape::of::<f32>(&[2, 5]);
        assert_eq!(
            infer_top_k(&x, 3).unwrap(),
            (Shape::of::<f32>(&[2, 3]), Shape::of::<i32>(&[2, 3]))
        );
        assert!(infer_top_k(&x, 0).is_ok());
        assert!(infer_top_k(&x, 5).is_ok());
        let e = infer_top_k(&x, 6).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::Attribute);
        assert!(e.reason.contains("0..=5"), "{e}");
        assert_eq!(
            infer_top_k(&x, -1).unwrap_err().kind,
            ShapeErrorKind::Attribute
        );
        assert_eq!(
            infer_top_k(&Shape::of::<f32>(&[]), 0).unwrap_err().kind,
            ShapeErrorKind::Rank
        );
        let c = Shape::array(ElementType::C64, &[4]);
        assert_eq!(
            infer_top_k(&c, 1).unwrap_err().kind,
            ShapeErrorKind::ElementType
        );
        let long = Shape::of::<u8>(&[1 << 32]);
        assert_eq!(
            infer_top_k(&long, 1).unwrap_err().kind,
            ShapeErrorKind::Dimension
        );
        assert!(infer_top_k(&Shape::of::<u8>(&[1 << 31]), 1).is_ok());
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: every operand batched at axis 0, sorted along the axis one on.
pub(crate) fn batch_sort(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Sort {
        dimension,
        stable,
        comparator,
    } = n.kind
    else {
        return Err("not a sort".into());
    };
    crate::batching::shifted(
        n,
        OpKind::Sort {
            dimension: dimension + 1,
            stable: *stable,
            comparator: *comparator,
        },
    )
}

/// Tangent: the permutation the sort applies (an iota sorted along with the
/// operands by the same comparator, stably), and each tangent gathered along it.
pub(crate) fn jvp_sort(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::Sort {
        dimension,
        comparator,
        ..
    } = n.kind
    else {
        return Err("not a sort".into());
    };
    let k = n.operands.len();
    let dims = n.operands[0].dims().map_err(|e| e.to_string())?;
    let iota = n.b.iota(ElementType::S32, &dims, *dimension);
    let mut ops: Vec<&Op> = n.operands.iter().collect();
    ops.push(&iota);
    let mut err = None;
    let sorted = n.b.sort(&ops, *dimension, true, |l, r| {
        let args: Vec<Op> = (0..k).flat_map(|j| [l[j].clone(), r[j].clone()]).collect();
        let bb = l[0].builder();
        match crate::forward::inline(&bb, *comparator, &args) {
            Ok(o) => o,
            Err(e) => {
                err = Some(e.clone());
                bb.error(e)
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let perm = &sorted[k];
    if let Some(e) = crate::batching::failure(perm) {
        return Err(e);
    }
    Ok((0..k)
        .map(|j| {
            let float = n.operands[j]
                .element_type()
                .is_ok_and(crate::autodiff::differentiable);
            (float && n.has(j))
                .then(|| crate::autodiff::Ct::Array(n.tangent(j).take_along_axis(perm, *dimension)))
        })
        .collect())
}
