//! Shape and layout ops: broadcast, reshape, transpose, convert, tuple access.
use super::{array_of, check_axes, resolve_axes};
use crate::autodiff::{Ct, Grads, Node, arrays};
use crate::builder::Op;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::{InferCx, LowerCx, OpKind, OpText, RaiseCx, TextCx};
use crate::proto;
use crate::shape::{ElementType, Shape};
use std::panic::Location;
// ---------------------------------------------------------------------------------
// Shape rules.

// ---------------------------------------------------------------------------------
// `broadcast` (BroadcastInDim, numpy's `broadcast_to`)

/// XLA's `broadcast` (BroadcastInDim) rule: operand dimension `i` becomes output
/// dimension `dims[i]`, with the same size; `dims` distinct (in any order: XLA and
/// `lax.broadcast_in_dim` accept a permuting list).
pub fn infer_broadcast_in_dim(
    operand: &Shape,
    out_dims: &[i64],
    dims: &[i64],
) -> Result<Shape, ShapeError> {
    let (ty, od) = array_of("broadcast", operand)?;
    let err = |k: ShapeErrorKind, r: String| ShapeError::new("broadcast", &[operand], k, r);
    if dims.len() != od.len() {
        return Err(err(
            ShapeErrorKind::Attribute,
            format!(
                "broadcast_dimensions {dims:?} must name one output axis per operand axis ({})",
                od.len()
            ),
        ));
    }
    if out_dims.iter().any(|d| *d < 0) {
        return Err(err(
            ShapeErrorKind::Dimension,
            format!("negative output dimension in {out_dims:?}"),
        ));
    }
    for (i, d) in dims.iter().enumerate() {
        if *d < 0 || *d as usize >= out_dims.len() {
            return Err(err(
                ShapeErrorKind::Axis,
                format!(
                    "broadcast dimension {d} is out of range for output rank {}",
                    out_dims.len()
                ),
            ));
        }
        if dims[..i].contains(d) {
            return Err(err(
                ShapeErrorKind::Attribute,
                format!("broadcast_dimensions {dims:?} names output axis {d} twice"),
            ));
        }
        if od[i] != out_dims[*d as usize] {
            return Err(err(
                ShapeErrorKind::Dimension,
                format!(
                    "operand axis {i} has size {} but output axis {d} has size {}",
                    od[i], out_dims[*d as usize]
                ),
            ));
        }
    }
    let out = Shape::array(ty, out_dims);
    super::check_size("broadcast", &[operand], &out)?;
    Ok(out)
}

/// The builder-level form of [`infer_broadcast_in_dim`]: an operand axis of size 1
/// may also stretch to any output size (the builder reshapes it away first).
pub fn infer_broadcast_in_dim_stretching(
    operand: &Shape,
    out_dims: &[i64],
    dims: &[i64],
) -> Result<Shape, ShapeError> {
    let (ty, od) = array_of("broadcast", operand)?;
    // Check against a copy of the operand whose size-1 axes already have the
    // output's sizes; errors name the user's operand.
    let mut stretched: Vec<i64> = od.to_vec();
    for (i, d) in dims.iter().enumerate() {
        if i < od.len() && od[i] == 1 && *d >= 0 && (*d as usize) < out_dims.len() {
            stretched[i] = out_dims[*d as usize];
        }
    }
    infer_broadcast_in_dim(&Shape::array(ty, &stretched), out_dims, dims).map_err(|mut e| {
        e.operands = vec![operand.clone()];
        e
    })
}

pub(crate) fn shape_broadcast(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Broadcast { dims } = kind else {
        return Err(super::table::not_for("broadcast", kind));
    };
    infer_broadcast_in_dim(cx.operands[0], cx.target("broadcast")?.dims(), dims)
}

pub(crate) fn lower_broadcast(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Broadcast { dims } = kind {
        p.dimensions = dims.to_vec();
    }
}

pub(crate) fn raise_broadcast(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Broadcast {
        dims: p.dimensions.as_slice().into(),
    })
}

pub(crate) fn text_broadcast(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Broadcast { dims } = kind {
        out.list("dimensions", dims);
    }
}

impl Op {
    /// XLA's BroadcastInDim: operand axis `i` becomes output axis
    /// `broadcast_dimensions[i]` of an array of `out_dims`. An operand axis of size 1
    /// may stretch to any size (as in XLA's builder).
    #[track_caller]
    pub fn broadcast_in_dim(&self, out_dims: &[i64], broadcast_dimensions: &[i64]) -> Op {
        let (loc, bdims) = (Location::caller(), broadcast_dimensions);
        let s = match self.shape() {
            Ok(s) => s,
            Err(_) => return self.clone(),
        };
        if let Err(e) = infer_broadcast_in_dim_stretching(&s, out_dims, bdims) {
            return self.builder().fail(e, loc);
        }
        // Size-1 axes that stretch are reshaped away first: HLO's broadcast needs
        // equal sizes.
        let od = s.dims();
        if od.len() == bdims.len() {
            let stretch: Vec<usize> = (0..od.len())
                .filter(|i| {
                    let d = bdims[*i];
                    od[*i] == 1
                        && d >= 0
                        && (d as usize) < out_dims.len()
                        && out_dims[d as usize] != 1
                })
                .collect();
            if !stretch.is_empty() {
                let keep: Vec<usize> = (0..od.len()).filter(|i| !stretch.contains(i)).collect();
                let kd: Vec<i64> = keep.iter().map(|i| od[*i]).collect();
                let kb: Vec<i64> = keep.iter().map(|i| bdims[*i]).collect();
                return self
                    .on(loc)
                    .reshape(&kd)
                    .on(loc)
                    .broadcast_in_dim(out_dims, &kb);
            }
        }
        let ty = s.element_type().expect("checked by the rule above");
        self.builder().emit(
            OpKind::Broadcast { dims: bdims.into() },
            &[self],
            Some(Shape::array(ty, out_dims)),
            loc,
        )
    }

    /// XLA's Broadcast: adds new major axes of sizes `prefix` in front.
    #[track_caller]
    pub fn broadcast(&self, prefix: &[i64]) -> Op {
        let loc = Location::caller();
        let dims = match self.dims() {
            Ok(d) => d,
            Err(_) => return self.builder().fail_not_array(self, "broadcast", loc),
        };
        let r = dims.len();
        let mut out = prefix.to_vec();
        out.extend(dims);
        let bd: Vec<i64> = (prefix.len()..prefix.len() + r).map(|i| i as i64).collect();
        self.broadcast_in_dim(&out, &bd)
    }

    /// Numpy's `broadcast_to`: aligns axes at the right; size-1 axes stretch.
    #[track_caller]
    pub fn broadcast_to(&self, dims: &[i64]) -> Op {
        let loc = Location::caller();
        let s = match self.shape() {
            Ok(s) if s.is_array() => s,
            _ => return self.builder().fail_not_array(self, "broadcast", loc),
        };
        if s.dims() == dims {
            return self.clone();
        }
        if s.rank() > dims.len() {
            return self.builder().fail(
                ShapeError::new(
                    "broadcast",
                    &[&s],
                    ShapeErrorKind::Rank,
                    format!("cannot broadcast to lower rank {dims:?}"),
                ),
                loc,
            );
        }
        let off = dims.len() - s.rank();
        let bd: Vec<i64> = (off..dims.len()).map(|i| i as i64).collect();
        self.broadcast_in_dim(dims, &bd)
    }
}

/// BroadcastInDim: the cotangent summed over the added axes and over the axes the
/// operand had as 1, then arranged in the operand's axis order.
pub(crate) fn vjp_broadcast(n: &Node) -> Grads {
    let OpKind::Broadcast { dims } = n.kind else {
        return Err("not a broadcast".into());
    };
    Ok(arrays(vec![Some(broadcast_ct(dims, n, &n.ct()))]))
}

fn broadcast_ct(dims: &[i64], n: &Node, ct: &Op) -> Op {
    let (x, loc) = (&n.operands[0], n.loc);
    let (xd, od) = match (x.shape(), n.out().shape()) {
        (Ok(a), Ok(b)) => (a.dims().to_vec(), b.dims().to_vec()),
        _ => return x.clone(),
    };
    let summed: Vec<i64> = (0..od.len() as i64)
        .filter(|a| match dims.iter().position(|d| d == a) {
            None => true,
            Some(i) => xd[i] == 1 && od[*a as usize] != 1,
        })
        .collect();
    let r = if summed.is_empty() {
        ct.clone()
    } else {
        ct.reduce_by(&summed, crate::BinaryOp::Add, loc)
    };
    // The kept axes, in output order, named by operand axis.
    let mut kept: Vec<(i64, usize)> = dims
        .iter()
        .enumerate()
        .filter(|(_, d)| !summed.contains(d))
        .map(|(i, d)| (*d, i))
        .collect();
    kept.sort();
    let order: Vec<usize> = kept.iter().map(|(_, i)| *i).collect();
    let r = if order.windows(2).all(|w| w[0] < w[1]) {
        r
    } else {
        let perm: Vec<i64> = {
            let mut by_operand: Vec<usize> = order.clone();
            by_operand.sort();
            by_operand
                .iter()
                .map(|i| order.iter().position(|o| o == i).expect("kept") as i64)
                .collect()
        };
        r.transpose(&perm)
    };
    r.reshape(&xd)
}

#[cfg(test)]
fn f(d: &[i64]) -> Shape {
    Shape::of::<f32>(d)
}

#[cfg(test)]
mod broadcast_tests {
    use super::*;

    #[test]
    fn broadcast_in_dim_rule() {
        assert_eq!(
            infer_broadcast_in_dim(&f(&[3]), &[2, 3], &[1]).unwrap(),
            f(&[2, 3])
        );
        assert!(infer_broadcast_in_dim(&f(&[3]), &[2, 3], &[0]).is_err());
        assert!(infer_broadcast_in_dim(&f(&[2, 3]), &[2, 3], &[1, 0]).is_err());
        assert!(infer_broadcast_in_dim(&f(&[2, 3]), &[3, 2], &[1, 0]).is_ok());
        assert!(infer_broadcast_in_dim(&f(&[2, 2]), &[2, 2], &[0, 0]).is_err());
        assert!(infer_broadcast_in_dim(&f(&[3]), &[3], &[1]).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `reshape`

/// Reshape rule: the element count is kept; one dimension may be `-1` (inferred).
pub fn infer_reshape(operand: &Shape, new_dims: &[i64]) -> Result<Shape, ShapeError> {
    let (ty, od) = array_of("reshape", operand)?;
    let err = |r: String| ShapeError::new("reshape", &[operand], ShapeErrorKind::Dimension, r);
    let count: i64 = od
        .iter()
        .try_fold(1i64, |a, d| a.checked_mul(*d))
        .ok_or_else(|| err("the operand's element count overflows".to_string()))?;
    let mut dims = new_dims.to_vec();
    let inferred: Vec<usize> = dims
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == -1)
        .map(|(i, _)| i)
        .collect();
    if inferred.len() > 1 {
        return Err(err(format!("only one dimension may be -1 in {new_dims:?}")));
    }
    if dims.iter().any(|d| *d < -1) {
        return Err(err(format!("negative dimension in {new_dims:?}")));
    }
    let known = dims
        .iter()
        .filter(|d| **d != -1)
        .try_fold(1i64, |a, d| a.checked_mul(*d))
        .ok_or_else(|| err(format!("{new_dims:?} overflows")))?;
    if let Some(i) = inferred.first() {
        if known == 0 || count % known != 0 {
            return Err(err(format!(
                "cannot infer the -1 in {new_dims:?} for {count} elements"
            )));
        }
        dims[*i] = count / known;
    } else if known != count {
        return Err(err(format!(
            "{new_dims:?} holds {known} elements, the operand {count}"
        )));
    }
    Ok(Shape::array(ty, &dims))
}

pub(crate) fn shape_reshape(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    infer_reshape(cx.operands[0], cx.target("reshape")?.dims())
}

pub(crate) fn raise_reshape(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Reshape)
}

impl Op {
    /// Reshape to `dims` (row-major order kept); one entry may be `-1`.
    #[track_caller]
    pub fn reshape(&self, dims: &[i64]) -> Op {
        let loc = Location::caller();
        // The rule resolves a -1; the target carries the requested dims.
        let ty = self.element_type().unwrap_or(ElementType::F32);
        self.builder()
            .emit(OpKind::Reshape, &[self], Some(Shape::array(ty, dims)), loc)
    }
}

/// Reshape: the cotangent reshaped back.
pub(crate) fn vjp_reshape(n: &Node) -> Grads {
    let g = match n.operands[0].dims() {
        Ok(d) => n.ct().reshape(&d),
        Err(_) => n.operands[0].clone(),
    };
    Ok(arrays(vec![Some(g)]))
}

#[cfg(test)]
mod reshape_tests {
    use super::*;

    #[test]
    fn reshape_rule() {
        assert_eq!(infer_reshape(&f(&[2, 6]), &[3, -1]).unwrap(), f(&[3, 4]));
        assert_eq!(infer_reshape(&f(&[2, 6]), &[12]).unwrap(), f(&[12]));
        assert!(infer_reshape(&f(&[2, 6]), &[5, -1]).is_err());
        assert!(infer_reshape(&f(&[2, 6]), &[-1, -1]).is_err());
        let e = infer_reshape(&f(&[2, 6]), &[7]).unwrap_err();
        assert!(
            e.reason.contains("7 elements") || e.reason.contains("holds 7"),
            "{e}"
        );
    }
}

// ---------------------------------------------------------------------------------
// `transpose`

/// Transpose rule: `perm` is a permutation; output axis `i` is operand axis `perm[i]`.
pub fn infer_transpose(operand: &Shape, perm: &[i64]) -> Result<Shape, ShapeError> {
    let (ty, od) = array_of("transpose", operand)?;
    if perm.len() != od.len() {
        return Err(ShapeError::new(
            "transpose",
            &[operand],
            ShapeErrorKind::Attribute,
            format!(
                "permutation {perm:?} has {} entries for rank {}",
                perm.len(),
                od.len()
            ),
        ));
    }
    let axes = check_axes("transpose", operand, perm)?;
    let dims: Vec<i64> = axes.iter().map(|a| od[*a]).collect();
    Ok(Shape::array(ty, &dims))
}

pub(crate) fn shape_transpose(kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let OpKind::Transpose { perm } = kind else {
        return Err(super::table::not_for("transpose", kind));
    };
    infer_transpose(cx.operands[0], perm)
}

pub(crate) fn lower_transpose(kind: &OpKind, _: &LowerCx<'_>, p: &mut proto::HloInstructionProto) {
    if let OpKind::Transpose { perm } = kind {
        p.dimensions = perm.to_vec();
    }
}

pub(crate) fn raise_transpose(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Transpose {
        perm: p.dimensions.as_slice().into(),
    })
}

pub(crate) fn text_transpose(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::Transpose { perm } = kind {
        out.list("dimensions", perm);
    }
}

impl Op {
    /// Permutes axes: output axis `i` is input axis `perm[i]` (negative axes count
    /// from the end).
    #[track_caller]
    pub fn transpose(&self, perm: &[i64]) -> Op {
        let loc = Location::caller();
        // Negative axes are resolved here; the instruction holds the plain permutation.
        let perm: Vec<i64> = match self.shape() {
            Ok(s) => match resolve_axes("transpose", &s, perm) {
                Ok(axes) if axes.len() == s.rank() => axes.iter().map(|a| *a as i64).collect(),
                _ => perm.to_vec(),
            },
            Err(_) => return self.clone(),
        };
        self.builder()
            .emit(OpKind::Transpose { perm: perm.into() }, &[self], None, loc)
    }

    /// Swaps the last two axes (matrix transpose, batched).
    #[track_caller]
    pub fn t(&self) -> Op {
        let loc = Location::caller();
        let r = match self.rank() {
            Ok(r) => r as i64,
            Err(_) => return self.builder().fail_not_array(self, "transpose", loc),
        };
        if r < 2 {
            return self.on(loc).transpose(&(0..r).collect::<Vec<_>>());
        }
        let mut p: Vec<i64> = (0..r).collect();
        p.swap(r as usize - 1, r as usize - 2);
        self.transpose(&p)
    }
}

/// Transpose: the inverse permutation.
pub(crate) fn vjp_transpose(n: &Node) -> Grads {
    let OpKind::Transpose { perm } = n.kind else {
        return Err("not a transpose".into());
    };
    let mut inv = vec![0i64; perm.len()];
    for (i, p) in perm.iter().enumerate() {
        inv[*p as usize] = i as i64;
    }
    Ok(arrays(vec![Some(n.ct().transpose(&inv))]))
}

#[cfg(test)]
mod transpose_tests {
    use super::*;

    #[test]
    fn transpose_rule() {
        assert_eq!(
            infer_transpose(&f(&[2, 3, 4]), &[2, 0, 1]).unwrap(),
            f(&[4, 2, 3])
        );
        assert_eq!(infer_transpose(&f(&[2, 3]), &[1, 0]).unwrap(), f(&[3, 2]));
        // Negative axes are the typed method's convenience, not the instruction's.
        assert!(infer_transpose(&f(&[2, 3]), &[-1, 0]).is_err());
        assert!(infer_transpose(&f(&[2, 3]), &[0, 0]).is_err());
        assert!(infer_transpose(&f(&[2, 3]), &[0]).is_err());
    }
}

// ---------------------------------------------------------------------------------
// `convert`

/// Convert rule: any array, same dimensions, new element type; complex numbers
/// convert only to complex types. (XLA compiles a complex-to-real convert, but its
/// constant folder segfaults evaluating one, e.g. `floor(convert(c))` of a complex
/// constant `c` (fuzz seed 3469); JAX takes the real part first, as should we once
/// `real` is in the op set.)
pub fn infer_convert(operand: &Shape, to: ElementType) -> Result<Shape, ShapeError> {
    let (from, od) = array_of("convert", operand)?;
    if from.is_complex() && !to.is_complex() {
        return Err(ShapeError::new(
            "convert",
            &[operand],
            ShapeErrorKind::ElementType,
            format!("cannot convert complex {from} to {to}: convert to c64 or c128 only"),
        ));
    }
    let out = Shape::array(to, od);
    super::check_size("convert", &[operand], &out)?;
    Ok(out)
}

pub(crate) fn shape_convert(_: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
    let to = cx.target("convert")?.element_type().ok_or_else(|| {
        ShapeError::new(
            "convert",
            cx.operands,
            ShapeErrorKind::ElementType,
            "converts to an array type",
        )
    })?;
    infer_convert(cx.operands[0], to)
}

pub(crate) fn raise_convert(
    _: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    Ok(OpKind::Convert)
}

impl Op {
    /// Converts each element to `ty` (XLA's `convert`).
    #[track_caller]
    pub fn convert(&self, ty: ElementType) -> Op {
        let loc = Location::caller();
        if self.element_type().ok() == Some(ty) {
            return self.clone();
        }
        self.builder()
            .emit(OpKind::Convert, &[self], Some(Shape::scalar(ty)), loc)
    }
}

/// Convert: back to the operand's type when it is a float (no gradient reaches an
/// integer operand).
pub(crate) fn vjp_convert(n: &Node) -> Grads {
    let g = n.operands[0]
        .element_type()
        .ok()
        .filter(|t| crate::autodiff::differentiable(*t))
        .map(|t| n.ct().convert(t));
    Ok(arrays(vec![g]))
}

// ---------------------------------------------------------------------------------
// `get-tuple-element` (its rule is tested with the tuple rules)

/// Get-tuple-element rule: index in range of a tuple.
pub fn infer_get_tuple_element(operand: &Shape, index: usize) -> Result<Shape, ShapeError> {
    match operand {
        Shape::Tuple(elems) => elems.get(index).cloned().ok_or_else(|| {
            ShapeError::new(
                "get-tuple-element",
                &[operand],
                ShapeErrorKind::Attribute,
                format!("index {index} out of range for a tuple of {}", elems.len()),
            )
        }),
        _ => Err(ShapeError::new(
            "get-tuple-element",
            &[operand],
            ShapeErrorKind::Rank,
            "expects a tuple operand",
        )),
    }
}

pub(crate) fn shape_get_tuple_element(
    kind: &OpKind,
    cx: &InferCx<'_>,
) -> Result<Shape, ShapeError> {
    let OpKind::GetTupleElement { index } = kind else {
        return Err(super::table::not_for("get-tuple-element", kind));
    };
    infer_get_tuple_element(cx.operands[0], *index as usize)
}

pub(crate) fn lower_get_tuple_element(
    kind: &OpKind,
    _: &LowerCx<'_>,
    p: &mut proto::HloInstructionProto,
) {
    if let OpKind::GetTupleElement { index } = kind {
        p.tuple_index = *index as i64;
    }
}

pub(crate) fn raise_get_tuple_element(
    p: &proto::HloInstructionProto,
    _: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let index = u32::try_from(p.tuple_index)
        .map_err(|_| format!("tuple index {} out of range", p.tuple_index))?;
    Ok(OpKind::GetTupleElement { index })
}

pub(crate) fn text_get_tuple_element(kind: &OpKind, _: &TextCx<'_>, out: &mut OpText) {
    if let OpKind::GetTupleElement { index } = kind {
        out.attr("index", index);
    }
}

impl Op {
    /// Element `index` of a tuple.
    #[track_caller]
    pub fn get_tuple_element(&self, index: usize) -> Op {
        let loc = Location::caller();
        let Ok(index) = u32::try_from(index) else {
            return self.builder().fail(
                ShapeError::new(
                    "get-tuple-element",
                    &[],
                    ShapeErrorKind::Attribute,
                    format!("index {index} is out of range"),
                ),
                loc,
            );
        };
        self.builder()
            .emit(OpKind::GetTupleElement { index }, &[self], None, loc)
    }
}

/// Get-tuple-element: the cotangent becomes that element's of the tuple's.
pub(crate) fn vjp_get_tuple_element(n: &Node) -> Grads {
    let OpKind::GetTupleElement { index } = n.kind else {
        return Err("not a get-tuple-element".into());
    };
    let c = match n.cts.first() {
        Some(Some(Ct::Array(c))) => c.clone(),
        Some(Some(Ct::Tuple(_))) => {
            return Err("a get-tuple-element of a nested tuple has no gradient rule".into());
        }
        _ => return Ok(vec![None]),
    };
    let arity = match n.operands[0].shape() {
        Ok(Shape::Tuple(e)) => e.len(),
        _ => 0,
    };
    let mut parts = vec![None; arity];
    if let Some(slot) = parts.get_mut(*index as usize) {
        *slot = Some(c);
    }
    Ok(vec![Some(Ct::Tuple(parts))])
}

#[cfg(test)]
mod tuple_tests {
    use super::*;

    #[test]
    fn tuple_rules() {
        let t = Shape::Tuple(vec![f(&[1]), Shape::of::<i32>(&[])]);
        assert_eq!(
            infer_get_tuple_element(&t, 1).unwrap(),
            Shape::of::<i32>(&[])
        );
        assert!(infer_get_tuple_element(&t, 2).is_err());
        assert!(infer_get_tuple_element(&f(&[]), 0).is_err());
        assert_eq!(
            infer_convert(&f(&[2]), ElementType::S32).unwrap(),
            Shape::of::<i32>(&[2])
        );
        let c = Shape::array(ElementType::C64, &[2]);
        assert!(infer_convert(&c, ElementType::C128).is_ok());
        let e = infer_convert(&c, ElementType::F32).unwrap_err();
        assert_eq!(e.kind, ShapeErrorKind::ElementType);
    }
}

// ---- Batching (vmap) and tangent (jvp) rules of this family's ops: see
// `crate::batching` and `crate::forward`; the op table names them. ----

/// Batching: the batch axis leads the result; the operand's axes move one on.
pub(crate) fn batch_broadcast(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Broadcast { dims } = n.kind else {
        return Err("not a broadcast".into());
    };
    let mut d = vec![0i64];
    d.extend(dims.iter().map(|a| a + 1));
    crate::batching::shifted(n, OpKind::Broadcast { dims: d.into() })
}

/// Batching: the batch axis leads, the rest reshaped as for one example.
pub(crate) fn batch_reshape(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::shifted(n, OpKind::Reshape)
}

/// Batching: the batch axis leads, the permutation moves one on.
pub(crate) fn batch_transpose(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    let OpKind::Transpose { perm } = n.kind else {
        return Err("not a transpose".into());
    };
    let mut p = vec![0i64];
    p.extend(perm.iter().map(|a| a + 1));
    crate::batching::shifted(n, OpKind::Transpose { perm: p.into() })
}

/// Batching: element-wise.
pub(crate) fn batch_convert(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    crate::batching::elementwise(n)
}

/// Batching: the element of the tuple (the pass keeps tuples element by element).
pub(crate) fn batch_get_tuple_element(n: &crate::batching::BatchNode) -> crate::batching::Batched {
    match (n.kind, &n.operands[0]) {
        (OpKind::GetTupleElement { index }, crate::batching::BVal::Tuple(e)) => e
            .get(*index as usize)
            .cloned()
            .map(|v| vec![v])
            .ok_or_else(|| "no such element".to_string()),
        _ => Err("a tuple held as one value".into()),
    }
}

/// Tangent: linear.
pub(crate) fn jvp_broadcast(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear.
pub(crate) fn jvp_reshape(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear.
pub(crate) fn jvp_transpose(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: linear (none to an integer result).
pub(crate) fn jvp_convert(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    crate::forward::linear(n)
}

/// Tangent: the element of the tuple's tangent.
pub(crate) fn jvp_get_tuple_element(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
    match (n.kind, n.tangents.first()) {
        (OpKind::GetTupleElement { index }, Some(Some(crate::autodiff::Ct::Tuple(e)))) => Ok(vec![
            e.get(*index as usize)
                .cloned()
                .flatten()
                .map(crate::autodiff::Ct::Array),
        ]),
        _ => Ok(vec![None]),
    }
}
