//! Slicing and assembling arrays: `iota`, `slice`, `dynamic-slice`,
//! `dynamic-update-slice`, `concatenate`, `pad`, `reverse`.
use super::{array_of, check_axes, check_axis, resolve_axes, resolve_axis};
use crate::autodiff::{Grads, Node, arrays};
use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::fmt::Write;
use std::panic::Location;

// ---------------------------------------------------------------------------------
// Shared helpers

fn err(op: &'static str, operands: &[&Shape], k: ShapeErrorKind, r: String) -> ShapeError {
    ShapeError::new(op, operands, k, r)
}

/// The shared check of start indices: `rank` integer scalars of one type.
fn check_indices(
    op: &'static str,
    all: &[&Shape],
    first: usize,
    rank: usize,
) -> Result<(), ShapeError> {
    let idx = &all[first..];
    if idx.len() != rank {
        return Err(err(
            op,
            all,
            ShapeErrorKind::Arity,
            format!(
                "needs {rank} start indices (one per axis), got {}",
                idx.len()
            ),
        ));
    }
    let mut ty = None;
    for s in idx {
        let (t, d) = array_of(op, s)?;
        if !d.is_empty() || !t.is_integer() || ty.is_some_and(|x| x != t) {
            return Err(err(
                op,
                all,
                ShapeErrorKind::ElementType,
                "start indices must be integer scalars of one type".into(),
            ));
        }
        ty = Some(t);
    }
    Ok(())
}

/// Pads `ct` with zeros of its type.
fn pad_zeros(ct: &Op, config: &[PadDim], loc: &'static Location<'static>) -> Op {
    let zero = match ct.element_type() {
        Ok(t) => ct.builder().scalar_of(t, crate::Scalar::Int(0), loc),
        Err(_) => return ct.clone(),
    };
    ct.builder()
        .emit(OpKind::Pad(config.into()), &[ct, &zero], None, loc)
}

#[cfg(test)]
fn f(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

// ---------------------------------------------------------------------------------
// `iota`

/// Iota rule: a numeric array shape and an axis of it, along which the values count
/// 0, 1, 2, ….
pub fn infer_iota(shape: &Shape, dimension: i64) -> Result<Shape, ShapeError> {
    let (ty, dims) = array_of("iota", shape)?;
    if ty == ElementType::Pred {
        return Err(err(
            "iota",
            &[],
            ShapeErrorKind::ElementType,
            "iota needs a numeric element type, got pred".into(),
        ));
    }
    if dims.iter().any(|d| *d < 0) {
        return Err(err(
            "iota",
            &[],
            ShapeErrorKind::Dimension,
            format!("negative dimension in {shape}"),
        ));
    }
    check_axis("iota", shape, dimension)?;
    Ok(shape.clone())
}

pub(crate) fn shape_iota(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Iota { dimension } = kind else {
        return Err(super::table::not_for("iota", kind));
    };
    infer_iota(cx.target("iota")?, *dimension)
}

pub(crate) fn lower_iota(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Iota { dimension } = kind {
        p.dimensions = vec![*dimension];
    }
}

pub(crate) fn raise_iota(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Iota {
        dimension: cx.one_dimension(p)?,
    })
}

pub(crate) fn text_iota(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Iota { dimension } = kind {
        out.attr("iota_dimension", dimension);
    }
}

impl Builder {
    /// XLA's Iota: an array of `ty` and `dims` whose values count 0, 1, 2, … along
    /// axis `dimension` (negative counts from the end).
    ///
    /// ```
    /// use xlaclient_core::{Builder, ElementType};
    /// let b = Builder::new("i");
    /// let cols = b.iota(ElementType::S32, &[2, 3], 1); // [[0,1,2],[0,1,2]]
    /// assert_eq!(cols.dims()?, vec![2, 3]);
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    #[track_caller]
    pub fn iota(&self, ty: ElementType, dims: &[i64], dimension: i64) -> Op {
        let loc = Location::caller();
        let shape = Shape::array(ty, dims);
        let d = match resolve_axis("iota", &shape, dimension) {
            Ok(d) => d as i64,
            Err(e) => return self.fail(e, loc),
        };
        self.emit(OpKind::Iota { dimension: d }, &[], Some(shape), loc)
    }
}

#[cfg(test)]
mod iota_tests {
    use super::*;

    #[test]
    fn iota_rule() {
        assert!(infer_iota(&Shape::of::<i32>(&[3]), 0).is_ok());
        assert!(infer_iota(&Shape::of::<i32>(&[3]), 1).is_err());
        assert!(infer_iota(&Shape::of::<bool>(&[3]), 0).is_err());
        assert!(infer_iota(&Shape::of::<i32>(&[3]), -1).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `slice`

pub use crate::ir::attrs::SliceAttrs;

/// Slice rule: per axis `0 <= start <= limit <= size` and `stride >= 1`; the result
/// has `ceil((limit - start) / stride)` elements on that axis.
pub fn infer_slice(operand: &Shape, s: &SliceAttrs) -> Result<Shape, ShapeError> {
    let (ty, dims) = array_of("slice", operand)?;
    let e = |k, r| err("slice", &[operand], k, r);
    if s.start.len() != dims.len() || s.limit.len() != dims.len() || s.strides.len() != dims.len() {
        return Err(e(
            ShapeErrorKind::Attribute,
            format!(
                "start {:?}, limit {:?} and strides {:?} must each have one entry per axis ({})",
                s.start,
                s.limit,
                s.strides,
                dims.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        let (a, b, st) = (s.start[i], s.limit[i], s.strides[i]);
        if st < 1 {
            return Err(e(
                ShapeErrorKind::Attribute,
                format!("stride {st} on axis {i} must be at least 1"),
            ));
        }
        if a < 0 || a > b || b > *d {
            return Err(e(
                ShapeErrorKind::Dimension,
                format!("axis {i}: need 0 <= start ({a}) <= limit ({b}) <= size ({d})"),
            ));
        }
        let n = b - a; // 0 <= n, 1 <= st: ceil(n / st) without overflow
        out.push(n / st + i64::from(n % st != 0));
    }
    Ok(Shape::array(ty, &out))
}

pub(crate) fn shape_slice(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Slice(a) = kind else {
        return Err(super::table::not_for("slice", kind));
    };
    infer_slice(cx.operands[0], a)
}

pub(crate) fn lower_slice(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    let OpKind::Slice(s) = kind else { return };
    p.slice_dimensions = (0..s.start.len())
        .map(|i| proto::hlo_instruction_proto::SliceDimensions {
            start: s.start[i],
            limit: s.limit[i],
            stride: s.strides[i],
        })
        .collect();
}

pub(crate) fn raise_slice(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Slice(Box::new(SliceAttrs {
        start: p.slice_dimensions.iter().map(|d| d.start).collect(),
        limit: p.slice_dimensions.iter().map(|d| d.limit).collect(),
        strides: p.slice_dimensions.iter().map(|d| d.stride).collect(),
    })))
}

pub(crate) fn text_slice(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    let OpKind::Slice(s) = kind else { return };
    let parts: Vec<String> = (0..s.start.len())
        .map(|i| format!("[{}:{}:{}]", s.start[i], s.limit[i], s.strides[i]))
        .collect();
    out.attr("slice", format!("{{{}}}", parts.join(", ")));
}

impl Op {
    /// XLA's Slice: elements `start[i] .. limit[i]` of each axis, every `strides[i]`-th.
    #[track_caller]
    pub fn slice(&self, start: &[i64], limit: &[i64], strides: &[i64]) -> Op {
        let loc = Location::caller();
        let attrs = SliceAttrs {
            start: start.to_vec(),
            limit: limit.to_vec(),
            strides: strides.to_vec(),
        };
        self.builder()
            .emit(OpKind::Slice(Box::new(attrs)), &[self], None, loc)
    }

    /// A slice of one axis (`start..limit`, every `stride`-th), the others whole
    /// (XLA's SliceInDim).
    #[track_caller]
    pub fn slice_in_dim(&self, start: i64, limit: i64, stride: i64, axis: i64) -> Op {
        let loc = Location::caller();
        let s = match self.shape() {
            Ok(s) if s.is_array() => s,
            _ => return self.builder().fail_not_array(self, "slice", loc),
        };
        let a = match resolve_axis("slice", &s, axis) {
            Ok(a) => a,
            Err(e) => return self.builder().fail(e, loc),
        };
        let mut attrs = SliceAttrs {
            start: vec![0; s.rank()],
            limit: s.dims().to_vec(),
            strides: vec![1; s.rank()],
        };
        (attrs.start[a], attrs.limit[a], attrs.strides[a]) = (start, limit, stride);
        self.builder()
            .emit(OpKind::Slice(Box::new(attrs)), &[self], None, loc)
    }
}

/// Slice (see `slice_ct`).
pub(crate) fn vjp_slice(n: &Node) -> Grads {
    let OpKind::Slice(a) = n.kind else {
        return Err("not a slice".into());
    };
    Ok(arrays(vec![Some(slice_ct(a, n, &n.ct()))]))
}

/// Slice: the cotangent put back where the elements came from, zeros elsewhere.
fn slice_ct(a: &SliceAttrs, n: &crate::autodiff::Node, ct: &Op) -> Op {
    let xd = n.operands[0].dims().unwrap_or_default();
    let cd = ct.dims().unwrap_or_default();
    let config: Vec<PadDim> = (0..xd.len())
        .map(|i| {
            let (s, st, c) = (a.start[i], a.strides[i], cd[i]);
            let last = if c > 0 { s + (c - 1) * st + 1 } else { s };
            PadDim {
                lo: s,
                hi: xd[i] - last,
                interior: if c > 0 { st - 1 } else { 0 },
            }
        })
        .collect();
    pad_zeros(ct, &config, n.loc)
}

#[cfg(test)]
mod slice_tests {
    use super::*;

    #[test]
    fn slice_rule() {
        let s = SliceAttrs {
            start: vec![1, 0],
            limit: vec![5, 3],
            strides: vec![2, 1],
        };
        assert_eq!(infer_slice(&f(&[6, 3]), &s).unwrap(), f(&[2, 3]));
        let bad = SliceAttrs {
            limit: vec![7, 3],
            ..s.clone()
        };
        assert_eq!(
            infer_slice(&f(&[6, 3]), &bad).unwrap_err().kind,
            ShapeErrorKind::Dimension
        );
        let bad = SliceAttrs {
            strides: vec![0, 1],
            ..s
        };
        assert_eq!(
            infer_slice(&f(&[6, 3]), &bad).unwrap_err().kind,
            ShapeErrorKind::Attribute
        );
    }
}

// ---------------------------------------------------------------------------------
// `dynamic-slice`

/// Dynamic-slice rule: an array, one integer scalar start index per axis (clamped
/// into range at run time), and `0 <= size <= dim` per axis; the result has `sizes`.
pub fn infer_dynamic_slice(operands: &[&Shape], sizes: &[i64]) -> Result<Shape, ShapeError> {
    let Some(operand) = operands.first() else {
        return Err(err(
            "dynamic-slice",
            operands,
            ShapeErrorKind::Arity,
            "needs an operand".into(),
        ));
    };
    let (ty, dims) = array_of("dynamic-slice", operand)?;
    check_indices("dynamic-slice", operands, 1, dims.len())?;
    if sizes.len() != dims.len() || sizes.iter().zip(dims).any(|(s, d)| *s < 0 || s > d) {
        return Err(err(
            "dynamic-slice",
            operands,
            ShapeErrorKind::Dimension,
            format!("slice sizes {sizes:?} must be within the operand's dimensions {dims:?}"),
        ));
    }
    Ok(Shape::array(ty, sizes))
}

pub(crate) fn shape_dynamic_slice(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::DynamicSlice { sizes } = kind else {
        return Err(super::table::not_for("dynamic-slice", kind));
    };
    infer_dynamic_slice(cx.operands, sizes)
}

pub(crate) fn lower_dynamic_slice(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::DynamicSlice { sizes } = kind {
        p.dynamic_slice_sizes = sizes.to_vec();
    }
}

pub(crate) fn raise_dynamic_slice(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::DynamicSlice {
        sizes: p.dynamic_slice_sizes.as_slice().into(),
    })
}

pub(crate) fn text_dynamic_slice(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::DynamicSlice { sizes } = kind {
        out.list("dynamic_slice_sizes", sizes);
    }
}

impl Op {
    /// The start indices as JAX's `lax.dynamic_slice` and `dynamic_update_slice`
    /// read them: a negative signed start counts from the end of its axis (`-1` is
    /// the last index); XLA then clamps the block inside. Starts of other types,
    /// or of a failed operand, pass unchanged (the instruction's rule reports them).
    fn wrapped_starts(&self, start: &[&Op], loc: &'static Location<'static>) -> Vec<Op> {
        let dims = self.dims().unwrap_or_default();
        start
            .iter()
            .enumerate()
            .map(|(axis, s)| match (s.element_type(), dims.get(axis)) {
                (Ok(t), Some(&d)) if t.is_signed_int() && s.rank().ok() == Some(0) => {
                    let from_end =
                        s.binary_scalar(crate::BinaryOp::Add, crate::Scalar::Int(d), false, loc);
                    let negative = s.on(loc).lt(0);
                    s.builder().on(loc).select(&negative, &from_end, s)
                }
                _ => (*s).clone(),
            })
            .collect()
    }

    /// JAX's `lax.dynamic_slice`: a block of `sizes` starting at `start` (one
    /// integer scalar per axis, computed at run time). A negative start counts from
    /// the end of its axis, and the block is then clamped to stay inside:
    /// `dynamic_slice` of `[0, 1, 2, 3, 4]` at `-1` with size 2 is `[3, 4]`.
    /// [`dynamic_slice_clamped`](Self::dynamic_slice_clamped) is XLA's own form.
    #[track_caller]
    pub fn dynamic_slice(&self, start: &[&Op], sizes: &[i64]) -> Op {
        let loc = Location::caller();
        let wrapped = self.wrapped_starts(start, loc);
        let refs: Vec<&Op> = wrapped.iter().collect();
        self.on(loc).dynamic_slice_clamped(&refs, sizes)
    }

    /// XLA's DynamicSlice: a block of `sizes` starting at `start` (one integer
    /// scalar per axis, computed at run time; clamped so the block stays inside, a
    /// negative start to 0).
    #[track_caller]
    pub fn dynamic_slice_clamped(&self, start: &[&Op], sizes: &[i64]) -> Op {
        let loc = Location::caller();
        let operands: Vec<&Op> = std::iter::once(self).chain(start.iter().copied()).collect();
        self.builder().emit(
            OpKind::DynamicSlice {
                sizes: sizes.into(),
            },
            &operands,
            None,
            loc,
        )
    }
}

/// DynamicSlice (see `dynamic_slice_cts`).
pub(crate) fn vjp_dynamic_slice(n: &Node) -> Grads {
    Ok(arrays(dynamic_slice_cts(n, &n.ct())))
}

/// DynamicSlice: the cotangent written into zeros at the (clamped) start.
fn dynamic_slice_cts(n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let starts: Vec<&Op> = n.operands[1..].iter().collect();
    let zeros = crate::autodiff::zeros_like(&n.operands[0], n.loc);
    // A block of no element sends nothing back (and an empty update is refused).
    let empty = |o: &Op| o.dims().is_ok_and(|d| d.contains(&0));
    let back = if empty(ct) || empty(&zeros) {
        zeros
    } else {
        zeros.dynamic_update_slice_clamped(ct, &starts)
    };
    let mut out = vec![Some(back)];
    out.extend(std::iter::repeat_n(None, starts.len()));
    out
}

#[cfg(test)]
mod dynamic_slice_tests {
    use super::*;

    #[test]
    fn dynamic_rules() {
        let i = Shape::of::<i32>(&[]);
        assert_eq!(
            infer_dynamic_slice(&[&f(&[4, 5]), &i, &i], &[2, 5]).unwrap(),
            f(&[2, 5])
        );
        assert!(infer_dynamic_slice(&[&f(&[4, 5]), &i], &[2, 5]).is_err());
        assert!(infer_dynamic_slice(&[&f(&[4, 5]), &i, &f(&[])], &[2, 5]).is_err());
        assert!(infer_dynamic_slice(&[&f(&[4, 5]), &i, &i], &[5, 5]).is_err());
        assert!(infer_dynamic_slice(&[], &[]).is_err());
        assert_eq!(
            infer_dynamic_update_slice(&[&f(&[4, 5]), &f(&[1, 5]), &i, &i]).unwrap(),
            f(&[4, 5])
        );
        assert!(infer_dynamic_update_slice(&[&f(&[4, 5]), &f(&[1, 6]), &i, &i]).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `dynamic-update-slice` (its rule is tested with `dynamic-slice`'s)

/// Dynamic-update-slice rule: an array, an update of its rank and type no larger on
/// any axis, and one integer scalar start index per axis; the result is the operand's
/// shape.
pub fn infer_dynamic_update_slice(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    const OP: &str = "dynamic-update-slice";
    if operands.len() < 2 {
        return Err(err(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "needs an operand and an update".into(),
        ));
    }
    let (ty, dims) = array_of(OP, operands[0])?;
    let (ut, ud) = array_of(OP, operands[1])?;
    if ut != ty {
        return Err(err(
            OP,
            operands,
            ShapeErrorKind::ElementType,
            format!("the update is {ut}, the operand {ty}"),
        ));
    }
    if ud.len() != dims.len() || ud.iter().zip(dims).any(|(u, d)| u > d) {
        return Err(err(
            OP,
            operands,
            ShapeErrorKind::Dimension,
            "the update must have the operand's rank and fit inside it".into(),
        ));
    }
    check_indices(OP, operands, 2, dims.len())?;
    if ud.contains(&0) {
        // XLA's simplifier aborts the process on an empty update (found by the
        // fuzzer, seed 503852); it would change nothing anyway.
        return Err(err(
            OP,
            operands,
            ShapeErrorKind::Dimension,
            "an empty update changes nothing (and XLA aborts on it): leave the operand as it is"
                .into(),
        ));
    }
    Ok(operands[0].clone())
}

pub(crate) fn shape_dynamic_update_slice(
    _: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    infer_dynamic_update_slice(cx.operands)
}

pub(crate) fn raise_dynamic_update_slice(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::DynamicUpdateSlice)
}

impl Op {
    /// JAX's `lax.dynamic_update_slice`: this array with `update` written at
    /// `start` (one integer scalar per axis; a negative start counts from the end
    /// of its axis, and the block is then clamped to stay inside).
    /// [`dynamic_update_slice_clamped`](Self::dynamic_update_slice_clamped) is
    /// XLA's own form.
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Op, start: &[&Op]) -> Op {
        let loc = Location::caller();
        let wrapped = self.wrapped_starts(start, loc);
        let refs: Vec<&Op> = wrapped.iter().collect();
        self.on(loc).dynamic_update_slice_clamped(update, &refs)
    }

    /// XLA's DynamicUpdateSlice: this array with `update` written at `start` (one
    /// integer scalar per axis, clamped so the block stays inside, a negative start
    /// to 0).
    #[track_caller]
    pub fn dynamic_update_slice_clamped(&self, update: &Op, start: &[&Op]) -> Op {
        let loc = Location::caller();
        let operands: Vec<&Op> = [self, update]
            .into_iter()
            .chain(start.iter().copied())
            .collect();
        self.builder()
            .emit(OpKind::DynamicUpdateSlice, &operands, None, loc)
    }
}

/// DynamicUpdateSlice (see `dynamic_update_slice_cts`).
pub(crate) fn vjp_dynamic_update_slice(n: &Node) -> Grads {
    Ok(arrays(dynamic_update_slice_cts(n, &n.ct())))
}

/// DynamicUpdateSlice: the operand gets the cotangent outside the block, the update
/// the block.
fn dynamic_update_slice_cts(n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let (u, loc) = (&n.operands[1], n.loc);
    let starts: Vec<&Op> = n.operands[2..].iter().collect();
    let ct_x = ct.dynamic_update_slice_clamped(&crate::autodiff::zeros_like(u, loc), &starts);
    let ct_u = ct.dynamic_slice_clamped(&starts, &u.dims().unwrap_or_default());
    let mut out = vec![Some(ct_x), Some(ct_u)];
    out.extend(std::iter::repeat_n(None, starts.len()));
    out
}

// ---------------------------------------------------------------------------------
// `concatenate`

/// Concatenate rule: one or more arrays of one element type and rank, equal on every
/// axis but `dimension`, where the sizes add up.
pub fn infer_concatenate(operands: &[&Shape], dimension: i64) -> Result<Shape, ShapeError> {
    const OP: &str = "concatenate";
    let Some(first) = operands.first() else {
        return Err(err(
            OP,
            operands,
            ShapeErrorKind::Arity,
            "needs at least one operand".into(),
        ));
    };
    let (ty, dims) = array_of(OP, first)?;
    let axis = check_axis(OP, first, dimension)?;
    let mut out = dims.to_vec();
    out[axis] = 0;
    for s in operands {
        let (t, d) = array_of(OP, s)?;
        if t != ty {
            return Err(err(
                OP,
                operands,
                ShapeErrorKind::ElementType,
                format!("element types differ ({ty} vs {t})"),
            ));
        }
        if d.len() != dims.len() || (0..d.len()).any(|i| i != axis && d[i] != dims[i]) {
            return Err(err(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                format!("operands must agree on every axis but {axis}"),
            ));
        }
        out[axis] = out[axis].checked_add(d[axis]).ok_or_else(|| {
            err(
                OP,
                operands,
                ShapeErrorKind::Dimension,
                "the size overflows".into(),
            )
        })?;
    }
    Ok(Shape::array(ty, &out))
}

pub(crate) fn shape_concatenate(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Concatenate { dimension } = kind else {
        return Err(super::table::not_for("concatenate", kind));
    };
    infer_concatenate(cx.operands, *dimension)
}

pub(crate) fn lower_concatenate(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::Concatenate { dimension } = kind {
        p.dimensions = vec![*dimension];
    }
}

pub(crate) fn raise_concatenate(
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Concatenate {
        dimension: cx.one_dimension(p)?,
    })
}

pub(crate) fn text_concatenate(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Concatenate { dimension } = kind {
        out.list("dimensions", &[*dimension]);
    }
}

impl Builder {
    /// XLA's ConcatInDim: joins arrays along `axis` (negative counts from the end).
    #[track_caller]
    pub fn concatenate(&self, operands: &[&Op], axis: i64) -> Op {
        let loc = Location::caller();
        if let Err(failed) = self.target(operands, "concatenate", loc) {
            return failed;
        }
        let axis = match operands.first().map(|o| o.shape()) {
            Some(Ok(s)) if s.is_array() => match resolve_axis("concatenate", &s, axis) {
                Ok(a) => a as i64,
                Err(e) => return self.fail(e, loc),
            },
            _ => axis,
        };
        self.emit(OpKind::Concatenate { dimension: axis }, operands, None, loc)
    }
}

/// Concatenate (see `concatenate_cts`).
pub(crate) fn vjp_concatenate(n: &Node) -> Grads {
    let OpKind::Concatenate { dimension } = n.kind else {
        return Err("not a concatenate".into());
    };
    Ok(arrays(concatenate_cts(*dimension, n, &n.ct())))
}

/// Concatenate: each operand gets its stretch of the cotangent.
fn concatenate_cts(axis: i64, n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let cd = ct.dims().unwrap_or_default();
    let mut at = 0;
    n.operands
        .iter()
        .map(|x| {
            let len = x.dims().map(|d| d[axis as usize]).unwrap_or(0);
            let mut start = vec![0; cd.len()];
            let mut limit = cd.clone();
            start[axis as usize] = at;
            limit[axis as usize] = at + len;
            at += len;
            Some(ct.slice(&start, &limit, &vec![1; cd.len()]))
        })
        .collect()
}

#[cfg(test)]
mod concatenate_pad_reverse_tests {
    use super::*;

    #[test]
    fn concatenate_pad_reverse_rules() {
        assert_eq!(
            infer_concatenate(&[&f(&[2, 3]), &f(&[2, 1])], 1).unwrap(),
            f(&[2, 4])
        );
        assert!(infer_concatenate(&[&f(&[2, 3]), &f(&[3, 1])], 1).is_err());
        assert!(infer_concatenate(&[], 0).is_err());
        let z = f(&[]);
        let p = |lo, hi, interior| PadDim { lo, hi, interior };
        assert_eq!(infer_pad(&f(&[3]), &z, &[p(1, 2, 1)]).unwrap(), f(&[8]));
        assert_eq!(infer_pad(&f(&[3]), &z, &[p(-1, -1, 0)]).unwrap(), f(&[1]));
        assert!(infer_pad(&f(&[3]), &z, &[p(-2, -2, 0)]).is_err());
        assert!(infer_pad(&f(&[0]), &z, &[p(0, 0, 3)]).is_ok());
        assert!(infer_reverse(&f(&[2, 3]), &[1, 1]).is_err());
        // An instruction's axes are 0..rank: XLA refuses -1 ("One of the reverse
        // dimensions (-1) is out-of-bounds", tests/rules_vs_xla.rs); `reverse` and
        // `concatenate` resolve negative axes before emitting.
        assert!(infer_reverse(&f(&[2, 3]), &[-1]).is_err());
        assert!(infer_concatenate(&[&f(&[2, 3]), &f(&[2, 1])], -1).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `pad` (its rule is tested with `concatenate`'s)

pub use crate::ir::attrs::PadDim;

/// Pad rule: an array and a scalar padding value of its type, one [`PadDim`] per
/// axis with `interior >= 0`; each axis becomes `lo + hi + size + interior *
/// (size - 1)` (for size > 0), which must not be negative.
pub fn infer_pad(operand: &Shape, value: &Shape, config: &[PadDim]) -> Result<Shape, ShapeError> {
    const OP: &str = "pad";
    let (ty, dims) = array_of(OP, operand)?;
    let (vt, vd) = array_of(OP, value)?;
    if vt != ty || !vd.is_empty() {
        return Err(err(
            OP,
            &[operand, value],
            ShapeErrorKind::ElementType,
            format!("the padding value must be a {ty} scalar, got {value}"),
        ));
    }
    if config.len() != dims.len() {
        return Err(err(
            OP,
            &[operand, value],
            ShapeErrorKind::Attribute,
            format!("{} padding entries for rank {}", config.len(), dims.len()),
        ));
    }
    let mut out = Vec::with_capacity(dims.len());
    for (i, (p, d)) in config.iter().zip(dims).enumerate() {
        let bad = |r: String| err(OP, &[operand, value], ShapeErrorKind::Dimension, r);
        if p.interior < 0 {
            return Err(err(
                OP,
                &[operand, value],
                ShapeErrorKind::Attribute,
                format!("interior padding {} on axis {i} is negative", p.interior),
            ));
        }
        let inner = (*d - 1).max(0).checked_mul(p.interior);
        let size = inner
            .and_then(|x| x.checked_add(*d))
            .and_then(|x| x.checked_add(p.lo))
            .and_then(|x| x.checked_add(p.hi))
            .ok_or_else(|| bad(format!("axis {i}'s size overflows")))?;
        if size < 0 {
            return Err(bad(format!("axis {i} would have {size} elements")));
        }
        out.push(size);
    }
    Ok(Shape::array(ty, &out))
}

pub(crate) fn shape_pad(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Pad(c) = kind else {
        return Err(super::table::not_for("pad", kind));
    };
    infer_pad(cx.operands[0], cx.operands[1], c)
}

pub(crate) fn lower_pad(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    let OpKind::Pad(c) = kind else { return };
    p.padding_config = Some(proto::PaddingConfig {
        dimensions: c
            .iter()
            .map(|d| proto::padding_config::PaddingConfigDimension {
                edge_padding_low: d.lo,
                edge_padding_high: d.hi,
                interior_padding: d.interior,
            })
            .collect(),
    });
}

pub(crate) fn raise_pad(p: &proto::HloInstructionProto, _: &RaiseCx<'_>) -> Result<OpKind, String> {
    let config: Vec<PadDim> = p
        .padding_config
        .as_ref()
        .map(|c| {
            c.dimensions
                .iter()
                .map(|d| PadDim {
                    lo: d.edge_padding_low,
                    hi: d.edge_padding_high,
                    interior: d.interior_padding,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(OpKind::Pad(config.into()))
}

pub(crate) fn text_pad(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    let OpKind::Pad(c) = kind else { return };
    let mut t = String::new();
    for (i, d) in c.iter().enumerate() {
        if i > 0 {
            t.push('x');
        }
        let _ = write!(t, "{}_{}_{}", d.lo, d.hi, d.interior);
    }
    out.attr("padding", t);
}

impl Op {
    /// XLA's Pad: `config[i]` elements of `value` (a scalar of this type) before,
    /// after and between the elements of axis `i`; negative edges cut.
    #[track_caller]
    pub fn pad(&self, value: &Op, config: &[PadDim]) -> Op {
        self.builder().emit(
            OpKind::Pad(config.into()),
            &[self, value],
            None,
            Location::caller(),
        )
    }
}

/// Pad (see `pad_cts`).
pub(crate) fn vjp_pad(n: &Node) -> Grads {
    let OpKind::Pad(config) = n.kind else {
        return Err("not a pad".into());
    };
    Ok(arrays(pad_cts(config, n, &n.ct())))
}

/// Pad: the operand's elements picked out of the cotangent (undoing the edges, then
/// striding over the interior); the padding value gets the rest.
fn pad_cts(config: &[PadDim], n: &crate::autodiff::Node, ct: &Op) -> Vec<Option<Op>> {
    let loc = n.loc;
    let unedged: Vec<PadDim> = config
        .iter()
        .map(|p| PadDim {
            lo: -p.lo,
            hi: -p.hi,
            interior: 0,
        })
        .collect();
    let t = pad_zeros(ct, &unedged, loc);
    let td = t.dims().unwrap_or_default();
    let ct_x = t.slice(
        &vec![0; td.len()],
        &td,
        &config.iter().map(|p| p.interior + 1).collect::<Vec<_>>(),
    );
    let all: Vec<i64> = (0..td.len() as i64).collect();
    let ct_v = ct.reduce_by(&all, crate::BinaryOp::Add, loc).binary(
        crate::BinaryOp::Subtract,
        &ct_x.reduce_by(&all, crate::BinaryOp::Add, loc),
        loc,
    );
    vec![Some(ct_x), Some(ct_v)]
}

// ---------------------------------------------------------------------------------
// `reverse` (its rule is tested with `concatenate`'s)

/// Reverse rule: distinct axes in range; the shape is unchanged.
pub fn infer_reverse(operand: &Shape, axes: &[i64]) -> Result<Shape, ShapeError> {
    array_of("reverse", operand)?;
    check_axes("reverse", operand, axes)?;
    Ok(operand.clone())
}

pub(crate) fn shape_reverse(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Reverse { axes } = kind else {
        return Err(super::table::not_for("reverse", kind));
    };
    infer_reverse(cx.operands[0], axes)
}

pub(crate) fn lower_reverse(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Reverse { axes } = kind {
        p.dimensions = axes.to_vec();
    }
}

pub(crate) fn raise_reverse(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Reverse {
        axes: p.dimensions.as_slice().into(),
    })
}

pub(crate) fn text_reverse(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Reverse { axes } = kind {
        out.list("dimensions", axes);
    }
}

impl Op {
    /// XLA's Rev: reverses the order of elements along `axes`.
    #[track_caller]
    pub fn reverse(&self, axes: &[i64]) -> Op {
        let loc = Location::caller();
        let axes: Vec<i64> = match self.shape() {
            Ok(s) => match resolve_axes("reverse", &s, axes) {
                Ok(a) => a.into_iter().map(|a| a as i64).collect(),
                Err(e) => return self.builder().fail(e, loc),
            },
            Err(_) => return self.clone(),
        };
        self.builder()
            .emit(OpKind::Reverse { axes: axes.into() }, &[self], None, loc)
    }
}

/// Reverse (see `reverse_ct`).
pub(crate) fn vjp_reverse(n: &Node) -> Grads {
    let OpKind::Reverse { axes } = n.kind else {
        return Err("not a reverse".into());
    };
    Ok(arrays(vec![Some(reverse_ct(axes, n, &n.ct()))]))
}

/// Reverse: the cotangent reversed the same way.
fn reverse_ct(axes: &[i64], n: &crate::autodiff::Node, ct: &Op) -> Op {
    ct.builder()
        .emit(OpKind::Reverse { axes: axes.into() }, &[ct], None, n.loc)
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: a full slice of the batch axis, the rest as for one example.
pub(crate) fn batch_slice(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Slice(a) = n.kind else {
        return Err("not a slice".into());
    };
    let mut a = (**a).clone();
    a.start.insert(0, 0);
    a.limit.insert(0, n.size);
    a.strides.insert(0, 1);
    crate::batching::shifted(n, OpKind::Slice(Box::new(a)))
}

/// Batching: a batched operand with the same start for every example (a start
/// of 0 and the whole batch along the batch axis); starts that differ per example
/// by a gather ([`dynamic_slice_by_gather`]).
pub(crate) fn batch_dynamic_slice(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::DynamicSlice { sizes } = n.kind else {
        return Err("not a dynamic-slice".into());
    };
    if n.operands[1..].iter().any(|v| v.is_batched()) {
        return dynamic_slice_by_gather(n, sizes);
    }
    let x = n.front(0)?;
    let starts: Vec<Op> = n.operands[1..]
        .iter()
        .map(|v| v.array().map(|(o, _)| o.clone()))
        .collect::<Result<_, _>>()?;
    let zero = starts[0].full_like(0.0);
    let mut ops = vec![x, zero];
    ops.extend(starts);
    let mut s = vec![n.size];
    s.extend(sizes.iter());
    crate::batching::emit_front_ops(n, OpKind::DynamicSlice { sizes: s.into() }, &ops)
}

/// Batching: batched operand and update with the same start for every example;
/// starts that differ per example by a scatter
/// ([`dynamic_update_slice_by_scatter`]).
pub(crate) fn batch_dynamic_update_slice(
    n: &crate::batching::BatchNode,
) -> crate::batching::Batched {
    if n.operands[2..].iter().any(|v| v.is_batched()) {
        return dynamic_update_slice_by_scatter(n);
    }
    let (x, u) = (n.front(0)?, n.front(1)?);
    let starts: Vec<Op> = n.operands[2..]
        .iter()
        .map(|v| v.array().map(|(o, _)| o.clone()))
        .collect::<Result<_, _>>()?;
    let zero = starts[0].full_like(0.0);
    let mut ops = vec![x, u, zero];
    ops.extend(starts);
    crate::batching::emit_front_ops(n, OpKind::DynamicUpdateSlice, &ops)
}

/// Batching: joined along the axis one on.
pub(crate) fn batch_concatenate(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Concatenate { dimension } = n.kind else {
        return Err("not a concatenate".into());
    };
    crate::batching::shifted(
        n,
        OpKind::Concatenate {
            dimension: dimension + 1,
        },
    )
}

/// Batching: no padding on the batch axis; the padding value must be the same for
/// every example.
pub(crate) fn batch_pad(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Pad(dims) = n.kind else {
        return Err("not a pad".into());
    };
    let mut d = vec![PadDim {
        lo: 0,
        hi: 0,
        interior: 0,
    }];
    d.extend(dims.iter().copied());
    if n.operands[1].is_batched() {
        // A padding value per example: pad with zeros, pad a mask of the operand's
        // elements the same way, and take each example's value where the mask is
        // off (one select more than the unbatched form).
        let loc = n.loc;
        let x = n.front(0)?;
        let xd = x.dims().map_err(|e| e.to_string())?;
        let ty = x.element_type().map_err(|e| e.to_string())?;
        let b = n.b.on(loc);
        let zero = b.scalar_of(ty, crate::Scalar::Int(0), loc);
        let padded = x.on(loc).pad(&zero, &d);
        let inside = b.constant(true).on(loc).broadcast_to(&xd);
        let mask = inside.on(loc).pad(&b.constant(false), &d);
        let out = padded.dims().map_err(|e| e.to_string())?;
        let value = n.front(1)?.on(loc).broadcast_in_dim(&out, &[0]);
        let r = b.select(&mask, &padded, &value);
        if let Some(e) = crate::batching::failure(&r) {
            return Err(e);
        }
        return Ok(vec![crate::batching::BVal::at(r, 0)]);
    }
    let v = n.operands[1].array()?.0.clone();
    crate::batching::emit_front_ops(n, OpKind::Pad(d.into()), &[n.front(0)?, v])
}

/// Batching: the reversed axes move one on.
pub(crate) fn batch_reverse(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Reverse { axes } = n.kind else {
        return Err("not a reverse".into());
    };
    crate::batching::shifted(
        n,
        OpKind::Reverse {
            axes: crate::batching::plus_one(axes),
        },
    )
}

/// Tangent: linear.
pub(crate) fn jvp_slice(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear in the operand (the starts fixed).
pub(crate) fn jvp_dynamic_slice(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear in the operand and the update together.
pub(crate) fn jvp_dynamic_update_slice(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear.
pub(crate) fn jvp_concatenate(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear in the operand and the padding value together.
pub(crate) fn jvp_pad(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear.
pub(crate) fn jvp_reverse(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// The start indices `n.operands[first..]` (scalars, some batched) clamped as
/// XLA clamps a dynamic slice's starts (to `0..=dim - size` on each axis, `room`
/// giving `dim - size`), as one `[batch, rank]` array of index vectors, with the
/// example's position as a first entry when `with_example`.
fn batched_starts(
    n: &crate::batching::BatchNode,
    first: usize,
    room: &[i64],
    with_example: bool,
) -> Result<Op, String> {
    let ty = n.operands[first]
        .array()?
        .0
        .element_type()
        .map_err(|e| e.to_string())?;
    let mut cols = Vec::with_capacity(room.len() + 1);
    if with_example {
        cols.push(n.b.iota(ty, &[n.size, 1], 0));
    }
    for (k, r) in room.iter().enumerate() {
        let s = n.front(first + k)?.convert(ty);
        let c = s.clamp(&s.full_like(0.0), &s.full_like(*r as f64));
        cols.push(c.reshape(&[n.size, 1]));
    }
    let refs: Vec<&Op> = cols.iter().collect();
    Ok(n.b.concatenate(&refs, 1))
}

/// Batching of a dynamic slice whose starts differ per example: a gather of one
/// block per example at the clamped starts (so every example gets what its own
/// dynamic slice gives): from a shared operand as it is, from a batched one (at
/// 0) with the example's position prepended to the starts.
pub(crate) fn dynamic_slice_by_gather(
    n: &crate::batching::BatchNode,
    sizes: &[i64],
) -> crate::batching::Batched {
    let batched = n.operands[0].is_batched();
    let x = if batched {
        n.front(0)?
    } else {
        n.operands[0].array()?.0.clone()
    };
    let dims = x.dims().map_err(|e| e.to_string())?;
    let one = &dims[usize::from(batched)..];
    let room: Vec<i64> = one.iter().zip(sizes).map(|(d, s)| d - s).collect();
    let idx = batched_starts(n, 1, &room, batched)?;
    let r = sizes.len() as i64;
    let lead = i64::from(batched);
    let gd = super::indexing::GatherDims {
        offset_dims: (1..=r).collect(),
        collapsed_slice_dims: if batched { vec![0] } else { vec![] },
        start_index_map: (0..r + lead).collect(),
        index_vector_dim: 1,
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
    };
    let mut slice = if batched { vec![1] } else { vec![] };
    slice.extend(sizes);
    let attrs = super::indexing::GatherAttrs {
        dims: gd,
        slice_sizes: slice,
        indices_are_sorted: false,
    };
    n.emit_front(OpKind::Gather(Box::new(attrs)), &[x, idx])
}

/// Batching of a dynamic update slice whose starts differ per example: a
/// scatter that replaces, each example's update window into its own operand at
/// its clamped starts (XLA clamps the starts so the update fits, as here).
pub(crate) fn dynamic_update_slice_by_scatter(
    n: &crate::batching::BatchNode,
) -> crate::batching::Batched {
    let (x, u) = (n.front(0)?, n.front(1)?);
    let xd = x.dims().map_err(|e| e.to_string())?;
    let ud = u.dims().map_err(|e| e.to_string())?;
    let room: Vec<i64> = xd[1..].iter().zip(&ud[1..]).map(|(d, s)| d - s).collect();
    let idx = batched_starts(n, 2, &room, true)?;
    let r = room.len() as i64;
    let sd = super::indexing::ScatterDims {
        update_window_dims: (1..=r).collect(),
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: (0..=r).collect(),
        index_vector_dim: 1,
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
    };
    // Each update lands on its own window (the first index is the example's):
    // the indices are unique, the new value replaces the old.
    let out = n.b.scatter(&[&x], &idx, &[&u], &sd, false, true, |_, new| {
        vec![new[0].clone()]
    });
    if let Some(e) = crate::batching::failure(&out[0]) {
        return Err(e);
    }
    Ok(vec![crate::batching::BVal::at(out[0].clone(), 0)])
}
