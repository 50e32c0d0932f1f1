//! Indexing: XLA's `gather` and `scatter` with their dimension numbers, and numpy's
//! `take` along an axis on top.
use super::{array_of, resolve_axis};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::fmt::Write;
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Shared checks of dimension numbers

fn bad(op: &'static str, s: &[&Shape], k: ShapeErrorKind, r: String) -> ShapeError {
    ShapeError::new(op, s, k, r)
}

/// Checks a list of distinct axes in `0..rank`, increasing when `sorted`.
fn axes_ok(
    op: &'static str,
    s: &[&Shape],
    what: &str,
    v: &[i64],
    rank: usize,
    sorted: bool,
) -> Result<(), ShapeError> {
    for (i, a) in v.iter().enumerate() {
        if *a < 0 || *a as usize >= rank {
            return Err(bad(
                op,
                s,
                ShapeErrorKind::Axis,
                format!("{what} {v:?}: axis {a} is out of range for rank {rank}"),
            ));
        }
        if v[..i].contains(a) || (sorted && i > 0 && v[i - 1] > *a) {
            return Err(bad(
                op,
                s,
                ShapeErrorKind::Attribute,
                format!(
                    "{what} {v:?} must be distinct{}",
                    if sorted { " and increasing" } else { "" }
                ),
            ));
        }
    }
    Ok(())
}

/// The batch dimensions of indices (all but `index_vector_dim`) and the index vector
/// length.
fn index_parts(
    op: &'static str,
    s: &[&Shape],
    indices: &Shape,
    ivd: i64,
) -> Result<(Vec<i64>, i64), ShapeError> {
    let (it, id) = array_of(op, indices)?;
    if !it.is_integer() {
        return Err(bad(
            op,
            s,
            ShapeErrorKind::ElementType,
            format!("indices must be integers, got {it}"),
        ));
    }
    if ivd < 0 || ivd as usize > id.len() {
        return Err(bad(
            op,
            s,
            ShapeErrorKind::Axis,
            format!(
                "index_vector_dim {ivd} is out of range for indices of rank {}",
                id.len()
            ),
        ));
    }
    let ivd = ivd as usize;
    let len = if ivd == id.len() { 1 } else { id[ivd] };
    let batch = id
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != ivd)
        .map(|(_, d)| *d)
        .collect();
    Ok((batch, len))
}

/// Checks batching axes: `operand_batch` distinct and increasing operand axes, none
/// in `taken` (the collapsed/inserted axes and the index map), `index_batch` distinct
/// indices axes other than `ivd`, pairwise of equal sizes.
#[allow(clippy::too_many_arguments)]
fn batching_ok(
    op: &'static str,
    s: &[&Shape],
    names: [&str; 2],
    operand_batch: &[i64],
    index_batch: &[i64],
    od: &[i64],
    indices: &Shape,
    ivd: i64,
    taken: &[(&str, &[i64])],
) -> Result<(), ShapeError> {
    axes_ok(op, s, names[0], operand_batch, od.len(), true)?;
    let id = indices.dims();
    axes_ok(op, s, names[1], index_batch, id.len(), false)?;
    if operand_batch.len() != index_batch.len() {
        return Err(bad(
            op,
            s,
            ShapeErrorKind::Attribute,
            format!(
                "{} {operand_batch:?} and {} {index_batch:?} must pair up (equal lengths)",
                names[0], names[1]
            ),
        ));
    }
    for a in operand_batch {
        if let Some((what, _)) = taken.iter().find(|(_, v)| v.contains(a)) {
            return Err(bad(
                op,
                s,
                ShapeErrorKind::Attribute,
                format!("operand axis {a} is in both {} and {what}", names[0]),
            ));
        }
    }
    for (o, i) in operand_batch.iter().zip(index_batch) {
        if *i == ivd {
            return Err(bad(
                op,
                s,
                ShapeErrorKind::Attribute,
                format!("{} {index_batch:?} names index_vector_dim {ivd}", names[1]),
            ));
        }
        if od[*o as usize] != id[*i as usize] {
            return Err(bad(
                op,
                s,
                ShapeErrorKind::Dimension,
                format!(
                    "batch axes differ in size: operand axis {o} is {}, indices axis {i} is {}",
                    od[*o as usize], id[*i as usize]
                ),
            ));
        }
    }
    Ok(())
}

fn list(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("{{{}}}", parts.join(","))
}

type Loc = &'static Location<'static>;

// ---------------------------------------------------------------------------------
// `gather` (and numpy's `take` on it): attributes, rule, table slots, methods, gradient, tests

pub use crate::ir::attrs::{GatherAttrs, GatherDims};

/// Gather rule (XLA's semantics): the output's rank is the indices' batch rank plus
/// the number of offset axes; the offset axes (at `offset_dims`) take the slice
/// sizes of the uncollapsed operand axes, the other axes the indices' batch sizes.
/// A collapsed axis has slice size 1.
pub fn infer_gather(
    operand: &Shape,
    indices: &Shape,
    a: &GatherAttrs,
) -> Result<Shape, ShapeError> {
    const OP: &str = "gather";
    let s = [operand, indices];
    let (ty, od) = array_of(OP, operand)?;
    let d = &a.dims;
    let (batch, len) = index_parts(OP, &s, indices, d.index_vector_dim)?;
    if len != d.start_index_map.len() as i64 {
        return Err(bad(
            OP,
            &s,
            ShapeErrorKind::Dimension,
            format!(
                "index vectors have {len} entries, start_index_map {:?} names {}",
                d.start_index_map,
                d.start_index_map.len()
            ),
        ));
    }
    axes_ok(
        OP,
        &s,
        "start_index_map",
        &d.start_index_map,
        od.len(),
        false,
    )?;
    axes_ok(
        OP,
        &s,
        "collapsed_slice_dims",
        &d.collapsed_slice_dims,
        od.len(),
        true,
    )?;
    if a.slice_sizes.len() != od.len() {
        return Err(bad(
            OP,
            &s,
            ShapeErrorKind::Attribute,
            format!(
                "slice_sizes {:?} needs one entry per operand axis ({})",
                a.slice_sizes,
                od.len()
            ),
        ));
    }
    for (i, (z, o)) in a.slice_sizes.iter().zip(od).enumerate() {
        if *z < 0 || z > o {
            return Err(bad(
                OP,
                &s,
                ShapeErrorKind::Dimension,
                format!("slice size {z} of axis {i} is outside 0..={o}"),
            ));
        }
    }
    batching_ok(
        OP,
        &s,
        ["operand_batching_dims", "start_indices_batching_dims"],
        &d.operand_batching_dims,
        &d.start_indices_batching_dims,
        od,
        indices,
        d.index_vector_dim,
        &[
            ("collapsed_slice_dims", &d.collapsed_slice_dims),
            ("start_index_map", &d.start_index_map),
        ],
    )?;
    for c in d
        .collapsed_slice_dims
        .iter()
        .chain(&d.operand_batching_dims)
    {
        // Size 1 only: XLA also takes 0, but then the result claims elements of an
        // empty slice, and XLA's simplifier aborts on it (tests/rules_vs_xla.rs).
        if a.slice_sizes[*c as usize] != 1 {
            return Err(bad(
                OP,
                &s,
                ShapeErrorKind::Dimension,
                format!(
                    "collapsed or batch axis {c} has slice size {}; such an axis takes 1",
                    a.slice_sizes[*c as usize]
                ),
            ));
        }
    }
    let window: Vec<i64> = (0..od.len() as i64)
        .filter(|i| !d.collapsed_slice_dims.contains(i) && !d.operand_batching_dims.contains(i))
        .map(|i| i as usize)
        .map(|i| a.slice_sizes[i])
        .collect();
    if d.offset_dims.len() != window.len() {
        return Err(bad(
            OP,
            &s,
            ShapeErrorKind::Attribute,
            format!(
                "offset_dims {:?} must name {} output axes (the slice axes neither collapsed nor batch)",
                d.offset_dims,
                window.len()
            ),
        ));
    }
    let rank = batch.len() + window.len();
    axes_ok(OP, &s, "offset_dims", &d.offset_dims, rank, true)?;
    let (mut b, mut w) = (batch.into_iter(), window.into_iter());
    let out: Vec<i64> = (0..rank as i64)
        .map(|i| {
            if d.offset_dims.contains(&i) {
                w.next()
            } else {
                b.next()
            }
            .expect("counted")
        })
        .collect();
    Ok(Shape::array(ty, &out))
}

pub(crate) fn shape_gather(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Gather(a) = kind else {
        return Err(super::table::not_for("gather", kind));
    };
    infer_gather(cx.operands[0], cx.operands[1], a)
}

fn gather_proto(a: &GatherAttrs, p: &mut proto::HloInstructionProto) {
    p.gather_dimension_numbers = Some(proto::GatherDimensionNumbers {
        offset_dims: a.dims.offset_dims.clone(),
        collapsed_slice_dims: a.dims.collapsed_slice_dims.clone(),
        start_index_map: a.dims.start_index_map.clone(),
        index_vector_dim: a.dims.index_vector_dim,
        operand_batching_dims: a.dims.operand_batching_dims.clone(),
        start_indices_batching_dims: a.dims.start_indices_batching_dims.clone(),
    });
    p.gather_slice_sizes = a.slice_sizes.clone();
    p.indices_are_sorted = a.indices_are_sorted;
}

pub(crate) fn lower_gather(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Gather(a) = kind {
        gather_proto(a, p);
    }
}

fn gather_attrs(p: &proto::HloInstructionProto) -> Result<GatherAttrs, String> {
    let g = p
        .gather_dimension_numbers
        .as_ref()
        .ok_or("a gather without dimension numbers")?;
    Ok(GatherAttrs {
        dims: GatherDims {
            offset_dims: g.offset_dims.clone(),
            collapsed_slice_dims: g.collapsed_slice_dims.clone(),
            start_index_map: g.start_index_map.clone(),
            index_vector_dim: g.index_vector_dim,
            operand_batching_dims: g.operand_batching_dims.clone(),
            start_indices_batching_dims: g.start_indices_batching_dims.clone(),
        },
        slice_sizes: p.gather_slice_sizes.clone(),
        indices_are_sorted: p.indices_are_sorted,
    })
}

pub(crate) fn raise_gather(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Gather(Box::new(gather_attrs(p)?)))
}

fn gather_text(a: &GatherAttrs) -> String {
    let d = &a.dims;
    let mut out = String::new();
    let _ = write!(
        out,
        ", offset_dims={}, collapsed_slice_dims={}, start_index_map={}, index_vector_dim={}, slice_sizes={}",
        list(&d.offset_dims),
        list(&d.collapsed_slice_dims),
        list(&d.start_index_map),
        d.index_vector_dim,
        list(&a.slice_sizes)
    );
    if !d.operand_batching_dims.is_empty() {
        let _ = write!(
            out,
            ", operand_batching_dims={}, start_indices_batching_dims={}",
            list(&d.operand_batching_dims),
            list(&d.start_indices_batching_dims)
        );
    }
    if a.indices_are_sorted {
        out.push_str(", indices_are_sorted=true");
    }
    out
}

pub(crate) fn text_gather(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Gather(a) = kind {
        out.attrs.push_str(&gather_text(a));
    }
}

/// The shapes of the array and the indices of `take`/`take_along_axis`, or the op
/// to return instead: the failed operand, or a new failure for a tuple operand.
fn gather_operands(
    x: &Op,
    indices: &Op,
    loc: &'static Location<'static>,
) -> std::result::Result<(Shape, Shape), Op> {
    let b = x.builder();
    match (x.shape(), indices.shape()) {
        (Ok(s), Ok(is)) if s.is_array() && is.is_array() => Ok((s, is)),
        (Err(_), _) => Err(x.clone()),
        (_, Err(_)) => Err(indices.clone()),
        (Ok(s), _) if !s.is_array() => Err(b.fail_not_array(x, "gather", loc)),
        _ => Err(b.fail_not_array(indices, "gather", loc)),
    }
}

impl Op {
    /// XLA's Gather: slices of `slice_sizes` of this array at the starts given by
    /// `indices`, arranged as `dims` says. See [`infer_gather`] for the result shape.
    #[track_caller]
    pub fn gather(
        &self,
        indices: &Op,
        dims: &GatherDims,
        slice_sizes: &[i64],
        indices_are_sorted: bool,
    ) -> Op {
        let attrs = GatherAttrs {
            dims: dims.clone(),
            slice_sizes: slice_sizes.to_vec(),
            indices_are_sorted,
        };
        self.builder().emit(
            OpKind::Gather(Box::new(attrs)),
            &[self, indices],
            None,
            Location::caller(),
        )
    }

    /// Numpy's `take` along `axis` (`jnp.take`): the result is this array with
    /// `axis` replaced by the axes of `indices` (integers). As JAX's default mode
    /// `"fill"`: a negative index counts from the end, and one still out of range
    /// gives NaN (floats), the lowest value (signed integers), the highest (unsigned)
    /// or true; [`take_with`](Self::take_with) takes [`TakeMode::Clip`] or
    /// [`TakeMode::Wrap`] instead.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("take");
    /// let x = b.parameter(0, Shape::of::<f32>(&[4, 5]), "x");
    /// let i = b.parameter(1, Shape::of::<i32>(&[2, 3]), "i");
    /// assert_eq!(x.take(&i, 1).dims()?, vec![4, 2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn take(&self, indices: &Op, axis: i64) -> Op {
        let loc = Location::caller();
        self.take_mode(indices, axis, TakeMode::Fill, false, loc)
    }

    /// [`take`](Self::take) with out-of-range indices handled as `mode` says
    /// (`jnp.take(x, i, axis, mode=…)`).
    #[track_caller]
    pub fn take_with(&self, indices: &Op, axis: i64, mode: TakeMode) -> Op {
        self.take_mode(indices, axis, mode, false, Location::caller())
    }

    /// XLA's gather of whole slices at `indices` along `axis` (out-of-range indices
    /// clamped, negative ones to 0).
    fn take_clamped(&self, indices: &Op, axis: i64, loc: &'static Location<'static>) -> Op {
        let b = self.builder();
        let (s, is) = match gather_operands(self, indices, loc) {
            Ok(shapes) => shapes,
            Err(failed) => return failed,
        };
        let a = match resolve_axis("gather", &s, axis) {
            Ok(a) => a,
            Err(e) => return b.fail(e, loc),
        };
        let (r, ir) = (s.rank(), is.rank());
        let mut slice_sizes = s.dims().to_vec();
        slice_sizes[a] = 1;
        let offset_dims: Vec<i64> = (0..a).chain(a + ir..r + ir - 1).map(|i| i as i64).collect();
        let dims = GatherDims {
            offset_dims,
            collapsed_slice_dims: vec![a as i64],
            start_index_map: vec![a as i64],
            index_vector_dim: ir as i64,
            ..Default::default()
        };
        let attrs = GatherAttrs {
            dims,
            slice_sizes,
            indices_are_sorted: false,
        };
        b.emit(OpKind::Gather(Box::new(attrs)), &[self, indices], None, loc)
    }

    /// Numpy's `take_along_axis`: `out[.., j, ..] = self[.., indices[.., j, ..], ..]`
    /// with the index taken along `axis`; `indices` (integers) has this array's
    /// rank and its dimensions except along `axis`, and the result has the
    /// indices' dimensions. Out-of-range indices as [`take`](Self::take)'s (JAX's
    /// `"fill"`; [`take_along_axis_with`](Self::take_along_axis_with) for another
    /// mode). Typical use: the value of the action each row took,
    /// `q.take_along_axis(&actions, 1)`.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let b = Builder::new("taken");
    /// let q = b.parameter(0, Shape::of::<f32>(&[8, 4]), "q");
    /// let a = b.parameter(1, Shape::of::<i32>(&[8, 1]), "a");
    /// assert_eq!(q.take_along_axis(&a, 1).dims()?, vec![8, 1]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn take_along_axis(&self, indices: &Op, axis: i64) -> Op {
        let loc = Location::caller();
        self.take_mode(indices, axis, TakeMode::Fill, true, loc)
    }

    /// [`take_along_axis`](Self::take_along_axis) with out-of-range indices handled
    /// as `mode` says.
    #[track_caller]
    pub fn take_along_axis_with(&self, indices: &Op, axis: i64, mode: TakeMode) -> Op {
        self.take_mode(indices, axis, mode, true, Location::caller())
    }

    /// `take` (`along` false) or `take_along_axis` with `mode`: the indices made
    /// valid first, the fill applied after the gather.
    fn take_mode(
        &self,
        indices: &Op,
        axis: i64,
        mode: TakeMode,
        along: bool,
        loc: &'static Location<'static>,
    ) -> Op {
        let gather = |i: &Op| {
            if along {
                self.take_along_clamped(i, axis, loc)
            } else {
                self.take_clamped(i, axis, loc)
            }
        };
        let (Ok(s), Ok(it)) = (self.shape(), indices.element_type()) else {
            return gather(indices);
        };
        let Ok(a) = resolve_axis("gather", &s, axis) else {
            return gather(indices);
        };
        if !s.is_array() || !(it.is_signed_int() || it.is_unsigned_int()) {
            return gather(indices);
        }
        let n = s.dims()[a];
        let b = self.builder();
        let k = |v: i64| b.scalar_of(it, crate::Scalar::Int(v), loc);
        let i = indices;
        match mode {
            TakeMode::Clip => gather(&i.on(loc).clamp(&k(0), &k((n - 1).max(0)))),
            TakeMode::Wrap if n > 0 => {
                let r = i.binary(crate::BinaryOp::Remainder, &k(n), loc);
                let neg = r.on(loc).lt(0);
                let wrapped =
                    b.on(loc)
                        .select(&neg, &r.binary(crate::BinaryOp::Add, &k(n), loc), &r);
                gather(&wrapped)
            }
            TakeMode::Wrap => gather(i),
            TakeMode::Fill => {
                let from_end = if it.is_signed_int() {
                    let neg = i.on(loc).lt(0);
                    b.on(loc)
                        .select(&neg, &i.binary(crate::BinaryOp::Add, &k(n), loc), i)
                } else {
                    i.clone()
                };
                let valid = from_end.on(loc).ge(0).and(&from_end.on(loc).lt(n));
                let got = gather(&from_end.on(loc).clamp(&k(0), &k((n - 1).max(0))));
                let Ok(dims) = got.dims() else { return got };
                // The indices' axes in the result: `a..a + rank` for `take`, all of
                // them for `take_along_axis`.
                let rank = valid.rank().unwrap_or(0) as i64;
                let at: Vec<i64> = if along {
                    (0..rank).collect()
                } else {
                    (a as i64..a as i64 + rank).collect()
                };
                let mask = valid.on(loc).broadcast_in_dim(&dims, &at);
                let ty = s.element_type().expect("an array");
                let fill = b
                    .on(loc)
                    .constant_of_type(ty, fill_value(ty))
                    .on(loc)
                    .broadcast_to(&dims);
                b.on(loc).select(&mask, &got, &fill)
            }
        }
    }

    /// XLA's gather along `axis` for `take_along_axis` (out-of-range indices
    /// clamped).
    fn take_along_clamped(&self, indices: &Op, axis: i64, loc: &'static Location<'static>) -> Op {
        let b = self.builder();
        let (s, is) = match gather_operands(self, indices, loc) {
            Ok(shapes) => shapes,
            Err(failed) => return failed,
        };
        let a = match resolve_axis("gather", &s, axis) {
            Ok(a) => a,
            Err(e) => return b.fail(e, loc),
        };
        let r = s.rank();
        if is.rank() != r {
            return b.fail(
                ShapeError::new(
                    "gather",
                    &[&s, &is],
                    ShapeErrorKind::Rank,
                    format!("take_along_axis needs indices of the array's rank {r}, got {is}"),
                ),
                loc,
            );
        }
        let others: Vec<i64> = (0..r as i64).filter(|i| *i != a as i64).collect();
        let dims = GatherDims {
            offset_dims: vec![],
            collapsed_slice_dims: vec![a as i64],
            start_index_map: vec![a as i64],
            index_vector_dim: r as i64,
            operand_batching_dims: others.clone(),
            start_indices_batching_dims: others,
        };
        let attrs = GatherAttrs {
            dims,
            slice_sizes: vec![1; r],
            indices_are_sorted: false,
        };
        b.emit(OpKind::Gather(Box::new(attrs)), &[self, indices], None, loc)
    }
}

/// Gather (see `gather_cts`).
pub(crate) fn vjp_gather(n: &Node) -> Grads {
    let OpKind::Gather(a) = n.kind else {
        return Err("not a gather".into());
    };
    Ok(arrays(gather_cts(a, n, &n.ct())))
}

/// Gather: the cotangent scatter-added back where each slice came from. The
/// starts are clamped first, as the gather clamped them.
fn gather_cts(a: &GatherAttrs, n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let (x, idx, loc) = (&n.operands[0], &n.operands[1], n.loc);
    let od = x.dims().unwrap_or_default();
    let d = &a.dims;
    let hi = start_limits(
        idx,
        &d.start_index_map,
        &a.slice_sizes,
        &od,
        d.index_vector_dim,
        loc,
    );
    let zero = idx.builder().scalar_of(
        idx.element_type().unwrap_or(ElementType::S32),
        crate::Scalar::Int(0),
        loc,
    );
    let clamped =
        idx.binary(crate::BinaryOp::Maximum, &zero, loc)
            .binary(crate::BinaryOp::Minimum, &hi, loc);
    let sd = ScatterDims {
        update_window_dims: d.offset_dims.clone(),
        inserted_window_dims: d.collapsed_slice_dims.clone(),
        scatter_dims_to_operand_dims: d.start_index_map.clone(),
        index_vector_dim: d.index_vector_dim,
        input_batching_dims: d.operand_batching_dims.clone(),
        scatter_indices_batching_dims: d.start_indices_batching_dims.clone(),
    };
    let zeros = crate::autodiff::zeros_like(x, loc);
    let out = x.builder().scatter(
        &[&zeros],
        &clamped,
        &[ct],
        &sd,
        a.indices_are_sorted,
        false,
        |o, u| vec![&o[0] + &u[0]],
    );
    vec![out.into_iter().next(), None]
}

/// Per index component `k` (operand axis `axes[k]`), the largest start that keeps
/// a window of `sizes[axis]` inside the operand, as an array of the indices' shape
/// and type (broadcast along `index_vector_dim`).
fn start_limits(idx: &Op, axes: &[i64], sizes: &[i64], od: &[i64], ivd: i64, loc: Loc) -> Op {
    let ty = idx.element_type().unwrap_or(ElementType::S32);
    let id = idx.dims().unwrap_or_default();
    let his: Vec<i64> = axes
        .iter()
        .map(|a| od[*a as usize] - sizes[*a as usize])
        .collect();
    let b = idx.builder();
    if ivd as usize == id.len() {
        return b
            .scalar_of(ty, crate::Scalar::Int(his[0]), loc)
            .broadcast_to(&id);
    }
    b.constant_vec(&his)
        .convert(ty)
        .broadcast_in_dim(&id, &[ivd])
}

#[cfg(test)]
mod gather_tests {
    use super::*;

    #[test]
    fn gather_rule_for_take() {
        // take(x[4,5], i[2,3], axis 1) = [4, 2, 3]
        let x = Shape::of::<f32>(&[4, 5]);
        let i = Shape::of::<i32>(&[2, 3]);
        let a = GatherAttrs {
            dims: GatherDims {
                offset_dims: vec![0],
                collapsed_slice_dims: vec![1],
                start_index_map: vec![1],
                index_vector_dim: 2,
                ..Default::default()
            },
            slice_sizes: vec![4, 1],
            indices_are_sorted: false,
        };
        assert_eq!(
            infer_gather(&x, &i, &a).unwrap(),
            Shape::of::<f32>(&[4, 2, 3])
        );
        let mut b = a.clone();
        b.slice_sizes = vec![4, 2];
        assert_eq!(
            infer_gather(&x, &i, &b).unwrap_err().kind,
            ShapeErrorKind::Dimension
        );
        let mut c = a.clone();
        c.dims.offset_dims = vec![3];
        assert_eq!(
            infer_gather(&x, &i, &c).unwrap_err().kind,
            ShapeErrorKind::Axis
        );
        assert!(infer_gather(&x, &Shape::of::<f32>(&[2]), &a).is_err());
    }

    #[test]
    fn gather_collapses_slices_of_one() {
        // Collapsing a slice of size 0 made the result claim elements of an empty
        // slice; XLA's simplifier aborts on it (tests/rules_vs_xla.rs).
        let x = Shape::of::<f32>(&[2, 1, 1]);
        let i = Shape::of::<u8>(&[0]);
        let a = |sizes: Vec<i64>| GatherAttrs {
            dims: GatherDims {
                offset_dims: vec![0, 1],
                collapsed_slice_dims: vec![1],
                start_index_map: vec![],
                index_vector_dim: 0,
                ..Default::default()
            },
            slice_sizes: sizes,
            indices_are_sorted: true,
        };
        assert_eq!(
            infer_gather(&x, &i, &a(vec![2, 1, 1])).unwrap(),
            Shape::of::<f32>(&[2, 1])
        );
        assert!(infer_gather(&x, &i, &a(vec![2, 0, 1])).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `scatter`: attributes, rule, table slots, method, gradient, tests

pub use crate::ir::attrs::{ScatterAttrs, ScatterDims};

/// Scatter rule (XLA's semantics): `n` inputs of equal dimensions, the indices, `n`
/// updates; the update computation (when given) maps `2n` scalars (old values, then
/// new ones) to `n`. The result is the inputs' shapes (a tuple when `n > 1`).
pub fn infer_scatter(
    operands: &[&Shape],
    a: &ScatterAttrs,
    body: Option<&(Vec<Shape>, Shape)>,
) -> Result<Shape, ShapeError> {
    const OP: &str = "scatter";
    if operands.len() < 3 || operands.len() % 2 == 0 {
        return Err(bad(
            OP,
            operands,
            ShapeErrorKind::Arity,
            format!(
                "takes n inputs, the indices and n updates; got {} operands",
                operands.len()
            ),
        ));
    }
    let n = (operands.len() - 1) / 2;
    let (inputs, rest) = operands.split_at(n);
    let (indices, updates) = (rest[0], &rest[1..]);
    let (_, od) = array_of(OP, inputs[0])?;
    let d = &a.dims;
    let (batch, len) = index_parts(OP, operands, indices, d.index_vector_dim)?;
    if od.is_empty() && batch.iter().product::<i64>() > 1 {
        // XLA's CPU compiler fails on it (an internal error in its scatter
        // rewriting, "call" vs the update's shape; found by tests/rules_vs_xla.rs).
        return Err(bad(
            OP,
            operands,
            ShapeErrorKind::Rank,
            format!(
                "a scatter into a rank-0 array takes one update, not a batch {batch:?} (XLA fails to compile it): combine the updates first"
            ),
        ));
    }
    if len != d.scatter_dims_to_operand_dims.len() as i64 {
        return Err(bad(
            OP,
            operands,
            ShapeErrorKind::Dimension,
            format!(
                "index vectors have {len} entries, scatter_dims_to_operand_dims names {}",
                d.scatter_dims_to_operand_dims.len()
            ),
        ));
    }
    axes_ok(
        OP,
        operands,
        "scatter_dims_to_operand_dims",
        &d.scatter_dims_to_operand_dims,
        od.len(),
        false,
    )?;
    axes_ok(
        OP,
        operands,
        "inserted_window_dims",
        &d.inserted_window_dims,
        od.len(),
        true,
    )?;
    batching_ok(
        OP,
        operands,
        ["input_batching_dims", "scatter_indices_batching_dims"],
        &d.input_batching_dims,
        &d.scatter_indices_batching_dims,
        od,
        indices,
        d.index_vector_dim,
        &[
            ("inserted_window_dims", &d.inserted_window_dims),
            (
                "scatter_dims_to_operand_dims",
                &d.scatter_dims_to_operand_dims,
            ),
        ],
    )?;
    let window_axes: Vec<usize> = (0..od.len() as i64)
        .filter(|i| !d.inserted_window_dims.contains(i) && !d.input_batching_dims.contains(i))
        .map(|i| i as usize)
        .collect();
    let mut types = Vec::with_capacity(n);
    for (x, u) in inputs.iter().zip(updates.iter()) {
        let (t, xd) = array_of(OP, x)?;
        let (ut, ud) = array_of(OP, u)?;
        if ud != updates[0].dims() {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "all updates must have the same dimensions".into(),
            ));
        }
        if xd != od {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "all inputs must have the same dimensions".into(),
            ));
        }
        if ut != t {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::ElementType,
                format!("an update is {ut}, its input {t}"),
            ));
        }
        if d.update_window_dims.len() != window_axes.len()
            || ud.len() != batch.len() + window_axes.len()
        {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::Rank,
                format!(
                    "updates must have rank {} ({} scatter axes + {} window axes), got {u}",
                    batch.len() + window_axes.len(),
                    batch.len(),
                    window_axes.len()
                ),
            ));
        }
        axes_ok(
            OP,
            operands,
            "update_window_dims",
            &d.update_window_dims,
            ud.len(),
            true,
        )?;
        let scatter_sizes: Vec<i64> = (0..ud.len())
            .filter(|i| !d.update_window_dims.contains(&(*i as i64)))
            .map(|i| ud[i])
            .collect();
        if scatter_sizes != batch {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                format!(
                    "the updates' scatter axes {scatter_sizes:?} differ from the indices' {batch:?}"
                ),
            ));
        }
        for (k, w) in d.update_window_dims.iter().enumerate() {
            if ud[*w as usize] > od[window_axes[k]] {
                return Err(bad(
                    OP,
                    operands,
                    ShapeErrorKind::Dimension,
                    format!(
                        "update window axis {w} ({}) is larger than operand axis {}",
                        ud[*w as usize], window_axes[k]
                    ),
                ));
            }
        }
        types.push(t);
    }
    super::check_one_float_type(OP, operands)?;
    let scalars: Vec<Shape> = types.iter().map(|t| Shape::scalar(*t)).collect();
    if let Some((params, result)) = body {
        let want: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
        let want_r = if n == 1 {
            scalars[0].clone()
        } else {
            Shape::Tuple(scalars.clone())
        };
        if *params != want || *result != want_r {
            return Err(bad(
                OP,
                operands,
                ShapeErrorKind::Body,
                format!(
                    "the update computation must map {} scalars to {want_r}",
                    want.len()
                ),
            ));
        }
    }
    Ok(if n == 1 {
        inputs[0].clone()
    } else {
        Shape::Tuple(inputs.iter().map(|s| (*s).clone()).collect())
    })
}

pub(crate) fn shape_scatter(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Scatter { attrs, body } = kind else {
        return Err(super::table::not_for("scatter", kind));
    };
    infer_scatter(cx.operands, attrs, cx.signature(*body).as_ref())
}

fn scatter_proto(a: &ScatterAttrs, p: &mut proto::HloInstructionProto) {
    p.scatter_dimension_numbers = Some(proto::ScatterDimensionNumbers {
        update_window_dims: a.dims.update_window_dims.clone(),
        inserted_window_dims: a.dims.inserted_window_dims.clone(),
        scatter_dims_to_operand_dims: a.dims.scatter_dims_to_operand_dims.clone(),
        index_vector_dim: a.dims.index_vector_dim,
        input_batching_dims: a.dims.input_batching_dims.clone(),
        scatter_indices_batching_dims: a.dims.scatter_indices_batching_dims.clone(),
    });
    p.indices_are_sorted = a.indices_are_sorted;
    p.unique_indices = a.unique_indices;
}

pub(crate) fn lower_scatter(kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Scatter { attrs, body } = kind {
        scatter_proto(attrs, p);
        p.called_computation_ids = vec![(cx.comp_id)(*body)];
    }
}

fn scatter_attrs(p: &proto::HloInstructionProto) -> Result<ScatterAttrs, String> {
    let s = p
        .scatter_dimension_numbers
        .as_ref()
        .ok_or("a scatter without dimension numbers")?;
    Ok(ScatterAttrs {
        dims: ScatterDims {
            update_window_dims: s.update_window_dims.clone(),
            inserted_window_dims: s.inserted_window_dims.clone(),
            scatter_dims_to_operand_dims: s.scatter_dims_to_operand_dims.clone(),
            index_vector_dim: s.index_vector_dim,
            input_batching_dims: s.input_batching_dims.clone(),
            scatter_indices_batching_dims: s.scatter_indices_batching_dims.clone(),
        },
        indices_are_sorted: p.indices_are_sorted,
        unique_indices: p.unique_indices,
    })
}

pub(crate) fn raise_scatter(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let [body] = cx.calls(p)?;
    Ok(OpKind::Scatter {
        attrs: Box::new(scatter_attrs(p)?),
        body,
    })
}

fn scatter_text(a: &ScatterAttrs) -> String {
    let d = &a.dims;
    let mut out = format!(
        ", update_window_dims={}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, index_vector_dim={}",
        list(&d.update_window_dims),
        list(&d.inserted_window_dims),
        list(&d.scatter_dims_to_operand_dims),
        d.index_vector_dim
    );
    if !d.input_batching_dims.is_empty() {
        let _ = write!(
            out,
            ", input_batching_dims={}, scatter_indices_batching_dims={}",
            list(&d.input_batching_dims),
            list(&d.scatter_indices_batching_dims)
        );
    }
    if a.indices_are_sorted {
        out.push_str(", indices_are_sorted=true");
    }
    if a.unique_indices {
        out.push_str(", unique_indices=true");
    }
    out
}

pub(crate) fn text_scatter(kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Scatter { attrs, body } = kind {
        out.attrs.push_str(&scatter_text(attrs));
        out.callee(cx, "to_apply", *body);
    }
}

impl Builder {
    /// XLA's Scatter: `inputs` with the windows of `updates` combined in at the
    /// starts given by `indices` (`combine(old, new)` per element, e.g. `old + new`
    /// for a scatter-add), arranged as `dims` says. Returns the updated inputs. The
    /// combiner may use scalar values from outside it.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn scatter(
        &self,
        inputs: &[&Op],
        indices: &Op,
        updates: &[&Op],
        dims: &ScatterDims,
        indices_are_sorted: bool,
        unique_indices: bool,
        combine: impl FnOnce(&[Op], &[Op]) -> Vec<Op>,
    ) -> Vec<Op> {
        let loc = Location::caller();
        let n = inputs.len().max(1);
        let failed = |op: Op| vec![op; n];
        let all: Vec<&Op> = inputs
            .iter()
            .copied()
            .chain([indices])
            .chain(updates.iter().copied())
            .collect();
        let target = match self.target(&all, "scatter", loc) {
            Ok(t) => t,
            Err(f) => return failed(f),
        };
        let attrs = ScatterAttrs {
            dims: dims.clone(),
            indices_are_sorted,
            unique_indices,
        };
        let shapes: Vec<Shape> = all.iter().map(|o| o.shape().expect("checked")).collect();
        let refs: Vec<&Shape> = shapes.iter().collect();
        if let Err(e) = infer_scatter(&refs, &attrs, None) {
            return failed(self.fail(e, loc));
        }
        let n = inputs.len();
        let types: Vec<ElementType> = shapes[..n]
            .iter()
            .map(|s| s.element_type().expect("checked"))
            .collect();
        let scalars: Vec<Shape> = types.iter().map(|t| Shape::scalar(*t)).collect();
        let params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
        let (comp, mut roots) = match self.body(target, "combine", &params, loc, |_, p| {
            combine(&p[..n], &p[n..])
        }) {
            Ok(r) => r,
            Err(f) => return failed(f),
        };
        if roots.len() != n {
            return failed(self.fail(
                ShapeError::new(
                    "scatter",
                    &refs,
                    ShapeErrorKind::Body,
                    format!(
                        "the combiner must return {n} values, it returns {}",
                        roots.len()
                    ),
                ),
                loc,
            ));
        }
        // Captured scalars: one more input and update each (see `scalar_captures`).
        let captures = match self.scalar_captures(comp, target, "scatter", loc) {
            Ok(c) => c,
            Err(f) => return failed(f),
        };
        let k = captures.len();
        self.captures_as_inputs(comp, n, &mut roots);
        if let Err(f) = self.finish_body(comp, &roots, loc) {
            return failed(f);
        }
        let (in_dims, up_dims) = (shapes[0].dims().to_vec(), shapes[n + 1].dims().to_vec());
        let caps: Vec<Op> = captures.iter().map(|c| self.op(target, *c)).collect();
        let cap_in: Vec<Op> = caps
            .iter()
            .map(|c| c.on(loc).broadcast_to(&in_dims))
            .collect();
        let cap_up: Vec<Op> = caps
            .iter()
            .map(|c| c.on(loc).broadcast_to(&up_dims))
            .collect();
        let operands: Vec<&Op> = inputs
            .iter()
            .copied()
            .chain(&cap_in)
            .chain([indices])
            .chain(updates.iter().copied())
            .chain(&cap_up)
            .collect();
        let r = self.emit(
            OpKind::Scatter {
                attrs: Box::new(attrs),
                body: comp,
            },
            &operands,
            None,
            loc,
        );
        self.results(r, n, n + k > 1)
    }
}

/// Scatter (see `scatter_cts`).
pub(crate) fn vjp_scatter(n: &Node) -> Grads {
    let OpKind::Scatter { attrs, body } = n.kind else {
        return Err("not a scatter".into());
    };
    scatter_cts(attrs, *body, n, &n.ct()).map(arrays)
}

/// Scatter of one array, as JAX differentiates it (`jax.lax.scatter_*`):
/// - add: the operand's cotangent passes through; each update's is the cotangent
///   gathered at its window;
/// - multiply: the operand's is the cotangent times the product of the updates
///   that reached each element; an update's, the cotangent times the operand
///   there, which needs unique indices (declared), as in JAX;
/// - max and min: every contributor equal to the result (the operand's element,
///   the updates that reached it) gets an equal share of the cotangent;
/// - replace: each element's cotangent goes to the update that was written there
///   last (found by scattering each update's number the same way), or to the
///   operand where none was.
///
/// Updates whose window the scatter dropped (out of bounds) get zero; the indices
/// get none.
fn scatter_cts(
    a: &ScatterAttrs,
    body: crate::ir::CompId,
    n: &crate::autodiff::Node,
    ct: &Op,
) -> Result<Vec<Option<Op>>, String> {
    use crate::BinaryOp as B;
    let comb = match (n.operands.len(), combiner(n.b, body)) {
        (
            3,
            Some(
                c @ (Combiner::Replace
                | Combiner::Binary(B::Add | B::Multiply | B::Maximum | B::Minimum)),
            ),
        ) => c,
        _ => {
            return Err(
                "only a `scatter` of one array that adds, multiplies, takes the max or min, or replaces has a gradient rule"
                    .into(),
            );
        }
    };
    let (x, idx, u, loc) = (&n.operands[0], &n.operands[1], &n.operands[2], n.loc);
    let (od, ud) = (x.dims().unwrap_or_default(), u.dims().unwrap_or_default());
    let d = &a.dims;
    let mut window = d.update_window_dims.iter();
    let sizes: Vec<i64> = (0..od.len() as i64)
        .map(|ax| {
            if d.inserted_window_dims.contains(&ax) || d.input_batching_dims.contains(&ax) {
                1
            } else {
                window.next().map_or(1, |w| ud[*w as usize])
            }
        })
        .collect();
    let gd = GatherDims {
        offset_dims: d.update_window_dims.clone(),
        collapsed_slice_dims: d.inserted_window_dims.clone(),
        start_index_map: d.scatter_dims_to_operand_dims.clone(),
        index_vector_dim: d.index_vector_dim,
        operand_batching_dims: d.input_batching_dims.clone(),
        start_indices_batching_dims: d.scatter_indices_batching_dims.clone(),
    };
    // An operand-shaped array read at each update's window (updates-shaped).
    let at_updates = |v: &Op| v.gather(idx, &gd, &sizes, a.indices_are_sorted);
    // The same scatter with another combiner.
    let scatter_with = |into: &Op, upd: &Op, f: fn(&Op, &Op) -> Op| -> Op {
        idx.builder()
            .scatter(
                &[into],
                idx,
                &[upd],
                d,
                a.indices_are_sorted,
                a.unique_indices,
                |o, u| vec![f(&o[0], &u[0])],
            )
            .remove(0)
    };
    // Which windows the scatter kept: every start within [0, dim - size].
    let ity = idx.element_type().unwrap_or(ElementType::S32);
    let b = idx.builder();
    let hi = start_limits(
        idx,
        &d.scatter_dims_to_operand_dims,
        &sizes,
        &od,
        d.index_vector_dim,
        loc,
    );
    let zero = b.scalar_of(ity, crate::Scalar::Int(0), loc);
    let ok = idx
        .compare(&zero, crate::Comparison::Ge)
        .convert(ElementType::S32)
        .binary(
            crate::BinaryOp::Multiply,
            &idx.compare(&hi, crate::Comparison::Le)
                .convert(ElementType::S32),
            loc,
        );
    let id = idx.dims().unwrap_or_default();
    let ok = if (d.index_vector_dim as usize) < id.len() {
        ok.reduce_by(&[d.index_vector_dim], crate::BinaryOp::Minimum, loc)
    } else {
        ok
    };
    let keep = ok.compare(
        &b.scalar_of(ElementType::S32, crate::Scalar::Int(1), loc),
        crate::Comparison::Eq,
    );
    let scatter_axes: Vec<i64> = (0..ud.len() as i64)
        .filter(|a| !d.update_window_dims.contains(a))
        .collect();
    let keep = keep.broadcast_in_dim(&ud, &scatter_axes);
    let only = |pred: &Op, v: &Op| b.select(pred, v, &crate::autodiff::zeros_like(v, loc));
    let and = |p: &Op, q: &Op| p.bitwise(crate::ops::bitwise::BitwiseOp::And, q, loc);
    let (ct_x, ct_u) = match comb {
        Combiner::Binary(B::Add) => (ct.clone(), only(&keep, &at_updates(ct))),
        Combiner::Binary(B::Multiply) => {
            let ones = x.full_like(1.0);
            let ct_x = ct.binary(B::Multiply, &scatter_with(&ones, u, |o, v| o * v), loc);
            if !a.unique_indices && n.wanted.get(2).copied().unwrap_or(true) {
                return Err(
                    "a `scatter` that multiplies has a gradient with respect to its updates only with unique indices (declared `unique_indices`), as in JAX"
                        .into(),
                );
            }
            let ct_u = only(&keep, &at_updates(&ct.binary(B::Multiply, x, loc)));
            (ct_x, ct_u)
        }
        Combiner::Binary(_) => {
            // Max or min: the result's contributors share its cotangent equally.
            let out = n.out();
            let won = and(&keep, &u.compare(&at_updates(out), crate::Comparison::Eq));
            let kept = x.compare(out, crate::Comparison::Eq);
            let as_float = |p: &Op| only(p, &x.full_like(1.0));
            let count = scatter_with(&as_float(&kept), &only(&won, &u.full_like(1.0)), |o, v| {
                o + v
            });
            let share = ct.binary(B::Divide, &count, loc);
            (only(&kept, &share), only(&won, &at_updates(&share)))
        }
        Combiner::Replace => {
            // Number each update window 1, 2, …, scatter the numbers the same way
            // and read back which one each element holds.
            let s32 = ElementType::S32;
            let scatter_dims: Vec<i64> = scatter_axes.iter().map(|a| ud[*a as usize]).collect();
            let m: i64 = scatter_dims.iter().product();
            let numbers = b
                .iota(s32, &[m], 0)
                .binary_scalar(B::Add, crate::Scalar::Int(1), false, loc)
                .reshape(&scatter_dims)
                .broadcast_in_dim(&ud, &scatter_axes);
            let none = b
                .scalar_of(s32, crate::Scalar::Int(0), loc)
                .broadcast_to(&od);
            let holds = scatter_with(&none, &numbers, |_, v| v.clone());
            let untouched = holds.compare(&none, crate::Comparison::Eq);
            let won = and(
                &keep,
                &at_updates(&holds).compare(&numbers, crate::Comparison::Eq),
            );
            (only(&untouched, ct), only(&won, &at_updates(ct)))
        }
    };
    Ok(vec![Some(ct_x), None, Some(ct_u)])
}

/// How a scatter's update computation combines the old value `o` with the update
/// `u`, for the forms that have gradient rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combiner {
    /// `o + u`, `o * u`, `max(o, u)`, `min(o, u)` (either order).
    Binary(crate::BinaryOp),
    /// `u`: the update replaces the value.
    Replace,
}

fn combiner(b: &crate::builder::Builder, body: crate::ir::CompId) -> Option<Combiner> {
    if let Some(op) = crate::ops::reduction::simple_combiner(b, body) {
        return Some(Combiner::Binary(op));
    }
    let g = b.g.borrow();
    let c = g.comp(body);
    let root = c.root?;
    let params: Vec<u32> = c.params.iter().filter_map(|p| *p).collect();
    (params.len() == 2 && root.instr == params[1] && root.result == 0).then_some(Combiner::Replace)
}

#[cfg(test)]
mod scatter_tests {
    use super::*;

    #[test]
    fn scatter_rule() {
        // Scatter-add rows: x[5,3], indices [2] (index_vector_dim 1 = rank), updates [2,3].
        let x = Shape::of::<f32>(&[5, 3]);
        let i = Shape::of::<i32>(&[2]);
        let u = Shape::of::<f32>(&[2, 3]);
        let a = ScatterAttrs {
            dims: ScatterDims {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                index_vector_dim: 1,
                ..Default::default()
            },
            indices_are_sorted: false,
            unique_indices: false,
        };
        assert_eq!(infer_scatter(&[&x, &i, &u], &a, None).unwrap(), x);
        assert!(infer_scatter(&[&x, &i, &Shape::of::<f32>(&[3, 3])], &a, None).is_err());
        assert!(infer_scatter(&[&x, &i, &Shape::of::<f32>(&[2, 4])], &a, None).is_err());
        assert!(infer_scatter(&[&x, &i], &a, None).is_err());
    }

    #[test]
    fn scatter_rule_cases_xla_refuses() {
        // Found by tests/rules_vs_xla.rs, each once accepted here and refused (or
        // failed) by XLA.
        let a = |uwd: Vec<i64>, ins: Vec<i64>, sd: Vec<i64>, ivd| ScatterAttrs {
            dims: ScatterDims {
                update_window_dims: uwd,
                inserted_window_dims: ins,
                scatter_dims_to_operand_dims: sd,
                index_vector_dim: ivd,
                ..Default::default()
            },
            indices_are_sorted: false,
            unique_indices: false,
        };
        let s = |t: ElementType, d: &[i64]| Shape::array(t, d);
        // Two updates of different dims.
        let one = a(vec![0], vec![], vec![], 0);
        let (x, y, i) = (
            s(ElementType::S32, &[2]),
            s(ElementType::F16, &[2]),
            s(ElementType::U64, &[0]),
        );
        let (u, v) = (s(ElementType::S32, &[2]), s(ElementType::F16, &[1]));
        assert!(infer_scatter(&[&x, &y, &i, &u, &s(ElementType::F16, &[2])], &one, None).is_ok());
        let e = infer_scatter(&[&x, &y, &i, &u, &v], &one, None).unwrap_err();
        assert!(e.reason.contains("same dimensions"), "{e}");
        // Inputs mixing float precisions.
        let (x, y) = (s(ElementType::F16, &[2]), s(ElementType::F32, &[2]));
        let i = s(ElementType::S32, &[1, 1]);
        let (u, v) = (s(ElementType::F16, &[1]), s(ElementType::F32, &[1]));
        let rows = a(vec![], vec![0], vec![0], 1);
        let e = infer_scatter(&[&x, &y, &i, &u, &v], &rows, None).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::ElementType, "{e}");
        // A batch of updates into a rank-0 array: one update is fine, 3x3 are not.
        let x = s(ElementType::S8, &[]);
        let none = a(vec![], vec![], vec![], 0);
        let single = [&x, &s(ElementType::U32, &[0, 1]), &s(ElementType::S8, &[1])];
        assert!(infer_scatter(&single, &none, None).is_ok());
        let batch = [
            &x,
            &s(ElementType::U32, &[0, 3, 3]),
            &s(ElementType::S8, &[3, 3]),
        ];
        let e = infer_scatter(&batch, &none, None).unwrap_err();
        assert!(e.reason.contains("rank-0"), "{e}");
    }
}

/// How `take` and `take_along_axis` treat an index out of range (`jnp.take`'s
/// `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeMode {
    /// JAX's default: a negative index counts from the end; one still out of
    /// range gives a fill value (NaN for floats, the lowest value of a signed
    /// type, the highest of an unsigned one, true for `pred`), and no gradient.
    Fill,
    /// Clamped into range (a negative index takes the first element).
    Clip,
    /// Taken modulo the axis length (-1 is the last element, `n` the first).
    Wrap,
}

/// The value `TakeMode::Fill` (and `IndexMode::Fill`) gives an out-of-range index,
/// as JAX's.
pub(crate) fn fill_value(ty: ElementType) -> crate::Scalar {
    use crate::Scalar;
    match ty {
        ElementType::Pred => Scalar::Int(1),
        ElementType::S8 => Scalar::Int(i8::MIN.into()),
        ElementType::S16 => Scalar::Int(i16::MIN.into()),
        ElementType::S32 => Scalar::Int(i32::MIN.into()),
        ElementType::S64 => Scalar::Int(i64::MIN),
        ElementType::U8 => Scalar::Int(u8::MAX.into()),
        ElementType::U16 => Scalar::Int(u16::MAX.into()),
        ElementType::U32 => Scalar::Int(u32::MAX.into()),
        ElementType::U64 => Scalar::UInt(u64::MAX),
        _ => Scalar::Float(f64::NAN),
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Tangent: linear in the operand (the indices fixed).
pub(crate) fn jvp_gather(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: a scatter that adds or replaces is linear in the operand and the
/// updates; one that keeps the max or min takes the tangent of the winner.
pub(crate) fn jvp_scatter(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    let OpKind::Scatter { body, .. } = n.kind else {
        return Err("not a scatter".into());
    };
    if n.operands.len() != 3 {
        return Err("a tangent rule for a scatter of one array only".into());
    }
    if replaces(n.b, *body) {
        // The result is the operand with windows replaced by updates: the same
        // scatter of the tangents.
        return crate::forward::linear(n);
    }
    match super::reduction::simple_combiner(n.b, *body) {
        Some(crate::BinaryOp::Add) => crate::forward::linear(n),
        Some(op @ (crate::BinaryOp::Maximum | crate::BinaryOp::Minimum)) => {
            jvp_scatter_extremum(n, op)
        }
        _ => Err(
            "a tangent rule for a scatter that adds, replaces, or keeps the max or min only".into(),
        ),
    }
}

/// Whether a scatter's combiner returns its second parameter (the update).
fn replaces(b: &Builder, body: crate::ir::CompId) -> bool {
    let g = b.g.borrow();
    let c = g.comp(body);
    matches!((c.root, c.params.get(1)), (Some(r), Some(Some(p))) if r == crate::ir::Value::of(*p) && c.params.len() == 2)
}

/// Tangent of a scatter that keeps the max (min): a scatter of the values and
/// their tangents together whose combiner keeps the pair with the larger
/// (smaller) value (the old one on ties), so each element's tangent is the
/// tangent of the value that won.
fn jvp_scatter_extremum(
    n: &crate::forward::JvpNode,
    op: crate::BinaryOp,
) -> crate::forward::Tangents {
    let OpKind::Scatter { attrs, .. } = n.kind else {
        return Err("not a scatter".into());
    };
    let dir = if op == crate::BinaryOp::Maximum {
        crate::Comparison::Gt
    } else {
        crate::Comparison::Lt
    };
    let (tx, tu) = (n.tangent(0), n.tangent(2));
    let out = n.b.scatter(
        &[&n.operands[0], &tx],
        &n.operands[1],
        &[&n.operands[2], &tu],
        &attrs.dims,
        attrs.indices_are_sorted,
        attrs.unique_indices,
        |old, new| {
            let bb = old[0].builder();
            let take = new[0].compare(&old[0], dir);
            vec![
                bb.select(&take, &new[0], &old[0]),
                bb.select(&take, &new[1], &old[1]),
            ]
        },
    );
    if let Some(e) = crate::batching::failure(&out[1]) {
        return Err(e);
    }
    Ok(vec![Some(crate::autodiff::Ct::Array(out[1].clone()))])
}

/// Batched index vectors `idx` (batch axis at 0, vectors along `ivd`, or a
/// trailing implicit axis when `ivd` is its rank) with each example's position
/// prepended to its vectors: the indices of a gather or scatter that gets a new
/// leading operand axis indexed by the batch. Returns the indices and their
/// (explicit) index-vector axis.
pub(crate) fn prepend_batch_iota(idx: &Op, ivd: i64) -> Result<(Op, i64), String> {
    let mut dims = idx.dims().map_err(|e| e.to_string())?;
    let ty = idx.element_type().map_err(|e| e.to_string())?;
    let idx = if ivd as usize == dims.len() {
        dims.push(1);
        idx.reshape(&dims)
    } else {
        idx.clone()
    };
    dims[ivd as usize] = 1;
    let iota = idx.builder().iota(ty, &dims, 0);
    Ok((idx.builder().concatenate(&[&iota, &idx], ivd), ivd))
}

/// Batching: the batch axes of the operand and the indices moved to 0. Only the
/// operand batched: the batch axis is one more offset (window) axis of the
/// slices, taken whole. Only the indices batched: one more batch axis of the
/// indices. Both: the operand gets a leading axis indexed by the example's
/// position, prepended to every index vector (an iota over the batch), and
/// collapsed, so each example gathers from its own operand.
pub(crate) fn batch_gather(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Gather(attrs) = n.kind else {
        return Err("not a gather".into());
    };
    let up = |v: &[i64]| v.iter().map(|a| a + 1).collect::<Vec<i64>>();
    let d = &attrs.dims;
    let mut a = (**attrs).clone();
    let ob = n.operands[0].is_batched();
    let ib = n.operands[1].is_batched();
    let (x, idx) = match (ob, ib) {
        (true, false) => {
            let idx = n.operands[1].array()?.0.clone();
            a.slice_sizes.insert(0, n.size);
            a.dims.offset_dims = [vec![0], up(&d.offset_dims)].concat();
            a.dims.collapsed_slice_dims = up(&d.collapsed_slice_dims);
            a.dims.start_index_map = up(&d.start_index_map);
            a.dims.operand_batching_dims = up(&d.operand_batching_dims);
            (n.front(0)?, idx)
        }
        (false, true) => {
            let x = n.operands[0].array()?.0.clone();
            a.dims.offset_dims = up(&d.offset_dims);
            a.dims.index_vector_dim = d.index_vector_dim + 1;
            a.dims.start_indices_batching_dims = up(&d.start_indices_batching_dims);
            (x, n.front(1)?)
        }
        _ => {
            let (idx, ivd) = prepend_batch_iota(&n.front(1)?, d.index_vector_dim + 1)?;
            a.slice_sizes.insert(0, 1);
            a.dims.offset_dims = up(&d.offset_dims);
            a.dims.collapsed_slice_dims = [vec![0], up(&d.collapsed_slice_dims)].concat();
            a.dims.start_index_map = [vec![0], up(&d.start_index_map)].concat();
            a.dims.index_vector_dim = ivd;
            a.dims.operand_batching_dims = up(&d.operand_batching_dims);
            a.dims.start_indices_batching_dims = up(&d.start_indices_batching_dims);
            (n.front(0)?, idx)
        }
    };
    n.emit_front(OpKind::Gather(Box::new(a)), &[x, idx])
}

/// Batching: every input and update batched at 0 (broadcast where unbatched, as
/// each example scatters into its own copy), the indices batched at 0 with the
/// example's position prepended to every index vector, addressing a new leading
/// operand axis inserted into the windows. Out-of-bounds windows are skipped per
/// example as for one (the batch index is always in bounds).
pub(crate) fn batch_scatter(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Scatter { attrs, body } = n.kind else {
        return Err("not a scatter".into());
    };
    let m = (n.operands.len() - 1) / 2;
    let up = |v: &[i64]| v.iter().map(|a| a + 1).collect::<Vec<i64>>();
    let d = &attrs.dims;
    let mut a = (**attrs).clone();
    let (idx, ivd) = prepend_batch_iota(&n.front(m)?, d.index_vector_dim + 1)?;
    a.dims.update_window_dims = up(&d.update_window_dims);
    a.dims.inserted_window_dims = [vec![0], up(&d.inserted_window_dims)].concat();
    a.dims.scatter_dims_to_operand_dims = [vec![0], up(&d.scatter_dims_to_operand_dims)].concat();
    a.dims.index_vector_dim = ivd;
    a.dims.input_batching_dims = up(&d.input_batching_dims);
    a.dims.scatter_indices_batching_dims = up(&d.scatter_indices_batching_dims);
    let mut ops = Vec::with_capacity(n.operands.len());
    for k in 0..m {
        ops.push(n.front(k)?);
    }
    ops.push(idx);
    for k in m + 1..n.operands.len() {
        ops.push(n.front(k)?);
    }
    n.emit_front(
        OpKind::Scatter {
            attrs: Box::new(a),
            body: *body,
        },
        &ops,
    )
}
